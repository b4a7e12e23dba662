"""Multi-worker parameter-server simulation: N workers, P servers, synchronous iterations.

TicTac (Hashemi, Jyothi & Campbell, SysML 2019) evaluates recv orderings in data-parallel
training with parameter servers (PS): every worker runs the same graph; each parameter
lives on one PS and travels PS -> worker by a ``recv`` at the start of an iteration; in
training each worker sends its gradients back (``send``); a synchronous barrier ends the
iteration (Sec. 2.3, Sec. 6). This module simulates that setting on top of the
single-worker priority executor (:func:`commsched.sim.priority.simulate_compiled`):

Composition (:func:`compose`)
    The worker graph (one worker's PS view: ``recv``/``send`` ops on per-server channel
    resources, compute ops on the worker's own resources) is copied ``N`` times into one op
    graph. Op ``x`` of worker ``i`` becomes ``w<i>/x``. Resources used by a ``recv`` or
    ``send`` op are *shared*: every worker's copy of a transfer runs on the same resource,
    with the capacity the worker graph gives it (1 for the views of
    :mod:`commsched.views.ps`). So a server's link is one capacity-1 channel shared by all
    workers it serves, which is TicTac's "order at the sender" setting: the PS sends one
    transfer at a time, in priority order (Sec. 4, "enforcing the order" at the PS). Every
    other resource (compute) is private and renamed ``w<i>/<resource>``.
    Choice (documented, tested): one channel per server resource of the view; whether
    downlink and uplink are one channel or two is decided by the view.
    Known consequence: a whole tensor is sent to one worker at a time. When one tensor
    dominates a model's bytes (the first fully connected kernel: 74% of VGG-16's bytes,
    52% of AlexNet v2's) and every worker uses the same order, the server
    sends that tensor to the workers one after another and the last one waits for the
    others' copies: a shared order then *raises* the straggler effect of those models,
    where a link shared fairly between the workers' streams (gRPC's per-worker channels
    on one NIC) would deliver the copies together. The random baseline spreads the big
    tensor over the iteration and hides this.

Orders (:func:`rank_priorities`)
    An order is given per worker as a priority per recv (lower first). The sender of a
    shared channel always starts the ready transfer with the lowest priority; transfers of
    *different workers* with the same priority (for TIC/TAC: the same parameter, as every
    worker uses the same order) are interleaved uniformly at random, redrawn every
    iteration. We implement this by mapping each worker's priorities to dense ranks
    ``0, 1, ...`` and adding an independent draw in ``[0, 0.5)``; ranks stay in order, and
    the random part only decides among equal ranks. The baseline (vanilla TensorFlow's
    arbitrary order, Sec. 1 and Sec. 6) gives every worker an independent uniformly random
    permutation of its recvs every iteration; with ranks, the sender serves every worker's
    k-th request before any worker's (k+1)-th, as a FIFO server would when all workers
    issue their requests at once (``interleave="rank"``; ``"random"`` serves all
    outstanding requests in one random order instead).

Noise
    Two independent components, both redrawn every iteration; baseline and ordered runs
    with the same seed see the same draws (common random numbers):

    * *per-op jitter*: every op duration of every worker is multiplied by its own factor
      drawn uniformly from ``[1 - jitter, 1 + jitter]`` (``jitter = 0``: the time
      oracle's durations). Summed over thousands of ops it nearly averages out, so alone
      it leaves workers with the same order almost in lockstep;
    * *per-worker noise* (``worker_noise``, a coefficient of variation): all compute ops of
      worker ``w`` in iteration ``t`` are multiplied by one factor ``f[t, w]``, lognormal
      with mean 1 and that coefficient of variation. It models what makes one process
      slower than another in a given step (scheduling, caches, the machine's other load).
      The TicTac study sets it per model to the spread of the traced step times
      (:mod:`commsched.tictac.experiments.sweeps`). Transfers are not scaled: they run on the
      servers' shared links.

Iteration metrics (:class:`IterationResult`, :class:`RunResult`)
    Iterations are independent (the barrier resets every worker). A worker finishes when
    its last op ends; the iteration time is the slowest worker's finish time (synchronous
    barrier). The *straggler effect* of an iteration is the longest wait of any worker at
    the barrier divided by the iteration time, ``(T - min_w T_w) / T`` (TicTac SysML Sec.
    6.3: the largest time any worker spends waiting, over the iteration time).

    The *scheduling efficiency* of worker ``w`` in iteration ``t`` (TicTac Eq. 3) comes from
    that iteration's own timeline (:func:`timeline_efficiency`), as the authors compute it
    from measured timelines: ``C`` = its compute busy time, ``N`` = its communication busy
    time (the measure of the time during which one of its transfers is outstanding: from
    the moment the transfer could start -- 0 for a recv, the end of its producers for a
    send -- to its end, so time spent queued behind other workers' transfers on a shared
    server counts, as a recv op's span does in a TensorFlow timeline), ``U = C + N``
    (Eq. 1), ``L = max(C, N)`` (Eq. 2), ``m`` = its finish time, ``E = (U - m) / (U - L)``.
    At every moment before ``m`` the worker computes or has a transfer outstanding (the
    executor is work-conserving and recvs have no predecessors), so ``L <= m <= U`` and
    ``E`` lies in [0, 1] (tested).

Every simulated schedule can be checked with :func:`commsched.sim.validate.check_schedule`
(``validate_every`` in :func:`run`; tests validate every one).

Speed
    Traced graphs have thousands of ops per worker. :func:`coarsen` merges compute ops into
    segments that keep the communication structure (exact for compute chains, an
    approximation otherwise, measured in ``benchmarks/bench_multiworker.py``), and
    :func:`iteration` computes the schedule by an exact decomposition (channels, then each
    worker alone, then the uplinks) instead of the general event loop when the graph
    allows it; both are tested against the reference.

Examples
--------
>>> from commsched.model.graph import new_graph, add_op
>>> g = new_graph({"ps0": 1, "cpu": 1})
>>> add_op(g, "r1", "recv", "ps0", 1.0); add_op(g, "c1", "compute", "cpu", 2.0)
>>> g.add_edge("r1", "c1")
>>> mw = compose(g, 2)
>>> res = iteration(mw, np.array([[0.0], [0.25]]))
>>> res.iteration_time, res.worker_end.tolist()
(4.0, [3.0, 4.0])
>>> round(res.straggler, 6)
0.25
"""

