"""All-reduce policies: PACE's baselines and ablations, one registry (name -> policy).

Every policy maps a :class:`PolicyContext` (a prepared traced iteration, the all-reduce
cost model, the cluster and the policy's options) to a :class:`Decision`: the all-reduce
plan (:mod:`commsched.pace.plan`) it executes and, for policies whose decisions depend on
the run (dynamic policies), the release time of each partition
(:mod:`commsched.pace.sim` explains the mechanism and why the simulator then
reproduces the policy's own timeline). :data:`POLICIES` is the registry; the experiment's
config, its CLI and the contract test (``tests/test_pace_baselines.py``, which simulates
and validates every policy on small traced graphs) read it, so a new policy is one function
and one registry line.

Tensors are the trace's gradient variables (:attr:`Workload.sizes`). Their *ready time* is
when their gradient is produced (:attr:`Workload.ready`), their *layer order* the time the
forward pass first reads them (:attr:`Workload.need`; earlier = closer to the input = more
urgent for the next iteration). Ties go to the variables' creation order.

========================  =====================================================================
policy                    what it does (our port to the single-channel all-reduce model)
========================  =====================================================================
``wfbp``                  wait-free backpropagation, PACE's baseline (i): one all-reduce per
                          tensor as soon as it is ready, first-in first-out, no fusion.
``horovod-0.20``          Horovod's tensor fusion as of v0.20 (64 MiB threshold, 5 ms cycle);
``horovod-0.21``          from v0.21 on (128 MiB, 1 ms). Every cycle the background loop takes
                          the tensors that became ready and fuses them, in ready order, into
                          buffers of at most the threshold (a larger tensor goes alone); the
                          buffers run back to back; the next cycle starts a cycle time after
                          the previous one started, or when its all-reduces end if later.
                          Cycles tick from time 0 while idle. Dynamic: release = cycle start.
``ddp``                   PyTorch DistributedDataParallel buckets: tensors in reverse parameter
                          (creation) order filled into buckets, the first closed once it holds
                          1 MiB, later ones at 25 MiB (a bucket closes when its size reaches
                          the cap); bucket ``k`` is launched once it is ready *and* buckets
                          ``0..k-1`` were launched (DDP's in-order launch). Dynamic: release =
                          the latest ready time of buckets ``0..k``.
``tictac``                TicTac (PACE's baseline (iii)) ported to all-reduce: TicTac orders
                          parameter transfers so that the forward pass is blocked least; here
                          every tensor's all-reduce plays a transfer (a ``recv`` of duration
                          ``model.time(bytes)``) feeding the next forward pass, TAC (Alg. 3,
                          timing-aware, :func:`commsched.tictac.tac`) orders them, and the
                          channel runs whole tensors by that priority: no fusion, no
                          preemption.
``bytescheduler``         ByteScheduler (Peng et al., SOSP 2019): every tensor cut into
                          partitions of ``partition_bytes``, priority = layer order, and a
                          credit window: partitions are handed to the communication library
                          (which runs them first-in first-out) while the bytes handed over and
                          not finished stay within ``credit_bytes``; a partition handed over
                          cannot be overtaken. ByteScheduler auto-tunes both by Bayesian
                          optimisation on the running job; we search a grid (options
                          ``partition_mib`` x ``credit_partitions``) and keep the fastest
                          simulated iteration. Dynamic: release = hand-over time. In our cost
                          model every partition pays its start-up cost in full, so a credit of
                          more than one partition can only delay preemption.
``p3``                    P3 (Jayarajan et al., SysML 2019): tensors sliced into
                          ``slice_bytes`` slices, priority = layer order, preemption at slice
                          boundaries (a static plan). Slice size: option ``slice_kib``; the
                          default 200 KiB (51,200 float32 values) is our assumption.
========================  =====================================================================

Sources and parameters. WFBP: Zhang et al., "Poseidon", USENIX ATC 2017 (PACE's [3]), as
PACE Sec. VI-B describes it. Horovod: Sergeev and Del Balso, arXiv:1802.05799 (PACE's
[15]); fusion threshold and cycle time are Horovod's ``HOROVOD_FUSION_THRESHOLD`` and
``HOROVOD_CYCLE_TIME`` defaults (:data:`HOROVOD`; the change to 128 MiB / 1 ms with v0.21
as the issue states it; options ``threshold_bytes``, ``cycle_s``). DDP: Li et al., "PyTorch
Distributed", VLDB 2020; ``bucket_cap_mb=25`` and the 1 MiB first bucket
(:data:`DDP_BUCKET_BYTES`, :data:`DDP_FIRST_BUCKET_BYTES`; options ``bucket_bytes``,
``first_bucket_bytes``). TicTac: Hashemi et al., SysML 2019 (PACE's [5]), our TAC
(:mod:`commsched.tictac`). ByteScheduler: Peng et al., "A Generic Communication Scheduler
for Distributed DNN Training Acceleration", SOSP 2019: partition size and credit size are
auto-tuned there by Bayesian optimisation on the running job's speed; we search the grid of
options ``partition_mib`` (default 1, 4, 16, 64 MiB) x ``credit_partitions`` (default 1, 2, 4
partitions) exhaustively on the simulated iteration, which finds the grid's best where
Bayesian optimisation samples. P3: Jayarajan et al., SysML 2019 (PACE's [12]); option
``slice_kib``.

The PACE entries call :mod:`commsched.pace`'s planner on the trace (its model,
:func:`commsched.pace.model.build_model`, with the same ``compute_scale`` as the workload;
slot length option ``slot_ms``, default 5 ms, Sec. IV-A):

========================  =====================================================================
``pace``                  Alg. 1 (balanced fusion, search over R with the exact preemptive
                          solver as oracle) and the optimal preemptive schedule of the fused
                          DAG, as a plan (:func:`commsched.pace.fusion.make_plan`).
``pace-nofusion``         ablation: the optimal preemptive schedule of the unfused DAG (one
                          all-reduce per gradient-producing op).
``fusion-nopreempt``      ablation: PACE's fused groups, each all-reduced whole, in the order
                          in which PACE's schedule first runs them (no preemption).
========================  =====================================================================
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import networkx as nx

from commsched.cost import AllReduceModel
from commsched.errors import CommschedError
from commsched.model.graph import new_graph
from commsched.pace.fusion import balanced_fusion, make_plan
from commsched.pace.model import PaceModel, build_model, to_problem
from commsched.pace.plan import Group, Partition, Plan
from commsched.pace.schedule import jackson
from commsched.pace.sim import NET, PlanRun, Release, Workload
from commsched.registry import Registry
from commsched.tictac import tac

__all__ = [
    "BYTESCHEDULER_CREDIT_PARTITIONS",
    "BYTESCHEDULER_PARTITION_MIB",
    "DDP_BUCKET_BYTES",
    "DDP_FIRST_BUCKET_BYTES",
    "HOROVOD",
    "LIVE_MODES",
    "POLICIES",
    "AllReducePolicy",
    "Decision",
    "Policy",
    "PolicyContext",
    "bytescheduler_timeline",
    "ddp_buckets",
    "fifo_order",
    "horovod_timeline",
    "layer_order",
    "live_policies",
    "run_policy",
]

MIB = 1 << 20
#: PyTorch DDP: ``dist._DEFAULT_FIRST_BUCKET_BYTES`` (1 MiB) and ``bucket_cap_mb=25``.
DDP_FIRST_BUCKET_BYTES = 1 * MIB
DDP_BUCKET_BYTES = 25 * MIB
#: ByteScheduler's tuning grid: partition sizes (MiB) x credits (partitions).
BYTESCHEDULER_PARTITION_MIB = (1, 4, 16, 64)
BYTESCHEDULER_CREDIT_PARTITIONS = (1, 2, 4)
#: Horovod's defaults: policy name -> (fusion threshold in bytes, cycle time in s).
HOROVOD: dict[str, tuple[int, float]] = {
    "horovod-0.20": (64 * MIB, 5e-3),
    "horovod-0.21": (128 * MIB, 1e-3),
}


@dataclass(frozen=True)
class PolicyContext:
    """What a policy may look at.

    ``workload``: the prepared traced iteration (ready times, layer order, sizes);
    ``model``: the all-reduce time model; ``trace``: the traced graph itself (PACE's
    planner builds its own model of it); ``n_workers`` and ``bandwidth_Bps``: the cluster
    (ring all-reduce); ``options``: the policy's own settings (config section
    ``pace_sim.policies``), e.g. ``{"slice_kib": 200}`` for P3.
    """

    workload: Workload
    model: AllReduceModel
    trace: nx.DiGraph | None = None
    n_workers: int = 1
    bandwidth_Bps: float = math.inf
    options: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Decision:
    """A policy's plan, the release times of its partitions (dynamic policies) and what it
    chose (tuned settings) for the record."""

    plan: Plan
    release: Release = field(default_factory=dict)
    info: Mapping[str, Any] = field(default_factory=dict)


Policy = Callable[[PolicyContext], Decision]


def fifo_order(w: Workload) -> list[str]:
    """Tensors by ready time, ties in creation order."""
    pos = {v: i for i, v in enumerate(w.sizes)}
    return sorted(w.sizes, key=lambda v: (w.ready[v], pos[v]))


def layer_order(w: Workload) -> list[str]:
    """Tensors by the time the forward pass first reads them, ties in creation order."""
    pos = {v: i for i, v in enumerate(w.sizes)}
    return sorted(w.sizes, key=lambda v: (w.need[v], pos[v]))


def _whole(tensors: Sequence[tuple[str, int]], priority: int) -> Group:
    return Group(tuple(tensors), (Partition(0, sum(b for _, b in tensors), priority),))


def _sliced(name: str, size: int, slice_bytes: int, priority: int) -> Group:
    offs = range(0, size, slice_bytes)
    return Group(((name, size),), tuple(Partition(o, min(slice_bytes, size - o), priority)
                                        for o in offs))


def _opt(ctx: PolicyContext, key: str, default: Any) -> Any:
    return ctx.options.get(key, default)


def wfbp(ctx: PolicyContext) -> Decision:
    """WFBP: one all-reduce per tensor, first-in first-out (module docstring)."""
    w = ctx.workload
    groups = tuple(_whole([(v, w.sizes[v])], k) for k, v in enumerate(fifo_order(w)))
    return Decision(Plan("wfbp", groups, {"order": "ready time"}))


def horovod_timeline(
    w: Workload, model: AllReduceModel, threshold: int, cycle_s: float
) -> list[tuple[list[str], float]]:
    """Horovod's fused buffers in execution order with the start of the cycle that formed
    them (module docstring)."""
    if threshold < 1 or not (cycle_s > 0 and math.isfinite(cycle_s)):
        raise CommschedError("horovod: threshold must be >= 1 byte and cycle time > 0 s")
    pending = fifo_order(w)
    out: list[tuple[list[str], float]] = []
    i, tick, free = 0, 0.0, 0.0
    while i < len(pending):
        start = max(tick, free)
        first = w.ready[pending[i]]
        if first > start:  # idle: the loop keeps ticking every cycle
            start += math.ceil((first - start) / cycle_s - 1e-12) * cycle_s
        batch: list[str] = []
        size = 0
        while i < len(pending) and w.ready[pending[i]] <= start:
            v = pending[i]
            if batch and size + w.sizes[v] > threshold:
                out.append((batch, start))
                free = max(free, start) + model.time(size)
                batch, size = [], 0
            batch.append(v)
            size += w.sizes[v]
            i += 1
        out.append((batch, start))
        free = max(free, start) + model.time(size)
        tick = start + cycle_s
    return out


def _horovod(name: str) -> Policy:
    threshold, cycle = HOROVOD[name]

    def policy(ctx: PolicyContext) -> Decision:
        w = ctx.workload
        t = int(_opt(ctx, "threshold_bytes", threshold))
        c = float(_opt(ctx, "cycle_s", cycle))
        batches = horovod_timeline(w, ctx.model, t, c)
        groups = tuple(_whole([(v, w.sizes[v]) for v in b], k)
                       for k, (b, _) in enumerate(batches))
        release = {(k, 0): at for k, (_, at) in enumerate(batches)}
        return Decision(Plan(name, groups, {"threshold_bytes": t, "cycle_s": c}), release)

    policy.__doc__ = f"Horovod fusion, {name} defaults (module docstring)."
    return policy


def ddp_buckets(w: Workload, first: int = DDP_FIRST_BUCKET_BYTES,
                cap: int = DDP_BUCKET_BYTES) -> list[list[str]]:
    """DDP's bucket assignment: reverse parameter order, first bucket ``first`` bytes,
    then ``cap``; a bucket closes when its size reaches its limit."""
    buckets: list[list[str]] = [[]]
    size, limit = 0, first
    for v in reversed(list(w.sizes)):
        buckets[-1].append(v)
        size += w.sizes[v]
        if size >= limit:
            buckets.append([])
            size, limit = 0, cap
    return [b for b in buckets if b]


def ddp(ctx: PolicyContext) -> Decision:
    """PyTorch DDP buckets with in-order launch (module docstring)."""
    w = ctx.workload
    buckets = ddp_buckets(w, int(_opt(ctx, "first_bucket_bytes", DDP_FIRST_BUCKET_BYTES)),
                          int(_opt(ctx, "bucket_bytes", DDP_BUCKET_BYTES)))
    groups = tuple(_whole([(v, w.sizes[v]) for v in b], k) for k, b in enumerate(buckets))
    release, launched = {}, 0.0
    for k, b in enumerate(buckets):
        launched = max(launched, max(w.ready[v] for v in b))
        release[(k, 0)] = launched
    return Decision(Plan("ddp", groups, {"buckets": len(buckets)}), release)


def tictac(ctx: PolicyContext) -> Decision:
    """TicTac's TAC order of whole tensors (module docstring)."""
    w = ctx.workload
    fwd = w.forward_graph()
    g = new_graph({**fwd.graph["resources"], NET: 1})
    g.add_nodes_from(fwd.nodes(data=True))
    g.add_edges_from(fwd.edges(data=True))
    for v, b in w.sizes.items():
        rid = f"recv:{v}"
        g.add_node(rid, kind="recv", resource=NET, duration=float(ctx.model.time(b)), bytes=b)
        g.add_edges_from((rid, r) for r in w.readers.get(v, []))
    prio = tac(g)
    pos = {v: i for i, v in enumerate(w.sizes)}
    order = sorted(w.sizes, key=lambda v: (prio[f"recv:{v}"], pos[v]))
    groups = tuple(_whole([(v, w.sizes[v])], k) for k, v in enumerate(order))
    return Decision(Plan("tictac", groups, {"order": "TAC on the next forward pass"}))


