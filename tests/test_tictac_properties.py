"""TicTac Alg. 1 op properties: dep, M, P, M+ (commsched.tictac.properties)."""

from __future__ import annotations

import math
from fractions import Fraction

import networkx as nx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from commsched.errors import CommschedError
from commsched.model.graph import add_op, new_graph
from commsched.tictac.bruteforce import random_instance
from commsched.tictac.dependencies import comm_dependencies, comm_index, exact_times, op_times
from commsched.tictac.properties import IncrementalProperties, op_properties


def reference(g: nx.DiGraph, outstanding: set[str]) -> tuple[dict, dict, dict]:
    """Sec. 4.1 definitions computed naively with nx.ancestors and exact fractions."""
    kind = nx.get_node_attributes(g, "kind")
    T = {n: Fraction(a["duration"]) for n, a in g.nodes(data=True)}
    dep = {v: {u for u in nx.ancestors(g, v) | {v} if kind[u] == "recv"} for v in g}

    def cost(D: set[str]) -> Fraction:
        per: dict[str, Fraction] = {}
        for r in D:
            ch = g.nodes[r]["resource"]
            per[ch] = per.get(ch, Fraction(0)) + T[r]
        return max(per.values(), default=Fraction(0))

    M = {v: cost(dep[v] & outstanding) for v in g}
    P = {r: Fraction(0) for r in outstanding}
    Mp: dict[str, Fraction | float] = {r: math.inf for r in outstanding}
    for v in g:
        if kind[v] == "recv":
            continue
        D = dep[v] & outstanding
        if len(D) == 1:
            P[next(iter(D))] += T[v]
        elif len(D) > 1:
            for r in D:
                Mp[r] = min(Mp[r], M[v])
    return (
        {v: float(x) for v, x in M.items()},
        {r: float(x) for r, x in P.items()},
        {r: float(x) for r, x in Mp.items()},
    )


@st.composite
def graphs(draw: st.DrawFn) -> nx.DiGraph:
    """Random op graphs where recvs may have predecessors and sit on up to 3 channels."""
    n = draw(st.integers(1, 12))
    g = new_graph({"cpu": 1, "net0": 1, "net1": 1, "net2": 1})
    for i in range(n):
        recv = draw(st.booleans())
        res = draw(st.sampled_from(["net0", "net1", "net2"])) if recv else "cpu"
        t = draw(st.sampled_from([0.0, 0.1, 0.25, 1.0, 1.5, 3.0, 1e-7]))
        add_op(g, f"o{i}", "recv" if recv else "compute", res, t)
    for j in range(n):
        for i in range(j):
            if draw(st.integers(0, 3)) == 0:
                g.add_edge(f"o{i}", f"o{j}")
    return g


def test_doc_example_and_channels():
    # Recvs A (net0, 2 s), B (net1, 4 s), C (net0, 1 s). Compute: v needs {A, B},
    # w needs {A, C}, z needs {A, B, C}, u needs only C.
    g = new_graph({"net0": 1, "net1": 1, "cpu": 1})
    add_op(g, "A", "recv", "net0", 2.0)
    add_op(g, "B", "recv", "net1", 4.0)
    add_op(g, "C", "recv", "net0", 1.0)
    for op, needs, t in (("v", "AB", 1.0), ("w", "AC", 2.0), ("z", "ABC", 3.0), ("u", "C", 5.0)):
        add_op(g, op, "compute", "cpu", t)
        for r in needs:
            g.add_edge(r, op)
    p = op_properties(g)
    # M per channel then max: v = max(2, 4) = 4; w = 2 + 1 = 3 (both on net0);
    # z = max(2 + 1, 4) = 4; u = 1; a recv's M is its own time.
    assert p.M == {"A": 2.0, "B": 4.0, "C": 1.0, "v": 4.0, "w": 3.0, "z": 4.0, "u": 1.0}
    # P: only u depends on a single recv (C, 5 s).
    assert p.P == {"A": 0.0, "B": 0.0, "C": 5.0}
    # M+: A in v(4), w(3), z(4) -> 3; B in v, z -> 4; C in w(3), z(4) -> 3.
    assert p.M_plus == {"A": 3.0, "B": 4.0, "C": 3.0}
    # Once A is done: v waits for B only (P(B) = 1), w for C only (P(C) = 5 + 2),
    # z for {B, C} on two channels: M = max(1, 4) = 4.
    q = op_properties(g, outstanding=["B", "C"])
    assert q.P == {"B": 1.0, "C": 7.0}
    assert q.M_plus == {"B": 4.0, "C": 4.0}
    assert q.M["z"] == 4.0 and q.M["A"] == 0.0


