"""The EchelonFlow live predictor's models (issue 23, item 5), each on small synthetic
jobs and flow records: collectives on one communication thread
(``JobSpec.serial_collectives``), a flow's latency after its last byte
(``JobGraph.flow_latency``), the kernel's FIFO for policy ``none`` (:func:`kernel_fifo`),
the controller's delayed htb enforcement (:class:`EnforcedPolicy`), a sender's lanes
(:func:`send_lanes`, :func:`limit_lanes`), the per-message
overhead fitted from flow records (:func:`fit_overheads`) and the leave-one-job-out fit and
prediction (:func:`fit_held_out`, :func:`predict_held_out`: the held-out job's records never
enter them)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from commsched.echelon.cluster_sim import run_jobs
from commsched.echelon.experiments.live import (
    Params,
    fit_held_out,
    fit_overheads,
    kernel_fifo,
    limit_lanes,
    predict,
    predict_held_out,
    start_offsets,
)
from commsched.echelon.jobs import JobGraph, JobSpec, build_job
from commsched.echelon.live.jobs import SENDERS, LiveJob, send_lanes, simulator_profile
from commsched.echelon.live.runner import JobPlacement
from commsched.echelon.live.tc import FLOOR_SHARE, EnforcedPolicy
from commsched.echelon.live.topology import network
from commsched.echelon.profile import LayerProfile
from commsched.errors import CommschedError
from commsched.sim.flow import big_switch, simulate


def _dp(serial: bool) -> pd.DataFrame:
    prof = LayerProfile("toy", fwd=(0.0, 0.0), bwd=(0.0, 0.0), params=(3.0, 3.0),
                        act=(1, 0))
    job = build_job(JobSpec("dp", "dp-allreduce", hosts=(0, 1, 2), blocks=2,
                            serial_collectives=serial), prof)
    fl = run_jobs([job], big_switch(3, 1.0), "fair").flows
    fl["label"] = [job.groups[g].label for g in fl["group"]]
    return fl


def test_serial_collectives_wait_for_the_previous_one() -> None:
    # two buckets of 3 bytes: every neighbour flow carries 2 (W-1)/W * 3 = 4 bytes
    both = _dp(serial=False)
    assert set(both["release"]) == {0.0} and both["finish"].max() == pytest.approx(8.0)
    one = _dp(serial=True)  # allreduce1 first (backward order), then allreduce0
    first, second = one[one["label"] == "allreduce1"], one[one["label"] == "allreduce0"]
    assert np.allclose(first["release"], 0.0) and np.allclose(first["finish"], 4.0)
    assert np.allclose(second["release"], 4.0) and np.allclose(second["finish"], 8.0)


def test_serial_reduce_scatters_wait_for_the_previous_one() -> None:
    prof = LayerProfile("toy", fwd=(1.0, 1.0), bwd=(1.0, 1.0), params=(3.0, 3.0),
                        act=(1, 0))
    for serial in (False, True):
        job = build_job(JobSpec("z", "fsdp", hosts=(0, 1, 2), blocks=2,
                                serial_collectives=serial), prof)
        rs = {job.groups[g].label: [("f", i) for i, gg in enumerate(job.flow_group) if gg == g]
              for g in range(len(job.groups))}
        waits = set(job.preds[rs["reduce-scatter0"][0]])
        # reduce-scatter1 (the backward's first) runs first; serial: 0 waits for its flows
        assert (set(rs["reduce-scatter1"]) <= waits) == serial
        assert not set(rs["allgather"]) & set(job.preds[rs["reduce-scatter1"][0]])


def test_live_jobs_are_simulated_with_serial_collectives() -> None:
    assert LiveJob("d", "dp-allreduce").spec().serial_collectives


def _two_jobs(latency: float) -> tuple[float, float, float]:
    """Job a: a 1 s task on host 0, its 2-byte flow to host 1 (rack 1), a task there;
    job b: a 4-byte flow 2 -> 3 (racks 0 -> 1) from t=0. They share the 1 B/s core.
    Returns a's flow finish, a's consumer's start and b's flow finish."""
    a = JobGraph(JobSpec("a", "gpipe", hosts=(0, 1)), "toy")
    t0 = a.task(0, 1.0, 0, "F0.0")
    grp = a.group("gpipe", "act0")
    f = a.flow(0, 1, 2.0, 0, grp, 0.0, after=[t0])
    a.task(1, 1.0, 0, "F1.0", after=f)
    a.flow_latency = [latency]
    b = JobGraph(JobSpec("b", "gpipe", hosts=(2, 3)), "toy")
    b.flow(2, 3, 4.0, 0, b.group("gpipe", "act0"), 0.0, after=[])
    run = run_jobs([a, b], network([0, 1, 0, 1], 100.0, 1.0), "fair")
    fl, ts = run.flows, run.tasks
    return (float(fl[fl["job"] == 0]["finish"].iloc[0]), float(ts["start"].iloc[1]),
            float(fl[fl["job"] == 1]["finish"].iloc[0]))


def test_flow_latency_delays_consumers_and_frees_the_link() -> None:
    # b alone until t=1 (3 bytes left), then both at 0.5 B/s: a's flow ends at 5, b's at 6
    assert _two_jobs(0.0) == pytest.approx((5.0, 5.0, 6.0))
    # the consumer sees a's flow 0.5 s later; neither flow's bytes move slower
    assert _two_jobs(0.5) == pytest.approx((5.0, 5.5, 6.0))


def test_kernel_fifo_shares_a_link_by_message_bytes() -> None:
    # one 10 B/s link: a 1-message flow of 1 B and a 4-message flow of 16 B (4 B each)
    r = simulate(big_switch(2, 10.0), [0, 0], [1, 1], [1.0, 16.0], [0.0, 0.0],
                 kernel_fifo(np.array([1.0, 4.0])), group=[0, 1])
    assert r.finish[0] == pytest.approx(0.5)  # 1 B at 2 B/s: it waits behind 4 B
    fair = simulate(big_switch(2, 10.0), [0, 0], [1, 1], [1.0, 16.0], [0.0, 0.0],
                    kernel_fifo(np.array([1.0, 1.0])), group=[0, 1])
    assert fair.finish[0] == pytest.approx(0.2)  # equal weights: per-flow fairness
    assert r.finish[1] == pytest.approx(1.7) and fair.finish[1] == pytest.approx(1.7)


def _strict(view: object) -> np.ndarray:
    n = len(view.active)  # type: ignore[attr-defined]
    return np.where(np.arange(n) == 0, 100.0, 0.0)


def test_enforced_policy_without_delay_follows_htb_classes() -> None:
    net = network([0, 1], 1000.0, 100.0)  # core links 4 and 5
    r = simulate(net, [0, 0], [1, 1], [90.0, 10.0], [0.0, 0.0],
                 EnforcedPolicy(_strict, 0.0, [4, 5]))
    floor = 100.0 * FLOOR_SHARE
    # the first flow: its guarantee and all the excess; the second keeps the floor rate
    assert r.finish[0] == pytest.approx(90.0 / (100.0 - floor))
    assert r.finish[1] > r.finish[0]
    with pytest.raises(CommschedError, match="delay"):
        EnforcedPolicy(_strict, -1.0, [4, 5])


def test_enforced_policy_delay_lets_a_new_flow_share_until_the_update() -> None:
    net = network([0, 1], 1000.0, 100.0)
    late = simulate(net, [0, 0], [1, 1], [300.0, 50.0], [0.0, 1.0],
                    EnforcedPolicy(_strict, 0.5, [4, 5]))
    now = simulate(net, [0, 0], [1, 1], [300.0, 50.0], [0.0, 1.0],
                   EnforcedPolicy(_strict, 0.0, [4, 5]))
    # for 0.5 s the newcomer is an idle class at prio 0: it shares the excess, so the
    # first flow ends later than with an immediate update
    assert late.finish[0] > now.finish[0]
    # a flow that does not cross the core is not shaped
    local = simulate(network([0, 0], 10.0, 1.0), [0], [1], [10.0], [0.0],
                     EnforcedPolicy(_strict, 0.5, [4, 5]))
    assert local.finish[0] == pytest.approx(1.0)


def _flows(extra: float) -> pd.DataFrame:
    """Records of a 3-process DP job on racks (1, 0, 1): each flow takes its bytes at
    the path rate plus ``extra`` per message (4 messages per all-reduce flow)."""
    rows = []
    for k in range(20):
        for src, dst in ((0, 1), (1, 2), (2, 0)):
            cross = src != 2
            rate = 100.0 if cross else 1000.0
            rows.append({"job": "dp", "group": f"allreduce{k % 2}", "src": src, "dst": dst,
                         "bytes": 400.0, "start": 0.0,
                         "finish": 400.0 / rate + 4 * extra + 0.01 * k})
    return pd.DataFrame(rows)


def test_fit_overheads_recovers_the_per_message_cost() -> None:
    jp = [JobPlacement(LiveJob("dp", "dp-allreduce"), (1, 0, 1))]
    got = fit_overheads(_flows(0.25), jp, 100.0, 1000.0, quantile=0.0)
    assert got["dp"] == pytest.approx(0.25)
    assert fit_overheads(_flows(0.0), jp, 100.0, 1000.0, quantile=0.0)["dp"] == 0.0


def test_predict_models_each_policy_back_end() -> None:
    jobs = [JobPlacement(LiveJob("pp", "gpipe", width=64, blocks=3, batch=8, micro_batches=2,
                                 iterations=2), (0, 1, 0)),
            JobPlacement(LiveJob("dp", "dp-allreduce", width=64, blocks=2, batch=6,
                                 iterations=2), (1, 0, 1))]
    prof = {jp.job.name: simulator_profile(jp.job, [1e-3] * (3 if jp.job.pipeline else 2),
                                           [2e-3] * (3 if jp.job.pipeline else 2))
            for jp in jobs}
    jct = {}
    for policy, update in (("none", None), ("fair", None), ("sebf", None), ("sebf", 0.01)):
        jct[(policy, update)] = predict(jobs, prof, 1e5, 1e6, policy, {"pp": 1e-3},
                                        update).jobs_table().set_index("name")["jct_s"]
    # the FIFO makes the pipeline's small messages wait behind the all-reduce's
    assert jct[("none", None)]["pp"] > jct[("fair", None)]["pp"]
    # a late controller cannot give the pipeline its priority at once
    assert jct[("sebf", 0.01)]["pp"] > jct[("sebf", None)]["pp"]


def test_send_lanes_leave_the_backward_sends_what_the_forward_ones_did_not_take() -> None:
    job = LiveJob("p", "gpipe", world=4, blocks=4, micro_batches=8)
    # every stage's forward sends take SENDERS lanes; the middle stages' gradients get 7 - 4
    assert send_lanes(job, 7) == {(1, 0): 7 - SENDERS, (2, 1): 7 - SENDERS}
    assert send_lanes(job, 2 * SENDERS) == {}
    assert send_lanes(LiveJob("p", "gpipe", world=3, blocks=3, micro_batches=2), 3) == {(1, 0): 1}
    assert send_lanes(LiveJob("d", "dp-allreduce"), 1) == {}
    assert send_lanes(LiveJob("p", "1f1b", world=3, blocks=3, micro_batches=4), 3) == {}


def test_limit_lanes_serialises_the_flows_beyond_the_lanes() -> None:
    prof = LayerProfile("toy", fwd=(0.0, 0.0), bwd=(0.0, 0.0), params=(4, 4), act=(1.0, 0))

    def act_flows(lanes: int | None) -> pd.DataFrame:
        g = build_job(JobSpec("p", "gpipe", hosts=(0, 1), micro_batches=4, iterations=2), prof)
        if lanes is not None:
            limit_lanes(g, {(0, 1): lanes})
        fl = run_jobs([g], big_switch(2, 1.0), "fair").flows
        return fl[fl["src"] == 0].sort_values(["iteration", "release"])
    free = act_flows(None)
    assert free.groupby("iteration")["release"].nunique().tolist() == [1, 1]  # all at once
    one = act_flows(1)
    for _, f in one.groupby("iteration"):  # one lane: each waits for the one before
        assert np.allclose(f["release"].to_numpy()[1:], f["finish"].to_numpy()[:-1])
        assert f["finish"].diff().dropna().tolist() == pytest.approx([1.0] * 3)
    two = act_flows(2)
    first = two[two["iteration"] == 0]
    assert (first["release"] == 0.0).sum() == 2
    with pytest.raises(CommschedError, match="no lane"):
        limit_lanes(build_job(JobSpec("p", "gpipe", hosts=(0, 1)), prof), {(0, 1): 0})


def test_predict_starts_each_job_at_its_offset() -> None:
    job = LiveJob("z", "dp-allreduce", width=16, blocks=2, batch=6, iterations=2)
    jobs = [JobPlacement(job, (0, 1, 0))]
    prof = {"z": simulator_profile(job, [1e-3, 1e-3], [1e-3, 1e-3])}
    at0 = predict(jobs, prof, 1e5, 1e6, "fair", {"z": 0.0}, 0.0).jobs_table()
    late = predict(jobs, prof, 1e5, 1e6, "fair", {"z": 0.0}, 0.0, starts={"z": 0.5}).jobs_table()
    # alone, a job that starts 0.5 s later ends 0.5 s later: its JCT after the go
    assert late.loc[0, "arrival_s"] == 0.5
    assert late.loc[0, "jct_s"] == pytest.approx(at0.loc[0, "jct_s"])


def test_enforced_policy_leaks_a_packet_per_message_boundary() -> None:
    net = network([0, 1], 1000.0, 100.0)
    floor = 100.0 * FLOOR_SHARE
    msg = np.array([100.0, 10.0])  # the favoured flow (group 0) sends 100-byte messages

    def run(leak: float) -> np.ndarray:
        return simulate(net, [0, 0], [1, 1], [300.0, 1000.0], [0.0, 0.0],
                        EnforcedPolicy(_strict, 0.0, [4, 5], msg, leak),
                        group=[0, 1]).finish
    top = 100.0 - floor  # its guarantee and the excess
    assert run(0.0)[0] == pytest.approx(300.0 / top)
    # of every 100 + 100 bytes on the link, 100 are its own: half its rate goes to the other
    assert run(100.0)[0] == pytest.approx(300.0 / (top * 100.0 / 200.0))
    with pytest.raises(CommschedError, match="leak"):
        EnforcedPolicy(_strict, 0.0, [4, 5], msg, -1.0)


def test_predict_takes_the_offsets_the_live_flows_carried() -> None:
    job = LiveJob("z", "fsdp", width=16, blocks=2, batch=6, iterations=1)
    jobs = [JobPlacement(job, (0, 1, 0))]
    traced = {"z": simulator_profile(job, [1e-3, 1e-3], [1e-3, 1e-3])}
    arranged = {"z": simulator_profile(job, [0.5, 0.5], [0.5, 0.5])}
    run = predict(jobs, traced, 1e5, 1e6, "eiff", arranged=arranged)
    ag = run.flows[run.flows["kind"] == "fsdp"]
    g = build_job(job.spec(), arranged["z"])
    offsets = sorted(o for o, k in zip(g.flow_offset, g.flow_group, strict=True)
                     if g.groups[k].kind == "fsdp")
    assert max(offsets) == pytest.approx(1.5)  # fwd0, fwd1, bwd1 of the arranged profile
    # ideal = the group's first release + the offsets the live flows carried
    assert np.allclose(np.sort(ag["ideal"] - ag["release"].min()), offsets)
    # while the compute times still come from the traced profile
    assert (run.tasks["finish"] - run.tasks["start"]).max() == pytest.approx(1e-3)


# Three small jobs of the three paradigms, as the live run places them.
LOJO_JOBS = (
    JobPlacement(LiveJob("pp", "gpipe", width=32, blocks=3, batch=8, micro_batches=2,
                         iterations=2), (0, 1, 0)),
    JobPlacement(LiveJob("fs", "fsdp", width=32, blocks=2, batch=6, iterations=2), (0, 1, 0)),
    JobPlacement(LiveJob("dp", "dp-allreduce", width=32, blocks=2, batch=6, iterations=2),
                 (1, 0, 1)))
CORE, HOST = 1e5, 1e6


def _alone() -> dict[str, LayerProfile]:
    """Per job a profile "measured before the run" (distinct times per block)."""
    out = {}
    for k, jp in enumerate(LOJO_JOBS):
        n = jp.job.world if jp.job.pipeline else jp.job.blocks
        out[jp.job.name] = simulator_profile(jp.job, [1e-3 * (k + b + 1) for b in range(n)],
                                             [2e-3 * (k + b + 1) for b in range(n)])
    return out


def _records(scale: dict[str, float], extra: dict[str, float], latency: dict[str, float],
             seed: int = 0, start: dict[str, float] | None = None) -> dict[str, pd.DataFrame]:
    """:func:`analyse`-like tables of the three jobs: every computation takes ``scale[job]``
    times its profile before the run, every flow its bytes at the path rate plus
    ``extra[job]`` per message (and a random wait >= 0: contention), every controlled
    flow event ``latency[job]`` (policy ``none``'s events: 9 s, never counted); in each
    of 3 phases (repeats) a job's first computation starts ``start[job]`` (default 0.05 s)
    times 1, 2, 3 after the go, its flows at 1 s."""
    rng = np.random.default_rng(seed)
    start = start or {jp.job.name: 0.05 for jp in LOJO_JOBS}
    alone = _alone()
    tasks, flows, ups = [], [], []
    for jp in LOJO_JOBS:
        j, p = jp.job, alone[jp.job.name]
        s = scale[j.name]
        if j.pipeline:
            labels = [(f"F{b}.{m}", p.fwd[b]) for b in range(j.world)
                      for m in range(j.micro_batches)]
            labels += [(f"B{b}.{m}", p.bwd[b]) for b in range(j.world)
                       for m in range(j.micro_batches)]
        else:
            labels = ([("fwd", sum(p.fwd))] if j.paradigm == "dp-allreduce"
                      else [(f"fwd{b}", x) for b, x in enumerate(p.fwd)])
            labels += [(f"bwd{b}", x) for b, x in enumerate(p.bwd)]
        for rep in range(3):
            tasks += [{"job": j.name, "repeat": rep, "policy": "sebf", "label": lab,
                       "start_s": start[j.name] * (rep + 1) + i, "duration_s": s * x}
                      for i, (lab, x) in enumerate(labels)]
        group = {"gpipe": "act0", "fsdp": "allgather", "dp-allreduce": "allreduce0"}[j.paradigm]
        n = {"gpipe": 1, "fsdp": 2, "dp-allreduce": 4}[j.paradigm]
        for k in range(30):
            src, dst = k % 3, (k + 1) % 3
            rate = CORE if jp.racks[src] != jp.racks[dst] else HOST
            wait = 0.0 if k < 3 else float(rng.uniform(0.0, 0.05))
            flows.append({"job": j.name, "repeat": k % 3, "policy": "sebf", "group": group,
                          "src": src, "dst": dst,
                          "bytes": 500.0, "start": 1.0,
                          "finish": 1.0 + 500.0 / rate + n * extra[j.name] + wait})
            for policy, lat in (("none", 9.0), ("sebf", latency[j.name])):
                ups.append({"policy": policy, "flow": f"{j.name}/0/{k}/{group}/0",
                            "latency_s": lat})
    return {"tasks": pd.DataFrame(tasks), "flows": pd.DataFrame(flows),
            "updates": pd.DataFrame(ups)}


def test_fit_held_out_recovers_the_other_jobs_parameters() -> None:
    t = _records({"pp": 2.0, "fs": 3.0, "dp": 5.0}, {"pp": 0.001, "fs": 0.01, "dp": 0.02},
                 {"pp": 1e-4, "fs": 0.004, "dp": 0.008},
                 start={"pp": 0.001, "fs": 0.02, "dp": 0.03})
    fit = fit_held_out(t, LOJO_JOBS, "pp", _alone(), CORE, HOST, quantile=0.0)
    # the others' scales 3 and 5 (median 4), their lowest per-message cost (10 ms), their
    # updates (as many of 4 as of 8 ms), the median of their starts (20, 40, 60 and 30,
    # 60, 90 ms): nothing of pp's 2x, 1 ms, 0.1 ms or 1-3 ms, each of which would move it
    assert fit.compute_scale == pytest.approx(4.0)
    assert fit.message_overhead_s == pytest.approx(0.01)
    assert fit.update_s == pytest.approx(0.006)
    assert fit.start_s == pytest.approx(0.05)
    # in-sample, each job's own median start
    assert start_offsets(t) == pytest.approx({"pp": 0.002, "fs": 0.04, "dp": 0.06})
    fit = fit_held_out(t, LOJO_JOBS, "dp", _alone(), CORE, HOST, quantile=0.0)
    assert fit.compute_scale == pytest.approx(2.5)
    assert fit.message_overhead_s == pytest.approx(0.001)
    assert fit.update_s == pytest.approx(0.00205)
    with pytest.raises(CommschedError, match="no job 'zz'"):
        fit_held_out(t, LOJO_JOBS, "zz", _alone(), CORE, HOST)


def test_held_out_job_records_never_enter_its_prediction() -> None:
    params = Params(True, LOJO_JOBS, ("none", "sebf"), repeats=1)
    base = {"pp": 2.0, "fs": 3.0, "dp": 2.5}
    t = _records(base, {"pp": 0.02, "fs": 0.01, "dp": 0.005},
                 {"pp": 0.004, "fs": 0.004, "dp": 0.008})
    # fs's records changed every way that would move a fit on them: its compute, its
    # flows' cost per message (below the others'), its flow events, its start
    u = _records({**base, "fs": 9.0}, {"pp": 0.02, "fs": 0.0, "dp": 0.005},
                 {"pp": 0.004, "fs": 0.3, "dp": 0.008}, seed=1,
                 start={"pp": 0.05, "fs": 0.3, "dp": 0.05})
    for k, col in (("tasks", "job"), ("flows", "job"), ("updates", "flow")):
        of_fs = u[k][col].astype(str).str.split("/").str[0] == "fs"
        keep = t[k][col].astype(str).str.split("/").str[0] != "fs"
        u[k] = pd.concat([u[k][of_fs], t[k][keep]])  # the others' records as before
    a = predict_held_out(params, t, CORE, HOST, _alone()).set_index(["job", "policy"])
    b = predict_held_out(params, u, CORE, HOST, _alone()).set_index(["job", "policy"])
    col = "predicted_lojo_jct_s"
    assert np.array_equal(a.loc["fs", col].to_numpy(), b.loc["fs", col].to_numpy())
    # ... while the jobs fitted on fs's records (and simulated beside its traced compute)
    # see the change
    for name in ("pp", "dp"):
        for c in ("lojo_compute_scale", "lojo_message_overhead_s", "lojo_update_latency_s"):
            assert (a.loc[name, c] != b.loc[name, c]).all()
        assert not np.allclose(a.loc[name, col], b.loc[name, col])
