"""All-reduce simulator: one data-parallel training iteration that runs an all-reduce plan.

:func:`simulate_plan` executes a plan (:mod:`commsched.pace.plan`) on a traced training
graph. The graph is PACE's all-reduce DAG (Bao, Peng, Chen, Wu; INFOCOM 2020, Sec. IV-A)
as :func:`commsched.views.allreduce_view` builds it -- iteration ``k``'s forward and
backward compute ops, then the next iteration's forward ops, each of which waits for the
all-reduce of the parameters it reads -- with the view's one-op-per-producer all-reduces
replaced by the plan's partitions:

* partition ``(g, offset)`` of group ``g`` is an ``allreduce`` op on the channel ``net``
  (capacity 1: one all-reduce at a time) of duration ``model.time(bytes)``
  (:class:`commsched.cost.RingAllReduce` = PACE Eq. (1) with a per-step latency, or a
  :class:`commsched.cost.LinearModel` ``a + b*S``); it depends on the producer of every
  tensor of its group (ready when the group's gradients are all produced);
* a next-iteration forward op that reads tensor ``v`` waits for every partition whose byte
  range overlaps ``v``'s range in its group's buffer;
* the channel always starts the ready partition with the smallest
  ``(priority, group, offset)`` -- the plan's semantics, realised by the priority executor
  (:mod:`commsched.sim.priority`) with each partition's priority = its rank in
  :meth:`Plan.priority_order`.

Every schedule passes :func:`commsched.sim.validate.check_schedule`.

Compute (our choices, documented here and tested):

* Compute ops run on one resource ``cpu`` of capacity ``compute_capacity`` (default: the
  trace's, 1 for our traces: one op at a time, like one GPU stream). PACE's model (Sec.
  IV-A, constraint (5)) assumes unbounded compute; pass ``"unbounded"`` for that (one
  slot per op).
* Iteration ``k``'s compute ops have priority 0 and the next iteration's forward ops
  priority 1 on the compute resource: the next iteration's forward pass never overtakes
  this iteration's backward pass (a framework issues them in program order). Since no
  gradient producer depends on an all-reduce (PACE Sec. IV-A), iteration ``k``'s compute
  schedule -- hence every gradient's *ready time* -- does not depend on the plan
  (:attr:`Workload.ready`; tested).
* ``compute_scale`` multiplies every compute duration (to put a CPU trace on a GPU's time
  scale).

Iteration time (steady state): ``makespan - forward_time``, where ``forward_time`` is the
makespan of the forward pass alone. The window runs iteration ``k``'s forward pass, then
its backward pass with the all-reduces, then the next forward pass; the next backward pass
starts when that forward pass ends, with a free channel (every all-reduce feeds some forward
op), exactly as iteration ``k``'s did at ``forward_time``. So consecutive iterations are
``makespan - forward_time`` apart, and with free communication the iteration time is the
compute time of one forward and one backward pass.

Dynamic policies (decisions a static plan cannot express: Horovod's cycle-time fusion, DDP's
in-order bucket launch, ByteScheduler's credit window) are supported by *realisation*: the
policy computes its decisions from the gradients' ready times (:attr:`Workload.ready`,
plan-independent, see above) and the cost model, and emits the plan it ends up executing --
groups as fused, partitions with priority = their position in the realised channel order --
plus a *release time* per partition: the earliest time the policy lets it start (the cycle
at which Horovod fused it, the time ByteScheduler granted it a credit). A release time is a
``timer`` op on its own resource (``clock``, one slot per timer) of that duration, with an
edge to the partition, so the validator checks it like any other dependency. Given release
times that the policy's own timeline satisfies, the executor reproduces that timeline: when
a partition ends, the next one in the realised order is released and produced, and no later
one can be (its release is no earlier).

Examples
--------
>>> from commsched.cost import LinearModel
>>> from commsched.model.graph import add_op, new_graph
>>> from commsched.pace.plan import Group, Partition, Plan
>>> t = new_graph({"cpu": 1}, variables={"w": {"bytes": 100}},
...               meta={"model": "toy", "mode": "train", "batch": 1, "iterations": 1})
>>> for name, d, extra in [("read", 0.0, {"reads": ["w"]}), ("mm", 1.0, {}),
...                        ("grad", 1.0, {"grad_of": ["w"], "is_gradient": True})]:
...     add_op(t, name, "compute", "cpu", d, **{"op_type": "Op", "samples": [d],
...            "out_bytes": 4, "is_gradient": False, **extra})
>>> t.add_edges_from([("read", "mm"), ("mm", "grad")], control=False, bytes=4)
>>> plan = Plan("wfbp", (Group((("w", 100),), (Partition(0, 60, 0), Partition(60, 40, 1))),))
>>> r = simulate_plan(t, plan, LinearModel(0.5, 0.01))
>>> [(p.offset, p.start, p.end) for p in r.partitions]
[(0, 2.0, 3.1), (60, 3.1, 4.0)]
>>> (r.makespan, r.forward_time, r.iteration_time)
(5.0, 1.0, 4.0)
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import networkx as nx
import numpy as np
import pandas as pd

from commsched.cost import AllReduceModel, LinearModel
from commsched.errors import CommschedError
from commsched.model.graph import CompiledGraph, compile_graph, register_kind
from commsched.pace.plan import Group, Partition, Plan, PlanError
from commsched.sim.priority import Schedule, simulate_compiled
from commsched.sim.validate import check_schedule
from commsched.views.allreduce import NEXT_PREFIX, allreduce_view
from commsched.views.common import readers

__all__ = [
    "COMPUTE",
    "NET",
    "UNBOUNDED",
    "PartitionRun",
    "PlanRun",
    "Release",
    "Workload",
    "compute_slots",
    "partition_id",
    "simulate_plan",
]

#: Resource names of the simulated graph: compute ops, the all-reduce channel, release timers.
COMPUTE, NET, CLOCK = "cpu", "net", "clock"
#: ``{(group index, partition offset): earliest start (s)}`` of a realised dynamic policy.
Release = Mapping[tuple[int, int], float]

register_kind("timer")


def partition_id(group: int, offset: int) -> str:
    """Op id of partition ``(group, offset)`` in the simulated graph."""
    return f"ar:{group}:{offset}"


@dataclass(frozen=True)
class PartitionRun:
    """One executed partition: plan position, size, priority rank and its start and end (s)."""

    group: int
    offset: int
    bytes: int
    priority: int
    rank: int
    start: float
    end: float
    tensors: tuple[str, ...]


@dataclass(frozen=True)
class PlanRun:
    """Result of :func:`simulate_plan`: times (s) and every partition's execution."""

    policy: str
    makespan: float
    forward_time: float
    partitions: tuple[PartitionRun, ...]
    schedule: Schedule

    @property
    def iteration_time(self) -> float:
        """Steady-state time of one iteration: ``makespan - forward_time`` (module docstring)."""
        return self.makespan - self.forward_time

    @property
    def comm_time(self) -> float:
        """Total channel busy time (s)."""
        return math.fsum(p.end - p.start for p in self.partitions)

    def table(self) -> pd.DataFrame:
        """One row per partition, in execution order."""
        rows = [dataclasses.asdict(p) | {"tensors": " ".join(p.tensors)}
                for p in self.partitions]
        return pd.DataFrame(rows).sort_values(["start", "rank"], ignore_index=True)

    def channel_usage(self, bin_s: float = 0.005, wire_factor: float = 1.0) -> pd.DataFrame:
        """Channel use over one steady-state iteration, in bins of ``bin_s`` seconds.

        The iteration is the window ``[forward_time, makespan)`` (module docstring). Per bin:
        ``busy`` = the fraction of the bin the channel is busy, ``wire_bytes`` = bytes one
        worker sends in the bin, with a partition of ``b`` bytes sending ``wire_factor * b``
        bytes at a constant rate over its duration (ring all-reduce: ``wire_factor =
        2(W-1)/W``; PACE Sec. VI-E measures a worker's outbound NIC traffic every 5 ms).
        """
        if not (bin_s > 0 and math.isfinite(bin_s)):
            raise CommschedError(f"bin length must be a number > 0 s, got {bin_s!r}")
        t0, t1 = self.forward_time, self.makespan
        n = max(1, math.ceil((t1 - t0) / bin_s - 1e-9))
        edges = t0 + bin_s * np.arange(n + 1)
        busy = np.zeros(n)
        wire = np.zeros(n)
        for p in self.partitions:
            d = p.end - p.start
            if d <= 0:
                continue
            lo = np.clip(edges[:-1], p.start, p.end)
            hi = np.clip(edges[1:], p.start, p.end)
            busy += (hi - lo) / bin_s
            wire += (hi - lo) / d * wire_factor * p.bytes
        return pd.DataFrame({"t_s": edges[:-1] - t0, "busy": busy, "wire_bytes": wire})


