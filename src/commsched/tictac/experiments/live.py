"""Live experiment: TIC and TAC enforced in a real TensorFlow parameter-server cluster.

TicTac (Hashemi, Jyothi & Campbell, SysML 2019) measured its gains on a real cluster with
the order enforced inside TensorFlow's runtime (Sec. 5-6). This driver does the same on an
emulated cluster (:mod:`commsched.cluster`: P servers and N workers in network namespaces,
every link shaped to the configured bandwidth) or on a real one (``live.hosts``), and puts
the simulator's prediction beside every measurement.

For every configured model and mode (inference, training):

1. **Orders.** The model's trace at the live batch and thread settings (written by
   ``commsched trace``, rule ``live_trace``; matched by its ``meta``) becomes a
   parameter-server view (:func:`commsched.views.ps_view`, P servers, links of the
   model's bandwidth);
   :func:`commsched.tictac.tic` and :func:`commsched.tictac.tac` rank its recvs, and each
   recv's priority becomes its variable's (:func:`commsched.tictac.live.order.variable_priorities`).
2. **Configs.** ``baseline`` (hook ``none``: TensorFlow's own order) and one config per
   order and hook (``tic-sender``, ``tac-dag``, ...), all measured in the same worker
   processes with interleaved steps (:mod:`commsched.tictac.live.job`).
3. **Prediction.** The multi-worker simulator (:mod:`commsched.tictac.sim`) runs the
   same view with N workers sharing each server's channel. On the view as traced
   (``predicted_nominal_s``: nominal link rate, the oracle's op times, the intended
   orders: the baseline as independent random orders per worker and iteration,
   ``sim_iterations`` of them, mean; TIC and TAC with their order). Then with the
   runtime overheads the oracle leaves out (:mod:`commsched.cost.overhead`: per-transfer
   cost and measured link rate, the DAG hook's per-transfer round trip, the executor's
   gaps, the barrier's round trip, fitted by :func:`fit_overhead` from the run's *traced*
   steps pooled over all models and configs; the compute speed per model and mode from
   its own traced steps, :func:`workload_compute_factors`): on the intended orders
   (``predicted_intended_s``) and on the orders the run *achieved* (``predicted_s``: one
   simulated iteration per traced step of the config, each worker's transfers ranked by
   their arrival in that step, :func:`achieved_ranks`), which separates the simulator's
   error from the hook's (the hooks enforce the order only in part: ``end_agreement``).
   ``pred_error_loo``: the achieved orders with every overhead, compute speed included,
   fitted on the other models only (a check that the fit generalises). ``pred_error =
   predicted / measured - 1`` on the mean iteration time.
4. **TensorFlow's own order and gRPC.** From the traced steps: how often the baseline's
   order of arrival repeats (:func:`arrival_order_repeats`; TicTac Sec. 1 and 2.2 saw a new
   order in every iteration) and how many transfers gRPC delivered out of the order they
   were handed to it (:func:`out_of_order_rate`; Sec. 5.1: 0.4-0.5% under enforcement).

Measured per step and worker: the work and barrier times; the *iteration time* of a step is
the largest ``work + barrier`` over the workers, the *straggler effect* the longest barrier
wait over the iteration time (TicTac Sec. 6.3, as :mod:`commsched.tictac.sim` reads
it). Throughput = N x batch / mean iteration time; gain = baseline mean iteration time /
config mean iteration time - 1. From the traced steps: every parameter transfer's start
(the sender's send start) and end, and the *order agreement*: the fraction of pairs of
transfers of different priority (TAC's, for the baseline) that started in priority order
(0.5 = unordered, 1 = perfectly ordered), and the *end agreement*, the same for the order
in which they arrived (transfers that start in order but share the link can still finish
out of order).

Without root or namespace support (and without ``live.hosts``) nothing runs: the tables
hold one row ``skipped: <reason>`` and the metrics table is empty, so the claims stay
*pending*. Run as ``python -m commsched.tictac.experiments.live --config-json '{...}' --traces
T.json ... --steps S.csv --transfers X.csv --traced T.csv --summary Y.csv --metrics
M.csv``; ``--reuse`` re-analyses the job results an earlier run left in ``--workdir``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np
import pandas as pd

from commsched.atomic import atomic_write_text
from commsched.cluster import net
from commsched.cluster.emulated import ClusterConfig, HostCluster, emulated_cluster, guard
from commsched.cluster.procs import ProcRecord, end_processes, start_time
from commsched.cost import LinkModel
from commsched.cost.overhead import Overhead, fit_compute, fit_link
from commsched.errors import CommschedError
from commsched.io.structured import read_yaml
from commsched.model.traced import load_trace
from commsched.plotting import check_figure_inputs
from commsched.progress import bar, progress
from commsched.results import write_metrics, write_table
from commsched.tictac import ORDERINGS
from commsched.tictac.live.order import match_variables, variable_priorities
from commsched.tictac.sim import compose
from commsched.tictac.sim import iteration as simulate_iteration
from commsched.tictac.sim import run as simulate_workers
from commsched.views import ps_view

__all__ = [
    "FIGURE_KINDS",
    "FigureConfig",
    "LiveParams",
    "Workload",
    "achieved_ranks",
    "agreement",
    "analyse",
    "arrival_order_repeats",
    "fit_overhead",
    "load_workloads",
    "main",
    "metrics",
    "out_of_order_rate",
    "overtaken",
    "reuse_results",
    "run_clients",
    "skipped_reason",
    "summarize",
    "traced_steps",
    "workload_compute_factors",
]

HOOKS = ("sender", "dag")
#: The figures of ``notebooks/live.ipynb``.
FIGURE_KINDS = ("steptime_cdf", "gain", "prediction", "transfers")


@dataclass(frozen=True)
class FigureConfig:
    """Parameters of ``notebooks/live.ipynb``, checked before plotting."""

    summary: str
    steps: str
    transfers: str
    figure: str  # the PDF; the PNG is written beside it
    kind: str

    def __post_init__(self) -> None:
        check_figure_inputs("live", {"summary": self.summary, "steps": self.steps,
                                     "transfers": self.transfers},
                            self.figure, "run rule live_run first")
        if self.kind not in FIGURE_KINDS:
            raise CommschedError(f"live figure: kind {self.kind!r} is not one of "
                                 f"{', '.join(FIGURE_KINDS)}")


@dataclass(frozen=True)
class ModelEntry:
    """One model of the live experiment: batch per mode, input size, link bandwidth."""

    model: str
    batch: dict[str, int]
    size: int
    bandwidth: str


@dataclass(frozen=True)
class LiveParams:
    """The ``live:`` config section, validated (see ``config/config.yaml``)."""

    raw: dict[str, Any]
    models: list[ModelEntry]
    modes: list[str]
    configs: list[tuple[str, str]]  # (order, hook) of every config besides the baseline
    hosts: dict[str, list[str]] | None
    ps: int
    workers: int
    burst: str
    latency: str
    threads: int
    warmup: int
    iterations: int
    trace_iterations: int
    baseline_trace_iterations: int
    timeout_s: float
    step_timeout_s: float
    sim_iterations: int
    seed: int
    enabled: bool = True

    @staticmethod
    def from_config(cfg: Mapping[str, Any]) -> LiveParams:
        def need(key: str) -> Any:
            if key not in cfg:
                raise CommschedError(f"live: missing key {key!r}")
            return cfg[key]

        modes = list(need("modes"))
        models = []
        for m in need("models"):
            batch = m["batch"] if isinstance(m["batch"], dict) else dict.fromkeys(
                modes, m["batch"])
            for mode in modes:
                if int(batch.get(mode, 0)) < 1:
                    raise CommschedError(f"live.models {m['model']}: no batch for {mode}")
            net.parse_rate(m.get("bandwidth", cfg.get("bandwidth", "1gbit")))
            if not isinstance(m.get("size"), int) or m["size"] < 1:
                raise CommschedError(f"live.models {m['model']}: 'size' (input size) must be "
                                     "a positive integer")
            models.append(ModelEntry(str(m["model"]), {k: int(v) for k, v in batch.items()},
                                     int(m["size"]), m.get("bandwidth", need("bandwidth"))))
        configs = []
        for c in need("configs"):
            order, _, hook = str(c).partition("-")
            if order not in ORDERINGS or hook not in HOOKS:
                raise CommschedError(f"live.configs: {c!r} is not <order>-<hook> with order "
                                     f"in {', '.join(ORDERINGS)} and hook in {', '.join(HOOKS)}")
            configs.append((order, hook))
        for mode in modes:
            if mode not in ("infer", "train"):
                raise CommschedError(f"live.modes: unknown mode {mode!r} (infer, train)")
        return LiveParams(
            raw=dict(cfg), models=models, modes=modes, configs=configs,
            hosts=cfg.get("hosts"), ps=int(need("ps")),
            workers=int(need("workers")), burst=str(need("burst")),
            latency=str(need("latency")), threads=int(need("threads")),
            warmup=int(need("warmup")), iterations=int(need("iterations")),
            trace_iterations=int(need("trace_iterations")),
            baseline_trace_iterations=int(cfg.get("baseline_trace_iterations",
                                                  need("trace_iterations"))),
            timeout_s=float(need("timeout_s")), step_timeout_s=float(need("step_timeout_s")),
            sim_iterations=int(need("sim_iterations")), seed=int(need("seed")),
            enabled=bool(cfg.get("enabled", True)),
        )


@dataclass
class Workload:
    """One model and mode: its view, orders, configs for the job and predictions."""

    model: str
    mode: str
    batch: int
    size: int
    bandwidth: str
    view: nx.DiGraph
    orders: dict[str, dict[str, float]]  # order name -> {variable: priority}
    recv_orders: dict[str, dict[str, int]]  # order name -> {recv op of the view: priority}
    configs: list[dict[str, Any]]
    predicted: dict[str, float]  # config name -> predicted mean iteration time (s)
    comm_comp: float

    @property
    def group_id(self) -> str:
        return f"{self.model.replace('_', '-')}.{self.mode}"

    def predict(self, n_workers: int, iterations: int, seed: int,
                overhead: Overhead | None = None) -> dict[str, float]:
        """Config name -> the simulator's mean iteration time, on the view as traced
        (``overhead`` None) or with ``overhead`` applied (:mod:`commsched.cost.overhead`)."""
        view = overhead.apply(self.view) if overhead else self.view
        mw = compose(view, n_workers)
        by_order = {}
        for name in [None, *self.recv_orders]:
            res = simulate_workers(mw, self.recv_orders[name] if name else None, iterations,
                                   seed=seed, validate_every=max(1, iterations // 10))
            t = float(np.mean(res.iteration_time))
            by_order[name or "none"] = overhead.iteration_time(t) if overhead else t
        return {c["name"]: by_order[c["order"]] for c in self.configs}

    def predict_achieved(self, n_workers: int, overhead: Overhead,
                         achieved: Mapping[str, Sequence[np.ndarray]]) -> dict[str, float]:
        """Config name -> the simulator's mean iteration time with the orders the live run
        *achieved*: one simulated iteration per traced step of the config, every worker's
        recvs ranked by their arrival in that step (``achieved``, from
        :func:`achieved_ranks`), with ``overhead`` applied. Separates the simulator's
        error from the hook's: the intended order is what :meth:`predict` simulates."""
        composed = {hook: compose(overhead.for_hook(hook).apply(self.view), n_workers)
                    for hook in dict.fromkeys(str(c["enforce"]) for c in self.configs)}
        tie = np.random.default_rng(0).random((n_workers, len(self.view.graph["recvs"])))
        out = {}
        for c in self.configs:
            ranks = achieved.get(c["name"]) or []
            if not ranks:
                raise CommschedError(f"{self.group_id} {c['name']}: no traced step to take "
                                     "the achieved order from (live.trace_iterations)")
            mw = composed[str(c["enforce"])]
            times = [simulate_iteration(mw, rk + 0.5 * tie).iteration_time for rk in ranks]
            out[c["name"]] = overhead.iteration_time(float(np.mean(times)))
        return out