from __future__ import annotations

import dataclasses
import heapq
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

import networkx as nx
import numpy as np

from commsched.errors import CommschedError
from commsched.model.graph import CompiledGraph, compile_graph, validate
from commsched.sim.priority import Schedule, simulate_compiled
from commsched.sim.validate import check_schedule
from commsched.tictac.properties import comm_index

__all__ = [
    "NET_KINDS",
    "Interleave",
    "IterationResult",
    "Method",
    "MultiWorker",
    "RunResult",
    "coarsen",
    "compose",
    "iteration",
    "jitter_durations",
    "rank_priorities",
    "run",
    "scale_compute",
    "timeline_efficiency",
    "worker_id",
    "worker_noise_factors",
]

#: Op kinds whose resources are shared by all workers (the PS links).
NET_KINDS = frozenset({"recv", "send"})

#: How :func:`iteration` computes a schedule (see there).
Method = Literal["auto", "reference"]

#: How the baseline interleaves the requests of different workers (see :func:`run`).
Interleave = Literal["rank", "random"]

#: Width of the random tie-break added to dense ranks (must stay below 1).
_TIE_WIDTH = 0.5


def coarsen(g: nx.DiGraph) -> nx.DiGraph:
    """Merge a worker graph's compute ops into segments that keep its communication structure.

    A traced training graph has thousands of compute ops (ResNet-50: about 5,000, 3,000 of
    them under 2 us); simulating 16 copies for 1,000 iterations op by op is too slow. The
    coarse graph keeps every ``recv`` and ``send`` op unchanged and replaces the compute
    ops by *segments*:

    1. The *reference order* is the order in which the executor runs the compute ops when
       transfers take no time (one simulation of ``g`` with zero-time recvs and sends).
    2. Compute ops are grouped by resource and by their communication dependencies
       ``dep(op)`` (TicTac Sec. 4.1: the recvs an op depends on,
       :func:`commsched.tictac.properties.comm_index`): ops of a group become executable
       when the same recvs have arrived.
    3. A group's ops, in reference order, are cut into consecutive segments after every op
       that feeds a send, so a gradient send still becomes ready when its producer's
       segment ends rather than at the end of the backward pass.
    4. A segment takes the summed time of its ops; the coarse graph has an edge between
       two segments (or a recv and a segment, a segment and a send) when the fine graph
       has one between their members. Edges go from a smaller ``dep`` set to a larger one
       or forward in the reference order, so the result is acyclic.

    What changes: a segment runs as one block, so ops of different segments no longer
    interleave on the compute unit, and a segment waits for all of its members'
    predecessors. For a compute chain (each op needs the previous one) nothing changes
    (tested). Total compute time, the transfers and, for every transfer, the set of
    transfers it depends on are preserved (tested); the effect on the TicTac study is
    measured in ``benchmarks/bench_multiworker.py``.

    Segment ids are ``seg<k>`` (graph attribute ``coarsened`` records how many ops were
    merged); node attributes ``members`` (number of ops) and ``first`` (the first member).
    """
    nodes = g.nodes
    idx = comm_index(g)
    dep = dict(zip(idx.ops, idx.dep, strict=True))
    zero = compile_graph(g)
    is_net = [nodes[n]["kind"] in NET_KINDS for n in zero.ids]
    zero = dataclasses.replace(
        zero, duration=[0.0 if net else d for net, d in zip(is_net, zero.duration, strict=True)]
    )
    ref = simulate_compiled(zero)
    position = {n: k for k, n in enumerate(zero.ids)}
    compute = [n for n, net in zip(zero.ids, is_net, strict=True) if not net]
    compute.sort(key=lambda n: (ref.start[position[n]], ref.end[position[n]], position[n]))
    succ = g.succ
    seg_of: dict[str, str] = {}
    open_seg: dict[tuple[str, int], str] = {}
    members: dict[str, list[str]] = {}
    for n in compute:
        key = (nodes[n]["resource"], dep[n])
        sid = open_seg.get(key)
        if sid is None:
            sid = f"seg{len(members)}"
            open_seg[key] = sid
            members[sid] = []
        members[sid].append(n)
        seg_of[n] = sid
        if any(nodes[s]["kind"] == "send" for s in succ[n]):
            del open_seg[key]
    out = nx.DiGraph()
    out.graph.update(g.graph)
    out.graph["coarsened"] = {"ops": len(compute), "segments": len(members)}
    for n, a in g.nodes(data=True):
        if a["kind"] in NET_KINDS:
            out.add_node(n, **a)
    for sid, ms in members.items():
        first = nodes[ms[0]]
        out.add_node(sid, kind=first["kind"], resource=first["resource"],
                     duration=math.fsum(float(nodes[m]["duration"]) for m in ms),
                     members=len(ms), first=ms[0])
    for u, v in g.edges:
        cu, cv = seg_of.get(u, u), seg_of.get(v, v)
        if cu != cv:
            out.add_edge(cu, cv)
    return out