#: ``compute_capacity`` value of PACE's ideal compute: no compute op ever waits for another.
UNBOUNDED = "unbounded"


def compute_slots(trace: nx.DiGraph, capacity: int | str | None) -> int:
    """Ops the compute resource runs at once: ``None`` = the trace's own (1 for our
    traces), :data:`UNBOUNDED` = one slot per op, else the integer ``capacity`` (>= 1).

    >>> from commsched.model.graph import new_graph
    >>> compute_slots(new_graph({"cpu": 1}), None), compute_slots(new_graph({"cpu": 1}), 3)
    (1, 3)
    """
    if capacity is None:
        capacity = int(trace.graph["resources"].get(COMPUTE, 1))
    elif capacity == UNBOUNDED:
        return max(1, trace.number_of_nodes())
    if not isinstance(capacity, int) or isinstance(capacity, bool) or capacity < 1:
        raise CommschedError(f"compute capacity must be an integer >= 1 or {UNBOUNDED!r}, "
                             f"got {capacity!r}")
    return capacity


class Workload:
    """A traced training iteration prepared for simulating many plans (built once).

    Parameters
    ----------
    trace
        A traced training graph (:func:`commsched.model.traced.load_trace`).
    compute_scale
        Every compute duration is multiplied by it (> 0).
    compute_capacity
        Ops the compute resource runs at once: None = the trace's, ``"unbounded"`` =
        PACE's ideal compute (:func:`compute_slots`, module docstring).

    Attributes
    ----------
    sizes
        ``{tensor: bytes}`` of every gradient, in the trace's variable order (= the
        parameters' creation order, the order ``model.parameters()`` would list).
    producer
        ``{tensor: op}``: the op that outputs the tensor's gradient.
    ready
        ``{tensor: time (s)}`` its gradient is produced (plan-independent).
    need
        ``{tensor: time (s)}`` the forward pass alone first reads it (its start offset
        in a forward pass without communication; inf if no forward op reads it).
    forward_time
        Makespan of the forward pass alone.
    """

    def __init__(self, trace: nx.DiGraph, compute_scale: float = 1.0,
                 compute_capacity: int | str | None = None) -> None:
        if not (isinstance(compute_scale, (int, float)) and math.isfinite(compute_scale)
                and compute_scale > 0):
            raise CommschedError(f"compute_scale must be a number > 0, got {compute_scale!r}")
        view = allreduce_view(trace, LinearModel(0.0, 0.0), next_forward=True,
                              compute=COMPUTE, net=NET)
        cap = compute_slots(trace, compute_capacity)
        self.compute_scale = float(compute_scale)
        self.compute_capacity = cap
        self.meta = dict(trace.graph.get("meta") or {})
        allreduces: dict[str, list[str]] = view.graph["allreduces"]
        self.producer: dict[str, str] = {}
        for aid, names in allreduces.items():
            (prod,) = view.predecessors(aid)
            for v in names:
                self.producer[v] = prod
        order = list(trace.graph["variables"])
        self.sizes: dict[str, int] = {
            v: int(trace.graph["variables"][v]["bytes"]) for v in order if v in self.producer}
        forward = {n[len(NEXT_PREFIX):] for n in view if str(n).startswith(NEXT_PREFIX)}
        self.readers: dict[str, list[str]] = {
            v: [NEXT_PREFIX + r for r in rs] for v, rs in readers(trace, forward).items()
            if v in self.producer}
        view.remove_nodes_from(list(allreduces))
        view.graph["resources"] = {COMPUTE: cap, NET: 1}
        for n, a in view.nodes(data=True):
            a["duration"] = float(a["duration"]) * self.compute_scale
            a["priority"] = 1 if str(n).startswith(NEXT_PREFIX) else 0
        self._base = view
        self._compiled = compile_graph(view)
        self._index = {n: i for i, n in enumerate(self._compiled.ids)}
        base = simulate_compiled(self._compiled)
        end = dict(zip(base.ids, base.end, strict=True))
        self.ready: dict[str, float] = {v: end[self.producer[v]] for v in self.sizes}
        fs = simulate_compiled(compile_graph(self.forward_graph()))
        fstart = dict(zip(fs.ids, fs.start, strict=True))
        self.forward_time: float = fs.makespan
        self.need: dict[str, float] = {
            v: min((fstart[r] for r in self.readers.get(v, [])), default=math.inf)
            for v in self.sizes}

    def forward_graph(self) -> nx.DiGraph:
        """A copy of the next iteration's forward pass alone (compute ops, scaled)."""
        fwd: nx.DiGraph = self._base.subgraph(
            [n for n in self._base if str(n).startswith(NEXT_PREFIX)]).copy()
        return fwd

    @cached_property
    def compute_time(self) -> float:
        """Iteration time with free communication: every gradient's all-reduce takes no
        time but still links its producer to the next forward pass's readers, so this is
        one backward and one forward pass (they overlap only where the data allow: the
        next forward op that reads a parameter waits for its gradient)."""
        free = Plan("free", tuple(Group(((v, b),), (Partition(0, b, 0),))
                                  for v, b in self.sizes.items()))
        return self.simulate(free, LinearModel(0.0, 0.0), validate=False).iteration_time

    def _partitions(self, plan: Plan, model: AllReduceModel, release: Release | None
                    ) -> list[tuple[str, dict[str, Any], list[str], list[str], float | None]]:
        """``(op id, attributes, predecessors, successors, release)`` of every partition."""
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
        """The simulated op graph of ``plan`` (module docstring); partitions carry
        ``priority`` = their rank in :meth:`Plan.priority_order`."""
        g = self._base.copy()
        g.graph["policy"] = plan.policy
        timers = 0
        for pid, attrs, preds, succ, at in self._partitions(plan, model, release):
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

    def compile(self, plan: Plan, model: AllReduceModel,
                release: Release | None = None) -> CompiledGraph:
        """``compile_graph(self.graph(plan, model, release))``, built without networkx
        (the base graph is compiled once; tested equal)."""
        return self._compile(plan, model, release)[0]

    def _compile(self, plan: Plan, model: AllReduceModel, release: Release | None
                 ) -> tuple[CompiledGraph, list[tuple[int, dict[str, Any]]]]:
        base = self._compiled
        parts = self._partitions(plan, model, release)
        ids = list(base.ids)
        duration = list(base.duration)
        resource = list(base.resource)
        priority = list(base.priority)
        index = self._index
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

    def simulate(self, plan: Plan, model: AllReduceModel, release: Release | None = None,
                 validate: bool = True) -> PlanRun:
        """Run ``plan`` with all-reduce times from ``model`` (see :func:`simulate_plan`)."""
        cg, where = self._compile(plan, model, release)
        s = simulate_compiled(cg)
        if validate:
            check_schedule(cg, s)
        parts = [PartitionRun(a["group"], a["offset"], a["bytes"], a["plan_priority"],
                              a["priority"], s.start[i], s.end[i], tuple(a["params"]))
                 for i, a in where]
        parts.sort(key=lambda p: (p.start, p.rank))
        return PlanRun(plan.policy, s.makespan, self.forward_time, tuple(parts), s)