def achieved_ranks(results: Sequence[Mapping[str, Any]], loads: Sequence[Workload],
                   n_workers: int) -> dict[str, dict[str, list[np.ndarray]]]:
    """{group id: {config: [ranks per traced step]}}: in each traced step, every worker's
    view recvs (in the order of :func:`commsched.tictac.sim.compose`) ranked by the
    arrival of their variable (ties by name; a recv whose variable did not arrive in the
    trace ranks last). Live variables are matched to the trace's by
    :func:`_live_names`."""
    by_group = {w.group_id: w for w in loads}
    recvs_of = {g: [n for n, a in w.view.nodes(data=True) if a["kind"] == "recv"]
                for g, w in by_group.items()}
    steps: dict[tuple[str, str], dict[int, dict[int, dict[str, float]]]] = {}
    for r in results:
        w = by_group[r["group"]]
        trace_vars = w.view.graph["recvs"]
        to_live = _live_names(w, r, trace_vars.values())
        per = steps.setdefault((r["group"], r["config"]), {})
        for k, tr in enumerate(r["traces"]):
            arrival = {x["var"]: float(x["end"]) for x in tr["recvs"]}
            per.setdefault(k, {})[int(r["task"])] = {
                op: arrival.get(to_live.get(trace_vars[op], ""), math.inf)
                for op in recvs_of[r["group"]]}
    out: dict[str, dict[str, list[np.ndarray]]] = {}
    for (group, config), per in steps.items():
        ranks = []
        for k in sorted(per):
            if len(per[k]) != n_workers:
                continue
            ops = recvs_of[group]
            rk = np.empty((n_workers, len(ops)))
            for task, arr in per[k].items():
                order = sorted(range(len(ops)), key=lambda i: (arr[ops[i]], ops[i]))
                rk[task, order] = np.arange(len(ops))
            ranks.append(rk)
        out.setdefault(group, {})[config] = ranks
    return out