def scale_compute(g: nx.DiGraph, factor: float) -> nx.DiGraph:
    """A copy of ``g`` whose ops other than recvs and sends take ``factor`` times longer.

    TicTac Fig. 10 varies the computational load by the batch size; we model a batch
    factor by scaling compute durations and leaving transfers alone (parameter sizes do
    not depend on the batch). :func:`run` applies the same scaling with ``compute_scale``.
    """
    if not factor > 0:
        raise CommschedError(f"a compute scale factor must be > 0, got {factor!r}")
    out = g.copy()
    for _, a in out.nodes(data=True):
        if a["kind"] not in NET_KINDS:
            a["duration"] = float(a["duration"]) * factor
    return out


def worker_id(i: int, op: str) -> str:
    """The id of op ``op`` of worker ``i`` in a composed graph (``w<i>/<op>``)."""
    return f"w{i}/{op}"


@dataclass(frozen=True)
class MultiWorker:
    """``n_workers`` copies of a worker graph with shared channels, compiled once.

    Ops of worker ``i`` occupy positions ``i * ops_per_worker ...`` of ``cg`` in the
    worker graph's node order; ``recv_index[i, k]`` is the position of worker ``i``'s copy
    of ``recvs[k]``.
    """

    worker: nx.DiGraph
    n_workers: int
    graph: nx.DiGraph
    cg: CompiledGraph
    shared: tuple[str, ...]
    recvs: tuple[str, ...]
    recv_index: np.ndarray
    base_duration: np.ndarray
    plan: _Plan | None = None

    @property
    def ops_per_worker(self) -> int:
        return self.worker.number_of_nodes()

    @property
    def n_recvs(self) -> int:
        return len(self.recvs)


@dataclass(frozen=True)
class _Plan:
    """One worker's structure for the decomposed simulation (:func:`_decomposed`).

    Local op indices are positions in the worker graph's node order. ``pred_pos[v]`` lists
    ``(p, k)``: op ``v`` is the ``k``-th successor of its predecessor ``p``.
    """

    compute: list[int]
    compute_succ: list[list[tuple[int, int]]]
    compute_indeg: list[int]
    pred_pos: list[list[tuple[int, int]]]
    recv_pred_pos: list[list[tuple[int, int]]]
    recv_channels: list[np.ndarray]  # per downlink: composite indices of its recvs
    send_channels: list[np.ndarray]  # per uplink: composite indices of its sends


