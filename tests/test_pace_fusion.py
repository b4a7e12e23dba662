"""Balanced tensor fusion (PACE Sec. V, Alg. 1) and the plan it writes."""

from __future__ import annotations

import itertools
import math
from functools import cache

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from views_graphs import mlp_trace

from commsched.cost import LinearModel, LinkModel, RingAllReduce
from commsched.errors import CommschedError
from commsched.model.traced import load_trace
from commsched.pace.fusion import MaxMinTable, balanced_fusion, fuse, fuse_window, make_plan
from commsched.pace.model import AllReduceOp, PaceModel, build_model, model_of_window, window
from commsched.pace.plan import load_plan, save_plan
from commsched.pace.schedule import jackson, objective, runs
from commsched.pace.slots import to_problem

RING = RingAllReduce(8, LinkModel(50e-6, 10e9 / 8))


def literal_maxminsize(sizes):
    """Alg. 1 lines 11-23 as written: recursion on the prefix N', memoised, strict <."""

    @cache
    def mms(start, r):
        chain = range(start, len(sizes))
        if r == 1:
            return sum(sizes[start:]), ((start, len(sizes) - 1),)
        if r > len(chain):
            return -math.inf, ()
        best, groups = 0, ()
        for end in range(start, len(sizes) - r + 1):  # N' = chain[start..end]
            t_size, t_groups = mms(end + 1, r - 1)
            temp = min(sum(sizes[start:end + 1]), t_size)
            if best < temp:
                best, groups = temp, ((start, end), *t_groups)
        return best, groups

    return mms


@settings(max_examples=200, deadline=None)
@given(sizes=st.lists(st.integers(1, 6), min_size=1, max_size=9))
def test_maxmin_table_equals_the_literal_recursion_with_its_tie_break(sizes):
    table, literal = MaxMinTable(sizes), literal_maxminsize(tuple(sizes))
    for r in range(1, len(sizes) + 1):
        value, groups = literal(0, r)
        assert table.value(r) == value
        assert tuple(table.groups(r)) == groups


def test_maxmin_rejects_bad_chains():
    with pytest.raises(CommschedError):
        MaxMinTable([])
    with pytest.raises(CommschedError, match="R must be"):
        MaxMinTable([1, 2]).groups(3)


def test_fused_model_equals_model_of_fused_dag():
    # Array-level fusion (what Alg. 1 iterates on) = fusing the op graph and re-deriving.
    t = load_trace("data/traces/resnet50_v1-train-b4.json.gz")
    w = window(t)
    m = model_of_window(w)
    groups = MaxMinTable([o.bytes for o in m.ops]).groups(9)
    names = [[o.name for o in m.ops[a:b + 1]] for a, b in groups]
    fused_graph = model_of_window(fuse_window(w, names))
    fused = fuse(m, groups)
    key = sorted((o.tensors, o.producer, o.ready_s, o.tail_s) for o in fused.ops)
    assert sorted((o.tensors, o.producer, o.ready_s, o.tail_s) for o in fused_graph.ops) == key
    assert fused_graph.compute_only_s == fused.compute_only_s


def test_fused_producer_is_the_member_that_finishes_last():
    m = build_model(mlp_trace())
    (f,) = fuse(m, [(0, 2)]).ops
    assert f.producer == "g_w1" and f.ready_s == 3.0 and f.tail_s == 6.0
    assert f.tensors == (("w2", 80), ("b1", 40), ("w1", 400))


def test_balanced_fusion_picks_the_best_r_with_the_smallest_r_on_ties():
    m = build_model(load_trace("data/traces/vgg16-train-b2.json.gz"))
    res = balanced_fusion(m, RING, 0.005, slot_guidance=False)
    times = [row["iter_time_s"] for row in res.candidates]
    assert len(times) == len(m.ops)
    assert res.iter_time_s == min(times)
    assert res.r == 1 + times.index(min(times))
    # The chosen fused model's schedule is optimal for it (the oracle is exact).
    assert objective(res.problem, res.schedule) * 0.005 == pytest.approx(res.iter_time_s)


def test_slot_guidance_limits_r_and_rejects_a_too_long_slot():
    m = build_model(mlp_trace())
    cost = LinearModel(0.0, 1 / 40)  # w2 2 s, b1 1 s, w1 10 s
    res = balanced_fusion(m, cost, 3.0)
    skipped = [row["R"] for row in res.candidates if row["iter_time_s"] is None]
    assert skipped == [3]  # R=3 leaves b1 (1 s) alone, shorter than a 3 s slot
    with pytest.raises(CommschedError, match="longer than the all-reduce of every"):
        balanced_fusion(m, cost, 20.0)