def p3(ctx: PolicyContext) -> Decision:
    """P3: fixed-size slices, layer priority, preemption at slice boundaries."""
    w = ctx.workload
    slice_bytes = int(float(_opt(ctx, "slice_kib", 200)) * 1024)
    if slice_bytes < 1:
        raise CommschedError("p3: slice_kib must give at least one byte")
    groups = tuple(_sliced(v, w.sizes[v], slice_bytes, k)
                   for k, v in enumerate(layer_order(w)))
    return Decision(Plan("p3", groups, {"slice_bytes": slice_bytes}))


def bytescheduler_timeline(
    w: Workload, model: AllReduceModel, partition_bytes: int, credit_bytes: int
) -> tuple[Plan, dict[tuple[int, int], float]]:
    """ByteScheduler's realised plan and hand-over times (module docstring).

    Partitions carry priority = their position in the realised (first-in first-out)
    channel order; the plan's groups are the tensors in layer order.
    """
    if partition_bytes < 1 or credit_bytes < 1:
        raise CommschedError("bytescheduler: partition and credit must be >= 1 byte")
    order = layer_order(w)
    parts = []  # (ready, layer rank, offset, bytes, group)
    for k, v in enumerate(order):
        for off in range(0, w.sizes[v], partition_bytes):
            parts.append((w.ready[v], k, off, min(partition_bytes, w.sizes[v] - off)))
    arrivals = sorted(parts)
    ready: list[tuple[int, int, int]] = []  # heap of (layer rank, offset, bytes)
    inflight: list[tuple[float, int]] = []  # FIFO of (end, bytes)
    handed: dict[tuple[int, int], tuple[int, float]] = {}
    t, a, used, last_end = 0.0, 0, 0, 0.0
    while a < len(arrivals) or ready or inflight:
        while a < len(arrivals) and arrivals[a][0] <= t:
            _, k, off, b = arrivals[a]
            heapq.heappush(ready, (k, off, b))
            a += 1
        while inflight and inflight[0][0] <= t:
            used -= inflight.pop(0)[1]
        while ready and (not inflight or used + ready[0][2] <= credit_bytes):
            k, off, b = heapq.heappop(ready)
            start = max(t, last_end)
            last_end = start + model.time(b)
            inflight.append((last_end, b))
            used += b
            handed[(k, off)] = (len(handed), t)
        nxt = [x for x in (arrivals[a][0] if a < len(arrivals) else None,
                           inflight[0][0] if inflight else None) if x is not None]
        if not nxt:
            break
        t = max(t, min(nxt))
    groups = []
    release: dict[tuple[int, int], float] = {}
    for k, v in enumerate(order):
        offs = range(0, w.sizes[v], partition_bytes)
        groups.append(Group(((v, w.sizes[v]),), tuple(
            Partition(o, min(partition_bytes, w.sizes[v] - o), handed[(k, o)][0])
            for o in offs)))
        for o in offs:
            release[(k, o)] = handed[(k, o)][1]
    meta = {"partition_bytes": partition_bytes, "credit_bytes": credit_bytes}
    return Plan("bytescheduler", tuple(groups), meta), release


