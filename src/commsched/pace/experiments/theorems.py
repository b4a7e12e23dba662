"""PACE's Theorem 1, Lemma 2 and Theorem 3 checked on instances, as metrics.

Part of the ``solvers`` experiment (:mod:`commsched.pace.experiments.model`, rule
``pace_solvers``), beside Theorem 2 (LP (14)'s optimum is integral):

* **Theorem 1** (Sec. IV-A): problem (2)'s objective, the window's execution time, equals
  ``max_i (y_i + L_i)`` (with ``C0``, :meth:`commsched.pace.model.PaceModel.iteration_time`).
  On the window of every traced training iteration, for seeded random all-reduce end times
  at or after each ready time, both sides are computed: the reduction, and the DAG itself
  evaluated op by op (:func:`commsched.pace.model.window_end`).
* **Lemma 2** (Sec. V-A): on the chain sorted by ready time, fusing adjacent all-reduces
  makes every fused tensor (the k-th to become ready) ready no later than any other
  grouping with the same group sizes does. On seeded random chains of 2-6 ready times,
  every grouping (every set partition) is compared with the adjacent one
  (:func:`commsched.pace.fusion.fuse`).
* **Theorem 3** (Sec. V-B): MaxMinSize is optimally balanced. On seeded random chains of
  1-8 sizes, for every ``R``, :class:`commsched.pace.fusion.MaxMinTable` is compared with
  the brute-force maximum over every split into ``R`` adjacent groups of the smallest
  group size, and its groups must reach it.

Metrics ``pace.theorems.{theorem1_cases,theorem1_mismatches,lemma2_groupings,
lemma2_violations,theorem3_cases,theorem3_violations}`` (counts).
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Iterator, Sequence

import networkx as nx

from commsched.pace.fusion import MaxMinTable, fuse
from commsched.pace.model import AllReduceOp, PaceModel, model_of_window, window_end

__all__ = ["lemma2_counts", "set_partitions", "theorem1_counts", "theorem3_counts"]

#: Random end-time draws per traced window (Theorem 1).
THEOREM1_DRAWS = 5


def theorem1_counts(w: nx.DiGraph, rng: random.Random, draws: int = THEOREM1_DRAWS
                    ) -> tuple[int, int]:
    """Theorem 1 on one window: cases drawn and cases where the two sides differ.

    Parameters
    ----------
    w : networkx.DiGraph
        A window (:func:`commsched.pace.model.window`).
    rng : random.Random
        Draws each all-reduce's end uniformly in ``[y_i, y_i + C0]``.
    draws : int
        Cases to draw.

    Returns
    -------
    cases, mismatches : int
        Mismatch: the relative difference of the two sides exceeds 1e-9.

    References
    ----------
    PACE (Bao et al., INFOCOM 2020), Sec. IV-A, Theorem 1.
    """
    m = model_of_window(w)
    bad = 0
    for _ in range(draws):
        ends = [op.ready_s + rng.uniform(0.0, m.compute_only_s) for op in m.ops]
        dag = window_end(w, {op.name: e for op, e in zip(m.ops, ends, strict=True)})
        if not math.isclose(m.iteration_time(ends), dag, rel_tol=1e-9, abs_tol=1e-12):
            bad += 1
    return draws, bad


def set_partitions(n: int) -> Iterator[list[list[int]]]:
    """Every partition of ``range(n)`` into non-empty groups (restricted growth strings).

    Parameters
    ----------
    n : int
        The number of elements (>= 1).

    Yields
    ------
    list of list of int
        The groups, each in increasing order, ordered by their first element.

    Examples
    --------
    >>> sum(1 for _ in set_partitions(4))  # the Bell number B_4
    15
    """
    def grow(prefix: list[int], top: int) -> Iterator[list[int]]:
        if len(prefix) == n:
            yield prefix
            return
        for label in range(top + 2):
            yield from grow([*prefix, label], max(top, label))

    for labels in grow([0], 0):
        yield [[i for i in range(n) if labels[i] == g] for g in range(max(labels) + 1)]


def lemma2_counts(ready: Sequence[float]) -> tuple[int, int]:
    """Lemma 2 on one chain: groupings compared and groupings that beat the adjacent one.

    Parameters
    ----------
    ready : sequence of float
        Ready times of the all-reduces (any order; sorted here into the chain).

    Returns
    -------
    groupings, violations : int
        A violation: a grouping whose k-th fused tensor is ready before the k-th of the
        adjacent grouping with the same group sizes, for some k.

    References
    ----------
    PACE (Bao et al., INFOCOM 2020), Sec. V-A, Lemma 2.
    """
    chain = sorted(ready)
    ops = tuple(AllReduceOp(f"a{i}", f"u{i}", ((f"v{i}", 4),), float(r), 0.0)
                for i, r in enumerate(chain))
    model = PaceModel(ops, 0.0, len(ops))
    groupings = violations = 0
    for groups in set_partitions(len(chain)):
        by_ready = sorted(groups, key=lambda g: max(chain[i] for i in g))
        cuts = list(itertools.accumulate(len(g) for g in by_ready))
        adjacent = fuse(model, [(a, b - 1) for a, b in itertools.pairwise([0, *cuts])])
        other = [max(chain[i] for i in g) for g in by_ready]
        groupings += 1
        if any(a.ready_s > o for a, o in zip(adjacent.ops, other, strict=True)):
            violations += 1
    return groupings, violations


def theorem3_counts(sizes: Sequence[int]) -> tuple[int, int]:
    """Theorem 3 on one chain: values of ``R`` checked and those MaxMinSize gets wrong.

    Parameters
    ----------
    sizes : sequence of int
        Tensor sizes of the chain (> 0).

    Returns
    -------
    cases, violations : int
        A violation: for some ``R``, the table's value is not the brute-force maximum of
        the smallest group size over every split into ``R`` adjacent groups, or its groups
        do not reach that value.

    References
    ----------
    PACE (Bao et al., INFOCOM 2020), Sec. V-B, Alg. 1 and Theorem 3.
    """
    n = len(sizes)
    table = MaxMinTable(sizes)
    violations = 0
    for r in range(1, n + 1):
        best = max(min(sum(sizes[a:b]) for a, b in itertools.pairwise([0, *cuts, n]))
                   for cuts in itertools.combinations(range(1, n), r - 1))
        got = min(sum(sizes[a:b + 1]) for a, b in table.groups(r))
        if table.value(r) != best or got != best or len(table.groups(r)) != r:
            violations += 1
    return n, violations
