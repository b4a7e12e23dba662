"""Live placement: Laich's partitions and per-device orders executed on a TensorFlow cluster.

The thesis (and :mod:`commsched.placement.experiments.thesis`) only simulates. Here each
traced graph of ``placement_live.traces`` (from ``data/traces``) runs on the K devices of a
thesis device file (``placement_live.device_csv``, :func:`commsched.io.thesis.
read_devices`) emulated as hosts (:mod:`commsched.cluster.emulated`: one TensorFlow task
per thesis device, each in its own network namespace; one intra-op and one inter-op
thread per task, so a task runs one op at a time like a thesis device). Links
(:func:`commsched.placement.live.predict.nominal_rates`): where the file gives every pair
the same rate, every host link is shaped by ``tbf`` to ``bandwidth`` (both ends: a
full-duplex port per host); where its rates differ, each directed pair ``(i, j)`` is a
link of its own at the file's rate times :data:`~commsched.placement.live.predict.
RATE_UNIT_BPS` (one rate unit = one byte per microsecond, the live problem's units: ``125``
is 1 Gbit/s): task ``i``'s ``eth0`` gets one ``htb`` class per peer chosen by a ``u32``
filter on the peer's address (:func:`commsched.cluster.net.shape_peers`; ``bandwidth``
for everything else). The planner and the simulator use the same rates:

1. **Plan.** The trace becomes a thesis problem in real units (microseconds, bytes;
   :func:`commsched.placement.traced.problem_from_trace` with ``measured``; the per-op
   overhead of the trace itself added) on the file's devices (speeds relative to the
   fastest, its memories) and the nominal link rates (:func:`commsched.placement.live.
   predict.live_cluster`). Every partitioner x scheduler runs as in the thesis
   (:func:`commsched.placement.run.run_all`, thesis semantics, no send operations); the
   placement gives each op its task, the simulated schedule gives each device's order,
   enforced by control dependencies, and each op of at least ``slow_min_us`` traced time
   on a slower device gets its device's slow-down (:mod:`commsched.placement.live.
   mapping`; a busy-wait of ``1/r - 1`` times the op's live duration, built by
   :func:`commsched.placement.live.job.slow_down`).
2. **Run.** One client in the first worker's namespace, its task the session's master
   (:mod:`commsched.placement.live.job`), rebuilds each graph with the tracer's builder
   (random weights, the traced shapes and names), applies each configuration (the steps
   of every model's configurations interleaved) and times ``steps`` steps after
   ``warmup`` (their median is reported), then traces ``trace_steps`` steps (op devices,
   transfers, bytes allocated). Two calibration configurations per model run first
   (:mod:`~commsched.placement.live.predict`). The cluster is torn down on every exit
   path.
3. **Predict.** From each graph with the op times of a trace taken with the live
   tasks' threads (``--op-time-dir``: rule ``placement_live_trace``, one intra-op and
   one inter-op thread; the plans keep the planning trace's, the thesis' Ch. 7 graph),
   the overheads fitted on the calibration configurations only
   (:func:`commsched.placement.live.predict.calibrate` and
   :func:`~commsched.placement.live.predict.pooled_fit`) go into the simulator, which predicts
   every configuration's step from its placement and enforced order (with per-pair links,
   the fitted rate of the fastest pair scaled by each pair's file rate, so the simulator
   sees the ratios the links were shaped to); error = predicted /
   measured median - 1 (and, beside it, against the fastest measured step, the one least
   disturbed by other work on a shared machine). Beside each model's own fit, every
   configuration is also predicted with one fit over every model's calibration
   (``predicted_runtime_s``, ``error_runtime``) and, with two or more models, with the
   fit over the *other* models' calibration only (``predicted_lomo_s``, ``error_lomo``:
   :func:`commsched.placement.live.predict.lomo_fits`; the model's ops take their traced
   time times the others' compute factor). Metrics: the first model's under the names
   they had with one model (``placement_live.median_abs_error``, ``fit.*``, the
   rankings), every model's under ``placement_live.<trace>.``, and over every model's
   combinations ``placement_live.error{,_runtime,_lomo}_{median,max}_abs_pct``.

Memory: each task's peak in a traced step is measured from TensorFlow's allocation records
(:func:`commsched.placement.live.job.peak_bytes`: the running sum of every allocation and
free on the task) plus the bytes of the configuration's variables placed there, and
checked against the device file's ``RAM``: ``memory_use`` is the largest peak / RAM over
the devices, a configuration above 1 is named on stderr and counted in
``placement_live.memory_exceeded`` (the run goes on: the thesis' memory model is static
and other than TensorFlow's). The metrics also have the peak resident memory (``VmHWM``)
of each task's process over the whole run, mostly the TensorFlow runtime.

Without root or namespace support (or with ``placement_live.enabled: false``) nothing runs:
the tables hold one row ``skipped: <reason>`` and the metrics table is empty; an enabled
configuration is still planned first, so bad input (a missing trace, a device memory that
cannot hold a colocation group) is a one-line error everywhere. Run as
``python -m commsched.placement.experiments.live --config-json '{...}' --trace-dir DIR
--op-time-dir DIR --table T.csv --metrics M.csv``; ``--reuse`` re-analyses the job results
an earlier run left in ``--workdir`` (the plans come from ``--trace-dir`` alone, so a run's
results can be re-analysed with other op-time traces).
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from commsched import driver
from commsched.atomic import atomic_write_text
from commsched.cluster import net
from commsched.cluster.emulated import ClusterConfig, EmulatedCluster, emulated_cluster
from commsched.cluster.procs import ProcRecord, end_processes, start_time
from commsched.errors import CommschedError
from commsched.io.thesis import Devices, read_devices
from commsched.model.traced import load_trace
from commsched.placement.live.job import peak_bytes
from commsched.placement.live.mapping import (
    canonical_device,
    device_index,
    device_names,
    order_edges,
    placed_devices,
    relative_speeds,
    slowdowns,
)
from commsched.placement.live.predict import (
    CALIB_ONE,
    CALIB_SPLIT,
    Fit,
    calibrate,
    calibration_placements,
    live_cluster,
    lomo_fits,
    nominal_rates,
    placed_fraction,
    pooled_fit,
    predict,
    trace_op_overhead_us,
    with_op_times,
)
from commsched.placement.model import Options
from commsched.placement.run import run_all
from commsched.placement.traced import problem_from_trace

__all__ = ["THREADS", "main", "measured_memory", "plan_configs", "rankings", "skipped_reason"]

#: Intra-op and inter-op threads of every live task (one op at a time, like a thesis
#: device); the op-time traces (``--op-time-dir``) must have been taken with as many.
THREADS = 1


def skipped_reason(section: Mapping[str, Any], per_pair: bool = False) -> str | None:
    """Why the live placement cannot run here (None: it can).

    Parameters
    ----------
    section : mapping
        The ``placement_live`` section.
    per_pair : bool
        Whether the links have per-pair rates (``htb`` and ``u32`` needed).

    Returns
    -------
    str or None
        Disabled in the config, or :func:`commsched.cluster.net.check_support`'s (per
        pair: :func:`commsched.cluster.net.check_htb`'s) reason.
    """
    if not section["enabled"]:
        return "disabled in the config (placement_live.enabled: false)"
    return net.check_htb() if per_pair else net.check_support()


def plan_configs(g: Any, section: Mapping[str, Any], dev: Devices, devices: Sequence[str]
                 ) -> list[dict[str, Any]]:
    """The calibration configurations, then every partitioner x scheduler.

    Parameters
    ----------
    g : networkx.DiGraph
        The traced graph.
    section : mapping
        ``bandwidth``, ``slow_min_us``, ``partitioners``, ``schedulers``, ``seed``,
        ``trace_steps``, ``calib_trace_steps``.
    dev : Devices
        The device file (``device_csv``); its rates where they differ per pair, else
        ``bandwidth`` (:func:`~commsched.placement.live.predict.nominal_rates`).
    devices : sequence of str
        TensorFlow device of each thesis device (:func:`~commsched.placement.live.mapping.
        device_names`).

    Returns
    -------
    list of dict
        Per configuration: ``name``, ``partitioner``, ``scheduler``, ``device`` (array),
        ``control`` (node pairs), ``placed`` and ``control`` by op name and ``slow`` (op ->
        busy-wait factor; none for the calibration configurations, which run at host
        speed) for the job, the thesis' simulated ``makespan_us``, ``traffic`` and
        ``sim_peak_bytes``.

    Raises
    ------
    CommschedError
        A unit that fits no device, a placement onto a missing device, an unknown name.
    """
    k = dev.n
    names = list(g.nodes)
    p = problem_from_trace(g, measured=True, op_overhead_us=trace_op_overhead_us(g))
    c = live_cluster(dev.speed, dev.ram,
                     nominal_rates(dev.rates, net.parse_rate(section["bandwidth"]))[0])
    durations = [float(g.nodes[v]["duration"]) for v in names]
    handles = {i for i, v in enumerate(names) if g.nodes[v].get("op_type") == "VarHandleOp"}
    out: list[dict[str, Any]] = []
    for name, placement in calibration_placements(p, k).items():
        out.append({"name": name, "partitioner": name, "scheduler": "tensorflow",
                    "device": placement, "control_idx": [], "slow": {},
                    "trace_steps": int(section["calib_trace_steps"])})
    runs = run_all(p, c, section["partitioners"], section["schedulers"],
                   Options(seed=int(section["seed"]), send_ops=0.0), record_memory=False)
    for r in runs:
        out.append({"name": f"{r.partitioner}-{r.scheduler}", "partitioner": r.partitioner,
                    "scheduler": r.scheduler, "device": r.placement,
                    "control_idx": order_edges(r.exec_graph, r.schedule, p.n, handles),
                    "slow": slowdowns(names, durations, r.placement, relative_speeds(dev.speed),
                                      float(section["slow_min_us"])),
                    "trace_steps": int(section["trace_steps"]),
                    "makespan_us": r.makespan, "traffic": r.traffic,
                    "sim_peak_bytes": max(r.schedule.peak_memory)})
    for cfg in out:
        cfg["placed"] = placed_devices(names, cfg["device"], devices)
        cfg["control"] = [(names[a], names[b]) for a, b in cfg["control_idx"]]
    return out


def _plan_model(name: str, g: Any, configs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One model's part of the job's plan (:mod:`commsched.placement.live.job`)."""
    meta = g.graph["meta"]
    return {"name": name,
            "trace": {x: meta[x] for x in ("model", "mode", "batch", "size", "seed")},
            "configs": [{"name": x["name"], "placed": x["placed"], "control": x["control"],
                         "slow": x["slow"], "trace_steps": x["trace_steps"]} for x in configs]}