def load_workloads(params: LiveParams, traces: Sequence[str]) -> list[Workload]:
    """Views, orders, configs and predictions of every configured model and mode.

    ``traces`` are traced graphs; each configured model and mode takes the one whose
    ``meta`` has its model, mode, batch and input size.
    """
    found: dict[tuple[str, str, int, int | None], nx.DiGraph] = {}
    for path in traces:
        g = load_trace(path)
        meta = g.graph.get("meta", {})
        found[(meta.get("model"), meta.get("mode"), meta.get("batch"), meta.get("size"))] = g
    out = []
    pairs = [(m, mode) for m in params.models for mode in params.modes]
    for m, mode in progress(pairs, "live views, orders, predictions"):
        bw = net.parse_rate(m.bandwidth)
        key = (m.model, mode, m.batch[mode], m.size)
        if key not in found:
            raise CommschedError(
                f"no trace of {m.model} ({mode}, batch {m.batch[mode]}, size {m.size}) "
                f"among --traces; rule live_trace makes it")
        trace = found[key]
        view = ps_view(trace, n_servers=params.ps, link=LinkModel(0.0, bw))
        recv_orders = {name: ORDERINGS[name](view) for name in
                       dict.fromkeys(o for o, _ in params.configs)}
        var_orders = {name: variable_priorities(view, {k: float(v) for k, v in o.items()})
                      for name, o in recv_orders.items()}
        recv_vars = view.graph["recvs"]
        traced_vars = {v: list(trace.graph["variables"][v]["shape"])
                       for v in recv_vars.values()}
        configs: list[dict[str, Any]] = [{
            "name": "baseline", "order": "none", "enforce": "none", "priorities": {},
            "trace_iterations": params.baseline_trace_iterations}]
        for name, hook in params.configs:
            configs.append({"name": f"{name}-{hook}", "order": name, "enforce": hook,
                            "priorities": var_orders[name],
                            "traced_variables": traced_vars})
        comm = params.workers * sum(a["bytes"] for _, a in view.nodes(data=True)
                                    if a["kind"] == "recv") / bw
        comp = _oracle_compute(view)[0]
        w = Workload(m.model, mode, m.batch[mode], m.size, m.bandwidth, view, var_orders,
                     recv_orders, configs, {}, comm / comp if comp else math.inf)
        w.predicted = w.predict(params.workers, params.sim_iterations, params.seed)
        out.append(w)
    return out


