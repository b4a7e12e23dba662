"""The simulated setting of the TicTac sweeps: traced models, their links and batches.

The study and every choice made here are described in
:mod:`commsched.tictac.experiments.sweeps` (Setting): a traced model with its calibrated
link and cached views, orders and composed clusters (:class:`Model`), and the measures
of a setting (:func:`comm_ratio`, :func:`arxiv_batch`).
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np

from commsched.cost import LinkModel
from commsched.errors import CommschedError
from commsched.model.traced import load_trace
from commsched.tictac import ORDERINGS
from commsched.tictac.experiments.sweep_config import CONTROL, Params
from commsched.tictac.sim import NET_KINDS, MultiWorker, coarsen, compose, scale_compute
from commsched.views import ps_view

__all__ = ["Model", "arxiv_batch", "calibrate_link", "comm_ratio", "load_models"]


@dataclass
class Model:
    """A traced model of the sweeps, with its views, orders and clusters cached.

    Built by :func:`load_models`. The caches grow with every setting a sweep visits;
    :meth:`clear` drops them.

    Attributes
    ----------
    source : str
        The trace file.
    trace : networkx.DiGraph
        The traced graph (:mod:`commsched.model.traced`).
    name, mode : str
        The model and ``train`` or ``infer`` (from the trace's ``meta``).
    batch : int
        The traced batch.
    link : LinkModel
        Every server link of its views (:func:`calibrate_link`).
    noise_cv : float
        The per-worker noise's coefficient of variation (``worker_noise``).
    order_time_s : dict
        ``{(n_servers, factor, algo): seconds}``: the wall time of computing each order.

    References
    ----------
    .. [1] Hashemi, Jyothi & Campbell, "TicTac", SysML 2019, Sec. 6 (Setup) and Sec. 6.3.
    """

    source: str
    trace: nx.DiGraph
    name: str
    mode: str
    batch: int
    link: LinkModel
    noise_cv: float
    _views: dict[tuple[int, bool], nx.DiGraph] = field(default_factory=dict, repr=False)
    _multi: dict[tuple[int, int], MultiWorker] = field(default_factory=dict, repr=False)
    _orders: dict[tuple[int, float], dict[str, dict[str, float] | None]] = field(
        default_factory=dict, repr=False)
    order_time_s: dict[tuple[int, float, str], float] = field(default_factory=dict,
                                                               repr=False)

    def clear(self) -> None:
        """Drop the cached views, orders and composed clusters (they can be large).

        ``order_time_s`` is kept: the table reports it.
        """
        self._views.clear()
        self._multi.clear()
        self._orders.clear()

    def with_link(self, link: LinkModel) -> Model:
        """The same model on another link.

        Parameters
        ----------
        link : LinkModel
            The new link (the ``ratio`` and ``arxiv`` sweeps set their own).

        Returns
        -------
        Model
            A new model with empty caches.
        """
        return Model(self.source, self.trace, self.name, self.mode, self.batch, link,
                     self.noise_cv)

    @property
    def ops(self) -> int:
        """Ops of the traced graph (the paper's measure of network size, Sec. 6.3)."""
        return int(self.trace.number_of_nodes())

    def view(self, params: Params, n_servers: int, simulated: bool = False) -> nx.DiGraph:
        """The worker's parameter-server view (cached).

        Parameters
        ----------
        params : Params
            Its sharding, duplex and coarsening.
        n_servers : int
            Parameter servers.
        simulated : bool, optional
            The graph the simulator runs: :func:`~commsched.tictac.sim.coarsen`-ed when
            ``params.coarsen``; else (default) the full view, which TIC and TAC see.

        Returns
        -------
        networkx.DiGraph
            :func:`commsched.views.ps_view` of the trace on the model's link.
        """
        key = (n_servers, simulated and params.coarsen)
        if key not in self._views:
            if key[1]:
                self._views[key] = coarsen(self.view(params, n_servers))
            else:
                self._views[key] = ps_view(
                    self.trace, n_servers=n_servers, sharding=params.sharding,  # type: ignore[arg-type]
                    link=self.link, duplex=params.duplex,
                )
        return self._views[key]

    def multi(self, params: Params, n_workers: int, n_servers: int) -> MultiWorker:
        """The composed cluster of the simulated view (cached; the last two are kept).

        Parameters
        ----------
        params : Params
            As for :meth:`view`.
        n_workers, n_servers : int
            The cluster.

        Returns
        -------
        MultiWorker
            :func:`commsched.tictac.sim.compose` of ``view(params, n_servers, True)``.
        """
        key = (n_workers, n_servers)
        if key not in self._multi:
            if len(self._multi) >= 2:  # composed graphs of 16 workers are large
                self._multi.pop(next(iter(self._multi)))
            self._multi[key] = compose(self.view(params, n_servers, simulated=True), n_workers)
        return self._multi[key]

    def orders(
        self, params: Params, n_servers: int, factor: float
    ) -> dict[str, dict[str, float] | None]:
        """Every order of a setting (cached).

        Parameters
        ----------
        params : Params
            Its view settings and ``seed`` (of the control's order).
        n_servers : int
            Parameter servers.
        factor : float
            The batch factor: TAC sees the compute times scaled by it.

        Returns
        -------
        dict
            ``{algo: order}``: None for the baseline; one entry per member of
            :data:`commsched.tictac.ORDERINGS` (TIC and TAC), computed on the full (not
            coarsened) view, their wall times recorded in ``order_time_s``; and
            :data:`CONTROL`, one random order drawn with ``params.seed``.

        References
        ----------
        .. [1] Hashemi, Jyothi & Campbell, "TicTac", SysML 2019, Algs. 2-3 and Sec. 6.3
           (the fixed random order).
        """
        key = (n_servers, factor)
        if key not in self._orders:
            g = self.view(params, n_servers)
            if factor != 1.0:
                g = scale_compute(g, factor)
            out: dict[str, dict[str, float] | None] = {"baseline": None}
            for algo, fn in ORDERINGS.items():
                t0 = time.perf_counter()
                out[algo] = dict(fn(g))
                self.order_time_s[(n_servers, factor, algo)] = time.perf_counter() - t0
            recvs = [n for n, a in g.nodes(data=True) if a["kind"] == "recv"]
            perm = np.random.default_rng([params.seed, 7]).permutation(len(recvs))
            out[CONTROL] = {recvs[i]: float(k) for k, i in enumerate(perm.tolist())}
            self._orders[key] = out
        return self._orders[key]


def _compute_time(g: nx.DiGraph) -> float:
    return math.fsum(float(a["duration"]) for _, a in g.nodes(data=True)
                     if a["kind"] not in NET_KINDS)


def _channel_loads(g: nx.DiGraph) -> dict[str, float]:
    """Summed transfer time per channel resource of one worker's view."""
    out: dict[str, float] = {}
    for _, a in g.nodes(data=True):
        if a["kind"] in NET_KINDS:
            out[a["resource"]] = out.get(a["resource"], 0.0) + float(a["duration"])
    return out


def comm_ratio(view: nx.DiGraph, n_workers: int, factor: float = 1.0) -> float:
    """The effective communication/computation ratio of a setting.

    Parameters
    ----------
    view : networkx.DiGraph
        One worker's PS view.
    n_workers : int
        Workers sharing each server channel.
    factor : float, optional
        The batch factor (compute times scaled by it).

    Returns
    -------
    float
        The busiest server channel's load per iteration (all ``n_workers`` workers'
        transfers) over one worker's compute time at batch ``factor``.

    References
    ----------
    .. [1] Hashemi, Jyothi & Campbell, "TicTac", SysML 2019, Sec. 6.1 (the gain depends on
       the ratio of communication to computation).
    """
    busiest = max(_channel_loads(view).values(), default=0.0)
    return n_workers * busiest / (_compute_time(view) * factor)


def _unit(trace: nx.DiGraph, params: Params) -> tuple[int, float]:
    unit = ps_view(trace, n_servers=1, link=LinkModel(0.0, 1.0), duplex=params.duplex)
    recv_bytes = sum(int(a.get("bytes", 0)) for _, a in unit.nodes(data=True)
                     if a["kind"] == "recv")
    compute = _compute_time(unit)
    if recv_bytes <= 0 or compute <= 0:
        raise CommschedError("cannot calibrate the link: the trace has no parameter bytes "
                             "or no compute time")
    return recv_bytes, compute


def calibrate_link(trace: nx.DiGraph, params: Params, ratio: float | None = None,
                   n_workers: int | None = None) -> LinkModel:
    """The link of a model (:mod:`commsched.tictac.experiments.sweeps`, Setting).

    Parameters
    ----------
    trace : networkx.DiGraph
        The traced graph.
    params : Params
        ``latency_s``, ``duplex`` and the defaults below.
    ratio : float, optional
        Communication over computation; default ``params.comm_to_compute``.
    n_workers : int, optional
        Workers per server; default ``params.workers_per_server``.

    Returns
    -------
    LinkModel
        Latency ``params.latency_s`` and the bandwidth at which ``n_workers`` workers'
        recvs on one server take ``ratio`` times one worker's compute time.

    Raises
    ------
    CommschedError
        If the trace has no parameter bytes or no compute time.
    """
    recv_bytes, compute = _unit(trace, params)
    n = params.workers_per_server if n_workers is None else n_workers
    rho = params.comm_to_compute if ratio is None else ratio
    return LinkModel(params.latency_s, n * recv_bytes / (rho * compute))


def _noise_cv(meta: Mapping[str, Any], params: Params, path: str) -> float:
    if params.worker_noise is not None:
        return params.worker_noise
    walls = meta.get("step_wall_s")
    if not isinstance(walls, list) or len(walls) < 2:
        raise CommschedError(f"{path}: worker_noise 'trace' needs meta.step_wall_s with at "
                             "least two traced iterations")
    return float(statistics.stdev(walls) / statistics.fmean(walls))


def load_models(paths: Sequence[str], params: Params) -> list[Model]:
    """Load traced models and calibrate their links.

    Parameters
    ----------
    paths : sequence of str
        Files in the traced-graph format; a trace's ``meta`` names its model, mode and
        batch (defaults: the file name, ``train``, 1).
    params : Params
        The link calibration and ``worker_noise``.

    Returns
    -------
    list of Model

    Raises
    ------
    CommschedError
        If a file cannot be read, its mode is not ``train`` or ``infer``, its link cannot
        be calibrated, or ``worker_noise`` is ``trace`` and it has fewer than two traced
        step times.
    """
    out = []
    for p in paths:
        g = load_trace(p)
        meta = g.graph.get("meta") or {}
        name = str(meta.get("model") or Path(p).stem)
        mode = str(meta.get("mode") or "train")
        if mode not in ("train", "infer"):
            raise CommschedError(f"{p}: meta.mode must be train or infer, got {mode!r}")
        batch = int(meta.get("batch") or 1)
        out.append(Model(p, g, name, mode, batch, calibrate_link(g, params),
                         _noise_cv(meta, params, p)))
    return out


def arxiv_batch(view: nx.DiGraph, batch: int, n_workers: int) -> tuple[int, float]:
    """The arXiv protocol's batch: the one with the largest speedup bound.

    Compute scales with the batch; each transfer takes ``n_workers`` times its time (the
    worker's share of a server link that all workers pull from at once).

    Parameters
    ----------
    view : networkx.DiGraph
        One worker's PS view at the traced batch.
    batch : int
        The traced batch.
    n_workers : int
        Workers pulling from each server at once.

    Returns
    -------
    batch : int
        The integer batch (>= 1) whose ``S(G, Time)`` (Eq. 4) is largest.
    speedup : float
        That ``S``.

    References
    ----------
    .. [1] Hashemi, Jyothi & Campbell, "Communication Scheduling as a First-Class Citizen
       in Distributed Machine Learning Systems", arXiv:1803.03288v1, Sec. 3.1 (Eq. 4) and
       Sec. 6 (a batch with S > 0.9).
    """
    loads = [n_workers * v for v in _channel_loads(view).values()]
    compute = _compute_time(view)

    def s_of(b: int) -> float:
        c = compute * b / batch
        lower = max([c, *loads])
        return (c + sum(loads) - lower) / lower

    target = max(loads, default=0.0) / compute * batch
    candidates = {max(1, math.floor(target)), max(1, math.ceil(target))}
    best = max(sorted(candidates), key=s_of)
    return best, s_of(best)
