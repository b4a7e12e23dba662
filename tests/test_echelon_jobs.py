"""Job generators, layer profiles and the coupled compute + network simulation
(commsched.echelon.jobs, .profile, .cluster_sim)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from commsched.echelon.arrangement import fsdp as fsdp_arrangement
from commsched.echelon.arrangement import pipeline_timeline
from commsched.echelon.cluster_sim import run_jobs
from commsched.echelon.jobs import PARADIGMS, JobSpec, build_job
from commsched.echelon.profile import LayerProfile, layer_profile
from commsched.errors import CommschedError
from commsched.model.traced import load_trace
from commsched.sim.flow import InvalidFlowSchedule, View, big_switch, priority_max_min, two_tier
from commsched.views.common import optimizer_ops

TRACES = Path(__file__).resolve().parents[1] / "data" / "traces"


def fifo(view: View) -> np.ndarray:
    """Strict priority by release time (ties: flow id): the earliest flow goes first."""
    rel = view.sim.release[view.active]
    klass = np.argsort(np.lexsort((view.active, rel)), kind="stable")
    return priority_max_min(view.links, view.net.capacity, klass)


def toy(fwd: float, bwd: float, params: float, act: float, blocks: int = 2) -> LayerProfile:
    return LayerProfile("toy", (fwd,) * blocks, (bwd,) * blocks, (int(params),) * blocks,
                        (int(act),) * blocks)


def test_gpipe_two_stages_closed_form_fair_and_fifo() -> None:
    """2 stages, 2 micro-batches, 1 s per forward and backward, 2-byte activations over
    1 byte/s links. Fair sharing: a0 alone on [1, 2], then a0 and a1 at 1/2 each, a0 ends
    at 4 and a1 at 5; stage 1 computes on [4, 6], backward of micro-batch 1 on [6, 7] and
    of 0 on [7, 8]; the gradients are released at 7 and 8 and end at 10 and 11 the same
    way; stage 0's backward runs on [10, 11] and [11, 12]. FIFO: a0 on [1, 3], a1 on
    [3, 5], stage 1 forward [3, 4] and [5, 6], gradients [7, 9] and [9, 11]: the same 12 s.
    """
    spec = JobSpec("pp", "gpipe", hosts=(0, 1), micro_batches=2)
    job = build_job(spec, toy(1.0, 1.0, 4, 2))
    net = big_switch(2, rate=1.0)
    fair = run_jobs([job], net, "fair")
    f = fair.flows.sort_values(["release", "group"])
    assert f["finish"].tolist() == pytest.approx([4.0, 5.0, 10.0, 11.0])
    assert fair.iteration_times()["iteration_s"].tolist() == pytest.approx([12.0])
    first = run_jobs([job], net, fifo)
    assert first.flows.sort_values("release")["finish"].tolist() == pytest.approx(
        [3.0, 5.0, 9.0, 11.0])
    assert first.iteration_times()["iteration_s"].tolist() == pytest.approx([12.0])
    # GPipe arrangement (Eq. 6): ideal finish r + j T, T = the consumer's 1 s
    acts = fair.flows[fair.flows["src"] == 0].sort_values("index")
    assert acts["ideal"].tolist() == pytest.approx([1.0, 2.0])
    assert fair.tardiness()["tardiness_s"].tolist() == pytest.approx([3.0, 3.0])


def test_dp_allreduce_two_workers_two_iterations() -> None:
    """2 workers, 2 buckets of 2 bytes, 1 s per forward and per bucket's backward. The
    ring of 2 has one 2-byte flow each way per bucket. Bucket 1 (backward first) is
    all-reduced from 2; bucket 0 joins at 3 and both share: bucket 1 ends at 5, bucket 0
    at 6; the next iteration starts at 6: iterations of 6 s."""
    spec = JobSpec("dp", "dp-allreduce", hosts=(0, 1), blocks=2, iterations=2)
    job = build_job(spec, toy(0.5, 1.0, 2, 1))
    run = run_jobs([job], big_switch(2, rate=1.0), "fair")
    assert run.iteration_times()["iteration_s"].tolist() == pytest.approx([6.0, 6.0])
    assert run.jobs_table()["jct_s"].tolist() == pytest.approx([12.0])
    assert set(run.flows["kind"]) == {"coflow"}
    assert run.flows.groupby("group")["ideal"].nunique().eq(1).all()  # Eq. 5


def test_dp_ps_push_then_pull() -> None:
    """1 worker, 1 server, one bucket of 3 bytes: forward 1 s, backward 1 s, push 3 s,
    pull 3 s (full duplex: different links, but the pull waits for the push)."""
    spec = JobSpec("ps", "dp-ps", hosts=(0,), servers=(1,), blocks=1)
    job = build_job(spec, LayerProfile("toy", (1.0,), (1.0,), (3,), (0,)))
    run = run_jobs([job], big_switch(2, rate=1.0), "fair")
    assert run.iteration_times()["iteration_s"].tolist() == pytest.approx([8.0])


@settings(max_examples=20, deadline=None)
@given(st.sampled_from(["gpipe", "1f1b"]), st.integers(2, 4), st.integers(1, 5),
       st.lists(st.floats(0.1, 2.0), min_size=8, max_size=8))
def test_pipelines_follow_the_ideal_stage_schedule(schedule: str, stages: int, micro: int,
                                                   times: list[float]) -> None:
    """With nothing to send, every computation starts when the infinitely-fast-network
    timeline of commsched.echelon.arrangement says (GPipe and 1F1B stage orders)."""
    fwd, bwd = tuple(times[:stages]), tuple(times[4:4 + stages])
    prof = LayerProfile("r", fwd, bwd, (1,) * stages, (0,) * stages)
    job = build_job(JobSpec("p", schedule, hosts=tuple(range(stages)), micro_batches=micro),
                    prof)
    run = run_jobs([job], big_switch(stages, rate=1.0), "fair")
    tl = pipeline_timeline(stages, micro, fwd, bwd, schedule)
    for label, start in zip(run.tasks["label"], run.tasks["start"], strict=True):
        kind, rest = label[0], label[1:]
        s, j = (int(x) for x in rest.split("."))
        assert start == pytest.approx(tl[(kind, s, j)][0])


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
def test_pipeline_flows_on_a_fast_network_are_not_tardy(schedule: str) -> None:
    """Tiny activations on a fast network arrive when produced: every EchelonFlow's
    tardiness is about 0 (its head flow is not late, none is later) when the stages are
    equal (GPipe: Eq. 6; 1F1B: the derived arrangement)."""
    prof = LayerProfile("r", (1.0,) * 3, (2.0,) * 3, (1,) * 3, (1,) * 3)
    job = build_job(JobSpec("p", schedule, hosts=(0, 1, 2), micro_batches=4), prof)
    run = run_jobs([job], big_switch(3, rate=1e9), "fair")
    assert run.tardiness()["tardiness_s"].abs().max() < 1e-6
    assert set(run.flows["kind"]) == {schedule}


def test_fsdp_offsets_are_eq7_for_equal_blocks() -> None:
    prof = LayerProfile("r", (1.0,) * 3, (2.5,) * 3, (6,) * 3, (0,) * 3)
    job = build_job(JobSpec("f", "fsdp", hosts=(0, 1), blocks=3), prof)
    gathers = [o for o, g in zip(job.flow_offset, job.flow_group, strict=True)
               if job.groups[g].kind == "fsdp"]
    assert gathers[::2] == pytest.approx(fsdp_arrangement(3, 1.0, 2.5).tolist())


def test_tensor_parallel_closed_form() -> None:
    """2 workers, 2 blocks of 2 s forward and backward (1 s per worker), 1-byte activation
    between them: F0 [0, 1], all-reduce (one 1-byte flow each way) [1, 2], F1 [2, 3], B1
    [3, 4], all-reduce of the input gradient [4, 5], B0 [5, 6]."""
    prof = LayerProfile("toy", (2.0, 2.0), (2.0, 2.0), (8, 8), (1, 0))
    job = build_job(JobSpec("tp", "tensor-parallel", hosts=(0, 1), blocks=2), prof)
    run = run_jobs([job], big_switch(2, rate=1.0), "fair")
    assert run.iteration_times()["iteration_s"].tolist() == pytest.approx([6.0])
    assert sorted(run.flows["finish"].tolist()) == pytest.approx([2.0, 2.0, 5.0, 5.0])


def test_fsdp_closed_form_and_eq7_ideal_times() -> None:
    """2 workers, 1 block (forward 1 s, backward 2 s, 2 bytes of parameters): the forward
    all-gather (1 byte per ring flow) [0, 1], the backward one right after [1, 2], F [1, 2],
    B [2, 4], reduce-scatter [4, 5]. Eq. 7: the second all-gather's ideal finish is the
    first's plus the forward time consuming it (1 s): tardiness 1 s, as for the
    reduce-scatter Coflow."""
    prof = LayerProfile("toy", (1.0,), (2.0,), (2,), (0,))
    job = build_job(JobSpec("fsdp", "fsdp", hosts=(0, 1), blocks=1), prof)
    run = run_jobs([job], big_switch(2, rate=1.0), "fair")
    assert run.iteration_times()["iteration_s"].tolist() == pytest.approx([5.0])
    gathers = run.flows[run.flows["kind"] == "fsdp"].sort_values("index")
    assert gathers["ideal"].tolist() == pytest.approx([0.0, 0.0, 1.0, 1.0])
    assert run.tardiness()["tardiness_s"].tolist() == pytest.approx([1.0, 1.0])


def test_missing_flows_pass_their_dependencies_on() -> None:
    """Without activation bytes there is no flow, but stage 1 still waits for stage 0:
    F0 [0, 1], [1, 2]; F1 [1, 2], [2, 3]; B1 [3, 4], [4, 5]; B0 [4, 5], [5, 6]."""
    job = build_job(JobSpec("pp", "gpipe", hosts=(0, 1), micro_batches=2), toy(1, 1, 4, 0))
    run = run_jobs([job], big_switch(2, rate=1.0), "fair")
    assert len(run.flows) == 0
    assert run.iteration_times()["iteration_s"].tolist() == pytest.approx([6.0])
    assert run.tasks["start"].tolist() == pytest.approx([0, 1, 4, 5, 1, 2, 3, 4])


def test_jobs_share_a_two_tier_core() -> None:
    """Two 2-worker all-reduce jobs across two racks under a 2:1 core: each job's ring
    crosses the core both ways; alone a ring flow gets the host rate, together they halve
    the core (capacity 2 hosts x 1 / 2 = 1) and each iteration's all-reduce doubles."""
    net = two_tier(2, 2, rate=1.0, oversubscription=2.0)
    prof = LayerProfile("toy", (1.0,), (1.0,), (2,), (0,))
    a = build_job(JobSpec("a", "dp-allreduce", hosts=(0, 2), blocks=1), prof)
    b = build_job(JobSpec("b", "dp-allreduce", hosts=(1, 3), blocks=1), prof)
    alone = run_jobs([a], net, "fair").iteration_times()["iteration_s"].tolist()
    both = run_jobs([a, b], net, "fair").iteration_times()["iteration_s"].tolist()
    assert alone == pytest.approx([4.0])  # 2 s compute + 2 bytes at 1 byte/s
    assert both == pytest.approx([6.0, 6.0])  # 2 s compute + 2 bytes at 1/2 byte/s