def skipped_reason(params: LiveParams) -> str | None:
    """Why the live experiment cannot run here, or None."""
    if not params.enabled:
        return "disabled in the config (live.enabled: false)"
    if params.hosts:
        return None
    return net.check_support()


def _plan(params: LiveParams, cluster: Any, loads: Sequence[Workload]) -> dict[str, Any]:
    groups = []
    for w in loads:
        groups.append({
            "id": w.group_id, "model": w.model, "mode": w.mode, "batch": w.batch,
            "size": w.size, "seed": params.seed, "warmup": params.warmup,
            "iterations": params.iterations, "trace_iterations": params.trace_iterations,
            "configs": w.configs,
        })
    return {"cluster": cluster.spec, "targets": cluster.targets, "threads": params.threads,
            "timeout_s": params.step_timeout_s, "groups": groups}


def run_clients(cluster: Any, plan: Mapping[str, Any], workdir: Path, deadline: float,
                 say: Callable[[str], None]) -> list[dict[str, Any]]:
    """Start one job client per worker, wait for all (bounded by ``deadline``)."""
    workdir.mkdir(parents=True, exist_ok=True)
    plan_path = workdir / "plan.json"
    atomic_write_text(plan_path, json.dumps(plan))
    procs = []
    for i in range(len(plan["targets"])):
        out = workdir / f"result-w{i}.json"
        out.unlink(missing_ok=True)
        (workdir / f"client-w{i}.log").unlink(missing_ok=True)
        argv = [sys.executable, "-m", "commsched.tictac.live.job", "--plan", str(plan_path),
                "--task", str(i), "--out", str(out)]
        p = cluster.spawn_client(i, argv, workdir / f"client-w{i}.log",
                                 env={"TF_CPP_MIN_LOG_LEVEL": "1"})
        procs.append((p, out, workdir / f"client-w{i}.log"))
    try:
        with bar(len(plan["groups"]), "live groups (worker 0)") as shown:
            while any(p.poll() is None for p, _, _ in procs):
                for p, _, log in procs:
                    if p.poll() not in (None, 0):
                        raise CommschedError(f"job client {log.name} failed (exit "
                                             f"{p.returncode}): {_log_tail(log)}")
                cluster.check()
                if time.monotonic() > deadline:
                    raise CommschedError("live jobs did not finish within live.timeout_s")
                if not shown.disable:
                    shown.update(_groups_done(procs[0][2]) - shown.n)
                time.sleep(0.5)
        for p, _, log in procs:
            if p.returncode != 0:
                raise CommschedError(f"job client {log.name} failed (exit {p.returncode}): "
                                     f"{_log_tail(log)}")
    finally:
        left = [ProcRecord(p.pid, st, "client", None, "") for p, _, _ in procs
                if p.poll() is None and (st := start_time(p.pid)) is not None]
        end_processes(left, popens={p.pid: p for p, _, _ in procs})
    results = []
    for _, out, _ in procs:
        results.extend(json.loads(out.read_text())["results"])
    say(f"collected {len(results)} config results")
    return results


def _groups_done(log: Path) -> int:
    """Groups a job client has finished, from its log (``group ID: T s`` lines)."""
    try:
        return sum(x.startswith("group ") for x in log.read_text(errors="replace").splitlines())
    except OSError:
        return 0


def _log_tail(path: Path, lines: int = 4) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return "(no log)"
    keep = [x for x in text if x.strip() and not x.startswith(("I0000", "W0000", "WARNING"))]
    return " | ".join(keep[-lines:]) or "(empty log)"


def agreement(starts: Mapping[str, float], priorities: Mapping[str, float]) -> float:
    """Fraction of pairs of transfers with different priorities that started in priority
    order (ties in start time count one half); NaN when there is no such pair.

    >>> agreement({"a": 0.0, "b": 1.0, "c": 2.0}, {"a": 0, "b": 1, "c": 2})
    1.0
    >>> agreement({"a": 2.0, "b": 1.0}, {"a": 0, "b": 1})
    0.0
    """
    names = [n for n in starts if n in priorities]
    good = total = 0.0
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            if priorities[a] == priorities[b]:
                continue
            first, second = (a, b) if priorities[a] < priorities[b] else (b, a)
            total += 1
            d = starts[second] - starts[first]
            good += 1.0 if d > 0 else 0.5 if d == 0 else 0.0
    return good / total if total else math.nan


