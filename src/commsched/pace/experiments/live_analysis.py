"""The tables, predictions and metrics of a live all-reduce run (:mod:`.live`).

From the workers' results of one model (:mod:`commsched.pace.live.ddp`): :func:`tables`
lists every timed step, every all-reduce and the link utilisation (:func:`utilisation`);
:func:`summarize` puts the simulator's predictions beside the measured median step, with
the all-reduce cost fitted to the run (:func:`fit_cost`); :func:`transfer` adds the
predictions of one set of overheads for the runtime, fitted over every model
(:func:`fit_runtime`) and leaving each model out in turn; :func:`metrics` names the
claimed numbers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from commsched import driver
from commsched.cluster import net
from commsched.cost import LinearModel, fit_linear
from commsched.errors import CommschedError
from commsched.pace.experiments.live_plans import Params, cost_model, predict
from commsched.pace.live.ddp import NO_COMM
from commsched.pace.sim import Workload

__all__ = ["RuntimeFit", "fit_cost", "fit_runtime", "metrics", "summarize", "tables",
           "transfer", "utilisation"]


def utilisation(rows: Sequence[Sequence[float]], start: float, end: float, bin_s: float
                ) -> list[tuple[float, float, float]]:
    """Transmit and receive rates of an interface in bins.

    The counters are interpolated linearly at the bin edges: the samples' own spacing
    jitters (a thread's wake-ups) and the counters advance in whole (segmentation-offload)
    packets, so rates over the raw sample intervals overshoot the link rate.

    Parameters
    ----------
    rows : sequence of [time, tx bytes, rx bytes]
        Samples of the interface counters (:class:`commsched.pace.live.link.LinkSampler`).
    start, end : float
        The window (Unix s).
    bin_s : float
        Bin length (s).

    Returns
    -------
    list of (float, float, float)
        ``(bin start, tx B/s, rx B/s)`` of every whole bin within the samples.

    Examples
    --------
    >>> utilisation([[0.0, 0, 0], [1.0, 100, 10], [2.0, 100, 30]], 0.0, 2.0, 1.0)
    [(0.0, 100.0, 10.0), (1.0, 0.0, 20.0)]
    """
    if len(rows) < 2 or end - start < bin_s:
        return []
    arr = np.asarray(rows, dtype=float)
    n = int((end - start) / bin_s + 1e-9)
    edges = start + bin_s * np.arange(n + 1)
    edges = edges[(edges >= arr[0, 0]) & (edges <= arr[-1, 0])]
    tx = np.interp(edges, arr[:, 0], arr[:, 1])
    rx = np.interp(edges, arr[:, 0], arr[:, 2])
    return [(float(edges[i]), float((tx[i + 1] - tx[i]) / bin_s),
             float((rx[i + 1] - rx[i]) / bin_s)) for i in range(len(edges) - 1)]


def tables(run: Mapping[str, Any], bin_s: float = 0.005) -> dict[str, pd.DataFrame]:
    """Steps, all-reduces and link utilisation of one model's run.

    Parameters
    ----------
    run : mapping
        One model's run: model, trace, bandwidth and the workers' ``results``.
    bin_s : float
        Bin length of the link utilisation (s).

    Returns
    -------
    dict
        ``{"steps" | "allreduces" | "link": DataFrame}``, times relative to the policy's
        first timed step, iterations numbered across rounds.
    """
    steps, ars, link = [], [], []
    key = {"model": run["model"], "trace": run["trace"], "bandwidth": run["bandwidth"]}
    for res in run["results"]:
        rank = res["rank"]
        rows = res["link"]["rows"]
        for pol in res["policies"]:
            name, starts = pol["policy"], pol["iteration_start"]
            warm = len(pol["warmup_step_s"])
            t0 = starts[warm]
            rnd = pol.get("round", 0)
            first = rnd * len(pol["step_s"])  # iterations numbered across rounds
            for i, s in enumerate(pol["step_s"]):
                steps.append({**key, "policy": name, "rank": rank, "round": rnd,
                              "iteration": first + i, "step_s": s})
            last = warm + len(pol["step_s"])  # the untimed last step's are left out
            for r in pol["allreduces"]:  # the warm-up's last ones may end in timed steps
                if r["end"] < t0 or r["iteration"] >= last:
                    continue
                ars.append({**key, "policy": name, "rank": rank, "round": rnd,
                            "iteration": first + r["iteration"] - warm,
                            "agree_s": r.get("agree_start", r["start"]) - t0,
                            "start_s": r["start"] - t0,
                            "end_s": r["end"] - t0, "bytes": r["bytes"],
                            "partitions": len(r["parts"]),
                            "priority": min(p[3] for p in r["parts"])})
            for t, tx, rx in utilisation(rows, t0, starts[-1], bin_s):
                link.append({**key, "policy": name, "rank": rank, "round": rnd, "t_s": t - t0,
                             "tx_MBps": tx / 1e6, "rx_MBps": rx / 1e6,
                             "utilisation": tx / run["bandwidth_Bps"]})
    return {"steps": pd.DataFrame(steps), "allreduces": pd.DataFrame(ars),
            "link": pd.DataFrame(link)}


def fit_cost(allreduces: pd.DataFrame, nominal: LinearModel, policy: str = "wfbp"
             ) -> LinearModel:
    """The all-reduce cost ``a + b*S`` fitted to the run's own all-reduces.

    Each all-reduce counts from the start of the agreement round that chose it (the
    workers' one small all-reduce before every decision,
    :class:`commsched.pace.live.executor.PlanExecutor`, which the channel spends on every
    all-reduce too) to its end.

    Parameters
    ----------
    allreduces : pandas.DataFrame
        The all-reduce table of :func:`tables`.
    nominal : LinearModel
        The cost when the run has too few all-reduces of ``policy`` to fit.
    policy : str
        Whose all-reduces (WFBP: one per tensor, sizes over several decades).

    Returns
    -------
    LinearModel
        :func:`commsched.cost.fit_linear` of duration against bytes (start-up >= 0).

    References
    ----------
    PACE (Bao et al., INFOCOM 2020), Sec. II-C and Fig. 3 (the linear model).
    """
    d = allreduces[allreduces["policy"] == policy] if len(allreduces) else allreduces
    if len(d) < 2 or d["bytes"].nunique() < 2:
        return nominal
    f = fit_linear(d["bytes"], _durations(d))
    return LinearModel(max(f.a, 0.0), f.b)


def _durations(allreduces: pd.DataFrame) -> pd.Series:
    """Each all-reduce's time from the start of its agreement round to its end."""
    begin = allreduces["agree_s"] if "agree_s" in allreduces else allreduces["start_s"]
    return allreduces["end_s"] - begin


@dataclass(frozen=True)
class RuntimeFit:
    """One set of overheads of the live PyTorch runtime, for any model and link rate.

    Parameters
    ----------
    compute_scale : float
        Live compute time of an iteration without communication over the trace's.
    startup_s : float
        Start-up of one all-reduce (agreement round included), s.
    rate_fraction : float
        The share of the shaped link's rate an all-reduce's bytes get.

    References
    ----------
    PACE (Bao et al., INFOCOM 2020), Sec. II-C and Fig. 3 (the linear all-reduce model).
    """

    compute_scale: float
    startup_s: float
    rate_fraction: float

    def cost(self, bandwidth_Bps: float) -> LinearModel:
        """The all-reduce cost ``a + b*S`` on a link of ``bandwidth_Bps`` bytes/s.

        Parameters
        ----------
        bandwidth_Bps : float
            The shaped link's rate.

        Returns
        -------
        LinearModel
            ``a = startup_s``, ``b = 1 / (rate_fraction * bandwidth_Bps)``.
        """
        return LinearModel(self.startup_s, 1.0 / (self.rate_fraction * bandwidth_Bps))


def fit_runtime(summary: pd.DataFrame, allreduces: pd.DataFrame,
                exclude_model: str | None = None, policy: str = "wfbp") -> RuntimeFit:
    """One :class:`RuntimeFit` pooled over the models of a run, none of them per model.

    ``compute_scale`` is the median over the models of the measured step without
    communication over the trace's compute time (:func:`summarize`'s ``compute_s`` and
    ``trace_compute_s``); ``startup_s`` and ``rate_fraction`` come from one least-squares
    fit of every model's ``policy`` all-reduce durations (from the agreement round's start,
    as :func:`fit_cost`) against bytes over that model's link rate (``bandwidth``), so
    models shaped to different rates share it. Nothing is fitted to a step time.

    Parameters
    ----------
    summary : pandas.DataFrame
        :func:`summarize`'s rows of every model (``model``, ``compute_s``,
        ``trace_compute_s``).
    allreduces : pandas.DataFrame
        The all-reduce tables of every model (:func:`tables`: ``model``, ``bandwidth``,
        ``policy``, ``bytes``, ``end_s`` and ``agree_s`` or ``start_s``).
    exclude_model : str, optional
        Leave this model out (the leave-one-model-out check of :func:`transfer`).
    policy : str
        Whose all-reduces to fit (WFBP: one per tensor, sizes over several decades).

    Returns
    -------
    RuntimeFit
        The pooled overheads.

    Raises
    ------
    CommschedError
        If no model is left, or its all-reduces have fewer than two distinct sizes or
        durations that do not grow with the bytes.

    References
    ----------
    PACE (Bao et al., INFOCOM 2020), Sec. II-C and Fig. 3 (the linear all-reduce model).
    """
    s = summary.drop_duplicates("model")
    d = allreduces[allreduces["policy"] == policy] if len(allreduces) else allreduces
    if exclude_model is not None:
        s = s[s["model"] != exclude_model]
        d = d[d["model"] != exclude_model] if len(d) else d
    if s.empty or len(d) < 2 or d["bytes"].nunique() < 2:
        raise CommschedError(f"fit_runtime: too few {policy} all-reduces to fit "
                             f"(models left: {', '.join(map(str, s['model'])) or 'none'})")
    scale = float((s["compute_s"] / s["trace_compute_s"]).median())
    x = d["bytes"] / d["bandwidth"].map(net.parse_rate)
    f = fit_linear(x, _durations(d))
    if f.b <= 0:
        raise CommschedError("fit_runtime: all-reduce durations do not grow with the bytes")
    return RuntimeFit(scale, max(f.a, 0.0), 1.0 / f.b)


def summarize(run: Mapping[str, Any], steps: pd.DataFrame, allreduces: pd.DataFrame,
              params: Params) -> pd.DataFrame:
    """Per policy: measured median step, predictions and errors (:mod:`.live`, step 3).

    Parameters
    ----------
    run : mapping
        One model's run (trace graph, workload, plans, bandwidth).
    steps, allreduces : pandas.DataFrame
        Its tables (:func:`tables`).
    params : Params
        The run's parameters.

    Returns
    -------
    pandas.DataFrame
        One row per policy: measured and predicted step (calibrated and nominal), their
        errors, the fitted cost and the gains over WFBP and DDP.
    """
    it = steps.groupby(["policy", "iteration"])["step_s"].max().reset_index()
    measured = it.groupby("policy")["step_s"].median()
    w: Workload = run["workload"]
    compute = float(measured[NO_COMM])
    scaled = Workload(run["trace_graph"], compute_scale=compute / w.compute_time)
    nominal = cost_model(params, run["bandwidth_Bps"])
    fitted = fit_cost(allreduces, nominal)
    rows = []
    for policy, (_, decision) in run["plans"].items():
        sync = policy == "ddp"
        pred, _ = predict(scaled, decision, fitted, sync)
        pred_nominal, _ = predict(w, decision, nominal, sync)
        m = float(measured[policy])
        rows.append({"model": run["model"], "trace": run["trace"],
                     "bandwidth": run["bandwidth"], "policy": policy,
                     "measured_s": m, "steps": int((it["policy"] == policy).sum()),
                     "compute_s": compute, "trace_compute_s": w.compute_time,
                     "cost_a_s": fitted.a, "cost_MBps": 1e-6 / fitted.b,
                     "predicted_s": pred, "error": pred / m - 1,
                     "predicted_nominal_s": pred_nominal,
                     "error_nominal": pred_nominal / m - 1,
                     "allreduce_all_s": fitted.time(sum(w.sizes.values()))})
    df = pd.DataFrame(rows)
    for base in ("wfbp", "ddp"):
        if base in measured.index:
            df[f"gain_over_{base}"] = float(measured[base]) / df["measured_s"] - 1
    return df


def transfer(runs: Sequence[Mapping[str, Any]], summary: pd.DataFrame,
             allreduces: pd.DataFrame) -> pd.DataFrame:
    """The summary with the predictions of one set of overheads for the runtime.

    Every policy's step is predicted from its intended plan (the one the workers were
    given) with :func:`fit_runtime`'s overheads: fitted over every model
    (``predicted_runtime_s``, ``error_runtime``) and over the other models only
    (``predicted_lomo_s``, ``error_lomo``: a new model predicted before it has run; NaN
    with a single model). Both are NaN unless every model ran ``wfbp`` (the
    all-reduces they are fitted on), and NaN where :func:`fit_runtime` cannot fit
    (its reason is printed on stderr): a run too short or too noisy for a slope is
    still analysed, it only makes no such prediction.

    Parameters
    ----------
    runs : sequence of mapping
        Every model's run (``model``, ``trace_graph``, ``plans``, ``bandwidth_Bps``).
    summary : pandas.DataFrame
        :func:`summarize`'s rows of those models.
    allreduces : pandas.DataFrame
        Their all-reduce tables (:func:`tables`).

    Returns
    -------
    pandas.DataFrame
        ``summary`` with the four columns.
    """
    out = summary.copy()
    by_run = {r["model"]: r for r in runs}
    models = list(dict.fromkeys(summary["model"]))
    ran = set(allreduces["model"][allreduces["policy"] == "wfbp"]) if len(allreduces) else set()
    if not set(models) <= ran:  # a model without WFBP all-reduces: nothing to fit on
        models = []

    def pooled(exclude: str | None = None) -> RuntimeFit | None:
        try:
            return fit_runtime(summary, allreduces, exclude)
        except CommschedError as e:  # e.g. a short run on a fast link: noise, no slope
            driver.say(f"pace_live: no runtime prediction"
                       f"{'' if exclude is None else f' without {exclude}'}: {e}")
            return None

    fits = {"runtime": dict.fromkeys(models, pooled() if models else None),
            "lomo": {m: pooled(m) for m in models} if len(models) > 1 else {}}
    for col, fit_of in fits.items():
        pred: list[float] = []
        for row in summary.itertuples():
            fit = fit_of.get(row.model)
            if fit is None:
                pred.append(float("nan"))
                continue
            run = by_run[row.model]
            w = Workload(run["trace_graph"], compute_scale=fit.compute_scale)
            pred.append(predict(w, run["plans"][row.policy][1],
                                fit.cost(run["bandwidth_Bps"]), row.policy == "ddp")[0])
        out[f"predicted_{col}_s"] = pred
        out[f"error_{col}"] = out[f"predicted_{col}_s"] / out["measured_s"] - 1
    return out


def metrics(summary: pd.DataFrame) -> dict[str, float]:
    """The claimed numbers (``pace_live.*``) of the summaries.

    Parameters
    ----------
    summary : pandas.DataFrame
        :func:`summarize`'s rows of every model.

    Returns
    -------
    dict
        Per model PACE's gain over each other policy in percent and each policy's
        prediction error; the simulator's absolute error in percent, median and largest
        over every model and policy (``_nominal``: the uncalibrated prediction;
        ``_runtime`` and ``_lomo``: :func:`transfer`'s, where its columns are there).

    References
    ----------
    PACE (Bao et al., INFOCOM 2020), Sec. VI-B (speed-up over the baselines).
    """
    out: dict[str, float] = {}
    for model, df in summary.groupby("model", sort=False):
        by = df.set_index("policy")["measured_s"]
        if "pace" in by.index:
            for base in by.index.drop("pace"):
                out[f"pace_live.{model}.pace_gain_over_{base}_pct"] = 100 * float(
                    by[base] / by["pace"] - 1)
        for policy, err in df.set_index("policy")["error"].items():
            out[f"pace_live.{model}.{policy}.error_pct"] = 100 * float(err)
    if len(summary):
        err = summary["error"].abs()
        out["pace_live.error_median_abs_pct"] = 100 * float(err.median())
        out["pace_live.error_max_abs_pct"] = 100 * float(err.max())
        out["pace_live.error_nominal_median_abs_pct"] = 100 * float(
            summary["error_nominal"].abs().median())
        for col in ("runtime", "lomo"):
            err = (summary[f"error_{col}"].abs().dropna() if f"error_{col}" in summary
                   else pd.Series(dtype=float))
            if not err.empty:
                out[f"pace_live.error_{col}_median_abs_pct"] = 100 * float(err.median())
                out[f"pace_live.error_{col}_max_abs_pct"] = 100 * float(err.max())
    return out
