"""HEFT (Topcuoglu, Hariri & Wu, IEEE TPDS 13(3), 2002) as the thesis adapts it (Sec. 4.3).

:func:`heft_core` is the insertion-based algorithm on a general cost model (execution time
per node and device, data per edge, a transfer-rate matrix), so the canonical 10-task
example of the 2002 paper runs on it unchanged (makespan 80). The thesis' partitioner
(:func:`commsched.placement.partitioners.heft`) calls it with ``ops / speed`` times, the
producer's tensor size on every out-edge, upward ranks from Eqs. 4.1-4.2, and only the
devices that are feasible for a node's assignment unit (device type and memory, Sec. 4.3).
Colocation (Sec. 4.3): the first member of a colocation group in rank order picks the device
(feasible for the whole group); the other members get their time slot on that device when
their own turn comes.

Choices where the texts are open: rank ties are broken by topological position (so a
predecessor always comes first); device ties go to the lower device id. The published Java
code's HEFT differs in its ranks, its order and its earliest start
(:func:`commsched.placement.partitioners.heft` under ``published-code``).

Examples
--------
The canonical example (Topcuoglu et al. 2002, Fig. 2; tasks renumbered 0-9):

>>> import numpy as np
>>> w, edges = topcuoglu_example()
>>> succ = [[v for (u, v) in edges if u == i] for i in range(10)]
>>> rate = np.where(np.eye(3, dtype=bool), np.inf, 1.0)
>>> r = heft_core(w, w.mean(axis=1), succ, lambda u, v: edges[(u, v)], rate)
>>> r.makespan, [round(float(x), 3) for x in r.rank[:3]]
(80.0, [108.0, 77.0, 80.0])
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from commsched.placement.model import topological_order

__all__ = ["HeftResult", "heft_core", "topcuoglu_example", "upward_ranks"]


@dataclass
class HeftResult:
    """Device, start and finish of every node; the upward ranks; the makespan.

    References
    ----------
    Laich 2017, Sec. 4.3 (HEFT's two phases).
    """

    device: np.ndarray
    start: np.ndarray
    finish: np.ndarray
    rank: np.ndarray
    makespan: float


def upward_ranks(w_mean: np.ndarray, succ: Sequence[Sequence[int]],
                 data: Callable[[int, int], float], mean_rate: float,
                 topo: Sequence[int]) -> np.ndarray:
    """Eq. 4.1: ``rank(i) = w_mean(i) + max_j (data(i, j) / mean_rate + rank(j))``.

    Parameters
    ----------
    w_mean : numpy.ndarray
        Average execution time of each node.
    succ : sequence of sequence of int
        Successor lists.
    data : callable
        ``data(i, j)``, the amount moved on edge (i, j).
    mean_rate : float
        The mean transfer rate.
    topo : sequence of int
        A topological order.

    Returns
    -------
    numpy.ndarray
        The upward rank of every node.

    References
    ----------
    Laich 2017, Sec. 4.3.1, Eqs. 4.1-4.2; Topcuoglu et al. 2002.
    """
    rank = np.zeros(len(w_mean))
    for v in reversed(topo):
        best = 0.0
        for s in succ[v]:
            x = data(v, s) / mean_rate + rank[s]
            if x > best:
                best = x
        rank[v] = w_mean[v] + best
    return rank


def heft_core(
    w: np.ndarray,
    w_mean: np.ndarray,
    succ: Sequence[Sequence[int]],
    data: Callable[[int, int], float],
    rate: np.ndarray,
    choose: Callable[[int, np.ndarray], np.ndarray] | None = None,
    placed: Callable[[int, int], None] | None = None,
    tie: np.ndarray | None = None,
    comm_factor: float | None = None,
) -> HeftResult:
    """Insertion-based HEFT.

    Parameters
    ----------
    w
        ``w[i, d]`` execution time of node i on device d.
    w_mean
        Average execution time of each node (the rank's computation cost).
    succ, data
        Successor lists and ``data(u, v)``, the amount moved on edge (u, v).
    rate
        Transfer rates between devices (``inf`` on the diagonal: no cost on one device).
        The rank's communication cost is ``data / mean`` of the off-diagonal rates.
    choose
        ``choose(node, eft)`` -> the devices the node may go to (a boolean mask), called
        with the earliest finish times; defaults to every device. The thesis' partitioner
        uses it for feasibility and colocation.
    placed
        ``placed(node, device)``, called after each choice.
    tie
        Secondary sort key of the rank order (default: topological position, so every
        predecessor comes first). With another key, a predecessor of equal rank that is
        not yet scheduled is ignored in the earliest start.
    comm_factor
        The rank's communication cost is ``data * comm_factor``; default ``1 / mean rate``
        over distinct device pairs (the thesis). SAGA, for instance, averages
        ``1 / rate`` over all pairs including a device with itself (cost 0).

    Returns
    -------
    HeftResult
        Device, start and finish of every node, the upward ranks and the makespan.

    References
    ----------
    Topcuoglu, Hariri, Wu 2002 (HEFT); Laich 2017, Sec. 4.3, Eqs. 4.1-4.2.
    """
    n, ndev = w.shape
    topo = topological_order(succ)
    off = rate[~np.eye(ndev, dtype=bool)]
    mean_rate = float(off.mean()) if off.size else 1.0
    if comm_factor is not None:
        mean_rate = 1.0 / comm_factor
    rank = upward_ranks(w_mean, succ, data, mean_rate, topo)
    pos = np.empty(n)
    pos[topo] = np.arange(n)
    order = np.lexsort((pos if tie is None else tie, -rank))
    pred: list[list[int]] = [[] for _ in range(n)]
    for u in range(n):
        for v in succ[u]:
            pred[v].append(u)
    dev = np.full(n, -1, dtype=np.int64)
    start = np.zeros(n)
    finish = np.zeros(n)
    slots = [_Slots() for _ in range(ndev)]
    last_end = np.zeros(ndev)
    max_gap = np.zeros(ndev)
    inv_rate = 1.0 / rate
    for v in order:
        v = int(v)
        arr = [finish[p] + data(p, v) * inv_rate[dev[p]] for p in pred[v] if dev[p] >= 0]
        est = np.max(arr, axis=0) if arr else np.zeros(ndev)
        wv = w[v]
        lower = est + wv
        mask = choose(v, lower) if choose is not None else np.ones(ndev, dtype=bool)
        # appending after the device's last node, then better gaps where one may exist
        begin = np.maximum(est, last_end)
        eft = np.where(mask, begin + wv, np.inf)
        best = float(eft.min())
        if not np.isfinite(best):
            raise ValueError(f"node {v}: no device to choose from")
        cand = np.nonzero(mask & (max_gap >= wv) & (lower <= best))[0]
        for d in cand[np.argsort(lower[cand], kind="stable")]:
            if lower[d] > best:
                break
            t = slots[d].find(float(est[d]), float(wv[d]))
            if t is not None and t + wv[d] < eft[d]:
                begin[d] = t
                eft[d] = t + wv[d]
                best = min(best, float(eft[d]))
        d = int(np.argmin(eft))
        t, f = float(begin[d]), float(eft[d])
        if t >= last_end[d]:
            if t > last_end[d]:
                slots[d].add(float(last_end[d]), t)
            last_end[d] = f
        else:
            slots[d].take(t, f)
        max_gap[d] = slots[d].longest()
        dev[v], start[v], finish[v] = d, t, f
        if placed is not None:
            placed(v, d)
    return HeftResult(dev, start, finish, rank, float(finish.max()) if n else 0.0)


class _Slots:
    """The idle gaps of one device before its last node (sorted, disjoint)."""

    def __init__(self) -> None:
        self.starts: list[float] = []
        self.ends: list[float] = []
        self._longest = 0.0

    def add(self, a: float, b: float) -> None:
        k = bisect.bisect_left(self.starts, a)
        self.starts.insert(k, a)
        self.ends.insert(k, b)
        self._longest = max(self._longest, b - a)

    def find(self, est: float, dur: float) -> float | None:
        """Earliest start >= est of a gap that holds ``dur``; None if no gap does."""
        starts, ends = self.starts, self.ends
        for k in range(bisect.bisect_left(ends, est + dur), len(starts)):
            s = starts[k]
            t = s if s > est else est  # max(est, s), without the call (a hot loop)
            if t + dur <= ends[k]:
                return t
        return None

    def take(self, t: float, f: float) -> None:
        """Occupy [t, f] inside one gap."""
        k = bisect.bisect_right(self.starts, t) - 1
        a, b = self.starts[k], self.ends[k]
        del self.starts[k], self.ends[k]
        if f < b:
            self.starts.insert(k, f)
            self.ends.insert(k, b)
        if a < t:
            self.starts.insert(k, a)
            self.ends.insert(k, t)
        if b - a >= self._longest:
            self._longest = max((e - s for s, e in zip(self.starts, self.ends, strict=True)),
                                default=0.0)

    def longest(self) -> float:
        return self._longest


def topcuoglu_example() -> tuple[np.ndarray, dict[tuple[int, int], float]]:
    """The 10-task, 3-processor example of Topcuoglu et al. 2002 (Fig. 2), 0-based.

    Returns
    -------
    numpy.ndarray
        ``w[i, d]``, the execution time of task i on processor d.
    dict of (int, int) to float
        The communication cost of every edge.

    References
    ----------
    Topcuoglu, Hariri, Wu 2002, Fig. 2; the HEFT of Laich 2017, Sec. 4.3.
    """
    w = np.array([[14, 16, 9], [13, 19, 18], [11, 13, 19], [13, 8, 17], [12, 13, 10],
                  [13, 16, 9], [7, 15, 11], [5, 11, 14], [18, 12, 20], [21, 7, 16]],
                 dtype=float)
    edges = {(0, 1): 18, (0, 2): 12, (0, 3): 9, (0, 4): 11, (0, 5): 14, (1, 7): 19,
             (1, 8): 16, (2, 6): 23, (3, 7): 27, (3, 8): 23, (4, 8): 13, (5, 7): 15,
             (6, 9): 17, (7, 9): 11, (8, 9): 13}
    return w, {k: float(v) for k, v in edges.items()}