def _run_client(c: EmulatedCluster, plan: Mapping[str, Any], workdir: Path, deadline: float,
                say: Callable[[str], None]) -> list[dict[str, Any]]:
    """Run the job client in task 0's namespace; end it on every exit path."""
    workdir.mkdir(parents=True, exist_ok=True)
    plan_path, out, log = workdir / "plan.json", workdir / "result.json", workdir / "client.log"
    atomic_write_text(plan_path, json.dumps(plan))
    out.unlink(missing_ok=True)
    argv = [sys.executable, "-m", "commsched.placement.live.job", "--plan", str(plan_path),
            "--out", str(out)]
    proc = c.spawn_client(0, argv, log, env={"TF_CPP_MIN_LOG_LEVEL": "1"})
    try:
        while proc.poll() is None:
            c.check()
            if time.monotonic() > deadline:
                raise CommschedError("live placement did not finish within "
                                     "placement_live.timeout_s")
            time.sleep(0.5)
        if proc.returncode != 0:
            tail = [x for x in log.read_text(errors="replace").splitlines() if x.strip()]
            raise CommschedError(f"placement client failed (exit {proc.returncode}): "
                                 f"{' | '.join(tail[-3:])}")
    finally:
        st = start_time(proc.pid)
        if proc.poll() is None and st is not None:
            end_processes([ProcRecord(proc.pid, st, "client", None, "")],
                          popens={proc.pid: proc})
    say(f"client done: {log}")
    return list(json.loads(out.read_text())["results"])


