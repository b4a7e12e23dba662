"""Synthetic generators: TicTac's Par-N / Seq-N toys and the thesis' level-based DAGs."""

from __future__ import annotations

import itertools
import json
import math
from collections import Counter

import networkx as nx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from commsched.io.thesis import CONSTRAINTS, read_graph, to_op_graph, write_graph
from commsched.model.graph import compile_graph, to_json, validate
from commsched.sim import check_schedule, simulate, simulate_compiled
from commsched.trace.synthetic import layer_order, level_dag, order_priorities, par_n, seq_n


def makespan(g: nx.DiGraph, order: list[str]) -> float:
    cg = compile_graph(g, order_priorities(order))
    s = simulate_compiled(cg)
    check_schedule(cg, s)
    return s.makespan


# --- toys ----------------------------------------------------------------------------------

@pytest.mark.parametrize("make,edges", [(par_n, 5), (seq_n, 9)])
def test_toy_shape(make, edges):
    g = make(5)
    validate(g)
    assert g.number_of_nodes() == 10 and g.number_of_edges() == edges
    assert g.graph["resources"] == {"net": 1, "cpu": 1}
    assert layer_order(g) == [f"recv_{i}" for i in range(5)]
    assert {g.nodes[f"recv_{i}"]["param"] for i in range(5)} == {f"w_{i}" for i in range(5)}


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5])
def test_par_every_order_same_makespan(n):
    # Par-N, unit times: recvs end at 1..N on the channel; comp of the k-th recv runs
    # [k, k+1] and never waits for the cpu, so makespan = N + 1 for every order.
    g = par_n(n)
    recvs = layer_order(g)
    assert {makespan(g, list(p)) for p in itertools.permutations(recvs)} == {n + 1.0}


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 6])
def test_seq_exactly_one_best_order(n):
    # Seq-N, unit times, pos(i) = 1-based position of recv_i = its end time.
    # comp_i starts at max(end of comp_{i-1}, pos(i)), so the makespan is
    # max_i (pos(i) + N - i + 1) (i 1-based): N + 1 iff pos(i) <= i for all i, which
    # only the identity satisfies; reversed order (pos(i) = N - i + 1) gives 2N.
    g = seq_n(n)
    recvs = layer_order(g)
    spans = Counter(makespan(g, list(p)) for p in itertools.permutations(recvs))
    assert min(spans) == n + 1 and spans[n + 1.0] == 1
    assert max(spans) == 2 * n
    assert makespan(g, recvs) == n + 1
    assert makespan(g, recvs[::-1]) == 2 * n
    # the closed form for every order
    for p in itertools.permutations(range(n)):
        pos = {layer: k + 1 for k, layer in enumerate(p)}
        expected = max(pos[i] + n - i for i in range(n))  # i 0-based: N - i = N - (i+1) + 1
        assert makespan(g, [recvs[i] for i in p]) == expected


def test_seq_32_best_and_reversed():
    g = seq_n(32)
    assert makespan(g, layer_order(g)) == 33.0
    assert makespan(g, layer_order(g)[::-1]) == 64.0


def test_toy_times():
    # recv 2 s, compute 3 s, Seq-2 in layer order: r0[0,2] c0[2,5] r1[2,4] c1[5,8].
    g = seq_n(2, recv_time=2.0, compute_time=3.0)
    assert makespan(g, layer_order(g)) == 8.0


@pytest.mark.parametrize("kw", [dict(n=0), dict(n=3, recv_time=-1.0),
                                dict(n=3, compute_time=math.nan)])
def test_toy_bad_args(kw):
    with pytest.raises(ValueError):
        par_n(**kw)


# --- level-based random DAGs ----------------------------------------------------------------

def int_range(lo: int) -> st.SearchStrategy[tuple[int, int]]:
    return st.tuples(st.integers(lo, 5), st.integers(0, 50)).map(lambda t: (t[0], t[0] + t[1]))


dag_args = st.fixed_dictionaries({
    "levels": st.integers(1, 12),
    "min_per_level": st.integers(1, 4),
    "extra_per_level": st.integers(0, 6),
    "edge_prob": st.sampled_from([0.0, 0.05, 0.3, 1.0]),
    "max_level_distance": st.sampled_from([None, 1, 2, 5]),
    "long_range_fraction": st.sampled_from([0.0, 0.1, 0.5]),
    "tensor_size": int_range(0),
    "operations": int_range(1),
    "ram": int_range(0),
    "cpu_prob": st.sampled_from([0.0, 0.1, 0.5]),
    "gpu_prob": st.sampled_from([0.0, 0.1, 0.4]),
    "colocation_scale": st.sampled_from([0.0, 0.5, 2.0]),
    "max_colocation_size": st.sampled_from([None, 2, 4]),
    "seed": st.integers(0, 2**32),
})


