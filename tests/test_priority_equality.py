"""The compiled priority executor (:mod:`commsched.sim.priority`, a numba event loop) and
:func:`~commsched.model.graph.compile_graph` against the pure-Python implementation they
replaced (``tests/priority_reference.py``, issue 25): on random DAGs, every op's start and
end time is exactly equal, for both tie policies."""

from __future__ import annotations

import networkx as nx
import priority_reference
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from commsched.model.graph import add_op, compile_graph, new_graph
from commsched.sim import check_schedule, simulate, simulate_compiled

DURATIONS = st.sampled_from([0.0, 0.5, 1.0, 1.5, 3.0]) | st.floats(0.0, 4.0)  # equal ends
PRIORITIES = (st.integers(-2, 3) | st.sampled_from([0.5, 2.0, -1.5])
              | st.integers(2**60, 2**60 + 2))  # beyond 2**53: ranked exactly


@st.composite
def graphs(draw):
    """A random op graph (node order a random permutation of a topological order, edges
    added in random order), as it is, as a subgraph view or as a reversed view; and
    priorities overriding some ops'."""
    caps = draw(st.lists(st.integers(1, 3), min_size=1, max_size=4))
    g = new_graph({f"r{k}": c for k, c in enumerate(caps)})
    n = draw(st.integers(0, 30))
    col = st.lists  # one draw per column, not per op: fast generation
    res = draw(col(st.integers(0, len(caps) - 1), min_size=n, max_size=n))
    dur = draw(col(DURATIONS, min_size=n, max_size=n))
    prio = draw(col(st.none() | PRIORITIES, min_size=n, max_size=n))
    for i in draw(st.permutations(range(n))):
        add_op(g, f"o{i}", "compute", f"r{res[i]}", dur[i],
               **({} if prio[i] is None else {"priority": prio[i]}))
    if n > 1:
        pairs = draw(col(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)),
                         max_size=3 * n))
        g.add_edges_from((f"o{min(u, v)}", f"o{max(u, v)}") for u, v in pairs if u != v)
    view = draw(st.sampled_from(["graph", "subgraph", "reverse"]))
    if view == "subgraph":
        keep = draw(col(st.booleans(), min_size=n, max_size=n))
        g = g.subgraph(f"o{i}" for i in range(n) if keep[i])
    elif view == "reverse":
        g = g.reverse(copy=False)
    override = draw(st.dictionaries(st.sampled_from(list(g.nodes)), PRIORITIES,
                                    max_size=5)) if len(g) else {}
    return g, override


@settings(max_examples=200, deadline=None)
@given(graphs(), st.sampled_from(["fifo", "random"]), st.integers(0, 2**32) | st.none())
def test_equal_to_the_python_executor(case, tie, seed):
    g, override = case
    cg = compile_graph(g, override)
    assert cg == priority_reference.compile_graph(g, override)
    s = simulate_compiled(cg, tie=tie, seed=seed)
    if seed is None:  # a fresh seed from the OS per run: no reference to compare with
        check_schedule(cg, s)
        return
    start, end = priority_reference.simulate(cg, tie, seed)
    assert s.start == start and s.end == end
    assert simulate(g, override, tie=tie, seed=seed) == s


def test_exact_order_of_large_integer_priorities():
    # 2**60 + 1 and 2**60 are one float64: the keys are their ranks instead.
    g = new_graph({"net": 1})
    add_op(g, "a", "recv", "net", 1.0, priority=2**60 + 1)
    add_op(g, "b", "recv", "net", 1.0, priority=2**60)
    assert simulate(g).ops == {"a": (1.0, 2.0), "b": (0.0, 1.0)}


def test_cycle_is_an_error():
    g = nx.DiGraph(resources={"cpu": 1})
    for op in "abc":
        add_op(g, op, "compute", "cpu", 1.0)
    g.add_edges_from([("a", "b"), ("b", "c"), ("c", "b")])
    with pytest.raises(ValueError, match="2 ops never became ready"):
        simulate(g)


def test_unknown_tie_policy():
    with pytest.raises(ValueError, match="unknown tie policy"):
        simulate(new_graph({"cpu": 1}), tie="lifo")  # type: ignore[arg-type]
