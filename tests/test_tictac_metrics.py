"""TicTac SysML Sec. 3.2: makespan bounds (Eqs. 1-2), efficiency E (Eq. 3), speedup S (Eq. 4)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from commsched.errors import CommschedError
from commsched.model.graph import add_op, compile_graph, new_graph
from commsched.sim import check_schedule, simulate
from commsched.tictac.bruteforce import random_instance
from commsched.tictac.metrics import (
    efficiency,
    makespan_lower_bound,
    makespan_upper_bound,
    overlap_metrics,
    speedup,
)
from commsched.trace.synthetic import seq_n


def test_seq_n_bounds_and_orders():
    # Seq-4, unit times: U = 4 recvs + 4 computes = 8; L = max(net 4, cpu 4) = 4.
    g = seq_n(4)
    assert makespan_upper_bound(g) == 8.0 and makespan_lower_bound(g) == 4.0
    # S = (8 - 4) / 4 = 1: overlap can at most halve the iteration.
    assert speedup(g) == 1.0
    # The layer order has makespan N + 1 = 5: E = (8 - 5) / (8 - 4) = 0.75; the reversed
    # order has 2N = 8 = U: E = 0 (no overlap at all).
    best = simulate(g, priorities={f"recv_{i}": i for i in range(4)})
    worst = simulate(g, priorities={f"recv_{i}": -i for i in range(4)})
    for s, pr in ((best, {f"recv_{i}": i for i in range(4)}),
                  (worst, {f"recv_{i}": -i for i in range(4)})):
        check_schedule(compile_graph(g, pr), s)
    assert efficiency(g, best) == 0.75 and efficiency(g, worst.makespan) == 0.0
    assert overlap_metrics(g, 5.0) == {"upper_bound": 8.0, "lower_bound": 4.0,
                                       "efficiency": 0.75, "speedup": 1.0}


def test_capacity_and_degenerate_cases():
    g = new_graph({"cpu": 2, "net": 1})
    for i in range(4):
        add_op(g, f"c{i}", "compute", "cpu", 1.0)
    add_op(g, "r", "recv", "net", 1.5)
    # cpu load 4 over 2 slots = 2 > net 1.5.
    assert makespan_lower_bound(g) == 2.0 and makespan_upper_bound(g) == 5.5
    one = new_graph({"cpu": 1})
    add_op(one, "c", "compute", "cpu", 2.0)
    assert efficiency(one, 2.0) == 1.0  # U == L: every schedule is optimal
    assert speedup(one) == 0.0
    zero = new_graph({"cpu": 1})
    assert speedup(zero) == 0.0 and makespan_lower_bound(zero) == 0.0


def test_out_of_bounds_makespan_is_an_error():
    g = seq_n(2)
    with pytest.raises(CommschedError, match="outside the bounds"):
        efficiency(g, 1.0)
    with pytest.raises(CommschedError, match="outside the bounds"):
        efficiency(g, 4.5)


@settings(max_examples=80, deadline=None)
@given(st.integers(1, 8), st.integers(0, 10**6), st.integers(1, 3),
       st.randoms(use_true_random=False))
def test_every_order_between_bounds(n, seed, channels, rnd):
    """Any recv order's makespan lies in [L, U] (Eqs. 1-2) and E in [0, 1] (Eq. 3)."""
    g = random_instance(n, seed, channels=channels)
    recvs = [v for v, a in g.nodes(data=True) if a["kind"] == "recv"]
    rnd.shuffle(recvs)
    prios = {r: float(k) for k, r in enumerate(recvs)}
    s = simulate(g, priorities=prios)
    check_schedule(compile_graph(g, prios), s)
    lo, hi = makespan_lower_bound(g), makespan_upper_bound(g)
    assert lo - 1e-9 <= s.makespan <= hi + 1e-9
    assert 0.0 <= efficiency(g, s) <= 1.0
    assert speedup(g) >= 0.0
