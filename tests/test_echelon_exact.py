"""The exact EchelonFlow solver: against brute force, hand-derived optima, every heuristic."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from commsched.echelon.exact import (
    brute_force_priorities,
    optimality_gaps,
    random_instance,
    solve_exact,
)
from commsched.echelon.model import EchelonFlow, flow_table, simulate_echelonflows
from commsched.echelon.schedulers import ECHELON_SCHEDULERS, FLOW_SCHEDULERS
from commsched.errors import CommschedError
from commsched.sim.flow import big_switch, check_flow_schedule, two_tier


def test_two_coflows_on_one_link_hand_derived() -> None:
    # One 1 byte/s link; Coflow A: 1 byte, B: 3 bytes, both released at 0, ideal 0.
    # A first: t = (1, 4), sum 5; B first: (4, 3), sum 7; sharing only delays A.
    # Weights (1, 3): A first costs 1 + 12 = 13, B first 4 + 9 = 13 ... tie broken by
    # nothing: both 13, and any split of the link is no better (the last byte of the
    # later one always ends at 4). Weights (1, 4): B first 4 + 12 = 16 < A first 17.
    net = big_switch(2, 1.0)
    a = EchelonFlow([0], [1], [1.0], [0.0], [0.0])
    b = EchelonFlow([0], [1], [3.0], [0.0], [0.0], weight=4.0)
    assert solve_exact(net, [a, EchelonFlow([0], [1], [3.0], [0.0], [0.0])]).objective \
        == pytest.approx(5.0)
    res = solve_exact(net, [a, b])
    assert res.objective == pytest.approx(16.0)
    assert res.finish.tolist() == pytest.approx([4.0, 3.0])


def test_staggered_release_hand_derived() -> None:
    # A GPipe EchelonFlow H (ideal 0, 1; 1-byte flows released at 0, 1) and a Coflow C
    # (one 2-byte flow released at 0, ideal 0) from host 0 to host 1 at 1 byte/s.
    # H first at each moment: H's flows on [0,1], [1,2], C on [2,4]: t_H = 1, t_C = 4: 5.
    # C first: C on [0,2], H on [2,3], [3,4]: t_C = 2, t_H = max(3, 3) = 3: 5.
    # Mixed: H0 [0,1], C [1,3], H1 [3,4]: t_H = 3, t_C = 3: 6. Optimum 5.
    net = big_switch(2, 1.0)
    h = EchelonFlow([0, 0], [1, 1], [1.0, 1.0], [0.0, 1.0], [0.0, 1.0])
    c = EchelonFlow([0], [1], [2.0], [0.0], [0.0])
    assert solve_exact(net, [h, c]).objective == pytest.approx(5.0)
    assert brute_force_priorities(net, [h, c])[0] == pytest.approx(5.0)


@settings(max_examples=10, deadline=None)
@given(st.integers(0, 2**31 - 1), st.integers(1, 3), st.integers(1, 2))
def test_exact_equals_brute_force_on_one_link(seed: int, groups: int, k: int) -> None:
    assume(groups * k <= 5)
    # every flow from host 0 to host 1: one bottleneck, where the best priority order is
    # optimal (EDF with the optimal finish times as deadlines), so both must agree
    rng = np.random.default_rng(seed)
    hs = [EchelonFlow([0] * len(h), [1] * len(h), h.size, h.release, h.offset)
          for h in random_instance(rng, 2, groups, k)]
    net = big_switch(2, 1.0)
    best, _ = brute_force_priorities(net, hs)
    assert solve_exact(net, hs).objective == pytest.approx(best, rel=1e-6, abs=1e-6)


@settings(max_examples=8, deadline=None)
@given(st.integers(0, 2**31 - 1), st.integers(3, 4), st.booleans())
def test_exact_is_a_valid_schedule_and_beats_every_heuristic(seed: int, hosts: int,
                                                             tiered: bool) -> None:
    rng = np.random.default_rng(seed)
    hs = random_instance(rng, hosts, 2, 2)
    net = two_tier(2, 2, 1.0, 2.0) if tiered else big_switch(hosts, 1.0)
    tab = flow_table(hs)
    res = solve_exact(net, tab)
    check_flow_schedule(net, tab.src, tab.dst, tab.size, tab.release, res.result)
    assert res.objective == pytest.approx(float(np.sum(res.tardiness)))
    brute, _ = brute_force_priorities(net, tab)
    assert res.objective <= brute + 1e-6
    for name, make in ((n, FLOW_SCHEDULERS[n]) for n in ECHELON_SCHEDULERS):
        assert res.objective <= simulate_echelonflows(net, tab, make()).objective + 1e-6, name


def test_optimality_gaps_table() -> None:
    df = optimality_gaps(seed=3, instances=2, hosts=3, groups=2, flows_per_group=2)
    assert set(df["policy"]) == {"fair", "sebf", *ECHELON_SCHEDULERS}
    assert len(df) == 2 * (2 + len(ECHELON_SCHEDULERS))
    assert (df["gap"] >= -1e-6).all() and (df["optimum"] > 0).all()
    again = optimality_gaps(seed=3, instances=2, hosts=3, groups=2, flows_per_group=2)
    assert df.equals(again)  # seeded


def test_limits_are_one_line_errors() -> None:
    net = big_switch(2, 1.0)
    many = [EchelonFlow([0] * 13, [1] * 13, [1.0] * 13, [0.0] * 13, [0.0] * 13)]
    with pytest.raises(CommschedError, match="at most 12"):
        solve_exact(net, many)
    # a solve cut short by the time limit is an error, never a merely feasible "optimum"
    # (PuLP calls a time-limited HiGHS solution with an incumbent "Optimal")
    hard = random_instance(np.random.default_rng(0), 3, 6, 2)
    with pytest.raises(CommschedError, match=r"no proven optimum .*time limit 0\.2 s, 12 flows"):
        solve_exact(big_switch(3, 1.0), hard, upper=47.0, time_limit=0.2)
    with pytest.raises(CommschedError, match="at most 8"):
        brute_force_priorities(net, [EchelonFlow([0] * 9, [1] * 9, [1.0] * 9, [0.0] * 9,
                                                 [0.0] * 9)])


def test_echelon_core_experiment_writes_its_outputs(tmp_path) -> None:
    from commsched.echelon.experiments.core import main
    from commsched.results import read_metrics, read_table
    out = {k: tmp_path / f"{k}.csv" for k in ("table1", "fig2", "gaps", "metrics")}
    assert main(["--seed", "1", "--instances", "2", "--hosts", "3", "--groups", "2",
                 "--flows-per-group", "2", *[f"--{k}={v}" for k, v in out.items()]]) == 0
    m = {k: v for k, (v, _) in read_metrics([out["metrics"]]).items()}
    assert m["echelon_core.fig2.optimum.tardiness_s"] == pytest.approx(4.0)
    assert m["echelon_core.fig2.echelon-edf-total.excess_over_optimum_s"] == pytest.approx(0.0)
    assert m["echelon_core.table1.fsdp.arrangement_code"] == 2.0
    assert m["echelon_core.gaps.instances"] == 2.0
    assert m["echelon_core.property2.instances"] == 2.0
    assert m["echelon_core.property2.max_abs_diff_s"] == pytest.approx(0.0, abs=1e-6)
    assert len(read_table(out["table1"])) == 6
    assert main(["--seed", "1", "--instances", "0", "--hosts", "3", "--groups", "2",
                 "--flows-per-group", "2", *[f"--{k}={v}" for k, v in out.items()]]) == 2


def test_property2_coflow_tardiness_is_its_completion_time(monkeypatch) -> None:
    """Property 2 by hand: a Coflow released at 1 s with 2 + 3 bytes leaving host 0 (and
    3 + 1 entering host 2) on 1 byte/s ports completes at the earliest 5 s after its
    release, and its minimum tardiness is those 5 s."""
    from commsched.echelon import arrangement
    from commsched.echelon.experiments import core
    h = EchelonFlow([0, 0, 1], [1, 2, 2], [2.0, 3.0, 1.0], [1.0] * 3, arrangement.coflow(3))
    assert solve_exact(big_switch(3, 1.0), [h]).objective == pytest.approx(5.0)
    assert core.property2_metrics(3, 4, 3, 3) == {
        "echelon_core.property2.instances": 4.0, "echelon_core.property2.max_abs_diff_s":
        pytest.approx(0.0, abs=1e-6)}
    real = core.solve_exact
    monkeypatch.setattr(core, "solve_exact", lambda net, hs: type(
        "R", (), {"objective": real(net, hs).objective + 1.0})())
    assert core.property2_metrics(3, 4, 3, 3)["echelon_core.property2.max_abs_diff_s"] == \
        pytest.approx(1.0)
