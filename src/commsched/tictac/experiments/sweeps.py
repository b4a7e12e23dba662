"""TicTac Sec. 6 in simulation: both published protocols, on traced models.

TicTac (Hashemi, Jyothi & Campbell; SysML 2019 = ``tictac``, arXiv:1803.03288v1 =
``tictac-arxiv2018``) measures, on a TensorFlow cluster with parameter servers (PS), how
much enforcing the TIC or TAC order of parameter transfers speeds up synchronous
iterations over TensorFlow's arbitrary order. We repeat both versions' studies with the
multi-worker simulator (:mod:`commsched.tictac.sim`) on traced models
(``<trace-dir>/<name>.json.gz``, by default the committed ``data/traces``, converted by
:func:`commsched.views.ps_view`; the config names traces, ``--trace-dir`` says where):

============  ========================================================  ===============
figure        what varies (everything else from the ``tictac:`` config)  paper
============  ========================================================  ===============
``workers``   workers 2..16 at PS:worker 1:4                             SysML Fig. 7
``servers``   servers 1..4 with 8 workers                                SysML Fig. 9
``batch``     batch factor 0.5 / 1 / 2 (compute scaled), 4 workers        SysML Fig. 10
``ratio``     busiest server's comm/compute ratio 0.25..4, 4 workers      SysML Sec. 6.1
``models``    one setting per model: E, straggler, TIC vs TAC, control   SysML Figs. 11, 13
``arxiv``     1 PS, 1 and 4 workers, 1 Gbit/s, batch with S > 0.9        arXiv Figs. 9, 10
``steptime``  Inception v2, 1000 iterations, infer and train              SysML Fig. 12,
                                                                          arXiv Figs. 7, 8
============  ========================================================  ===============

Setting (our choices where the paper's cluster is not available to us):

* Link bandwidth, per model (all figures but ``ratio`` and ``arxiv``): TicTac picks
  settings where communication and computation are comparable. We set the bandwidth so
  that, at ``workers_per_server`` workers per server (the Fig. 7 ratio, 4), a server's link
  carries ``comm_to_compute`` times one worker's compute time of parameter bytes per
  iteration: ``bandwidth = workers_per_server * B / (comm_to_compute * C)`` with ``B`` the
  bytes of all recvs and ``C`` the summed compute time of the worker graph (batch factor
  1). Every transfer also pays ``latency_s``; the same link carries the gradient sends (on
  their own uplink channel when ``duplex``). Every row reports ``comm_ratio``, the
  *effective* ratio of the setting: the busiest server channel's load per iteration (all
  workers' transfers) over one worker's compute time. With ``sharding: greedy``
  (TensorFlow's ``GreedyLoadBalancingStrategy`` by bytes) or ``size`` (largest first;
  :func:`commsched.views.ps.shard_parameters`) it stays near ``comm_to_compute *
  n_workers / (workers_per_server * n_servers)`` unless one tensor dominates (VGG's fc6);
  round robin piles most bytes on one server.
* ``ratio`` (Sec. 6.1's threshold): 4 workers, 1 server, the link set per ratio ``r`` so
  that ``comm_ratio = r`` (latency aside).
* Batch factor (Fig. 10): every compute duration is multiplied by the factor (compute time
  grows about linearly with the batch); transfers are unchanged.
* Orders: ``baseline`` = an independent random recv order per worker and iteration
  (TensorFlow's arbitrary order, SysML Secs. 1 and 2.2); ``tic`` / ``tac`` = the order of
  :func:`commsched.tictac.tic` / :func:`commsched.tictac.tac` computed on the worker graph
  (with the scaled compute times for TAC), the same for every worker; in ``models`` also
  ``fixed_random``, the control of Sec. 6.3: one random order drawn once (seeded) and
  shared by all workers and iterations. ``order_time_s`` is the wall time of computing
  the order (Sec. 6: "about 10 seconds").
* Noise (:mod:`commsched.tictac.sim`): per-op jitter ``U[1 - jitter, 1 + jitter]``
  and a per-worker per-iteration compute factor whose coefficient of variation is
  ``worker_noise``. The default configuration takes that number from the live runs
  (:mod:`commsched.tictac.experiments.live`): the median over the live workloads of
  ``work_cv``, the spread of one worker's work time across steps and workers of the
  baseline configuration. It is a recorded number in ``config/config.yaml``, not read
  from ``results/``, so that the simulation does not depend on the live run (which needs
  root). ``worker_noise: trace`` takes it per model from the trace instead, as the
  coefficient of variation of the traced step wall times (``meta.step_wall_s``, the
  iteration-to-iteration spread of one TensorFlow process running the model; 1.5-24% for
  the committed traces).
* Simulated graph: with ``coarsen`` the simulator runs the coarsened view
  (:func:`commsched.tictac.sim.coarsen`; its effect on the gains is recorded by
  ``benchmarks/bench_multiworker.py``); TIC and TAC always see the full view.

Statistics. Every setting and order runs ``iterations`` synchronous iterations. SysML
protocol (Sec. 6, Setup): the first ``warmup`` (2) are discarded (they matter on a real
cluster; iterations of the simulator are independent, so this only fixes which draws
count) and the next ``recorded`` (10) give ``iter_mean_s`` (throughput: their mean),
``straggler_max`` and ``efficiency_max`` (their maximum). Beside them, the long run (all
iterations after the warm-up) gives ``*_long`` columns, which the CDFs, the arXiv protocol
and the shape claims use (10 iterations are too few for them). Per iteration:

* straggler effect = the longest wait of any worker at the barrier / the iteration time
  (Sec. 6.3);
* scheduling efficiency E (Eq. 3) from the iteration's own timeline of each worker
  (:func:`commsched.tictac.sim.timeline_efficiency`); the iteration's E is the
  smallest over its workers (the worst-ordered worker sets the step);
* theoretical best / worst (arXiv Sec. 6: E = 1 / E = 0 on every worker): the slowest
  worker's Eq. (2) / Eq. (1) bound with that iteration's op times
  (:class:`commsched.tictac.sim.RunResult`); the ``arxiv`` table carries them as
  orders ``best`` and ``worst``.

Gains and ratios against the baseline of the same setting: ``gain_pct`` = baseline
``iter_mean_s`` / the order's - 1 (in %), ``gain_long_pct`` the same with long-run means;
``straggler_reduction`` = baseline ``straggler_max`` / the order's (SysML statistic),
``straggler_reduction_long`` = the ratio of long-run means (the arXiv row uses it).

arXiv protocol (``arxiv``): 1 PS, ``n_workers`` 1 and 4, a ``link_Bps`` link (1 Gbit/s),
and per model the integer batch whose speedup bound S(G, Time) (Eq. 4) is largest, which
must exceed ``min_speedup`` (0.9): S is taken on one worker's graph whose transfer times
are its share of the server link when all workers pull at once (``n_workers`` x the
transfer time), so ``S = (U - L) / L`` with ``U`` compute plus channels and ``L`` the
largest of them.

Normalized step time (Fig. 12): the shortest iteration time of the mode's experiment (all
orders) divided by the iteration's time, so 1 is the fastest step and values fall towards
0 as steps get slower (the paper does not define it; this one is in [0, 1] with TAC near
1, the scale of its reported 95th percentiles).

Run as ``python -m commsched.tictac.experiments.sweeps FIGURE --config config/config.yaml
--table results/tables/tictac_FIGURE.csv`` and, for the headline numbers,
``python -m commsched.tictac.experiments.sweeps metrics --tables ... --metrics M.csv``.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np
import pandas as pd

from commsched.cost import LinkModel
from commsched.errors import CommschedError
from commsched.io.structured import read_yaml
from commsched.model.traced import load_trace
from commsched.plotting import check_figure_inputs
from commsched.results import read_table, write_metrics, write_table
from commsched.tictac import ORDERINGS
from commsched.tictac.sim import (
    NET_KINDS,
    Interleave,
    MultiWorker,
    RunResult,
    coarsen,
    compose,
    run,
    scale_compute,
)
from commsched.views import ps_view

__all__ = [
    "ALGOS",
    "CONTROL",
    "FIGURES",
    "FIGURE_KINDS",
    "FigureConfig",
    "Model",
    "Params",
    "arxiv_batch",
    "calibrate_link",
    "comm_ratio",
    "headline_metrics",
    "load_models",
    "main",
    "run_figure",
    "run_steptime",
    "trace_file",
]

#: Orders compared everywhere: the random baseline, TIC (Alg. 2) and TAC (Alg. 3).
ALGOS = ("baseline", *ORDERINGS)
#: The Sec. 6.3 control (``models`` only): one random order shared by all workers.
CONTROL = "fixed_random"
#: Experiments (one result table each).
FIGURES = ("workers", "servers", "batch", "ratio", "models", "arxiv", "steptime")
#: The sweeps :func:`run_figure` runs (``steptime`` is :func:`run_steptime`).
SWEEPS = FIGURES[:-1]


def _need(m: Mapping[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    if key not in m:
        raise CommschedError(f"{where}: missing key {key!r}")
    v = m[key]
    if isinstance(v, bool) and kind is not bool:
        raise CommschedError(f"{where}.{key}: expected a number, got {v!r}")
    if not isinstance(v, kind):
        raise CommschedError(f"{where}.{key}: wrong type {type(v).__name__} ({v!r})")
    return v


def _pos_int(m: Mapping[str, Any], key: str, where: str) -> int:
    v = _need(m, key, int, where)
    if v < 1:
        raise CommschedError(f"{where}.{key}: must be >= 1, got {v}")
    return int(v)


def _int_list(m: Mapping[str, Any], key: str, where: str) -> tuple[int, ...]:
    v = _need(m, key, list, where)
    if not v or not all(isinstance(x, int) and not isinstance(x, bool) and x >= 1 for x in v):
        raise CommschedError(f"{where}.{key}: must be a non-empty list of integers >= 1")
    return tuple(v)


def _pos_list(m: Mapping[str, Any], key: str, where: str) -> tuple[float, ...]:
    v = _need(m, key, list, where)
    if not v or not all(
        isinstance(f, (int, float)) and not isinstance(f, bool) and f > 0 for f in v
    ):
        raise CommschedError(f"{where}.{key}: a non-empty list of numbers > 0")
    return tuple(float(f) for f in v)


@dataclass(frozen=True)
class Params:
    """The ``tictac:`` section of the pipeline config (schema:
    ``src/commsched/schemas/config.schema.yaml``), checked with one-line errors."""

    traces: tuple[str, ...]
    seed: int
    jitter: float
    worker_noise: float | None  # None: per model from the trace
    comm_to_compute: float
    latency_s: float
    sharding: str
    duplex: bool
    coarsen: bool
    baseline_interleave: Interleave
    warmup: int
    recorded: int
    iterations: int
    validate_every: int
    workers: tuple[int, ...]
    workers_per_server: int
    servers_workers: int
    servers: tuple[int, ...]
    batch_factors: tuple[float, ...]
    batch_workers: int
    batch_servers: int
    ratios: tuple[float, ...]
    ratio_workers: int
    ratio_servers: int
    models_workers: int
    models_servers: int
    arxiv_workers: tuple[int, ...]
    arxiv_servers: int
    arxiv_link_Bps: float
    arxiv_min_speedup: float
    steptime_traces: tuple[str, ...]
    steptime_workers: int
    steptime_servers: int
    steptime_iterations: int
    raw: dict[str, Any] = field(compare=False, repr=False, default_factory=dict)

    @classmethod
    def from_mapping(cls, m: Mapping[str, Any], where: str = "tictac") -> Params:
        if not isinstance(m, Mapping):
            raise CommschedError(f"{where}: expected a mapping")
        traces = _need(m, "traces", list, where)
        if not traces or not all(isinstance(t, str) for t in traces):
            raise CommschedError(f"{where}.traces: must be a non-empty list of trace names")
        jitter = float(_need(m, "jitter", (int, float), where))
        if not 0 <= jitter < 1:
            raise CommschedError(f"{where}.jitter: must be in [0, 1), got {jitter}")
        noise = _need(m, "worker_noise", (int, float, str), where)
        if isinstance(noise, str) and noise != "trace":
            raise CommschedError(f"{where}.worker_noise: a number or 'trace', got {noise!r}")
        if not isinstance(noise, str) and not 0 <= noise < 10:
            raise CommschedError(f"{where}.worker_noise: must be in [0, 10), got {noise}")
        rho = float(_need(m, "comm_to_compute", (int, float), where))
        lat = float(_need(m, "latency_s", (int, float), where))
        if not (rho > 0 and math.isfinite(rho)) or not (lat >= 0 and math.isfinite(lat)):
            raise CommschedError(f"{where}: comm_to_compute must be > 0 and latency_s >= 0")
        sharding = _need(m, "sharding", str, where)
        if sharding not in ("round_robin", "greedy", "size"):
            raise CommschedError(f"{where}.sharding: round_robin, greedy or size, "
                                 f"got {sharding!r}")
        interleave = _need(m, "baseline_interleave", str, where)
        if interleave not in ("rank", "random"):
            raise CommschedError(f"{where}.baseline_interleave: rank or random, got {interleave!r}")
        validate_every = _need(m, "validate_every", int, where)
        if validate_every < 0:
            raise CommschedError(f"{where}.validate_every: must be >= 0")
        proto = _need(m, "protocol", dict, where)
        warmup = int(_need(proto, "warmup", int, f"{where}.protocol"))
        recorded = _pos_int(proto, "recorded", f"{where}.protocol")
        iterations = _pos_int(m, "iterations", where)
        if warmup < 0 or iterations < warmup + recorded:
            raise CommschedError(f"{where}.iterations: must be >= protocol.warmup + "
                                 f"protocol.recorded ({warmup + recorded}), got {iterations}")
        w = _need(m, "workers", dict, where)
        s = _need(m, "servers", dict, where)
        b = _need(m, "batch", dict, where)
        r = _need(m, "ratio", dict, where)
        md = _need(m, "models", dict, where)
        ax = _need(m, "arxiv", dict, where)
        st = _need(m, "steptime", dict, where)
        link = float(_need(ax, "link_Bps", (int, float), f"{where}.arxiv"))
        min_s = float(_need(ax, "min_speedup", (int, float), f"{where}.arxiv"))
        if not (link > 0 and math.isfinite(link)) or not min_s >= 0:
            raise CommschedError(f"{where}.arxiv: link_Bps must be > 0, min_speedup >= 0")
        st_traces = _need(st, "traces", list, f"{where}.steptime")
        if not st_traces or not all(isinstance(t, str) for t in st_traces):
            raise CommschedError(f"{where}.steptime.traces: a non-empty list of trace names")
        return cls(
            traces=tuple(traces),
            seed=int(_need(m, "seed", int, where)),
            jitter=jitter,
            worker_noise=None if isinstance(noise, str) else float(noise),
            comm_to_compute=rho,
            latency_s=lat,
            sharding=sharding,
            duplex=bool(_need(m, "duplex", bool, where)),
            coarsen=bool(_need(m, "coarsen", bool, where)),
            baseline_interleave=interleave,
            warmup=warmup,
            recorded=recorded,
            iterations=iterations,
            validate_every=int(validate_every),
            workers=_int_list(w, "n_workers", f"{where}.workers"),
            workers_per_server=_pos_int(w, "workers_per_server", f"{where}.workers"),
            servers_workers=_pos_int(s, "n_workers", f"{where}.servers"),
            servers=_int_list(s, "n_servers", f"{where}.servers"),
            batch_factors=_pos_list(b, "factors", f"{where}.batch"),
            batch_workers=_pos_int(b, "n_workers", f"{where}.batch"),
            batch_servers=_pos_int(b, "n_servers", f"{where}.batch"),
            ratios=_pos_list(r, "ratios", f"{where}.ratio"),
            ratio_workers=_pos_int(r, "n_workers", f"{where}.ratio"),
            ratio_servers=_pos_int(r, "n_servers", f"{where}.ratio"),
            models_workers=_pos_int(md, "n_workers", f"{where}.models"),
            models_servers=_pos_int(md, "n_servers", f"{where}.models"),
            arxiv_workers=_int_list(ax, "n_workers", f"{where}.arxiv"),
            arxiv_servers=_pos_int(ax, "n_servers", f"{where}.arxiv"),
            arxiv_link_Bps=link,
            arxiv_min_speedup=min_s,
            steptime_traces=tuple(st_traces),
            steptime_workers=_pos_int(st, "n_workers", f"{where}.steptime"),
            steptime_servers=_pos_int(st, "n_servers", f"{where}.steptime"),
            steptime_iterations=_pos_int(st, "iterations", f"{where}.steptime"),
            raw=dict(m),
        )

    @classmethod
    def from_file(cls, path: str | Path) -> Params:
        """Read the ``tictac`` section of a YAML (or JSON) config file."""
        data = read_yaml(path)
        if not isinstance(data, dict) or "tictac" not in data:
            raise CommschedError(f"{path}: no 'tictac' section")
        return cls.from_mapping(data["tictac"], f"{path}: tictac")


@dataclass
class Model:
    """A traced model: its trace, link, noise and cached views, orders and clusters."""

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
        """Drop the cached views, orders and composed clusters (they can be large)."""
        self._views.clear()
        self._multi.clear()
        self._orders.clear()

    def with_link(self, link: LinkModel) -> Model:
        """The same model on another link (nothing cached)."""
        return Model(self.source, self.trace, self.name, self.mode, self.batch, link,
                     self.noise_cv)

    @property
    def ops(self) -> int:
        """Ops of the traced graph (the paper's measure of network size, Sec. 6.3)."""
        return int(self.trace.number_of_nodes())

    def view(self, params: Params, n_servers: int, simulated: bool = False) -> nx.DiGraph:
        """The worker's PS view with ``n_servers`` servers (cached); ``simulated``: the
        graph the simulator runs (:func:`~commsched.tictac.sim.coarsen`-ed when
        ``params.coarsen``)."""
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
        """The composed cluster of the simulated view (cached; the last two are kept)."""
        key = (n_workers, n_servers)
        if key not in self._multi:
            if len(self._multi) >= 2:  # composed graphs of 16 workers are large
                self._multi.pop(next(iter(self._multi)))
            self._multi[key] = compose(self.view(params, n_servers, simulated=True), n_workers)
        return self._multi[key]

    def orders(
        self, params: Params, n_servers: int, factor: float
    ) -> dict[str, dict[str, float] | None]:
        """``{algo: order}``: None for the baseline, TIC and TAC computed on the full
        (not coarsened) view with compute times scaled by the batch ``factor`` (their wall
        times go to ``order_time_s``), and the control's seeded random order."""
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
    """Effective communication/computation ratio of the busiest server channel: its load
    per iteration (``n_workers`` workers' transfers) over one worker's compute time at
    batch ``factor``."""
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
    """The link of a model (module docstring): ``n_workers`` workers' recvs on one server
    take ``ratio`` times one worker's compute (defaults: ``workers_per_server``,
    ``comm_to_compute``)."""
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
    """Load traced models (op graph files in the traced-graph format)."""
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
    """The arXiv protocol's batch: the integer batch (>= 1) whose S(G, Time) (Eq. 4) is
    largest, and that S. The traced graph has batch ``batch``; compute scales with the
    batch, and each transfer takes ``n_workers`` times its time (the worker's share of a
    server link that all workers pull from at once)."""
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


def _stats(res: RunResult, params: Params) -> dict[str, float]:
    rec = slice(params.warmup, params.warmup + params.recorded)
    long = slice(params.warmup, None)
    t = res.iteration_time
    st = res.straggler
    e = res.efficiency.min(axis=1)
    return {
        "iter_mean_s": float(t[rec].mean()), "straggler_max": float(st[rec].max()),
        "efficiency_max": float(e[rec].max()),
        "iter_mean_long_s": float(t[long].mean()), "iter_p95_long_s": float(
            np.percentile(t[long], 95)),
        "straggler_mean_long": float(st[long].mean()),
        "straggler_max_long": float(st[long].max()),
        "efficiency_mean_long": float(e[long].mean()),
        "efficiency_worker_mean_long": float(res.efficiency[long].mean()),
        "best_mean_s": float(res.best_time[long].mean()),
        "worst_mean_s": float(res.worst_time[long].mean()),
    }


def _setting_rows(
    model: Model, params: Params, n_workers: int, n_servers: int, factor: float,
    algos: Sequence[str], extra: Mapping[str, Any] | None = None,
) -> list[dict[str, Any]]:
    mw = model.multi(params, n_workers, n_servers)
    full = model.view(params, n_servers)
    ratio = comm_ratio(full, n_workers, factor)
    orders = model.orders(params, n_servers, factor)
    rows = []
    for algo in algos:
        res = run(mw, orders[algo], params.iterations, jitter=params.jitter, seed=params.seed,
                  validate_every=params.validate_every, compute_scale=factor,
                  interleave=params.baseline_interleave, worker_noise=model.noise_cv)
        stats = _stats(res, params)
        rows.append({
            "model": model.name, "mode": model.mode, "batch": model.batch, "ops": model.ops,
            "n_workers": n_workers, "n_servers": n_servers, "batch_factor": factor,
            "algo": algo, "iterations": params.iterations, "warmup": params.warmup,
            "recorded": params.recorded, "jitter": params.jitter,
            "worker_noise_cv": model.noise_cv, "sharding": params.sharding,
            "bandwidth_Bps": model.link.bandwidth_Bps, "latency_s": model.link.latency_s,
            "comm_to_compute": params.comm_to_compute,
            "workers_per_server_ref": params.workers_per_server, "comm_ratio": ratio,
            **stats,
            "throughput_samples_s": n_workers * model.batch * factor / stats["iter_mean_s"],
            "order_time_s": model.order_time_s.get((n_servers, factor, algo), math.nan),
            "validated_schedules": res.validated,
            **(extra or {}),
        })
    return rows


def _add_gains(df: pd.DataFrame) -> pd.DataFrame:
    keys = ["model", "mode", "n_workers", "n_servers", "batch_factor", "comm_ratio"]
    keys = [k for k in keys if k in df.columns]
    base = df[df.algo == "baseline"].set_index(keys)
    idx = df.set_index(keys).index
    df = df.copy()
    with np.errstate(divide="ignore", invalid="ignore"):
        for col, src in (("gain_pct", "iter_mean_s"), ("gain_long_pct", "iter_mean_long_s")):
            if src in df:
                df[col] = (np.asarray(idx.map(base[src])) / df[src].to_numpy() - 1.0) * 100.0
        for col, src in (("straggler_reduction", "straggler_max"),
                         ("straggler_reduction_long", "straggler_mean_long")):
            if src in df:
                df[col] = np.asarray(idx.map(base[src])) / df[src].to_numpy()
    return df


def _theoretical_rows(df: pd.DataFrame) -> pd.DataFrame:
    """The arXiv table's ``best`` / ``worst`` orders: the baseline rows with the long-run
    iteration time replaced by the theoretical best / worst (E = 1 / E = 0)."""
    base = df[df.algo == "baseline"]
    out = []
    for algo, col in (("best", "best_mean_s"), ("worst", "worst_mean_s")):
        r = base.copy()
        r["algo"] = algo
        r["iter_mean_long_s"] = r[col]
        r["iter_mean_s"] = r[col]
        for c in ("straggler_max", "straggler_mean_long", "straggler_max_long",
                  "efficiency_max", "efficiency_mean_long", "efficiency_worker_mean_long",
                  "iter_p95_long_s", "order_time_s", "throughput_samples_s"):
            r[c] = math.nan
        r["efficiency_mean_long"] = 1.0 if algo == "best" else 0.0
        out.append(r)
    return pd.concat([df, *out], ignore_index=True)


def _settings(figure: str, params: Params) -> list[tuple[int, int, float]]:
    if figure == "workers":
        return [(n, max(1, math.ceil(n / params.workers_per_server)), 1.0)
                for n in params.workers]
    if figure == "servers":
        return [(params.servers_workers, p, 1.0) for p in params.servers]
    if figure == "batch":
        return [(params.batch_workers, params.batch_servers, f) for f in params.batch_factors]
    if figure == "models":
        return [(params.models_workers, params.models_servers, 1.0)]
    raise CommschedError(f"unknown figure {figure!r} (one of {', '.join(SWEEPS)})")


def _model_rows(figure: str, model: Model, params: Params,
                say: Callable[[str], None]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []

    def setting(m: Model, n: int, p: int, f: float, algos: Sequence[str],
                extra: Mapping[str, Any] | None = None) -> None:
        t0 = time.perf_counter()
        rows.extend(_setting_rows(m, params, n, p, f, algos, extra))
        say(f"{figure}: {m.name}/{m.mode} N={n} P={p} x{f:g}: "
            f"{time.perf_counter() - t0:.1f} s")

    if figure == "ratio":
        for r in params.ratios:
            m = model.with_link(calibrate_link(model.trace, params, ratio=r,
                                               n_workers=params.ratio_workers))
            setting(m, params.ratio_workers, params.ratio_servers, 1.0, ALGOS,
                    {"target_ratio": r})
    elif figure == "arxiv":
        m = model.with_link(LinkModel(params.latency_s, params.arxiv_link_Bps))
        n_max = max(params.arxiv_workers)
        batch, s = arxiv_batch(m.view(params, params.arxiv_servers), model.batch, n_max)
        if s <= params.arxiv_min_speedup:
            say(f"arxiv: {model.name}/{model.mode}: S = {s:.3f} <= {params.arxiv_min_speedup}"
                " at the best batch; kept and reported")
        for n in params.arxiv_workers:
            setting(m, n, params.arxiv_servers, batch / model.batch, ALGOS,
                    {"arxiv_batch": batch, "speedup_S": s})
    else:
        algos = (*ALGOS, CONTROL) if figure == "models" else ALGOS
        for n, p, f in _settings(figure, params):
            setting(model, n, p, f, algos)
    return rows


def run_figure(
    figure: str, models: Sequence[Model], params: Params,
    progress: Callable[[str], None] | None = None,
) -> pd.DataFrame:
    """The summary table of one of :data:`SWEEPS` (module docstring)."""
    if figure not in SWEEPS:
        raise CommschedError(f"unknown figure {figure!r} (one of {', '.join(SWEEPS)})")
    rows: list[dict[str, Any]] = []
    for model in models:
        rows.extend(_model_rows(figure, model, params, progress or (lambda _m: None)))
        model.clear()
    df = _add_gains(pd.DataFrame(rows))
    return _add_gains(_theoretical_rows(df)) if figure == "arxiv" else df


def run_steptime(models: Sequence[Model], params: Params) -> pd.DataFrame:
    """Figs. 12 (SysML) / 7-8 (arXiv): per iteration of each model (its mode), the E of the
    iteration (smallest over workers), its time and straggler effect, for the baseline, TIC
    and TAC; normalized step time per mode."""
    n, p, iters = params.steptime_workers, params.steptime_servers, params.steptime_iterations
    frames = []
    for model in models:
        mw = model.multi(params, n, p)
        rows = []
        for algo, order in model.orders(params, p, 1.0).items():
            if algo == CONTROL:
                continue
            res = run(mw, order, iters, jitter=params.jitter, seed=params.seed,
                      validate_every=params.validate_every,
                      interleave=params.baseline_interleave, worker_noise=model.noise_cv)
            for t in range(iters):
                rows.append({
                    "model": model.name, "mode": model.mode, "batch": model.batch,
                    "n_workers": n, "n_servers": p, "algo": algo, "iteration": t,
                    "jitter": params.jitter, "worker_noise_cv": model.noise_cv,
                    "bandwidth_Bps": model.link.bandwidth_Bps,
                    "comm_to_compute": params.comm_to_compute,
                    "workers_per_server_ref": params.workers_per_server,
                    "comm_ratio": comm_ratio(model.view(params, p), n),
                    "iteration_time_s": float(res.iteration_time[t]),
                    "straggler": float(res.straggler[t]),
                    "efficiency": float(res.efficiency[t].min()),
                    "efficiency_mean": float(res.efficiency[t].mean()),
                })
        d = pd.DataFrame(rows)
        d["normalized_step_time"] = d["iteration_time_s"].min() / d["iteration_time_s"]
        frames.append(d)
        model.clear()
    return pd.concat(frames, ignore_index=True)


def _r2(x: np.ndarray, y: np.ndarray) -> float:
    """Coefficient of determination of the least-squares line of y on x."""
    if len(x) < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return math.nan
    slope, icpt = np.polyfit(x, y, 1)
    resid = y - (slope * x + icpt)
    return float(1.0 - (resid**2).sum() / ((y - y.mean()) ** 2).sum())


def _spearman(x: Sequence[float], y: Sequence[float]) -> float:
    """Spearman rank correlation (average ranks for ties); nan for fewer than 3 points."""
    if len(x) < 3:
        return math.nan
    rx = pd.Series(list(x)).rank().to_numpy()
    ry = pd.Series(list(y)).rank().to_numpy()
    if np.ptp(rx) == 0 or np.ptp(ry) == 0:
        return math.nan
    return float(np.corrcoef(rx, ry)[0, 1])


def _sysml_metrics(tables: Mapping[str, pd.DataFrame], out: dict[str, float]) -> None:
    sweeps = [tables[f] for f in ("workers", "servers", "batch", "models") if f in tables]
    if sweeps:
        gains = pd.concat(sweeps, ignore_index=True)
        for algo, suffix in (("tic", ""), ("tac", "_tac")):
            d = gains[gains.algo == algo]
            for mode, dm in d.groupby("mode"):
                out[f"tictac.sim.{mode}.max_gain_pct{suffix}"] = float(dm.gain_pct.max())
        scaling = [tables[f] for f in ("workers", "servers", "batch") if f in tables]
        if scaling:
            s = pd.concat(scaling, ignore_index=True)
            out["tictac.sim.min_gain_pct"] = float(s[s.algo == "tic"].gain_pct.min())
    if "models" in tables:
        md = tables["models"]
        tic_rows, base = md[md.algo == "tic"], md[md.algo == "baseline"]
        out["tictac.sim.models.max_straggler_reduction"] = float(
            tic_rows.straggler_reduction.max())
        out["tictac.sim.models.baseline_straggler_max"] = float(base.straggler_max.max())
        out["tictac.sim.models.tic_straggler_max"] = float(tic_rows.straggler_max.max())
        out["tictac.sim.models.tic_efficiency_min"] = float(tic_rows.efficiency_max.min())
        ctrl = md[md.algo == CONTROL]
        if len(ctrl):
            out["tictac.sim.models.fixed_random_straggler_reduction_min"] = float(
                ctrl.straggler_reduction_long.min())
        m = md.set_index(["model", "mode", "algo"])
        ratios = [m.loc[(model, mode, "tac"), "iter_mean_s"]
                  / m.loc[(model, mode, "tic"), "iter_mean_s"]
                  for (model, mode), _ in md.groupby(["model", "mode"])]
        out["tictac.sim.tic_over_tac_throughput_min"] = float(min(ratios))
        out["tictac.sim.order_time_max_s"] = float(md.order_time_s.max())
        for algo, e in md.groupby("algo").efficiency_mean_long.mean().items():
            out[f"tictac.sim.models.mean_efficiency_{algo}"] = float(e)
    if "servers" in tables:
        sv = tables["servers"]
        t = sv[sv.algo == "tic"]
        by_mode = t.groupby("mode").gain_pct.mean()
        if {"infer", "train"} <= set(by_mode.index):
            out["tictac.sim.servers.infer_minus_train_gain_pp"] = float(
                by_mode["infer"] - by_mode["train"])
        corr = []
        for _, d in t.groupby("mode"):
            per = d.groupby("model").agg(ops=("ops", "first"), gain=("gain_pct", "mean"))
            corr.append(_spearman(per.ops.tolist(), per.gain.tolist()))
        corr = [c for c in corr if not math.isnan(c)]
        if corr:
            out["tictac.sim.servers.size_gain_rank_corr"] = float(np.mean(corr))
    if "batch" in tables:
        b = tables["batch"]
        agree = []
        for _, d in b[b.algo == "tic"].groupby(["model", "mode"]):
            d = d.sort_values("batch_factor")
            g, r = d.gain_pct.to_numpy(), d.comm_ratio.to_numpy()
            agree += [bool((g[k + 1] > g[k]) == (r[k] > 1.0)) for k in range(len(d) - 1)]
        if agree:
            out["tictac.sim.batch.direction_agreement"] = float(np.mean(agree))
    if "ratio" in tables:
        r = tables["ratio"]
        peaks, where = [], []
        for _, d in r[r.algo == "tic"].groupby(["model", "mode"]):
            d = d.sort_values("target_ratio")
            k = int(np.argmax(d.gain_long_pct.to_numpy()))
            peaks.append(0 < k < len(d) - 1)
            where.append(float(d.comm_ratio.iloc[k]))
        out["tictac.sim.ratio.frac_interior_peak"] = float(np.mean(peaks))
        out["tictac.sim.ratio.mean_peak_ratio"] = float(np.mean(where))


def _arxiv_metrics(a: pd.DataFrame, out: dict[str, float]) -> None:
    out["tictac.arxiv.speedup_min"] = float(a.speedup_S.min())
    n_max, n_min = a.n_workers.max(), a.n_workers.min()
    top = a[a.n_workers == n_max]
    tao = top[top.algo == "tac"]
    for mode, d in tao.groupby("mode"):
        out[f"tictac.arxiv.{mode}.max_gain_pct"] = float(d.gain_long_pct.max())
    out["tictac.arxiv.max_straggler_reduction"] = float(tao.straggler_reduction_long.max())
    out["tictac.arxiv.baseline_straggler_max"] = float(
        top[top.algo == "baseline"].straggler_max_long.max())
    best = top[top.algo == "best"].set_index(["model", "mode"]).iter_mean_long_s
    t = tao.set_index(["model", "mode"]).iter_mean_long_s
    out["tictac.arxiv.tao_over_best_median"] = float((best / t).median())
    if n_max != n_min:
        lo = a[(a.n_workers == n_min) & (a.algo == "tac")].set_index(["model", "mode"])
        hi = tao.set_index(["model", "mode"])
        out["tictac.arxiv.gain_growth_pp"] = float(
            (hi.gain_long_pct - lo.gain_long_pct).mean())


def headline_metrics(tables: Mapping[str, pd.DataFrame]) -> dict[str, float]:
    """The numbers the claims compare (``papers/claims/tictac.yaml``), from the tables.

    SysML (``tictac.sim.*``; TIC for Figs. 7, 9, 10, 11 as the paper's envG, TAC for
    Figs. 12, 13): ``<mode>.max_gain_pct`` the largest TIC gain of the workers, servers,
    batch and models sweeps (``_tac``: TAC's); ``min_gain_pct`` the smallest TIC gain of
    the workers, servers and batch sweeps; ``models.*`` per-model sweep: the largest
    straggler reduction, the largest baseline and TIC straggler levels (SysML statistic),
    the smallest TIC efficiency (SysML statistic), the smallest straggler reduction of the
    fixed random order (long run), long-run mean E per order; ``tic_over_tac_throughput_min``
    (Fig. 13); ``order_time_max_s``; ``servers.infer_minus_train_gain_pp`` and
    ``servers.size_gain_rank_corr`` (Fig. 9); ``batch.direction_agreement`` (Fig. 10);
    ``ratio.frac_interior_peak`` and ``ratio.mean_peak_ratio`` (Sec. 6.1 threshold);
    ``steptime.<mode>.*``: R^2 of normalized step time on E (baseline and TAC pooled;
    ``r2_baseline`` alone) and the 5th / 95th percentiles of the normalized step time per
    order. arXiv (``tictac.arxiv.*``, the ``arxiv`` table, long-run statistics at the most
    workers): ``speedup_min``, ``<mode>.max_gain_pct`` (TAO), ``max_straggler_reduction``,
    ``baseline_straggler_max``, ``tao_over_best_median`` and ``gain_growth_pp`` (most
    minus fewest workers). See the module docstring for every definition.
    """
    out: dict[str, float] = {}
    _sysml_metrics(tables, out)
    if "arxiv" in tables:
        _arxiv_metrics(tables["arxiv"], out)
    if "steptime" in tables:
        for mode, s in tables["steptime"].groupby("mode"):
            pre = f"tictac.sim.steptime.{mode}"
            pooled = s[s.algo.isin(["baseline", "tac"])]
            b = s[s.algo == "baseline"]
            out[f"{pre}.r2"] = _r2(pooled.efficiency.to_numpy(),
                                   pooled.normalized_step_time.to_numpy())
            out[f"{pre}.r2_baseline"] = _r2(b.efficiency.to_numpy(),
                                            b.normalized_step_time.to_numpy())
            for algo, d in s.groupby("algo"):
                out[f"{pre}.p95_{algo}"] = float(np.percentile(d.normalized_step_time, 95))
                out[f"{pre}.p5_{algo}"] = float(np.percentile(d.normalized_step_time, 5))
    return out


#: Figures the notebooks draw from the tables (``kind`` of :class:`FigureConfig`).
FIGURE_KINDS = ("workers", "servers", "batch", "ratio", "efficiency", "tic_vs_tac", "arxiv",
                "steptime")


@dataclass(frozen=True)
class FigureConfig:
    """Parameters of the ``notebooks/tictac_*.ipynb`` notebooks, checked before plotting."""

    table: str
    figure: str  # the PDF; the PNG is written beside it
    kind: str = "steptime"
    metrics: str = ""  # the metrics table (Fig. 12 prints R^2 and percentiles from it)

    def __post_init__(self) -> None:
        check_figure_inputs("tictac", {"table": self.table, "metrics": self.metrics},
                            self.figure, "run its snakemake rule first")
        if self.kind not in FIGURE_KINDS:
            raise CommschedError(f"tictac figure: kind {self.kind!r} is not one of "
                                 f"{', '.join(FIGURE_KINDS)}")


def _params(args: argparse.Namespace) -> Params:
    if args.config_json is not None:
        try:
            data = json.loads(args.config_json)
        except json.JSONDecodeError as e:
            raise CommschedError(f"--config-json: invalid JSON: {e.msg}") from None
        return Params.from_mapping(data)
    return Params.from_file(args.config)


def trace_file(trace_dir: str, name: str) -> str:
    """The file of trace ``name`` (``<model>-<mode>-b<batch>``) in ``trace_dir``."""
    return str(Path(trace_dir) / f"{name}.json.gz")


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m commsched.tictac.experiments.sweeps",
                                description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("figure", choices=[*FIGURES, "metrics"])
    src = p.add_mutually_exclusive_group()
    src.add_argument("--config", default="config/config.yaml",
                     help="config file with a 'tictac' section (default %(default)s)")
    src.add_argument("--config-json", help="the 'tictac' section as a JSON object")
    p.add_argument("--trace-dir", default="data/traces",
                   help="where the config's trace names live (default %(default)s)")
    p.add_argument("--traces", nargs="+", help="trace files overriding the config's traces")
    p.add_argument("--table", help="result table to write (CSV)")
    p.add_argument("--tables", nargs="+", metavar="FIGURE=CSV",
                   help="metrics: the figure tables to summarize")
    p.add_argument("--metrics", help="metrics: the metrics table to write (CSV)")
    args = p.parse_args(argv)

    def say(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    try:
        if args.figure == "metrics":
            if not args.tables or not args.metrics:
                raise CommschedError("metrics needs --tables FIGURE=CSV ... and --metrics")
            tables = {}
            for item in args.tables:
                fig, sep, path = item.partition("=")
                if not sep or fig not in FIGURES:
                    raise CommschedError(f"--tables: expected FIGURE=CSV, got {item!r}")
                tables[fig] = read_table(path)
            write_metrics(headline_metrics(tables), args.metrics, {"tables": args.tables})
            return 0
        if not args.table:
            raise CommschedError(f"{args.figure} needs --table")
        params = _params(args)
        config = {**params.raw, "figure": args.figure}
        if args.figure == "steptime":
            paths = args.traces or [trace_file(args.trace_dir, t)
                                    for t in params.steptime_traces]
            df = run_steptime(load_models(paths, params), params)
        else:
            paths = args.traces or [trace_file(args.trace_dir, t) for t in params.traces]
            models = load_models(paths, params)
            df = run_figure(args.figure, models, params, progress=say)
        write_table(df, args.table, config)
    except CommschedError as e:
        print(f"tictac {args.figure}: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
