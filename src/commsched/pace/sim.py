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
>>> from commsched.model.traced import example_trace
>>> from commsched.pace.plan import Group, Partition, Plan
>>> t = example_trace()  # read -> mm -> grad (of w, 100 B)
>>> plan = Plan("wfbp", (Group((("w", 100),), (Partition(0, 60, 0), Partition(60, 40, 1))),))
>>> r = simulate_plan(t, plan, LinearModel(0.5, 0.01))
>>> [(p.offset, p.start, p.end) for p in r.partitions]
[(0, 2.0, 3.1), (60, 3.1, 4.0)]
>>> (r.makespan, r.forward_time, r.iteration_time)
(5.0, 1.0, 4.0)
"""

from __future__ import annotations

import math
from functools import cached_property

import networkx as nx

from commsched.cost import AllReduceModel, LinearModel
from commsched.errors import CommschedError
from commsched.model.graph import CompiledGraph, compile_graph
from commsched.pace.plan import Group, Partition, Plan
from commsched.pace.plangraph import COMPUTE, NET, PlanGraph, Release
from commsched.pace.planrun import PartitionRun, PlanRun
from commsched.sim.priority import simulate_compiled
from commsched.sim.validate import check_schedule
from commsched.views.allreduce import NEXT_PREFIX, allreduce_view
from commsched.views.common import readers

__all__ = ["UNBOUNDED", "Workload", "compute_slots", "simulate_plan"]

#: ``compute_capacity`` value of PACE's ideal compute: no compute op ever waits for another.
UNBOUNDED = "unbounded"


def compute_slots(trace: nx.DiGraph, capacity: int | str | None) -> int:
    """Ops the compute resource runs at once.

    Parameters
    ----------
    trace : networkx.DiGraph
        The traced iteration.
    capacity : int, str or None
        None: the trace's own (1 for our traces); :data:`UNBOUNDED`: one slot per op
        (PACE's ideal compute); else an integer >= 1.

    Returns
    -------
    int
        The capacity of the compute resource.

    Raises
    ------
    CommschedError
        If ``capacity`` is neither None, :data:`UNBOUNDED` nor an integer >= 1.

    References
    ----------
    PACE (Bao et al., INFOCOM 2020), Sec. IV-A, constraint (5) (unbounded compute).

    Examples
    --------
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
        self._plans = PlanGraph(view, self.producer, self.readers, self.sizes)
        base = simulate_compiled(self._plans.compiled)
        end = dict(zip(base.ids, base.end, strict=True))
        self.ready: dict[str, float] = {v: end[self.producer[v]] for v in self.sizes}
        fs = simulate_compiled(compile_graph(self.forward_graph()))
        fstart = dict(zip(fs.ids, fs.start, strict=True))
        self.forward_time: float = fs.makespan
        self.need: dict[str, float] = {
            v: min((fstart[r] for r in self.readers.get(v, [])), default=math.inf)
            for v in self.sizes}

    def forward_graph(self) -> nx.DiGraph:
        """The next iteration's forward pass alone.

        Returns
        -------
        networkx.DiGraph
            A copy of its compute ops (scaled), without all-reduces.
        """
        fwd: nx.DiGraph = self._plans.base.subgraph(
            [n for n in self._plans.base if str(n).startswith(NEXT_PREFIX)]).copy()
        return fwd

    @cached_property
    def compute_time(self) -> float:
        """Iteration time with free communication: every gradient's all-reduce takes no
        time but still links its producer to the next forward pass's readers, so this is
        one backward and one forward pass (they overlap only where the data allow: the
        next forward op that reads a parameter waits for its gradient).

        Returns
        -------
        float
            The time (s).
        """
        free = Plan("free", tuple(Group(((v, b),), (Partition(0, b, 0),))
                                  for v, b in self.sizes.items()))
        return self.simulate(free, LinearModel(0.0, 0.0), validate=False).iteration_time

    def graph(self, plan: Plan, model: AllReduceModel,
              release: Release | None = None) -> nx.DiGraph:
        """The simulated op graph of ``plan`` (:meth:`PlanGraph.graph`).

        Parameters
        ----------
        plan, model, release
            As for :meth:`PlanGraph.graph`.

        Returns
        -------
        networkx.DiGraph
            The iteration with the plan's partitions and release timers.
        """
        return self._plans.graph(plan, model, release)

    def compile(self, plan: Plan, model: AllReduceModel,
                release: Release | None = None) -> CompiledGraph:
        """:meth:`graph` compiled, without networkx (:meth:`PlanGraph.compile`).

        Parameters
        ----------
        plan, model, release
            The plan, its all-reduce times and release times.

        Returns
        -------
        CompiledGraph
            Equal to ``compile_graph(self.graph(plan, model, release))``.
        """
        return self._plans.compile(plan, model, release)[0]

    def simulate(self, plan: Plan, model: AllReduceModel, release: Release | None = None,
                 validate: bool = True) -> PlanRun:
        """Run ``plan`` with all-reduce times from ``model``.

        Parameters
        ----------
        plan, model, release
            As for :meth:`graph`.
        validate : bool
            Check the schedule (:func:`commsched.sim.validate.check_schedule`).

        Returns
        -------
        PlanRun
            The simulated iteration (:func:`simulate_plan`).

        Raises
        ------
        PlanError
            As :meth:`graph` does.
        """
        cg, where = self._plans.compile(plan, model, release)
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
