"""Real training jobs of the four paradigms, one process per host, for EchelonFlow live.

A job (:class:`LiveJob`) trains a stack of ``blocks`` fully connected blocks (``width``
units, ReLU between them, mean squared error on synthetic data drawn from ``seed``) with
SGD for ``iterations`` iterations, in one of these paradigms (names as in
:data:`commsched.echelon.jobs.PARADIGMS`, with the same task and flow structure as
:func:`commsched.echelon.jobs.build_job`, so that the simulator's flows and the live
ones match one to one):

``gpipe``, ``1f1b``
    The blocks are split into ``world`` stages (contiguous, as equal as possible), stage
    ``s`` on rank ``s``; the mini-batch into ``micro_batches`` micro-batches, run in the
    stage order of :func:`commsched.echelon.arrangement.pipeline_timeline` (GPipe: every
    forward, then the backwards in reverse order; 1F1B: PipeDream-Flush). The activation
    of micro-batch ``j`` goes ``s -> s+1`` after its forward (group ``act<s>``), its
    gradient ``s+1 -> s`` after the backward of ``s+1`` (group ``grad<s>``), sent while
    the stage computes on (a pool of sender threads). The update follows the last
    backward.
``fsdp``
    ZeRO-3: rank ``r`` keeps shard ``r`` of every block's parameters. One communication
    thread all-gathers the blocks in the order of use (forward ``0..B-1``, then backward
    ``B-1..0``; ring all-gather, group ``allgather``), as far ahead as the network lets
    it; the forward runs without keeping the gathered parameters; the backward of block
    ``b`` recomputes its forward from the re-gathered parameters, then a second thread
    reduce-scatters its gradient (ring, group ``reduce-scatter<b>``). Each rank updates
    its shards when every reduce-scatter is done.
``dp-allreduce``
    Each rank runs the forward on its part of the batch, then the backward block by
    block, last block first; a communication thread ring-all-reduces each block's
    gradient (group ``allreduce<b>``) as soon as it is computed; the update waits for
    all of them.

Collectives are rings of point-to-point flows (:mod:`commsched.echelon.live.transport`):
rank ``r``'s part of a ring collective is *one* flow to rank ``r + 1`` (its ``W - 1``
chunks of a reduce-scatter or all-gather, ``2 (W - 1)`` of an all-reduce, on one lane),
the neighbour flow the simulator models.

Every flow gets its EchelonFlow's index and offset from the simulator's job graph for the
same job (:func:`flow_meta`), built from a compute profile (:func:`profile_compute`), so
the controller computes ideal finish times as the simulator does. Every computation is
recorded (label as in the simulator's job graph, start, end), every flow by its sender.

:func:`reference` trains the same model in one process on the whole batch: the live jobs'
final parameters must equal it (``tests/test_echelon_live_jobs.py``).
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from commsched.echelon.arrangement import _stage_order
from commsched.echelon.jobs import JobSpec, build_job
from commsched.echelon.live.transport import FlowInfo, TaggedTransport, Transport
from commsched.echelon.profile import LayerProfile
from commsched.errors import CommschedError

__all__ = [
    "LIVE_PARADIGMS",
    "LiveJob",
    "RankResult",
    "flow_meta",
    "free_ports",
    "profile_compute",
    "reference",
    "run_on_loopback",
    "run_rank",
    "send_lanes",
    "simulator_profile",
    "stage_blocks",
]

#: The paradigms a live job can run (names of :data:`commsched.echelon.jobs.PARADIGMS`).
LIVE_PARADIGMS = ("gpipe", "1f1b", "fsdp", "dp-allreduce")
#: Sender threads of a pipeline stage (its activations and gradients in flight at once).
SENDERS = 4


@dataclass(frozen=True)
class LiveJob:
    """One live job (module docstring). ``world``: its processes (hosts)."""

    name: str
    paradigm: str
    world: int = 3
    width: int = 256
    blocks: int = 6
    batch: int = 48
    micro_batches: int = 4
    iterations: int = 3
    lr: float = 0.05
    seed: int = 0

    def __post_init__(self) -> None:
        if self.paradigm not in LIVE_PARADIGMS:
            raise CommschedError(f"job {self.name}: unknown paradigm {self.paradigm!r}; "
                                 f"known: {', '.join(LIVE_PARADIGMS)}")
        if self.world < 2 or self.width < 1 or self.blocks < 1 or self.iterations < 1:
            raise CommschedError(f"job {self.name}: need world >= 2 and width, blocks, "
                                 "iterations >= 1")
        if self.pipeline:
            if self.world > self.blocks:
                raise CommschedError(f"job {self.name}: {self.world} stages but only "
                                     f"{self.blocks} blocks (layers)")
            if self.micro_batches < 1 or self.batch % self.micro_batches:
                raise CommschedError(f"job {self.name}: batch {self.batch} is not a multiple "
                                     f"of micro_batches {self.micro_batches}")
        elif self.batch % self.world:
            raise CommschedError(f"job {self.name}: batch {self.batch} is not a multiple of "
                                 f"world {self.world}")

    @property
    def pipeline(self) -> bool:
        return self.paradigm in ("gpipe", "1f1b")

    @property
    def block_params(self) -> int:
        """Parameters of one block (weights and bias)."""
        return self.width * self.width + self.width

    def spec(self, hosts: tuple[int, ...] | None = None) -> JobSpec:
        """The simulator's :class:`~commsched.echelon.jobs.JobSpec` of this job (its
        collectives serial: one communication thread per process, as :func:`run_rank`).

        Parameters
        ----------
        hosts : tuple of int, optional
            The simulator's hosts of ranks ``0..world-1``; default those numbers.

        Returns
        -------
        JobSpec
            Pipelines: one block per stage.
        """
        return JobSpec(self.name, self.paradigm, hosts or tuple(range(self.world)),
                       micro_batches=self.micro_batches if self.pipeline else 1,
                       blocks=self.world if self.pipeline else self.blocks,
                       iterations=self.iterations, serial_collectives=True)


def stage_blocks(job: LiveJob) -> list[range]:
    """The blocks of each pipeline stage (contiguous, sizes differing by at most one).

    Parameters
    ----------
    job : LiveJob
        A pipeline job (``world`` stages, ``blocks >= world``).

    Returns
    -------
    list of range
        Block indices of stage 0, 1, ...

    Examples
    --------
    >>> [list(r) for r in stage_blocks(LiveJob("p", "gpipe", world=3, blocks=5))]
    [[0, 1], [2, 3], [4]]
    """
    cuts = np.array_split(np.arange(job.blocks), job.world)
    return [range(int(c[0]), int(c[-1]) + 1) for c in cuts]


# --------------------------------------------------------------------------------------
# The model.


def init_params(job: LiveJob) -> list[torch.Tensor]:
    """Every block's flat parameters (weights row-major, then bias), seeded.

    Parameters
    ----------
    job : LiveJob
        Its ``seed`` seeds the draw: normal weights of standard deviation
    ``width ** -0.5``, normal biases of standard deviation 0.1.

    Returns
    -------
    list of torch.Tensor
        One float32 vector of ``block_params`` entries per block.
    """
    gen = torch.Generator().manual_seed(job.seed)
    d = job.width
    return [torch.cat([torch.randn(d * d, generator=gen) / d ** 0.5,
                       torch.randn(d, generator=gen) * 0.1]) for _ in range(job.blocks)]


def _block(flat: torch.Tensor, x: torch.Tensor, d: int, last: bool) -> torch.Tensor:
    y = x @ flat[: d * d].view(d, d).t() + flat[d * d: d * d + d]
    return y if last else torch.relu(y)


def _data(job: LiveJob, it: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(job.seed * 7919 + it + 1)
    return (torch.randn(job.batch, job.width, generator=gen),
            torch.randn(job.batch, job.width, generator=gen))


def _loss(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return ((out - y) ** 2).mean()


def reference(job: LiveJob) -> list[torch.Tensor]:
    """Final parameters of single-process training on the whole batch (same seed).

    Parameters
    ----------
    job : LiveJob
        Any paradigm: the paradigm does not change the arithmetic, only its split.

    Returns
    -------
    list of torch.Tensor
        Per block, the flat parameters after ``iterations`` SGD steps of rate ``lr``.
    """
    params = init_params(job)
    for it in range(job.iterations):
        x, y = _data(job, it)
        ps = [p.clone().requires_grad_() for p in params]
        h = x
        for b, p in enumerate(ps):
            h = _block(p, h, job.width, b == job.blocks - 1)
        grads = torch.autograd.grad(_loss(h, y), ps)
        params = [p - job.lr * g for p, g in zip(params, grads, strict=True)]
    return params


# --------------------------------------------------------------------------------------
# Profiles and the simulator's flows.


def profile_compute(job: LiveJob, reps: int = 3) -> LayerProfile:
    """The job's compute profile measured in this process (one thread, minimum of
    ``reps``): per block (pipelines: per stage, per micro-batch) forward and backward
    time as the live job computes them (FSDP's backward includes its recomputation),
    parameter bytes and activation bytes (pipelines: one micro-batch's).

    Parameters
    ----------
    job : LiveJob
        The job to time; computes on random inputs of its per-rank batch.
    reps : int, optional
        Repetitions (>= 1); each time is the minimum over them.

    Returns
    -------
    LayerProfile
        Seconds and bytes (float32, 4 bytes an entry).
    """
    params = init_params(job)
    d = job.width
    rows = job.batch // job.micro_batches if job.pipeline else job.batch // job.world
    x = torch.randn(rows, d)
    fwd, bwd = np.full(job.blocks, np.inf), np.full(job.blocks, np.inf)
    for _ in range(reps):
        for b, p in enumerate(params):
            t0 = time.perf_counter()
            with torch.no_grad():
                _block(p, x, d, b == job.blocks - 1)
            t1 = time.perf_counter()
            pg, xg = p.clone().requires_grad_(), x.clone().requires_grad_()
            out = _block(pg, xg, d, b == job.blocks - 1)
            t2 = time.perf_counter()
            torch.autograd.grad(out, [pg, xg], torch.ones_like(out))
            t3 = time.perf_counter()
            fwd[b] = min(fwd[b], t1 - t0)
            # the backward of a kept graph; FSDP recomputes the forward first
            bwd[b] = min(bwd[b], (t3 - t2) + ((t2 - t1) if job.paradigm == "fsdp" else 0.0))
    pbytes = [job.block_params * 4] * job.blocks
    act = [rows * d * 4] * job.blocks
    if not job.pipeline:
        return LayerProfile(job.name, tuple(fwd.tolist()), tuple(bwd.tolist()),
                            tuple(pbytes), tuple(act))
    st = stage_blocks(job)
    return LayerProfile(job.name, tuple(float(fwd[list(r)].sum()) for r in st),
                        tuple(float(bwd[list(r)].sum()) for r in st),
                        tuple(pbytes[0] * len(r) for r in st), tuple(act[0] for _ in st))


def simulator_profile(job: LiveJob, fwd: list[float], bwd: list[float]) -> LayerProfile:
    """A :class:`~commsched.echelon.profile.LayerProfile` of ``job`` with the given forward
    and backward times (per block; pipelines: per stage and micro-batch) and the job's
    own parameter and activation bytes (FSDP shards padded to a multiple of ``world``).

    Parameters
    ----------
    job : LiveJob
        The job whose bytes the profile carries.
    fwd, bwd : list of float
        Seconds, one per block (pipelines: one per stage).

    Returns
    -------
    LayerProfile
    """
    W, d = job.world, job.width
    if job.pipeline:
        rows = job.batch // job.micro_batches
        return LayerProfile(job.name, tuple(fwd), tuple(bwd),
                            tuple(job.block_params * 4 * len(r) for r in stage_blocks(job)),
                            tuple(rows * d * 4 for _ in range(W)))
    padded = -(-job.block_params // W) * W
    return LayerProfile(job.name, tuple(fwd), tuple(bwd), tuple([padded * 4] * job.blocks),
                        tuple([job.batch // W * d * 4] * job.blocks))


def flow_meta(job: LiveJob, profile: LayerProfile) -> dict[tuple[int, str, int, int],
                                                           tuple[int, float]]:
    """``(iteration, group label, sender rank, seq) -> (index, offset)`` of every flow of
    the simulator's job graph of ``job`` (``seq``: the flow's position among the sender's
    flows of that group and iteration, in the order the graph creates them).

    Parameters
    ----------
    job : LiveJob
        The job; its simulator graph is :func:`commsched.echelon.jobs.build_job` of
        :meth:`LiveJob.spec`.
    profile : LayerProfile
        The compute profile the offsets come from (:func:`profile_compute`).

    Returns
    -------
    dict
        Index of the flow's EchelonFlow and its offset in seconds (EchelonFlow
        Def. 3.1: ideal finish time minus the reference time).

    References
    ----------
    .. [1] Pan et al., "EchelonFlow", HotNets 2022, Sec. 3.2, Def. 3.1.
    """
    g = build_job(job.spec(), profile)
    out: dict[tuple[int, str, int, int], tuple[int, float]] = {}
    count: dict[tuple[int, str, int], int] = {}
    for i in range(len(g.flow_src)):
        key = (int(g.flow_iter[i]), g.groups[g.flow_group[i]].label, int(g.flow_src[i]))
        seq = count.get(key, 0)
        count[key] = seq + 1
        out[(*key, seq)] = (int(g.flow_index[i]), float(g.flow_offset[i]))
    return out


def send_lanes(job: LiveJob, tags: int) -> dict[tuple[int, int], int]:
    """How many flows each rank of ``job`` can have in flight to each peer: its lanes
    (:class:`~commsched.echelon.live.transport.TaggedTransport`) to that peer.

    A rank has ``tags`` tags; a lane is opened on demand while a tag is free, stays bound
    to its peer for the rest of the run, and a flow waits for an idle lane to its peer.
    A GPipe stage sends every forward first (up to ``min(M,`` :data:`SENDERS` ``)``
    activations in flight, each taking longer on the core than a micro-batch's forward),
    so its lanes to the next stage are opened first and the previous stage gets what is
    left: the middle stage of the configured 3-stage job sends its 4 gradients on 3 lanes
    (the flow records' tags show the same). A 1F1B stage interleaves its forward and
    backward sends, so which peer's lanes open first depends on the network: not
    modelled (no limit). Collectives have one flow per communication thread in flight:
    never limited.

    Parameters
    ----------
    job : LiveJob
        The job.
    tags : int
        Tags per process (:data:`commsched.echelon.live.runner.TAGS_PER_PROCESS`).

    Returns
    -------
    dict of (int, int) to int
        ``(rank, peer) -> lanes``, only where fewer than the flows that would be in
        flight at once (empty for collectives and 1F1B).

    Examples
    --------
    >>> send_lanes(LiveJob("p", "gpipe", world=3, blocks=6, micro_batches=4), 7)
    {(1, 0): 3}
    """
    if job.paradigm != "gpipe":
        return {}
    want = min(job.micro_batches, SENDERS)
    out = {}
    for s in range(job.world):
        left = tags
        for peer in (s + 1, s - 1):  # forward sends open their lanes first
            if 0 <= peer < job.world:
                got = min(want, left)
                left -= got
                if got < want:
                    out[(s, peer)] = got
    return out


# --------------------------------------------------------------------------------------
# One rank.


@dataclass
class RankResult:
    """What a rank did: its computations (label, iteration, start, end), the end of each
    iteration, its flows (sender records) and the parameters it holds at the end
    (block -> tensor; FSDP: block -> its shard)."""

    tasks: list[dict[str, Any]] = field(default_factory=list)
    iteration_end: list[float] = field(default_factory=list)
    flows: list[dict[str, Any]] = field(default_factory=list)
    params: dict[int, torch.Tensor] = field(default_factory=dict)


class _Ctx:
    def __init__(self, job: LiveJob, rank: int, tr: Transport,
                 meta: dict[tuple[int, str, int, int], tuple[int, float]],
                 timeout: float) -> None:
        self.job, self.rank, self.tr, self.meta, self.timeout = job, rank, tr, meta, timeout
        self.W = job.world
        self.res = RankResult()
        self._seq: dict[tuple[int, str], int] = {}

    @contextlib.contextmanager
    def task(self, label: str, it: int) -> Iterator[None]:
        t0 = time.time()
        yield
        self.res.tasks.append({"label": label, "iteration": it, "start": t0, "end": time.time()})

    def info(self, it: int, label: str) -> FlowInfo:
        seq = self._seq.get((it, label), 0)
        self._seq[(it, label)] = seq + 1
        if (it, label, self.rank, seq) not in self.meta:
            raise CommschedError(f"job {self.job.name}: flow {label} #{seq} of iteration {it} "
                                 f"from rank {self.rank} is not in the simulator's job graph")
        index, offset = self.meta[(it, label, self.rank, seq)]
        return FlowInfo(self.job.name, it, label, seq, index, offset)

    def wait(self, fut: Future[Any]) -> Any:
        try:
            return fut.result(timeout=self.timeout)
        except FutureTimeout:
            raise CommschedError(f"job {self.job.name} rank {self.rank}: communication not "
                                 f"done within {self.timeout:g} s") from None

    # -- ring collectives ------------------------------------------------------------
    def _ring(self, buf: torch.Tensor, it: int, label: str, steps: list[str]) -> torch.Tensor:
        """Reduce-scatter (``rs``) and/or all-gather (``ag``) steps on ``buf`` viewed as
        ``W`` equal chunks, as one flow to the next rank."""
        W, r = self.W, self.rank
        ch = buf.view(W, -1)
        nxt, prv = (r + 1) % W, (r - 1) % W
        info = self.info(it, label)
        nbytes = len(steps) * (W - 1) * ch[0].numel() * 4
        flow = self.tr.open_flow(nxt, info, nbytes)
        tmp = torch.empty_like(ch[0])
        base = f"{self.job.name}/{it}/{label}/{info.seq}"
        for phase in steps:
            for k in range(W - 1):
                key = f"{base}/{phase}{k}"
                if phase == "rs":  # after W-1 steps rank r holds the sum of chunk r
                    flow.send(key, ch[(r - k - 1) % W])
                    self.tr.recv(prv, key, tmp)
                    ch[(r - k - 2) % W] += tmp
                else:  # chunk r (complete) travels round the ring
                    flow.send(key, ch[(r - k) % W])
                    self.tr.recv(prv, key, ch[(r - k - 1) % W])
        self.res.flows.append(flow.finish())
        return buf

    def allreduce(self, buf: torch.Tensor, it: int, label: str) -> torch.Tensor:
        return self._ring(buf, it, label, ["rs", "ag"])

    def reduce_scatter(self, buf: torch.Tensor, it: int, label: str) -> torch.Tensor:
        return self._ring(buf, it, label, ["rs"]).view(self.W, -1)[self.rank].clone()

    def allgather(self, shard: torch.Tensor, it: int, label: str) -> torch.Tensor:
        buf = torch.empty(self.W, shard.numel())
        buf[self.rank] = shard
        return self._ring(buf.view(-1), it, label, ["ag"])

    def send(self, dst: int, key: str, t: torch.Tensor, it: int, label: str) -> None:
        info = self.info(it, label)
        flow = self.tr.open_flow(dst, info, t.numel() * 4)
        flow.send(key, t)
        self.res.flows.append(flow.finish())


def _pad(t: torch.Tensor, W: int) -> torch.Tensor:
    n = -(-t.numel() // W) * W
    return torch.cat([t, t.new_zeros(n - t.numel())]) if n > t.numel() else t.clone()


def _dp(c: _Ctx) -> None:
    job, W, d = c.job, c.W, c.job.width
    params = init_params(job)
    rows = slice(c.rank * job.batch // W, (c.rank + 1) * job.batch // W)
    with ThreadPoolExecutor(1, thread_name_prefix="allreduce") as comm:
        for it in range(job.iterations):
            x, y = (t[rows] for t in _data(job, it))
            ps = [p.clone().requires_grad_() for p in params]
            with c.task("fwd", it):
                ins, outs, h = [], [], x
                for b, p in enumerate(ps):
                    inp = h.detach().requires_grad_(b > 0)
                    h = _block(p, inp, d, b == job.blocks - 1)
                    ins.append(inp)
                    outs.append(h)
                loss = _loss(h, y)
            futs: dict[int, Future[torch.Tensor]] = {}
            g: torch.Tensor | None = None
            for b in reversed(range(job.blocks)):
                with c.task(f"bwd{b}", it):
                    want = [ps[b]] + ([ins[b]] if b > 0 else [])
                    grads = torch.autograd.grad(loss if g is None else outs[b], want,
                                                None if g is None else g)
                    g = grads[1] if b > 0 else None
                futs[b] = comm.submit(c.allreduce, _pad(grads[0].detach(), W), it,
                                      f"allreduce{b}")
            summed = {b: c.wait(f) for b, f in futs.items()}
            params = [p - job.lr * summed[b][: p.numel()] / W for b, p in enumerate(params)]
            c.res.iteration_end.append(time.time())
    c.res.params = dict(enumerate(params))


def _fsdp(c: _Ctx) -> None:
    job, W, d, B = c.job, c.W, c.job.width, c.job.blocks
    n = job.block_params
    shards = [_pad(p, W).view(W, -1)[c.rank].clone() for p in init_params(job)]
    rows = slice(c.rank * job.batch // W, (c.rank + 1) * job.batch // W)
    order = [b for b in range(B)] + [b for b in reversed(range(B))]
    with ThreadPoolExecutor(1, thread_name_prefix="gather") as gather, \
            ThreadPoolExecutor(1, thread_name_prefix="rscatter") as rscatter:
        for it in range(job.iterations):
            x, y = (t[rows] for t in _data(job, it))
            got = [gather.submit(c.allgather, shards[b], it, "allgather") for b in order]
            ins, h = [], x
            for i in range(B):
                full = c.wait(got[i])
                with c.task(f"fwd{i}", it), torch.no_grad():
                    ins.append(h)
                    h = _block(full[:n], h, d, i == B - 1)
                del full
            futs: dict[int, Future[torch.Tensor]] = {}
            g: torch.Tensor | None = None
            for i, b in enumerate(order[B:], B):
                full = c.wait(got[i])
                with c.task(f"bwd{b}", it):
                    p = full[:n].clone().requires_grad_()
                    inp = ins[b].detach().requires_grad_(b > 0)
                    out = _block(p, inp, d, b == B - 1)
                    want = [p] + ([inp] if b > 0 else [])
                    grads = torch.autograd.grad(_loss(out, y) if g is None else out, want,
                                                None if g is None else g)
                    g = grads[1] if b > 0 else None
                del full
                futs[b] = rscatter.submit(c.reduce_scatter, _pad(grads[0].detach(), W), it,
                                          f"reduce-scatter{b}")
            summed = {b: c.wait(f) for b, f in futs.items()}
            shards = [s - job.lr * summed[b] / W for b, s in enumerate(shards)]
            c.res.iteration_end.append(time.time())
    c.res.params = dict(enumerate(shards))


def _pipeline(c: _Ctx) -> None:
    job, S, s, d, M = c.job, c.W, c.rank, c.job.width, c.job.micro_batches
    mine = list(stage_blocks(job)[s])
    params = {b: p for b, p in enumerate(init_params(job)) if b in mine}
    mb = job.batch // M
    order = _stage_order(job.paradigm, S, s, M)
    with ThreadPoolExecutor(SENDERS, thread_name_prefix="send") as pool:
        for it in range(job.iterations):
            x, y = _data(job, it)
            ps = {b: p.clone().requires_grad_() for b, p in params.items()}
            saved: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
            sends: list[Future[None]] = []
            for kind, j in order:
                if kind == "F":
                    if s == 0:
                        inp = x[j * mb:(j + 1) * mb]
                    else:
                        inp = torch.empty(mb, d)
                        c.tr.recv(s - 1, f"{job.name}/{it}/a{j}", inp)
                        inp.requires_grad_()
                    with c.task(f"F{s}.{j}", it):
                        h = inp
                        for b in mine:
                            h = _block(ps[b], h, d, b == job.blocks - 1)
                        saved[j] = (inp, h)
                    if s < S - 1:
                        sends.append(pool.submit(c.send, s + 1, f"{job.name}/{it}/a{j}",
                                                 h.detach(), it, f"act{s}"))
                else:
                    inp, out = saved.pop(j)
                    if s < S - 1:
                        g = torch.empty(mb, d)
                        c.tr.recv(s + 1, f"{job.name}/{it}/g{j}", g)
                    with c.task(f"B{s}.{j}", it):
                        if s == S - 1:
                            (_loss(out, y[j * mb:(j + 1) * mb]) / M).backward()
                        else:
                            out.backward(g)
                    if s > 0:
                        assert inp.grad is not None
                        sends.append(pool.submit(c.send, s - 1, f"{job.name}/{it}/g{j}",
                                                 inp.grad.detach(), it, f"grad{s - 1}"))
            for f in sends:
                c.wait(f)
            params = {b: p.detach() - job.lr * p.grad for b, p in ps.items()
                      if p.grad is not None}
            c.res.iteration_end.append(time.time())
    c.res.params = params


_RUNNERS: dict[str, Callable[[_Ctx], None]] = {
    "gpipe": _pipeline, "1f1b": _pipeline, "fsdp": _fsdp, "dp-allreduce": _dp}


def free_ports(n: int) -> list[int]:
    """``n`` TCP ports of loopback that were free a moment ago.

    Parameters
    ----------
    n : int
        How many (>= 0).

    Returns
    -------
    list of int
        Distinct ports; another process may take one before the caller binds it.
    """
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [int(s.getsockname()[1]) for s in socks]
    for s in socks:
        s.close()
    return ports


def run_on_loopback(job: LiveJob, profile: LayerProfile | None = None,
                    timeout: float = 60.0) -> list[RankResult]:
    """Run every rank of ``job`` as a thread of this process over the tagged transport on
    loopback (free ports; no controller): a job checked without a cluster.

    Parameters
    ----------
    job : LiveJob
        The job; one thread per rank.
    profile : LayerProfile, optional
        For the flows' offsets; default :func:`profile_compute` with one repetition.
    timeout : float, optional
        Seconds each communication wait may take; every thread is given ``4 * timeout``.

    Returns
    -------
    list of RankResult
        Per rank, in rank order.

    Raises
    ------
    BaseException
        The first error a rank raised (e.g. :class:`CommschedError` on a timed-out wait).
    CommschedError
        A rank did not finish within ``4 * timeout`` s.
    """
    ports = free_ports(job.world)
    prof = profile or profile_compute(job, 1)
    trs = [TaggedTransport(r, [("127.0.0.1", p) for p in ports], tag_base=1 + 7 * r, tags=7,
                           timeout=timeout) for r in range(job.world)]
    out: list[RankResult | None] = [None] * job.world
    errors: list[BaseException] = []

    def rank(r: int) -> None:
        try:
            out[r] = run_rank(job, r, trs[r], prof, timeout)
        except BaseException as e:  # re-raised below, in the caller's thread
            errors.append(e)

    threads = [threading.Thread(target=rank, args=(r,)) for r in range(job.world)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(4 * timeout)
    for tr in trs:
        tr.close()
    if errors:
        raise errors[0]
    if any(r is None for r in out):
        raise CommschedError(f"job {job.name}: a rank did not finish within {4 * timeout:g} s")
    return [r for r in out if r is not None]


def run_rank(job: LiveJob, rank: int, transport: Transport, profile: LayerProfile,
             timeout: float = 60.0) -> RankResult:
    """Run rank ``rank`` of ``job`` over ``transport`` (module docstring); flows get their
    EchelonFlow index and offset from ``profile`` (:func:`flow_meta`).

    Parameters
    ----------
    job : LiveJob
        The job.
    rank : int
        In ``0..world-1``.
    transport : Transport
        This rank's connections to the others.
    profile : LayerProfile
        As in :func:`flow_meta`.
    timeout : float, optional
        Seconds each wait for communication may take.

    Returns
    -------
    RankResult

    Raises
    ------
    CommschedError
        A wait timed out, or a flow is not in the simulator's job graph.
    """
    c = _Ctx(job, rank, transport, flow_meta(job, profile), timeout)
    _RUNNERS[job.paradigm](c)
    return c.res