def test_plan_partitions_follow_the_schedule(tmp_path):
    m = build_model(load_trace("data/traces/vgg16-train-b2.json.gz"))
    res = balanced_fusion(m, RING, 0.005)
    plan = make_plan(res.model, res.problem, res.schedule, meta={"trace": "vgg16"})
    plan.check_tensors(m.tensors)
    assert len(plan.groups) == res.r
    for i, g in enumerate(plan.groups):
        rs = runs(res.schedule[i])
        assert [p.priority for p in g.partitions] == [start for start, _ in rs]
        assert all(p.offset % 4 == 0 for p in g.partitions)
        # bytes in proportion to the run's slots, within one float
        for part, (_, length) in zip(g.partitions, rs, strict=True):
            assert abs(part.bytes - g.bytes * length / res.problem.proc[i]) <= 4
    save_plan(plan, tmp_path / "p.json")
    assert load_plan(tmp_path / "p.json") == plan


def test_plan_merges_a_run_too_small_for_a_byte():
    m = build_model(mlp_trace())
    p = to_problem(m, LinearModel(0.0, 1 / 40), 1.0)
    sched = jackson(p)  # w2 (80 B) runs in slots 1 and 13
    plan = make_plan(m, p, sched, align=4)
    assert [(q.offset, q.bytes, q.priority) for q in plan.groups[0].partitions] == [
        (0, 40, 1), (40, 40, 13)]
    tiny = type(m)(tuple(type(o)(o.name, o.producer, (("x", 1),), o.ready_s, o.tail_s)
                         if i == 0 else o for i, o in enumerate(m.ops)),
                   m.compute_only_s, m.n_compute)
    plan = make_plan(tiny, p, sched)
    assert [(q.offset, q.bytes, q.priority) for q in plan.groups[0].partitions] == [(0, 1, 1)]


@settings(max_examples=150, deadline=None)
@given(data=st.data(), n=st.integers(2, 7))
def test_without_startup_cost_fusion_never_pays(data, n):
    """Why the experiments' cost has a start-up term (commsched.cost.allreduce.allreduce_cost):
    with g = b*S and no rounding to slots (every g a whole number of slots), any fusion of
    adjacent operators is at best as fast as no fusion. Proof: the fused op is released
    at its last member's release, needs the sum of the members' slots and carries their
    largest tail, so its slots, dealt to the members, are an unfused schedule that is no
    later. With a start-up a > 0, fusing saves a per merged operator and can win."""
    ready = sorted(data.draw(st.lists(st.integers(0, 6), min_size=n, max_size=n)))
    units = data.draw(st.lists(st.integers(1, 4), min_size=n, max_size=n))
    tails = data.draw(st.lists(st.integers(0, 8), min_size=n, max_size=n))
    ops = tuple(AllReduceOp(f"a{i}", f"u{i}", ((f"v{i}", 4 * units[i]),), float(ready[i]),
                            float(tails[i])) for i in range(n))
    model = PaceModel(ops, 0.0, n)
    linear = LinearModel(0.0, 1 / 4)  # g = S / 4 s: whole slots of 1 s

    def best(m, cost):
        p = to_problem(m, cost, 1.0)
        return objective(p, jackson(p))

    unfused = best(model, linear)
    cuts = sorted(data.draw(st.sets(st.integers(1, n - 1))))
    bounds = [0, *cuts, n]
    groups = [(a, b - 1) for a, b in itertools.pairwise(bounds)]
    assert best(fuse(model, groups), linear) >= unfused
    # With a start-up of one slot per all-reduce, fusing everything saves n - 1 slots of
    # start-up: when all are ready at once and share a tail, fusion wins.
    same = PaceModel(tuple(AllReduceOp(f"a{i}", "u", ((f"v{i}", 4),), 0.0, 0.0)
                           for i in range(n)), 0.0, n)
    affine = LinearModel(1.0, 1 / 4)
    assert best(fuse(same, [(0, n - 1)]), affine) < best(same, affine)


@settings(max_examples=200, deadline=None)
@given(data=st.data(), n=st.integers(2, 8))
def test_lemma2_adjacent_groups_are_ready_no_later(data, n):
    """Lemma 2: on the chain sorted by ready time, fusing adjacent operators gives every
    fused operator (the k-th to become ready) a ready time no later than any grouping with
    the same group sizes. The k-th ready group of any grouping is ready at the max over the
    first k groups' members, at least the (c_1 + ... + c_k)-th smallest ready time, which
    is what the adjacent grouping achieves."""
    ready = sorted(data.draw(st.lists(st.integers(0, 20), min_size=n, max_size=n)))
    labels = data.draw(st.lists(st.integers(0, n - 1), min_size=n, max_size=n))
    groups = [[ready[i] for i in range(n) if labels[i] == g] for g in set(labels)]
    any_ready = sorted(max(g) for g in groups)
    sizes = [len(g) for g in sorted(groups, key=max)]
    bounds = list(itertools.accumulate(sizes))
    adjacent_ready = [ready[b - 1] for b in bounds]
    assert all(a <= o for a, o in zip(adjacent_ready, any_ready, strict=True))
    ops = tuple(AllReduceOp(f"a{i}", f"u{i}", ((f"v{i}", 4),), float(ready[i]), 0.0)
                for i in range(n))
    spans = [(a, b - 1) for a, b in itertools.pairwise([0, *bounds])]
    fused = fuse(PaceModel(ops, 0.0, n), spans)
    assert [op.ready_s for op in fused.ops] == adjacent_ready
