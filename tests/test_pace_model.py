"""PACE's model (Sec. IV-A): window, ready times (Lemma 1), tails (Theorem 1), slots."""

from __future__ import annotations

import random

import networkx as nx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from views_graphs import bn_trace, edge, mlp_trace, op, random_trace

from commsched.cost import LinearModel
from commsched.errors import CommschedError
from commsched.model.traced import load_trace
from commsched.pace.model import build_model, model_of_window, window, window_end
from commsched.pace.schedule import jackson, objective
from commsched.pace.slots import SlotProblem, check_slot, slots, to_problem
from commsched.views.allreduce import NEXT_PREFIX

# g(S) = S / 40 seconds: w2 (80 B) 2 s, b1 (40 B) 1 s, w1 (400 B) 10 s.
COST = LinearModel(0.0, 1 / 40)


def test_window_keeps_backward_allreduces_and_next_forward():
    w = window(mlp_trace())
    assert "mm1" not in w and "loss" not in w  # iteration k's forward is done at time 0
    assert {"g_mm2", "g_h", "g_b1", "g_w1"} <= set(w)
    assert {NEXT_PREFIX + "mm1", NEXT_PREFIX + "loss"} <= set(w)
    assert not any(o.startswith("apply_") or o == "done" for o in w)  # optimizer removed
    assert NEXT_PREFIX + "rd_lr" not in w


def test_mlp_ready_times_tails_and_chain_by_hand():
    m = build_model(mlp_trace())
    # Backward: g_mm2 (1 s) and g_h (1 s) start at 0; g_b1 after g_h; g_w1 after g_b1.
    # Next forward: rd_w1 (0) -> mm1 (2) -> add1 (1, + rd_b1) -> mm2 (2, + rd_w2) -> loss (1).
    got = [(o.name, o.tensors, o.ready_s, o.tail_s) for o in m.ops]
    assert got == [
        ("allreduce:g_mm2", (("w2", 80),), 1.0, 3.0),  # L = mm2 + loss
        ("allreduce:g_b1", (("b1", 40),), 2.0, 4.0),  # L = add1 + mm2 + loss
        ("allreduce:g_w1", (("w1", 400),), 3.0, 6.0),  # L = mm1 + add1 + mm2 + loss
    ]
    assert m.compute_only_s == 6.0  # the next forward's chain, ignoring its all-reduces
    assert m.n_compute == 4 + 7


def test_mlp_slot_problem_and_optimum_by_hand():
    p = to_problem(build_model(mlp_trace()), COST, slot_s=1.0)
    assert (p.release, p.proc, p.tail, p.base) == ((1, 2, 3), (2, 1, 10), (3.0, 4.0, 6.0), 6.0)
    s = jackson(p)
    # w2 runs in slot 1, is preempted by b1 (larger tail) in slot 2; w1 (largest tail)
    # takes slots 3..12, w2 finishes in slot 13: the end is max(3+4, 13+6, 14+3) = 19.
    assert s == {0: (1, 13), 1: (2,), 2: tuple(range(3, 13))}
    assert objective(p, s) == 19.0


def test_compute_scale_scales_every_time():
    a, b = build_model(mlp_trace()), build_model(mlp_trace(), compute_scale=0.5)
    assert [o.ready_s / 2 for o in a.ops] == [o.ready_s for o in b.ops]
    assert [o.tail_s / 2 for o in a.ops] == [o.tail_s for o in b.ops]
    with pytest.raises(CommschedError, match="compute_scale"):
        build_model(mlp_trace(), compute_scale=0.0)


def test_gradients_of_one_op_are_one_allreduce():
    (o1, o2) = build_model(bn_trace()).ops
    assert o1.tensors == (("gamma", 40), ("beta", 40)) and o1.bytes == 80
    assert o2.tensors == (("w", 400),)


def test_release_off_by_one_in_constraint_7():
    # Our reading: slot s is usable only if the producer is done when it starts.
    assert slots(0.010, 0.005) == 2  # producer done at 10 ms: slot 2 = [10, 15) ms
    assert slots(0.0100001, 0.005) == 3
    assert slots(0.01 * 3 / 3, 0.005) == 2  # floating noise does not add a slot
    m = build_model(mlp_trace())
    p = to_problem(m, COST, slot_s=0.5)
    assert p.release == (2, 4, 6)  # z = 1, 2, 3 s on 0.5 s slots


def test_processing_is_at_least_one_slot_and_slot_guidance():
    m = build_model(mlp_trace())
    p = to_problem(m, COST, slot_s=4.0)
    assert p.proc == (1, 1, 3)
    check_slot(m, COST, 1.0)  # b1 takes exactly one slot
    with pytest.raises(CommschedError, match="longer than the smallest all-reduce"):
        check_slot(m, COST, 1.5)


def test_trace_without_gradients_is_rejected():
    t = load_trace("data/traces/vgg16-infer-b2.json.gz")
    with pytest.raises(CommschedError, match="no gradient ops"):
        build_model(t)


def test_lemma1_precondition_is_checked():
    w = window(mlp_trace())
    # A producer that waits for an all-reduce breaks Lemma 1.
    w.add_edge("allreduce:g_mm2", "g_h", control=False, bytes=0)
    with pytest.raises(CommschedError, match="Lemma 1"):
        model_of_window(w)


