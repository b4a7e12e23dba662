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

import heapq
import random
from dataclasses import dataclass
from typing import Literal

import networkx as nx

from commsched.model.graph import CompiledGraph, compile_graph

__all__ = ["Schedule", "simulate", "simulate_compiled"]

TiePolicy = Literal["fifo", "random"]


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
    """Simulate ``g``; ``priorities`` (op id -> number) override node priorities."""
    return simulate_compiled(compile_graph(g, priorities), tie=tie, seed=seed)


def simulate_compiled(
    cg: CompiledGraph, tie: TiePolicy = "fifo", seed: int | None = None
) -> Schedule:
    """Simulate a compiled graph (see the module docstring for the semantics)."""
    if tie not in ("fifo", "random"):
        raise ValueError(f"unknown tie policy {tie!r} (fifo or random)")
    rng = random.Random(seed)
    n = cg.n
    nres = len(cg.capacity)
    duration, resource, priority = cg.duration, cg.resource, cg.priority
    succ_ptr, succ_idx = cg.succ_ptr, cg.succ_idx
    indeg = list(cg.indegree)
    free = list(cg.capacity)
    # Per resource: a heap of prioritized ready ops keyed (priority, tie key, op) and a
    # heap of unprioritized ready ops keyed (tie key, op).
    pq: list[list[tuple[float, float, int, int]]] = [[] for _ in range(nres)]
    uq: list[list[tuple[float, int, int]]] = [[] for _ in range(nres)]
    start = [0.0] * n
    end = [0.0] * n
    events: list[tuple[float, int]] = []
    counter = 0
    fifo = tie == "fifo"

    def make_ready(i: int, t: float) -> None:
        nonlocal counter
        key = t if fifo else rng.random()
        counter += 1
        p = priority[i]
        if p is None:
            heapq.heappush(uq[resource[i]], (key, counter, i))
        else:
            heapq.heappush(pq[resource[i]], (p, key, counter, i))

    def dispatch(r: int, t: float) -> None:
        hp, hu = pq[r], uq[r]
        while free[r] and (hp or hu):
            if hp and (not hu or (hp[0][1], hp[0][2]) < hu[0][:2]):
                i = heapq.heappop(hp)[3]
            else:
                i = heapq.heappop(hu)[2]
            free[r] -= 1
            start[i] = t
            end[i] = t + duration[i]
            heapq.heappush(events, (end[i], i))

    for i in range(n):
        if indeg[i] == 0:
            make_ready(i, 0.0)
    for r in range(nres):
        dispatch(r, 0.0)
    done = 0
    while events:
        t = events[0][0]
        touched = set()
        while events and events[0][0] == t:
            i = heapq.heappop(events)[1]
            done += 1
            free[resource[i]] += 1
            touched.add(resource[i])
            for k in range(succ_ptr[i], succ_ptr[i + 1]):
                j = succ_idx[k]
                indeg[j] -= 1
                if indeg[j] == 0:
                    make_ready(j, t)
                    touched.add(resource[j])
        for r in sorted(touched):
            dispatch(r, t)
    if done != n:  # only possible if the graph has a cycle, which validation rejects
        raise ValueError(f"{n - done} ops never became ready: the graph has a cycle")
    return Schedule(cg.ids, start, end)
