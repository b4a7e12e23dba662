"""Running the TicTac sweeps: every setting, order and model of a figure, and Fig. 12.

:mod:`commsched.tictac.experiments.sweeps` describes the figures, the protocol and the
statistics of every row.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from commsched.cost import LinkModel
from commsched.errors import CommschedError
from commsched.tictac.experiments.sweep_config import ALGOS, CONTROL, SWEEPS, Params
from commsched.tictac.experiments.sweep_setting import (
    Model,
    arxiv_batch,
    calibrate_link,
    comm_ratio,
)
from commsched.tictac.sim import RunResult, run

__all__ = ["run_figure", "run_steptime"]


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
    """The summary table of one sweep.

    Every model, setting and order of ``figure`` runs ``params.iterations`` iterations of
    :func:`commsched.tictac.sim.run`; a row holds the setting, the statistics of the
    protocol and the gains over the baseline of the same setting
    (:mod:`commsched.tictac.experiments.sweeps`, Statistics). The ``arxiv`` table also
    has the theoretical ``best`` and ``worst`` orders.

    Parameters
    ----------
    figure : str
        One of :data:`~commsched.tictac.experiments.sweep_config.SWEEPS`.
    models : sequence of Model
        The traced models (:func:`~commsched.tictac.experiments.sweep_setting.load_models`);
        their caches are cleared after each.
    params : Params
        The ``tictac`` section.
    progress : callable, optional
        Called with one line per setting (its wall time).

    Returns
    -------
    pandas.DataFrame
        One row per model, setting and order.

    Raises
    ------
    CommschedError
        If ``figure`` is not a sweep.

    References
    ----------
    .. [1] Hashemi, Jyothi & Campbell, "TicTac", SysML 2019, Sec. 6 (Figs. 7, 9, 10, 11,
       13 and Sec. 6.1); arXiv:1803.03288v1, Sec. 6 (Figs. 9-10).
    """
    if figure not in SWEEPS:
        raise CommschedError(f"unknown figure {figure!r} (one of {', '.join(SWEEPS)})")
    rows: list[dict[str, Any]] = []
    for model in models:
        rows.extend(_model_rows(figure, model, params, progress or (lambda _m: None)))
        model.clear()
    df = _add_gains(pd.DataFrame(rows))
    return _add_gains(_theoretical_rows(df)) if figure == "arxiv" else df


def run_steptime(models: Sequence[Model], params: Params) -> pd.DataFrame:
    """The per-iteration table of the step-time figure.

    For each model (its mode) and the baseline, TIC and TAC, ``params.steptime_iterations``
    iterations on ``steptime_workers`` workers and ``steptime_servers`` servers.

    Parameters
    ----------
    models : sequence of Model
        The traced models of ``params.steptime_traces``.
    params : Params
        The ``tictac`` section.

    Returns
    -------
    pandas.DataFrame
        One row per model, order and iteration: the iteration's E (``efficiency``, the
        smallest over its workers; ``efficiency_mean`` the mean), its time, straggler
        effect and ``normalized_step_time`` (the model's shortest iteration time over
        this one).

    References
    ----------
    .. [1] Hashemi, Jyothi & Campbell, "TicTac", SysML 2019, Sec. 6.2 and Fig. 12;
       arXiv:1803.03288v1, Figs. 7-8.
    """
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
