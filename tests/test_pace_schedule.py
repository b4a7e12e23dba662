"""The optimal preemptive schedule three ways (PACE Sec. IV-B), proven equal.

(c) preemptive largest-tail-first (:func:`jackson`), (a) the paper's LP (14) and (b) the
sound bottleneck/transportation LP all give the optimum of brute force on tiny problems;
(b) = (c) on random problems and on every traced training model; (a) = (c) wherever (a)
solves, and (a) fails with a clear error, not a wrong answer, where it cannot.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from commsched.cost import LinkModel, RingAllReduce
from commsched.errors import CommschedError
from commsched.model.traced import load_trace
from commsched.pace.lp import PAPER_LP_MAX_COEF, PaperLPError, PaperLPTooLarge, paper_lp, sound_lp
from commsched.pace.model import build_model
from commsched.pace.schedule import brute_force, check, jackson, objective
from commsched.pace.slots import SlotProblem, to_problem

TRACES = sorted(Path("data/traces").glob("*-train-*.json.gz"))


@st.composite
def problems(draw, max_n=4, max_p=3, max_r=4, integral=False):
    n = draw(st.integers(1, max_n))
    tail = (st.integers(0, 4).map(float) if integral
            else st.floats(0.0, 5.0, allow_nan=False).map(lambda q: round(q, 2)))
    return SlotProblem(
        release=tuple(draw(st.lists(st.integers(0, max_r), min_size=n, max_size=n))),
        proc=tuple(draw(st.lists(st.integers(1, max_p), min_size=n, max_size=n))),
        tail=tuple(draw(st.lists(tail, min_size=n, max_size=n))),
        base=draw(st.integers(0, 6)).__float__(),
    )


@settings(max_examples=300, deadline=None)
@given(p=problems())
def test_jackson_is_optimal_against_brute_force(p):
    s = jackson(p)
    check(p, s)
    best, bs = brute_force(p)
    assert objective(p, bs) == best
    assert objective(p, s) == best


@settings(max_examples=60, deadline=None)
@given(p=problems(max_n=3, max_p=2, max_r=3, integral=True))
def test_three_solvers_equal_brute_force_on_tiny_problems(p):
    best, _ = brute_force(p)
    assert objective(p, jackson(p)) == best
    assert objective(p, sound_lp(p)) == best
    assert objective(p, paper_lp(p)) == best  # integral optimum: else PaperLPError


@settings(max_examples=60, deadline=None)
@given(p=problems(max_n=12, max_p=8, max_r=30))
def test_sound_lp_equals_jackson_on_random_problems(p):
    assert objective(p, sound_lp(p)) == objective(p, jackson(p))


def test_paper_lp_where_it_solves_and_its_clear_error_where_it_cannot():
    p = SlotProblem(release=(0, 1, 2), proc=(2, 1, 1), tail=(1.0, 3.0, 0.0))
    assert objective(p, paper_lp(p)) == objective(p, jackson(p)) == 5.0
    big = SlotProblem(release=(0, 3), proc=(10, 12), tail=(0.0, 2.0))
    tn, top = 2 * big.horizon, big.horizon + 2
    assert top * math.log10(tn) > math.log10(PAPER_LP_MAX_COEF)
    with pytest.raises(PaperLPTooLarge, match=r"coefficients up to \(TN\)\^\(T\+L\) = 50\^27"):
        paper_lp(big)
    with pytest.raises(PaperLPError, match="integer tails"):
        paper_lp(SlotProblem((0,), (1,), (0.5,)))


def test_paper_lp_optimum_is_integral_theorem2():
    # paper_lp raises unless every x_i(t) is 0 or 1 within 1e-6; several shapes.
    for p in [SlotProblem((0, 0, 0), (1, 2, 1), (2.0, 0.0, 1.0)),
              SlotProblem((0, 2, 2), (2, 1, 1), (0.0, 2.0, 2.0)),
              SlotProblem((1, 0), (2, 3), (0.0, 0.0))]:
        s = paper_lp(p)
        check(p, s)
        assert objective(p, s) == objective(p, jackson(p))


@pytest.mark.parametrize("path", TRACES, ids=[p.name.split(".")[0] for p in TRACES])
def test_sound_lp_equals_jackson_on_every_traced_model(path):
    # 10 Gbit/s, 8 workers; 50 ms slots keep the LPs small in the unit tests (the
    # pipeline's pace_solvers rule checks 5 ms slots).
    m = build_model(load_trace(path))
    p = to_problem(m, RingAllReduce(8, LinkModel(50e-6, 10e9 / 8)), slot_s=0.05)
    assert objective(p, sound_lp(p)) == objective(p, jackson(p))


def test_paper_lp_on_a_traced_model_fails_clearly():
    m = build_model(load_trace("data/traces/thesis_cnn-train-b8.json.gz"))
    p = to_problem(m, RingAllReduce(8, LinkModel(50e-6, 10e9 / 8)), slot_s=0.005).integral()
    with pytest.raises(PaperLPTooLarge, match="does not fit floating point"):
        paper_lp(p)


def test_brute_force_refuses_large_problems():
    with pytest.raises(CommschedError, match="states"):
        brute_force(SlotProblem(tuple(range(8)), (9,) * 8, (0.0,) * 8))