def _plan(worker: nx.DiGraph, g: nx.DiGraph, cg: CompiledGraph, shared: set[str],
          n_workers: int) -> _Plan | None:
    """The decomposition plan, or None when the composed graph does not allow it.

    Allowed when recvs have no predecessors, sends no successors, every shared channel
    has capacity 1 and carries only recvs or only sends, and every other op runs on one
    private resource of capacity 1.
    """
    res = worker.graph["resources"]
    kinds: dict[str, set[str]] = {}
    for n, a in worker.nodes(data=True):
        kinds.setdefault(a["resource"], set()).add(a["kind"] if a["kind"] in NET_KINDS
                                                   else "compute")
        if (a["kind"] == "recv" and worker.in_degree(n)) or (
                a["kind"] == "send" and worker.out_degree(n)):
            return None
    private = [r for r in kinds if r not in shared]  # used private resources
    if len(private) > 1 or any(res[r] != 1 for r in [*private, *shared]):
        return None
    if any(kinds.get(r, set()) - {"recv"} and kinds.get(r, set()) - {"send"} for r in shared):
        return None
    if private and kinds[private[0]] - {"compute"}:
        return None
    per = worker.number_of_nodes()
    kind = [worker.nodes[n]["kind"] for n in worker.nodes]
    pred_pos: list[list[tuple[int, int]]] = [[] for _ in range(per)]
    recv_pred_pos: list[list[tuple[int, int]]] = [[] for _ in range(per)]
    compute_succ: list[list[tuple[int, int]]] = [[] for _ in range(per)]
    compute_indeg = [0] * per
    for u in range(per):  # the first worker's CSR lists are every worker's
        for k in range(cg.succ_ptr[u], cg.succ_ptr[u + 1]):
            v = cg.succ_idx[k]
            pred_pos[v].append((u, k - cg.succ_ptr[u]))
            if kind[v] in NET_KINDS:
                continue
            if kind[u] == "recv":
                recv_pred_pos[v].append((u, k - cg.succ_ptr[u]))
            else:
                compute_succ[u].append((v, k - cg.succ_ptr[u]))
                compute_indeg[v] += 1
    offsets = np.arange(n_workers, dtype=np.int64)[:, None] * per

    def channels(k: str) -> list[np.ndarray]:
        out = []
        for r in sorted(shared):
            local = np.array([i for i, n in enumerate(worker.nodes)
                              if kind[i] == k and worker.nodes[n]["resource"] == r],
                             dtype=np.int64)
            if len(local):
                out.append((offsets + local[None, :]).ravel())
        return out

    return _Plan(
        compute=[i for i in range(per) if kind[i] not in NET_KINDS],
        compute_succ=compute_succ,
        compute_indeg=compute_indeg,
        pred_pos=pred_pos,
        recv_pred_pos=recv_pred_pos,
        recv_channels=channels("recv"),
        send_channels=channels("send"),
    )


def _decomposed(
    mw: MultiWorker, plan: _Plan, prio: np.ndarray, d: np.ndarray
) -> tuple[list[float], list[float]]:
    """Start and end times of every op, equal to :func:`simulate_compiled`'s.

    With recvs that depend on nothing, sends that nothing depends on and channels that
    carry only one of the two, an iteration decomposes exactly (tested against the
    reference): (1) every downlink sends its recvs back to back from time 0 in priority
    order (ties: composite op order, the executor's fifo order at time 0); (2) each worker's
    compute unit then runs list scheduling on its own, an op being ready when its last
    predecessor ends, fifo by (ready time, the finishing predecessor's position, the op's
    place among that predecessor's successors) -- the order in which the executor's event
    loop makes ops ready; (3) every uplink serves its sends in the same fifo order. Needs
    every duration > 0 (zero-time ops start and end within one event time, which the
    executor processes in extra rounds); :func:`iteration` falls back otherwise.
    """
    n = mw.cg.n
    per = mw.ops_per_worker
    dl = d.tolist()
    start = [0.0] * n
    end = [0.0] * n
    pr = np.zeros(n)
    pr[mw.recv_index.ravel()] = prio.ravel()
    for idx in plan.recv_channels:
        order = idx[np.lexsort((idx, pr[idx]))]
        e = np.cumsum(d[order])
        s = np.concatenate(([0.0], e[:-1]))
        for i, a, b in zip(order.tolist(), s.tolist(), e.tolist(), strict=True):
            start[i] = a
            end[i] = b
    pred_pos, succ, rpp = plan.pred_pos, plan.compute_succ, plan.recv_pred_pos
    heappush, heappop = heapq.heappush, heapq.heappop
    for w in range(mw.n_workers):
        off = w * per
        indeg = list(plan.compute_indeg)
        heap: list[tuple[float, int, int, int]] = []
        for v in plan.compute:
            if indeg[v] == 0:  # ready at 0 or when its last recv ends
                bt, bp, bk = 0.0, -1, v
                for r, k in rpp[v]:
                    t = end[off + r]
                    if t > bt or (t == bt and r > bp):
                        bt, bp, bk = t, r, k
                heappush(heap, (bt, bp, bk, v))
        free = 0.0
        while heap:
            ready, _, _, v = heappop(heap)
            s0 = free if free > ready else ready
            free = s0 + dl[off + v]
            start[off + v] = s0
            end[off + v] = free
            for c, kc in succ[v]:
                indeg[c] -= 1
                if indeg[c] == 0:
                    # v ended last among c's compute predecessors (one compute unit, every
                    # duration > 0); a recv may still end later.
                    bt, bp, bk = free, v, kc
                    for r, k in rpp[c]:
                        t = end[off + r]
                        if t > bt or (t == bt and r > bp):
                            bt, bp, bk = t, r, k
                    heappush(heap, (bt, bp, bk, c))
    for idx in plan.send_channels:
        keys = []
        for i in idx.tolist():
            w, v = divmod(i, per)
            off = w * per
            best = (0.0, -1, i)
            for p, k in pred_pos[v]:
                cand = (end[off + p], off + p, k)
                if cand[:2] > best[:2]:
                    best = cand
            keys.append((best[0], best[1], best[2], i))
        keys.sort()
        free = 0.0
        for ready, _, _, i in keys:
            s0 = free if free > ready else ready
            free = s0 + dl[i]
            start[i] = s0
            end[i] = free
    return start, end