def simulate_plan(
    trace: nx.DiGraph | Workload,
    plan: Plan,
    model: AllReduceModel,
    *,
    release: Release | None = None,
    compute_scale: float = 1.0,
    compute_capacity: int | str | None = None,
    validate: bool = True,
) -> PlanRun:
    """Simulate one training iteration of ``trace`` that all-reduces by ``plan``.

    Parameters
    ----------
    trace
        A traced training graph, or a :class:`Workload` prepared from one (faster when
        simulating many plans; ``compute_scale`` and ``compute_capacity`` are then its own).
    plan
        The all-reduce plan; its tensors must be exactly the trace's gradients
        (:class:`commsched.pace.plan.PlanError` otherwise).
    model
        All-reduce time model: a partition of ``b`` bytes takes ``model.time(b)`` seconds.
    release
        Earliest start time of partitions ``(group, offset)`` (dynamic policies; module
        docstring).
    compute_scale, compute_capacity
        See :class:`Workload`.
    validate
        Check the schedule with :func:`commsched.sim.validate.check_schedule`.

    Returns
    -------
    PlanRun
        ``iteration_time`` (steady state), ``makespan``, ``forward_time``, every
        partition's start and end (``partitions``, ``table()``), the whole ``schedule``
        and the channel's use in bins (``channel_usage``).
    """
    w = trace if isinstance(trace, Workload) else Workload(trace, compute_scale,
                                                           compute_capacity)
    return w.simulate(plan, model, release=release, validate=validate)