def bytescheduler(ctx: PolicyContext) -> Decision:
    """ByteScheduler, partition size and credit tuned on the simulated iteration."""
    w = ctx.workload
    best: tuple[float, Plan, dict[tuple[int, int], float]] | None = None
    for mib in _opt(ctx, "partition_mib", BYTESCHEDULER_PARTITION_MIB):
        for credit in _opt(ctx, "credit_partitions", BYTESCHEDULER_CREDIT_PARTITIONS):
            pb = max(1, int(float(mib) * MIB))
            plan, release = bytescheduler_timeline(w, ctx.model, pb, int(credit) * pb)
            t = w.simulate(plan, ctx.model, release, validate=False).iteration_time
            if best is None or t < best[0] - 1e-12:
                best = (t, plan, release)
    if best is None:
        raise CommschedError("bytescheduler: empty tuning grid (partition_mib, "
                             "credit_partitions)")
    _, plan, release = best
    return Decision(plan, release, dict(plan.meta))


def _pace_model(ctx: PolicyContext) -> tuple[PaceModel, float]:
    if ctx.trace is None:
        raise CommschedError("PACE policies need the trace (PolicyContext.trace)")
    slot_s = float(_opt(ctx, "slot_ms", 5.0)) / 1e3
    return build_model(ctx.trace, compute_scale=ctx.workload.compute_scale), slot_s