def _net_resources(g: nx.DiGraph) -> set[str]:
    return {a["resource"] for _, a in g.nodes(data=True) if a["kind"] in NET_KINDS}


def compose(
    worker: nx.DiGraph, n_workers: int, shared: Iterable[str] | None = None
) -> MultiWorker:
    """Compose ``n_workers`` copies of ``worker`` into one op graph with shared channels.

    Parameters
    ----------
    worker
        One worker's op graph (a PS view): parameter transfers are ``recv`` ops, gradient
        transfers ``send`` ops.
    n_workers
        Number of workers, >= 1.
    shared
        Resources shared by all workers; default: every resource that runs a ``recv`` or
        ``send`` op. All other resources are private to each worker.
    """
    if not isinstance(n_workers, int) or isinstance(n_workers, bool) or n_workers < 1:
        raise CommschedError(f"n_workers must be an integer >= 1, got {n_workers!r}")
    validate(worker)
    resources: dict[str, int] = worker.graph["resources"]
    shared_set = _net_resources(worker) if shared is None else set(shared)
    unknown = shared_set - set(resources)
    if unknown:
        raise CommschedError(f"shared resources {sorted(unknown)} are not in the worker graph")
    recvs = tuple(n for n, a in worker.nodes(data=True) if a["kind"] == "recv")
    if not recvs:
        raise CommschedError("the worker graph has no recv ops (parameter transfers)")
    private = [r for r in resources if r not in shared_set]

    def res_name(i: int, r: str) -> str:
        return r if r in shared_set else worker_id(i, r)

    g = nx.DiGraph()
    g.graph.update({k: v for k, v in worker.graph.items() if k != "resources"})
    g.graph["resources"] = {r: resources[r] for r in resources if r in shared_set}
    g.graph["multiworker"] = {"n_workers": n_workers, "shared": sorted(shared_set)}
    for i in range(n_workers):
        for r in private:
            g.graph["resources"][worker_id(i, r)] = resources[r]
        for n, a in worker.nodes(data=True):
            attrs = dict(a)
            attrs.pop("priority", None)
            attrs["resource"] = res_name(i, a["resource"])
            attrs["worker"] = i
            g.add_node(worker_id(i, n), **attrs)
        g.add_edges_from((worker_id(i, u), worker_id(i, v)) for u, v in worker.edges)
    cg = compile_graph(g)
    pos = {n: k for k, n in enumerate(worker.nodes)}
    per = worker.number_of_nodes()
    recv_pos = np.array([pos[r] for r in recvs], dtype=np.int64)
    recv_index = np.arange(n_workers, dtype=np.int64)[:, None] * per + recv_pos[None, :]
    return MultiWorker(
        worker=worker,
        n_workers=n_workers,
        graph=g,
        cg=cg,
        shared=tuple(sorted(shared_set)),
        recvs=recvs,
        recv_index=recv_index,
        base_duration=np.array(cg.duration, dtype=float),
        plan=_plan(worker, g, cg, shared_set, n_workers),
    )


def rank_priorities(
    mw: MultiWorker, order: Mapping[str, float], tie: np.ndarray | None = None
) -> np.ndarray:
    """Per-worker recv priorities for an order shared by every worker.

    ``order`` maps recv op ids of the worker graph to numbers (lower first, equal numbers
    allowed, as TIC gives); a recv it does not name goes after all named ones. The result
    has shape ``(n_workers, n_recvs)``: the dense rank of each recv's priority plus
    ``tie`` (default 0) scaled into ``[0, 0.5)``, so that equal ranks of different workers
    are interleaved by ``tie`` and never reorder a worker's own ranks.
    """
    unknown = set(order) - set(mw.recvs)
    if unknown:
        raise CommschedError(
            f"the order names ops that are not recvs of the worker graph: {sorted(unknown)[:3]}"
        )
    big = max(order.values(), default=0.0) + 1.0
    raw = np.array([order.get(r, big) for r in mw.recvs], dtype=float)
    ranks = np.unique(raw, return_inverse=True)[1].astype(float)
    out = np.broadcast_to(ranks, (mw.n_workers, mw.n_recvs)).copy()
    if tie is not None:
        out += _TIE_WIDTH * np.asarray(tie, dtype=float)
    return out