def test_a_scheduler_changes_iteration_times() -> None:
    """The two jobs of the test above under strict priority for job 0 (read from the flows'
    ``job`` column): job 0's all-reduce gets the whole core and ends at 4 s, job 1's waits
    for it and ends at 6 s; fair sharing ends both at 6 s."""
    net = two_tier(2, 2, rate=1.0, oversubscription=2.0)
    prof = LayerProfile("toy", (1.0,), (1.0,), (2,), (0,))
    jobs = [build_job(JobSpec("a", "dp-allreduce", hosts=(0, 2), blocks=1), prof),
            build_job(JobSpec("b", "dp-allreduce", hosts=(1, 3), blocks=1), prof)]

    def first_job_first(view: View) -> np.ndarray:
        return priority_max_min(view.links, view.net.capacity,
                                view.sim.meta["job"][view.active])

    run = run_jobs(jobs, net, first_job_first)
    assert run.jobs_table()["jct_s"].tolist() == pytest.approx([4.0, 6.0])
    assert run_jobs(jobs, net, "fair").jobs_table()["jct_s"].tolist() == pytest.approx([6.0, 6.0])


@pytest.mark.parametrize(("scheduler", "end"), [("echelon-edf-total", 8.0), ("fair", 8.5),
                                                ("sebf", 10.0)])