def tables(results: Sequence[Mapping[str, Any]], loads: Sequence[Workload],
           n_workers: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The per-step table and the per-transfer table of the collected results."""
    by_group = {w.group_id: w for w in loads}
    step_rows, xfer_rows = [], []
    for r in results:
        w = by_group[r["group"]]
        cfg = next(c for c in w.configs if c["name"] == r["config"])
        for k, s in enumerate(r["steps"]):
            step_rows.append({"model": w.model, "mode": w.mode, "config": r["config"],
                              "order": cfg["order"], "hook": cfg["enforce"], "step": k,
                              "worker": r["task"], "work_s": s["work"],
                              "barrier_s": s["barrier"], "step_s": s["work"] + s["barrier"]})
        ref = r["priorities"] or _live_reference(w, r)
        for k, tr in enumerate(r["traces"]):
            for kind in ("recvs", "grads"):
                for x in tr[kind]:
                    xfer_rows.append({
                        "model": w.model, "mode": w.mode, "config": r["config"],
                        "hook": cfg["enforce"],
                        "trace_step": k, "worker": r["task"], "kind": kind[:-1],
                        "variable": x["var"], "bytes": r["variables"].get(x["var"], {}).get(
                            "bytes", 0), "priority": ref.get(x["var"], math.nan),
                        "start_s": x["start"], "end_s": x["end"]})
    steps = pd.DataFrame(step_rows)
    if not steps.empty:
        per = steps.groupby(["model", "mode", "config", "step"])
        steps["iteration_s"] = per["step_s"].transform("max")
        steps["straggler"] = per["barrier_s"].transform("max") / steps["iteration_s"]
    return steps, pd.DataFrame(xfer_rows)


def traced_steps(results: Sequence[Mapping[str, Any]], loads: Sequence[Workload]
                 ) -> pd.DataFrame:
    """One row per traced step and worker: the worker's compute time and op count
    (``compute_s``, ``compute_ops``, :func:`commsched.tictac.live.steptrace.compute_busy`) and
    its parameter transfers (``recvs``, ``recv_bytes``, ``recv_span_s`` = first start to
    last arrival), beside the trace's (the time oracle's) compute time and op count; from
    the executor's timeline (the compute ops' intervals, where recorded): the step's span
    (``step_s``), the worker's last parameter arrival (``last_recv_s``) and, after it,
    when nothing waits for the network any more, the compute thread's wall time to its
    last op (``tail_wall_s``) beside the summed time (``tail_op_s``) and number
    (``tail_ops``) of the ops it ran there."""
    by_group = {w.group_id: w for w in loads}
    rows = []
    for r in results:
        w = by_group[r["group"]]
        oracle_s, oracle_ops = _oracle_compute(w.view)
        for k, tr in enumerate(r["traces"]):
            recvs = tr["recvs"]
            last = max((x["end"] for x in recvs), default=math.nan)
            ops = np.asarray(tr.get("ops") or [], dtype=float).reshape(-1, 2)
            tail = ops[ops[:, 0] >= last] if recvs else ops[:0]
            rows.append({
                "model": w.model, "mode": w.mode, "config": r["config"], "trace_step": k,
                "worker": r["task"], "compute_s": tr.get("compute_s", math.nan),
                "compute_ops": tr.get("compute_ops", 0), "oracle_compute_s": oracle_s,
                "oracle_ops": oracle_ops, "recvs": len(recvs),
                "recv_bytes": sum(r["variables"].get(x["var"], {}).get("bytes", 0)
                                  for x in recvs),
                "recv_span_s": (max(x["end"] for x in recvs) - min(x["start"] for x in recvs)
                                if recvs else math.nan),
                "step_s": tr.get("step_s", math.nan), "last_recv_s": last,
                "tail_wall_s": float(tail[:, 1].max() - last) if len(tail) else math.nan,
                "tail_op_s": float((tail[:, 1] - tail[:, 0]).sum()), "tail_ops": len(tail)})
    return pd.DataFrame(rows)


def _oracle_compute(view: nx.DiGraph) -> tuple[float, int]:
    """Summed duration and number of a view's compute ops (the worker's, not the links')."""
    comp = [float(a["duration"]) for _, a in view.nodes(data=True)
            if a["kind"] not in ("recv", "send")]
    return math.fsum(comp), len(comp)


def _live_names(w: Workload, r: Mapping[str, Any], variables: Iterable[str]
                ) -> dict[str, str]:
    """{traced variable: its live name} for ``variables`` of ``w``'s trace in the live
    result ``r``, matched by shape (:func:`commsched.tictac.live.order.match_variables`)."""
    traced = {v: list(w.view.graph["variables"][v]["shape"]) for v in dict.fromkeys(variables)}
    live = {v: list(info["shape"]) for v, info in r["variables"].items()}
    return match_variables(traced, live)


def _live_reference(w: Workload, r: Mapping[str, Any]) -> dict[str, float]:
    """TAC's variable priorities under the live names (for the baseline's agreement)."""
    ref = w.orders.get("tac") or next(iter(w.orders.values()), {})
    mapping = _live_names(w, r, ref)
    return {mapping[v]: p for v, p in ref.items()}


