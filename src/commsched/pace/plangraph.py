"""The op graph of an all-reduce plan on a prepared training iteration.

:class:`PlanGraph` holds the compute ops of one iteration (iteration ``k``'s forward and
backward pass, then the next forward pass, without all-reduces) and inserts a plan into
it: one ``allreduce`` op per partition on the channel :data:`NET`, after the producers of
its group's tensors and before the next forward ops that read them, and one ``timer`` op
per release time on :data:`CLOCK`. :mod:`commsched.pace.sim` describes the semantics and
simulates the result.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import networkx as nx

from commsched.cost import AllReduceModel
from commsched.model.graph import CompiledGraph, compile_graph, register_kind
from commsched.pace.plan import Plan, PlanError

__all__ = ["CLOCK", "COMPUTE", "NET", "PlanGraph", "Release", "partition_id"]

#: Resource names of the simulated graph: compute ops, the all-reduce channel, release timers.
COMPUTE, NET, CLOCK = "cpu", "net", "clock"
#: ``{(group index, partition offset): earliest start (s)}`` of a realised dynamic policy.
Release = Mapping[tuple[int, int], float]

register_kind("timer")


def partition_id(group: int, offset: int) -> str:
    """Op id of a partition in the simulated graph.

    Parameters
    ----------
    group : int
        Its group's index in the plan.
    offset : int
        Its first byte in the group's buffer.

    Returns
    -------
    str
        ``ar:<group>:<offset>``.
    """
    return f"ar:{group}:{offset}"



class PlanGraph:
    """The compute ops of one prepared iteration, into which plans are inserted.

    Parameters
    ----------
    base : networkx.DiGraph
        The compute ops (no all-reduces), with their durations and priorities.
    producer : mapping
        ``{tensor: op}`` that outputs its gradient.
    readers : mapping
        ``{tensor: next-iteration forward ops}`` that read it.
    sizes : mapping
        ``{tensor: bytes}`` of every gradient (a plan must cover exactly these).

    References
    ----------
    PACE (Bao et al., INFOCOM 2020), Sec. IV-A (the DAG of one iteration with its
    all-reduces).
    """

    def __init__(self, base: nx.DiGraph, producer: Mapping[str, str],
                 readers: Mapping[str, list[str]], sizes: Mapping[str, int]) -> None:
        self.base = base
        self.producer = producer
        self.readers = readers
        self.sizes = sizes
        self.compiled = compile_graph(base)
        self.index = {n: i for i, n in enumerate(self.compiled.ids)}

    def partitions(self, plan: Plan, model: AllReduceModel, release: Release | None
                    ) -> list[tuple[str, dict[str, Any], list[str], list[str], float | None]]:
        """The ops the plan adds to the base graph.

        Parameters
        ----------
        plan, model, release
            The plan, its cost model and release times (:meth:`graph`).

        Returns
        -------
        list of tuple
            ``(op id, attributes, predecessors, successors, release)`` of every partition.

        Raises
        ------
        PlanError
            As :meth:`graph` does.
        """
        plan.check_tensors(self.sizes, f"plan {plan.policy!r}")
        rank = {(gi, p.offset): k for k, (gi, p) in enumerate(plan.priority_order())}
        release = release or {}
        for key, at in release.items():
            if key not in rank:
                raise PlanError(f"plan {plan.policy!r}: release time for partition {key} "
                                "which the plan does not have")
            if not (math.isfinite(at) and at >= 0):
                raise PlanError(f"plan {plan.policy!r}: release time {at!r} of partition "
                                f"{key} is not >= 0")
        out = []
        for gi, grp in enumerate(plan.groups):
            bounds = []
            pos = 0
            for name, b in grp.tensors:
                bounds.append((name, pos, pos + b))
                pos += b
            producers = sorted({self.producer[n] for n, _ in grp.tensors})
            for part in grp.partitions:
                lo, hi = part.offset, part.offset + part.bytes
                names = [n for n, a, b in bounds if a < hi and b > lo]
                attrs = {"kind": "allreduce", "resource": NET,
                         "duration": float(model.time(part.bytes)), "bytes": part.bytes,
                         "params": names, "group": gi, "offset": part.offset,
                         "plan_priority": part.priority, "priority": rank[(gi, part.offset)]}
                succ = [r for n in names for r in self.readers.get(n, [])]
                out.append((partition_id(gi, part.offset), attrs, producers,
                            list(dict.fromkeys(succ)), release.get((gi, part.offset))))
        return out

    def graph(self, plan: Plan, model: AllReduceModel,
              release: Release | None = None) -> nx.DiGraph:
        """The simulated op graph of ``plan`` (module docstring).

        Parameters
        ----------
        plan : Plan
            Covers exactly the trace's gradients.
        model : AllReduceModel
            A partition of ``b`` bytes takes ``model.time(b)`` seconds.
        release : mapping, optional
            Earliest starts of partitions (dynamic policies).

        Returns
        -------
        networkx.DiGraph
            The base graph with one ``allreduce`` op per partition (``priority`` = its
            rank in :meth:`Plan.priority_order`) and a ``timer`` op per release time.

        Raises
        ------
        PlanError
            If the plan does not fit the trace or a release time is invalid.
        """
        g = self.base.copy()
        g.graph["policy"] = plan.policy
        timers = 0
        for pid, attrs, preds, succ, at in self.partitions(plan, model, release):
            g.add_node(pid, **attrs)
            g.add_edges_from(((u, pid) for u in preds), control=False, bytes=attrs["bytes"])
            g.add_edges_from(((pid, r) for r in succ), control=False, bytes=attrs["bytes"])
            if at is not None:
                tid = "release:" + pid[len("ar:"):]
                g.add_node(tid, kind="timer", resource=CLOCK, duration=float(at))
                g.add_edge(tid, pid, control=True, bytes=0)
                timers += 1
        if timers:
            g.graph["resources"][CLOCK] = timers
        return g

    def compile(self, plan: Plan, model: AllReduceModel, release: Release | None = None
                ) -> tuple[CompiledGraph, list[tuple[int, dict[str, Any]]]]:
        """:meth:`graph` compiled, built without networkx (the base graph is compiled once;
        tested equal to ``compile_graph(self.graph(...))``).

        Parameters
        ----------
        plan, model, release
            As for :meth:`graph`.

        Returns
        -------
        CompiledGraph
            The graph for :func:`commsched.sim.priority.simulate_compiled`.
        list of (int, dict)
            Each partition's op index and attributes.

        Raises
        ------
        PlanError
            As :meth:`graph` does.
        """
        base = self.compiled
        parts = self.partitions(plan, model, release)
        ids = list(base.ids)
        duration = list(base.duration)
        resource = list(base.resource)
        priority = list(base.priority)
        index = self.index
        extra: dict[int, list[int]] = {}
        timers = sum(at is not None for *_, at in parts)
        rnames = list(base.resource_names)
        capacity = list(base.capacity)
        if timers:
            rnames.append(CLOCK)
            capacity.append(timers)
        net, clock = rnames.index(NET), len(rnames) - 1
        n = base.n
        where: list[tuple[int, dict[str, Any]]] = []
        for pid, attrs, preds, succ, at in parts:
            i = n
            n += 1
            where.append((i, attrs))
            ids.append(pid)
            duration.append(attrs["duration"])
            resource.append(net)
            priority.append(attrs["priority"])
            for u in preds:
                extra.setdefault(index[u], []).append(i)
            extra[i] = [index[r] for r in succ]
            if at is not None:
                ids.append("release:" + pid[len("ar:"):])
                duration.append(float(at))
                resource.append(clock)
                priority.append(None)
                extra[n] = [i]
                n += 1
        succ_ptr = [0]
        succ_idx: list[int] = []
        bp, bi = base.succ_ptr, base.succ_idx
        for k in range(n):
            if k < base.n:
                succ_idx.extend(bi[bp[k]:bp[k + 1]])
            succ_idx.extend(extra.get(k, ()))
            succ_ptr.append(len(succ_idx))
        indeg = [0] * n
        for j in succ_idx:
            indeg[j] += 1
        cg = CompiledGraph(ids=ids, duration=duration, resource=resource, priority=priority,
                           indegree=indeg, succ_ptr=succ_ptr, succ_idx=succ_idx,
                           resource_names=rnames, capacity=capacity)
        return cg, where
