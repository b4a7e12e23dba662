"""EchelonFlow core facts: Table 1 from the arrangement functions, Fig. 2, optimality gaps.

Three results of Pan et al. (HotNets 2022) and one of our own, each from a run:

* Table 1 (:func:`commsched.echelon.arrangement.table1`, with our 1F1B row) as a table, and
  per paradigm the metrics ``echelon_core.table1.<paradigm>.coflow_compliant`` (1/0) and
  ``.arrangement_code`` (0 same, 1 staggered flows, 2 staggered Coflows);
* Fig. 2 (:func:`fig2`): three 2-byte activations on a 1 byte/s link, produced every
  T = 1 s from 1 s, consumed by a successor taking T per micro-batch. Per policy (fair
  sharing, Varys' ``sebf`` -- the flows as one Coflow --, every EchelonFlow scheduler, the
  exact optimum) the finish times, the tardiness against the GPipe ideal times (Eq. 6) and the
  successor's phase end (simulated, not from Property 1); metrics
  ``echelon_core.fig2.<policy>.{tardiness_s,phase_end_s,excess_over_optimum_s}`` (the
  last: tardiness minus the optimum's) and the ratio
  ``echelon_core.fig2.coflow_over_fair_phase_end`` (``sebf`` over ``fair``);
* optimality gaps (:func:`commsched.echelon.exact.optimality_gaps`): seeded random small
  instances on a big switch, every policy beside the exact optimum; metrics
  ``echelon_core.gaps.<policy>.{mean_ratio,max_ratio,frac_optimal}`` (optimal: within
  1e-6 absolute) and ``echelon_core.gaps.instances``;
* Property 2 (:func:`property2_metrics`): on seeded random single Coflows (Eq. 5: every
  flow's ideal finish time is the common release), the exact minimum tardiness equals the
  minimum Coflow completion time minus the release, the busiest port's bytes / its rate on
  a big switch; metrics ``echelon_core.property2.{instances,max_abs_diff_s}``.

Run as ``python -m commsched.echelon.experiments.core --seed 0 --instances 30 --hosts 3
--groups 3 --flows-per-group 2 --table1 T.csv --fig2 F.csv --gaps G.csv --metrics M.csv``.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pandas as pd

from commsched import driver
from commsched.echelon import arrangement as arr
from commsched.echelon.exact import POLICIES, optimality_gaps, solve_exact
from commsched.echelon.model import EchelonFlow, simulate_echelonflows
from commsched.sim.flow import big_switch

__all__ = ["OPTIMAL_TOL", "FigureConfig", "fig2", "fig2_table", "gap_metrics", "main",
           "property2_metrics", "table1_metrics"]


#: A policy is optimal on an instance when its objective is within this of the optimum.
OPTIMAL_TOL = 1e-6


@dataclass(frozen=True)
class FigureConfig(driver.FigureConfig):
    """Parameters of ``notebooks/echelon_core.ipynb``, checked before plotting.

    ``figure`` and the checks: see :class:`~commsched.driver.FigureConfig`.

    Parameters
    ----------
    fig2 : str
        The Fig. 2 table (:func:`fig2_table`).
    gaps : str
        The optimality gaps table (:func:`commsched.echelon.exact.optimality_gaps`).
    """

    fig2: str
    gaps: str
    WHAT: ClassVar[str] = "echelon core"
    HINT: ClassVar[str] = "run the echelon_core rule first"


def fig2(offset: np.ndarray, t: float = 1.0, b: float = 1.0) -> EchelonFlow:
    """Fig. 2's flows: activation ``j`` of ``2b`` bytes released at ``(j+1) t`` from host
    0 to host 1, with the given arrangement ``offset``.

    Parameters
    ----------
    offset : numpy.ndarray
        Three offsets, seconds (:class:`~commsched.echelon.model.EchelonFlow`), e.g.
        :func:`commsched.echelon.arrangement.gpipe` ``(3, t)``.
    t : float, optional
        The successor's compute time per micro-batch, seconds (> 0).
    b : float, optional
        The link's bandwidth, bytes/s (> 0); each activation is ``2b`` bytes.

    Returns
    -------
    EchelonFlow
        Named ``fig2``.

    Raises
    ------
    CommschedError
        ``offset`` is not three finite numbers, or ``b`` is not positive.

    References
    ----------
    .. [1] Pan et al., "EchelonFlow", HotNets 2022, Sec. 2.1, Fig. 2.
    """
    return EchelonFlow([0, 0, 0], [1, 1, 1], [2 * b] * 3, [t, 2 * t, 3 * t], offset,
                       name="fig2")


def _successor_end(finish: np.ndarray, t: float) -> float:
    end = -math.inf
    for e in finish:
        end = max(end, float(e)) + t
    return end


def fig2_table(t: float = 1.0, b: float = 1.0) -> pd.DataFrame:
    """One row per policy on Fig. 2 (module docstring), on a ``b`` bytes/s link.

    Parameters
    ----------
    t : float, optional
        Seconds per micro-batch, as in :func:`fig2`.
    b : float, optional
        Link rate, bytes/s.

    Returns
    -------
    pandas.DataFrame
        ``policy`` (every entry of :data:`commsched.echelon.exact.POLICIES`, then
        ``optimum``), ``finish_0..2`` (s), ``tardiness_s`` (max over the flows of finish
        minus the GPipe ideal finish, Def. 3.3) and ``phase_end_s`` (when the successor
        ends its last micro-batch).

    References
    ----------
    .. [1] Pan et al., "EchelonFlow", HotNets 2022, Fig. 2, Defs. 3.2-3.3.
    """
    net = big_switch(2, b)
    ech = fig2(arr.gpipe(3, t), t, b)
    runs: dict[str, np.ndarray] = {}
    for name, make in POLICIES.items():
        runs[name] = simulate_echelonflows(net, [ech], make()).finish
    runs["optimum"] = solve_exact(net, [ech]).finish
    rows = []
    for name, fin in runs.items():
        rows.append({"policy": name, **{f"finish_{j}": float(fin[j]) for j in range(3)},
                     "tardiness_s": float(np.max(fin - ech.ideal)),
                     "phase_end_s": _successor_end(fin, t)})
    return pd.DataFrame(rows)


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in text.lower()).replace("___", "_")


def table1_metrics(table: pd.DataFrame) -> dict[str, float]:
    """Table 1's rows as metrics (module docstring).

    Parameters
    ----------
    table : pandas.DataFrame
        :func:`commsched.echelon.arrangement.table1`'s table.

    Returns
    -------
    dict of str to float
        ``echelon_core.table1.<paradigm>.coflow_compliant`` (1.0 or 0.0) and
        ``.arrangement_code`` (the position of the row's text in
        :data:`commsched.echelon.arrangement.ARRANGEMENT_TEXT`).

    Raises
    ------
    KeyError
        An arrangement text not in ``ARRANGEMENT_TEXT``.

    References
    ----------
    .. [1] Pan et al., "EchelonFlow", HotNets 2022, Table 1.
    """
    code = {v: k for k, v in enumerate(arr.ARRANGEMENT_TEXT.values())}
    out: dict[str, float] = {}
    for row in table.itertuples(index=False):
        key = f"echelon_core.table1.{_slug(str(row.paradigm))}"
        out[f"{key}.coflow_compliant"] = float(bool(row.coflow_compliance))
        out[f"{key}.arrangement_code"] = float(code[str(row.arrangement)])
    return out


def gap_metrics(gaps: pd.DataFrame) -> dict[str, float]:
    """The optimality gaps summarized per policy (module docstring).

    Parameters
    ----------
    gaps : pandas.DataFrame
        One row per instance and policy, from
        :func:`commsched.echelon.exact.optimality_gaps`.

    Returns
    -------
    dict of str to float
        ``echelon_core.gaps.instances`` and, per policy, the mean and largest ratio to
        the optimum and the share of instances within :data:`OPTIMAL_TOL` seconds of it.
    """
    out: dict[str, float] = {"echelon_core.gaps.instances": float(gaps["instance"].nunique())}
    for policy, g in gaps.groupby("policy", sort=True):
        key = f"echelon_core.gaps.{policy}"
        out[f"{key}.mean_ratio"] = float(g["ratio"].mean())
        out[f"{key}.max_ratio"] = float(g["ratio"].max())
        out[f"{key}.frac_optimal"] = float((g["gap"] <= OPTIMAL_TOL).mean())
    return out


def property2_metrics(seed: int, instances: int, hosts: int, flows: int
                      ) -> dict[str, float]:
    """Property 2 on random single Coflows: minimum tardiness = minimum CCT - release.

    Each instance is one Coflow (Eq. 5 arrangement, :func:`commsched.echelon.arrangement.
    coflow`) of ``flows`` flows between random distinct host pairs, integer sizes 1-4
    bytes, one release 0-3 s, on a big switch of 1 byte/s ports. Its minimum tardiness is
    solved exactly (:func:`commsched.echelon.exact.solve_exact`); its minimum completion
    time after the release is the busiest port's bytes (a port cannot send or receive
    faster, and on a non-blocking switch a schedule finishing every flow then exists).

    Parameters
    ----------
    seed : int
        Seeds every choice.
    instances : int
        Number of Coflows.
    hosts : int
        Hosts of the switch (>= 2).
    flows : int
        Flows per Coflow (at most :data:`commsched.echelon.exact.MAX_EXACT_FLOWS`).

    Returns
    -------
    dict
        ``echelon_core.property2.instances`` and ``.max_abs_diff_s``, the largest
        ``|minimum tardiness - (minimum CCT - release)|`` over the instances (s).

    References
    ----------
    EchelonFlow (Pan et al., HotNets 2022), Sec. 3.3, Property 2 (EchelonFlow is a
    superset of Coflow) and Sec. 4, Eq. 5.
    """
    rng = np.random.default_rng(seed)
    net = big_switch(hosts, 1.0)
    worst = 0.0
    for _ in range(instances):
        src = rng.integers(0, hosts, size=flows)
        dst = (src + rng.integers(1, hosts, size=flows)) % hosts
        size = rng.integers(1, 5, size=flows).astype(float)
        release = float(rng.integers(0, 4))
        h = EchelonFlow(src, dst, size, [release] * flows, arr.coflow(flows), name="coflow")
        load = np.zeros(2 * hosts)
        np.add.at(load, src, size)
        np.add.at(load, hosts + dst, size)
        worst = max(worst, abs(solve_exact(net, [h]).objective - float(load.max())))
    return {"echelon_core.property2.instances": float(instances),
            "echelon_core.property2.max_abs_diff_s": worst}


def main(argv: Sequence[str] | None = None) -> int:
    """Write Table 1, Fig. 2 per policy, the optimality gaps and their metrics.

    Parameters
    ----------
    argv : sequence of str, optional
        ``--seed S --instances N --hosts H --groups G --flows-per-group F --table1 T.csv
        --fig2 F.csv --gaps G.csv --metrics M.csv`` (the ``echelon_core`` config section
        as flags, checked against the config schema).

    Returns
    -------
    int
        0, or 2 after a one-line error (a value the schema rejects).
    """
    p = driver.parser(__name__, __doc__)
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--instances", type=int, required=True, help="random instances for gaps")
    p.add_argument("--hosts", type=int, required=True)
    p.add_argument("--groups", type=int, required=True, help="EchelonFlows per instance")
    p.add_argument("--flows-per-group", type=int, required=True)
    p.add_argument("--table1", required=True, help="output CSV: Table 1")
    p.add_argument("--fig2", required=True, help="output CSV: Fig. 2 per policy")
    p.add_argument("--gaps", required=True, help="output CSV: per instance and policy")
    p.add_argument("--metrics", required=True, help="output CSV: metrics")
    a = p.parse_args(argv)

    def body() -> None:
        cfg = driver.config_section("echelon_core", {
            "seed": a.seed, "instances": a.instances, "hosts": a.hosts, "groups": a.groups,
            "flows_per_group": a.flows_per_group})
        t1 = arr.table1(extended=True)
        f2 = fig2_table()
        gaps = optimality_gaps(a.seed, a.instances, a.hosts, a.groups, a.flows_per_group)
        metrics = table1_metrics(t1)
        for row in f2.itertuples(index=False):
            metrics[f"echelon_core.fig2.{row.policy}.tardiness_s"] = float(row.tardiness_s)
            metrics[f"echelon_core.fig2.{row.policy}.phase_end_s"] = float(row.phase_end_s)
        opt = float(f2.set_index("policy").loc["optimum", "tardiness_s"])
        for row in f2.itertuples(index=False):
            metrics[f"echelon_core.fig2.{row.policy}.excess_over_optimum_s"] = \
                float(row.tardiness_s) - opt
        end = f2.set_index("policy")["phase_end_s"]
        metrics["echelon_core.fig2.coflow_over_fair_phase_end"] = float(
            end["sebf"] / end["fair"])
        metrics.update(gap_metrics(gaps))
        # Coflows of two groups' flows: 4 flows by default, 0.1 s each (6: 0.5 s)
        metrics.update(property2_metrics(a.seed, a.instances, a.hosts,
                                         2 * a.flows_per_group))
        driver.write_outputs({a.table1: t1, a.fig2: f2, a.gaps: gaps}, metrics, a.metrics, cfg)

    return driver.run("echelon_core", body)

if __name__ == "__main__":
    sys.exit(main())
