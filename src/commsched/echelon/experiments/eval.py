"""The evaluation EchelonFlow's paper does not have: a multi-tenant cluster in simulation.

EchelonFlow (Pan et al., HotNets 2022) argues (Property 1, Sec. 3.3) that scheduling flows
by tardiness shortens training, but evaluates nothing. Here training jobs of every
paradigm of its Table 1 (and 1F1B pipelines, which it leaves open), built from our traced
models by :mod:`commsched.echelon.jobs`,
share an oversubscribed two-tier fabric (:func:`commsched.sim.flow.two_tier`), and each
flow scheduler named in the config (:data:`commsched.echelon.schedulers.FLOW_SCHEDULERS`: fair
sharing, Varys and the other Coflow schedulers, the EchelonFlow schedulers) runs the same
scenarios. Per job and iteration we
record iteration times, job completion times (JCT), the slowdown of each job (its JCT
over its JCT alone on the same hosts under the same scheduler: what sharing costs it) and
EchelonFlow tardiness (Eq. 2, summed per job as in Eq. 4).

Scenario (everything from the ``echelon_eval`` config section):

* the fabric: ``racks`` x ``hosts_per_rack`` hosts with ``link_Bps`` NICs, rack uplinks
  and downlinks ``oversubscription`` times thinner than the rack's hosts together;
* ``n`` jobs (the load; swept over ``jobs``), the ``k``-th job made from ``mix[k mod
  len(mix)]`` (a paradigm, a trace, its workers and its own settings), so every load
  mixes the paradigms in the same proportions;
* placement: every job's workers (and servers) on distinct hosts drawn uniformly at
  random without replacement over the whole cluster (dedicated devices, the paper's Sec.
  5 setting; random placement makes most jobs cross racks), seeded per repetition;
* arrivals: a Poisson process of mean inter-arrival ``mean_interarrival_s``, seeded;
* compute: the traced (CPU) op times times ``compute_scale`` (our assumption of how much
  faster an accelerator runs the same model); every job runs ``iterations`` iterations;
* repetitions: ``seeds``; a scenario (load, oversubscription, seed) is identical for
  every scheduler: same jobs, placement, arrivals.

Every run is checked by :func:`commsched.sim.flow.check_flow_schedule`.

Metrics (``results/metrics/echelon_eval.csv``): per scheduler ``s`` and paradigm ``p``,
``echelon_eval.s.p.iter_mean_s`` (mean iteration time over every job and iteration of
every scenario), ``echelon_eval.s.jct_mean_s``, ``echelon_eval.s.slowdown_mean``,
``echelon_eval.s.tardiness_mean_s``
(summed tardiness per scenario, averaged); and for every scheduler against every other
``b``: ``echelon_eval.s.p.iter_vs_b`` = the mean over scenarios of (mean iteration time of
``p``-jobs under ``s``) / (the same under ``b``): below 1, ``s`` is faster;
``echelon_eval.s.jct_vs_b`` (mean over jobs of the JCT ratio) and
``echelon_eval.s.tardiness_vs_b`` (mean over scenarios of the total tardiness ratio).

Run as ``python -m commsched.echelon.experiments.eval run --config-json '{...}' --traces
T1 T2 ... --jobs-table J.csv --iterations-table I.csv`` then ``python -m
commsched.echelon.experiments.eval metrics --jobs-table J.csv --iterations-table I.csv
--metrics M.csv``.
"""

from __future__ import annotations

import itertools
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from commsched import driver
from commsched.echelon.cluster_sim import run_jobs
from commsched.echelon.jobs import JobGraph, JobSpec, build_job
from commsched.echelon.profile import LayerProfile, layer_profile
from commsched.echelon.schedulers import FLOW_SCHEDULERS
from commsched.errors import CommschedError
from commsched.model.traced import load_trace
from commsched.results import read_table, write_metrics, write_table
from commsched.sim.flow import two_tier

__all__ = [
    "FigureConfig",
    "Scenario",
    "headline_metrics",
    "main",
    "make_jobs",
    "run_scenario",
    "run_sweep",
]

#: Profile blocks cut from each trace before a job merges them (>= any job's blocks).
PROFILE_BLOCKS = 16