def fit_overhead(xfers: pd.DataFrame, traced: pd.DataFrame, steps: pd.DataFrame,
                 exclude_model: str | None = None) -> Overhead:
    """The simulator's overheads (:class:`commsched.cost.overhead.Overhead`) fitted from
    the traced steps of a live run, pooled over its models and modes (all but
    ``exclude_model``, for a leave-one-model-out check):

    * link (``transfer_s``, ``rate_Bps``): :func:`~commsched.cost.overhead.fit_link` on the
      baseline's traced steps, where every request is issued at once and the server's link
      stays busy: per step, all workers' parameter transfers, their bytes and their span
      (first start to last arrival);
    * compute (``compute_factor``, ``op_s``): :func:`~commsched.cost.overhead.fit_compute`
      on every traced step of every worker and config: the live worker's summed compute
      time against the trace's (the time oracle's) and its number of compute ops;
    * ``step_s``: the median over measured steps of the shortest barrier wait of the step,
      i.e. the barrier's own round trip paid by the last worker to arrive (a measured
      component of the iteration, not a fit to the iteration time);
    * ``gap_factor``: on the traced steps' executor timelines, after each worker's last
      parameter arrival, the wall time to its last op over the summed time of the ops
      run there (``tail_wall_s`` / ``tail_op_s`` of :func:`traced_steps`), pooled;
    * ``dag_transfer_s``: :func:`~commsched.cost.overhead.fit_link` on the traced steps of
      the configs with the ``dag`` hook (their transfers leave one after another).
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
    x_dag = x[x.config.isin(dag)]
    dag_s = link(x_dag)[0] if x_dag.groupby(["model", "mode", "config"]).ngroups > 1 else None
    factor, op_s = fit_compute(t.oracle_compute_s.tolist(), t.oracle_ops.tolist(),
                               t.compute_s.tolist())
    tail = t[t.tail_ops > 0] if "tail_ops" in t else t[:0]
    gap = float(tail.tail_wall_s.sum() / tail.tail_op_s.sum()) if len(tail) else 1.0
    step_s = float(st.groupby(["model", "mode", "config", "step"]).barrier_s.min().median())
    return Overhead(transfer_s, rate, factor, op_s, step_s, max(gap, 1.0), dag_s)


def workload_compute_factors(traced: pd.DataFrame) -> dict[tuple[str, str], float]:
    """``{(model, mode): live compute time / oracle compute time}`` summed over the
    workload's traced steps (every config and worker): the live speed of that graph's ops
    (:mod:`commsched.cost.overhead`, last paragraph)."""
    t = traced[traced.compute_s.notna()]
    return {(str(m), str(mo)): float(d.compute_s.sum() / d.oracle_compute_s.sum())
            for (m, mo), d in t.groupby(["model", "mode"])}


def arrival_order_repeats(xfers: pd.DataFrame, config: str = "baseline") -> pd.DataFrame:
    """How often an order of arrival repeats (TicTac Sec. 1 and 2.2: in TensorFlow's own
    order, every iteration had an order not seen before).

    One row per model, mode and worker of ``config``: ``steps`` traced steps and
    ``distinct`` orders among them, where a step's order is its parameter transfers
    sorted by arrival (ties, within a microsecond, broken by variable name, which can only
    make orders coincide), and ``unique_frac`` = distinct / steps (1: every one unique).
    """
    sel = xfers[(xfers.kind == "recv") & (xfers.config == config)]
    rows = []
    for (model, mode, worker), d in sel.groupby(["model", "mode", "worker"]):
        orders = {tuple(g.sort_values(["end_s", "variable"]).variable)
                  for _, g in d.groupby("trace_step")}
        n = d.trace_step.nunique()
        rows.append({"model": model, "mode": mode, "worker": worker, "steps": n,
                     "distinct": len(orders), "unique_frac": len(orders) / n})
    return pd.DataFrame(rows, columns=["model", "mode", "worker", "steps", "distinct",
                                       "unique_frac"])


def overtaken(starts: Sequence[float], ends: Sequence[float]) -> int:
    """Transfers that arrived before a transfer handed to the network earlier (strictly
    earlier start, strictly later arrival): gRPC did not deliver them in the order they
    were queued.

    >>> overtaken([0.0, 1.0, 2.0], [5.0, 3.0, 6.0])
    1
    >>> overtaken([0.0, 1.0], [1.0, 2.0])
    0
    """
    pairs = sorted(zip(starts, ends, strict=True))
    count = 0
    latest = -math.inf  # latest arrival among transfers started strictly earlier
    i = 0
    while i < len(pairs):
        j = i
        while j < len(pairs) and pairs[j][0] == pairs[i][0]:
            j += 1
        count += sum(e < latest for _, e in pairs[i:j])
        latest = max([latest, *(e for _, e in pairs[i:j])])
        i = j
    return count


def out_of_order_rate(xfers: pd.DataFrame) -> pd.DataFrame:
    """TicTac Sec. 5.1's gRPC error: the fraction of parameter transfers that gRPC
    delivered out of the order they were handed to it (:func:`overtaken`), per model,
    mode and config, over every traced step and worker.

    The order of hand-off: under the sender hook (``hook == "sender"``) the server hands
    a worker's transfers to gRPC strictly in priority order (it blocks each until its
    predecessors have been handed over, as in Sec. 5.1), so the priority is the hand-off
    order; a transfer is reordered when it arrived before one of smaller priority. The
    traced ``start_s`` is the worker's RecvTensor start, the time the *request* was
    issued, not the hand-off, so it is used only where nothing is enforced at the sender
    (baseline, DAG hook)."""
    sel = xfers[xfers.kind == "recv"]
    rows = []
    for (model, mode, config), d in sel.groupby(["model", "mode", "config"]):
        sender = (d.hook == "sender").all()
        if sender:
            d = d[d.priority.notna()]  # unranked reads: not in the order
        key = "priority" if sender else "start_s"
        bad = sum(overtaken(g[key].tolist(), g.end_s.tolist())
                  for _, g in d.groupby(["trace_step", "worker"]))
        rows.append({"model": model, "mode": mode, "config": config, "transfers": len(d),
                     "overtaken": bad, "rate": bad / len(d)})
    return pd.DataFrame(rows, columns=["model", "mode", "config", "transfers", "overtaken",
                                       "rate"])


def summarize(steps: pd.DataFrame, xfers: pd.DataFrame, loads: Sequence[Workload],
              n_workers: int, fitted: Mapping[str, Mapping[str, float]] | None = None,
              loo: Mapping[str, Mapping[str, float]] | None = None,
              intended: Mapping[str, Mapping[str, float]] | None = None) -> pd.DataFrame:
    """One row per model, mode and config: throughput, gain, straggler, prediction.

    ``predicted_nominal_s`` is the simulator on the trace as it is (nominal link rate, the
    oracle's op times); ``fitted`` and ``loo`` ({group id: {config: s}}) are its
    predictions with the overheads fitted on the whole run and on the other models only
    (:func:`fit_overhead`), ``intended`` with the whole run's overheads on the intended
    orders (module docstring, step 3). ``predicted_s`` / ``pred_error`` are the fitted
    ones where given, else the nominal ones."""
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
            overhead: Mapping[str, float] | None = None) -> dict[str, float]:
    """Numbers for the claims table (``live.*``), per model: no best over models.

    Per model, mode and config: gain, straggler effect, straggler reduction (baseline mean
    / config mean; below 1 is an increase, counted in ``live.straggler_increases``),
    prediction errors, the work time's coefficient of variation (``work_cv``);
    per model and mode the best gain over the ordered configs; pooled:
    the prediction errors' median and largest absolute values (nominal, fitted,
    leave-one-model-out), the sender-vs-DAG difference and order agreements. With
    ``repeats`` (:func:`arrival_order_repeats`), ``out_of_order``
    (:func:`out_of_order_rate`) and ``overhead`` (the fitted numbers) their values too.
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
    for col in ("pred_error", "pred_error_nominal", "pred_error_loo", "pred_error_intended"):
        err = summary[col].abs().dropna() if col in summary else pd.Series(dtype=float)
        if not err.empty:
            out[f"live.{col}.median_abs"] = float(err.median())
            out[f"live.{col}.max_abs"] = float(err.max())
    if repeats is not None and not repeats.empty:
        for (model, mode), d in repeats.groupby(["model", "mode"]):
            out[f"live.{model}.{mode}.baseline.unique_order_frac"] = float(d.unique_frac.min())
        for model, d in repeats.groupby("model"):
            out[f"live.{model}.baseline.unique_order_frac"] = float(d.unique_frac.min())
            out[f"live.{model}.baseline.traced_steps"] = float(d.steps.sum())
    if out_of_order is not None and not out_of_order.empty:
        for r in out_of_order.itertuples():
            out[f"live.{r.model}.{r.mode}.{r.config}.grpc_out_of_order"] = r.rate
        for (model, config), d in out_of_order.groupby(["model", "config"]):
            out[f"live.{model}.{config}.grpc_out_of_order"] = float(
                d.overtaken.sum() / d.transfers.sum())
    for k, v in (overhead or {}).items():
        out[f"live.overhead.{k}"] = float(v)
    return out


