"""PACE's dynamic baselines: Horovod, PyTorch DDP and ByteScheduler as all-reduce policies.

Their decisions depend on the run, so each emits the plan it ends up executing and the
release time of every partition (:mod:`commsched.pace.sim`: realisation of a dynamic
policy). Tensors, ready times and layer order are as in :mod:`commsched.pace.baselines`,
which also holds the policy interface and the static baselines; the registry is
:mod:`commsched.pace.policies`.

========================  =====================================================================
policy                    what it does (our port to the single-channel all-reduce model)
========================  =====================================================================
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
========================  =====================================================================

Sources and parameters. Horovod: Sergeev and Del Balso, arXiv:1802.05799 (PACE's [15]);
fusion threshold and cycle time are Horovod's ``HOROVOD_FUSION_THRESHOLD`` and
``HOROVOD_CYCLE_TIME`` defaults (:data:`HOROVOD`; the change to 128 MiB / 1 ms with v0.21
as the issue states it; options ``threshold_bytes``, ``cycle_s``). DDP: Li et al., "PyTorch
Distributed", VLDB 2020; ``bucket_cap_mb=25`` and the 1 MiB first bucket
(:data:`DDP_BUCKET_BYTES`, :data:`DDP_FIRST_BUCKET_BYTES`; options ``bucket_bytes``,
``first_bucket_bytes``). ByteScheduler: Peng et al., "A Generic Communication Scheduler
for Distributed DNN Training Acceleration", SOSP 2019: partition size and credit size are
auto-tuned there by Bayesian optimisation on the running job's speed; we search the grid of
options ``partition_mib`` (default 1, 4, 16, 64 MiB) x ``credit_partitions`` (default 1, 2, 4
partitions) exhaustively on the simulated iteration, which finds the grid's best where
Bayesian optimisation samples.
"""

from __future__ import annotations

import heapq
import math

from commsched.cost import AllReduceModel
from commsched.errors import CommschedError
from commsched.pace.baselines import (
    Decision,
    Policy,
    PolicyContext,
    fifo_order,
    layer_order,
    whole_group,
)
from commsched.pace.plan import Group, Partition, Plan
from commsched.pace.sim import Workload

