"""PACE's schedule as linear programs solved by HiGHS (through PuLP): the paper's LP (14)
and a numerically sound formulation.

:func:`paper_lp` builds LP (14) exactly as Sec. IV-B writes it: variables ``x_i(t)``,
``lambda^0_i(t)``, ``lambda^1_i(t)`` for every op ``i`` and slot ``t in [T]`` (1-based),
constraints (3) ``sum_t x_i(t) >= p_i``, (6) ``sum_i x_i(t) <= 1``, (7) ``x_i(t) = 0``
before the release (our reading of its off-by-one: ``t <= r_i``, see
:mod:`commsched.pace.model`), (12) ``x = lambda^1``, (13) ``lambda^0 + lambda^1 = 1``,
``lambda >= 0``, integrality (8) dropped (Theorem 2: the constraint matrix is totally
unimodular), and the objective
``sum_{t,i} (TN)^{q_i} lambda^0_i(t) + (TN)^{t + q_i} lambda^1_i(t)``. The horizon is
``T = max r + sum p`` (:attr:`SlotProblem.horizon`). The exponent trick needs integer
tails (:meth:`SlotProblem.integral`).

**Where LP (14) breaks.** The coefficients grow as ``(TN)^(T + q)``: past a dozen or so
slots they exceed what HiGHS accepts as a finite cost (``1e20``, its ``infinite_cost``
option) and, past about 300 digits, a double. ``benchmarks/bench_pace.py`` (case
``paper_lp``, ``benchmarks/results/pace.json``) solved 240 seeded random problems with
the guard off: all 97 with a largest coefficient up to ``1e20`` came back exact; between
``1e20`` and ``1e32.7`` HiGHS solved 32 of 48 exactly and returned no optimum ("Not
Solved") on the others, the first from ``1e21.2``; above ``1e32.7`` it solved none. It
never returned a wrong optimum; the largest horizon solved was 17 slots. At 5 ms slots
(8 workers, 10 Gbit/s) the problems of our traced models need ``(TN)^(T+q)`` of ``1e35``
(the smallest thesis CNN) and ``1e53`` to ``1e3000`` (the paper's four and the TicTac
models, fused or not; ``results/tables/pace_solvers.csv``).
:data:`PAPER_LP_MAX_COEF` is therefore where we stop: above it :func:`paper_lp` raises
:class:`PaperLPTooLarge` naming the coefficient instead of trying. It also raises when
HiGHS does not report an optimum, or the optimum is not integral (Theorem 2) or not a
valid schedule.

:func:`sound_lp` solves the same problem at full scale with small coefficients:

1. **Bottleneck.** For a bound ``C`` on the DAG's end (in slots), op ``i`` must finish by
   its deadline ``d_i(C) = floor(C - q_i)`` (an exclusive slot bound). Whether every op
   fits is a transportation problem: cut time at every release and deadline into
   intervals; ``x_{iI}`` slots of interval ``I`` go to op ``i`` (only intervals inside
   ``[r_i, d_i)``), ``sum_I x_{iI} = p_i``, ``sum_i x_{iI} <= |I|`` (bipartite, so totally
   unimodular: integral vertices). The smallest feasible ``C`` among the candidate values
   ``t + q_i`` is found by bisection, one LP per step.
2. **Refinement.** At that ``C``, one more LP picks, among the optimal schedules, one that
   does the work as early as possible (minimum ``sum x_{iI} * start(I)``), which leaves
   the channel free soonest.

Within an interval the slots are dealt to the ops in index order (any order is valid: no
release or deadline falls inside an interval).

Examples
--------
>>> from commsched.pace.slots import SlotProblem
>>> from commsched.pace.schedule import objective
>>> p = SlotProblem(release=(0, 1), proc=(3, 1), tail=(1.0, 4.0))
>>> objective(p, paper_lp(p)), objective(p, sound_lp(p))
(6.0, 6.0)
"""

from __future__ import annotations

import itertools
import math

import pulp

from commsched.errors import CommschedError
from commsched.pace.schedule import Schedule, check
from commsched.pace.slots import SlotProblem

__all__ = [
    "PAPER_LP_MAX_COEF",
    "PaperLPError",
    "PaperLPTooLarge",
    "paper_lp",
    "paper_lp_max_coef",
    "sound_lp",
]

#: Largest objective coefficient ``(TN)^(T + max q)`` :func:`paper_lp` accepts: HiGHS
#: treats costs of 1e20 and more as infinite (option ``infinite_cost``).
PAPER_LP_MAX_COEF = 1e20
# Tolerance for "integral" (Theorem 2) and for the floor in the deadlines.
_INT_TOL = 1e-6
_EPS = 1e-9


