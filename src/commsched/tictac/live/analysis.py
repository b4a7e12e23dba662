"""Summary, prediction and metrics of a live TicTac run.

Step 3 of :mod:`commsched.tictac.experiments.live`: the simulator's overheads fitted from
the traced steps (:func:`fit_overhead`, :func:`workload_compute_factors`), the
predictions with them, the per-config summary (:func:`summarize`) and the numbers of the
claims table (:func:`metrics`); :func:`analyse` does all of it.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from commsched.cluster import net
from commsched.cost.overhead import (
    Overhead,
    fit_compute,
    fit_dispatch,
    fit_fallback,
    fit_gate,
    fit_link,
    fit_worker_noise,
)
from commsched.errors import CommschedError
from commsched.progress import progress
from commsched.tictac.live.config import LiveParams
from commsched.tictac.live.grpcorder import processing_out_of_order
from commsched.tictac.live.tables import agreement, arrival_order_repeats, out_of_order_rate
from commsched.tictac.live.workload import Workload

__all__ = ["analyse", "fit_overhead", "metrics", "runtime_predictions", "summarize",
           "workload_compute_factors"]


def fit_overhead(xfers: pd.DataFrame, traced: pd.DataFrame, steps: pd.DataFrame,
                 exclude_model: str | None = None) -> Overhead:
    """The simulator's runtime overheads, fitted from the traced steps of a live run.

    Pooled over the run's models and modes:

    * link (``transfer_s``, ``rate_Bps``): :func:`~commsched.cost.overhead.fit_link` on the
      baseline's traced steps, where every request is issued at once and the server's link
      stays busy: per step, all workers' parameter transfers, their bytes and their span
      (first start to last arrival);
    * compute (``compute_factor``, ``contention``):
      :func:`~commsched.cost.overhead.fit_compute` on every traced step of every worker
      and config: the live worker's summed compute time against the trace's (the time
      oracle's) and the share of it during which a transfer was in flight
      (``net_overlap`` of :func:`~commsched.tictac.live.tables.traced_steps`; one factor
      without it), no per-op cost (:mod:`commsched.cost.overhead` says why, with what
      else we tried and its leave-one-model-out errors);
    * ``step_s``: the median over measured steps of the shortest barrier wait of the step,
      i.e. the barrier's own round trip paid by the last worker to arrive (a measured
      component of the iteration, not a fit to the iteration time);
    * ``gap_factor``: on the traced steps' executor timelines, after each worker's last
      parameter arrival, the wall time to its last op over the summed time of the ops
      run there (``tail_wall_s`` / ``tail_op_s`` of
      :func:`~commsched.tictac.live.tables.traced_steps`), pooled;
    * ``dag_gate_s``: :func:`~commsched.cost.overhead.fit_gate` on the group boundaries
      of the traced steps of the configs with the ``dag`` hook (each priority group's
      first arrival, with the worker executor's idle time since the arrival before it,
      ``idle_s`` of :func:`~commsched.tictac.live.tables.tables`);
    * ``sender_fallback``: :func:`~commsched.cost.overhead.fit_fallback` on the
      *measured* work times of every config with the ``sender`` hook, each beside its
      model and mode's baseline (the measured steps fall back more often than the traced
      ones, which run one after another: :mod:`commsched.cost.overhead`);
    * ``worker_noise``: :func:`~commsched.cost.overhead.fit_worker_noise` on the workers'
      compute times of every traced step;
    * ``dispatch_s``: :func:`~commsched.cost.overhead.fit_dispatch` on the baseline's
      traced steps: each worker's first parameter request (``first_recv_s`` of
      :func:`~commsched.tictac.live.tables.traced_steps`) against its view's compute op
      count (``oracle_ops``); 0 without that column.

    Parameters
    ----------
    xfers, traced, steps : pandas.DataFrame
        The run's per-transfer, per-traced-step and per-step tables
        (:mod:`commsched.tictac.live.tables`).
    exclude_model : str, optional
        Leave this model's rows out (a leave-one-model-out check).

    Returns
    -------
    Overhead
        :class:`commsched.cost.overhead.Overhead`; ``dag_gate_s`` is None when no
        traced ``dag`` step has a group boundary.

    Raises
    ------
    CommschedError
        If no traced baseline step (or no traced or measured step) is left to fit.
    """
    x = xfers[xfers.kind == "recv"]
    dag = set(steps.config[steps.hook == "dag"])
    t = traced[traced.compute_s.notna()]
    st = steps
    if exclude_model is not None:
        x, t, st = (d[d.model != exclude_model] for d in (x, t, st))
    if x[x.config == "baseline"].empty or t.empty or st.empty:
        raise CommschedError("fit_overhead: no traced baseline steps to fit")

    def link(sel: pd.DataFrame) -> tuple[float, float]:
        busy = sel.groupby(["model", "mode", "config", "trace_step"]).agg(
            n=("variable", "size"), nbytes=("bytes", "sum"), first=("start_s", "min"),
            last=("end_s", "max"))
        return fit_link(busy.n.tolist(), busy.nbytes.tolist(),
                        (busy["last"] - busy["first"]).tolist())

    transfer_s, rate = link(x[x.config == "baseline"])
    ranked = x[x.priority.notna()] if "priority" in x else x[:0]
    gate_s = _gate_cost(ranked[ranked.config.isin(dag)], transfer_s, rate)
    phi = (t.net_overlap.tolist() if "net_overlap" in t and t.net_overlap.notna().all()
           else None)
    factor, contention = fit_compute(t.oracle_compute_s.tolist(), t.compute_s.tolist(), phi)
    fallback = _fallback(st)
    per_step = (t.groupby(["model", "mode", "config", "trace_step"]).compute_s.apply(list)
                if "trace_step" in t else [])
    noise = fit_worker_noise(per_step) if any(len(v) > 1 for v in per_step) else 0.0
    tail = t[t.tail_ops > 0] if "tail_ops" in t else t[:0]
    gap = float(tail.tail_wall_s.sum() / tail.tail_op_s.sum()) if len(tail) else 1.0
    step_s = float(st.groupby(["model", "mode", "config", "step"]).barrier_s.min().median())
    first = (t[(t.config == "baseline") & t.first_recv_s.notna()] if "first_recv_s" in t
             else t[:0])
    dispatch = (fit_dispatch(first.first_recv_s.tolist(), first.oracle_ops.tolist())
                if len(first) else 0.0)
    return Overhead(transfer_s, rate, factor, step_s, max(gap, 1.0), gate_s, contention,
                    fallback, noise, dispatch)


#: The columns that name one traced step of one worker in the per-transfer table.
_STEP_WORKER = ["model", "mode", "config", "trace_step", "worker"]


def _fallback(steps: pd.DataFrame) -> float:
    """``sender_fallback`` from the measured work times of the sender-hook configs, each
    beside its model and mode's baseline (:func:`~commsched.cost.overhead.fit_fallback`);
    0 without a sender config."""
    pairs = [(d.work_s[d.config == c].tolist(), d.work_s[d.config == "baseline"].tolist())
             for _, d in steps.groupby(["model", "mode"])
             for c in sorted(set(d.config[d.hook == "sender"]))]
    return fit_fallback(pairs) if pairs else 0.0


def _gate_cost(x: pd.DataFrame, transfer_s: float, rate_Bps: float) -> float | None:
    """``dag_gate_s`` from the ranked parameter transfers of the DAG hook's traced steps
    (:func:`~commsched.cost.overhead.fit_gate` at each priority group's first arrival);
    None without a boundary."""
    if "idle_s" not in x or x.empty:
        return None
    x = x.sort_values("end_s", kind="stable")
    first = x.priority != x.groupby(_STEP_WORKER).priority.shift()
    bounds = x[first & x.idle_s.notna()]
    if bounds.empty:
        return None
    return fit_gate(bounds.idle_s.tolist(), bounds.bytes.tolist(), transfer_s, rate_Bps)


def workload_compute_factors(traced: pd.DataFrame) -> dict[tuple[str, str], float]:
    """The live speed of each workload's ops against the time oracle.

    Parameters
    ----------
    traced : pandas.DataFrame
        The per-traced-step table (:func:`~commsched.tictac.live.tables.traced_steps`).

    Returns
    -------
    dict
        ``{(model, mode): live compute time / oracle compute time}``, summed over the
        workload's traced steps (every config and worker) (:mod:`commsched.cost.overhead`).
    """
    t = traced[traced.compute_s.notna()]
    return {(str(m), str(mo)): float(d.compute_s.sum() / d.oracle_compute_s.sum())
            for (m, mo), d in t.groupby(["model", "mode"])}


def summarize(steps: pd.DataFrame, xfers: pd.DataFrame, loads: Sequence[Workload],
              n_workers: int, fitted: Mapping[str, Mapping[str, float]] | None = None,
              loo: Mapping[str, Mapping[str, float]] | None = None,
              intended: Mapping[str, Mapping[str, float]] | None = None,
              runtime: Mapping[str, Mapping[str, Mapping[str, float]]] | None = None
              ) -> pd.DataFrame:
    """The summary table: one row per model, mode and config.

    Parameters
    ----------
    steps, xfers : pandas.DataFrame
        The run's per-step and per-transfer tables (:func:`~commsched.tictac.live.tables.
        tables`).
    loads : sequence of Workload
        The workloads (``predicted``: the simulator on the trace as it is).
    n_workers : int
        Workers of the run.
    fitted, loo : mapping, optional
        ``{group id: {config: s}}``: the simulator's predictions with the overheads
        fitted on the whole run and on the other models only (:func:`fit_overhead`).
    intended : mapping, optional
        The same with the whole run's overheads on the intended orders
        (:mod:`commsched.tictac.experiments.live`, step 3).
    runtime : mapping, optional
        :func:`runtime_predictions`: ``{"runtime" | "lomo": {group id: {config: s}}}``.

    Returns
    -------
    pandas.DataFrame
        Throughput, gain over the baseline, straggler effect and its reduction, order
        and end agreement (:func:`~commsched.tictac.live.tables.agreement`), ``work_cv``
        and the predictions with their errors: ``predicted_nominal_s`` (nominal link
        rate, the oracle's op times); ``predicted_s`` / ``pred_error`` the fitted ones
        where given, else the nominal ones; ``pred_error_loo`` and
        ``predicted_intended_s`` / ``pred_error_intended``, ``predicted_runtime_s`` /
        ``pred_error_runtime`` and ``predicted_lomo_s`` / ``pred_error_lomo`` (NaN when
        not given).

    References
    ----------
    .. [1] Hashemi, Jyothi & Campbell, "TicTac", SysML 2019, Sec. 6 (throughput) and
       Sec. 6.3 (straggler effect).
    """
    rows = []
    for w in loads:
        it = steps[(steps.model == w.model) & (steps["mode"] == w.mode) & (steps.worker == 0)]
        base = it[it.config == "baseline"]["iteration_s"].mean()
        base_strag = it[it.config == "baseline"]["straggler"].mean()
        pred = fitted[w.group_id] if fitted else w.predicted
        for c in w.configs:
            x = it[it.config == c["name"]]
            mean = float(x["iteration_s"].mean())
            agree, agree_end = [], []
            if not xfers.empty:
                sel = xfers[(xfers.model == w.model) & (xfers["mode"] == w.mode)
                            & (xfers.config == c["name"]) & (xfers.kind == "recv")
                            & xfers.priority.notna()]  # unranked reads: not in the order
                for _, grp in sel.groupby(["trace_step", "worker"]):
                    prio = dict(zip(grp.variable, grp.priority, strict=True))
                    agree.append(agreement(dict(zip(grp.variable, grp.start_s, strict=True)),
                                           prio))
                    agree_end.append(agreement(dict(zip(grp.variable, grp.end_s, strict=True)),
                                               prio))
            strag = float(x["straggler"].mean())
            by_fit = {k: (runtime[k][w.group_id][c["name"]]
                          if runtime and w.group_id in runtime.get(k, {}) else math.nan)
                      for k in ("runtime", "lomo")}
            rows.append({
                "model": w.model, "mode": w.mode, "batch": w.batch, "bandwidth": w.bandwidth,
                "workers": n_workers, "config": c["name"], "order": c["order"],
                "hook": c["enforce"], "steps": len(x), "iteration_mean_s": mean,
                "iteration_median_s": float(x["iteration_s"].median()),
                "iteration_p95_s": float(x["iteration_s"].quantile(0.95)),
                "work_cv": _work_cv(steps, w, c["name"]),
                "throughput": n_workers * w.batch / mean,
                "gain": float(base / mean - 1.0),
                "straggler": strag,
                "straggler_reduction": float(base_strag / strag) if strag > 0 else math.nan,
                "order_agreement": float(np.nanmean(agree)) if agree else math.nan,
                "end_agreement": float(np.nanmean(agree_end)) if agree_end else math.nan,
                "predicted_nominal_s": w.predicted[c["name"]],
                "pred_error_nominal": w.predicted[c["name"]] / mean - 1.0,
                "predicted_s": pred[c["name"]],
                "pred_error": pred[c["name"]] / mean - 1.0,
                "pred_error_loo": (loo[w.group_id][c["name"]] / mean - 1.0 if loo
                                   else math.nan),
                "predicted_intended_s": (intended[w.group_id][c["name"]] if intended
                                         else math.nan),
                "pred_error_intended": (intended[w.group_id][c["name"]] / mean - 1.0
                                        if intended else math.nan),
                **{f"predicted_{k}_s": v for k, v in by_fit.items()},
                **{f"pred_error_{k}": v / mean - 1.0 for k, v in by_fit.items()},
                "predicted_gain": pred["baseline"] / pred[c["name"]] - 1.0,
                "comm_comp_ratio": w.comm_comp,
            })
    return pd.DataFrame(rows)


def _work_cv(steps: pd.DataFrame, w: Workload, config: str) -> float:
    """Coefficient of variation of one worker's work time over the measured steps and
    workers of a config: the live spread that the simulator's per-worker, per-iteration
    noise stands for (:mod:`commsched.tictac.sim`, Noise)."""
    x = steps[(steps.model == w.model) & (steps["mode"] == w.mode) & (steps.config == config)]
    return float(x.work_s.std() / x.work_s.mean()) if len(x) > 1 else math.nan


def metrics(summary: pd.DataFrame, repeats: pd.DataFrame | None = None,
            out_of_order: pd.DataFrame | None = None,
            overhead: Mapping[str, float] | None = None,
            processing: pd.DataFrame | None = None) -> dict[str, float]:
    """The numbers of the claims table (``live.*``), per model: no best over models.

    Per model, mode and config: gain, straggler effect, straggler reduction (baseline mean
    / config mean; below 1 is an increase, counted in ``live.straggler_increases``),
    prediction errors, the work time's coefficient of variation (``work_cv``);
    per model and mode the best gain over the ordered configs; pooled:
    the prediction errors' median and largest absolute values (nominal, fitted,
    leave-one-model-out on the achieved orders, intended orders, one fit for the runtime
    and its leave-one-model-out form on the intended orders), the sender-vs-DAG
    difference and order agreements. With
    ``repeats``, ``out_of_order``, ``overhead`` and ``processing`` their values too
    (``live.baseline.unique_order_frac_spread``: the largest minus the smallest share of
    distinct baseline orders over the models; per model and config, over both modes,
    ``grpc_processing_out_of_order``, the share of captured transfers the PS's gRPC sent
    out of hand-off order, ``grpc_processing_transfers`` their number and
    ``ps_send_out_of_priority`` the share sent out of priority order).

    Parameters
    ----------
    summary : pandas.DataFrame
        :func:`summarize`'s table.
    repeats : pandas.DataFrame, optional
        :func:`~commsched.tictac.live.tables.arrival_order_repeats`'s table.
    out_of_order : pandas.DataFrame, optional
        :func:`~commsched.tictac.live.tables.out_of_order_rate`'s table.
    overhead : mapping of str to float, optional
        The fitted overheads, reported as ``live.overhead.<name>``.
    processing : pandas.DataFrame, optional
        :func:`~commsched.tictac.live.grpcorder.processing_out_of_order`'s table.

    Returns
    -------
    dict of str to float
        ``{live.* name: value}``, the per-model names ``live.<model>.<mode>.<config>.*``.

    References
    ----------
    .. [1] Hashemi, Jyothi & Campbell, "TicTac", SysML 2019, Secs. 1, 2.2, 5.1, 6 and 6.3.
    """
    out: dict[str, float] = {}
    ordered = summary[summary.config != "baseline"]
    for r in summary.itertuples():
        key = f"live.{r.model}.{r.mode}.{r.config}"
        out[f"{key}.straggler"] = r.straggler
        out[f"{key}.pred_error"] = r.pred_error
        out[f"{key}.pred_error_nominal"] = r.pred_error_nominal
        out[f"{key}.work_cv"] = r.work_cv
        if r.config != "baseline":
            out[f"{key}.gain"] = r.gain
            out[f"{key}.straggler_reduction"] = r.straggler_reduction
    for (model, mode), sel in ordered.groupby(["model", "mode"]):
        out[f"live.{model}.{mode}.best_gain"] = float(sel.gain.max())
    if not ordered.empty:
        out["live.straggler_increases"] = float((ordered.straggler_reduction < 1).sum())
    pairs = ordered.pivot_table(index=["model", "mode", "order"], columns="hook",
                                values="gain")
    if {"sender", "dag"} <= set(pairs.columns):
        diff = (pairs["sender"] - pairs["dag"]).dropna()
        if not diff.empty:
            out["live.sender_minus_dag_gain"] = float(diff.mean())
    for hook, sel in [*((h, ordered[ordered.hook == h]) for h in sorted(set(ordered.hook))),
                      ("none", summary[summary.config == "baseline"])]:
        if not sel.empty:
            out[f"live.{hook}.order_agreement"] = float(sel.order_agreement.mean())
            out[f"live.{hook}.end_agreement"] = float(sel.end_agreement.mean())
    for col in ("pred_error", "pred_error_nominal", "pred_error_loo", "pred_error_intended",
                "pred_error_runtime", "pred_error_lomo"):
        err = summary[col].abs().dropna() if col in summary else pd.Series(dtype=float)
        if not err.empty:
            out[f"live.{col}.median_abs"] = float(err.median())
            out[f"live.{col}.max_abs"] = float(err.max())
    if repeats is not None and not repeats.empty:
        for (model, mode), d in repeats.groupby(["model", "mode"]):
            out[f"live.{model}.{mode}.baseline.unique_order_frac"] = float(d.unique_frac.min())
        per_model = []
        for model, d in repeats.groupby("model"):
            out[f"live.{model}.baseline.unique_order_frac"] = float(d.unique_frac.min())
            out[f"live.{model}.baseline.traced_steps"] = float(d.steps.sum())
            per_model.append(float(d.unique_frac.min()))
        # SysML Sec. 2.2: whether the order repeats depends on the model
        out["live.baseline.unique_order_frac_spread"] = max(per_model) - min(per_model)
    if out_of_order is not None and not out_of_order.empty:
        for r in out_of_order.itertuples():
            out[f"live.{r.model}.{r.mode}.{r.config}.grpc_out_of_order"] = r.rate
        for (model, config), d in out_of_order.groupby(["model", "config"]):
            out[f"live.{model}.{config}.grpc_out_of_order"] = float(
                d.overtaken.sum() / d.transfers.sum())
    if processing is not None and not processing.empty:
        for r in processing.itertuples():
            out[f"live.{r.model}.{r.mode}.{r.config}.grpc_processing_out_of_order"] = r.rate
        for (model, config), d in processing.groupby(["model", "config"]):
            key = f"live.{model}.{config}"
            n, ranked = int(d.transfers.sum()), int(d.ranked.sum())
            out[f"{key}.grpc_processing_transfers"] = float(n)
            if n:
                out[f"{key}.grpc_processing_out_of_order"] = float(d.out_of_order.sum() / n)
            if ranked:
                out[f"{key}.ps_send_out_of_priority"] = float(d.out_of_priority.sum()
                                                              / ranked)
    for k, v in (overhead or {}).items():
        out[f"live.overhead.{k}"] = float(v)
    return out


def runtime_predictions(loads: Sequence[Workload], params: LiveParams, pooled: Overhead,
                        held_out: Mapping[str, Overhead]
                        ) -> dict[str, dict[str, dict[str, float]]]:
    """The intended orders' predictions of one overhead fit for the runtime.

    No number is the workload's own: every overhead, the compute speed included, is
    :func:`fit_overhead`'s pooled fit, over every model (``runtime``) or over the other
    models only (``lomo``: a model predicted before it has run, on the order it is meant
    to run).

    Parameters
    ----------
    loads : sequence of Workload
        The workloads.
    params : LiveParams
        Workers, simulated iterations and seed.
    pooled : Overhead
        :func:`fit_overhead` of every model.
    held_out : mapping of str to Overhead
        ``{model: fit_overhead(..., exclude_model=model)}``; a workload whose model is
        not in it has no ``lomo`` prediction.

    Returns
    -------
    dict
        ``{"runtime" | "lomo": {group id: {config: s}}}``
        (:meth:`~commsched.tictac.live.workload.Workload.predict`).

    References
    ----------
    .. [1] Hashemi, Jyothi & Campbell, "TicTac", SysML 2019, Sec. 3 (the execution model)
       and Sec. 5 (the time oracle).
    """
    def run(w: Workload, ov: Overhead) -> dict[str, float]:
        return w.predict(params.workers, params.sim_iterations, params.seed, ov)

    return {"runtime": {w.group_id: run(w, pooled)
                        for w in progress(loads, "predictions of the runtime fit")},
            "lomo": {w.group_id: run(w, held_out[w.model])
                     for w in progress(loads, "leave-one-model-out predictions")
                     if w.model in held_out}}


def analyse(steps: pd.DataFrame, xfers: pd.DataFrame, traced: pd.DataFrame,
            loads: Sequence[Workload], params: LiveParams,
            achieved: Mapping[str, Mapping[str, Sequence[np.ndarray]]],
            say: Callable[[str], None] = lambda _: None,
            processing: pd.DataFrame | None = None) -> tuple[pd.DataFrame,
                                                             dict[str, float]]:
    """The summary table and the metrics of a live run's tables.

    Fits the overheads (:func:`fit_overhead`: on every model, and leaving each model out
    in turn), re-runs the simulator with them on the orders the run achieved and on the
    intended ones (:func:`runtime_predictions` for the pooled fits without a per-model
    compute speed), and measures order repeats and gRPC reordering.

    Parameters
    ----------
    steps, xfers, traced : pandas.DataFrame
        The run's tables (:mod:`commsched.tictac.live.tables`).
    loads : sequence of Workload
        The workloads.
    params : LiveParams
        Workers, simulated iterations and seed.
    achieved : mapping
        :func:`~commsched.tictac.live.workload.achieved_ranks` of the run's results.
    say : callable, optional
        Progress messages (the fitted overheads).
    processing : pandas.DataFrame, optional
        :func:`~commsched.tictac.live.grpcorder.processing_order`'s table of the captured
        steps.

    Returns
    -------
    summary : pandas.DataFrame
        :func:`summarize`'s table with every prediction.
    metrics : dict of str to float
        :func:`metrics` of it, with the order repeats, the gRPC reordering (delivered at
        the workers, and sent at the PS with ``processing``) and the fitted overheads.

    Raises
    ------
    CommschedError
        As :func:`fit_overhead` and
        :meth:`~commsched.tictac.live.workload.Workload.predict_achieved`.
    """
    ov = fit_overhead(xfers, traced, steps)
    factors = workload_compute_factors(traced)
    say(f"fitted overhead: {ov}; compute factor per workload: {factors}")
    own = {w.group_id: dataclasses.replace(ov, compute_factor=factors[w.model, w.mode],
                                           contention=0.0, sender_fallback=0.0,
                                           worker_noise=0.0)
           for w in loads}
    fitted = {w.group_id: w.predict_achieved(params.workers, own[w.group_id],
                                             achieved[w.group_id])
              for w in progress(loads, "predictions with the fitted overhead")}
    intended = {w.group_id: w.predict(params.workers, params.sim_iterations, params.seed,
                                      own[w.group_id])
                for w in progress(loads, "predictions of the intended orders")}
    models = sorted({w.model for w in loads})
    held_out = ({m: fit_overhead(xfers, traced, steps, exclude_model=m)
                 for m in progress(models, "leave-one-model-out fits")}
                if len(models) > 1 else {})
    loo = {w.group_id: w.predict_achieved(params.workers, held_out[w.model],
                                          achieved[w.group_id])
           for w in loads if w.model in held_out}
    runtime = runtime_predictions(loads, params, ov, held_out)
    summary = summarize(steps, xfers, loads, params.workers, fitted, loo or None, intended,
                        runtime)
    nominal = net.parse_rate(loads[0].bandwidth) if loads else math.nan
    values = metrics(summary, arrival_order_repeats(xfers), out_of_order_rate(xfers),
                     {**{k: v for k, v in dataclasses.asdict(ov).items() if v is not None},
                      **{f"compute_factor.{m}.{mo}": f for (m, mo), f in factors.items()},
                      "rate_fraction_of_nominal":
                      ov.rate_Bps / nominal},
                     processing_out_of_order(processing) if processing is not None else None)
    return summary, values
