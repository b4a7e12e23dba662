"""Discrete-event priority executor: the execution model of TicTac Sec. 3.

Semantics (TicTac, Hashemi et al., SysML 2019, Sec. 3 "Quantifying the performance"):

* an op becomes *ready* when all its predecessors have finished;
* each resource runs at most ``capacity`` ops at once, each for its ``duration``,
  without preemption;
* whenever a resource has a free slot it starts a ready op: among its ready ops with a
  priority, only those with the lowest priority number are candidates; ops without a
  priority are candidates at any time (they are never held back by priorities); among the
  candidates the tie policy decides: ``fifo`` takes the one that became ready first (then
  graph order), ``random`` draws uniformly with the given seed.

The choice for unprioritized ops is ours (the paper enforces an order only on transfers
and leaves compute to the runtime); it is tested in ``tests/test_sim.py``.

The event loop is a numba kernel over the arrays of a
:class:`~commsched.model.graph.CompiledGraph`: per resource, a heap of prioritized ready
ops keyed (priority, tie key, ready counter) and a heap of unprioritized ready ops keyed
(tie key, ready counter); one heap of running ops keyed (end time, op). The tie key is the
ready time (``fifo``) or the k-th draw of ``random.Random(seed).random()`` for the k-th op
made ready (``random``). ``tests/test_priority_equality.py`` checks it against the pure-Python
heap implementation it replaced (``tests/priority_reference.py``): equal start and end
times on random graphs.

Examples
--------
>>> from commsched.model.graph import new_graph, add_op
>>> g = new_graph({"net": 1, "cpu": 1})
>>> add_op(g, "r1", "recv", "net", 1.0); add_op(g, "r2", "recv", "net", 1.0)
>>> add_op(g, "c1", "compute", "cpu", 3.0); g.add_edge("r1", "c1")
>>> simulate(g, priorities={"r1": 1, "r2": 0}).makespan
5.0
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Literal

import networkx as nx
import numpy as np
from numba import njit

from commsched.model.graph import CompiledGraph, compile_graph

__all__ = ["Schedule", "simulate", "simulate_compiled"]

TiePolicy = Literal["fifo", "random"]

#: Integers up to this magnitude are exact as float64 priorities.
_EXACT_INT = 2.0**53


@dataclass(frozen=True)
class Schedule:
    """Start and end time of every op, indexed like ``ids``."""

    ids: list[str]
    start: list[float]
    end: list[float]

    @property
    def makespan(self) -> float:
        return max(self.end, default=0.0)

    @property
    def ops(self) -> dict[str, tuple[float, float]]:
        return {n: (s, e) for n, s, e in zip(self.ids, self.start, self.end, strict=True)}

    def to_json(self) -> dict[str, object]:
        return {"makespan": self.makespan, "ops": {n: [s, e] for n, (s, e) in self.ops.items()}}


def simulate(
    g: nx.DiGraph,
    priorities: dict[str, float] | None = None,
    tie: TiePolicy = "fifo",
    seed: int | None = None,
) -> Schedule:
    """Simulate an op graph under the execution model of the module docstring.

    Compiles ``g`` (:func:`commsched.model.graph.compile_graph`), then runs
    :func:`simulate_compiled`.

    Parameters
    ----------
    g : networkx.DiGraph
        A valid op graph; durations in seconds.
    priorities : dict of str to float, optional
        Op id -> priority number (lower runs first), overriding the node attribute.
    tie : {"fifo", "random"}
        The tie policy among a resource's candidates.
    seed : int or None
        Seed for ``tie="random"``.

    Returns
    -------
    Schedule

    Raises
    ------
    GraphError
        ``priorities`` names an op not in ``g``.
    ValueError
        An unknown tie policy, or a cycle.

    References
    ----------
    TicTac (Hashemi et al., SysML 2019), Sec. 3.
    """
    return simulate_compiled(compile_graph(g, priorities), tie=tie, seed=seed)


def _priority_keys(priority: list[float | None]) -> tuple[np.ndarray, np.ndarray]:
    """The priorities as float64 sort keys in the order of the numbers themselves, and
    which ops have one. Integers beyond 2**53 would round, so then the keys are the ranks
    of the distinct values (Python's exact comparison of ints and floats)."""
    keys = np.array(priority, dtype=np.float64)  # None -> nan
    has = ~np.isnan(keys)
    if has.any() and np.abs(keys[has]).max() >= _EXACT_INT:
        rank = {v: k for k, v in enumerate(sorted({p for p in priority if p is not None}))}
        keys = np.array([None if p is None else rank[p] for p in priority], dtype=np.float64)
    return keys, has


def simulate_compiled(
    cg: CompiledGraph, tie: TiePolicy = "fifo", seed: int | None = None
) -> Schedule:
    """Simulate a compiled graph (see the module docstring for the semantics).

    Parameters
    ----------
    cg : CompiledGraph
        The op graph in array form (:func:`commsched.model.graph.compile_graph`).
    tie : {"fifo", "random"}
        Among the candidates of a resource, ``fifo`` runs the op that became ready first
        (then graph order); ``random`` draws uniformly.
    seed : int or None
        Seed of ``random.Random`` for ``tie="random"``.

    Returns
    -------
    Schedule
        Start and end time of every op.

    Raises
    ------
    ValueError
        An unknown tie policy, or a cycle (some ops never become ready).

    References
    ----------
    TicTac (Hashemi et al., SysML 2019), Sec. 3 "Quantifying the performance".
    """
    if tie not in ("fifo", "random"):
        raise ValueError(f"unknown tie policy {tie!r} (fifo or random)")
    n = cg.n
    if tie == "fifo":
        draws = np.empty(0)
    else:  # the k-th op made ready takes the k-th draw; every op is made ready once
        rng = random.Random(seed)
        draws = np.array([rng.random() for _ in range(n)], dtype=np.float64)
    prio, has_prio = _priority_keys(cg.priority)
    start = np.zeros(n)
    end = np.zeros(n)
    done = _run(np.asarray(cg.duration, dtype=np.float64),
                np.asarray(cg.resource, dtype=np.int64), prio, has_prio,
                np.array(cg.indegree, dtype=np.int64),  # a copy: the kernel counts it down
                np.asarray(cg.succ_ptr, dtype=np.int64),
                np.asarray(cg.succ_idx, dtype=np.int64),
                np.asarray(cg.capacity, dtype=np.int64), draws, start, end)
    if done != n:  # only possible if the graph has a cycle, which validation rejects
        raise ValueError(f"{n - done} ops never became ready: the graph has a cycle")
    return Schedule(cg.ids, start.tolist(), end.tolist())


@njit(cache=True)
def _less(a: int, b: int, k1: np.ndarray, k2: np.ndarray,
          k3: np.ndarray) -> bool:  # pragma: no cover - compiled
    """``(k1[a], k2[a], k3[a]) < (k1[b], k2[b], k3[b])``."""
    if k1[a] != k1[b]:
        return k1[a] < k1[b]
    if k2[a] != k2[b]:
        return k2[a] < k2[b]
    return k3[a] < k3[b]


@njit(cache=True)
def _push(heap: np.ndarray, lo: int, size: int, x: int, k1: np.ndarray, k2: np.ndarray,
          k3: np.ndarray) -> None:  # pragma: no cover - compiled
    """Push op ``x`` on the binary heap ``heap[lo:lo + size]`` (which must have room)."""
    pos = size
    while pos > 0:
        parent = (pos - 1) >> 1
        y = heap[lo + parent]
        if not _less(x, y, k1, k2, k3):
            break
        heap[lo + pos] = y
        pos = parent
    heap[lo + pos] = x


@njit(cache=True)
def _pop(heap: np.ndarray, lo: int, size: int, k1: np.ndarray, k2: np.ndarray,
         k3: np.ndarray) -> int:  # pragma: no cover - compiled
    """Pop the smallest op of the non-empty binary heap ``heap[lo:lo + size]``."""
    top = heap[lo]
    size -= 1
    x = heap[lo + size]
    pos = 0
    while True:
        child = 2 * pos + 1
        if child >= size:
            break
        if child + 1 < size and _less(heap[lo + child + 1], heap[lo + child], k1, k2, k3):
            child += 1
        y = heap[lo + child]
        if not _less(y, x, k1, k2, k3):
            break
        heap[lo + pos] = y
        pos = child
    if size > 0:
        heap[lo + pos] = x
    return top


@njit(cache=True)
def _make_ready(i: int, t: float, counter: int, draws: np.ndarray, resource: np.ndarray,
                has_prio: np.ndarray, prio: np.ndarray, key: np.ndarray, order: np.ndarray,
                pheap: np.ndarray, plo: np.ndarray, psize: np.ndarray, uheap: np.ndarray,
                ulo: np.ndarray, usize: np.ndarray) -> int:  # pragma: no cover - compiled
    """Op ``i`` became ready at ``t``, the ``counter``-th (from 0) to do so: its tie key
    (``t``, or ``draws[counter]`` for random ties) and ready counter; pushed on its
    resource's prioritized or unprioritized heap. Returns the next counter."""
    key[i] = t if draws.shape[0] == 0 else draws[counter]
    order[i] = counter
    r = resource[i]
    if has_prio[i]:
        _push(pheap, plo[r], psize[r], i, prio, key, order)
        psize[r] += 1
    else:
        _push(uheap, ulo[r], usize[r], i, key, key, order)
        usize[r] += 1
    return counter + 1


@njit(cache=True)
def _touch(r: int, touched: np.ndarray, ntouched: int,
           is_touched: np.ndarray) -> int:  # pragma: no cover - compiled
    """Add resource ``r`` to ``touched[:ntouched]`` unless it is there; the new length."""
    if not is_touched[r]:
        is_touched[r] = True
        touched[ntouched] = r
        ntouched += 1
    return ntouched


@njit(cache=True)
def _run(duration: np.ndarray, resource: np.ndarray, prio: np.ndarray, has_prio: np.ndarray,
         indeg: np.ndarray, succ_ptr: np.ndarray, succ_idx: np.ndarray, capacity: np.ndarray,
         draws: np.ndarray, start: np.ndarray,
         end: np.ndarray) -> int:  # pragma: no cover - compiled
    """The event loop (module docstring); writes ``start``/``end``, decrements ``indeg``
    and returns how many ops ran. ``draws`` (empty: fifo ties) are the random tie keys."""
    n = duration.shape[0]
    nres = capacity.shape[0]
    # Heaps of resource r: prioritized in pheap[plo[r]:plo[r + 1]], unprioritized in
    # uheap[ulo[r]:ulo[r + 1]] (room for every op of r); sizes in psize, usize.
    plo = np.zeros(nres + 1, dtype=np.int64)
    ulo = np.zeros(nres + 1, dtype=np.int64)
    for i in range(n):
        if has_prio[i]:
            plo[resource[i] + 1] += 1
        else:
            ulo[resource[i] + 1] += 1
    for r in range(nres):
        plo[r + 1] += plo[r]
        ulo[r + 1] += ulo[r]
    pheap = np.empty(plo[nres], dtype=np.int64)
    uheap = np.empty(ulo[nres], dtype=np.int64)
    psize = np.zeros(nres, dtype=np.int64)
    usize = np.zeros(nres, dtype=np.int64)
    free = capacity.copy()
    key = np.zeros(n)  # tie key
    order = np.zeros(n, dtype=np.int64)  # ready counter
    ops = np.arange(n)
    events = np.empty(n, dtype=np.int64)  # running ops, keyed (end, op)
    nev = 0
    touched = np.empty(nres, dtype=np.int64)
    is_touched = np.zeros(nres, dtype=np.bool_)
    counter = 0

    for i in range(n):
        if indeg[i] == 0:
            counter = _make_ready(i, 0.0, counter, draws, resource, has_prio, prio, key, order,
                                  pheap, plo, psize, uheap, ulo, usize)
    ntouched = nres
    for r in range(nres):
        touched[r] = r
    t = 0.0
    done = 0
    while True:
        for q in range(ntouched):  # dispatch the touched resources (in any order: each
            # dispatch reads and writes only its own resource's heaps and free slots)
            r = touched[q]
            is_touched[r] = False
            while free[r] > 0 and (psize[r] > 0 or usize[r] > 0):
                if psize[r] > 0 and (usize[r] == 0 or _less(
                        pheap[plo[r]], uheap[ulo[r]], key, key, order)):
                    i = _pop(pheap, plo[r], psize[r], prio, key, order)
                    psize[r] -= 1
                else:
                    i = _pop(uheap, ulo[r], usize[r], key, key, order)
                    usize[r] -= 1
                free[r] -= 1
                start[i] = t
                end[i] = t + duration[i]
                _push(events, 0, nev, i, end, end, ops)
                nev += 1
        if nev == 0:
            break
        t = end[events[0]]
        ntouched = 0
        while nev > 0 and end[events[0]] == t:
            i = _pop(events, 0, nev, end, end, ops)
            nev -= 1
            done += 1
            free[resource[i]] += 1
            ntouched = _touch(resource[i], touched, ntouched, is_touched)
            for k in range(succ_ptr[i], succ_ptr[i + 1]):
                j = succ_idx[k]
                indeg[j] -= 1
                if indeg[j] == 0:
                    counter = _make_ready(j, t, counter, draws, resource, has_prio, prio, key,
                                          order, pheap, plo, psize, uheap, ulo, usize)
                    ntouched = _touch(resource[j], touched, ntouched, is_touched)
    return done