def pace(ctx: PolicyContext) -> Decision:
    """PACE: balanced fusion (Alg. 1) + optimal preemptive schedule, as a plan."""
    model, slot_s = _pace_model(ctx)
    res = balanced_fusion(model, ctx.model, slot_s)
    meta = {"R": res.r, "N": len(model.ops), "slot_s": slot_s,
            "predicted_iter_s": res.iter_time_s}
    plan = make_plan(res.model, res.problem, res.schedule, meta=meta, policy="pace")
    return Decision(plan, info=meta)


def pace_nofusion(ctx: PolicyContext) -> Decision:
    """Ablation: the optimal preemptive schedule without fusion."""
    model, slot_s = _pace_model(ctx)
    problem = to_problem(model, ctx.model, slot_s)
    schedule = jackson(problem)
    meta = {"N": len(model.ops), "slot_s": slot_s}
    return Decision(make_plan(model, problem, schedule, meta=meta, policy="pace-nofusion"),
                    info=meta)


def fusion_nopreempt(ctx: PolicyContext) -> Decision:
    """Ablation: PACE's fused groups, whole, in the order PACE's schedule starts them."""
    model, slot_s = _pace_model(ctx)
    res = balanced_fusion(model, ctx.model, slot_s)
    first = {i: min(ts) for i, ts in res.schedule.items() if ts}
    order = sorted(range(len(res.model.ops)), key=lambda i: (first.get(i, math.inf), i))
    groups = tuple(_whole(res.model.ops[i].tensors, k) for k, i in enumerate(order))
    meta = {"R": res.r, "N": len(model.ops), "slot_s": slot_s}
    return Decision(Plan("fusion-nopreempt", groups, meta), info=meta)


