"""The headline numbers of the TicTac sweeps, for the claims table.

See :func:`headline_metrics`; :mod:`commsched.tictac.experiments.sweeps` defines every
statistic.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from commsched.tictac.experiments.sweep_config import CONTROL

__all__ = ["headline_metrics"]


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
    by_mode = tao.pivot_table(index="model", columns="mode", values="gain_long_pct")
    if {"infer", "train"} <= set(by_mode.columns):
        out["tictac.arxiv.infer_minus_train_gain_pp"] = float(
            (by_mode["infer"] - by_mode["train"]).mean())
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
    ``r2_baseline`` alone), the 5th / 95th percentiles of the normalized step time and the
    median E per order, and ``efficiency_std_baseline_over_tac``, the spread of E without
    scheduling over that with TAC (Sec. 6.2: large variance without, minimal with).
    arXiv (``tictac.arxiv.*``, the ``arxiv`` table, long-run statistics at the most
    workers): ``speedup_min``, ``<mode>.max_gain_pct`` (TAO), ``infer_minus_train_gain_pp``
    (TAO's gain in the forward pass minus forward + backward, mean over models),
    ``max_straggler_reduction``,
    ``baseline_straggler_max``, ``tao_over_best_median`` and ``gain_growth_pp`` (most
    minus fewest workers). :mod:`commsched.tictac.experiments.sweeps` defines every
    statistic.

    Parameters
    ----------
    tables : mapping of str to pandas.DataFrame
        ``{figure: table}`` of :func:`~commsched.tictac.experiments.sweep_runs.run_figure`
        and :func:`~commsched.tictac.experiments.sweep_runs.run_steptime`; any subset of
        the figures (the numbers of a missing one are left out).

    Returns
    -------
    dict of str to float
        ``{tictac.sim.* or tictac.arxiv.* name: value}``.

    References
    ----------
    .. [1] Hashemi, Jyothi & Campbell, "TicTac", SysML 2019, Secs. 6, 6.1-6.3, Figs. 7,
       9-13.
    .. [2] Hashemi, Jyothi & Campbell, arXiv:1803.03288v1, Sec. 6, Figs. 7-10.
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
                out[f"{pre}.efficiency_median_{algo}"] = float(d.efficiency.median())
            tac_std = s[s.algo == "tac"].efficiency.std()
            out[f"{pre}.efficiency_std_baseline_over_tac"] = (
                float(b.efficiency.std() / tac_std) if tac_std > 0 else math.inf)
    return out

