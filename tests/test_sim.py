"""The priority executor (TicTac Sec. 3 semantics) and the schedule validator."""

from __future__ import annotations

import itertools
import json

import networkx as nx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from commsched.cli import main
from commsched.model.graph import add_op, compile_graph, new_graph, save
from commsched.sim import InvalidSchedule, Schedule, check_schedule, simulate


def run(g: nx.DiGraph, **kw) -> Schedule:
    s = simulate(g, **kw)
    check_schedule(compile_graph(g, kw.get("priorities")), s)
    return s


def two_recvs() -> nx.DiGraph:
    """Two recvs on one channel, each feeding its own compute op."""
    g = new_graph({"net": 1, "cpu": 1})
    add_op(g, "A", "recv", "net", 1.0)
    add_op(g, "B", "recv", "net", 1.0)
    add_op(g, "opA", "compute", "cpu", 3.0)
    add_op(g, "opB", "compute", "cpu", 1.0)
    g.add_edge("A", "opA")
    g.add_edge("B", "opB")
    return g


def test_bad_order_costs_time():
    # Seq-like chain: op1 needs r1, op2 needs op1 and r2. Each recv 2 s, ops 1 s.
    g = new_graph({"net": 1, "cpu": 1})
    for i in (1, 2):
        add_op(g, f"r{i}", "recv", "net", 2.0)
        add_op(g, f"op{i}", "compute", "cpu", 1.0)
        g.add_edge(f"r{i}", f"op{i}")
    g.add_edge("op1", "op2")
    # r1 first: r1[0,2] op1[2,3] r2[2,4] op2[4,5] -> 5.
    assert run(g, priorities={"r1": 0, "r2": 1}).makespan == 5.0
    # r2 first: r2[0,2] r1[2,4] op1[4,5] op2[5,6] -> 6.
    assert run(g, priorities={"r1": 1, "r2": 0}).makespan == 6.0


def test_capacity_runs_concurrently():
    g = new_graph({"cpu": 2})
    for i in range(4):
        add_op(g, f"o{i}", "compute", "cpu", 1.0)
    s = run(g)
    assert s.makespan == 2.0
    assert sorted(s.start) == [0.0, 0.0, 1.0, 1.0]


def test_unprioritized_ops_not_held_back():
    # 'free' has no priority; it became ready first, so fifo runs it before the
    # prioritized op even though that op has priority 0.
    g = new_graph({"cpu": 1})
    add_op(g, "gate", "compute", "cpu", 0.0)
    add_op(g, "free", "compute", "cpu", 1.0)
    add_op(g, "p", "compute", "cpu", 1.0, priority=0)
    g.add_edge("gate", "p")
    s = run(g).ops
    assert s["free"] == (0.0, 1.0) and s["p"] == (1.0, 2.0)


def test_lowest_priority_among_ready():
    g = new_graph({"net": 1})
    for i, p in enumerate([5, 1, 3]):
        add_op(g, f"r{i}", "recv", "net", 1.0, priority=p)
    s = run(g).ops
    assert [s[f"r{i}"][0] for i in range(3)] == [2.0, 0.0, 1.0]


def test_fifo_ties_follow_ready_time_then_graph_order():
    g = new_graph({"net": 1, "cpu": 1})
    add_op(g, "slow", "compute", "cpu", 2.0)
    add_op(g, "late", "recv", "net", 1.0, priority=0)
    add_op(g, "a", "recv", "net", 1.0, priority=0)
    add_op(g, "b", "recv", "net", 1.0, priority=0)
    g.add_edge("slow", "late")
    s = run(g).ops
    assert s["a"] == (0.0, 1.0) and s["b"] == (1.0, 2.0) and s["late"] == (2.0, 3.0)


def test_random_ties_are_seeded():
    g = new_graph({"net": 1})
    for i in range(8):
        add_op(g, f"r{i}", "recv", "net", 1.0)
    a = run(g, tie="random", seed=3).start
    assert a == run(g, tie="random", seed=3).start
    assert any(run(g, tie="random", seed=k).start != a for k in range(4, 10))