def _reused(workdir: Path, configs: Mapping[str, Sequence[Mapping[str, Any]]]
            ) -> list[dict[str, Any]]:
    """The job results an earlier run left in ``workdir`` (``--reuse``), checked against
    the plan it ran (``plan.json``): every configuration placed, ordered and slowed as
    ``configs`` (planned from ``--trace-dir``) has it."""
    path = workdir / "result.json"
    if not path.exists():
        raise CommschedError(f"{path}: no job results to reuse")
    plan_path = workdir / "plan.json"
    ran = {(m["name"], c["name"]): c for m in json.loads(plan_path.read_text())["models"]
           for c in m["configs"]} if plan_path.exists() else {}
    for m, cs in configs.items():
        for c in cs:
            x = ran.get((m, c["name"]))
            if x is not None and (x["placed"] != c["placed"] or x["slow"] != c["slow"]
                                  or x["control"] != [list(e) for e in c["control"]]):
                raise CommschedError(f"{plan_path}: {m} {c['name']} ran another plan than "
                                     "the traces of --trace-dir give")
    results = list(json.loads(path.read_text())["results"])
    have = {(r.get("model"), r["name"]) for r in results}
    missing = [f"{m} {c['name']}" for m, cs in configs.items() for c in cs
               if (m, c["name"]) not in have]
    if missing:
        raise CommschedError(f"{path}: no results of {', '.join(sorted(missing))}")
    return results