#: How a live PyTorch job (:mod:`commsched.pace.live.ddp`) executes a policy: PyTorch DDP
#: itself; the decision's plan in the plan executor (``plan``); the plan launched in its own
#: order without release times (``plan-by-order``); WFBP's tensors fused at run time by
#: Horovod's cycle (``horovod``).
LIVE_MODES = ("ddp", "plan", "plan-by-order", "horovod")


@dataclass(frozen=True)
class AllReducePolicy:
    """One all-reduce policy: the simulator's decision and, if it runs live, how.

    Parameters
    ----------
    decide : Policy
        :class:`PolicyContext` -> :class:`Decision` (the plan and release times the
        simulator runs; the live job runs the same plan).
    live : str or None
        One of :data:`LIVE_MODES`, or None for a policy that is only simulated.
    """

    decide: Policy
    live: str | None = None

    def __post_init__(self) -> None:
        if self.live is not None and self.live not in LIVE_MODES:
            raise ValueError(f"live mode {self.live!r} is not one of {LIVE_MODES}")

    def __call__(self, ctx: PolicyContext) -> Decision:
        return self.decide(ctx)


#: The registry of all-reduce policies, simulated and live from the same entries. Aliases:
#: ``horovod`` is Horovod as PACE measured it (v0.20).
POLICIES: Registry[AllReducePolicy] = Registry("all-reduce policy")
POLICIES.add("wfbp", AllReducePolicy(wfbp, live="plan"))
POLICIES.add("horovod-0.20", AllReducePolicy(_horovod("horovod-0.20"), live="horovod"),
             aliases=("horovod",))