class PaperLPError(CommschedError):
    """LP (14) cannot give a trustworthy answer for this problem.

    References
    ----------
    PACE (Bao et al., INFOCOM 2020), Sec. IV-B, LP (14) and Theorem 2.
    """


class PaperLPTooLarge(PaperLPError):
    """LP (14)'s coefficients exceed :data:`PAPER_LP_MAX_COEF`: refused before solving.

    References
    ----------
    PACE (Bao et al., INFOCOM 2020), Sec. IV-B: the objective's weights ``(TN)^(t+q)``.
    """


def _solver() -> pulp.LpSolver:
    return pulp.HiGHS(msg=False)


def paper_lp_max_coef(problem: SlotProblem) -> tuple[int, float]:
    """The base and exponent of LP (14)'s largest coefficient, ``(TN)^(T + max q)``.

    Parameters
    ----------
    problem : SlotProblem
        The problem (``T`` its horizon, ``N`` its operators).

    Returns
    -------
    (int, float)
        ``TN`` and ``T + max q``.

    References
    ----------
    PACE (Bao et al., INFOCOM 2020), Sec. IV-B, LP (14).
    """
    tn = problem.horizon * problem.n
    return tn, problem.horizon + max(problem.tail, default=0.0)


def paper_lp(problem: SlotProblem, max_coef: float = PAPER_LP_MAX_COEF) -> Schedule:
    """Solve LP (14) as written (module docstring).

    Parameters
    ----------
    problem : SlotProblem
        The problem, with integral tails (:meth:`SlotProblem.integral`).
    max_coef : float
        Refuse problems whose largest coefficient exceeds it.

    Returns
    -------
    Schedule
        An optimal schedule (Theorem 2: the LP's optimum is integral).

    Raises
    ------
    PaperLPError
        When a tail is not integral, or HiGHS reports no optimum or a solution that is not
        integral or not a schedule.
    PaperLPTooLarge
        When the largest coefficient exceeds ``max_coef`` (naming it).

    References
    ----------
    PACE (Bao et al., INFOCOM 2020), Sec. IV-B, LP (14) and Theorem 2.
    """
    if any(q != math.floor(q) for q in problem.tail):
        raise PaperLPError("LP (14) needs integer tails (use SlotProblem.integral())")
    tn, top = paper_lp_max_coef(problem)
    log10_coef = top * math.log10(tn) if tn > 1 else 0.0
    if log10_coef > math.log10(max_coef):
        raise PaperLPTooLarge(
            f"LP (14) would need coefficients up to (TN)^(T+L) = {tn}^{top:g} = 1e{log10_coef:.0f} "
            f"(T={problem.horizon} slots, N={problem.n}), above {max_coef:.0e}: its "
            "lexicographic transform does not fit floating point; use the sound LP or the "
            "exact solver"
        )
    big_t = problem.horizon
    lp = pulp.LpProblem("pace_lp14", pulp.LpMinimize)
    idx = [(i, t) for i in range(problem.n) for t in range(1, big_t + 1)]
    x = {k: lp.add_variable(f"x_{k[0]}_{k[1]}", lowBound=0) for k in idx}
    lam0 = {k: lp.add_variable(f"l0_{k[0]}_{k[1]}", lowBound=0) for k in idx}
    lam1 = {k: lp.add_variable(f"l1_{k[0]}_{k[1]}", lowBound=0) for k in idx}
    lp += pulp.lpSum(
        float(tn) ** problem.tail[i] * lam0[i, t] + float(tn) ** (t + problem.tail[i]) * lam1[i, t]
        for i, t in idx
    )
    for i in range(problem.n):  # (3)
        lp += pulp.lpSum(x[i, t] for t in range(1, big_t + 1)) >= problem.proc[i], f"c3_{i}"
    for t in range(1, big_t + 1):  # (6)
        lp += pulp.lpSum(x[i, t] for i in range(problem.n)) <= 1, f"c6_{t}"
    for i, t in idx:
        if t <= problem.release[i]:  # (7)
            lp += x[i, t] == 0, f"c7_{i}_{t}"
        lp += x[i, t] == lam1[i, t], f"c12_{i}_{t}"
        lp += lam0[i, t] + lam1[i, t] == 1, f"c13_{i}_{t}"
    status = lp.solve(_solver())
    if pulp.LpStatus[status] != "Optimal":
        raise PaperLPError(f"LP (14): HiGHS reports {pulp.LpStatus[status]!r}, not an optimum")
    schedule: dict[int, list[int]] = {i: [] for i in range(problem.n)}
    for (i, t), var in x.items():
        v = var.value() or 0.0
        if min(abs(v), abs(v - 1)) > _INT_TOL:
            raise PaperLPError(
                f"LP (14): x_{i}({t}) = {v:g} is not integral (Theorem 2 says the optimum is)"
            )
        if v > 0.5:
            schedule[i].append(t - 1)
    out = {i: tuple(ts) for i, ts in schedule.items()}
    try:
        check(problem, out)
    except CommschedError as e:
        raise PaperLPError(f"LP (14): the solution is not a valid schedule: {e}") from None
    return out