def analyse(steps: pd.DataFrame, xfers: pd.DataFrame, traced: pd.DataFrame,
            loads: Sequence[Workload], params: LiveParams,
            achieved: Mapping[str, Mapping[str, Sequence[np.ndarray]]],
            say: Callable[[str], None] = lambda _: None) -> tuple[pd.DataFrame,
                                                                 dict[str, float]]:
    """The summary table and the metrics of a live run's tables: fits the overheads
    (:func:`fit_overhead`: on every model, and leaving each model out in turn), re-runs
    the simulator with them on the orders the run achieved (``achieved``,
    :func:`achieved_ranks`) and on the intended ones, and measures order repeats and
    gRPC reordering."""
    ov = fit_overhead(xfers, traced, steps)
    factors = workload_compute_factors(traced)
    say(f"fitted overhead: {ov}; compute factor per workload: {factors}")
    own = {w.group_id: dataclasses.replace(ov, compute_factor=factors[w.model, w.mode],
                                           op_s=0.0) for w in loads}
    fitted = {w.group_id: w.predict_achieved(params.workers, own[w.group_id],
                                             achieved[w.group_id])
              for w in progress(loads, "predictions with the fitted overhead")}
    intended = {w.group_id: w.predict(params.workers, params.sim_iterations, params.seed,
                                      own[w.group_id])
                for w in progress(loads, "predictions of the intended orders")}
    loo: dict[str, dict[str, float]] = {}
    models = sorted({w.model for w in loads})
    if len(models) > 1:
        for model in progress(models, "leave-one-model-out fits"):
            ov_m = fit_overhead(xfers, traced, steps, exclude_model=model)
            for w in loads:
                if w.model == model:
                    loo[w.group_id] = w.predict_achieved(params.workers, ov_m,
                                                         achieved[w.group_id])
    summary = summarize(steps, xfers, loads, params.workers, fitted, loo or None, intended)
    nominal = net.parse_rate(loads[0].bandwidth) if loads else math.nan
    values = metrics(summary, arrival_order_repeats(xfers), out_of_order_rate(xfers),
                     {**{k: v for k, v in dataclasses.asdict(ov).items() if v is not None},
                      **{f"compute_factor.{m}.{mo}": f for (m, mo), f in factors.items()},
                      "rate_fraction_of_nominal":
                      ov.rate_Bps / nominal})
    return summary, values