def test_zero_duration_chain():
    g = new_graph({"cpu": 1})
    for i in range(3):
        add_op(g, f"z{i}", "compute", "cpu", 0.0)
    g.add_edges_from([("z0", "z1"), ("z1", "z2")])
    assert run(g).makespan == 0.0


@st.composite
def dags(draw):
    n = draw(st.integers(1, 12))
    caps = {"cpu": draw(st.integers(1, 2)), "net": 1}
    g = new_graph(caps)
    for i in range(n):
        add_op(
            g, str(i), draw(st.sampled_from(["compute", "recv"])),
            draw(st.sampled_from(["cpu", "net"])),
            draw(st.sampled_from([0.0, 0.5, 1.0, 2.5])),
            **({"priority": draw(st.integers(0, 3))} if draw(st.booleans()) else {}),
        )
    for u, v in itertools.combinations(range(n), 2):
        if draw(st.booleans()):
            g.add_edge(str(u), str(v))
    return g


@settings(max_examples=150, deadline=None)
@given(dags(), st.sampled_from(["fifo", "random"]), st.integers(0, 100))
def test_every_schedule_is_valid_and_bounded(g, tie, seed):
    s = run(g, tie=tie, seed=seed)
    total = sum(d for _, d in g.nodes(data="duration"))
    # Critical path (node-weighted) <= makespan <= sum of all durations.
    longest: dict[str, float] = {}
    for n in nx.topological_sort(g):
        longest[n] = g.nodes[n]["duration"] + max((longest[p] for p in g.pred[n]), default=0.0)
    assert max(longest.values()) - 1e-9 <= s.makespan <= total + 1e-9


def test_validator_catches_each_rule():
    g = two_recvs()
    cg = compile_graph(g)
    good = simulate(g)
    check_schedule(cg, good)
    start, end = list(good.start), list(good.end)
    i = cg.ids.index("opA")
    with pytest.raises(InvalidSchedule, match="before its predecessor"):
        check_schedule(cg, Schedule(cg.ids, [*start[:i], 0.0, *start[i + 1 :]],
                                    [*end[:i], 3.0, *end[i + 1 :]]))
    with pytest.raises(InvalidSchedule, match="its duration is"):
        check_schedule(cg, Schedule(cg.ids, start, [*end[:i], end[i] + 1, *end[i + 1 :]]))
    a, b = cg.ids.index("A"), cg.ids.index("B")
    both = list(start)
    both[b] = both[a]
    ends = list(end)
    ends[b] = ends[a]
    with pytest.raises(InvalidSchedule, match="runs 2 ops at once"):
        check_schedule(cg, Schedule(cg.ids, both, ends))
    with pytest.raises(InvalidSchedule, match="differ"):
        check_schedule(cg, Schedule(cg.ids[:-1], start[:-1], end[:-1]))


def test_cli_json_and_chrome_trace(tmp_path, capsys):
    g = two_recvs()
    p = tmp_path / "g.json"
    save(g, p)
    prio = tmp_path / "p.json"
    prio.write_text(json.dumps({"priorities": {"A": 0, "B": 1}}))
    trace = tmp_path / "t.json"
    assert main(["simulate", str(p), "--priorities", str(prio), "--json",
                 "--chrome-trace", str(trace)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["makespan"] == 5.0 and out["ops"]["A"] == [0.0, 1.0]
    events = json.loads(trace.read_text())["traceEvents"]
    tracks = {e["args"]["name"] for e in events if e["ph"] == "M"}
    assert tracks == {"net", "cpu"}
    spans = {e["name"]: e for e in events if e["ph"] == "X"}
    assert spans["opA"]["ts"] == 1e6 and spans["opA"]["dur"] == 3e6


def test_cli_bad_priorities(tmp_path, capsys):
    p = tmp_path / "g.json"
    save(two_recvs(), p)
    prio = tmp_path / "p.json"
    prio.write_text(json.dumps({"priorities": {"ghost": 0}}))
    assert main(["simulate", str(p), "--priorities", str(prio)]) == 2
    assert "ghost" in capsys.readouterr().err