def test_fig2_pipeline_in_the_coupled_simulation(scheduler: str, end: float) -> None:
    """The paper's Fig. 2 as a job: 3 micro-batches, 1 s forward per stage, 2-byte
    activations over a 1 byte/s link, released at 1, 2, 3 s. Earliest ideal finish first
    sends them one by one (done at 3, 5, 7): the consumer computes on [3, 4], [5, 6],
    [7, 8]. Fair sharing: a0 alone on [1, 2], a0 and a1 at 1/2 on [2, 3], all three at
    1/3 until a0 ends at 4.5, then a1 and a2 at 1/2: a1 ends at 6.5, a2 at 7; the consumer
    runs [4.5, 5.5], [6.5, 7.5], [7.5, 8.5]. Varys' MADD treats the EchelonFlow as one
    Coflow and finishes all three at 7: the consumer ends at 10, later than fair sharing."""
    prof = LayerProfile("fig2", (1.0, 1.0), (0.0, 0.0), (1, 1), (2, 0))
    job = build_job(JobSpec("pp", "gpipe", hosts=(0, 1), micro_batches=3), prof)
    run = run_jobs([job], big_switch(2, rate=1.0), scheduler)
    last = run.tasks.set_index("label").loc["F1.2", "finish"]
    assert last == pytest.approx(end)