def _vm_hwm(c: EmulatedCluster) -> dict[str, float]:
    """Peak resident bytes (``VmHWM``) of each server process, by host."""
    out = {}
    for rec in c.state.processes:
        if rec.role.startswith("client"):
            continue
        try:
            lines = Path(f"/proc/{rec.pid}/status").read_text().splitlines()
        except OSError:
            continue
        for x in lines:
            if x.startswith("VmHWM:"):
                out[rec.role] = float(x.split()[1]) * 1024
    return out


def measured_memory(g: Any, placement: Sequence[int], result: Mapping[str, Any], k: int
                    ) -> list[float]:
    """Each device's real peak memory in a configuration's traced steps.

    Parameters
    ----------
    g : networkx.DiGraph
        The traced graph (its ``variables``: bytes of each variable's handle op).
    placement : sequence of int
        Device of every node (``g.nodes`` order).
    result : mapping
        The configuration's job result (``traced``: node stats by device, with
        ``alloc_records``).
    k : int
        Devices.

    Returns
    -------
    list of float
        Per device: the bytes of the variables placed there plus the largest running sum
        of the step's allocations and frees there
        (:func:`commsched.placement.live.job.peak_bytes`), the largest over the steps.

    References
    ----------
    Laich 2017, Sec. 4.1 (a device's memory must hold what is placed on it).
    """
    variables = g.graph.get("variables", {})
    peak = [0.0] * k
    for i, v in enumerate(g.nodes):
        if v in variables:
            peak[int(placement[i])] += float(variables[v]["bytes"])
    index = device_index(k)
    step_peak = [0.0] * k
    for step in result["traced"]:
        for name, b in peak_bytes(step).items():
            d = index.get(canonical_device(name))
            if d is not None:
                step_peak[d] = max(step_peak[d], b)
    return [a + b for a, b in zip(peak, step_peak, strict=True)]


def rankings(table: pd.DataFrame, col: str) -> dict[str, float]:
    """The thesis' rankings on one column of step times (``live_s`` or ``predicted_s``).

    Parameters
    ----------
    table : pandas.DataFrame
        One row per partitioner x scheduler.
    col : str
        The column to rank.

    Returns
    -------
    dict of str to float
        ``pct_best_frac``: fraction of partitioners whose fastest scheduler is PCT (ties
        count); ``bs_hashing_worst``: 1 if Batch Split and Hashing are the two slowest
        partitioners (mean over schedulers), else 0; ``heft_over_mite``: HEFT's mean step
        over MITE's. Keys whose members were not run are left out.

    References
    ----------
    Laich 2017, Sec. 7.2 (PCT best, Batch Split and Hashing worst, HEFT vs MITE).
    """
    out: dict[str, float] = {}
    piv = table.pivot_table(index="partitioner", columns="scheduler", values=col)
    if "pct" in piv.columns and piv.shape[1] > 1:
        out["pct_best_frac"] = float((piv["pct"] <= piv.min(axis=1) + 1e-12).mean())
    mean = piv.mean(axis=1).sort_values()
    if {"batch_split", "hashing"} <= set(mean.index) and len(mean) > 2:
        out["bs_hashing_worst"] = float(set(mean.index[-2:]) == {"batch_split", "hashing"})
    if {"heft", "mite"} <= set(mean.index):
        out["heft_over_mite"] = float(mean["heft"] / mean["mite"])
    return out