def make_dag(a: dict) -> nx.DiGraph:
    a = dict(a)
    a["max_per_level"] = a["min_per_level"] + a.pop("extra_per_level")
    return level_dag(**a)


@settings(max_examples=60, deadline=None)
@given(dag_args)
def test_level_dag_properties(a):
    g = make_dag(a)
    assert nx.is_directed_acyclic_graph(g)
    levels = Counter(lvl for _, lvl in g.nodes(data="level"))
    assert sorted(levels) == list(range(a["levels"]))
    lo, hi = a["min_per_level"], a["min_per_level"] + a["extra_per_level"]
    assert all(lo <= c <= hi for c in levels.values())
    assert list(g.nodes) == list(range(g.number_of_nodes()))
    for key in ("tensor_size", "operations", "ram"):
        lo_v, hi_v = a[key]
        assert all(lo_v <= v <= hi_v for _, v in g.nodes(data=key))
    assert all(c in CONSTRAINTS for _, c in g.nodes(data="constraint"))
    if a["cpu_prob"] == 0:
        assert all(c != "CPU" for _, c in g.nodes(data="constraint"))
    for u, v in g.edges:  # edges go to higher levels only
        assert g.nodes[u]["level"] < g.nodes[v]["level"]
    if a["long_range_fraction"] == 0 and a["max_level_distance"] is not None:
        assert all(g.nodes[v]["level"] - g.nodes[u]["level"] <= a["max_level_distance"]
                   for u, v in g.edges)
    if a["edge_prob"] == 1.0 and a["long_range_fraction"] == 0:
        d = a["max_level_distance"] or a["levels"]
        expected = sum(1 for u in g for v in g
                       if 0 < g.nodes[v]["level"] - g.nodes[u]["level"] <= d)
        assert g.number_of_edges() == expected
    # colocation groups: ids are the group minimum, sizes bounded, constraints compatible
    groups: dict[int, list[int]] = {}
    for n, c in g.nodes(data="colocation"):
        groups.setdefault(c, []).append(n)
    for root, members in groups.items():
        assert root == min(members)
        if a["max_colocation_size"] is not None:
            assert len(members) <= a["max_colocation_size"]
        assert len({g.nodes[m]["constraint"] for m in members} - {"NO"}) <= 1
    if a["colocation_scale"] == 0:
        assert len(groups) == g.number_of_nodes()


@settings(max_examples=20, deadline=None)
@given(dag_args)
def test_level_dag_seeded(a):
    one = json.dumps(to_json(to_op_graph(make_dag(a))), sort_keys=False)
    two = json.dumps(to_json(to_op_graph(make_dag(a))), sort_keys=False)
    assert one == two


def test_level_dag_seed_matters():
    assert to_json(to_op_graph(level_dag(levels=10, seed=1))) != \
        to_json(to_op_graph(level_dag(levels=10, seed=2)))


def test_level_dag_edge_probability():
    # Levels of exactly 20 nodes, distance 1, p = 0.25: 9 level pairs x 400 candidate
    # edges x 0.25 = 900 expected; the binomial sd is sqrt(3600 * 0.25 * 0.75) = 26.
    g = level_dag(levels=10, min_per_level=20, max_per_level=20, edge_prob=0.25,
                  max_level_distance=1, long_range_fraction=0.0, seed=3)
    assert abs(g.number_of_edges() - 900) < 5 * 26


def test_level_dag_colocation_shape():
    # Default shape (the thesis' Fig. 6.1): many pairs, fewer large groups.
    g = level_dag(seed=0)
    sizes = Counter(Counter(c for _, c in g.nodes(data="colocation")).values())
    assert sizes[2] > 0 and max(sizes) > 2
    assert sizes[2] >= sizes[max(sizes)]


def test_level_dag_thesis_csv_round_trip(tmp_path):
    g = level_dag(levels=15, seed=7)
    write_graph(g, tmp_path / "g.csv")
    h = read_graph(tmp_path / "g.csv")
    assert set(h.edges) == set(g.edges)
    keep = ("tensor_size", "operations", "ram", "constraint", "name", "colocation")
    assert all({k: g.nodes[n][k] for k in keep} == h.nodes[n] for n in g)


def test_level_dag_op_graph_simulates():
    og = to_op_graph(level_dag(levels=20, seed=5))
    validate(og)
    s = simulate(og)
    check_schedule(compile_graph(og), s)


@pytest.mark.parametrize("kw", [dict(levels=0), dict(min_per_level=5, max_per_level=2),
                                dict(edge_prob=1.5), dict(tensor_size=(5, 1)),
                                dict(cpu_prob=0.6, gpu_prob=0.6), dict(max_level_distance=0),
                                dict(max_colocation_size=1)])
def test_level_dag_bad_args(kw):
    with pytest.raises(ValueError):
        level_dag(**kw)
