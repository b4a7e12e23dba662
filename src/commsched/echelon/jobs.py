"""Training jobs as compute tasks and flows, and their coupled compute + network simulation.

EchelonFlow (Pan et al., HotNets 2022, Sec. 3.3) claims that tardiness scheduling shortens
training (Property 1); tardiness itself is only a proxy. To measure iteration times, a job
is built here as a DAG of *compute tasks* (on hosts, with profiled durations) and *flows*
(between hosts, with sizes), and :func:`run_jobs` runs the tasks as events beside the
flow-level network (:class:`commsched.sim.flow.FlowSim`, interleaved with
:meth:`~commsched.sim.flow.FlowSim.advance`): a flow is released when its producers finish,
a task waits for its flows, and a scheduler (any flow policy) only changes the flow rates.

Profiles
    :func:`layer_profile` cuts a traced training iteration (:mod:`commsched.trace`) into
    ``blocks`` consecutive blocks of equal forward time and gives each block its forward
    and backward time, parameter bytes and the bytes of the activations that leave it. Op
    times are the traced durations (a CPU: multiply by ``compute_scale`` for faster
    devices); the micro-batch is the traced batch. How ops are assigned to blocks: see
    :func:`layer_profile` (an approximation on branched models).

Paradigms (:data:`PARADIGMS`; ``W`` workers, ``S`` stages, ``M`` micro-batches, ``B``
blocks; every paradigm unrolls ``iterations`` iterations, chained by each host's order)
    ``dp-allreduce``
        Each worker: forward (one task), then backward block by block, last block first
        (gradient *buckets* = blocks). When every worker has finished bucket ``b``, its ring
        all-reduce runs; the next iteration's forward waits for every all-reduce.
    ``dp-ps``
        As above, but each worker pushes bucket ``b`` to every server (an equal shard each)
        when it finishes it; a server returns (pulls) its shard to every worker once all
        pushes of the bucket reached it. Servers are hosts of their own; their aggregation
        time is neglected.
    ``gpipe``, ``1f1b``
        Pipeline parallelism, stage ``s`` on host ``s``, each stage's computations in the
        order of :func:`commsched.echelon.arrangement.pipeline_timeline`: GPipe (Huang et
        al. 2019; the paper's Fig. 1) runs the forward of micro-batches ``0..M-1`` then
        their backward in reverse order; 1F1B (PipeDream-Flush) runs ``S - s - 1`` warm-up
        forwards, then one forward and one backward in turn. The activation of
        micro-batch ``j`` goes ``s -> s+1`` after its forward, its gradient ``s+1 -> s``
        after the backward of ``s+1``.
    ``tensor-parallel``
        Megatron-style (the paper's Fig. 5): every block's compute is split evenly over the
        ``W`` workers; after the forward of each block but the last, the block's output
        activations are all-reduced; after the backward of each block but the first, the
        gradient of its input activations is all-reduced.
    ``fsdp``
        FSDP / ZeRO-3 (the paper's Fig. 3): before the forward and again before the backward
        of each block, its parameters are all-gathered (one after the other: one
        communication stream, running as far ahead of the computation as the network
        lets it: no memory limit on prefetching); after the backward of a block, its
        gradients are reduce-scattered (beside the all-gathers, not queued behind them).
        The next iteration starts once every reduce-scatter is done.

Collectives (our choice). A ring all-reduce of ``S`` bytes over ``W`` workers is one
Coflow of ``W`` neighbour flows ``w -> w+1`` of ``2 (W-1)/W * S`` bytes each (an
all-gather or reduce-scatter: ``(W-1)/W * S``), not ``2(W-1)`` dependent steps: in a fluid
network without latency, a ring whose steps are pipelined moves the same bytes over the
same links, and the Coflow keeps the flow count (and the scheduler's work) small. What is
lost is the step-by-step coupling of the ring to its slowest link within a step.

EchelonFlows (Sec. 3.2, Sec. 4; the model and its scheduler contract:
:mod:`commsched.echelon.model`). Every flow belongs to a *group* (one EchelonFlow) whose
arrangement gives each flow an offset (:mod:`commsched.echelon.arrangement`): Coflow (Eq.
5: every offset 0) for each all-reduce, push, pull, reduce-scatter and tensor-parallel
all-reduce; GPipe (Eq. 6: the ``k``-th flow released is due ``k T`` after the head, ``T``
the consumer's time per micro-batch) and 1F1B (our extension: offsets derived from the
stage schedule, :func:`~commsched.echelon.arrangement.pipeline_echelonflows`) for the
activations (gradients) between two stages in one iteration; FSDP (Eq. 7, with its ``i =
n`` boundary as :func:`~commsched.echelon.arrangement.fsdp` resolves it) for the ``2B``
all-gathers of an iteration, each spaced from the previous one by the time of the block
that consumes the previous one (per-block times; equal blocks give exactly
:func:`~commsched.echelon.arrangement.fsdp`). The reference time ``r`` is the release of
the group's first flow, known only at run time; when a flow is released, :func:`run_jobs`
gives it the FlowSim meta columns ``job``, ``group`` (unique over all jobs), ``index``
(its position in the group, in release order) and ``ideal`` (``r + offset``), which the
schedulers of :mod:`commsched.echelon.schedulers` read.

Examples
--------
A two-stage GPipe job with two micro-batches on two hosts of a 1 byte/s switch, every
stage taking 1 s forward and 2 s backward per micro-batch and 1-byte activations:

>>> from commsched.sim.flow import big_switch
>>> prof = LayerProfile("toy", fwd=(1.0, 1.0), bwd=(2.0, 2.0), params=(4, 4), act=(1, 0))
>>> job = build_job(JobSpec("pp", "gpipe", hosts=(0, 1), micro_batches=2), prof)
>>> run = run_jobs([job], big_switch(2, rate=1.0), "fair")
>>> run.iteration_times()["iteration_s"].tolist()
[11.0]
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import networkx as nx
import numpy as np
import pandas as pd

from commsched.echelon.arrangement import _stage_order, pipeline_echelonflows, pipeline_timeline
from commsched.echelon.arrangement import gpipe as gpipe_arrangement
from commsched.echelon.schedulers import FLOW_SCHEDULERS
from commsched.errors import CommschedError
from commsched.model.traced import reads_of
from commsched.sim.flow import FlowSim, Network, Policy, check_flow_schedule
from commsched.views.common import check_trace, grad_producers, optimizer_ops

__all__ = [
    "PARADIGMS",
    "ClusterRun",
    "Group",
    "JobGraph",
    "JobSpec",
    "LayerProfile",
    "build_job",
    "layer_profile",
    "run_jobs",
]

#: The training paradigms :func:`build_job` knows.
PARADIGMS = ("dp-allreduce", "dp-ps", "gpipe", "1f1b", "tensor-parallel", "fsdp")


@dataclass(frozen=True)
class LayerProfile:
    """Per-block profile of one training iteration on one device (seconds, bytes).

    ``act[k]`` is what block ``k`` sends to block ``k + 1`` in the forward pass (the
    gradient going back has the same size); ``act[-1]`` is unused.
    """

    model: str
    fwd: tuple[float, ...]
    bwd: tuple[float, ...]
    params: tuple[int, ...]
    act: tuple[int, ...]

    def __post_init__(self) -> None:
        n = len(self.fwd)
        if n < 1 or not (len(self.bwd) == len(self.params) == len(self.act) == n):
            raise CommschedError(f"profile {self.model}: fwd, bwd, params, act differ in length")
        if min(self.fwd + self.bwd) < 0 or min(self.params + self.act) < 0:
            raise CommschedError(f"profile {self.model}: negative time or size")

    @property
    def blocks(self) -> int:
        return len(self.fwd)

    def scaled(self, compute_scale: float) -> LayerProfile:
        """The same profile with every compute time multiplied by ``compute_scale``."""
        if not compute_scale > 0:
            raise CommschedError("compute_scale must be > 0")
        return LayerProfile(self.model, tuple(t * compute_scale for t in self.fwd),
                            tuple(t * compute_scale for t in self.bwd), self.params, self.act)

    def merged(self, parts: int) -> LayerProfile:
        """``parts`` consecutive groups of blocks of about equal forward + backward time
        (a group's activation is its last block's)."""
        if not 1 <= parts <= self.blocks:
            raise CommschedError(f"profile {self.model}: cannot merge {self.blocks} blocks "
                                 f"into {parts}")
        w = np.asarray(self.fwd) + np.asarray(self.bwd)
        cuts = _balanced_cuts(w, parts)
        bounds = [0, *cuts, self.blocks]
        sl = [slice(a, b) for a, b in itertools.pairwise(bounds)]
        return LayerProfile(self.model, tuple(float(sum(self.fwd[s])) for s in sl),
                            tuple(float(sum(self.bwd[s])) for s in sl),
                            tuple(int(sum(self.params[s])) for s in sl),
                            tuple(int(self.act[s.stop - 1]) for s in sl))


def _balanced_cuts(weight: np.ndarray, parts: int) -> list[int]:
    """``parts - 1`` strictly increasing cut positions in ``1..len-1`` splitting ``weight``
    where its running sum crosses ``k / parts`` of the total (each part non-empty)."""
    n = len(weight)
    c = np.cumsum(weight)
    total = c[-1] if n else 0.0
    cuts: list[int] = []
    for k in range(1, parts):
        pos = int(np.searchsorted(c, total * k / parts, side="left")) + 1 if total > 0 else k
        lo = (cuts[-1] + 1) if cuts else 1
        hi = n - (parts - k)
        cuts.append(min(max(pos, lo), hi))
    return cuts


#: Name scope of a traced model's synthetic inputs (:mod:`commsched.trace.tf`).
_INPUTS = "inputs/"


def _differentiated(op: str) -> str | None:
    """The forward op a ``tf.gradients`` op differentiates, by its name, or None.

    >>> _differentiated("gradients/net/conv1/Conv2D_grad/Conv2DBackpropFilter")
    'net/conv1/Conv2D'
    """
    parts = op.split("/")
    if parts[0] != "gradients":
        return None
    for i, part in enumerate(parts[1:], 1):
        if part.endswith("_grad"):
            return "/".join([*parts[1:i], part.removesuffix("_grad")])
    return None


def _asap(g: nx.DiGraph) -> dict[str, float]:
    """Earliest start of every op with unlimited parallelism (traced durations)."""
    start: dict[str, float] = {}
    for n in nx.topological_sort(g):
        start[n] = max((start[p] + g.nodes[p]["duration"] for p in g.pred[n]), default=0.0)
    return start


def layer_profile(trace: nx.DiGraph, blocks: int) -> LayerProfile:
    """Cut a traced training iteration into ``blocks`` blocks (see the module docstring).

    Optimizer ops are dropped (:func:`commsched.views.common.optimizer_ops`). Forward ops
    (not ``is_gradient``) are ordered by their earliest start with unlimited parallelism
    (ASAP; an op that depends on parameters and constants alone, such as a transposed
    embedding matrix, takes the place of its first consumer) and cut into ``blocks`` runs
    of equal summed duration. A trainable variable belongs to the block of the first
    forward op that consumes it (a read op's successor); a block's activation bytes are
    the bytes of the data edges from its forward ops that depend on the inputs to later
    blocks' (what depends on parameters and constants alone is not an activation). A
    gradient op belongs to the block of the forward op it differentiates, by the names
    ``tf.gradients`` gives (``gradients/<forward op>_grad/...``: 91% of the backward time
    of the Transformer trace, 96-100% of the others); the rest (gradient sums, the loss'
    seed) to the lowest block among its gradient predecessors, or to the last block.
    """
    check_trace(trace)
    if blocks < 1:
        raise CommschedError("a profile needs at least one block")
    meta = trace.graph["meta"]
    name = f"{meta['model']}-{meta['mode']}-b{meta['batch']}"
    grads = grad_producers(trace)
    if not grads:
        raise CommschedError(f"{name}: the trace has no gradient ops; profiles need training")
    dropped = optimizer_ops(trace)
    g = trace.subgraph([n for n in trace.nodes if n not in dropped])
    start = _asap(g)
    is_grad = {n: bool(g.nodes[n]["is_gradient"]) or n in grads for n in g.nodes}
    # activations: the data computed from the synthetic inputs (the tracer builds them in
    # the name scope "inputs/"); what is computed from parameters and constants alone (a
    # transposed embedding matrix, a shape, a dropout mask) is not sent between blocks
    activation = set()
    for n in nx.topological_sort(g):
        if n.startswith(_INPUTS) or any(p in activation and not g.edges[p, n].get("control")
                                        for p in g.pred[n]):
            activation.add(n)
    if not activation:
        raise CommschedError(f"{name}: no op under {_INPUTS!r}; cannot tell activations")
    # an op computed from parameters alone (no activation) runs where it is first needed
    key: dict[str, float] = {}
    for n in reversed(list(nx.topological_sort(g))):
        if is_grad[n]:
            continue
        later = [key[v] for v in g.succ[n] if v in key]
        key[n] = start[n] if n in activation or not later else min(later)
    fwd_ops = sorted(key, key=lambda n: (key[n], start[n], n))
    if len(fwd_ops) < blocks:
        raise CommschedError(f"{name}: {len(fwd_ops)} forward ops cannot make {blocks} blocks")
    dur = np.array([g.nodes[n]["duration"] for n in fwd_ops])
    cuts = _balanced_cuts(dur, blocks)
    block_of = dict(zip(fwd_ops, np.searchsorted(cuts, np.arange(len(fwd_ops)), side="right"),
                        strict=True))
    fwd = np.bincount([block_of[n] for n in fwd_ops], weights=dur, minlength=blocks)
    act = np.zeros(blocks, dtype=np.int64)
    for u, v, a in g.edges(data=True):
        if (u in activation and u in block_of and v in block_of and not a.get("control")
                and block_of[u] < block_of[v]):
            act[block_of[u]] += int(a.get("bytes", 0))
    params = np.zeros(blocks, dtype=np.int64)
    variables = trace.graph["variables"]
    for var, ops in reads_of(g).items():
        if not variables.get(var, {}).get("trainable", True):
            continue
        cons = [s for op in ops for s in g.succ[op] if s in block_of] or \
            [op for op in ops if op in block_of]
        if cons:
            params[min(block_of[c] for c in cons)] += int(variables[var]["bytes"])
    # backward: a gradient op belongs to the block of the forward op it differentiates
    # (tf.gradients names it gradients/<forward op>_grad/...); the others (gradient
    # sums, the loss' seed) to the lowest block among their gradient predecessors, else
    # to the last block, where the backward pass starts
    bwd = np.zeros(blocks)
    bblock: dict[str, int] = {}
    for n in nx.topological_sort(g):
        if not is_grad[n]:
            continue
        f = _differentiated(n)
        ins = [bblock[p] for p in g.pred[n] if p in bblock]
        bblock[n] = block_of[f] if f in block_of else min(ins, default=blocks - 1)
        bwd[bblock[n]] += g.nodes[n]["duration"]
    return LayerProfile(name, tuple(float(x) for x in fwd), tuple(float(x) for x in bwd),
                        tuple(int(x) for x in params), tuple(int(x) for x in act))


@dataclass(frozen=True)
class JobSpec:
    """A training job: ``paradigm`` (:data:`PARADIGMS`), the hosts of its workers (stages
    for ``gpipe`` and ``1f1b``) in order, ``servers`` (``dp-ps`` only), ``micro_batches``
    (pipelines), ``blocks`` (gradient buckets for DP, layers for ``tensor-parallel`` and
    ``fsdp``; a pipeline has one block per stage), ``iterations`` and its ``arrival`` time
    (s)."""

    name: str
    paradigm: str
    hosts: tuple[int, ...]
    servers: tuple[int, ...] = ()
    micro_batches: int = 1
    blocks: int = 4
    iterations: int = 1
    arrival: float = 0.0


@dataclass(frozen=True)
class Group:
    """One EchelonFlow: ``kind`` (its arrangement: ``coflow``, ``gpipe``, ``1f1b`` or
    ``fsdp``) and a label."""

    kind: str
    label: str


Node = tuple[str, int]  # ("t", task) or ("f", flow)


@dataclass
class JobGraph:
    """Tasks and flows of one job. A task runs on ``task_host`` for ``task_dur`` seconds
    after ``preds`` of it are done and after the tasks before it on its host (creation
    order); a flow is released when its ``preds`` are done. ``flow_offset`` is the flow's
    ideal finish time minus its group's reference time."""

    spec: JobSpec
    model: str
    task_host: list[int] = field(default_factory=list)
    task_dur: list[float] = field(default_factory=list)
    task_iter: list[int] = field(default_factory=list)
    task_label: list[str] = field(default_factory=list)
    flow_src: list[int] = field(default_factory=list)
    flow_dst: list[int] = field(default_factory=list)
    flow_size: list[float] = field(default_factory=list)
    flow_iter: list[int] = field(default_factory=list)
    flow_group: list[int] = field(default_factory=list)
    flow_index: list[int] = field(default_factory=list)
    flow_offset: list[float] = field(default_factory=list)
    groups: list[Group] = field(default_factory=list)
    preds: dict[Node, list[Node]] = field(default_factory=dict)
    _count: dict[int, int] = field(default_factory=dict, repr=False)

    def task(self, host: int, dur: float, it: int, label: str,
             after: Sequence[Node] = ()) -> Node:
        self.task_host.append(host)
        self.task_dur.append(float(dur))
        self.task_iter.append(it)
        self.task_label.append(label)
        node = ("t", len(self.task_host) - 1)
        self.preds[node] = list(after)
        return node

    def group(self, kind: str, label: str) -> int:
        self.groups.append(Group(kind, label))
        return len(self.groups) - 1

    def flow(self, src: int, dst: int, size: float, it: int, group: int, offset: float,
             after: Sequence[Node]) -> list[Node]:
        """Add a flow; returns what its consumers wait for: the flow, or, when it stays on
        a host or has no bytes (no flow), its predecessors ``after``."""
        if src == dst or size <= 0:
            return list(after)
        self.flow_src.append(src)
        self.flow_dst.append(dst)
        self.flow_size.append(float(size))
        self.flow_iter.append(it)
        self.flow_group.append(group)
        self.flow_index.append(self._count.get(group, 0))
        self._count[group] = self.flow_index[-1] + 1
        self.flow_offset.append(float(offset))
        node = ("f", len(self.flow_src) - 1)
        self.preds[node] = list(after)
        return [node]

    def ring(self, hosts: Sequence[int], per_flow: float, it: int, group: int, offset: float,
             after: Sequence[Node]) -> list[Node]:
        """A ring collective as a Coflow of neighbour flows of ``per_flow`` bytes; returns
        what its consumers wait for (as :meth:`flow`)."""
        if len(hosts) < 2 or per_flow <= 0:
            return list(after)
        return [f for i, h in enumerate(hosts)
                for f in self.flow(h, hosts[(i + 1) % len(hosts)], per_flow, it, group,
                                   offset, after)]


def build_job(spec: JobSpec, profile: LayerProfile) -> JobGraph:
    """The tasks and flows of ``spec`` with ``profile``'s compute times and sizes."""
    if spec.paradigm not in PARADIGMS:
        raise CommschedError(f"job {spec.name}: unknown paradigm {spec.paradigm!r}; "
                             f"expected one of {', '.join(PARADIGMS)}")
    hosts = list(spec.hosts)
    if not hosts or len(set(hosts) | set(spec.servers)) != len(hosts) + len(spec.servers):
        raise CommschedError(f"job {spec.name}: hosts and servers must be distinct and non-empty")
    if spec.iterations < 1 or spec.micro_batches < 1 or spec.blocks < 1:
        raise CommschedError(f"job {spec.name}: iterations, micro_batches, blocks must be >= 1")
    if spec.paradigm == "dp-ps" and not spec.servers:
        raise CommschedError(f"job {spec.name}: dp-ps needs at least one server")
    parts = len(hosts) if spec.paradigm in ("gpipe", "1f1b") else spec.blocks
    if parts > profile.blocks:
        raise CommschedError(f"job {spec.name}: {parts} blocks but the profile of "
                             f"{profile.model} has {profile.blocks}")
    prof = profile.merged(parts)
    job = JobGraph(spec, profile.model)
    _BUILDERS[spec.paradigm](job, prof)
    return job


def _data_parallel(job: JobGraph, p: LayerProfile) -> None:
    spec, W = job.spec, len(job.spec.hosts)
    sync: list[Node] = []  # the previous iteration's flows every forward waits for
    for it in range(spec.iterations):
        done: dict[int, list[Node]] = {b: [] for b in range(p.blocks)}
        for h in spec.hosts:
            job.task(h, sum(p.fwd), it, "fwd", after=sync)
            for b in reversed(range(p.blocks)):
                done[b].append(job.task(h, p.bwd[b], it, f"bwd{b}"))
        sync = []
        for b in reversed(range(p.blocks)):
            if spec.paradigm == "dp-allreduce":
                grp = job.group("coflow", f"allreduce{b}")
                sync += job.ring(spec.hosts, 2 * (W - 1) / W * p.params[b], it, grp, 0.0,
                                 after=done[b])
                continue
            shard = p.params[b] / len(spec.servers)
            push = job.group("coflow", f"push{b}")
            pull = job.group("coflow", f"pull{b}")
            for srv in spec.servers:
                got = [f for h, t in zip(spec.hosts, done[b], strict=True)
                       for f in job.flow(h, srv, shard, it, push, 0.0, after=[t])]
                for h in spec.hosts:
                    sync += job.flow(srv, h, shard, it, pull, 0.0, after=got)


def _pipeline(job: JobGraph, p: LayerProfile) -> None:
    spec, S, M = job.spec, len(job.spec.hosts), job.spec.micro_batches
    schedule, hosts = spec.paradigm, spec.hosts
    if S < 2:
        raise CommschedError(f"job {spec.name}: a pipeline needs at least 2 stages (hosts)")
    # the stage schedule with an infinitely fast network: each stage's order, the order in
    # which each group's flows are released, and (1F1B) the derived arrangement
    ideal = pipeline_timeline(S, M, p.fwd, p.bwd, schedule)
    derived = (pipeline_echelonflows(S, M, p.fwd, p.bwd, 1.0, schedule)  # sizes: unused
               if schedule == "1f1b" else [])
    for it in range(spec.iterations):
        task: dict[tuple[str, int, int], Node] = {}
        for s in range(S):
            for kind, j in _stage_order(schedule, S, s, M):
                task[(kind, s, j)] = job.task(hosts[s], p.fwd[s] if kind == "F" else p.bwd[s],
                                              it, f"{kind}{s}.{j}")
        for s in range(S - 1):
            for d, (kind, a, b) in enumerate((("F", s, s + 1), ("B", s + 1, s))):
                grp = job.group(schedule, f"{'act' if kind == 'F' else 'grad'}{s}")
                end = [ideal[(kind, a, j)][1] for j in range(M)]
                order = sorted(range(M), key=end.__getitem__)
                offset = (derived[2 * s + d].offset if derived else  # Eq. 6: T = consumer's
                          gpipe_arrangement(M, p.fwd[b] if kind == "F" else p.bwd[b]))
                for k, j in enumerate(order):
                    got = job.flow(hosts[a], hosts[b], p.act[s], it, grp, float(offset[k]),
                                   after=[task[(kind, a, j)]])
                    job.preds[task[(kind, b, j)]] += got


def _tensor_parallel(job: JobGraph, p: LayerProfile) -> None:
    spec, W, B = job.spec, len(job.spec.hosts), job.spec.blocks
    per = 2 * (W - 1) / W
    for it in range(spec.iterations):
        wait: list[Node] = []
        for b in range(B):
            ts = [job.task(h, p.fwd[b] / W, it, f"fwd{b}", after=wait) for h in spec.hosts]
            wait = []
            if b + 1 < B:
                grp = job.group("coflow", f"fwd-allreduce{b}")
                wait = job.ring(spec.hosts, per * p.act[b], it, grp, 0.0, after=ts)
        for b in reversed(range(B)):
            ts = [job.task(h, p.bwd[b] / W, it, f"bwd{b}", after=wait) for h in spec.hosts]
            wait = []
            if b > 0:
                grp = job.group("coflow", f"bwd-allreduce{b}")
                wait = job.ring(spec.hosts, per * p.act[b - 1], it, grp, 0.0, after=ts)


def _fsdp(job: JobGraph, p: LayerProfile) -> None:
    spec, W, B = job.spec, len(job.spec.hosts), job.spec.blocks
    per = (W - 1) / W
    sync: list[Node] = []
    for it in range(spec.iterations):
        ech = job.group("fsdp", "allgather")
        prev: list[Node] = sync  # the comm stream runs the all-gathers one after another
        offset = 0.0
        gathered: list[list[Node]] = []
        order = [("fwd", b) for b in range(B)] + [("bwd", b) for b in reversed(range(B))]
        for i, (_, b) in enumerate(order):
            if i:  # Eq. 7, per block: + the computation that consumes the previous gather
                kind, pb = order[i - 1]
                offset += p.fwd[pb] if kind == "fwd" else p.bwd[pb]
            got = job.ring(spec.hosts, per * p.params[b], it, ech, offset, after=prev)
            gathered.append(got)
            prev = got
        sync = []
        for i, (kind, b) in enumerate(order):
            ts = [job.task(h, p.fwd[b] if kind == "fwd" else p.bwd[b], it, f"{kind}{b}",
                           after=gathered[i]) for h in spec.hosts]
            if kind == "bwd":
                grp = job.group("coflow", f"reduce-scatter{b}")
                sync += job.ring(spec.hosts, per * p.params[b], it, grp, 0.0, after=ts)


_BUILDERS: dict[str, Callable[[JobGraph, LayerProfile], None]] = {
    "dp-allreduce": _data_parallel,
    "dp-ps": _data_parallel,
    "gpipe": _pipeline,
    "1f1b": _pipeline,
    "tensor-parallel": _tensor_parallel,
    "fsdp": _fsdp,
}


@dataclass
class ClusterRun:
    """Outcome of :func:`run_jobs`: one row per task and per flow (times in seconds)."""

    jobs: list[JobGraph]
    tasks: pd.DataFrame
    flows: pd.DataFrame

    def iteration_times(self) -> pd.DataFrame:
        """Per job and iteration: its end (its last task or flow) and the time since the
        previous iteration's end (the job's arrival for the first iteration)."""
        both = pd.concat([self.tasks[["job", "iteration", "finish"]],
                          self.flows[["job", "iteration", "finish"]]])
        end = both.groupby(["job", "iteration"], sort=True)["finish"].max().reset_index()
        rows = []
        for j, job in enumerate(self.jobs):
            e = end[end["job"] == j].sort_values("iteration")["finish"].to_numpy()
            prev = np.concatenate([[job.spec.arrival], e[:-1]])
            for it, (a, b) in enumerate(zip(prev, e, strict=True)):
                rows.append({"job": j, "name": job.spec.name, "paradigm": job.spec.paradigm,
                             "iteration": it, "end_s": b, "iteration_s": b - a})
        return pd.DataFrame(rows)

    def tardiness(self) -> pd.DataFrame:
        """Per EchelonFlow: Eq. 2, the largest ``finish - ideal`` over its flows."""
        f = self.flows.assign(tardiness_s=self.flows["finish"] - self.flows["ideal"])
        return (f.groupby(["job", "group", "kind", "iteration"], sort=True)["tardiness_s"]
                .max().reset_index())

    def jobs_table(self) -> pd.DataFrame:
        """Per job: completion time (last iteration's end minus arrival), mean iteration time and
        summed EchelonFlow tardiness (Eq. 4 restricted to the job)."""
        it = self.iteration_times()
        tard = self.tardiness().groupby("job")["tardiness_s"].sum()
        rows = []
        for j, job in enumerate(self.jobs):
            mine = it[it["job"] == j]
            rows.append({"job": j, "name": job.spec.name, "paradigm": job.spec.paradigm,
                         "model": job.model, "workers": len(job.spec.hosts),
                         "arrival_s": job.spec.arrival,
                         "jct_s": float(mine["end_s"].max()) - job.spec.arrival,
                         "iteration_mean_s": float(mine["iteration_s"].mean()),
                         "tardiness_s": float(tard.get(j, 0.0))})
        return pd.DataFrame(rows)


def run_jobs(jobs: Sequence[JobGraph], net: Network, policy: Policy | str,
             check: bool = True) -> ClusterRun:
    """Run ``jobs`` together on ``net`` with flow ``policy`` (a policy, or the name of one
    in :data:`commsched.echelon.schedulers.FLOW_SCHEDULERS`).

    Hosts run one task at a time, in the order the job created them (after the job's
    arrival and the task's predecessors); jobs must use disjoint hosts (dedicated devices,
    the paper's Sec. 5 setting). With ``check`` the flow schedule is recorded and verified
    by :func:`commsched.sim.flow.check_flow_schedule`.
    """
    pol = FLOW_SCHEDULERS[policy]() if isinstance(policy, str) else policy
    owner: dict[int, int] = {}
    for j, job in enumerate(jobs):
        for h in set(job.task_host) | set(job.flow_src) | set(job.flow_dst):
            if not 0 <= h < net.hosts:
                raise CommschedError(f"job {job.spec.name}: host {h} is not in 0..{net.hosts - 1}")
            if owner.setdefault(h, j) != j:
                raise CommschedError(f"jobs {jobs[owner[h]].spec.name} and {job.spec.name} "
                                     f"share host {h}")
    # global numbering: tasks, then flows, job after job
    t0 = np.cumsum([0] + [len(j.task_host) for j in jobs])
    f0 = np.cumsum([0] + [len(j.flow_src) for j in jobs])
    g0 = np.cumsum([0] + [len(j.groups) for j in jobs])
    nt, nf = int(t0[-1]), int(f0[-1])
    succ: list[list[int]] = [[] for _ in range(nt + nf)]  # node: task i or flow nt + i
    missing = np.zeros(nt + nf, dtype=np.int64)
    queue: dict[int, list[int]] = {}
    earliest = np.zeros(nt)
    for j, job in enumerate(jobs):
        def gid(n: Node, j: int = j) -> int:
            return int(t0[j] + n[1]) if n[0] == "t" else int(nt + f0[j] + n[1])
        for node, ps in job.preds.items():
            v = gid(node)
            for p in ps:
                succ[gid(p)].append(v)
            missing[v] = len(ps)
        for i, h in enumerate(job.task_host):
            queue.setdefault(h, []).append(int(t0[j] + i))
        earliest[t0[j]:t0[j + 1]] = job.spec.arrival
    host = np.concatenate([np.asarray(j.task_host, dtype=np.int64) for j in jobs])
    dur = np.concatenate([np.asarray(j.task_dur, dtype=float) for j in jobs])
    src = np.concatenate([np.asarray(j.flow_src, dtype=np.int64) for j in jobs])
    dst = np.concatenate([np.asarray(j.flow_dst, dtype=np.int64) for j in jobs])
    size = np.concatenate([np.asarray(j.flow_size, dtype=float) for j in jobs])
    group = np.concatenate([np.asarray(j.flow_group, dtype=np.int64) + g0[k]
                            for k, j in enumerate(jobs)])
    index = np.concatenate([np.asarray(j.flow_index, dtype=np.int64) for j in jobs])
    offset = np.concatenate([np.asarray(j.flow_offset, dtype=float) for j in jobs])
    fjob = np.repeat(np.arange(len(jobs)), np.diff(f0))
    start, finish = np.full(nt, np.nan), np.full(nt, np.nan)
    sim_id = np.full(nf, -1, dtype=np.int64)
    flow_of_sim: list[int] = []
    reference: dict[int, float] = {}
    ideal = np.full(nf, np.nan)
    head = dict.fromkeys(queue, 0)
    busy: set[int] = set()
    events: list[tuple[float, int]] = []  # (finish time, task)
    sim = FlowSim(net, pol, record=check)
    done = 0

    def release(flows: list[int], now: float) -> None:
        for f in flows:
            reference.setdefault(int(group[f]), now)
            ideal[f] = reference[int(group[f])] + offset[f]
        ids = sim.add(src[flows], dst[flows], size[flows], np.full(len(flows), now),
                      job=fjob[flows], group=group[flows], index=index[flows],
                      ideal=ideal[flows])
        sim_id[flows] = ids
        flow_of_sim.extend(flows)

    def complete(node: int, now: float) -> None:
        nonlocal done
        done += 1
        ready: list[int] = []
        for v in succ[node]:
            missing[v] -= 1
            if missing[v] == 0 and v >= nt:
                ready.append(v - nt)
        if ready:
            release(ready, now)

    # an arrival event per job (code -1 - job) releases its predecessor-free flows
    free = {j: [int(f0[j] + i) for i in range(len(job.flow_src)) if not job.preds[("f", i)]]
            for j, job in enumerate(jobs)}
    for j, job in enumerate(jobs):
        heapq.heappush(events, (job.spec.arrival, -1 - j))
    now = 0.0
    while True:
        for h, q in queue.items():  # start every task that can start now
            while h not in busy and head[h] < len(q):
                t = q[head[h]]
                if missing[t] or earliest[t] > now:
                    break
                start[t] = now
                head[h] += 1
                busy.add(h)
                heapq.heappush(events, (now + float(dur[t]), t))
        t_next = events[0][0] if events else math.inf
        fin = sim.advance(until=t_next)
        if len(fin):
            now = sim.now
            for s in fin:
                complete(nt + flow_of_sim[int(s)], now)
            continue
        if t_next == math.inf:
            break
        now = t_next
        while events and events[0][0] <= now:
            _, t = heapq.heappop(events)
            if t < 0:
                if free[-1 - t]:
                    release(free[-1 - t], now)
            else:
                finish[t] = now
                busy.discard(int(host[t]))
                complete(t, now)
    if done < nt + nf:
        stuck = [k for k in range(nt) if np.isnan(finish[k])]
        raise CommschedError(f"job graph deadlock: {len(stuck)} tasks and "
                             f"{int(np.sum(sim_id < 0))} flows never became ready")
    result = sim.result()
    frel, ffin = result.release[sim_id], result.finish[sim_id]
    if check:
        check_flow_schedule(net, sim.src[: sim.n], sim.dst[: sim.n], sim.size[: sim.n],
                            result.release, result)
    tjob = np.repeat(np.arange(len(jobs)), np.diff(t0))
    tasks = pd.DataFrame({
        "job": tjob, "iteration": np.concatenate([j.task_iter for j in jobs]).astype(int),
        "label": [x for j in jobs for x in j.task_label], "host": host,
        "start": start, "finish": finish})
    kinds = [g.kind for j in jobs for g in j.groups]
    flows = pd.DataFrame({
        "job": fjob, "iteration": np.concatenate([j.flow_iter for j in jobs]).astype(int),
        "group": group,
        "kind": [kinds[g] for g in group], "index": index, "src": src, "dst": dst,
        "size": size, "release": frel, "finish": ffin, "ideal": ideal})
    return ClusterRun(list(jobs), tasks, flows)