POLICIES.add("horovod-0.21", AllReducePolicy(_horovod("horovod-0.21")))
POLICIES.add("ddp", AllReducePolicy(ddp, live="ddp"))
#: DDP's buckets as a plan in our executor (layer-wise overlap with the next forward pass).
POLICIES.add("ddp_buckets", AllReducePolicy(ddp, live="plan-by-order"))
POLICIES.add("tictac", AllReducePolicy(tictac))
POLICIES.add("bytescheduler", AllReducePolicy(bytescheduler))
POLICIES.add("p3", AllReducePolicy(p3))
POLICIES.add("pace", AllReducePolicy(pace, live="plan"))
POLICIES.add("pace-nofusion", AllReducePolicy(pace_nofusion))
POLICIES.add("fusion-nopreempt", AllReducePolicy(fusion_nopreempt))


def live_policies() -> tuple[str, ...]:
    """Every policy name (aliases included) that a live job can execute."""
    return tuple(n for n in POLICIES.choices() if POLICIES[n].live is not None)


def run_policy(name: str, ctx: PolicyContext, validate: bool = True
               ) -> tuple[Decision, PlanRun]:
    """Decide with policy ``name`` and simulate its plan (validated)."""
    d = POLICIES[name](ctx)
    return d, ctx.workload.simulate(d.plan, ctx.model, d.release or None, validate=validate)