def _rows(g: Any, configs: Sequence[Mapping[str, Any]], by_name: Mapping[str, Any],
          dev: Devices, fits: Mapping[str, Fit | None], say: Callable[[str], None]
          ) -> list[dict[str, Any]]:
    """One model's table rows; ``fits``: the fit of each prediction column (None: NaN)."""
    k = dev.n
    rows = []
    for cfg in configs:
        r = by_name[cfg["name"]]
        live = statistics.median(r["steps_s"])
        mem = measured_memory(g, cfg["device"], r, k)
        use = [m / cap if cap > 0 else float("inf") for m, cap in zip(mem, dev.ram, strict=True)]
        worst = max(range(k), key=lambda i: use[i])
        if use[worst] > 1:
            say(f"memory exceeded: {cfg['name']} peaks at {mem[worst]:.4g} bytes on device "
                f"{worst}, whose RAM in the device file is {dev.ram[worst]}")
        pred = {col: float("nan") if f is None else
                predict(g, cfg["device"], cfg["control_idx"], cfg["slow"], k, f)
                for col, f in fits.items()}
        rows.append({
            "partitioner": cfg["partitioner"], "scheduler": cfg["scheduler"],
            "calibration": cfg["name"] in (CALIB_ONE, CALIB_SPLIT),
            "live_s": live, "live_min_s": min(r["steps_s"]), "live_max_s": max(r["steps_s"]),
            "steps": len(r["steps_s"]), "predicted_s": pred["own"],
            "error": pred["own"] / live - 1,
            "error_vs_min": pred["own"] / min(r["steps_s"]) - 1,
            "predicted_runtime_s": pred["runtime"], "error_runtime": pred["runtime"] / live - 1,
            "predicted_lomo_s": pred["lomo"], "error_lomo": pred["lomo"] / live - 1,
            "thesis_makespan_us": cfg.get("makespan_us", float("nan")),
            "traffic_bytes": cfg.get("traffic", float("nan")),
            "devices_used": len(set(int(x) for x in cfg["device"])),
            "control_edges": len(cfg["control"]),
            "slowed_ops": len(cfg["slow"]),
            "placed_frac": placed_fraction(r, cfg["placed"]),
            "sim_peak_bytes": cfg.get("sim_peak_bytes", float("nan")),
            "live_peak_bytes_max": max(mem),
            "memory_use": use[worst],
            "init_s": r["init_s"],
        })
    return rows


def _error_metrics(combos: pd.DataFrame, prefix: str) -> dict[str, float]:
    """Median and largest |error| of each prediction column, in percent, where there."""
    out = {}
    for col in ("error", "error_runtime", "error_lomo"):
        err = combos[col].abs().dropna()
        if not err.empty:
            out[f"{prefix}{col}_median_abs_pct"] = 100 * float(err.median())
            out[f"{prefix}{col}_max_abs_pct"] = 100 * float(err.max())
    return out