@pytest.mark.parametrize("paradigm", PARADIGMS)
def test_every_paradigm_runs_validated_and_deterministic(paradigm: str) -> None:
    prof = LayerProfile("toy", (0.2, 0.3, 0.1, 0.4), (0.4, 0.5, 0.2, 0.6),
                        (40, 10, 30, 20), (8, 4, 6, 0))
    servers = (4,) if paradigm == "dp-ps" else ()
    spec = JobSpec("j", paradigm, hosts=(0, 1, 2, 3), servers=servers, micro_batches=3,
                   blocks=4, iterations=2)
    net = two_tier(2, 3, rate=50.0, oversubscription=2.0)
    one = run_jobs([build_job(spec, prof)], net, "fair")  # check=True: validated
    two = run_jobs([build_job(spec, prof)], net, "fair")
    assert one.tasks.equals(two.tasks) and one.flows.equals(two.flows)
    _assert_consistent(one)


def _assert_consistent(run) -> None:  # type: ignore[no-untyped-def]
    t = run.tasks
    assert t["finish"].notna().all() and run.flows["finish"].notna().all()
    for _, h in t.sort_values(["start", "finish"]).groupby("host"):  # one task at a time per host
        assert (h["start"].to_numpy()[1:] >= h["finish"].to_numpy()[:-1] - 1e-9).all()
    assert (run.flows["finish"] > run.flows["release"]).all()
    assert (run.flows["ideal"] >= run.flows.groupby("group")["release"].transform("min")
            - 1e-12).all()


@settings(max_examples=25, deadline=None)
@given(st.sampled_from(PARADIGMS), st.integers(2, 3), st.integers(1, 3),
       st.lists(st.floats(0.0, 2.0), min_size=3, max_size=3),
       st.lists(st.integers(0, 50), min_size=3, max_size=3), st.floats(0.0, 3.0))
