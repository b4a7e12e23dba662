"""Training jobs as compute tasks and flows (EchelonFlow, Pan et al., HotNets 2022, Table 1).

EchelonFlow (Sec. 3.3) claims that tardiness scheduling shortens training (Property 1);
tardiness itself is only a proxy. To measure iteration times, a job is built here as a DAG
of *compute tasks* (on hosts, with profiled durations, from a
:class:`~commsched.echelon.profile.LayerProfile`) and *flows* (between hosts, with sizes);
:func:`commsched.echelon.cluster_sim.run_jobs` runs the tasks beside the flow-level network.

Paradigms (:data:`PARADIGMS`; ``W`` workers, ``S`` stages, ``M`` micro-batches, ``B``
blocks; every paradigm unrolls ``iterations`` iterations, chained by each host's order)
    ``dp-allreduce``
        Each worker: forward (one task), then backward block by block, last block first
        (gradient *buckets* = blocks). When every worker has finished bucket ``b``, its ring
        all-reduce runs (``serial_collectives``: once the previous bucket's is done too);
        the next iteration's forward waits for every all-reduce.
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
        gradients are reduce-scattered (beside the all-gathers, not queued behind them;
        ``serial_collectives``: each after the previous reduce-scatter).
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
:func:`~commsched.echelon.arrangement.fsdp`). The reference time ``r`` (the release
of the group's first flow) and the meta columns the schedulers of
:mod:`commsched.echelon.schedulers` read are set at run time by
:func:`commsched.echelon.cluster_sim.run_jobs`.

Examples
--------
A two-stage GPipe job with two micro-batches: per iteration, 8 tasks and 4 flows
(two activations forward, two gradients back):

>>> prof = LayerProfile("toy", fwd=(1.0, 1.0), bwd=(2.0, 2.0), params=(4, 4), act=(1, 0))
>>> job = build_job(JobSpec("pp", "gpipe", hosts=(0, 1), micro_batches=2), prof)
>>> len(job.task_host), len(job.flow_src), [g.kind for g in job.groups]
(8, 4, ['gpipe', 'gpipe'])
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from commsched.echelon.arrangement import _stage_order, pipeline_echelonflows, pipeline_timeline
from commsched.echelon.arrangement import gpipe as gpipe_arrangement
from commsched.echelon.profile import LayerProfile
from commsched.errors import CommschedError

__all__ = [
    "PARADIGMS",
    "Group",
    "JobGraph",
    "JobSpec",
    "Node",
    "build_job",
]

#: The training paradigms :func:`build_job` knows.
PARADIGMS = ("dp-allreduce", "dp-ps", "gpipe", "1f1b", "tensor-parallel", "fsdp")


@dataclass(frozen=True)
class JobSpec:
    """A training job.

    Parameters
    ----------
    name : str
        The job's name (in messages and tables).
    paradigm : str
        One of :data:`PARADIGMS` (EchelonFlow's Table 1, and 1F1B).
    hosts : tuple of int
        The hosts of its workers (stages for ``gpipe`` and ``1f1b``) in order.
    servers : tuple of int
        Parameter servers (``dp-ps`` only).
    micro_batches : int
        Micro-batches per iteration (pipelines).
    blocks : int
        Gradient buckets for DP, layers for ``tensor-parallel`` and ``fsdp`` (a pipeline
        has one block per stage).
    iterations : int
        Iterations to unroll.
    arrival : float
        When the job starts (s).
    serial_collectives : bool
        ``dp-allreduce`` and ``fsdp`` only: the job's all-reduces (its reduce-scatters)
        run one after another on one communication thread, as the live jobs'
        single-thread executors do (:mod:`commsched.echelon.live.jobs`): each waits for the
        previous one's flows. Default False: each is released once its inputs are ready.
    """

    name: str
    paradigm: str
    hosts: tuple[int, ...]
    servers: tuple[int, ...] = ()
    micro_batches: int = 1
    blocks: int = 4
    iterations: int = 1
    arrival: float = 0.0
    serial_collectives: bool = False


@dataclass(frozen=True)
class Group:
    """One EchelonFlow of a job.

    Parameters
    ----------
    kind : str
        Its arrangement: ``coflow`` (Eq. 5), ``gpipe`` (Eq. 6), ``1f1b`` (ours) or
        ``fsdp`` (Eq. 7).
    label : str
        What it carries (``allreduce3``, ``act0``, ...).
    """

    kind: str
    label: str


Node = tuple[str, int]  # ("t", task) or ("f", flow)


@dataclass
class JobGraph:
    """Tasks and flows of one job (built by :func:`build_job`).

    A task runs on ``task_host`` for ``task_dur`` seconds after ``preds`` of it are done
    and after the tasks before it on its host (creation order); a flow is released when
    its ``preds`` are done. ``flow_offset`` is the flow's ideal finish time minus its
    group's reference time (EchelonFlow Eq. 1's arrangement); ``flow_index`` its position
    in the group in creation order; ``flow_latency`` the time (s, default 0) between the
    flow's last byte and its consumers seeing it done (acknowledgements, wake-ups; the
    link is free meanwhile). Nodes are ``("t", i)`` (task ``i``) or ``("f", i)``.

    Parameters
    ----------
    spec : JobSpec
        The job.
    model : str
        The profile's name.
    """

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
    flow_latency: list[float] = field(default_factory=list)
    groups: list[Group] = field(default_factory=list)
    preds: dict[Node, list[Node]] = field(default_factory=dict)
    _count: dict[int, int] = field(default_factory=dict, repr=False)

    def task(self, host: int, dur: float, it: int, label: str,
             after: Sequence[Node] = ()) -> Node:
        """Add a compute task.

        Parameters
        ----------
        host : int
            Where it runs.
        dur : float
            Its duration (s).
        it : int
            Its iteration.
        label : str
            What it computes (``fwd``, ``bwd2``, ``F1.0``, ...).
        after : sequence of Node
            What must be done before it starts.

        Returns
        -------
        Node
            The task.
        """
        self.task_host.append(host)
        self.task_dur.append(float(dur))
        self.task_iter.append(it)
        self.task_label.append(label)
        node = ("t", len(self.task_host) - 1)
        self.preds[node] = list(after)
        return node

    def group(self, kind: str, label: str) -> int:
        """Add an EchelonFlow (:class:`Group`); returns its index in :attr:`groups`.

        Parameters
        ----------
        kind : str
            Its arrangement (``coflow``, ``gpipe``, ``1f1b``, ``fsdp``; not checked).
        label : str
            What its flows carry.

        Returns
        -------
        int
        """
        self.groups.append(Group(kind, label))
        return len(self.groups) - 1

    def flow(self, src: int, dst: int, size: float, it: int, group: int, offset: float,
             after: Sequence[Node]) -> list[Node]:
        """Add a flow of EchelonFlow ``group``.

        Parameters
        ----------
        src, dst : int
            Its hosts.
        size : float
            Its bytes.
        it : int
            Its iteration.
        group : int
            Its EchelonFlow (:meth:`group`).
        offset : float
            Its ideal finish time minus the group's reference time.
        after : sequence of Node
            What must be done before it is released.

        Returns
        -------
        list of Node
            What its consumers wait for: the flow, or, when it stays on a host or has no
            bytes (no flow), its predecessors ``after``.
        """
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
        self.flow_latency.append(0.0)
        node = ("f", len(self.flow_src) - 1)
        self.preds[node] = list(after)
        return [node]

    def ring(self, hosts: Sequence[int], per_flow: float, it: int, group: int, offset: float,
             after: Sequence[Node]) -> list[Node]:
        """A ring collective as a Coflow of neighbour flows ``h_i -> h_{i+1}``.

        Parameters
        ----------
        hosts : sequence of int
            The ring, in order.
        per_flow : float
            Bytes of each neighbour flow.
        it, group, offset, after
            As :meth:`flow` (every flow of the ring gets the same ``offset``).

        Returns
        -------
        list of Node
            What its consumers wait for (as :meth:`flow`).
        """
        if len(hosts) < 2 or per_flow <= 0:
            return list(after)
        return [f for i, h in enumerate(hosts)
                for f in self.flow(h, hosts[(i + 1) % len(hosts)], per_flow, it, group,
                                   offset, after)]


def build_job(spec: JobSpec, profile: LayerProfile) -> JobGraph:
    """The tasks and flows of ``spec`` with ``profile``'s compute times and sizes.

    Parameters
    ----------
    spec : JobSpec
        The job (paradigm, hosts, micro-batches, blocks, iterations).
    profile : LayerProfile
        Its per-block profile, merged here to the job's blocks (stages for a pipeline).

    Returns
    -------
    JobGraph

    Raises
    ------
    CommschedError
        If the paradigm is unknown, hosts and servers overlap or are empty, a count is
        below 1, ``dp-ps`` has no server, a pipeline has fewer than 2 stages, or the
        profile has fewer blocks than the job needs.

    References
    ----------
    EchelonFlow (Pan et al., HotNets 2022), Table 1 and Sec. 4 (Eqs. 5-7: the
    arrangements of the flows' groups); module docstring for each paradigm.
    """
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
        stream: list[Node] = []  # the previous all-reduce (serial_collectives)
        for b in reversed(range(p.blocks)):
            if spec.paradigm == "dp-allreduce":
                grp = job.group("coflow", f"allreduce{b}")
                stream = job.ring(spec.hosts, 2 * (W - 1) / W * p.params[b], it, grp, 0.0,
                                  after=done[b] + (stream if spec.serial_collectives else []))
                sync += stream
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
        stream: list[Node] = []  # the previous reduce-scatter (serial_collectives)
        for i, (kind, b) in enumerate(order):
            ts = [job.task(h, p.fwd[b] if kind == "fwd" else p.bwd[b], it, f"{kind}{b}",
                           after=gathered[i]) for h in spec.hosts]
            if kind == "bwd":
                grp = job.group("coflow", f"reduce-scatter{b}")
                stream = job.ring(spec.hosts, per * p.params[b], it, grp, 0.0,
                                  after=ts + (stream if spec.serial_collectives else []))
                sync += stream


_BUILDERS: dict[str, Callable[[JobGraph, LayerProfile], None]] = {
    "dp-allreduce": _data_parallel,
    "dp-ps": _data_parallel,
    "gpipe": _pipeline,
    "1f1b": _pipeline,
    "tensor-parallel": _tensor_parallel,
    "fsdp": _fsdp,
}