def test_op_waiting_for_two_allreduces():
    g = mlp_trace()
    # A forward op reading w1 and b1 directly (PyTorch-style linear): v_j is a set.
    op(g, "lin", 5.0, reads=["w1", "b1"])
    edge(g, "rd_w1", "lin")
    m = build_model(g)
    by = {o.name: o.tail_s for o in m.ops}
    assert by["allreduce:g_w1"] == 6.0
    assert by["allreduce:g_b1"] == 5.0  # next:lin (5 s, a sink)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), n_ops=st.integers(4, 14), n_vars=st.integers(1, 5))
def test_theorem1_objective_equals_dag_end_on_random_traces(seed, n_ops, n_vars):
    t = random_trace(seed, n_ops, n_vars, 0.3)
    try:
        w = window(t)
    except CommschedError:  # a random trace may have no gradient
        return
    m = model_of_window(w)
    rng = random.Random(seed)
    ends = {o.name: o.ready_s + rng.uniform(0.0, 5.0) for o in m.ops}
    assert m.iteration_time([ends[o.name] for o in m.ops]) == pytest.approx(window_end(w, ends))


def test_theorem1_on_vgg16_trace():
    w = window(load_trace("data/traces/vgg16-train-b2.json.gz"))
    m = model_of_window(w)
    rng = random.Random(0)
    for _ in range(5):
        ends = {o.name: o.ready_s + rng.uniform(0.0, 1.0) for o in m.ops}
        assert m.iteration_time([ends[o.name] for o in m.ops]) == pytest.approx(
            window_end(w, ends))


def test_slot_problem_rejects_bad_values():
    with pytest.raises(CommschedError):
        SlotProblem((0,), (0,), (0.0,))
    with pytest.raises(CommschedError):
        SlotProblem((0,), (1,), (-1.0,))
    with pytest.raises(CommschedError):
        SlotProblem((0,), (1,), (0.0,), slot_s=0.0)
    assert SlotProblem((0,), (1,), (0.4,), base=2.2).integral().tail == (1.0,)


def _fig6_window() -> tuple[nx.DiGraph, dict[int, float]]:
    """PACE Fig. 6 (left) as a window: backward ops 1..6 (a chain, our choice: the figure's
    backward part does not matter for the tails), all-reduce ``i`` of op ``i``, and the
    next forward pass 7..12 whose dependencies Sec. IV-B's expansion of ``z_12`` spells out:
    P_7 = {6}, v_7 = 6; 7 -> 8 -> 9 -> 12 and 7 -> 10 -> 11 -> 12; v_8 = 3, v_9 = 2,
    v_10 = 5, v_11 = 4, v_12 = 1. Distinct times so that no two paths tie."""
    f = {1: 1.0, 2: 2.0, 3: 3.0, 4: 4.0, 5: 5.0, 6: 6.0,
         7: 7.0, 8: 8.0, 9: 9.0, 10: 10.0, 11: 11.0, 12: 12.0}
    w = nx.DiGraph(variables={f"p{i}": {"bytes": 4 * i} for i in range(1, 7)})
    for j, d in f.items():
        w.add_node(f"c{j}", kind="compute", resource="cpu", duration=d)
    for i in range(1, 7):
        w.add_node(f"ar{i}", kind="allreduce", resource="net", duration=0.0,
                   params=[f"p{i}"], bytes=4 * i)
        w.add_edge(f"c{i}", f"ar{i}")
    for a, b in [(1, 2), (2, 3), (3, 4), (4, 5), (5, 6), (6, 7), (7, 8), (8, 9), (9, 12),
                 (7, 10), (10, 11), (11, 12)]:
        w.add_edge(f"c{a}", f"c{b}")
    for i, j in [(6, 7), (3, 8), (2, 9), (5, 10), (4, 11), (1, 12)]:  # v_j = i
        w.add_edge(f"ar{i}", f"c{j}")
    return w, f


def test_fig6_tails_and_theorem1_expansion_of_z12():
    w, f = _fig6_window()
    m = model_of_window(w)
    tails = {op.name: op.tail_s for op in m.ops}
    # Sec. IV-B: z_12 = max{y1 + f12, y2 + f9 + f12, y3 + f8 + f9 + f12, y4 + f11 + f12,
    #                      y5 + f10 + f11 + f12, y6 + f7 + max{f8 + f9, f10 + f11} + f12}.
    assert tails == {
        "ar1": f[12], "ar2": f[9] + f[12], "ar3": f[8] + f[9] + f[12],
        "ar4": f[11] + f[12], "ar5": f[10] + f[11] + f[12],
        "ar6": f[7] + max(f[8] + f[9], f[10] + f[11]) + f[12],
    }
    # Lemma 1: ready time of all-reduce i = compute-only path to op i (the chain 1..i).
    assert [op.ready_s for op in m.ops] == [sum(range(1, i + 1)) for i in range(1, 7)]
    # Theorem 1 against the recursion (5) for some completion times y_i >= z_{u_i}.
    y = {i: sum(range(1, i + 1)) + 3.5 * (7 - i) for i in range(1, 7)}
    z: dict[int, float] = {}
    for j in range(1, 13):
        deps = [z[k] for k in range(1, 13) if w.has_edge(f"c{k}", f"c{j}")]
        deps += [y[i] for i in range(1, 7) if w.has_edge(f"ar{i}", f"c{j}")]
        z[j] = f[j] + max(deps, default=0.0)
    ends = [y[int(op.name[2:])] for op in m.ops]
    assert m.iteration_time(ends) == z[12]
