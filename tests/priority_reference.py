"""The pure-Python priority executor and graph compiler that :mod:`commsched.sim.priority`
and :func:`commsched.model.graph.compile_graph` replaced (issue 25).

``tests/test_priority_equality.py`` checks the compiled graph against :func:`compile_graph`
here (the former one: a walk over ``g.adj`` in node order) and the compiled event loop
against :func:`simulate`, a copy of the former ``simulate_compiled``: heaps of Python
tuples per resource, prioritized ops keyed (priority, tie key, ready counter),
unprioritized ops keyed (tie key, ready counter), running ops keyed (end, op); the tie key
is the ready time (``fifo``) or the next ``random.Random(seed).random()`` (``random``).
Same semantics as the module docstring of :mod:`commsched.sim.priority` (TicTac Sec. 3).
"""

from __future__ import annotations

import heapq
import random

import networkx as nx

from commsched.model.graph import CompiledGraph


def compile_graph(g: nx.DiGraph, priorities: dict[str, float] | None = None) -> CompiledGraph:
    """``g`` in array form, ops numbered in node order, successors in adjacency order."""
    ids = list(g.nodes)
    index = {n: i for i, n in enumerate(ids)}
    rnames = list(g.graph["resources"])
    rindex = {r: i for i, r in enumerate(rnames)}
    nodes = g.nodes
    prio: list[float | None] = [nodes[n].get("priority") for n in ids]
    for op, p in (priorities or {}).items():
        prio[index[op]] = p
    succ_ptr = [0]
    succ_idx: list[int] = []
    indeg = [0] * len(ids)
    adj = g.adj
    for n in ids:
        for s in adj[n]:
            j = index[s]
            succ_idx.append(j)
            indeg[j] += 1
        succ_ptr.append(len(succ_idx))
    return CompiledGraph(
        ids=ids,
        duration=[float(nodes[n]["duration"]) for n in ids],
        resource=[rindex[nodes[n]["resource"]] for n in ids],
        priority=prio,
        indegree=indeg,
        succ_ptr=succ_ptr,
        succ_idx=succ_idx,
        resource_names=rnames,
        capacity=[int(g.graph["resources"][r]) for r in rnames],
    )


def simulate(cg: CompiledGraph, tie: str = "fifo",
             seed: int | None = None) -> tuple[list[float], list[float]]:
    """Start and end time of every op of ``cg`` (indexed like ``cg.ids``)."""
    rng = random.Random(seed)
    n = cg.n
    nres = len(cg.capacity)
    duration, resource, priority = cg.duration, cg.resource, cg.priority
    succ_ptr, succ_idx = cg.succ_ptr, cg.succ_idx
    indeg = list(cg.indegree)
    free = list(cg.capacity)
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
    if done != n:
        raise ValueError(f"{n - done} ops never became ready: the graph has a cycle")
    return start, end