def reuse_results(workdir: Path, loads: Sequence[Workload]) -> list[dict[str, Any]]:
    """The job results of an earlier run under ``workdir`` (``*/result-w*.json``), for
    re-analysis; every configured group must be there."""
    results = []
    for path in sorted(workdir.glob("*/result-w*.json")):
        results.extend(json.loads(path.read_text())["results"])
    missing = {w.group_id for w in loads} - {r["group"] for r in results}
    if missing:
        raise CommschedError(f"{workdir}: no job results of {', '.join(sorted(missing))}")
    return results


def _cluster_run(params: LiveParams, loads: list[Workload], workdir: Path,
                 say: Callable[[str], None]) -> list[dict[str, Any]]:
    deadline = time.monotonic() + params.timeout_s
    by_bw: dict[str, list[Workload]] = {}
    for w in loads:
        by_bw.setdefault(w.bandwidth, []).append(w)
    results: list[dict[str, Any]] = []
    if params.hosts:
        hc = HostCluster(dict(params.hosts), net.parse_rate(loads[0].bandwidth), workdir)
        with guard(params.timeout_s):
            for bw, ws in by_bw.items():
                hc.set_bandwidth(bw)
                results += run_clients(hc, _plan(params, hc, ws), workdir / bw, deadline,
                                        say)
        return results
    first = next(iter(by_bw))
    cfg = ClusterConfig(n_ps=params.ps, n_workers=params.workers, bandwidth=first,
                        burst=params.burst, latency=params.latency, threads=params.threads)
    with emulated_cluster(cfg, timeout=params.timeout_s) as c:
        say(f"cluster {c.run_id} up: {c.spec}")
        for bw, ws in by_bw.items():
            c.set_bandwidth(bw)
            say(f"bandwidth {bw}: {', '.join(w.group_id for w in ws)}")
            results += run_clients(c, _plan(params, c, ws), workdir / bw, deadline, say)
    return results


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m commsched.tictac.experiments.live",
                                description=__doc__.splitlines()[0] if __doc__ else None)
    src = p.add_mutually_exclusive_group()
    src.add_argument("--config", default="config/config.yaml",
                     help="config file with a 'live' section (default %(default)s)")
    src.add_argument("--config-json", help="the 'live' section as a JSON object")
    p.add_argument("--traces", nargs="*", default=[],
                   help="traced graphs of the live models (rule live_trace)")
    p.add_argument("--workdir", default="results/live/run", help="plans, client logs")
    p.add_argument("--steps", required=True, help="per-step table (CSV)")
    p.add_argument("--transfers", required=True, help="per-transfer table (CSV)")
    p.add_argument("--traced", required=True, help="per-traced-step table (CSV)")
    p.add_argument("--summary", required=True, help="per-config summary table (CSV)")
    p.add_argument("--metrics", required=True, help="metrics table (CSV)")
    p.add_argument("--reuse", action="store_true",
                   help="analyse the job results already under --workdir instead of running")
    args = p.parse_args(argv)

    def say(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    try:
        if args.config_json:
            try:
                section = json.loads(args.config_json)
            except json.JSONDecodeError as e:
                raise CommschedError(f"--config-json: invalid JSON: {e.msg}") from None
        else:
            section = (read_yaml(args.config) or {}).get("live")
        if not isinstance(section, dict):
            raise CommschedError("no 'live' section in the config")
        params = LiveParams.from_config(section)
        reason = skipped_reason(params)
        if reason:
            say(f"live experiment skipped: {reason}")
            skip = pd.DataFrame({"status": ["skipped"], "reason": [reason]})
            for path in (args.steps, args.transfers, args.traced, args.summary):
                write_table(skip, path, params.raw)
            write_metrics({}, args.metrics, {**params.raw, "skipped": reason})
            return 0
        t = time.perf_counter()
        loads = load_workloads(params, args.traces)
        for w in loads:
            say(f"{w.group_id}: comm/comp {w.comm_comp:.2f}, predicted "
                + ", ".join(f"{k} {v:.3f}s" for k, v in w.predicted.items()))
        if args.reuse:
            results = reuse_results(Path(args.workdir), loads)
        else:
            results = _cluster_run(params, loads, Path(args.workdir), say)
        steps, xfers = tables(results, loads, params.workers)
        traced = traced_steps(results, loads)
        summary, values = analyse(steps, xfers, traced, loads, params,
                                  achieved_ranks(results, loads, params.workers), say)
        cfg = {**params.raw, "wall_s": round(time.perf_counter() - t, 1)}
        write_table(steps, args.steps, cfg)
        write_table(xfers, args.transfers, cfg)
        write_table(traced, args.traced, cfg)
        write_table(summary, args.summary, cfg)
        write_metrics(values, args.metrics, cfg)
        say(summary.to_string(index=False))
    except CommschedError as e:
        print(f"live: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