def jitter_durations(
    mw: MultiWorker, jitter: float, rng: np.random.Generator, scale: np.ndarray | None = None
) -> np.ndarray:
    """Op durations of one iteration: the base durations times ``U[1-jitter, 1+jitter]``."""
    d = mw.base_duration if scale is None else mw.base_duration * scale
    if jitter == 0.0:
        return d
    return d * rng.uniform(1.0 - jitter, 1.0 + jitter, size=d.shape)


def worker_noise_factors(cv: float, n_workers: int, rng: np.random.Generator) -> np.ndarray:
    """Per-worker compute factors of one iteration: lognormal, mean 1, coefficient of
    variation ``cv`` (``sigma^2 = ln(1 + cv^2)``); all ones when ``cv == 0``.

    >>> f = worker_noise_factors(0.1, 200_000, np.random.default_rng(0))
    >>> round(float(f.mean()), 2), round(float(f.std() / f.mean()), 2)
    (1.0, 0.1)
    """
    if cv == 0.0:
        return np.ones(n_workers)
    sigma = math.sqrt(math.log1p(cv * cv))
    return np.exp(sigma * rng.standard_normal(n_workers) - sigma * sigma / 2.0)


@dataclass(frozen=True)
class _Timeline:
    """Per-worker index arrays for :func:`timeline_efficiency` (local positions)."""

    compute: np.ndarray  # compute ops
    net: np.ndarray  # transfers (recvs and sends)
    net_preds: np.ndarray  # (len(net), k): local predecessors of each transfer, -1 = none
    channels: tuple[np.ndarray, ...]  # composite indices of every shared channel's ops


def _timeline(mw: MultiWorker) -> _Timeline:
    w = mw.worker
    local = list(w.nodes)
    pos = {n: i for i, n in enumerate(local)}
    kinds = [w.nodes[n]["kind"] for n in local]
    net = [i for i, k in enumerate(kinds) if k in NET_KINDS]
    preds = [[pos[p] for p in w.predecessors(local[i])] for i in net]
    width = max((len(p) for p in preds), default=0) or 1
    pad = np.full((len(net), width), -1, dtype=np.int64)
    for k, p in enumerate(preds):
        pad[k, :len(p)] = p
    per = mw.ops_per_worker
    offsets = np.arange(mw.n_workers, dtype=np.int64)[:, None] * per
    channels = []
    for r in mw.shared:
        loc = np.array([i for i in net if w.nodes[local[i]]["resource"] == r], dtype=np.int64)
        if len(loc):
            channels.append((offsets + loc[None, :]).ravel())
    return _Timeline(
        compute=np.array([i for i, k in enumerate(kinds) if k not in NET_KINDS],
                         dtype=np.int64),
        net=np.array(net, dtype=np.int64), net_preds=pad, channels=tuple(channels),
    )