def _table(graphs: Mapping[str, Any], configs: Mapping[str, Sequence[Mapping[str, Any]]],
           results: Sequence[Mapping[str, Any]], dev: Devices, rates: np.ndarray,
           per_pair: bool, say: Callable[[str], None]) -> tuple[pd.DataFrame, dict[str, float]]:
    """The run's table and metrics; ``rates``, ``per_pair``: :func:`nominal_rates`'s;
    ``graphs``: the planning traces with the op times the prediction uses
    (:func:`commsched.placement.live.predict.with_op_times`).

    Every model's configurations are predicted three ways: with its own calibration
    (``predicted_s``, ``error``: its ops' live times), with one fit over every model's
    calibration (``_runtime``) and with the other models' only (``_lomo``, NaN with one
    model): :func:`commsched.placement.live.predict.pooled_fit`, :func:`~commsched.
    placement.live.predict.lomo_fits`.
    """
    k = dev.n
    by_model: dict[str, dict[str, Any]] = {m: {} for m in graphs}
    for r in results:
        by_model[r["model"]][r["name"]] = r
    cals = {m: calibrate(g, by_model[m], k, rates) for m, g in graphs.items()}
    own = {m: pooled_fit([c], own_op_times=True) for m, c in cals.items()}
    runtime = pooled_fit(list(cals.values()))
    lomo = lomo_fits(cals)
    for m in graphs:
        say(f"fit {m}: " + ", ".join(f"{x} {v:.4g}" for x, v in own[m].as_dict().items()))
        if m in lomo:
            say(f"fit without {m}: " + ", ".join(f"{x} {v:.4g}"
                                                 for x, v in lomo[m].as_dict().items()))
    tables = []
    for m, g in graphs.items():
        rows = _rows(g, configs[m], by_model[m], dev,
                     {"own": own[m], "runtime": runtime, "lomo": lomo.get(m)}, say)
        tables.append(pd.DataFrame(rows).assign(model=m))
    table = pd.concat(tables, ignore_index=True)
    table = table[["model"] + [c for c in table.columns if c != "model"]]
    all_combos = table[~table["calibration"]]
    first = next(iter(graphs))
    combos = all_combos[all_combos["model"] == first]
    # the first model's numbers under the names they had with one model
    values: dict[str, float] = {f"placement_live.fit.{x}": v
                                for x, v in own[first].as_dict().items()}
    values["placement_live.median_abs_error"] = float(combos["error"].abs().median())
    values["placement_live.max_abs_error"] = float(combos["error"].abs().max())
    values["placement_live.median_abs_error_vs_min"] = float(
        combos["error_vs_min"].abs().median())
    values["placement_live.within_15pct_frac"] = float((combos["error"].abs() <= 0.15).mean())
    values["placement_live.sim_peak_over_live_peak_median"] = float(
        (combos["sim_peak_bytes"] / combos["live_peak_bytes_max"]).median())
    for col, tag in (("live_s", "live"), ("predicted_s", "sim")):
        for key, v in rankings(combos, col).items():
            values[f"placement_live.{tag}.{key}"] = v
    values["placement_live.combinations"] = float(len(combos))
    # every model
    values["placement_live.models"] = float(len(graphs))
    values["placement_live.memory_use_max"] = float(table["memory_use"].max())
    values["placement_live.memory_exceeded"] = float((table["memory_use"] > 1).sum())
    values["placement_live.placed_frac_min"] = float(table["placed_frac"].min())
    values.update(_error_metrics(all_combos, "placement_live."))
    values.update({f"placement_live.runtime_fit.{x}": v for x, v in runtime.as_dict().items()})
    for m in graphs:
        values.update(_error_metrics(all_combos[all_combos["model"] == m],
                                     f"placement_live.{m}."))
        values.update({f"placement_live.{m}.fit.{x}": v for x, v in own[m].as_dict().items()})
        if m in lomo:
            values.update({f"placement_live.{m}.lomo_fit.{x}": v
                           for x, v in lomo[m].as_dict().items()})
    off = rates[~np.eye(k, dtype=bool)]
    values["placement_live.per_pair_links"] = float(per_pair)
    values["placement_live.link_min_Bps"] = float(off.min())
    values["placement_live.link_max_Bps"] = float(off.max())
    return table, values


