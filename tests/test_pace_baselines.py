"""All-reduce policies (commsched.pace.baselines, .dynamic, .policies): the registry's
contract and each policy."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from views_graphs import bn_trace, mlp_trace, random_trace

from commsched.cost import LinearModel, LinkModel, RingAllReduce
from commsched.errors import CommschedError
from commsched.model.traced import load_trace
from commsched.pace.baselines import PolicyContext, fifo_order, layer_order
from commsched.pace.dynamic import bytescheduler_timeline, ddp_buckets, horovod_timeline
from commsched.pace.policies import POLICIES, run_policy
from commsched.pace.sim import Workload

TRACES = Path(__file__).resolve().parents[1] / "data" / "traces"
SMALL_REAL = ["thesis_cnn-train-b8", "thesis_rnn-train-b8"]


def contexts():
    unit = LinearModel(0.05, 0.002)
    for name, t in [("mlp", mlp_trace()), ("bn", bn_trace()),
                    *[(f"random{s}", random_trace(s, 16, 5, 0.3)) for s in range(3)]]:
        yield name, PolicyContext(Workload(t), unit, t, 2, 1000.0,
                                  {"slice_kib": 0.1, "partition_mib": [1e-4, 2e-4],
                                   "threshold_bytes": 200, "cycle_s": 0.5})
    for name in SMALL_REAL:
        t = load_trace(TRACES / f"{name}.json.gz")
        w = Workload(t, compute_scale=0.05)
        ring = RingAllReduce(8, LinkModel(5e-5, 1.25e9))
        yield name, PolicyContext(w, ring, t, 8, 1.25e9, {"slot_ms": 0.2})


CONTEXTS = list(contexts())


@pytest.mark.parametrize("policy", sorted(POLICIES))
@pytest.mark.parametrize("case", CONTEXTS, ids=[c[0] for c in CONTEXTS])
def test_every_policy_gives_a_valid_schedule(policy, case):
    _, ctx = case
    w = ctx.workload
    d, r = run_policy(policy, ctx)  # run_policy validates the schedule (check_schedule)
    d.plan.check_tensors(w.sizes)
    # every gradient byte is all-reduced exactly once
    assert sum(p.bytes for p in r.partitions) == sum(w.sizes.values())
    assert sum(g.bytes for g in d.plan.groups) == sum(w.sizes.values())
    # no partition starts before its tensors are produced or before its release
    for p in r.partitions:
        assert p.start >= max(w.ready[v] for v in d.plan.groups[p.group].names) - 1e-12
        assert p.start >= d.release.get((p.group, p.offset), 0.0) - 1e-12
    # one channel: partitions never overlap
    for a, b in itertools.pairwise(r.partitions):
        assert b.start >= a.end - 1e-9
    assert r.iteration_time >= w.compute_time - 1e-9
    # the plan is named after the policy whose decision it is (ddp_buckets runs DDP's)
    assert POLICIES[d.plan.policy].decide is POLICIES[policy].decide


def test_unknown_policy_is_one_line_error():
    _, ctx = CONTEXTS[0]
    with pytest.raises(CommschedError, match="unknown all-reduce policy 'nope'"):
        run_policy("nope", ctx)


def test_wfbp_is_fifo_one_tensor_each():
    # mlp: w2 ready 7, b1 ready 9, w1 ready 10 (tests/test_sim_allreduce.py)
    w = Workload(mlp_trace())
    assert fifo_order(w) == ["w2", "b1", "w1"]
    # the forward pass reads w1 and b1 first (rd_w1, rd_b1 at 0), then w2 (rd_w2 at 0 too:
    # every read starts at 0 with 0 s), so layer order falls back to creation order
    assert layer_order(w) == ["w1", "b1", "w2"]
    d, _ = run_policy("wfbp", PolicyContext(w, LinearModel(0, 0.01)))
    assert [g.names for g in d.plan.groups] == [("w2",), ("b1",), ("w1",)]
    assert [g.partitions[0].priority for g in d.plan.groups] == [0, 1, 2]


def test_horovod_cycles_by_hand():
    # ready: w2 7, b1 9, w1 10; cycle 2 s from 0, threshold 450 B, 100 B/s + 0.5 s.
    # tick 0,2,4,6 idle; tick 8: w2 (80 B) -> [8, 9.3]; next tick max(10, 9.3) = 10:
    # b1 (40) and w1 (400) ready, 440 <= 450 fused -> [10, 14.9].
    w = Workload(mlp_trace())
    m = LinearModel(0.5, 0.01)
    assert horovod_timeline(w, m, 450, 2.0) == [(["w2"], 8.0), (["b1", "w1"], 10.0)]
    # threshold 420: b1 and w1 in separate buffers of the same cycle
    assert horovod_timeline(w, m, 420, 2.0) == [(["w2"], 8.0), (["b1"], 10.0),
                                                (["w1"], 10.0)]
    # a long all-reduce delays the next cycle: cycle 1 s, w2 takes 8.3 s -> [7, 15.3];
    # next cycle at 15.3 takes b1 and w1
    slow = LinearModel(7.5, 0.01)
    assert horovod_timeline(w, slow, 10_000, 1.0) == [(["w2"], 7.0), (["b1", "w1"], 15.3)]
    ctx = PolicyContext(w, m, options={"threshold_bytes": 450, "cycle_s": 2.0})
    _, r = run_policy("horovod-0.20", ctx)
    assert [(p.group, p.start, p.end) for p in r.partitions] == [
        (0, 8.0, pytest.approx(9.3)), (1, 10.0, pytest.approx(14.9))]
    with pytest.raises(CommschedError, match="cycle time"):
        horovod_timeline(w, m, 450, 0.0)


def test_ddp_buckets_reverse_order_with_small_first_bucket():
    w = Workload(mlp_trace())  # creation order w1 (400), b1 (40), w2 (80)
    # reversed: w2, b1, w1. First cap 100: w2 (80) + b1 (40) = 120 >= 100 closes; w1 alone
    assert ddp_buckets(w, 100, 1000) == [["w2", "b1"], ["w1"]]
    assert ddp_buckets(w, 50, 1000) == [["w2"], ["b1", "w1"]]
    ctx = PolicyContext(w, LinearModel(0, 0.01),
                        options={"first_bucket_bytes": 50, "bucket_bytes": 1000})
    d, r = run_policy("ddp", ctx)
    # bucket 1 (b1 ready 9, w1 ready 10) launches at 10
    assert d.release == {(0, 0): 7.0, (1, 0): 10.0}
    assert [p.start for p in r.partitions] == [7.0, 10.0]


def test_tictac_puts_the_first_needed_tensor_first():
    # bn_trace: the forward pass needs w first (conv), gamma/beta later (bn). Both
    # gradients are produced at 5 (gamma, beta) and 7 (w): TAC orders w before them.
    t = bn_trace()
    w = Workload(t)
    d, _ = run_policy("tictac", PolicyContext(w, LinearModel(0, 0.01), t))
    assert d.plan.groups[0].names == ("w",)
    assert {g.names[0] for g in d.plan.groups[1:]} == {"gamma", "beta"}


def test_p3_slices_with_layer_priority():
    w = Workload(mlp_trace())
    d, r = run_policy("p3", PolicyContext(w, LinearModel(0, 0.01),
                                          options={"slice_kib": 100 / 1024}))
    sizes = {g.names[0]: [p.bytes for p in g.partitions] for g in d.plan.groups}
    assert sizes == {"w1": [100] * 4, "b1": [40], "w2": [80]}
    # w2 (ready 7) runs first; w1 (priority 0) then preempts nothing since b1 is ready at 9
    # and w1 at 10: b1 [9,9.4], w1 slices [10,14]
    assert [(p.tensors, p.start) for p in r.partitions][:3] == [
        (("w2",), 7.0), (("b1",), 9.0), (("w1",), 10.0)]


def test_bytescheduler_credit_window_blocks_preemption():
    # Ready: w2 7, b1 9, w1 10; layer order w1, b1, w2. 100 B/s, partitions of 20 B.
    # Credit 20 B (one partition in flight): w2's 4 partitions [7,7.8]; b1's 2 [9,9.4];
    # w1's 20 partitions [10,14]. Credit 1000 B: the same here, since nothing more urgent
    # arrives while a tensor is in flight.
    w = Workload(mlp_trace())
    m = LinearModel(0.0, 0.01)
    plan, rel = bytescheduler_timeline(w, m, 20, 20)
    r = w.simulate(plan, m, rel)
    assert r.partitions[0].start == 7.0 and r.partitions[-1].end == pytest.approx(14.0)
    # realised order = priority order
    assert [p.rank for p in r.partitions] == sorted(p.rank for p in r.partitions)
    # Slow partitions (2.5 s start-up: 2.7 s per 20 B). Credit of one partition:
    # t=7 hand w2#0 [7, 9.7]; b1 arrives at 9 but the window is full; at 9.7 the most
    # urgent ready partition is b1#0 (layer 1 < w2's 2) [9.7, 12.4]; w1 (layer 0) arrives
    # at 10 and takes every slot from 12.4 on, then b1#1, then w2's other three.
    # A credit of 10,000 B hands over everything on arrival: w2 x4 at 7, b1 x2 at 9, w1
    # x20 at 10, run first-in first-out, so w1 cannot overtake anything.
    slow = LinearModel(2.5, 0.01)
    seq = {}
    for credit in (20, 10_000):
        plan, rel = bytescheduler_timeline(w, slow, 20, credit)
        seq[credit] = [p.tensors[0] for p in w.simulate(plan, slow, rel).partitions]
    assert seq[20] == ["w2", "b1"] + ["w1"] * 20 + ["b1"] + ["w2"] * 3
    assert seq[10_000] == ["w2"] * 4 + ["b1"] * 2 + ["w1"] * 20
    with pytest.raises(CommschedError, match="partition and credit"):
        bytescheduler_timeline(w, m, 0, 20)


def test_bytescheduler_keeps_the_fastest_of_its_grid():
    # the tuned decision is the grid point whose simulated iteration is shortest
    w = Workload(mlp_trace())
    slow = LinearModel(2.5, 0.01)
    grid = {"partition_mib": [20 / 2**20, 100 / 2**20, 400 / 2**20],
            "credit_partitions": [1, 3]}
    d, run = run_policy("bytescheduler", PolicyContext(w, slow, options=grid))
    times = {}
    for mib in grid["partition_mib"]:
        for credit in grid["credit_partitions"]:
            pb = int(mib * 2**20)
            plan, rel = bytescheduler_timeline(w, slow, pb, credit * pb)
            times[(pb, credit * pb)] = w.simulate(plan, slow, rel).iteration_time
    assert run.iteration_time == pytest.approx(min(times.values()))
    assert times[(d.info["partition_bytes"], d.info["credit_bytes"])] == run.iteration_time
    assert len(set(times.values())) > 1  # the grid matters on this instance