def timeline_efficiency(
    mw: MultiWorker, durations: np.ndarray, end: np.ndarray,
    timeline: _Timeline | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-worker ``(E, compute busy, communication busy)`` of one simulated iteration.

    See the module docstring (Iteration metrics): ``E = (U - m) / (U - L)`` with ``U`` the
    sum and ``L`` the larger of the worker's compute and communication busy times and
    ``m`` its finish time; 1 when ``U == L``. ``durations`` and ``end`` are in composed-
    graph order (the iteration's durations and its schedule's end times).
    """
    tl = timeline or _timeline(mw)
    n, per = mw.n_workers, mw.ops_per_worker
    d2 = np.asarray(durations, dtype=float).reshape(n, per)
    e2 = np.asarray(end, dtype=float).reshape(n, per)
    comp = d2[:, tl.compute].sum(axis=1)
    if len(tl.net):
        ez = np.concatenate([e2, np.zeros((n, 1))], axis=1)  # column -1: "no predecessor"
        ready = ez[:, tl.net_preds].max(axis=2)
        ends = e2[:, tl.net]
        order = np.argsort(ready, axis=1, kind="stable")
        s_sorted = np.take_along_axis(ready, order, axis=1)
        e_sorted = np.take_along_axis(ends, order, axis=1)
        reach = np.maximum.accumulate(e_sorted, axis=1)
        prev = np.concatenate([np.full((n, 1), -np.inf), reach[:, :-1]], axis=1)
        comm = np.clip(e_sorted - np.maximum(s_sorted, prev), 0.0, None).sum(axis=1)
    else:
        comm = np.zeros(n)
    m = e2.max(axis=1)
    upper, lower = comp + comm, np.maximum(comp, comm)
    span = upper - lower
    tol = 1e-9 * np.maximum(1.0, upper)
    with np.errstate(divide="ignore", invalid="ignore"):
        eff = np.where(span > tol, (upper - m) / np.where(span > tol, span, 1.0), 1.0)
    return np.clip(eff, 0.0, 1.0), comp, comm


@dataclass(frozen=True)
class IterationResult:
    """One synchronous iteration: per-worker finish times, the barrier and the schedule."""

    worker_end: np.ndarray
    schedule: Schedule

    @property
    def iteration_time(self) -> float:
        return float(self.worker_end.max())

    @property
    def straggler(self) -> float:
        """Longest wait of any worker at the barrier over the iteration time."""
        t = self.iteration_time
        return float((t - self.worker_end.min()) / t) if t > 0 else 0.0


def iteration(
    mw: MultiWorker,
    priorities: np.ndarray,
    durations: np.ndarray | None = None,
    validate_schedule: bool = True,
    method: Method = "auto",
) -> IterationResult:
    """Simulate one iteration.

    Parameters
    ----------
    priorities
        ``(n_workers, n_recvs)`` priority of each worker's recvs (see
        :func:`rank_priorities`); lower is sent first by the shared channel.
    durations
        Op durations in composed-graph order; default the base durations.
    validate_schedule
        Check the schedule with :func:`check_schedule` (raises ``InvalidSchedule``).
    method
        ``reference``: :func:`commsched.sim.priority.simulate_compiled` on the composed
        graph. ``auto`` (default): the same schedule computed by decomposition (channels,
        then each worker's compute unit, then the uplinks; see ``_decomposed``) when the
        graph allows it and every duration is > 0, else the reference. The decomposition
        exists for speed only: profiling 16 workers of a coarsened ResNet-50 (17,000 ops
        per iteration) showed 97 % of the time in the general event loop, 0.1 s per
        iteration, too slow for 1,000 iterations in a minute; equality with the reference
        is tested on random graphs.
    """
    p = np.asarray(priorities, dtype=float)
    if p.shape != (mw.n_workers, mw.n_recvs):
        raise CommschedError(
            f"priorities must have shape {(mw.n_workers, mw.n_recvs)}, got {p.shape}"
        )
    if method not in ("auto", "reference"):
        raise CommschedError(f"method must be auto or reference, got {method!r}")
    d = mw.base_duration if durations is None else np.asarray(durations, dtype=float)
    if d.shape != mw.base_duration.shape:
        raise CommschedError(f"durations must have {mw.cg.n} entries, got {d.shape}")
    cg = mw.cg
    if method == "auto" and mw.plan is not None and bool(np.all(d > 0)):
        start, end = _decomposed(mw, mw.plan, p, d)
        s = Schedule(cg.ids, start, end)
        if validate_schedule:
            check_schedule(dataclasses.replace(cg, duration=d.tolist()), s)
    else:
        prio: list[float | None] = [None] * cg.n
        for i, v in zip(mw.recv_index.ravel().tolist(), p.ravel().tolist(), strict=True):
            prio[i] = v
        cg = dataclasses.replace(cg, duration=d.tolist(), priority=prio)
        s = simulate_compiled(cg)
        if validate_schedule:
            check_schedule(cg, s)
    ends = np.asarray(s.end).reshape(mw.n_workers, mw.ops_per_worker).max(axis=1)
    return IterationResult(worker_end=ends, schedule=s)


@dataclass(frozen=True)
class RunResult:
    """``n_iterations`` synchronous iterations of one configuration.

    ``worker_end[t, i]`` is worker ``i``'s finish time in iteration ``t``; ``ranks[t, i, k]``
    the rank of recv ``k`` in worker ``i``'s order in iteration ``t`` (0 = first);
    ``efficiency``, ``compute_busy`` and ``comm_busy`` ``[t, i]`` come from iteration
    ``t``'s timeline (:func:`timeline_efficiency`); ``channel_load[t, c]`` is the summed
    duration of every transfer on shared channel ``c`` in iteration ``t``.
    """

    worker_end: np.ndarray
    ranks: np.ndarray
    validated: int
    efficiency: np.ndarray
    compute_busy: np.ndarray
    comm_busy: np.ndarray
    channel_load: np.ndarray

    @property
    def best_time(self) -> np.ndarray:
        """Per iteration, the theoretical best (E = 1) iteration time: the slowest worker's
        Eq. (2) bound with that iteration's op times, the larger of its compute time and
        the busiest shared channel's load (which carries every worker's transfers)."""
        busiest = self.channel_load.max(axis=1, initial=0.0)
        return np.asarray(np.maximum(self.compute_busy.max(axis=1), busiest))

    @property
    def worst_time(self) -> np.ndarray:
        """Per iteration, the theoretical worst (E = 0) iteration time: Eq. (1), nothing
        overlaps -- the slowest worker's compute time plus every shared channel's load."""
        return np.asarray(self.compute_busy.max(axis=1) + self.channel_load.sum(axis=1))

    @property
    def iteration_time(self) -> np.ndarray:
        return np.asarray(self.worker_end.max(axis=1))

    @property
    def straggler(self) -> np.ndarray:
        t = self.iteration_time
        wait = t - self.worker_end.min(axis=1)
        return np.divide(wait, t, out=np.zeros_like(t), where=t > 0)


def run(
    mw: MultiWorker,
    order: Mapping[str, float] | None,
    n_iterations: int,
    jitter: float = 0.0,
    seed: int = 0,
    validate_every: int = 1,
    compute_scale: float = 1.0,
    interleave: Interleave = "rank",
    method: Method = "auto",
    worker_noise: float = 0.0,
) -> RunResult:
    """Simulate ``n_iterations`` independent synchronous iterations.

    Parameters
    ----------
    order
        The recv priorities every worker uses (TIC or TAC), or ``None`` for the baseline:
        an independent random permutation per worker and iteration.
    interleave
        How the baseline's requests of different workers share a channel: ``rank`` (every
        worker's k-th request before any (k+1)-th, a FIFO sender receiving all requests
        at once) or ``random`` (all outstanding requests in one uniformly random order;
        each worker's own order is still a uniform random permutation). Ignored when
        ``order`` is given (the sender then sends a parameter to every worker before the
        next one).
    method
        See :func:`iteration`.
    jitter
        Multiplicative jitter on every op time, ``0 <= jitter < 1``.
    seed
        Seeds the jitter, the baseline orders, the interleaving of equal ranks and the
        per-worker noise; four independent streams, so runs with the same seed share
        their jitter and noise.
    worker_noise
        Coefficient of variation of the per-worker per-iteration compute factor
        (:func:`worker_noise_factors`; module docstring, Noise); 0 disables it.
    validate_every
        Validate the schedule of iterations ``0, k, 2k, ...``; 0 validates none.
    compute_scale
        Multiplies the duration of every op that is not a recv or send (TicTac Fig. 10's
        batch factor; communication is unchanged).
    """
    if not isinstance(n_iterations, int) or n_iterations < 1:
        raise CommschedError(f"n_iterations must be an integer >= 1, got {n_iterations!r}")
    if not 0.0 <= jitter < 1.0:
        raise CommschedError(f"jitter must be in [0, 1), got {jitter!r}")
    if not compute_scale > 0:
        raise CommschedError(f"compute_scale must be > 0, got {compute_scale!r}")
    if validate_every < 0:
        raise CommschedError(f"validate_every must be >= 0, got {validate_every!r}")
    if interleave not in ("rank", "random"):
        raise CommschedError(f"interleave must be rank or random, got {interleave!r}")
    if not (0.0 <= worker_noise < 10.0):
        raise CommschedError(f"worker_noise must be in [0, 10), got {worker_noise!r}")
    is_net = np.array([mw.graph.nodes[n]["kind"] in NET_KINDS for n in mw.cg.ids], dtype=bool)
    scale = None
    if compute_scale != 1.0:
        scale = np.where(is_net, 1.0, compute_scale)
    op_worker = np.repeat(np.arange(mw.n_workers), mw.ops_per_worker)
    tl = _timeline(mw)
    rng_jitter = np.random.default_rng([seed, 0])
    rng_order = np.random.default_rng([seed, 1])
    rng_tie = np.random.default_rng([seed, 2])
    rng_noise = np.random.default_rng([seed, 3])
    n, r = mw.n_workers, mw.n_recvs
    fixed = None if order is None else rank_priorities(mw, order)
    base_perm = np.broadcast_to(np.arange(r, dtype=float), (n, r))
    ends = np.empty((n_iterations, n))
    ranks = np.empty((n_iterations, n, r), dtype=np.int32)
    eff = np.empty((n_iterations, n))
    comp = np.empty((n_iterations, n))
    comm = np.empty((n_iterations, n))
    load = np.empty((n_iterations, len(tl.channels)))
    validated = 0
    for t in range(n_iterations):
        d = jitter_durations(mw, jitter, rng_jitter, scale)
        if worker_noise > 0.0:
            f = worker_noise_factors(worker_noise, n, rng_noise)
            d = d * np.where(is_net, 1.0, f[op_worker])
        tie = rng_tie.random((n, r))
        if fixed is not None:
            rk, prio = fixed, fixed + _TIE_WIDTH * tie
        elif interleave == "rank":
            rk = rng_order.permuted(base_perm, axis=1)
            prio = rk + _TIE_WIDTH * tie
        else:
            prio = rng_order.random((n, r))
            rk = np.argsort(np.argsort(prio, axis=1), axis=1)
        check = validate_every > 0 and t % validate_every == 0
        res = iteration(mw, prio, d, validate_schedule=check, method=method)
        validated += check
        ends[t] = res.worker_end
        ranks[t] = rk
        eff[t], comp[t], comm[t] = timeline_efficiency(mw, d, np.asarray(res.schedule.end), tl)
        load[t] = [float(d[c].sum()) for c in tl.channels]
    return RunResult(worker_end=ends, ranks=ranks, validated=validated, efficiency=eff,
                     compute_busy=comp, comm_busy=comm, channel_load=load)