def _deadlines(problem: SlotProblem, c: float) -> list[int]:
    return [math.floor(c - q + _EPS) for q in problem.tail]


def _transport(problem: SlotProblem, c: float, refine: bool
               ) -> tuple[bool, Schedule | None]:
    """Transportation LP for bound ``c``: (feasible, schedule when ``refine``)."""
    dl = _deadlines(problem, c)
    if any(d - r < p for r, d, p in zip(problem.release, dl, problem.proc, strict=True)):
        return False, None
    points = sorted(set(problem.release) | set(dl))
    intervals = list(itertools.pairwise(points))
    lp = pulp.LpProblem("pace_transport", pulp.LpMinimize)
    x: dict[tuple[int, int], pulp.LpVariable] = {}
    for i in range(problem.n):
        for k, (a, b) in enumerate(intervals):
            if problem.release[i] <= a and b <= dl[i]:
                x[i, k] = lp.add_variable(f"x_{i}_{k}", lowBound=0, upBound=b - a)
    lp += pulp.lpSum(v * intervals[k][0] for (_, k), v in x.items()) if refine else 0
    by_op: dict[int, list[pulp.LpVariable]] = {i: [] for i in range(problem.n)}
    by_interval: dict[int, list[pulp.LpVariable]] = {}
    for (i, k), v in x.items():
        by_op[i].append(v)
        by_interval.setdefault(k, []).append(v)
    for i, terms in by_op.items():
        lp += pulp.lpSum(terms) == problem.proc[i], f"p_{i}"
    for k, terms in by_interval.items():
        a, b = intervals[k]
        lp += pulp.lpSum(terms) <= b - a, f"cap_{k}"
    status = pulp.LpStatus[lp.solve(_solver())]
    if status == "Infeasible":
        return False, None
    if status != "Optimal":
        raise CommschedError(f"sound LP: HiGHS reports {status!r} for bound {c:g}")
    if not refine:
        return True, None
    amount: dict[tuple[int, int], int] = {}
    for key, var in x.items():
        v = var.value() or 0.0
        if abs(v - round(v)) > _INT_TOL:
            raise CommschedError(f"sound LP: x{key} = {v:g} is not integral")
        amount[key] = round(v)
    schedule: dict[int, list[int]] = {i: [] for i in range(problem.n)}
    for k, (a, _) in enumerate(intervals):
        t = a
        for i in range(problem.n):
            m = amount.get((i, k), 0)
            schedule[i].extend(range(t, t + m))
            t += m
    out = {i: tuple(sorted(ts)) for i, ts in schedule.items()}
    check(problem, out)
    return True, out


def _fifo_bound(problem: SlotProblem) -> float:
    """The end of the FIFO (release order, no preemption) schedule: an upper bound."""
    t = 0
    end = 0.0
    for i in sorted(range(problem.n), key=lambda i: (problem.release[i], i)):
        t = max(t, problem.release[i]) + problem.proc[i]
        end = max(end, t + problem.tail[i])
    return end


def sound_lp(problem: SlotProblem) -> Schedule:
    """An optimal schedule by the bottleneck and refinement LPs (module docstring).

    Parameters
    ----------
    problem : SlotProblem
        The problem (tails need not be integral).

    Returns
    -------
    Schedule
        An optimal schedule of ``max(C0, max_i(y_i + q_i))``.

    Raises
    ------
    CommschedError
        If HiGHS fails.

    References
    ----------
    PACE (Bao et al., INFOCOM 2020), Sec. IV-B (the objective of LP (14), solved
    without its exponential weights).
    """
    if problem.n == 0:
        return {}
    lower = max(r + p + q for r, p, q in
                zip(problem.release, problem.proc, problem.tail, strict=True))
    upper = _fifo_bound(problem)
    cands = sorted({t + q for q in problem.tail for t in range(1, problem.horizon + 1)
                    if lower - _EPS <= t + q <= upper + _EPS})
    lo, hi = 0, len(cands) - 1  # cands[hi] (>= the FIFO end) is feasible
    while lo < hi:
        mid = (lo + hi) // 2
        if _transport(problem, cands[mid], refine=False)[0]:
            hi = mid
        else:
            lo = mid + 1
    _, schedule = _transport(problem, cands[lo], refine=True)
    assert schedule is not None
    return schedule