@dataclass(frozen=True)
class Scenario:
    """One point of the sweep: ``jobs`` jobs under ``oversubscription``, repetition
    ``seed``."""

    jobs: int
    oversubscription: float
    seed: int


def _section(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """The ``echelon_eval`` section, checked against the config schema and the scheduler
    registry (which the schema cannot name)."""
    cfg = driver.config_section("echelon_eval", cfg)
    unknown = [s for s in cfg["schedulers"] if s not in FLOW_SCHEDULERS]
    if unknown:
        raise CommschedError(f"echelon_eval config: unknown schedulers {', '.join(unknown)}; "
                             f"known: {', '.join(FLOW_SCHEDULERS)}")
    return cfg


def make_jobs(cfg: Mapping[str, Any], profiles: Mapping[str, LayerProfile],
              sc: Scenario) -> list[JobGraph]:
    """The jobs of scenario ``sc`` (see the module docstring): mix, placement, arrivals.

    Parameters
    ----------
    cfg : mapping
        The checked ``echelon_eval`` section (``racks``, ``hosts_per_rack``, ``mix``,
        ``mean_interarrival_s``, ``iterations``).
    profiles : mapping of str to LayerProfile
        Per trace name (a ``mix`` entry's ``trace``), its scaled layer profile.
    sc : Scenario
        The load and the repetition; the draws are seeded by ``(sc.seed, sc.jobs)``.

    Returns
    -------
    list of JobGraph
        ``sc.jobs`` jobs, the first arriving at 0 s.

    Raises
    ------
    CommschedError
        The jobs need more hosts than the cluster has, or a ``mix`` entry names a trace
        ``profiles`` lacks.
    """
    rng = np.random.default_rng([sc.seed, sc.jobs])
    hosts = cfg["racks"] * cfg["hosts_per_rack"]
    specs = [cfg["mix"][k % len(cfg["mix"])] for k in range(sc.jobs)]
    need = sum(m["workers"] + m.get("servers", 0) for m in specs)
    if need > hosts:
        raise CommschedError(f"echelon_eval: {sc.jobs} jobs need {need} hosts, the cluster "
                             f"has {hosts}")
    order = rng.permutation(hosts)
    arrivals = np.cumsum(rng.exponential(cfg["mean_interarrival_s"], sc.jobs))
    arrivals -= arrivals[0]
    jobs, used = [], 0
    for k, m in enumerate(specs):
        n, s = m["workers"], m.get("servers", 0)
        mine = [int(h) for h in order[used:used + n + s]]
        used += n + s
        if m["trace"] not in profiles:
            raise CommschedError(f"echelon_eval: no trace {m['trace']!r} given")
        spec = JobSpec(f"{k}:{m['paradigm']}:{m['trace']}", m["paradigm"], tuple(mine[:n]),
                       tuple(mine[n:]), m.get("micro_batches", 1), m.get("blocks", 4),
                       cfg["iterations"], float(arrivals[k]))
        jobs.append(build_job(spec, profiles[m["trace"]]))
    return jobs


def run_scenario(cfg: Mapping[str, Any], profiles: Mapping[str, LayerProfile], sc: Scenario,
                 scheduler: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Jobs table and iterations table of one scenario under one scheduler.

    Every job also runs alone on the same fabric and scheduler, for its slowdown; every
    run is checked (:func:`commsched.sim.flow.check_flow_schedule`).

    Parameters
    ----------
    cfg : mapping
        The checked ``echelon_eval`` section; also reads ``link_Bps`` (bytes/s per NIC).
    profiles : mapping of str to LayerProfile
        As for :func:`make_jobs`.
    sc : Scenario
        Its ``oversubscription`` (>= 1) thins the rack links.
    scheduler : str
        A name in :data:`commsched.echelon.schedulers.FLOW_SCHEDULERS`.

    Returns
    -------
    jobs : pandas.DataFrame
        :meth:`~commsched.echelon.cluster_sim.ClusterRun.jobs_table` plus ``scheduler``,
        ``jobs``, ``oversubscription``, ``seed``, ``jct_alone_s``, ``slowdown``
        (``jct_s / jct_alone_s``), ``flows`` and ``sim_wall_s`` (seconds of simulation).
    iterations : pandas.DataFrame
        :meth:`~commsched.echelon.cluster_sim.ClusterRun.iteration_times` plus the
        scenario's keys.

    Raises
    ------
    CommschedError
        As :func:`make_jobs`, an unknown ``scheduler``, or a simulated schedule fails
        its check (:class:`~commsched.sim.flow.InvalidFlowSchedule`).
    """
    net = two_tier(cfg["racks"], cfg["hosts_per_rack"], float(cfg["link_Bps"]),
                   float(sc.oversubscription))
    jobs = make_jobs(cfg, profiles, sc)
    t0 = time.perf_counter()
    run = run_jobs(jobs, net, FLOW_SCHEDULERS[scheduler](), check=True)
    wall = time.perf_counter() - t0
    keys = {"scheduler": scheduler, "jobs": sc.jobs, "oversubscription": sc.oversubscription,
            "seed": sc.seed}
    alone = [run_jobs([j], net, FLOW_SCHEDULERS[scheduler](), check=True).jobs_table()["jct_s"]
             .iloc[0] for j in jobs]
    jt = run.jobs_table().assign(**keys, jct_alone_s=alone, flows=len(run.flows),
                                 sim_wall_s=wall)
    jt["slowdown"] = jt["jct_s"] / jt["jct_alone_s"]
    it = run.iteration_times().assign(**keys)
    return jt, it


def run_sweep(cfg: Mapping[str, Any], traces: Sequence[str],
              progress: Callable[[str], None] = lambda s: None
              ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Every scenario under every configured scheduler.

    Parameters
    ----------
    cfg : mapping
        The experiment config; its ``echelon_eval`` section is checked here.
    traces : sequence of str
        Traced graph files (``<name>.json.gz``); only those the ``mix`` names are read.
    progress : callable, optional
        Called with one line per scenario and scheduler.

    Returns
    -------
    jobs, iterations : pandas.DataFrame
        :func:`run_scenario`'s tables, concatenated.

    Raises
    ------
    CommschedError
        The section fails the schema or names an unknown scheduler, or as
        :func:`run_scenario`.
    GraphError
        A trace file is not a traced graph.
    """
    cfg = _section(cfg)
    scale = float(cfg["compute_scale"])
    by_name = {Path(t).name.removesuffix(".json.gz"): t for t in traces}
    profiles = {name: layer_profile(load_trace(by_name[name]), PROFILE_BLOCKS).scaled(scale)
                for name in sorted({m["trace"] for m in cfg["mix"]}) if name in by_name}
    jobs_rows, iter_rows = [], []
    for n, o, seed in itertools.product(cfg["jobs"], cfg["oversubscription"], cfg["seeds"]):
        sc = Scenario(int(n), float(o), int(seed))
        for s in cfg["schedulers"]:
            jt, it = run_scenario(cfg, profiles, sc, s)
            progress(f"{sc} {s}: {len(jt)} jobs, JCT mean {jt['jct_s'].mean():.4g} s")
            jobs_rows.append(jt)
            iter_rows.append(it)
    return pd.concat(jobs_rows, ignore_index=True), pd.concat(iter_rows, ignore_index=True)


def headline_metrics(jobs: pd.DataFrame, iterations: pd.DataFrame) -> dict[str, float]:
    """The metrics of the module docstring.

    Parameters
    ----------
    jobs, iterations : pandas.DataFrame
        :func:`run_sweep`'s tables (read back from CSV).

    Returns
    -------
    dict of str to float
        ``echelon_eval.<scheduler>[.<paradigm>].<metric>``: means in seconds, the mean
        slowdown, and the ``_vs_<other>`` ratios (below 1: faster than ``other``).

    References
    ----------
    .. [1] Pan et al., "EchelonFlow", HotNets 2022, Sec. 3.2 (Eqs. 2 and 4, tardiness)
       and Sec. 3.3 (Property 1).
    """
    out: dict[str, float] = {}
    scen = ["jobs", "oversubscription", "seed"]
    per = (iterations.groupby(["scheduler", "paradigm", *scen])["iteration_s"].mean()
           .rename("it").reset_index())
    schedulers = sorted(jobs["scheduler"].unique())
    for s in schedulers:
        j = jobs[jobs["scheduler"] == s]
        out[f"echelon_eval.{s}.jct_mean_s"] = float(j["jct_s"].mean())
        out[f"echelon_eval.{s}.slowdown_mean"] = float(j["slowdown"].mean())
        out[f"echelon_eval.{s}.tardiness_mean_s"] = float(
            j.groupby(scen)["tardiness_s"].sum().mean())
        for p, grp in iterations[iterations["scheduler"] == s].groupby("paradigm"):
            out[f"echelon_eval.{s}.{p}.iter_mean_s"] = float(grp["iteration_s"].mean())
    for s, b in itertools.permutations(schedulers, 2):
        mine = per[per["scheduler"] == s].set_index(["paradigm", *scen])["it"]
        base = per[per["scheduler"] == b].set_index(["paradigm", *scen])["it"]
        ratio = (mine / base).dropna()
        for p, r in ratio.groupby(level="paradigm"):
            out[f"echelon_eval.{s}.{p}.iter_vs_{b}"] = float(r.mean())
        js = jobs[jobs["scheduler"] == s].set_index(["job", *scen])["jct_s"]
        jb = jobs[jobs["scheduler"] == b].set_index(["job", *scen])["jct_s"]
        out[f"echelon_eval.{s}.jct_vs_{b}"] = float((js / jb).dropna().mean())
        ts = jobs[jobs["scheduler"] == s].groupby(scen)["tardiness_s"].sum()
        tb = jobs[jobs["scheduler"] == b].groupby(scen)["tardiness_s"].sum()
        out[f"echelon_eval.{s}.tardiness_vs_{b}"] = float((ts / tb).dropna().mean())
    return out


#: The figures of the notebook: iteration-time distributions per paradigm, their ratios to
#: fair sharing per scenario, and slowdown and tardiness against load and oversubscription.
FIGURE_KINDS = ("iterations", "ratios", "sweep")


@dataclass(frozen=True)
class FigureConfig(driver.KindFigureConfig):
    """Parameters of ``notebooks/echelon_eval.ipynb``, checked before plotting.

    ``figure`` and the checks: see :class:`~commsched.driver.KindFigureConfig`.

    Parameters
    ----------
    jobs : str
        The per-job table (:func:`run_sweep`).
    iterations : str
        The per-iteration table.
    kind : str
        The figure, one of :data:`FIGURE_KINDS` (default ``"iterations"``).
    """

    jobs: str
    iterations: str
    kind: str = "iterations"
    WHAT: ClassVar[str] = "echelon_eval"
    HINT: ClassVar[str] = "run snakemake echelon_eval first"
    KINDS: ClassVar[tuple[str, ...]] = FIGURE_KINDS


def main(argv: Sequence[str] | None = None) -> int:
    """Run the sweep (``run``) or summarize its tables as metrics (``metrics``).

    Parameters
    ----------
    argv : sequence of str, optional
        ``run --config-json J --traces ... --jobs-table J.csv --iterations-table I.csv``
        or ``metrics --jobs-table J.csv --iterations-table I.csv --metrics M.csv``.

    Returns
    -------
    int
        0, or 2 after a one-line error (a config the schema rejects, an unknown
        scheduler, a missing trace or table).
    """
    p = driver.parser(__name__, __doc__)
    p.add_argument("step", choices=["run", "metrics"])
    driver.add_config_options(p, "echelon_eval")
    driver.add_trace_options(p, "the mix's traces")
    p.add_argument("--jobs-table", required=True, help="per-job table (CSV)")
    p.add_argument("--iterations-table", required=True, help="per-iteration table (CSV)")
    p.add_argument("--metrics", help="metrics: the metrics table to write (CSV)")
    args = p.parse_args(argv)

    def body() -> None:
        if args.step == "metrics":
            if not args.metrics:
                raise CommschedError("metrics needs --metrics")
            jobs, its = read_table(args.jobs_table), read_table(args.iterations_table)
            write_metrics(headline_metrics(jobs, its), args.metrics,
                          {"jobs": args.jobs_table, "iterations": args.iterations_table})
            return
        cfg = _section(driver.section_from_options(args, "echelon_eval"))
        traces = args.traces or [driver.trace_file(args.trace_dir, m["trace"]) for m in cfg["mix"]]
        jobs, its = run_sweep(cfg, traces, progress=driver.say)
        write_table(jobs, args.jobs_table, cfg)
        write_table(its, args.iterations_table, cfg)

    return driver.run(f"echelon_eval {args.step}", body)

if __name__ == "__main__":
    sys.exit(main())
