"""The all-reduce plan simulator (commsched.pace.sim): semantics, ready times, release."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from views_graphs import bn_trace, mlp_trace, random_trace

from commsched.cost import LinearModel
from commsched.errors import CommschedError
from commsched.model.graph import compile_graph
from commsched.pace.plan import Group, Partition, Plan, PlanError
from commsched.pace.plangraph import partition_id
from commsched.pace.sim import Workload, simulate_plan

UNIT = LinearModel(0.0, 0.01)  # 100 bytes per second, no start-up


def one_per_tensor(w: Workload, policy: str = "fifo") -> Plan:
    order = sorted(w.sizes, key=lambda v: w.ready[v])
    return Plan(policy, tuple(Group(((v, w.sizes[v]),), (Partition(0, w.sizes[v], k),))
                              for k, v in enumerate(order)))


def test_mlp_fifo_by_hand():
    # mlp_trace: forward rd_* (0), mm1 [0,2], add1 [2,3], mm2 [3,5], loss [5,6];
    # backward g_mm2 [6,7] (w2 ready 7), g_h [7,8], g_b1 [8,9] (b1 ready 9), g_w1 [9,10]
    # (w1 ready 10). FIFO on 100 B/s: w2 (80 B) [7,7.8], b1 (40 B) [9,9.4], w1 (400 B)
    # [10,14]. Next forward: mm1 needs w1 -> [14,16], add1 [16,17], mm2 [17,19],
    # loss [19,20]. Forward alone: 6 s. Iteration time 20 - 6 = 14.
    w = Workload(mlp_trace())
    assert w.ready == {"w1": 10.0, "b1": 9.0, "w2": 7.0}
    assert w.forward_time == 6.0 and w.compute_time == 10.0
    r = w.simulate(one_per_tensor(w), UNIT)
    got = {p.tensors: (p.start, p.end) for p in r.partitions}
    assert got == {("w2",): (7.0, 7.8), ("b1",): (9.0, 9.4), ("w1",): (10.0, 14.0)}
    assert (r.makespan, r.iteration_time) == (20.0, 14.0)
    assert r.comm_time == pytest.approx(5.2)


def test_preemption_at_partition_boundaries():
    # bn_trace: g_bn [4,5] (gamma, beta ready 5), g_conv [5,7] (w ready 7). Forward alone 4.
    # Group 0 = w split in two (0-200, priority 0 and 200-400, priority 5); group 1 =
    # gamma+beta (80 B), priority 1. The channel: beta/gamma [5,5.8]; w[0:200] [7,9];
    # w[200:400] [9,11]. Next: rd_w waits for both halves of w -> conv [11,13], bn, loss 15.
    w = Workload(bn_trace())
    plan = Plan("t", (Group((("w", 400),), (Partition(0, 200, 0), Partition(200, 200, 5))),
                      Group((("gamma", 40), ("beta", 40)), (Partition(0, 80, 1),))))
    r = w.simulate(plan, UNIT)
    assert [(p.group, p.offset, p.start, p.end) for p in r.partitions] == [
        (1, 0, 5.0, pytest.approx(5.8)), (0, 0, 7.0, 9.0), (0, 200, 9.0, 11.0)]
    assert [p.rank for p in r.partitions] == [1, 0, 2]
    assert r.makespan == 15.0 and r.iteration_time == 11.0


def test_higher_priority_partition_runs_between_partitions_of_earlier_group():
    # Two groups ready at different times: group A (w1, ready 10) split into 4 partitions
    # of 100 B, group B (w2, ready 7) with priority between A's first and second.
    w = Workload(mlp_trace())
    plan = Plan("t", (
        Group((("w1", 400),), tuple(Partition(100 * k, 100, 2 * k) for k in range(4))),
        Group((("w2", 80),), (Partition(0, 80, 1),)),
        Group((("b1", 40),), (Partition(0, 40, 9),)),
    ))
    # Make w2 ready late by releasing it at 10.5: A0 [10,11] is running, w2 runs next
    # [11,11.8], then A1..A3. b1 (priority 9) is ready at 9 on an idle channel: a free
    # channel starts any ready partition, so it runs first [9,9.4].
    r = w.simulate(plan, UNIT, release={(1, 0): 10.5})
    order = [(p.group, p.offset) for p in r.partitions]
    assert order == [(2, 0), (0, 0), (1, 0), (0, 100), (0, 200), (0, 300)]
    assert [p.start for p in r.partitions[:3]] == [9.0, 10.0, 11.0]


def test_release_times_delay_but_do_not_reorder():
    w = Workload(mlp_trace())
    plan = one_per_tensor(w)
    r = w.simulate(plan, UNIT, release={(0, 0): 8.0, (2, 0): 12.0})
    got = {p.tensors: p.start for p in r.partitions}
    assert got == {("w2",): 8.0, ("b1",): 9.0, ("w1",): 12.0}
    assert "release:0:0" in r.schedule.ids


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), n_ops=st.integers(4, 24), n_vars=st.integers(1, 6),
       p=st.floats(0.05, 0.5), a=st.floats(0.0, 1.0), split=st.integers(1, 3))
def test_ready_times_do_not_depend_on_plan(seed, n_ops, n_vars, p, a, split):
    t = random_trace(seed, n_ops, n_vars, p)
    w = Workload(t)
    if not w.sizes:
        return
    model = LinearModel(a, 1e-3)
    base = w.simulate(one_per_tensor(w), model)
    # a plan that fuses everything and splits it into `split` partitions, last first
    names = tuple((v, w.sizes[v]) for v in w.sizes)
    total = sum(b for _, b in names)
    cuts = sorted({0, *(total * k // split for k in range(1, split))})
    parts = tuple(Partition(c, e - c, len(cuts) - k)
                  for k, (c, e) in enumerate(zip(cuts, [*cuts[1:], total], strict=True)))
    other = w.simulate(Plan("fused", (Group(names, parts),)), model)
    for r in (base, other):
        ops = r.schedule.ops
        for v, prod in w.producer.items():
            assert ops[prod][1] == w.ready[v]
        # the channel is idle only when no partition is ready: total time is at least
        # the compute time, and free communication gives exactly it
        assert r.iteration_time >= w.compute_time - 1e-9
        # one op at a time: at every instant before the end the compute resource or the
        # channel is busy, so the iteration exceeds the compute time by at most the
        # channel's busy time
        if w.compute_capacity == 1:
            assert r.iteration_time <= w.compute_time + r.comm_time + 1e-9
    free = w.simulate(Plan("fused", (Group(names, parts),)), LinearModel(0.0, 0.0))
    assert free.iteration_time == pytest.approx(w.compute_time)
    # PACE's ideal compute: free communication one tensor at a time is the compute time;
    # fusion delays the next forward pass even when communication is free (a fused group
    # waits for its last gradient), so no plan is faster than the compute time
    wide = Workload(t, compute_capacity="unbounded")
    fused = Plan("fused", (Group(names, parts),))
    zero = LinearModel(0.0, 0.0)
    assert wide.simulate(one_per_tensor(wide), zero).iteration_time == pytest.approx(
        wide.compute_time)
    for m in (model, zero):
        assert wide.simulate(fused, m).iteration_time >= wide.compute_time - 1e-9
    assert wide.compute_time <= w.compute_time + 1e-9


def test_channel_usage_accounts_for_every_byte():
    w = Workload(mlp_trace())
    r = w.simulate(one_per_tensor(w), LinearModel(0.1, 0.01))
    u = r.channel_usage(bin_s=0.5, wire_factor=1.5)
    assert u.busy.sum() * 0.5 == pytest.approx(r.comm_time)
    assert u.wire_bytes.sum() == pytest.approx(1.5 * 520)
    assert u.busy.max() <= 1.0 + 1e-9
    assert u.t_s.iloc[0] == 0.0 and len(u) == math.ceil(r.iteration_time / 0.5)
    with pytest.raises(CommschedError, match="bin length"):
        r.channel_usage(bin_s=0)


def test_compute_scale_and_capacity():
    t = mlp_trace()
    w = Workload(t, compute_scale=2.0)
    assert w.compute_time == 20.0 and w.ready["w2"] == 14.0
    # unbounded compute: g_mm2 and g_h both run right after loss
    wide = Workload(t, compute_capacity=8)
    assert wide.ready["w2"] == 7.0 and wide.ready["w1"] == 9.0
    # free communication still links w1's gradient (ready 9) to the next mm1: the next
    # forward pass runs [9, 15], so one iteration is backward 3 + forward 6 s (the next
    # forward pass does not overlap the backward pass although compute slots are free)
    assert wide.compute_time == 9.0
    unbounded = Workload(t, compute_capacity="unbounded")
    assert unbounded.compute_capacity == t.number_of_nodes()
    assert unbounded.ready == wide.ready
    with pytest.raises(CommschedError, match="capacity"):
        Workload(t, compute_capacity="many")
    with pytest.raises(CommschedError, match="compute_scale"):
        Workload(t, compute_scale=0)
    with pytest.raises(CommschedError, match="capacity"):
        Workload(t, compute_capacity=0)


def test_plan_must_match_gradients():
    t = mlp_trace()
    bad = Plan("x", (Group((("w1", 400), ("b1", 40)), (Partition(0, 440, 0),)),))
    with pytest.raises(PlanError, match="'w2' of the model is in no group"):
        simulate_plan(t, bad, UNIT)
    w = Workload(t)
    with pytest.raises(PlanError, match="release time for partition"):
        w.simulate(one_per_tensor(w), UNIT, release={(7, 0): 1.0})
    with pytest.raises(PlanError, match="not >= 0"):
        w.simulate(one_per_tensor(w), UNIT, release={(0, 0): -1.0})
    assert partition_id(3, 100) == "ar:3:100"


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000), n_ops=st.integers(4, 20), n_vars=st.integers(1, 5),
       release=st.booleans())
def test_fast_compile_equals_networkx_graph(seed, n_ops, n_vars, release):
    w = Workload(random_trace(seed, n_ops, n_vars, 0.3))
    if not w.sizes:
        return
    plan = one_per_tensor(w)
    rel = {(gi, 0): 0.5 * gi for gi in range(len(plan.groups))} if release else None
    fast = w.compile(plan, UNIT, rel)
    slow = compile_graph(w.graph(plan, UNIT, rel))
    index = {op: i for i, op in enumerate(slow.ids)}
    assert sorted(fast.ids) == sorted(slow.ids)
    for i, op in enumerate(fast.ids):
        j = index[op]
        assert fast.duration[i] == slow.duration[j]
        assert fast.priority[i] == slow.priority[j]
        assert fast.resource_names[fast.resource[i]] == slow.resource_names[slow.resource[j]]
        succ_f = {fast.ids[k] for k in fast.succ_idx[fast.succ_ptr[i]:fast.succ_ptr[i + 1]]}
        succ_s = {slow.ids[k] for k in slow.succ_idx[slow.succ_ptr[j]:slow.succ_ptr[j + 1]]}
        assert succ_f == succ_s, op
    assert dict(zip(fast.resource_names, fast.capacity, strict=True)) == dict(
        zip(slow.resource_names, slow.capacity, strict=True))