def test_no_multi_dependency_means_infinite_m_plus():
    g = new_graph({"net": 1, "cpu": 1})
    add_op(g, "r", "recv", "net", 1.0)
    add_op(g, "c", "compute", "cpu", 2.0)
    g.add_edge("r", "c")
    p = op_properties(g)
    assert p.P == {"r": 2.0} and p.M_plus == {"r": math.inf}


def test_recv_after_recv_counts_its_ancestors():
    # r2 waits for a computation on r1 (e.g. a control dependency): dep(r2) = {r1, r2}.
    g = new_graph({"net": 1, "cpu": 1})
    add_op(g, "r1", "recv", "net", 1.0)
    add_op(g, "c", "compute", "cpu", 1.0)
    add_op(g, "r2", "recv", "net", 2.0)
    g.add_edges_from([("r1", "c"), ("c", "r2")])
    assert comm_dependencies(g) == {"r1": {"r1"}, "c": {"r1"}, "r2": {"r1", "r2"}}
    assert op_properties(g).M["r2"] == 3.0
    assert op_properties(g, outstanding=["r2"]).M["r2"] == 2.0


def test_errors():
    g = random_instance(3, 0)
    with pytest.raises(CommschedError, match="not a recv op"):
        op_properties(g, outstanding=["c0"])
    with pytest.raises(CommschedError, match="time must be"):
        op_properties(g, time={"r0": -1.0})
    g.add_edge("c1", "c0")
    g.add_edge("c0", "c1")
    with pytest.raises(CommschedError, match="cycle"):
        comm_index(g)


def test_exact_times():
    ints, den = exact_times([0.1, 0.2, 0.3])
    assert Fraction(ints[0] + ints[1], den) == Fraction(0.1) + Fraction(0.2)
    assert ints[0] + ints[1] != ints[2]  # 0.1 + 0.2 != 0.3 in binary, exactly as floats
    assert exact_times([]) == ([], 1)


@settings(max_examples=150, deadline=None)
@given(graphs(), st.data())
def test_matches_naive_definitions(g, data):
    recvs = [n for n, a in g.nodes(data=True) if a["kind"] == "recv"]
    outstanding = set(data.draw(st.lists(st.sampled_from(recvs), unique=True))) if recvs else set()
    p = op_properties(g, outstanding=outstanding)
    M, P, Mp = reference(g, outstanding)
    assert p.M == M and p.P == P and p.M_plus == Mp
    assert comm_dependencies(g) == {
        v: {u for u in nx.ancestors(g, v) | {v} if g.nodes[u]["kind"] == "recv"} for v in g
    }


@settings(max_examples=100, deadline=None)
@given(st.one_of(graphs(), st.builds(random_instance, st.integers(1, 8), st.integers(0, 10**6),
                                     st.integers(1, 3))), st.randoms(use_true_random=False))
def test_incremental_equals_from_scratch(g, rnd):
    """IncrementalProperties after any sequence of removals equals Alg. 1 from scratch."""
    idx = comm_index(g)
    times, den = op_times(g, idx, None)
    state = IncrementalProperties(idx, times)
    order = list(range(len(idx.recvs)))
    rnd.shuffle(order)
    for step in range(len(order) + 1):
        left = order[step:]
        ref = op_properties(g, outstanding=[idx.recvs[i] for i in left])
        mp = state.m_plus()
        for i in left:
            r = idx.recvs[i]
            assert state.P[i] / den == ref.P[r]
            assert (math.inf if mp[i] is None else mp[i] / den) == ref.M_plus[r]
            assert state.recv_M(i) / den == ref.M[r]
        if step < len(order):
            state.remove(order[step])
    if order:
        with pytest.raises(ValueError, match="not outstanding"):
            state.remove(order[0])
