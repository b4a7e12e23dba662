"""TicTac Sec. 6 in simulation: throughput gain, straggler effect and ordering efficiency.

TicTac (Hashemi, Jyothi & Campbell, SysML 2019) measures, on a TensorFlow cluster with
parameter servers, how much enforcing the TIC or TAC order of parameter transfers speeds
up synchronous iterations over TensorFlow's arbitrary order. We repeat the study with the
multi-worker simulator (:mod:`commsched.sim.multiworker`) on traced models
(``<trace-dir>/<name>.json.gz``, by default the committed ``data/traces``, converted by
:func:`commsched.views.ps_view`; the config names traces, ``--trace-dir`` says where):

=========  ===========================================================  ==============
figure     what varies (everything else from the ``tictac:`` config)     table
=========  ===========================================================  ==============
``workers``  workers 2..16 at a fixed PS:worker ratio (1:4)  -- Fig. 7    tictac_workers
``servers``  servers 1..4 with 8 workers                     -- Fig. 9    tictac_servers
``batch``    batch factor 0.5 / 1 / 2 (compute scaled)       -- Fig. 10   tictac_batch
``models``   one setting per model: E, straggler, TIC vs TAC -- Figs. 11, 13  tictac_models
``steptime`` one model, many iterations: E vs step time      -- Fig. 12   tictac_steptime
=========  ===========================================================  ==============

Setting (our choices; the paper's cluster is not available to us):

* Link bandwidth, per model: TicTac picks settings where communication and computation
  are comparable. We set the bandwidth so that, at the reference ratio of
  ``workers_per_server`` workers per server (the Fig. 7 ratio, 4), a server's link carries
  ``comm_to_compute`` times one worker's total compute time of parameter bytes per
  iteration: ``bandwidth = workers_per_server * B / (comm_to_compute * C)`` with ``B`` the
  bytes of all recvs and ``C`` the summed compute time of the worker graph (batch factor
  1). Every transfer also pays ``latency_s``. The same link carries the gradient sends
  (on their own uplink channel when ``duplex``).
* Batch factor (Fig. 10): every compute duration is multiplied by the factor (compute time
  grows about linearly with the batch); transfers are unchanged.
* Baseline: an independent random recv order per worker and iteration; TIC / TAC: the
  order of :func:`commsched.tictac.tic` / :func:`commsched.tictac.tac` computed on the
  worker graph (with the scaled compute times for TAC), the same for every worker.
  Jitter, shared channels and how workers interleave: see :mod:`commsched.sim.multiworker`.
* Simulated graph: with ``coarsen`` (default) the simulator runs the coarsened view
  (:func:`commsched.sim.multiworker.coarsen`: compute ops merged into segments that keep
  the communication structure; its effect on the gains is recorded by
  ``benchmarks/bench_multiworker.py``); TIC and TAC always see the full view.
* Throughput gain of an order = mean baseline iteration time / mean iteration time - 1
  (throughput is inversely proportional to the iteration time of a synchronous step).
  Straggler effect = mean over iterations of (longest wait at the barrier) / (iteration
  time); straggler reduction = baseline straggler / the order's straggler.
* Ordering efficiency E (TicTac Sec. 3.1, Eq. 3) of an order: the makespan of one worker
  alone running it with the time oracle (no jitter, no sharing), through
  :func:`commsched.tictac.efficiency`. For the baseline, the mean over the sampled random
  orders. The E of an iteration (Fig. 12) is the smallest E among its workers' orders.
* Normalized step time (Fig. 12): the shortest iteration time of the experiment (both
  orders) divided by the iteration's time, so 1 is the fastest step and values fall
  towards 0 as steps get slower. We could not read the paper's definition; this one is in
  [0, 1] with TAC near 1, the scale of the paper's reported 95th percentiles.

Run as ``python -m commsched.experiments.tictac FIGURE --config config/config.yaml
--table results/tables/tictac_FIGURE.csv`` and, for the headline numbers,
``python -m commsched.experiments.tictac metrics --tables ... --metrics M.csv``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np
import pandas as pd

from commsched import graph
from commsched.cost import LinkModel
from commsched.errors import CommschedError
from commsched.io.structured import read_yaml
from commsched.plotting import check_figure_inputs
from commsched.results import read_table, write_metrics, write_table
from commsched.sim import check_schedule, simulate_compiled
from commsched.sim.multiworker import (
    NET_KINDS,
    Interleave,
    MultiWorker,
    RunResult,
    coarsen,
    compose,
    run,
    scale_compute,
)
from commsched.tictac import efficiency, tac, tic
from commsched.trace.format import load_trace
from commsched.views import ps_view

__all__ = [
    "ALGOS",
    "FIGURES",
    "FIGURE_KINDS",
    "FigureConfig",
    "Model",
    "Params",
    "calibrate_link",
    "headline_metrics",
    "load_models",
    "main",
    "order_efficiencies",
    "run_figure",
    "trace_file",
]

#: Orders compared: the random baseline, TIC (Alg. 2) and TAC (Alg. 3).
ALGOS = ("baseline", "tic", "tac")
#: Experiments (one result table each).
FIGURES = ("workers", "servers", "batch", "models", "steptime")


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


@dataclass(frozen=True)
class Params:
    """The ``tictac:`` section of the pipeline config (schema:
    ``workflow/schemas/config.schema.yaml``), checked with one-line errors."""

    traces: tuple[str, ...]
    seed: int
    jitter: float
    comm_to_compute: float
    latency_s: float
    sharding: str
    duplex: bool
    coarsen: bool
    baseline_interleave: Interleave
    iterations: int
    validate_every: int
    workers: tuple[int, ...]
    workers_per_server: int
    servers_workers: int
    servers: tuple[int, ...]
    batch_factors: tuple[float, ...]
    batch_workers: int
    batch_servers: int
    models_workers: int
    models_servers: int
    steptime_trace: str
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
        rho = float(_need(m, "comm_to_compute", (int, float), where))
        lat = float(_need(m, "latency_s", (int, float), where))
        if not (rho > 0 and math.isfinite(rho)) or not (lat >= 0 and math.isfinite(lat)):
            raise CommschedError(f"{where}: comm_to_compute must be > 0 and latency_s >= 0")
        sharding = _need(m, "sharding", str, where)
        if sharding not in ("round_robin", "size"):
            raise CommschedError(f"{where}.sharding: round_robin or size, got {sharding!r}")
        interleave = _need(m, "baseline_interleave", str, where)
        if interleave not in ("rank", "random"):
            raise CommschedError(f"{where}.baseline_interleave: rank or random, got {interleave!r}")
        validate_every = _need(m, "validate_every", int, where)
        if validate_every < 0:
            raise CommschedError(f"{where}.validate_every: must be >= 0")
        w = _need(m, "workers", dict, where)
        s = _need(m, "servers", dict, where)
        b = _need(m, "batch", dict, where)
        md = _need(m, "models", dict, where)
        st = _need(m, "steptime", dict, where)
        factors = _need(b, "factors", list, f"{where}.batch")
        if not factors or not all(
            isinstance(f, (int, float)) and not isinstance(f, bool) and f > 0 for f in factors
        ):
            raise CommschedError(f"{where}.batch.factors: a non-empty list of numbers > 0")
        return cls(
            traces=tuple(traces),
            seed=int(_need(m, "seed", int, where)),
            jitter=jitter,
            comm_to_compute=rho,
            latency_s=lat,
            sharding=sharding,
            duplex=bool(_need(m, "duplex", bool, where)),
            coarsen=bool(_need(m, "coarsen", bool, where)),
            baseline_interleave=interleave,
            iterations=_pos_int(m, "iterations", where),
            validate_every=int(validate_every),
            workers=_int_list(w, "n_workers", f"{where}.workers"),
            workers_per_server=_pos_int(w, "workers_per_server", f"{where}.workers"),
            servers_workers=_pos_int(s, "n_workers", f"{where}.servers"),
            servers=_int_list(s, "n_servers", f"{where}.servers"),
            batch_factors=tuple(float(f) for f in factors),
            batch_workers=_pos_int(b, "n_workers", f"{where}.batch"),
            batch_servers=_pos_int(b, "n_servers", f"{where}.batch"),
            models_workers=_pos_int(md, "n_workers", f"{where}.models"),
            models_servers=_pos_int(md, "n_servers", f"{where}.models"),
            steptime_trace=_need(st, "trace", str, f"{where}.steptime"),
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
    """A traced model: its trace, the calibrated link and cached views, orders and runs."""

    source: str
    trace: nx.DiGraph
    name: str
    mode: str
    batch: int
    link: LinkModel
    _views: dict[tuple[int, bool], nx.DiGraph] = field(default_factory=dict, repr=False)
    _multi: dict[tuple[int, int], MultiWorker] = field(default_factory=dict, repr=False)
    _orders: dict[tuple[int, float], dict[str, dict[str, float] | None]] = field(
        default_factory=dict, repr=False)

    def clear(self) -> None:
        """Drop the cached views, orders and composed clusters (they can be large)."""
        self._views.clear()
        self._multi.clear()
        self._orders.clear()

    def view(self, params: Params, n_servers: int, simulated: bool = False) -> nx.DiGraph:
        """The worker's PS view with ``n_servers`` servers (cached); ``simulated``: the
        graph the simulator runs (:func:`~commsched.sim.multiworker.coarsen`-ed when
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
        (not coarsened) view with compute times scaled by the batch ``factor``."""
        key = (n_servers, factor)
        if key not in self._orders:
            g = self.view(params, n_servers)
            if factor != 1.0:
                g = scale_compute(g, factor)
            self._orders[key] = {"baseline": None, "tic": dict(tic(g)), "tac": dict(tac(g))}
        return self._orders[key]


def _compute_time(g: nx.DiGraph) -> float:
    return math.fsum(float(a["duration"]) for _, a in g.nodes(data=True)
                     if a["kind"] not in NET_KINDS)


def calibrate_link(trace: nx.DiGraph, params: Params) -> LinkModel:
    """The link of a model: comparable communication and computation (module docstring)."""
    unit = ps_view(trace, n_servers=1, link=LinkModel(0.0, 1.0), duplex=params.duplex)
    recv_bytes = sum(int(a.get("bytes", 0)) for _, a in unit.nodes(data=True)
                     if a["kind"] == "recv")
    compute = _compute_time(unit)
    if recv_bytes <= 0 or compute <= 0:
        raise CommschedError("cannot calibrate the link: the trace has no parameter bytes "
                             "or no compute time")
    bw = params.workers_per_server * recv_bytes / (params.comm_to_compute * compute)
    return LinkModel(params.latency_s, bw)


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
        out.append(Model(p, g, name, mode, batch, calibrate_link(g, params)))
    return out


def order_efficiencies(
    g: nx.DiGraph, recvs: Sequence[str], ranks: np.ndarray, validate_every: int = 1
) -> np.ndarray:
    """Ordering efficiency E (TicTac Eq. 3) of each order in ``ranks`` on worker graph ``g``.

    ``ranks[k, j]`` is the priority of ``recvs[j]`` in order ``k``. Each order runs on one
    worker alone with the graph's durations (the time oracle); its makespan gives E.
    """
    cg = graph.compile_graph(g)
    index = {op: i for i, op in enumerate(cg.ids)}
    pos = [index[r] for r in recvs]
    ranks = np.atleast_2d(ranks)
    out = np.empty(len(ranks))
    cache: dict[bytes, float] = {}
    for k, row in enumerate(ranks):
        key = np.asarray(row, dtype=np.float64).tobytes()
        if key not in cache:
            prio: list[float | None] = list(cg.priority)
            for i, v in zip(pos, row.tolist(), strict=True):
                prio[i] = v
            c = dataclasses.replace(cg, priority=prio)
            s = simulate_compiled(c)
            if validate_every and k % validate_every == 0:
                check_schedule(c, s)
            cache[key] = efficiency(g, s.makespan)
        out[k] = cache[key]
    return out


def _summary(
    model: Model, params: Params, algo: str, res: RunResult, n_workers: int, n_servers: int,
    factor: float, eff: float,
) -> dict[str, Any]:
    t = res.iteration_time
    st = res.straggler
    return {
        "model": model.name, "mode": model.mode, "batch": model.batch,
        "n_workers": n_workers, "n_servers": n_servers, "batch_factor": factor, "algo": algo,
        "iterations": len(t), "jitter": params.jitter,
        "bandwidth_Bps": model.link.bandwidth_Bps, "latency_s": model.link.latency_s,
        "comm_to_compute": params.comm_to_compute,
        "workers_per_server_ref": params.workers_per_server,
        "iter_mean_s": float(t.mean()), "iter_p50_s": float(np.percentile(t, 50)),
        "iter_p95_s": float(np.percentile(t, 95)), "iter_std_s": float(t.std()),
        "straggler_mean": float(st.mean()), "straggler_max": float(st.max()),
        "efficiency": eff,
        "throughput_samples_s": n_workers * model.batch * factor / float(t.mean()),
        "validated_schedules": res.validated,
    }


def _setting_rows(
    model: Model, params: Params, n_workers: int, n_servers: int, factor: float,
    with_efficiency: bool,
) -> list[dict[str, Any]]:
    mw = model.multi(params, n_workers, n_servers)
    g = model.view(params, n_servers, simulated=True)
    if factor != 1.0:
        g = scale_compute(g, factor)
    rows = []
    for algo, order in model.orders(params, n_servers, factor).items():
        res = run(mw, order, params.iterations, jitter=params.jitter, seed=params.seed,
                  validate_every=params.validate_every, compute_scale=factor,
                  interleave=params.baseline_interleave)
        eff = math.nan
        if with_efficiency:
            if order is None:
                flat = res.ranks.reshape(-1, mw.n_recvs)
                eff = float(order_efficiencies(g, mw.recvs, flat, params.validate_every).mean())
            else:
                eff = float(order_efficiencies(
                    g, mw.recvs, np.array([[order.get(r, math.inf) for r in mw.recvs]]))[0])
        rows.append(_summary(model, params, algo, res, n_workers, n_servers, factor, eff))
    return rows


def _add_gains(df: pd.DataFrame) -> pd.DataFrame:
    keys = ["model", "mode", "n_workers", "n_servers", "batch_factor"]
    base = df[df.algo == "baseline"].set_index(keys)
    b_iter = df.set_index(keys).index.map(base["iter_mean_s"])
    b_strag = df.set_index(keys).index.map(base["straggler_mean"])
    df = df.copy()
    df["gain_pct"] = (np.asarray(b_iter) / df["iter_mean_s"].to_numpy() - 1.0) * 100.0
    with np.errstate(divide="ignore", invalid="ignore"):
        df["straggler_reduction"] = np.asarray(b_strag) / df["straggler_mean"].to_numpy()
    return df


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
    raise CommschedError(f"unknown figure {figure!r} (one of {', '.join(FIGURES)})")


def run_figure(
    figure: str, models: Sequence[Model], params: Params,
    progress: Callable[[str], None] | None = None,
) -> pd.DataFrame:
    """The summary table of one of ``workers``, ``servers``, ``batch``, ``models``."""
    rows: list[dict[str, Any]] = []
    settings = _settings(figure, params)
    for model in models:
        for n_workers, n_servers, factor in settings:
            t0 = time.perf_counter()
            rows.extend(_setting_rows(model, params, n_workers, n_servers, factor,
                                      with_efficiency=figure == "models"))
            if progress:
                progress(f"{figure}: {model.name}/{model.mode} N={n_workers} P={n_servers} "
                         f"x{factor:g}: {time.perf_counter() - t0:.1f} s")
        model.clear()
    return _add_gains(pd.DataFrame(rows))


def run_steptime(model: Model, params: Params) -> pd.DataFrame:
    """Fig. 12: per iteration, its E (the smallest among its workers' orders) and time."""
    n, p, iters = params.steptime_workers, params.steptime_servers, params.steptime_iterations
    mw = model.multi(params, n, p)
    g = model.view(params, p, simulated=True)
    rows = []
    for algo, order in model.orders(params, p, 1.0).items():
        if algo == "tic":
            continue
        res = run(mw, order, iters, jitter=params.jitter, seed=params.seed,
                  validate_every=params.validate_every, interleave=params.baseline_interleave)
        flat = res.ranks.reshape(-1, mw.n_recvs)
        eff = order_efficiencies(g, mw.recvs, flat, params.validate_every).reshape(iters, n)
        for t in range(iters):
            rows.append({
                "model": model.name, "mode": model.mode, "batch": model.batch,
                "n_workers": n, "n_servers": p, "algo": algo, "iteration": t,
                "jitter": params.jitter, "bandwidth_Bps": model.link.bandwidth_Bps,
                "comm_to_compute": params.comm_to_compute,
                "workers_per_server_ref": params.workers_per_server,
                "iteration_time_s": float(res.iteration_time[t]),
                "straggler": float(res.straggler[t]),
                "efficiency": float(eff[t].min()), "efficiency_mean": float(eff[t].mean()),
            })
    df = pd.DataFrame(rows)
    df["normalized_step_time"] = df["iteration_time_s"].min() / df["iteration_time_s"]
    return df


def _r2(x: np.ndarray, y: np.ndarray) -> float:
    """Coefficient of determination of the least-squares line of y on x."""
    if len(x) < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return math.nan
    slope, icpt = np.polyfit(x, y, 1)
    resid = y - (slope * x + icpt)
    return float(1.0 - (resid**2).sum() / ((y - y.mean()) ** 2).sum())


def headline_metrics(tables: Mapping[str, pd.DataFrame]) -> dict[str, float]:
    """The numbers the claims compare (``tictac.sim.*``), from the figure tables.

    ``<mode>.max_gain_pct``: the largest TAC throughput gain of any setting of any sweep
    ("up to 37.7 % in inference and 19.2 % in training"); ``models.max_straggler_reduction``:
    the largest baseline / TAC straggler ratio of the per-model sweep (Fig. 11, "up to
    2.3x"), also over all sweeps; ``<mode>.gain_growth_pp``: mean TAC gain at the most
    workers minus at the fewest (Fig. 7, gains grow with workers);
    ``tic_over_tac_throughput_min``: the smallest TIC / TAC throughput ratio of the
    per-model sweep (Fig. 13); ``steptime.*``: R^2 of E vs normalized step time (baseline
    iterations, and all) and the 5th / 95th percentiles of the normalized step time
    (Fig. 12).
    """
    out: dict[str, float] = {}
    gains = pd.concat([tables[f] for f in ("workers", "servers", "batch", "models")
                       if f in tables], ignore_index=True)
    tac_rows = gains[gains.algo == "tac"]
    for mode in ("infer", "train"):
        d = tac_rows[tac_rows["mode"] == mode]
        if len(d):
            out[f"tictac.sim.{mode}.max_gain_pct"] = float(d.gain_pct.max())
            out[f"tictac.sim.{mode}.max_straggler_reduction"] = float(d.straggler_reduction.max())
    if len(tac_rows):
        out["tictac.sim.max_straggler_reduction"] = float(tac_rows.straggler_reduction.max())
    if "workers" in tables:
        w = tables["workers"]
        w = w[w.algo == "tac"]
        for mode, d in w.groupby("mode"):
            lo, hi = d.n_workers.min(), d.n_workers.max()
            g_lo = d[d.n_workers == lo].gain_pct.mean()
            g_hi = d[d.n_workers == hi].gain_pct.mean()
            out[f"tictac.sim.{mode}.gain_growth_pp"] = float(g_hi - g_lo)
            out[f"tictac.sim.{mode}.mean_gain_pct_max_workers"] = float(g_hi)
    if "models" in tables:
        md = tables["models"]
        m = md.set_index(["model", "mode", "algo"])
        ratios = [m.loc[(model, mode, "tac"), "iter_mean_s"]
                  / m.loc[(model, mode, "tic"), "iter_mean_s"]
                  for (model, mode), _ in md.groupby(["model", "mode"])]
        out["tictac.sim.tic_over_tac_throughput_min"] = float(min(ratios))
        out["tictac.sim.models.max_straggler_reduction"] = float(
            md[md.algo == "tac"].straggler_reduction.max())
        eff = md.groupby("algo").efficiency.mean()
        for algo in ALGOS:
            out[f"tictac.sim.models.mean_efficiency_{algo}"] = float(eff.get(algo, math.nan))
    if "steptime" in tables:
        s = tables["steptime"]
        b = s[s.algo == "baseline"]
        out["tictac.sim.steptime.r2_baseline"] = _r2(b.efficiency.to_numpy(),
                                                     b.normalized_step_time.to_numpy())
        out["tictac.sim.steptime.r2_all"] = _r2(s.efficiency.to_numpy(),
                                                s.normalized_step_time.to_numpy())
        for algo, d in s.groupby("algo"):
            out[f"tictac.sim.steptime.p95_normalized_{algo}"] = float(
                np.percentile(d.normalized_step_time, 95))
            out[f"tictac.sim.steptime.p5_normalized_{algo}"] = float(
                np.percentile(d.normalized_step_time, 5))
    return out


#: Figures the notebooks draw from the tables (``kind`` of :class:`FigureConfig`).
FIGURE_KINDS = ("workers", "servers", "batch", "efficiency", "tic_vs_tac", "steptime")


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
    p = argparse.ArgumentParser(prog="python -m commsched.experiments.tictac",
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
            trace = args.traces[0] if args.traces else trace_file(args.trace_dir,
                                                                   params.steptime_trace)
            (model,) = load_models([trace], params)
            df = run_steptime(model, params)
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
