"""Balanced all-reduce tensor fusion (PACE Sec. V, Alg. 1) and the plan it yields.

* **Chain (Lemma 2).** The all-reduces sorted by ready time ``z_{u_i}``
  (:attr:`commsched.pace.model.PaceModel.ops` is already in that order); only runs of
  adjacent operators on the chain are fused.
* **MaxMinSize.** Split the chain into ``R`` runs maximising the smallest run's total
  bytes. Alg. 1 recurses on the first run (a prefix, from one operator up to ``N-R+1``)
  and the rest, memoising ``MaxMinSize(suffix, r)``; a prefix replaces the best so far
  only if it is *strictly* better (line 20), so among equally good splits the shortest
  first run wins, recursively. :class:`MaxMinTable` fills the same memo table bottom-up
  (one numpy pass per ``r`` over every suffix start and prefix end), with the same
  tie-break (``argmax`` returns the first maximum); ``tests/test_pace_fusion.py`` checks
  it against the literal recursion.
* **Fused DAG.** A run becomes one all-reduce of the concatenated tensors (chain order),
  whose producer is the member producer finishing last (Alg. 1 line 5), so it is ready
  at the largest member ready time, and which every successor of a member waits for, so
  its tail is the largest member tail (:func:`fuse`; :func:`fuse_window` does the same
  on the op graph, and the tests check both agree).
* **Search over R (lines 3-9).** For ``R = 1..N`` the fused model is scheduled by the
  exact solver (:func:`commsched.pace.schedule.jackson`; the paper's oracle is LP (14),
  which gives the same optimum, :mod:`commsched.pace.lp`) and the ``R`` with the smallest
  iteration time wins; a later ``R`` must be strictly better (line 7), so ties keep the
  smaller ``R``.
* **Slot guidance (our choice).** Sec. IV-A asks for slots no longer than the smallest
  (fused) all-reduce. With ``slot_guidance`` (default) only the ``R`` whose smallest
  fused group takes at least one slot are candidates; since MaxMinSize maximises that
  smallest group and it shrinks as ``R`` grows, these are ``R = 1..R_max``. If even
  ``R = 1`` is shorter than a slot, the slot is too long: a one-line error.

:func:`make_plan` writes the result as a :class:`commsched.pace.plan.Plan`: one group per
fused all-reduce (tensors in chain order), one partition per maximal run of its slots,
priority = the run's first slot (Sec. VI-A: smaller first).

**Partition sizes (how g is computed for a partition; our choice).** The slotted model
charges an all-reduce ``ceil(g_i / slot)`` slots for its whole tensor; a run of ``n`` of
its ``p`` slots gets the share ``n / p`` of its bytes (Sec. II-C sizes a partition so
that it ends when the next, more urgent, tensor becomes ready: time in proportion). The
boundaries are rounded to multiples of ``align`` bytes (4: a float32 is never split)
when the buffer's size allows; a run whose share rounds to 0 bytes is merged into the
next run. Like the paper, the model charges no extra start-up for a partition; under an
affine cost each partition after the first costs one more ``a`` when it runs (the plan
simulator, :mod:`commsched.sim`, charges it).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import networkx as nx
import numpy as np

from commsched.cost import AllReduceModel
from commsched.errors import CommschedError
from commsched.pace.model import AllReduceOp, PaceModel, model_of_window
from commsched.pace.plan import Group, Partition, Plan
from commsched.pace.schedule import Schedule, jackson, objective, runs
from commsched.pace.slots import SlotProblem, to_problem

__all__ = [
    "FusionResult",
    "MaxMinTable",
    "balanced_fusion",
    "fuse",
    "fuse_window",
    "make_plan",
]


class MaxMinTable:
    """Memo table of MaxMinSize over the suffixes of a chain of tensor sizes.

    ``best(r)[i]`` is MaxMinSize(chain[i:], r) (``-1`` where the suffix has fewer than
    ``r`` operators: the paper's ``-inf``) and ``choice(r)[i]`` the last index of the first
    run in the best split. Layers are computed on demand and kept.

    Parameters
    ----------
    sizes : sequence of int
        The chain's tensor sizes (bytes, > 0), in chain order.

    Raises
    ------
    CommschedError
        If the chain is empty or a size is not positive.

    References
    ----------
    PACE (Bao et al., INFOCOM 2020), Sec. V, Alg. 1 (MaxMinSize, by dynamic programming).

    Examples
    --------
    >>> t = MaxMinTable([4, 1, 1, 1, 4])
    >>> t.groups(2), t.groups(3)
    ([(0, 1), (2, 4)], [(0, 0), (1, 3), (4, 4)])
    >>> t.value(3)
    3
    """

    def __init__(self, sizes: Sequence[int]) -> None:
        s = np.asarray(sizes, dtype=np.int64)
        if s.ndim != 1 or len(s) == 0 or np.any(s <= 0):
            raise CommschedError("MaxMinSize needs a non-empty chain of positive sizes")
        self.n = len(s)
        self.prefix = np.concatenate([[0], np.cumsum(s)])
        suffix = self.prefix[-1] - self.prefix[:-1]
        self._best: list[np.ndarray] = [suffix]  # r = 1
        self._choice: list[np.ndarray] = [np.full(self.n, self.n - 1)]

    def _extend(self) -> None:
        n, r = self.n, len(self._best) + 1
        prev = self._best[-1]
        # cand[i, k] = min(sum chain[i..k], best_{r-1}[k+1]) for i <= k <= n - r.
        i = np.arange(n)[:, None]
        k = np.arange(n)[None, :]
        first = self.prefix[1:][None, :] - self.prefix[:-1][:, None]
        rest = np.concatenate([prev[1:], [-1]])[None, :]
        cand = np.minimum(first, rest)
        cand = np.where((k >= i) & (k <= n - r) & (rest >= 0), cand, -1)
        choice = np.argmax(cand, axis=1)
        best = cand[np.arange(n), choice]
        best[np.arange(n) > n - r] = -1
        self._best.append(best)
        self._choice.append(choice)

    def _layer(self, r: int) -> None:
        if not 1 <= r <= self.n:
            raise CommschedError(f"R must be in 1..{self.n}, got {r}")
        while len(self._best) < r:
            self._extend()

    def value(self, r: int) -> int:
        """MaxMinSize(chain, r): the largest possible smallest run, in bytes.

        Parameters
        ----------
        r : int
            Number of runs (``1..n``).

        Returns
        -------
        int
            The bytes of the smallest run of the best split.

        Raises
        ------
        CommschedError
            If ``r`` is out of range.
        """
        self._layer(r)
        return int(self._best[r - 1][0])

    def groups(self, r: int) -> list[tuple[int, int]]:
        """The best split of the whole chain into ``r`` runs.

        Parameters
        ----------
        r : int
            How many runs (``1..n``).

        Returns
        -------
        list of (int, int)
            ``(first, last)`` chain indices of every run, in chain order.

        Raises
        ------
        CommschedError
            If ``r`` is out of range.
        """
        self._layer(r)
        out, i = [], 0
        for rr in range(r, 1, -1):
            k = int(self._choice[rr - 1][i])
            out.append((i, k))
            i = k + 1
        out.append((i, self.n - 1))
        return out


def fuse(model: PaceModel, groups: Sequence[tuple[int, int]]) -> PaceModel:
    """The model of the fused DAG (module docstring).

    Parameters
    ----------
    model : PaceModel
        The unfused model.
    groups : sequence of (int, int)
        Runs ``(first, last)`` of the chain (:meth:`MaxMinTable.groups`).

    Returns
    -------
    PaceModel
        One op per run: ready when its last member is, tail the members' largest; a run
        of one op is that op unchanged.

    References
    ----------
    PACE (Bao et al., INFOCOM 2020), Sec. V, Alg. 1 lines 5-6.
    """
    ops = []
    for a, b in groups:
        members = model.ops[a:b + 1]
        if len(members) == 1:
            ops.append(members[0])
            continue
        last = max(members, key=lambda op: op.ready_s)  # first of equal maxima
        ops.append(AllReduceOp(
            name="fused:" + "+".join(op.name for op in members),
            producer=last.producer,
            tensors=tuple(t for op in members for t in op.tensors),
            ready_s=last.ready_s,
            tail_s=max(op.tail_s for op in members),
        ))
    return PaceModel(tuple(ops), model.compute_only_s, model.n_compute, model.meta)


def fuse_window(w: nx.DiGraph, groups: Sequence[Sequence[str]]) -> nx.DiGraph:
    """Fuse all-reduce ops of a window graph (:func:`commsched.pace.model.window`).

    Parameters
    ----------
    w : networkx.DiGraph
        The window.
    groups : sequence of sequence of str
        Lists of all-reduce ids in chain order.

    Returns
    -------
    networkx.DiGraph
        A copy where each list became one op ``fused:<a>+<b>...`` whose producer is the
        member producer that finishes last on compute-only paths, with the members'
        successors; lists of one op are kept.

    References
    ----------
    PACE (Bao et al., INFOCOM 2020), Sec. V (tensor fusion on the DAG).
    """
    ready = {op.name: (op.ready_s, op.producer) for op in model_of_window(w).ops}
    g = w.copy()
    for members in groups:
        if len(members) < 2:
            continue
        fid = "fused:" + "+".join(members)
        producer = max(members, key=lambda m: ready[m][0])
        params = [v for m in members for v in w.nodes[m]["params"]]
        succ = {s for m in members for s in w.succ[m]}
        g.add_node(fid, kind="allreduce", resource=w.nodes[members[0]]["resource"],
                   duration=0.0, params=params,
                   bytes=sum(int(w.nodes[m]["bytes"]) for m in members))
        g.add_edge(ready[producer][1], fid, control=False, bytes=g.nodes[fid]["bytes"])
        for s in succ:
            g.add_edge(fid, s, control=False, bytes=0)
        g.remove_nodes_from(members)
    return g


@dataclass(frozen=True)
class FusionResult:
    """Alg. 1's answer.

    Parameters
    ----------
    r : int
        The best number of fused operators.
    groups : tuple of (int, int)
        Its runs of the chain.
    model : PaceModel
        The fused model.
    problem : SlotProblem
        Its slot problem.
    schedule : Schedule
        Its optimal preemptive schedule.
    iter_time_s : float
        Its iteration time (s).
    candidates : tuple of mapping
        Per candidate ``R`` a row ``{"R", "min_group_bytes", "iter_time_s"}``
        (``iter_time_s`` None where the slot guidance excluded it).
    """

    r: int
    groups: tuple[tuple[int, int], ...]
    model: PaceModel
    problem: SlotProblem
    schedule: Schedule
    iter_time_s: float
    candidates: tuple[Mapping[str, Any], ...]


def balanced_fusion(model: PaceModel, cost: AllReduceModel, slot_s: float,
                    r_values: Sequence[int] | None = None,
                    slot_guidance: bool = True,
                    solver: Callable[[SlotProblem], Schedule] = jackson) -> FusionResult:
    """Alg. 1: the best balanced fusion, with the exact solver (or ``solver``) as oracle.

    Parameters
    ----------
    model : PaceModel
        The unfused model.
    cost : AllReduceModel
        ``g(S)``.
    slot_s : float
        Slot length.
    r_values : sequence of int, optional
        Candidate numbers of fused operators (default ``1..N``).
    slot_guidance : bool
        Skip candidates whose smallest fused all-reduce is shorter than a slot
        (Sec. IV-A).
    solver : callable
        The oracle of line 6, ``SlotProblem -> Schedule`` (default the exact
        largest-tail-first; :data:`commsched.pace.lp.SLOT_SOLVERS` names the others).

    Returns
    -------
    FusionResult
        The best candidate and every candidate's row.

    Raises
    ------
    CommschedError
        If the slot guidance excludes every candidate.

    References
    ----------
    PACE (Bao et al., INFOCOM 2020), Sec. V, Alg. 1; Sec. IV-B (the optimal schedule).
    """
    n = len(model.ops)
    table = MaxMinTable([op.bytes for op in model.ops])
    best: FusionResult | None = None
    rows: list[dict[str, Any]] = []
    for r in (range(1, n + 1) if r_values is None else r_values):
        smallest = table.value(r)
        if slot_guidance and cost.time(smallest) < slot_s * (1 - 1e-9):
            rows.append({"R": r, "min_group_bytes": smallest, "iter_time_s": None})
            continue
        groups = tuple(table.groups(r))
        fused = fuse(model, groups)
        problem = to_problem(fused, cost, slot_s)
        schedule = solver(problem)
        t = objective(problem, schedule) * slot_s
        rows.append({"R": r, "min_group_bytes": smallest, "iter_time_s": t})
        if best is None or t < best.iter_time_s:
            best = FusionResult(r, groups, fused, problem, schedule, t, ())
    if best is None:
        total = sum(op.bytes for op in model.ops)
        raise CommschedError(
            f"slot of {slot_s * 1e3:g} ms is longer than the all-reduce of every candidate "
            f"fusion (all {total} B together take {cost.time(total) * 1e3:.3g} ms); use a "
            "shorter slot"
        )
    return FusionResult(best.r, best.groups, best.model, best.problem, best.schedule,
                        best.iter_time_s, tuple(rows))


def _cuts(nbytes: int, shares: Sequence[int], align: int) -> list[int]:
    """Byte offsets ``0 = c_0 <= ... <= c_k = nbytes`` proportional to ``shares``."""
    unit = align if nbytes % align == 0 else 1
    units = nbytes // unit
    total = sum(shares)
    cum = np.cumsum([0, *shares])
    return [round(units * int(c) / total) * unit for c in cum]


def make_plan(model: PaceModel, problem: SlotProblem, schedule: Schedule,
              meta: Mapping[str, Any] | None = None, policy: str = "pace",
              align: int = 4) -> Plan:
    """The all-reduce plan of a (fused) model's schedule.

    Parameters
    ----------
    model : PaceModel
        The (fused) model; one group per operator.
    problem : SlotProblem
        Its slot problem.
    schedule : Schedule
        Its schedule: each operator's slots.
    meta : mapping, optional
        Recorded in the plan (``slot_s`` added).
    policy : str
        The plan's policy name.
    align : int
        Partition boundaries fall on multiples of it where the size allows (float32: 4).

    Returns
    -------
    Plan
        One partition per run of consecutive slots, sized by its share of the
        operator's slots (module docstring), priority = the run's first slot.

    References
    ----------
    PACE (Bao et al., INFOCOM 2020), Sec. II-C and VI (preemption at partition
    boundaries).
    """
    groups = []
    for i, op in enumerate(model.ops):
        rs = runs(schedule[i])
        cuts = _cuts(op.bytes, [length for _, length in rs], align)
        parts = []
        pending: int | None = None  # priority of a run that got 0 bytes
        for (start, _), (lo, hi) in zip(rs, itertools.pairwise(cuts), strict=True):
            prio = start if pending is None else pending
            if hi == lo:
                pending = prio
                continue
            parts.append(Partition(lo, hi - lo, prio))
            pending = None
        if pending is not None:  # cannot happen: the last cut is the whole buffer
            raise CommschedError(f"plan: op {op.name!r}: empty last partition")
        groups.append(Group(op.tensors, tuple(parts)))
    info = dict(meta or {})
    info.setdefault("slot_s", problem.slot_s)
    return Plan(policy, tuple(groups), info)

