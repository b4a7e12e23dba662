"""PACE's schedule as linear programs solved by HiGHS: the paper's LP (14), its
lexicographic objective as a sequence of LPs, and a numerically sound formulation.

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

:func:`lexicographic_lp` solves the paper's model itself -- problem (10) under the
lexicographic order of ``alpha(x)`` that LP (14) encodes, over LP (14)'s constraints --
without its exponential weights, as a sequence of LPs (lexicographic optimisation):

* **The terms.** The items of ``alpha`` are ``t + L_i`` where ``x_i(t) = 1``
  (``lambda^1``) and ``L_i`` where ``x_i(t) = 0`` (``lambda^0``), integers with integral
  tails. With ``c_v`` the number of items equal to ``v`` (linear in ``x``), ``alpha(x')``
  is lexicographically smaller than ``alpha(x)`` exactly when ``c(x')`` is smaller than
  ``c(x)`` at the largest ``v`` where they differ; LP (14)'s objective is
  ``sum_v (TN)^v c_v``. So: minimise ``c_v`` for the largest ``v``, keep its optimum
  (restrict the LP to the stage's optimal face), go to the next ``v`` down.
* **Keeping an optimum exactly.** The optimal face is written with bounds only, by
  complementary slackness with the stage's dual solution: a free ``x_i(t)`` with a nonzero
  reduced cost is fixed at the bound it sits on, a row of (3) or (6) with a nonzero dual
  becomes an equality; the result is exactly the set of the stage's optimal solutions (no
  ``c_v <= c*_v + tol`` row, so no tolerance accumulates). The constraint matrix never
  changes, so every simplex basis is a basis of the totally unimodular matrix of Theorem 2:
  with integral weights the duals are integers. *Tolerance:* a reduced cost, a stage's
  count ``c_v`` and the final ``x_i(t)`` must each be an integer within ``1e-6``
  (relative above 1), else :class:`PaperLPError` (Theorem 2 broken); "nonzero" is then
  ``|d| >= 1``, decided by rounding. HiGHS's primal simplex returns vertices (integral by
  Theorem 2) and re-solves each stage from the previous stage's basis on one model
  (highspy directly: PuLP rebuilds the model per solve).
* **Fewer LPs than levels.** The ``T + max L`` levels are not solved one by one.
  (1) Above the optimum's largest item every ``c_v`` is 0: a bisection finds the largest
  item with one LP per step (``min sum_{v >= theta} c_v = 0`` or not) and fixes every item
  above it to 0 at once. (2) A level whose count cannot vary on the current face (bound
  below) needs no LP. (3) Consecutive levels share one LP with weights
  ``w_v = prod_{u < v in the block} (s_u + 1)``, ``s_u`` a bound on how much ``c_u`` can
  still vary between schedules: the number of distinct tails among the level's free
  ``lambda^1`` columns (ops with equal tails share the level's slot, (6) gives it to one)
  plus the slack of (3) of the ops whose ``lambda^0`` sit at the level; such weights order
  integral vertices exactly as the lexicographic order does. A block stays below
  :data:`LEX_MAX_WEIGHT` (``1e6``, far inside double precision and HiGHS's tolerances);
  ``max_weight=1`` solves one level per LP. At 5 ms slots the traced models need tens of
  LPs, not hundreds (``results/tables/pace_solvers.csv``, ``benchmarks/results/pace.json``).
* ``x_i(t)`` is the only variable: (12) and (13) define ``lambda^1 = x`` and
  ``lambda^0 = 1 - x``, which maps LP (14)'s polytope one to one onto
  ``{x : (3), (6), (7), 0 <= x <= 1}``; (7) is a bound ``x_i(t) = 0``. The LP has
  ``N T`` columns and ``N + T`` rows: its size, and the number of levels, grow with the
  horizon in slots (fine at the paper's 5 ms; slots far shorter than the all-reduces make
  it large and slow).
* LP (14)'s columns, constraints (3), (6), (7) and items are defined once (``_LP14``):
  :func:`paper_lp` builds its PuLP model from them (with ``lambda`` and (12), (13)), the
  stages their HiGHS model (in ``x`` alone).

The lexicographic optimum is the largest-tail-first schedule's ``alpha`` (the tests check
it against brute force): swapping a later slot of a larger-tail op with an earlier slot of
a smaller-tail one lowers the largest of the items changed.

Examples
--------
>>> from commsched.pace.slots import SlotProblem
>>> from commsched.pace.schedule import objective
>>> p = SlotProblem(release=(0, 1), proc=(3, 1), tail=(1.0, 4.0))
>>> objective(p, paper_lp(p)), objective(p, sound_lp(p))
(6.0, 6.0)
>>> sol = lexicographic_lp(p)
>>> sol.schedule, sol.top, objective(p, sol.schedule)
({0: (0, 2, 3), 1: (1,)}, 6, 6.0)
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import highspy
import numpy as np
import pulp

from commsched.errors import CommschedError
from commsched.pace.schedule import Schedule, check, jackson
from commsched.pace.slots import SlotProblem
from commsched.registry import Registry

__all__ = [
    "LEX_MAX_WEIGHT",
    "PAPER_LP_MAX_COEF",
    "SLOT_SOLVERS",
    "LexSolution",
    "PaperLPError",
    "PaperLPTooLarge",
    "lex_lp_schedule",
    "lexicographic_lp",
    "lp14_schedule",
    "paper_lp",
    "paper_lp_max_coef",
    "sound_lp",
]

#: Largest objective coefficient ``(TN)^(T + max q)`` :func:`paper_lp` accepts: HiGHS
#: treats costs of 1e20 and more as infinite (option ``infinite_cost``).
PAPER_LP_MAX_COEF = 1e20
#: Largest weight :func:`lexicographic_lp` gives a level when one LP handles several
#: levels (the costs of one stage span 1 to this; double precision and HiGHS's 1e-7
#: tolerances separate them exactly).
LEX_MAX_WEIGHT = 1e6
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


def _need_integer_tails(problem: SlotProblem, who: str) -> None:
    if any(q != math.floor(q) for q in problem.tail):
        raise PaperLPError(f"{who} needs integer tails (use SlotProblem.integral())")


@dataclass(frozen=True)
class _LP14:
    """LP (14)'s columns and constraints (3), (6), (7), the one definition :func:`paper_lp`
    and :func:`lexicographic_lp` build their models from.

    Column ``k`` is ``x_i(t)`` with ``i = op[k]``, ``t = slot[k]`` (op-major, ``t`` from 1
    to ``T``). Rows ``0..N-1`` are (3) ``sum_t x_i(t) >= p_i``, rows ``N..N+T-1`` are (6)
    ``sum_i x_i(t) <= 1``; column ``k`` has a 1 in rows ``op[k]`` and ``N + slot[k] - 1``
    (the column-wise sparse matrix of :meth:`matrix`). ``upper`` is 0 where (7) fixes
    ``x_i(t) = 0`` (``t <= r_i``), else 1 (the bound (12), (13) and ``lambda >= 0`` give).
    ``item1`` and ``item0`` are the items of ``alpha`` a column contributes at
    ``lambda^1`` (``t + L_i``) and ``lambda^0`` (``L_i``): LP (14)'s objective weighs them
    ``(TN)^item``.
    """

    n: int
    op: np.ndarray
    slot: np.ndarray
    upper: np.ndarray
    row_lower: np.ndarray
    row_upper: np.ndarray
    item1: np.ndarray
    item0: np.ndarray

    @staticmethod
    def of(problem: SlotProblem) -> _LP14:
        """The structure of ``problem`` (integral tails)."""
        n, big_t = problem.n, problem.horizon
        op = np.repeat(np.arange(n), big_t)
        slot = np.tile(np.arange(1, big_t + 1), n)
        tail = np.array(problem.tail, dtype=np.int64)[op]
        inf = math.inf
        return _LP14(
            n, op, slot,
            upper=np.where(slot <= np.array(problem.release, dtype=np.int64)[op], 0.0, 1.0),
            row_lower=np.concatenate([np.array(problem.proc, dtype=float),
                                      np.full(big_t, -inf)]),
            row_upper=np.concatenate([np.full(n, inf), np.ones(big_t)]),
            item1=slot + tail, item0=tail)

    def matrix(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The constraint matrix column-wise: ``(start, index, value)``."""
        ncol = len(self.op)
        index = np.empty(2 * ncol, dtype=np.int32)
        index[0::2], index[1::2] = self.op, self.n + self.slot - 1
        return (np.arange(0, 2 * ncol + 1, 2, dtype=np.int32), index, np.ones(2 * ncol))

    def rows(self) -> list[tuple[str, np.ndarray]]:
        """Per row, its name (``c3_<i>``, ``c6_<t>``) and its columns in column order."""
        _, index, _ = self.matrix()
        order = np.argsort(index, kind="stable")
        cuts = np.searchsorted(index[order], np.arange(len(self.row_lower) + 1))
        return [(f"c3_{r}" if r < self.n else f"c6_{r - self.n + 1}",
                 order[cuts[r]:cuts[r + 1]] // 2) for r in range(len(self.row_lower))]

    def schedule(self, problem: SlotProblem, x: np.ndarray, who: str) -> Schedule:
        """The schedule of a solution ``x`` (one value per column), checked integral
        (Theorem 2, within :data:`_INT_TOL`) and valid, else :class:`PaperLPError` from
        ``who``."""
        bad = np.flatnonzero(np.minimum(np.abs(x), np.abs(x - 1)) > _INT_TOL)
        if len(bad):
            k = int(bad[0])
            raise PaperLPError(f"{who}: x_{self.op[k]}({self.slot[k]}) = {x[k]:g} is not "
                               "integral (Theorem 2 says the optimum is)")
        slots: dict[int, list[int]] = {i: [] for i in range(self.n)}
        for k in np.flatnonzero(x > 0.5).tolist():
            slots[int(self.op[k])].append(int(self.slot[k]) - 1)
        out = {i: tuple(ts) for i, ts in slots.items()}
        try:
            check(problem, out)
        except CommschedError as e:
            raise PaperLPError(f"{who}: the solution is not a valid schedule: {e}") from None
        return out


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
    _need_integer_tails(problem, "LP (14)")
    tn, top = paper_lp_max_coef(problem)
    log10_coef = top * math.log10(tn) if tn > 1 else 0.0
    if log10_coef > math.log10(max_coef):
        raise PaperLPTooLarge(
            f"LP (14) would need coefficients up to (TN)^(T+L) = {tn}^{top:g} = 1e{log10_coef:.0f} "
            f"(T={problem.horizon} slots, N={problem.n}), above {max_coef:.0e}: its "
            "lexicographic transform does not fit floating point; use the sound LP or the "
            "exact solver"
        )
    c = _LP14.of(problem)
    lp = pulp.LpProblem("pace_lp14", pulp.LpMinimize)
    idx = list(zip(c.op.tolist(), c.slot.tolist(), strict=True))
    x = {k: lp.add_variable(f"x_{k[0]}_{k[1]}", lowBound=0) for k in idx}
    lam0 = {k: lp.add_variable(f"l0_{k[0]}_{k[1]}", lowBound=0) for k in idx}
    lam1 = {k: lp.add_variable(f"l1_{k[0]}_{k[1]}", lowBound=0) for k in idx}
    lp += pulp.lpSum(float(tn) ** float(c.item0[k]) * lam0[key]
                     + float(tn) ** float(c.item1[k]) * lam1[key] for k, key in enumerate(idx))
    for (name, cols), lo, hi in zip(c.rows(), c.row_lower, c.row_upper, strict=True):
        terms = pulp.lpSum(x[idx[k]] for k in cols)
        lp += (terms >= float(lo) if math.isinf(hi) else terms <= float(hi)), name  # (3), (6)
    for k, (i, t) in enumerate(idx):
        if c.upper[k] == 0:  # (7)
            lp += x[i, t] == 0, f"c7_{i}_{t}"
        lp += x[i, t] == lam1[i, t], f"c12_{i}_{t}"
        lp += lam0[i, t] + lam1[i, t] == 1, f"c13_{i}_{t}"
    status = lp.solve(_solver())
    if pulp.LpStatus[status] != "Optimal":
        raise PaperLPError(f"LP (14): HiGHS reports {pulp.LpStatus[status]!r}, not an optimum")
    return c.schedule(problem, np.array([var.value() or 0.0 for var in x.values()]),
                      "LP (14)")


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




@dataclass(frozen=True)
class LexSolution:
    """The lexicographic LP's answer and what it took.

    Attributes
    ----------
    schedule : Schedule
        A lexicographically optimal schedule (integral: Theorem 2).
    lp_solves : int
        LPs solved (the search for the largest item plus the stages).
    levels : int
        Distinct values ``v`` the items of ``alpha`` can take (the terms of the order).
    top : int
        The optimum's largest item ``max_{t,i} (t x_i(t) + L_i)``: LP (10)'s value.
    """

    schedule: Schedule
    lp_solves: int
    levels: int
    top: int


def _by_value(values: np.ndarray) -> dict[int, np.ndarray]:
    """``{v: the indices k with values[k] == v}``."""
    order = np.argsort(values, kind="stable")
    keys, starts = np.unique(values[order], return_index=True)
    return {int(v): order[a:b].astype(np.int32)
            for v, a, b in zip(keys, starts, [*starts[1:], len(order)], strict=True)}


class _Stages:
    """LP (14)'s constraints in ``x`` as one HiGHS model, re-solved stage after stage from
    the previous basis (primal simplex: a new objective, or a new row that the current
    solution satisfies, keeps the basis primal feasible)."""

    def __init__(self, problem: SlotProblem) -> None:
        c = self.lp14 = _LP14.of(problem)
        self.ncol = len(c.op)
        self.op = c.op
        self.tail = np.array(problem.tail, dtype=np.int64)
        self.proc = np.array(problem.proc, dtype=np.int64)
        self.at1 = _by_value(c.item1)  # level v -> columns with lambda^1 at v
        self.at0 = _by_value(c.item0)  # level v -> columns with lambda^0 at v
        self.lb = np.zeros(self.ncol)
        # (7) as bounds; (12)-(13) with lambda >= 0 give 0 <= x <= 1.
        self.ub = c.upper.copy()
        lp = highspy.HighsLp()
        lp.num_col_, lp.num_row_ = self.ncol, len(c.row_lower)
        lp.col_cost_ = np.zeros(self.ncol)
        lp.col_lower_, lp.col_upper_ = self.lb.copy(), self.ub.copy()
        lp.row_lower_, lp.row_upper_ = c.row_lower, c.row_upper  # (3), (6)
        lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
        lp.a_matrix_.start_, lp.a_matrix_.index_, lp.a_matrix_.value_ = c.matrix()
        self.highs = highspy.Highs()
        self.highs.setOptionValue("output_flag", False)
        self.highs.setOptionValue("simplex_strategy", 4)  # primal simplex
        self.highs.passModel(lp)
        self.cost = np.zeros(self.ncol)
        self.x = np.zeros(self.ncol)
        self.solves = 0
        self.levels = sorted(set(self.at1) | set(self.at0))

    def _cols(self, table: dict[int, np.ndarray], v: int) -> np.ndarray:
        return table.get(v, np.zeros(0, dtype=np.int32))

    def count(self, v: int) -> float:
        """``c_v`` of the current solution: the items of ``alpha`` equal to ``v``."""
        at0 = self._cols(self.at0, v)
        return float(self.x[self._cols(self.at1, v)].sum() + len(at0) - self.x[at0].sum())

    def minimise(self, weights: Mapping[int, float]) -> float:
        """Minimise ``sum_v w_v c_v`` over the current face; the optimum (solution kept)."""
        cost = np.zeros(self.ncol)
        const = 0.0
        for v, w in weights.items():
            cost[self._cols(self.at1, v)] += w
            at0 = self._cols(self.at0, v)
            cost[at0] -= w
            const += w * len(at0)
        changed = np.flatnonzero(cost != self.cost).astype(np.int32)
        self.highs.changeColsCost(len(changed), changed, cost[changed])
        self.cost = cost
        self.highs.run()
        self.solves += 1
        status = self.highs.getModelStatus()
        if status != highspy.HighsModelStatus.kOptimal:
            raise PaperLPError("lexicographic LP: HiGHS reports "
                               f"{self.highs.modelStatusToString(status)!r}, not an optimum")
        self.x = np.asarray(self.highs.getSolution().col_value)
        return float(self.highs.getInfo().objective_function_value) + const

    def zero(self, v: int) -> None:
        """Restrict the face to ``c_v = 0``: ``x = 0`` at ``lambda^1``, 1 at ``lambda^0``."""
        self._bounds(self._cols(self.at1, v), 0.0, 0.0)
        self._bounds(self._cols(self.at0, v), 1.0, 1.0)

    def restrict(self) -> None:
        """Restrict the model to the last stage's optimal face, by complementary slackness.

        A free column with a nonzero reduced cost is fixed at the bound it sits on, a row
        with a nonzero dual becomes an equality. The result is exactly the set of optimal
        solutions. The constraint matrix never changes, so every basis is one of the
        totally unimodular matrix of (3), (6) (Theorem 2): with integral weights the duals
        are integers, checked within ``1e-6``, and "nonzero" needs no tolerance.
        """
        sol = self.highs.getSolution()
        d = np.asarray(sol.col_dual)
        free = np.flatnonzero(self.lb < self.ub)
        dd = d[free]
        whole = np.round(dd)
        bad = np.abs(dd - whole) > _INT_TOL * np.maximum(1.0, np.abs(dd))
        if bad.any():
            raise PaperLPError(f"lexicographic LP: a reduced cost {dd[bad][0]:g} is not "
                               "integral (Theorem 2: every basis is unimodular)")
        at_lo, at_hi = free[whole > 0], free[whole < 0]
        self._bounds(at_lo, self.lb[at_lo], self.lb[at_lo])
        self._bounds(at_hi, self.ub[at_hi], self.ub[at_hi])
        y = np.asarray(sol.row_dual)
        lp = self.highs.getLp()
        lo, hi = np.asarray(lp.row_lower_), np.asarray(lp.row_upper_)
        for r in np.flatnonzero(np.abs(y) > 0.5):
            value = float(sol.row_value[r])
            bound = lo[r] if abs(value - lo[r]) <= abs(value - hi[r]) else hi[r]
            self.highs.changeRowBounds(int(r), float(bound), float(bound))

    def _bounds(self, cols: np.ndarray, lo: float | np.ndarray, hi: float | np.ndarray
                ) -> None:
        if len(cols):
            self.lb[cols], self.ub[cols] = lo, hi
            c = cols.astype(np.int32)
            self.highs.changeColsBounds(len(c), c, self.lb[c], self.ub[c])

    def spread(self, v: int) -> int:
        """A bound on how much ``c_v`` can still vary between integral schedules."""
        free1 = [k for k in self._cols(self.at1, v) if self.lb[k] < self.ub[k]]
        # lambda^1 items at v of ops with equal tails share one slot: (6) allows one.
        spread = len({int(self.tail[self.op[k]]) for k in free1})
        at0 = self._cols(self.at0, v)
        for i in np.unique(self.op[at0]):
            mine = at0[self.op[at0] == i]
            n_free = int(np.sum(self.lb[mine] < self.ub[mine]))
            ones = int(np.sum(self.lb[mine]))
            # lambda^0 items of op i: n_free - sum x over its free slots, that sum in
            # [max(0, p_i - ones), n_free] by (3) and the bounds.
            spread += n_free - max(0, int(self.proc[i]) - ones)
        return spread


def _whole(value: float, what: str) -> int:
    """``value`` rounded, after checking it is an integer within :data:`_INT_TOL`."""
    r = round(value)
    if abs(value - r) > _INT_TOL * max(1.0, abs(value)):
        raise PaperLPError(f"lexicographic LP: {what} = {value:g} is not integral "
                           "(Theorem 2 says the optimum is)")
    return r


def lexicographic_lp(problem: SlotProblem, max_weight: float = LEX_MAX_WEIGHT) -> LexSolution:
    """LP (10)'s lexicographic objective solved as a sequence of LPs (module docstring).

    Parameters
    ----------
    problem : SlotProblem
        As for :func:`paper_lp`.
    max_weight : float
        Largest weight of a stage that handles several levels at once (1: one level per
        stage).

    Returns
    -------
    LexSolution
        A lexicographically optimal schedule and the number of LPs solved.

    Raises
    ------
    PaperLPError
        When a tail is not integral, HiGHS reports no optimum, or a stage's optimum or
        the final solution is not integral or not a schedule.

    References
    ----------
    PACE (Bao et al., INFOCOM 2020), Sec. IV-B: problem (10), the order of ``alpha(x)``,
    LP (14)'s constraints (3), (6), (7), (12), (13) and Theorem 2.
    """
    _need_integer_tails(problem, "the lexicographic LP")
    if problem.n == 0:
        return LexSolution({}, 0, 0, 0)
    lp = _Stages(problem)
    levels = lp.levels
    # 1. The largest item: the first j such that every item can stay below levels[j].
    lo, hi = 0, len(levels)
    while lo < hi:
        mid = (lo + hi) // 2
        if _whole(lp.minimise(dict.fromkeys(levels[mid:], 1.0)), "a top search") == 0:
            hi = mid
        else:
            lo = mid + 1
    for v in levels[lo:]:
        lp.zero(v)
    # 2. The levels below, highest first, in blocks whose weights stay <= max_weight;
    # a level whose count cannot vary any more needs no stage.
    rest = levels[lo - 1::-1] if lo else []
    k = 0
    while k < len(rest):
        block: list[tuple[int, int]] = []
        top_weight = 1.0
        while k < len(rest):
            s = lp.spread(rest[k])  # on the current face, which only shrinks
            if s and block and top_weight * (s + 1) > max_weight:
                break
            if s:
                top_weight *= s + 1 if block else 1
                block.append((rest[k], s))
            k += 1
        if not block:
            break
        weights, w = {}, 1.0
        for v, s in reversed(block):
            weights[v] = w
            w *= s + 1
        lp.minimise(weights)
        for v, _ in block:
            _whole(lp.count(v), f"the count of items at {v}")
        lp.restrict()
    out = lp.lp14.schedule(problem, lp.x, "lexicographic LP")
    return LexSolution(out, lp.solves, len(levels), levels[lo - 1])


def lex_lp_schedule(problem: SlotProblem) -> Schedule:
    """:func:`lexicographic_lp` on the problem with tails in whole slots (the paper's
    ``f_j``), as a scheduler of ``problem``.

    Parameters
    ----------
    problem : SlotProblem
        The problem (tails rounded up by :meth:`SlotProblem.integral`).

    Returns
    -------
    Schedule
        A schedule of ``problem`` (same releases and processing), optimal for the rounded
        tails.

    References
    ----------
    PACE (Bao et al., INFOCOM 2020), Sec. IV-B, problem (10) and LP (14).
    """
    return lexicographic_lp(problem.integral()).schedule


def lp14_schedule(problem: SlotProblem) -> Schedule:
    """:func:`paper_lp` on the problem with tails in whole slots, as a scheduler of
    ``problem`` (refused where LP (14)'s coefficients do not fit floating point).

    Parameters
    ----------
    problem : SlotProblem
        The problem, its tails rounded up as for :func:`lex_lp_schedule`.

    Returns
    -------
    Schedule
        A schedule of ``problem``, optimal for the rounded tails.

    Raises
    ------
    PaperLPError
        As :func:`paper_lp`.

    References
    ----------
    PACE (Bao et al., INFOCOM 2020), Sec. IV-B, LP (14).
    """
    return paper_lp(problem.integral())


#: The solvers of the slotted problem by name (Alg. 1's oracle, ``commsched pace plan
#: --solver``): ``exact`` (preemptive largest-tail-first), ``sound-lp``, ``lex-lp`` (the
#: paper's lexicographic objective as a sequence of LPs) and ``lp14`` (LP (14) as written;
#: the last two on tails in whole slots).
SLOT_SOLVERS: Registry[Callable[[SlotProblem], Schedule]] = Registry("slot solver")
SLOT_SOLVERS.add("exact", jackson, aliases=("largest-tail-first",))
SLOT_SOLVERS.add("sound-lp", sound_lp)
SLOT_SOLVERS.add("lex-lp", lex_lp_schedule)
SLOT_SOLVERS.add("lp14", lp14_schedule)