__all__ = [
    "BYTESCHEDULER_CREDIT_PARTITIONS",
    "BYTESCHEDULER_PARTITION_MIB",
    "DDP_BUCKET_BYTES",
    "DDP_FIRST_BUCKET_BYTES",
    "HOROVOD",
    "bytescheduler",
    "bytescheduler_timeline",
    "ddp",
    "ddp_buckets",
    "horovod",
    "horovod_timeline",
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



def horovod_timeline(
    w: Workload, model: AllReduceModel, threshold: int, cycle_s: float
) -> list[tuple[list[str], float]]:
    """Horovod's fused buffers in execution order (module docstring).

    Parameters
    ----------
    w : Workload
        The iteration (ready times, sizes).
    model : AllReduceModel
        All-reduce time of a buffer (when the channel is free for the next one).
    threshold : int
        Fusion threshold in bytes (``HOROVOD_FUSION_THRESHOLD``).
    cycle_s : float
        Cycle time in seconds (``HOROVOD_CYCLE_TIME``).

    Returns
    -------
    list of (list of str, float)
        Every fused buffer's tensors and the start of the cycle that formed it.

    Raises
    ------
    CommschedError
        If ``threshold < 1`` or ``cycle_s`` is not a number > 0.

    References
    ----------
    Sergeev and Del Balso, "Horovod", arXiv:1802.05799 (PACE's [15]): tensor fusion.
    """
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


def horovod(name: str) -> Policy:
    """Horovod's tensor fusion with the defaults of one version, as a policy.

    Parameters
    ----------
    name : str
        A key of :data:`HOROVOD` (``"horovod-0.20"``, ``"horovod-0.21"``).

    Returns
    -------
    Policy
        Options ``threshold_bytes`` and ``cycle_s`` override the version's defaults; one
        whole group per fused buffer, release = the cycle that formed it
        (:func:`horovod_timeline`).

    References
    ----------
    Sergeev and Del Balso, "Horovod", arXiv:1802.05799 (PACE's [15]); PACE, Sec. VI-B.
    """
    threshold, cycle = HOROVOD[name]

    def policy(ctx: PolicyContext) -> Decision:
        w = ctx.workload
        t = int(ctx.option("threshold_bytes", threshold))
        c = float(ctx.option("cycle_s", cycle))
        batches = horovod_timeline(w, ctx.model, t, c)
        groups = tuple(whole_group([(v, w.sizes[v]) for v in b], k)
                       for k, (b, _) in enumerate(batches))
        release = {(k, 0): at for k, (_, at) in enumerate(batches)}
        return Decision(Plan(name, groups, {"threshold_bytes": t, "cycle_s": c}), release)

    policy.__doc__ = f"Horovod fusion, {name} defaults (module docstring)."
    return policy


def ddp_buckets(w: Workload, first: int = DDP_FIRST_BUCKET_BYTES,
                cap: int = DDP_BUCKET_BYTES) -> list[list[str]]:
    """DDP's bucket assignment (module docstring).

    Parameters
    ----------
    w : Workload
        The iteration (sizes in parameter creation order).
    first : int
        Limit of the first bucket in bytes.
    cap : int
        Limit of every later bucket in bytes (``bucket_cap_mb``).

    Returns
    -------
    list of list of str
        The buckets in launch order: parameters in reverse creation order; a bucket closes
        when its size reaches its limit.

    References
    ----------
    Li et al., "PyTorch Distributed", VLDB 2020, Sec. 3.2 (gradient bucketing).
    """
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
    """PyTorch DDP buckets with in-order launch (module docstring).

    Parameters
    ----------
    ctx : PolicyContext
        The iteration; options ``first_bucket_bytes`` and ``bucket_bytes``.

    Returns
    -------
    Decision
        One whole group per bucket; release = the latest ready time of buckets ``0..k``.

    References
    ----------
    Li et al., "PyTorch Distributed", VLDB 2020.
    """
    w = ctx.workload
    buckets = ddp_buckets(w, int(ctx.option("first_bucket_bytes", DDP_FIRST_BUCKET_BYTES)),
                          int(ctx.option("bucket_bytes", DDP_BUCKET_BYTES)))
    groups = tuple(whole_group([(v, w.sizes[v]) for v in b], k) for k, b in enumerate(buckets))
    release, launched = {}, 0.0
    for k, b in enumerate(buckets):
        launched = max(launched, max(w.ready[v] for v in b))
        release[(k, 0)] = launched
    return Decision(Plan("ddp", groups, {"buckets": len(buckets)}), release)


def bytescheduler_timeline(
    w: Workload, model: AllReduceModel, partition_bytes: int, credit_bytes: int
) -> tuple[Plan, dict[tuple[int, int], float]]:
    """ByteScheduler's realised plan and hand-over times (module docstring).

    Parameters
    ----------
    w : Workload
        The iteration (ready times, layer order, sizes).
    model : AllReduceModel
        All-reduce time of a partition.
    partition_bytes : int
        Partition size.
    credit_bytes : int
        Credit window: bytes handed to the communication library and not finished.

    Returns
    -------
    Plan
        The tensors in layer order, partitioned; priority = a partition's position in the
        realised (first-in first-out) channel order.
    dict
        ``{(group, offset): hand-over time (s)}``, the release times.

    Raises
    ------
    CommschedError
        If the partition or the credit is below one byte.

    References
    ----------
    Peng et al., "A Generic Communication Scheduler for Distributed DNN Training
    Acceleration", SOSP 2019, Sec. 4 (partitioning and credit-based preemption).
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
    """ByteScheduler, partition size and credit tuned on the simulated iteration.

    Parameters
    ----------
    ctx : PolicyContext
        The iteration and cost model; options ``partition_mib`` and ``credit_partitions``
        (the tuning grid).

    Returns
    -------
    Decision
        The fastest simulated timeline of the grid (:func:`bytescheduler_timeline`);
        ``info`` holds its partition and credit.

    Raises
    ------
    CommschedError
        If the grid is empty.

    References
    ----------
    Peng et al., SOSP 2019 (auto-tuning by Bayesian optimisation; we search the grid).
    """
    w = ctx.workload
    best: tuple[float, Plan, dict[tuple[int, int], float]] | None = None
    for mib in ctx.option("partition_mib", BYTESCHEDULER_PARTITION_MIB):
        for credit in ctx.option("credit_partitions", BYTESCHEDULER_CREDIT_PARTITIONS):
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
