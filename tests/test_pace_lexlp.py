"""LP (10)'s lexicographic objective solved as a sequence of LPs (PACE Sec. IV-B).

On tiny problems the sequence's order vector ``alpha`` equals the brute-force lexmin of
``alpha`` over every 0/1 assignment of LP (14)'s constraints, LP (14)'s (where its
coefficients fit floating point) and preemptive largest-tail-first's; its schedule is
valid and integral (Theorem 2), and grouping levels into one LP changes nothing.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from commsched.cost import LinkModel, RingAllReduce
from commsched.model.traced import load_trace
from commsched.pace.lp import PaperLPError, lexicographic_lp, paper_lp
from commsched.pace.model import build_model
from commsched.pace.schedule import check, jackson, objective, order_vector
from commsched.pace.slots import SlotProblem, to_problem


@st.composite
def problems(draw, max_n=3, max_p=2, max_r=2):
    n = draw(st.integers(1, max_n))
    return SlotProblem(
        release=tuple(draw(st.lists(st.integers(0, max_r), min_size=n, max_size=n))),
        proc=tuple(draw(st.lists(st.integers(1, max_p), min_size=n, max_size=n))),
        tail=tuple(draw(st.lists(st.integers(0, 3).map(float), min_size=n, max_size=n))),
    )


def brute_lexmin(p: SlotProblem) -> tuple[list[float], list[dict[int, tuple[int, ...]]]]:
    """Lexmin of ``alpha`` over every 0/1 ``x`` with (3), (6), (7), by enumeration (each
    slot idle or given to one released op, at least ``p_i`` slots each), and every
    minimiser."""
    best: list[float] | None = None
    argbest: list[dict[int, tuple[int, ...]]] = []
    big_t = p.horizon

    def walk(s: int, x: dict[int, tuple[int, ...]]) -> None:
        nonlocal best, argbest
        need = sum(max(0, p.proc[i] - len(x[i])) for i in range(p.n))
        if need > big_t - s:
            return
        if s == big_t:
            # alpha of a 0/1 x, extra slots included (order_vector takes schedules only)
            a = sorted(((t + 1 if t in x[i] else 0) + p.tail[i]
                        for i in range(p.n) for t in range(big_t)), reverse=True)
            if best is None or a < best:
                best, argbest = a, [dict(x)]
            elif a == best:
                argbest.append(dict(x))
            return
        walk(s + 1, x)
        for i in range(p.n):
            if s >= p.release[i]:
                walk(s + 1, {**x, i: (*x[i], s)})

    walk(0, {i: () for i in range(p.n)})
    assert best is not None
    return best, argbest


@settings(max_examples=50, deadline=None)
@given(p=problems())
def test_sequence_is_the_brute_force_lexmin_and_lp14s_on_tiny_problems(p):
    best, argbest = brute_lexmin(p)
    sol = lexicographic_lp(p)
    check(p, sol.schedule)
    assert order_vector(p, sol.schedule) == best
    assert sol.schedule in argbest
    assert order_vector(p, paper_lp(p)) == best  # these fit LP (14)'s coefficients
    assert order_vector(p, jackson(p)) == best  # largest-tail-first: lexicographically optimal
    if len(argbest) == 1:  # a unique optimum: the very schedule LP (14) finds
        assert sol.schedule == paper_lp(p)
    assert sol.top == best[0]
    assert objective(p, sol.schedule) == objective(p, jackson(p))


@settings(max_examples=25, deadline=None)
@given(p=problems(max_n=8, max_p=5, max_r=12))
def test_one_level_per_lp_and_grouped_levels_agree(p):
    grouped, single = lexicographic_lp(p), lexicographic_lp(p, max_weight=1.0)
    assert (order_vector(p, grouped.schedule) == order_vector(p, single.schedule)
            == order_vector(p, jackson(p)))
    assert grouped.lp_solves <= single.lp_solves


def test_theorem2_integral_schedule_on_a_traced_model_lp14_cannot_take():
    # thesis CNN at 5 ms slots: LP (14) needs 1e35 coefficients; the sequence needs none.
    m = build_model(load_trace("data/traces/thesis_cnn-train-b8.json.gz"))
    p = to_problem(m, RingAllReduce(8, LinkModel(50e-6, 10e9 / 8)), slot_s=0.005).integral()
    sol = lexicographic_lp(p)  # raises unless every stage and x_i(t) is integral
    check(p, sol.schedule)
    assert order_vector(p, sol.schedule) == order_vector(p, jackson(p))
    assert sol.lp_solves < sol.levels


def test_clear_errors():
    with pytest.raises(PaperLPError, match="integer tails"):
        lexicographic_lp(SlotProblem((0,), (1,), (0.5,)))
    assert lexicographic_lp(SlotProblem((), (), ())).schedule == {}