def test_random_jobs_finish_and_respect_dependencies(
        paradigm: str, workers: int, micro: int, times: list[float], sizes: list[int],
        arrival: float) -> None:
    prof = LayerProfile("r", tuple(times), tuple(t / 2 for t in times), tuple(sizes),
                        tuple(sizes))
    servers = (workers,) if paradigm == "dp-ps" else ()
    spec = JobSpec("j", paradigm, hosts=tuple(range(workers)), servers=servers,
                   micro_batches=micro, blocks=1 if paradigm in ("gpipe", "1f1b") else 3,
                   arrival=arrival)
    job = build_job(spec, prof)
    run = run_jobs([job], big_switch(workers + 1, rate=10.0), "fair")
    _assert_consistent(run)
    assert (run.tasks["start"] >= arrival).all()
    for node, preds in job.preds.items():  # every dependency holds
        start = (run.tasks.loc[node[1], "start"] if node[0] == "t"
                 else run.flows.loc[node[1], "release"])
        for p in preds:
            end = run.tasks.loc[p[1], "finish"] if p[0] == "t" else run.flows.loc[p[1], "finish"]
            assert start >= end - 1e-9


def test_validator_runs_on_every_run() -> None:
    """A policy that oversubscribes a link is caught by check_flow_schedule."""
    job = build_job(JobSpec("pp", "gpipe", hosts=(0, 1), micro_batches=2), toy(1, 1, 4, 2))

    def greedy(view: View) -> np.ndarray:
        return np.ones(len(view.active))

    with pytest.raises(InvalidFlowSchedule, match="capacity"):
        run_jobs([job], big_switch(2, rate=1.0), greedy)


def test_bad_jobs_are_one_line_errors() -> None:
    prof = toy(1, 1, 4, 2)
    with pytest.raises(CommschedError, match="unknown paradigm"):
        build_job(JobSpec("x", "zero-bubble", hosts=(0, 1)), prof)
    with pytest.raises(CommschedError, match="needs at least one server"):
        build_job(JobSpec("x", "dp-ps", hosts=(0, 1)), prof)
    with pytest.raises(CommschedError, match="3 blocks but"):
        build_job(JobSpec("x", "gpipe", hosts=(0, 1, 2)), prof)
    a = build_job(JobSpec("a", "dp-allreduce", hosts=(0, 1), blocks=1), prof)
    b = build_job(JobSpec("b", "dp-allreduce", hosts=(1, 2), blocks=1), prof)
    with pytest.raises(CommschedError, match="share host 1"):
        run_jobs([a, b], big_switch(3, rate=1.0), "fair")
    with pytest.raises(CommschedError, match=r"not in 0\.\.1"):
        run_jobs([b], big_switch(2, rate=1.0), "fair")


def test_layer_profile_of_a_traced_model_keeps_totals() -> None:
    g = load_trace(TRACES / "vgg16-train-b2.json.gz")
    prof = layer_profile(g, 6)
    dropped = optimizer_ops(g)
    kept = [a for n, a in g.nodes(data=True) if n not in dropped]
    assert prof.blocks == 6
    assert sum(prof.fwd) + sum(prof.bwd) == pytest.approx(sum(a["duration"] for a in kept))
    trainable = sum(v["bytes"] for v in g.graph["variables"].values() if v["trainable"])
    assert sum(prof.params) == trainable
    # forward blocks of about equal time; VGG's activations shrink with depth
    assert max(prof.fwd) < 2.5 * min(prof.fwd)
    assert prof.act[0] > prof.act[-2] > 0 and prof.act[-1] == 0
    # the fully connected layers (the last block) dominate VGG's backward
    assert prof.bwd[-1] == max(prof.bwd)
    # every block with parameters has backward work (gradient ops found by their names)
    tr = layer_profile(load_trace(TRACES / "transformer-train-b4.json.gz"), 8)
    assert all(b > 0 for b, p in zip(tr.bwd, tr.params, strict=True) if p > 0)
    merged = prof.merged(3)
    assert sum(merged.fwd) == pytest.approx(sum(prof.fwd))
    assert sum(merged.params) == sum(prof.params)
