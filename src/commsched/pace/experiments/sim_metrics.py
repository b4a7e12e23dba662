"""The headline numbers of PACE Sec. VI in simulation, from the experiment tables.

:func:`headline_metrics` reads the tables of :mod:`commsched.pace.experiments.sim`
(``fig2``, ``workers``, ``bandwidth``, ``usage``, ``scale``) and names every number the
claims compare (``papers/claims/pace-sim.yaml``): PACE's speed gain over each baseline
(Figs. 8, 9 and our compute-scale sweep), the bandwidth above which each policy's speed is
stable (Fig. 9), PACE's scaling with the workers (Fig. 8) and the idle valleys of the
channel (Fig. 10).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import pandas as pd

__all__ = ["FEW_MS", "LEAST_GAIN_MODEL", "PAPER_POLICIES", "headline_metrics"]

#: The paper's baselines (Sec. VI-B) and PACE; the claims compare these.
PAPER_POLICIES = ("wfbp", "horovod-0.20", "tictac", "pace")
#: The model on which PACE gains least over Horovod at 10 Gbit/s (Sec. VI-C, Fig. 8).
LEAST_GAIN_MODEL = "resnet50"
#: "A few milliseconds" (Sec. VI-E, Fig. 10 valleys), our reading: at most one 5 ms bin.
FEW_MS = 5.0


def _gain(df: pd.DataFrame, model: str, over: str, **where: float) -> float:
    d = df[(df.model == model) & (df.policy == over)]
    for k, v in where.items():
        d = d[np.isclose(d[k], v)]
    if d.empty:
        return math.nan
    return float(d.pace_gain_pct.mean())


def headline_metrics(tables: Mapping[str, pd.DataFrame]) -> dict[str, float]:
    """The numbers the claims compare (``pace_sim.*``), from the experiment tables.

    Parameters
    ----------
    tables : mapping
        ``{experiment: table}`` of any of ``fig2``, ``workers``, ``bandwidth``,
        ``usage``, ``scale`` (:mod:`commsched.pace.experiments.sim`).

    Returns
    -------
    dict
        Every metric the given tables yield, named ``pace_sim.<name>`` (below).

    Notes
    -----
    The metrics:

    * ``fig2.<strategy>_reduction_pct``: iteration time reduction over FIFO.
    * ``workers.<model>.gain_vs_<policy>_pct``: PACE's speed gain over a policy at the
      Fig. 8 bandwidth, averaged over the worker counts; ``workers.gain_vs_<policy>_setting_
      {min,max}_pct``: the smallest and largest gain over every (model, worker count)
      setting, against which the paper's ranges ("20%-36% ... across the 4 benchmark
      models", Sec. VI-C) are read; ``workers.resnet50_least_gain_vs_horovod-0.20_frac``:
      the share of worker counts at which ResNet-50's gain over Horovod is the smallest of
      the models (Sec. VI-C: much higher speed than Horovod "except ResNet50").
    * ``bandwidth.<model>.gain_vs_<policy>_<B>gbps_pct``: at each bandwidth of Fig. 9.
    * ``bandwidth.<model>.<policy>_bw95_gbps``: the smallest bandwidth where the policy
      reaches 95% of its highest speed in the sweep ("speed stable above"); ``bandwidth.
      pace_bw95_max_gbps`` the largest over the models.
    * ``bandwidth.low_bw_spread_max_pct``: at the lowest bandwidth, the largest relative
      spread (max/min - 1) of the paper's four policies' speeds over the models.
    * ``workers.pace_scaling_min``: over the models, the smallest ratio of PACE's speed per
      worker at the most workers to that at the fewest (1 = linear scaling, Fig. 8).
    * ``bandwidth.pace_earliest_bw95_frac``: the share of models where PACE's ``bw95`` is
      at or below that of every other paper baseline (ties count).
    * ``usage.<model>.<policy>_longest_valley_ms`` (Fig. 10); ``usage.pace_valley_few_ms_
      frac``: the share of models whose longest PACE valley is at most :data:`FEW_MS`;
      ``usage.pace_shorter_valley_frac``: the share where it is shorter than Horovod's.
    * ``scale.<model>.gain_vs_<policy>_x<s>_pct``: at ``s`` times the calibrated compute.

    References
    ----------
    PACE (Bao et al., INFOCOM 2020), Sec. II-C (Fig. 2) and Sec. VI-B to VI-E (Figs. 8-10).
    """
    out: dict[str, float] = {}
    if "fig2" in tables:
        for _, r in tables["fig2"].iterrows():
            out[f"pace_sim.fig2.{r.strategy}_reduction_pct"] = float(r.reduction_pct)
    base = [p for p in PAPER_POLICIES if p != "pace"]
    if "workers" in tables:
        df = tables["workers"]
        for policy in sorted(set(df.policy) - {"pace"}):
            for model in sorted(set(df.model)):
                out[f"pace_sim.workers.{model}.gain_vs_{policy}_pct"] = _gain(df, model, policy)
            setting = df[df.policy == policy].pace_gain_pct
            out[f"pace_sim.workers.gain_vs_{policy}_setting_min_pct"] = float(setting.min())
            out[f"pace_sim.workers.gain_vs_{policy}_setting_max_pct"] = float(setting.max())
        hv = df[df.policy == "horovod-0.20"]
        if LEAST_GAIN_MODEL in set(hv.model):
            least = [d.loc[d.pace_gain_pct.idxmin()].model == LEAST_GAIN_MODEL
                     for _, d in hv.groupby("n_workers")]
            out[f"pace_sim.workers.{LEAST_GAIN_MODEL}_least_gain_vs_horovod-0.20_frac"] = \
                float(np.mean(least))
        eff = []
        for _, d in df[df.policy == "pace"].groupby("model"):
            lo, hi = d.loc[d.n_workers.idxmin()], d.loc[d.n_workers.idxmax()]
            eff.append((hi.speed / hi.n_workers) / (lo.speed / lo.n_workers))
        out["pace_sim.workers.pace_scaling_min"] = float(min(eff))
    if "bandwidth" in tables:
        df = tables["bandwidth"]
        bw95 = []
        earliest = []
        for model in sorted(set(df.model)):
            for policy in sorted(set(df.policy)):
                d = df[(df.model == model) & (df.policy == policy)].sort_values(
                    "bandwidth_gbps")
                if policy != "pace":
                    for b, g in zip(d.bandwidth_gbps, d.pace_gain_pct, strict=True):
                        out[f"pace_sim.bandwidth.{model}.gain_vs_{policy}_{b:g}gbps_pct"] = \
                            float(g)
                top = d.speed.max()
                b95 = float(d[d.speed >= 0.95 * top].bandwidth_gbps.min())
                out[f"pace_sim.bandwidth.{model}.{policy}_bw95_gbps"] = b95
                if policy == "pace":
                    bw95.append(b95)
            others = [out[f"pace_sim.bandwidth.{model}.{p}_bw95_gbps"] for p in base
                      if p in set(df.policy)]
            earliest.append(bw95[-1] <= min(others, default=math.inf))
        out["pace_sim.bandwidth.pace_bw95_max_gbps"] = float(max(bw95))
        out["pace_sim.bandwidth.pace_earliest_bw95_frac"] = float(np.mean(earliest))
        low = df[np.isclose(df.bandwidth_gbps, df.bandwidth_gbps.min())
                 & df.policy.isin(PAPER_POLICIES)]
        spread = low.groupby("model").speed.agg(lambda s: s.max() / s.min() - 1.0) * 100
        out["pace_sim.bandwidth.low_bw_gbps"] = float(df.bandwidth_gbps.min())
        out["pace_sim.bandwidth.low_bw_spread_max_pct"] = float(spread.max())
    if "usage" in tables:
        df = tables["usage"]
        for (model, policy), d in df.groupby(["model", "policy"]):
            out[f"pace_sim.usage.{model}.{policy}_longest_valley_ms"] = float(
                d.longest_valley_ms.iloc[0])
        valley = df.groupby(["model", "policy"]).longest_valley_ms.first()
        models = sorted(set(df.model))
        if "pace" in set(df.policy):
            few = [valley[(m, "pace")] <= FEW_MS for m in models]
            out["pace_sim.usage.pace_valley_few_ms_frac"] = float(np.mean(few))
        if {"pace", "horovod-0.20"} <= set(df.policy):
            shorter = [valley[(m, "pace")] < valley[(m, "horovod-0.20")] for m in models]
            out["pace_sim.usage.pace_shorter_valley_frac"] = float(np.mean(shorter))
    if "scale" in tables:
        df = tables["scale"]
        for model in sorted(set(df.model)):
            for s in sorted(set(df.compute_factor)):
                for policy in base:
                    out[f"pace_sim.scale.{model}.gain_vs_{policy}_x{s:g}_pct"] = _gain(
                        df, model, policy, compute_factor=s)
    return out