def main(argv: Sequence[str] | None = None) -> int:
    """Run the live placement (or say why it is skipped) and write its table and metrics.

    Parameters
    ----------
    argv : sequence of str, optional
        The config option, ``--trace-dir``, ``--workdir``, ``--table``, ``--metrics``
        (default: ``sys.argv[1:]``).

    Returns
    -------
    int
        0, also when skipped; 2 after a one-line error on stderr.
    """
    p = driver.parser(__name__, __doc__)
    driver.add_config_options(p, "placement_live")
    p.add_argument("--trace-dir", default="data/traces", help="folder of the traced graphs")
    p.add_argument("--op-time-dir", help="folder of the same graphs traced with the live "
                   "tasks' threads, whose op times the prediction uses (default: --trace-dir)")
    driver.add_workdir_options(p, "plan, client log, job results", "results/placement_live/run")
    p.add_argument("--table", required=True, help="per-configuration table (CSV)")
    p.add_argument("--metrics", required=True, help="metrics table (CSV)")
    args = p.parse_args(argv)

    def body() -> None:
        section = driver.section_from_options(args, "placement_live")
        reason, per_pair = None, False
        if section["enabled"]:  # bad input is an error also where the run is skipped
            graphs = {m: load_trace(driver.trace_file(args.trace_dir, m))
                      for m in section["traces"]}
            timed = {m: g if args.op_time_dir is None else with_op_times(
                         g, load_trace(driver.trace_file(args.op_time_dir, m)), THREADS)
                     for m, g in graphs.items()}
            dev = read_devices(section["device_csv"])
            k = dev.n
            if not 2 <= k <= 8:
                raise CommschedError(f"{section['device_csv']}: {k} devices; the live "
                                     "placement runs 2 to 8 (one TensorFlow task each)")
            # device names depend only on the cluster's shape: plan before it is up
            shape = {"ps": ["-"], "worker": ["-"] * (k - 1)}
            configs = {m: plan_configs(g, section, dev, device_names(shape))
                       for m, g in graphs.items()}
            rates, per_pair = nominal_rates(dev.rates, net.parse_rate(section["bandwidth"]))
        if not args.reuse or not section["enabled"]:
            reason = skipped_reason(section, per_pair)
        if reason:
            driver.write_skipped("live placement", reason, [args.table], args.metrics, section)
            return
        t = time.perf_counter()
        cfg = ClusterConfig(n_ps=1, n_workers=k - 1, bandwidth=section["bandwidth"],
                            burst=section["burst"], latency=section["latency"], threads=THREADS,
                            pair_rates=tuple(tuple(map(float, r)) for r in rates)
                            if per_pair else None)
        hwm: dict[str, float] = {}
        loads: dict[str, float] = {}
        if args.reuse:
            results = _reused(Path(args.workdir), configs)
        else:
            deadline = time.monotonic() + float(section["timeout_s"])
            with emulated_cluster(cfg, timeout=float(section["timeout_s"])) as c:
                off = rates[~np.eye(k, dtype=bool)]
                driver.say(f"cluster {c.run_id} up: {c.spec}; links "
                    + (f"per pair, {off.min() * 8 / 1e6:g}-{off.max() * 8 / 1e6:g} Mbit/s"
                       if per_pair else f"all {section['bandwidth']}"))
                plan = {"models": [_plan_model(m, g, configs[m]) for m, g in graphs.items()],
                        "target": c.targets[0], "devices": device_names(c.spec),
                        "warmup": section["warmup"], "steps": section["steps"],
                        "timeout_s": section["step_timeout_s"], "threads": THREADS}
                load = os.getloadavg()[0]
                results = _run_client(c, plan, Path(args.workdir), deadline, driver.say)
                hwm = _vm_hwm(c)
                loads = {"placement_live.load_start": load,
                         "placement_live.load_end": os.getloadavg()[0]}
        table, values = _table(timed, configs, results, dev, rates, per_pair, driver.say)
        values.update(loads)
        for host, b in hwm.items():
            values[f"placement_live.vm_hwm_mib.{host}"] = b / 2**20
        out_cfg = {**section, "wall_s": round(time.perf_counter() - t, 1)}
        driver.write_outputs({args.table: table}, values, args.metrics, out_cfg)
        driver.say(table.to_string(index=False))
        driver.say("\n".join(f"{k} {v:.4g}" for k, v in values.items()))

    return driver.run("placement_live", body)


if __name__ == "__main__":
    sys.exit(main())
