"""The thesis' evaluation (Laich 2017, Ch. 6-7) with every partitioner and scheduler.

=============  ==========================================================  ================
experiment     what runs (settings from the ``placement:`` config)          thesis
=============  ==========================================================  ================
``table71``    the six synthetic graphs at full size: counts vs Table 7.1   Table 7.1
``synthetic``  graphs 1-6 on ``devices`` (100) devices, ``runs`` runs       Figs. 7.1-7.3
``tensorflow`` traced CNN / RNN / dynamic RNN on 50 devices, ``runs`` runs  Figs. 7.4-7.6
``seven``      graphs 2, 3 and two traced graphs on 7 devices; the Gantt    Figs. 7.7-7.10
               chart and executable-node counts of run 0
``metrics``    the comparative statements of Ch. 7 and 10 as numbers       claims
=============  ==========================================================  ================

Our setup (where the thesis is silent or we differ):

* Synthetic graphs: :func:`commsched.trace.synthetic.level_dag` with Table 7.1's levels,
  nodes per level and edge level limit, and its counts as targets (nodes, level edges,
  random edges, colocated nodes); weights uniform in 1-100 (Sec. 6.2); no device
  constraints (the thesis does not give their share). ``full: true`` (the default) runs
  Table 7.1's sizes and the thesis' run counts (10 synthetic, 100 TensorFlow runs);
  ``full: false`` the reduced profile, whose ``scale`` < 1 multiplies the number of levels
  and every count.
* Devices: :func:`commsched.placement.model.random_devices` (Sec. 6.2), a new device set
  per run (seed ``seed + run``): the thesis averages runs that differ by its code's
  non-deterministic orders, which ``thesis`` semantics does not have. Under
  ``published-code`` the run also seeds those orders.
* TensorFlow graphs: our traces (:mod:`commsched.placement.traced`), plus the thesis-format
  CSV graphs listed in ``tensorflow.thesis_csv`` that exist (by default the published CNN
  graph in ``../shared/thesis-data/``, which may not be redistributed: a listed file that
  is missing is skipped with a message in the log, so the pipeline needs no file outside
  the repository).
* Partitioning time: wall clock of the partitioner in this process (Figs. 7.3, 7.6 use
  milliseconds of the Java code); other jobs share the machine.

The ``cfg`` the runners take is the ``placement:`` section of the experiment config
(``schemas/``), already checked. Their *run tables* have one row per graph, run, semantics,
partitioner and device scheduler: ``makespan`` and ``traffic`` (Eqs. 2.1, 2.2, in the
graph's units), ``partition_s`` (seconds), ``nodes``, ``edges``, ``devices``.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from commsched import driver
from commsched.errors import CommschedError
from commsched.io.thesis import read_graph
from commsched.model.traced import load_trace
from commsched.placement import DEVICE_SCHEDULERS, PARTITIONERS, Options, Problem
from commsched.placement.model import Cluster, random_devices
from commsched.placement.run import partition, run_all
from commsched.placement.traced import problem_from_trace
from commsched.results import read_table, write_metrics, write_table
from commsched.trace.synthetic import level_dag

__all__ = [
    "EXPERIMENTS",
    "FIGURE_KINDS",
    "METRICS_TABLES",
    "TABLE71",
    "FigureConfig",
    "headline_metrics",
    "main",
    "run_seven",
    "run_synthetic",
    "run_tensorflow",
    "synthetic_graph",
    "table71",
]

EXPERIMENTS = ("table71", "synthetic", "tensorflow", "seven")

#: Table 7.1: nodes, edges, random edges, level edges, levels, min and max nodes per level,
#: edge level limit, colocated nodes.
TABLE71: dict[int, dict[str, int]] = {
    k: dict(zip(("nodes", "edges", "random_edges", "level_edges", "levels", "min_per_level",
                 "max_per_level", "level_limit", "colocated"), v, strict=True))
    for k, v in {
        1: (36319, 16076, 8003, 8073, 300, 50, 200, 20, 5200),
        2: (18168, 25148, 5015, 20133, 300, 20, 100, 20, 2762),
        3: (7475, 49510, 0, 49510, 1000, 5, 10, 3, 263),
        4: (9899, 42486, 21099, 21387, 200, 20, 80, 10, 1945),
        5: (10440, 47414, 23535, 23879, 200, 20, 80, 10, 4768),
        6: (26887, 107144, 53423, 53721, 500, 10, 100, 20, 4214),
    }.items()
}


def synthetic_graph(k: int, scale: float, seed: int) -> Any:
    """Table 7.1 graph ``k`` (levels and counts times ``scale``) from the level generator.

    Parameters
    ----------
    k : int
        The graph's number in Table 7.1, 1-6.
    scale : float
        Factor on the levels and every count, > 0 (1.0: the thesis' size); nodes stay within
        the levels' per-level bounds.
    seed : int
        Base seed; the generator gets ``seed + k``.

    Returns
    -------
    networkx.DiGraph
        A thesis-format graph (:func:`commsched.trace.synthetic.level_dag`).

    Raises
    ------
    KeyError
        ``k`` is not in :data:`TABLE71`.

    References
    ----------
    .. [1] Laich, B.Sc. thesis, Stuttgart 2017, Sec. 6.2 and Table 7.1.
    """
    t = TABLE71[k]
    levels = max(1, round(t["levels"] * scale))
    nodes = min(max(round(t["nodes"] * scale), levels * t["min_per_level"]),
                levels * t["max_per_level"])
    return level_dag(levels=levels, min_per_level=t["min_per_level"],
                     max_per_level=t["max_per_level"], max_level_distance=t["level_limit"],
                     nodes=nodes, level_edges=round(t["level_edges"] * scale),
                     long_range_edges=round(t["random_edges"] * scale),
                     colocated_nodes=round(t["colocated"] * scale), cpu_prob=0.0,
                     gpu_prob=0.0, seed=seed + k)


def table71(seed: int) -> pd.DataFrame:
    """Counts of the six full-size graphs beside Table 7.1's.

    Parameters
    ----------
    seed : int
        Base seed of :func:`synthetic_graph`.

    Returns
    -------
    pandas.DataFrame
        One row per graph and count (``nodes``, ``edges``, ``random_edges``, ``level_edges``,
        ``colocated``): ``thesis``, ``ours`` and ``rel_err = (ours - thesis) / thesis``.
    """
    rows = []
    for k, t in TABLE71.items():
        g = synthetic_graph(k, 1.0, seed)
        groups = pd.Series([a for _, a in g.nodes(data="colocation")]).value_counts()
        ours = {"nodes": g.number_of_nodes(), "edges": g.number_of_edges(),
                "random_edges": g.graph["edge_counts"]["long_range"],
                "level_edges": g.graph["edge_counts"]["level"],
                "colocated": int(groups[groups > 1].sum())}
        for key, value in ours.items():
            rows.append({"graph": k, "count": key, "thesis": t[key], "ours": value,
                         "rel_err": (value - t[key]) / t[key] if t[key] else 0.0})
    return pd.DataFrame(rows)


def _settings(cfg: Mapping[str, Any], part: str) -> dict[str, Any]:
    """The ``placement.<part>`` settings, with the thesis' sizes when ``full``."""
    s = dict(cfg[part])
    if cfg["full"]:
        s.update(s.pop("full", {}))
    s.pop("full", None)
    return s


def _devices(cfg: Mapping[str, Any], n: int, seed: int) -> Cluster:
    d = cfg["devices"]
    return random_devices(n, seed, cpu_prob=d["cpu_prob"], speed=tuple(d["speed"]),
                          rate=tuple(d["rate"]), memory_scale=d["memory_scale"])


def _runs(problems: Mapping[str, Problem], cfg: Mapping[str, Any], n_devices: int, runs: int,
          schedulers: Sequence[str], log: str, keep_first: bool = False,
          ) -> tuple[pd.DataFrame, dict[str, Any]]:
    """The run table; with ``keep_first`` also the results (executed graphs, schedules) of
    run 0 under thesis semantics. One partitioner's results are held at a time: at the
    thesis' sizes those of all 21 combinations of one run take over a gigabyte."""
    rows = []
    keep: dict[str, Any] = {}
    _warm_up(cfg, _devices(cfg, n_devices, cfg["seed"]))
    for name, p in problems.items():
        for r in range(runs):
            c = _devices(cfg, n_devices, cfg["seed"] + r)
            for sem in cfg["semantics"]:
                opts = Options(sem, cfg["seed"] + r, float(cfg["send_ops"]))
                for x in (x for pn in PARTITIONERS
                          for x in run_all(p, c, [pn], list(schedulers), opts)):
                    rows.append({"graph": name, "run": r, "semantics": sem,
                                 "partitioner": x.partitioner, "scheduler": x.scheduler,
                                 "makespan": x.makespan, "traffic": x.traffic,
                                 "partition_s": x.partition_s, "nodes": p.n,
                                 "edges": p.n_edges, "devices": n_devices})
                    if keep_first and r == 0 and sem == "thesis":
                        keep[f"{name}|{x.partitioner}|{x.scheduler}"] = x
            driver.say(f"{log}: {name} run {r} done")
    return pd.DataFrame(rows), keep


def _warm_up(cfg: Mapping[str, Any], c: Cluster) -> None:
    """Run every partitioner once, under each configured semantics, on a graph of a few
    nodes, so that no timed run (``partition_s``, Figs. 7.3 and 7.6) pays for loading or
    compiling the numba kernels behind it: a process's first call of a compiled partitioner
    took 0.3 s or more from the cache (seconds on a fresh clone), which made the first
    graph's standard deviation larger than its mean."""
    tiny = Problem.from_thesis(synthetic_graph(3, 0.002, cfg["seed"]))
    for sem in cfg["semantics"]:
        for pn in PARTITIONERS:
            partition(tiny, c, pn, Options(sem, cfg["seed"], float(cfg["send_ops"])))


def run_synthetic(cfg: Mapping[str, Any]) -> pd.DataFrame:
    """Figs. 7.1-7.3: every combination on the synthetic graphs.

    Parameters
    ----------
    cfg : mapping
        The placement config (module docstring); reads ``synthetic``, ``devices``,
        ``semantics``, ``seed``, ``send_ops`` and ``full``.

    Returns
    -------
    pandas.DataFrame
        The run table.
    """
    s = _settings(cfg, "synthetic")
    problems = {f"graph {k}": Problem.from_thesis(synthetic_graph(k, s["scale"], cfg["seed"]))
                for k in s["graphs"]}
    return _runs(problems, cfg, s["devices"], s["runs"], list(DEVICE_SCHEDULERS), "synthetic")[0]


def _trace_problems(names: Sequence[str], trace_dir: str) -> dict[str, Problem]:
    out = {}
    for name in names:
        model = name.split("-")[0].removeprefix("thesis_")
        out[model] = problem_from_trace(load_trace(driver.trace_file(trace_dir, name)))
    return out


def run_tensorflow(cfg: Mapping[str, Any], trace_dir: str) -> pd.DataFrame:
    """Figs. 7.4-7.6: the traced TensorFlow graphs (and any thesis-format CSV graphs).

    Parameters
    ----------
    cfg : mapping
        The placement config; reads ``tensorflow`` (``traces``, ``thesis_csv``, ``devices``,
        ``runs``) and the shared settings.
    trace_dir : str
        Folder of the traced graphs (:func:`commsched.driver.trace_file`).

    Returns
    -------
    pandas.DataFrame
        The run table, one graph per trace and per CSV graph found.

    Raises
    ------
    GraphError
        A listed trace is missing or not a traced graph.
    CommschedError
        A thesis-format CSV graph that exists is malformed (:func:`commsched.io.thesis.read_graph`).
    """
    s = _settings(cfg, "tensorflow")
    problems = _trace_problems(s["traces"], trace_dir)
    for csv in s["thesis_csv"]:
        if not Path(csv).is_file():
            driver.say(f"tensorflow: thesis-format graph {csv} not found, skipped (optional, "
                       "not redistributable)")
            continue
        problems[f"{Path(csv).stem} (thesis csv)"] = Problem.from_thesis(read_graph(csv))
    return _runs(problems, cfg, s["devices"], s["runs"], list(DEVICE_SCHEDULERS), "tensorflow")[0]


def run_seven(cfg: Mapping[str, Any], trace_dir: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Figs. 7.7-7.10: four graphs on seven devices, and the Gantt table of run 0.

    Parameters
    ----------
    cfg : mapping
        The placement config; reads ``seven`` (``synthetic``, ``scale``, ``traces``,
        ``devices``, ``runs``, ``gantt_scheduler``) and the shared settings.
    trace_dir : str
        Folder of the traced graphs.

    Returns
    -------
    runs : pandas.DataFrame
        The run table.
    gantt : pandas.DataFrame
        Every decision of run 0 under thesis semantics and ``gantt_scheduler``: ``graph``,
        ``partitioner``, ``scheduler``, ``device``, ``node``, ``kind``, ``start``, ``end``
        and ``executable`` (nodes executable on the device before the decision, Fig. 7.10).

    Raises
    ------
    GraphError
        A listed trace is missing or not a traced graph.
    """
    s = _settings(cfg, "seven")
    problems = {f"graph {k}": Problem.from_thesis(synthetic_graph(k, s["scale"], cfg["seed"]))
                for k in s["synthetic"]}
    problems.update(_trace_problems(s["traces"], trace_dir))
    df, keep = _runs(problems, cfg, s["devices"], s["runs"], list(DEVICE_SCHEDULERS), "seven",
                     keep_first=True)
    gantt_scheduler = DEVICE_SCHEDULERS.canonical(s["gantt_scheduler"])
    rows = []
    kinds = ("compute", "send", "recv")
    for key, x in keep.items():
        graph, part, sched = key.split("|")
        if sched != gantt_scheduler:
            continue
        eg, sc = x.exec_graph, x.schedule
        for d, t, ready, node in sc.decisions:
            rows.append({"graph": graph, "partitioner": part, "scheduler": sched, "device": d,
                         "node": node, "kind": kinds[eg.kind[node]], "start": t,
                         "end": sc.end[node], "executable": ready})
    return df, pd.DataFrame(rows)


def _mean(df: pd.DataFrame, value: str) -> pd.DataFrame:
    return (df[df.semantics == "thesis"]
            .groupby(["graph", "partitioner", "scheduler"], as_index=False)[value].mean())


def _frac(xs: Sequence[bool]) -> float:
    return float(np.mean(xs)) if len(xs) else float("nan")


def headline_metrics(synthetic: pd.DataFrame, tensorflow: pd.DataFrame, seven: pd.DataFrame,
                     gantt: pd.DataFrame, t71: pd.DataFrame) -> dict[str, float]:
    """The numbers the claims in ``papers/claims/placement.yaml`` compare.

    Thesis semantics unless a name says otherwise; means over runs.

    Parameters
    ----------
    synthetic, tensorflow, seven : pandas.DataFrame
        The run tables of :func:`run_synthetic`, :func:`run_tensorflow` and
        :func:`run_seven`; every partitioner and the schedulers ``fifo``, ``msr``, ``pct``
        must be present.
    gantt : pandas.DataFrame
        The Gantt table of :func:`run_seven`.
    t71 : pandas.DataFrame
        :func:`table71`'s table.

    Returns
    -------
    dict of str to float
        ``placement.<experiment>.<statement>``: fractions in [0, 1], ratios, or 1.0/0.0
        for a yes/no statement; a metric whose graphs are absent is left out.

    References
    ----------
    .. [1] Laich, B.Sc. thesis, Stuttgart 2017, Ch. 7 (Secs. 7.1, 7.2, Figs. 7.1-7.10)
       and Ch. 10.
    """
    m: dict[str, float] = {}
    m["placement.table71.max_abs_rel_err"] = float(t71.rel_err.abs().max())
    # PCT best with (almost) every partitioner (Sec. 7.1, Ch. 10), by far (Ch. 10)
    other_over_pct: list[float] = []
    for tag, df in (("synthetic", synthetic), ("tensorflow", tensorflow), ("seven", seven)):
        ms = _mean(df, "makespan").pivot_table(index=["graph", "partitioner"],
                                                columns="scheduler", values="makespan")
        other_over_pct += list(ms[["fifo", "msr"]].min(axis=1) / ms["pct"])
        best = ms.min(axis=1)
        m[f"placement.{tag}.pct_best_frac"] = _frac(list(ms["pct"] <= best * (1 + 1e-9)))
        m[f"placement.{tag}.fifo_worst_frac"] = _frac(list(ms["fifo"] >= ms.max(axis=1)))
        tr = df.groupby(["semantics", "graph", "run", "partitioner"]).traffic.agg(["min", "max"])
        m[f"placement.{tag}.traffic_scheduler_spread"] = float(
            ((tr["max"] - tr["min"]) / tr["max"].clip(lower=1e-12)).max())
    m["placement.best_other_scheduler_over_pct"] = float(np.mean(other_over_pct))
    # MSR slightly better than PCT in some runs with MITE and Hashing on graphs 1-2 (Sec. 7.1)
    runs = synthetic[(synthetic.semantics == "thesis")
                     & synthetic.graph.isin(["graph 1", "graph 2"])
                     & synthetic.partitioner.isin(["mite", "hashing"])].pivot_table(
        index=["graph", "partitioner", "run"], columns="scheduler", values="makespan")
    if len(runs):
        m["placement.synthetic.msr_beats_pct_runs_g12_mite_hashing_frac"] = _frac(
            list(runs["msr"] < runs["pct"] * (1 - 1e-9)))
    tf_pct = _mean(tensorflow[tensorflow.scheduler == "pct"], "makespan").pivot_table(
        index="graph", columns="partitioner", values="makespan")
    ratio = tf_pct["heft"] / tf_pct["mite"] - 1
    m["placement.tensorflow.heft_over_mite_min"] = float(ratio.min())
    m["placement.tensorflow.heft_over_mite_max"] = float(ratio.max())
    pub = tensorflow[(tensorflow.semantics == "published-code") & (tensorflow.scheduler == "pct")]
    if len(pub):
        pp = pub.groupby(["graph", "partitioner"]).makespan.mean().unstack()
        pr = pp["heft"] / pp["mite"] - 1
        m["placement.tensorflow.published.heft_over_mite_min"] = float(pr.min())
        m["placement.tensorflow.published.heft_over_mite_max"] = float(pr.max())
        m["placement.tensorflow.published.cp_mite_dfs_beat_heft_frac"] = _frac(
            [pp.loc[g, k] < pp.loc[g, "heft"] for g in pp.index for k in ("cp", "mite", "dfs")])
    m["placement.tensorflow.hashing_worst_frac"] = _frac(
        list(tf_pct.idxmax(axis=1) == "hashing"))
    m["placement.tensorflow.mite_or_cp_best_frac"] = _frac(
        list(tf_pct.idxmin(axis=1).isin(["mite", "cp"])))
    m["placement.tensorflow.dfs_over_best_of_mite_cp"] = float(
        (tf_pct["dfs"] / tf_pct[["mite", "cp"]].min(axis=1)).mean())
    m["placement.tensorflow.icp_worse_than_cp_frac"] = _frac(list(tf_pct["icp"] > tf_pct["cp"]))
    m["placement.tensorflow.cp_mite_dfs_beat_heft_frac"] = _frac(
        [tf_pct.loc[g, k] < tf_pct.loc[g, "heft"] for g in tf_pct.index
         for k in ("cp", "mite", "dfs")])
    syn_pct = _mean(synthetic[synthetic.scheduler == "pct"], "makespan").pivot_table(
        index="graph", columns="partitioner", values="makespan")
    worst2 = syn_pct.apply(lambda r: set(r.nlargest(2).index), axis=1)
    m["placement.synthetic.hashing_batch_split_worst_frac"] = _frac(
        [w == {"hashing", "batch_split"} for w in worst2])
    for tag, gs in (("g12", ("graph 1", "graph 2")), ("g3", ("graph 3",)),
                    ("g56", ("graph 5", "graph 6"))):
        present = [g for g in gs if g in syn_pct.index]
        if present:
            m[f"placement.synthetic.mite_over_heft_cp_icp_{tag}"] = float(np.mean(
                [syn_pct.loc[g, "mite"] / syn_pct.loc[g, ["heft", "cp", "icp"]].mean()
                 for g in present]))
    # traffic rankings (Figs. 7.2, 7.5)
    syn_tr = _mean(synthetic, "traffic").groupby(["graph", "partitioner"]).traffic.mean()
    syn_tr = syn_tr.unstack()
    by_graph = syn_tr.mean(axis=1)  # graph 1 lowest, graph 6 highest (Fig. 7.2)
    if {"graph 1", "graph 6"} <= set(by_graph.index):
        m["placement.synthetic.traffic_g1_lowest_g6_highest"] = float(
            by_graph.idxmin() == "graph 1" and by_graph.idxmax() == "graph 6")
    middle = [f"graph {k}" for k in (3, 4, 5)]
    if {"graph 1", "graph 2", "graph 6", *middle} <= set(by_graph.index):
        # the full order of Sec. 7.1: graph 1 < graph 2 < graphs 3, 4, 5 < graph 6
        m["placement.synthetic.traffic_order_g1_g2_g345_g6"] = float(
            by_graph["graph 1"] < by_graph["graph 2"] < by_graph[middle].min()
            and by_graph[middle].max() < by_graph["graph 6"])
    m["placement.synthetic.traffic_hashing_heft_cp_worst_frac"] = _frac(
        [set(r.nlargest(3).index) == {"hashing", "heft", "cp"} for _, r in syn_tr.iterrows()])
    tf_tr = _mean(tensorflow, "traffic").groupby(["graph", "partitioner"]).traffic.mean()
    tf_tr = tf_tr.unstack()
    m["placement.tensorflow.traffic_mite_bs_dfs_best_frac"] = _frac(
        [set(r.nsmallest(3).index) == {"mite", "batch_split", "dfs"}
         for _, r in tf_tr.iterrows()])
    m["placement.tensorflow.traffic_hashing_heft_worst_frac"] = _frac(
        [set(r.nlargest(2).index) == {"hashing", "heft"} for _, r in tf_tr.iterrows()])
    m["placement.tensorflow.traffic_icp_below_cp_frac"] = _frac(list(tf_tr["icp"] < tf_tr["cp"]))
    # Batch Split's traffic, relative to Hashing's, lower on the TensorFlow graphs (Sec. 7.2)
    m["placement.batch_split_traffic_share_tf_over_synthetic"] = float(
        (tf_tr["batch_split"] / tf_tr["hashing"]).mean()
        / (syn_tr["batch_split"] / syn_tr["hashing"]).mean())
    # partitioning time (Figs. 7.3, 7.6)
    heft_over_median = {}
    for tag, df, slowest in (("synthetic", synthetic, "heft"), ("tensorflow", tensorflow, "icp")):
        pt = (df[df.semantics == "thesis"].groupby(["graph", "partitioner"]).partition_s
              .mean().unstack())
        m[f"placement.{tag}.{slowest}_slowest_frac"] = _frac(list(pt.idxmax(axis=1) == slowest))
        m[f"placement.{tag}.hashing_time_over_median"] = float(
            (pt["hashing"] / pt.median(axis=1)).mean())
        heft_over_median[tag] = float((pt["heft"] / pt.median(axis=1)).mean())
        if tag == "tensorflow":  # HEFT second slowest; Batch Split faster than MITE, DFS
            second = pt.apply(lambda r: r.nlargest(2).index[-1], axis=1)
            m["placement.tensorflow.heft_second_slowest_frac"] = _frac(list(second == "heft"))
            m["placement.tensorflow.batch_split_faster_than_mite_dfs_frac"] = _frac(
                list(pt["batch_split"] < pt[["mite", "dfs"]].min(axis=1)))
        else:  # HEFT's time orders the graphs as their node counts do (Sec. 7.1)
            nodes = synthetic.groupby("graph").nodes.first().reindex(pt.index)
            if len(pt) > 1:
                m["placement.synthetic.heft_time_nodes_rank_corr"] = float(np.corrcoef(
                    pt["heft"].rank(), nodes.rank())[0, 1])
            # MITE and DFS comparatively slow on graph 6 (many edges): time per node
            per_node = pt.div(nodes, axis=0)
            if "graph 6" in per_node.index and len(per_node) > 1:
                rest = per_node.drop(index="graph 6")
                m["placement.synthetic.mite_dfs_g6_time_per_node_ratio"] = float(np.mean(
                    [per_node.loc["graph 6", k] / rest[k].median() for k in ("mite", "dfs")]))
    # HEFT's partitioning time comparatively lower on the TensorFlow graphs (Sec. 7.2)
    m["placement.heft_time_share_tf_over_synthetic"] = (heft_over_median["tensorflow"]
                                                        / heft_over_median["synthetic"])
    # seven devices (Sec. 7.3)
    s7 = _mean(seven[seven.scheduler == "pct"], "makespan").groupby("graph").makespan.mean()
    s100 = _mean(synthetic[synthetic.scheduler == "pct"], "makespan").groupby(
        "graph").makespan.mean()
    if {"graph 2", "graph 3"} <= set(s7.index) and {"graph 2", "graph 3"} <= set(s100.index):
        m["placement.seven.g3_over_g2_makespan"] = float(s7["graph 3"] / s7["graph 2"])
        m["placement.synthetic.g3_over_g2_makespan"] = float(s100["graph 3"] / s100["graph 2"])
        t7 = _mean(seven, "traffic").groupby("graph").traffic.mean()
        m["placement.seven.g3_over_g2_traffic"] = float(t7["graph 3"] / t7["graph 2"])
        ex = gantt.groupby("graph").executable.mean()
        m["placement.seven.g2_over_g3_executable"] = float(ex["graph 2"] / ex["graph 3"])
    if "dynamic_rnn" in s7.index:
        def bs_rank(df: pd.DataFrame) -> float:
            x = _mean(df[(df.scheduler == "pct") & (df.graph == "dynamic_rnn")], "makespan")
            r = x.set_index("partitioner").makespan
            return float(r["batch_split"] / r.min())
        m["placement.seven.batch_split_over_best_dynamic_rnn"] = bs_rank(seven)
        if "dynamic_rnn" in set(tensorflow.graph):
            m["placement.tensorflow.batch_split_over_best_dynamic_rnn"] = bs_rank(tensorflow)
            m["placement.seven.batch_split_7_over_50_dynamic_rnn"] = (
                m["placement.seven.batch_split_over_best_dynamic_rnn"]
                / m["placement.tensorflow.batch_split_over_best_dynamic_rnn"])
    g2 = gantt[(gantt.graph == "graph 2") & (gantt.partitioner == "mite")]
    if len(g2):
        busy = (g2.end - g2.start).groupby(g2.device).sum()
        m["placement.seven.mite_g2_busiest_share"] = float(busy.max() / busy.sum())
    return m


#: Figures the notebooks draw (``kind`` of :class:`FigureConfig`).
FIGURE_KINDS = ("makespan", "traffic", "partition_time", "gantt", "executable")


@dataclass(frozen=True)
class FigureConfig(driver.KindFigureConfig):
    """Parameters of the ``notebooks/placement_*.ipynb`` notebooks, checked first.

    ``figure`` and the checks: see :class:`~commsched.driver.KindFigureConfig`.

    Parameters
    ----------
    table : str
        The run table (bars) or the Gantt table (seven).
    kind : str
        One of :data:`FIGURE_KINDS`: the bars of Figs. 7.1-7.8 or Figs. 7.9, 7.10.
    semantics : str
        Which semantics' rows the bars show (``thesis`` by default).

    References
    ----------
    Laich 2017, Ch. 7 (Figs. 7.1-7.10).
    """

    table: str
    kind: str
    semantics: str = "thesis"
    KINDS = FIGURE_KINDS
    WHAT = "placement"
    HINT = "run `snakemake placement`"

    def tables(self) -> dict[str, str]:
        """The input table.

        Returns
        -------
        dict of str to str
            ``{"table": path}`` (``semantics`` names rows, not a file).
        """
        return {"table": self.table}


#: The tables ``metrics`` reads (``--tables NAME=CSV``), in :func:`headline_metrics`' order.
METRICS_TABLES = ("synthetic", "tensorflow", "seven", "gantt", "table71")


def main(argv: Sequence[str] | None = None) -> int:
    """Run one experiment, or compute the headline metrics (module docstring).

    Parameters
    ----------
    argv : sequence of str, optional
        ``EXPERIMENT --config-json J [--trace-dir D] --table T.csv [--gantt G.csv]`` or
        ``metrics --tables NAME=CSV ... --metrics M.csv``.

    Returns
    -------
    int
        0, or 2 after a one-line error (a config the schema rejects, a missing option or
        table, a unit that fits no device).
    """
    p = driver.parser(__name__, __doc__)
    p.add_argument("experiment", choices=[*EXPERIMENTS, "metrics"])
    p.add_argument("--config-json", help="the placement config section as JSON")
    p.add_argument("--trace-dir", default="data/traces", help="where the traces are")
    p.add_argument("--table", help="table to write (seven: the run table)")
    p.add_argument("--gantt", help="seven: the Gantt table to write")
    p.add_argument("--tables", nargs="*", default=[], metavar="NAME=CSV",
                   help=f"metrics: the {', '.join(METRICS_TABLES)} tables")
    p.add_argument("--metrics", help="metrics table to write")
    args = p.parse_args(argv)

    def body() -> None:
        if args.experiment == "metrics":
            t = driver.named_paths(args.tables, METRICS_TABLES)
            missing = [k for k in METRICS_TABLES if k not in t]
            if missing or not args.metrics:
                raise CommschedError(f"metrics needs --metrics and --tables for "
                                     f"{', '.join(METRICS_TABLES)}")
            write_metrics(headline_metrics(*(read_table(t[k]) for k in METRICS_TABLES)),
                          args.metrics)
            return
        if args.config_json is None:
            raise CommschedError(f"{args.experiment} needs --config-json")
        cfg = driver.config_section("placement", args.config_json)
        if not args.table:
            raise CommschedError("--table is required")
        if args.experiment == "table71":
            write_table(table71(cfg["seed"]), args.table, cfg)
        elif args.experiment == "synthetic":
            write_table(run_synthetic(cfg), args.table, cfg)
        elif args.experiment == "tensorflow":
            write_table(run_tensorflow(cfg, args.trace_dir), args.table, cfg)
        else:
            if not args.gantt:
                raise CommschedError("seven needs --gantt")
            runs, gantt = run_seven(cfg, args.trace_dir)
            write_table(runs, args.table, cfg)
            write_table(gantt, args.gantt, cfg)

    return driver.run(f"placement {args.experiment}", body)


if __name__ == "__main__":
    sys.exit(main())
