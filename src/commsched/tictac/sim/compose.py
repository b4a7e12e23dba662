"""Composition: N copies of a worker graph on shared parameter-server channels.

See :mod:`commsched.tictac.sim` (Composition) for the model. :func:`compose` also derives
the :class:`Plan` that lets :func:`commsched.tictac.sim.decompose.decomposed_schedule`
compute an iteration's schedule without the general event loop.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property

import networkx as nx
import numpy as np

from commsched.errors import CommschedError
from commsched.model.graph import CompiledGraph, compile_graph, validate

__all__ = ["NET_KINDS", "MultiWorker", "Plan", "compose", "make_plan", "scale_compute",
           "worker_id"]

#: Op kinds whose resources are shared by all workers (the PS links).
NET_KINDS = frozenset({"recv", "send"})


def scale_compute(g: nx.DiGraph, factor: float) -> nx.DiGraph:
    """A copy of ``g`` whose ops other than recvs and sends take ``factor`` times longer.

    TicTac Fig. 10 varies the computational load by the batch size; we model a batch
    factor by scaling compute durations and leaving transfers alone (parameter sizes do
    not depend on the batch). :func:`commsched.tictac.sim.run` applies the same scaling
    with ``compute_scale``.

    Parameters
    ----------
    g : networkx.DiGraph
        An op graph (a worker's PS view).
    factor : float
        The batch factor, > 0.

    Returns
    -------
    networkx.DiGraph
        A copy of ``g``; every op whose ``kind`` is not in :data:`NET_KINDS` has its
        ``duration`` multiplied by ``factor``.

    Raises
    ------
    CommschedError
        If ``factor`` is not > 0.

    References
    ----------
    .. [1] Hashemi, Jyothi & Campbell, "TicTac", SysML 2019, Sec. 6.1 and Fig. 10.
    """
    if not factor > 0:
        raise CommschedError(f"a compute scale factor must be > 0, got {factor!r}")
    out = g.copy()
    for _, a in out.nodes(data=True):
        if a["kind"] not in NET_KINDS:
            a["duration"] = float(a["duration"]) * factor
    return out


def worker_id(i: int, op: str) -> str:
    """The id of an op of one worker in a composed graph.

    Parameters
    ----------
    i : int
        The worker.
    op : str
        The op (or private resource) of the worker graph.

    Returns
    -------
    str
        ``w<i>/<op>``.

    Examples
    --------
    >>> worker_id(3, "conv1")
    'w3/conv1'
    """
    return f"w{i}/{op}"


@dataclass(frozen=True)
class MultiWorker:
    """``n_workers`` copies of a worker graph with shared channels, compiled once.

    Built by :func:`compose`. Ops of worker ``i`` occupy positions ``i * ops_per_worker
    ...`` of ``cg`` in the worker graph's node order.

    Attributes
    ----------
    worker : networkx.DiGraph
        The worker graph.
    n_workers : int
        Number of copies.
    graph : networkx.DiGraph
        The composed op graph (op ``x`` of worker ``i`` is ``w<i>/x``).
    cg : CompiledGraph
        ``graph`` compiled for the executor.
    shared : tuple of str
        The resources every worker shares (the servers' channels), sorted.
    recvs : tuple of str
        The worker graph's recv ops, in graph order.
    recv_index : numpy.ndarray
        ``recv_index[i, k]``: the position in ``cg`` of worker ``i``'s copy of ``recvs[k]``.
    base_duration : numpy.ndarray
        Every op's duration in ``cg`` order.
    plan : Plan or None
        The structure of the exact fast path (:func:`make_plan`), None where it does not
        apply.

    References
    ----------
    .. [1] Hashemi, Jyothi & Campbell, "TicTac", SysML 2019, Secs. 2.3 and 6.
    """

    worker: nx.DiGraph
    n_workers: int
    graph: nx.DiGraph
    cg: CompiledGraph
    shared: tuple[str, ...]
    recvs: tuple[str, ...]
    recv_index: np.ndarray
    base_duration: np.ndarray
    plan: Plan | None = None

    @property
    def ops_per_worker(self) -> int:
        """Ops of one worker (of the worker graph)."""
        return self.worker.number_of_nodes()

    @property
    def n_recvs(self) -> int:
        """Recv ops of one worker."""
        return len(self.recvs)

    @cached_property
    def is_net(self) -> np.ndarray:
        """Per op of ``cg``: whether it is a transfer (:data:`NET_KINDS`), bool."""
        return np.array([self.graph.nodes[n]["kind"] in NET_KINDS for n in self.cg.ids],
                        dtype=bool)

    @cached_property
    def op_worker(self) -> np.ndarray:
        """Per op of ``cg``: the worker it belongs to."""
        return np.repeat(np.arange(self.n_workers), self.ops_per_worker)


@dataclass(frozen=True)
class Plan:
    """One worker's structure for the exact fast path of an iteration.

    Read by :func:`commsched.tictac.sim.decompose.decomposed_schedule`. Local op indices
    are positions in the worker graph's node order.

    Attributes
    ----------
    compute : list of int
        The compute ops.
    compute_succ : list of list of (int, int)
        ``compute_succ[u]``: ``(v, k)`` for every compute successor ``v`` of a compute op
        ``u``, ``v`` being ``u``'s ``k``-th successor.
    compute_indeg : list of int
        Compute predecessors of every op.
    pred_pos : list of list of (int, int)
        ``pred_pos[v]``: ``(p, k)``, op ``v`` is the ``k``-th successor of its predecessor
        ``p``.
    recv_pred_pos : list of list of (int, int)
        The same, only the recv predecessors of compute ops.
    recv_channels, send_channels : list of numpy.ndarray
        Per downlink (uplink): the composite indices of its recvs (sends).
    """

    compute: list[int]
    compute_succ: list[list[tuple[int, int]]]
    compute_indeg: list[int]
    pred_pos: list[list[tuple[int, int]]]
    recv_pred_pos: list[list[tuple[int, int]]]
    recv_channels: list[np.ndarray]  # per downlink: composite indices of its recvs
    send_channels: list[np.ndarray]  # per uplink: composite indices of its sends


def make_plan(worker: nx.DiGraph, cg: CompiledGraph, shared: set[str],
              n_workers: int) -> Plan | None:
    """The structure of the exact fast path, where the composed graph allows it.

    Allowed when recvs have no predecessors, sends no successors, every shared channel
    has capacity 1 and carries only recvs or only sends, and every other op runs on one
    private resource of capacity 1.

    Parameters
    ----------
    worker : networkx.DiGraph
        The worker graph.
    cg : CompiledGraph
        The composed graph, compiled (the first worker's successor lists are read).
    shared : set of str
        The shared resources.
    n_workers : int
        Number of workers in ``cg``.

    Returns
    -------
    Plan or None
        None when the graph does not allow the decomposition.
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

    return Plan(
        compute=[i for i in range(per) if kind[i] not in NET_KINDS],
        compute_succ=compute_succ,
        compute_indeg=compute_indeg,
        pred_pos=pred_pos,
        recv_pred_pos=recv_pred_pos,
        recv_channels=channels("recv"),
        send_channels=channels("send"),
    )


def _net_resources(g: nx.DiGraph) -> set[str]:
    return {a["resource"] for _, a in g.nodes(data=True) if a["kind"] in NET_KINDS}


def compose(
    worker: nx.DiGraph, n_workers: int, shared: Iterable[str] | None = None
) -> MultiWorker:
    """Compose ``n_workers`` copies of ``worker`` into one op graph with shared channels.

    See :mod:`commsched.tictac.sim` (Composition): a shared resource keeps its name and
    capacity and carries every worker's copy of its ops (a server's link, serving one
    transfer at a time in priority order); every other resource ``r`` becomes the
    private ``w<i>/r`` of each worker.

    Parameters
    ----------
    worker : networkx.DiGraph
        One worker's op graph (a PS view): parameter transfers are ``recv`` ops, gradient
        transfers ``send`` ops.
    n_workers : int
        Number of workers, >= 1.
    shared : iterable of str, optional
        Resources shared by all workers; default: every resource that runs a ``recv`` or
        ``send`` op. All other resources are private to each worker.

    Returns
    -------
    MultiWorker
        The composed graph, compiled once, with the plan of the fast path.

    Raises
    ------
    CommschedError
        If ``n_workers`` is not an integer >= 1, ``worker`` is not a valid op graph, a
        shared resource is not in it, or it has no recv op.

    References
    ----------
    .. [1] Hashemi, Jyothi & Campbell, "TicTac", SysML 2019, Sec. 2.3 (parameter-server
       model) and Sec. 4 (the order is enforced at the sender).
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
        plan=make_plan(worker, cg, shared_set, n_workers),
    )
