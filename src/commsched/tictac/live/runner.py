"""Driving the live TicTac experiment: the cluster, the job clients, their results.

Step 2 of :mod:`commsched.tictac.experiments.live`: the plan of every workload's configs
goes to one job client per worker (:mod:`commsched.tictac.live.job`), on the emulated
cluster of :mod:`commsched.cluster.emulated` or on the hosts of ``live.hosts``; every
wait is bounded and every process ends, also on an error.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import nullcontext
from pathlib import Path
from typing import Any

from commsched.atomic import atomic_write_text
from commsched.cluster import net
from commsched.cluster.capture import capturing
from commsched.cluster.emulated import ClusterConfig, HostCluster, emulated_cluster, guard
from commsched.cluster.procs import ProcRecord, end_processes, start_time
from commsched.errors import CommschedError
from commsched.progress import bar
from commsched.tictac.live.config import LiveParams
from commsched.tictac.live.grpcorder import SEND_LOG_MATCH, SEND_LOG_VMODULE, window_name
from commsched.tictac.live.workload import Workload

__all__ = ["cluster_run", "job_plan", "load_captures", "reuse_results", "run_clients",
           "skipped_reason"]


def skipped_reason(params: LiveParams) -> str | None:
    """Why the live experiment cannot run here.

    Parameters
    ----------
    params : LiveParams
        The ``live`` section.

    Returns
    -------
    str or None
        None when it can run: it is enabled, and ``live.hosts`` names a cluster or this
        machine can build an emulated one (root, network namespaces, tc;
        :func:`commsched.cluster.net.check_support`).
    """
    if not params.enabled:
        return "disabled in the config (live.enabled: false)"
    if params.hosts:
        return None
    return net.check_support()


def job_plan(params: LiveParams, cluster: Any, loads: Sequence[Workload],
             capture: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The plan that every job client runs (:mod:`commsched.tictac.live.job`).

    Parameters
    ----------
    params : LiveParams
        Steps, seed, threads, the per-step timeout and the captured steps.
    cluster : emulated cluster or HostCluster
        Its ``spec`` and ``targets``.
    loads : sequence of Workload
        One group each.
    capture : mapping, optional
        The capture processes' part of the plan
        (:func:`commsched.cluster.capture.capturing`); with it, every sender-hook config
        gets ``live.grpc_capture_iterations`` captured steps in the window
        :func:`~commsched.tictac.live.grpcorder.window_name`.

    Returns
    -------
    dict
        JSON-ready: ``cluster``, ``targets``, ``threads``, ``timeout_s``, ``groups`` and
        ``capture`` (None without).
    """
    n_captured = params.grpc_capture_iterations if capture else 0
    groups = []
    for w in loads:
        configs = [dict(c, capture_iterations=n_captured,
                        capture_window=window_name(w.group_id, c["name"]))
                   if n_captured and c["enforce"] == "sender" else c for c in w.configs]
        groups.append({
            "id": w.group_id, "model": w.model, "mode": w.mode, "batch": w.batch,
            "size": w.size, "seed": params.seed, "warmup": params.warmup,
            "iterations": params.iterations, "trace_iterations": params.trace_iterations,
            "configs": configs,
        })
    return {"cluster": cluster.spec, "targets": cluster.targets, "threads": params.threads,
            "timeout_s": params.step_timeout_s, "groups": groups,
            "capture": dict(capture) if n_captured and capture else None}


def run_clients(cluster: Any, plan: Mapping[str, Any], workdir: Path, deadline: float,
                 say: Callable[[str], None]) -> list[dict[str, Any]]:
    """Run one job client per worker of ``cluster`` and collect their results.

    The plan is written to ``workdir/plan.json``; client ``i`` writes
    ``workdir/result-w<i>.json`` and logs to ``workdir/client-w<i>.log``. Clients still
    running when this returns or raises are ended.

    Parameters
    ----------
    cluster : emulated cluster or HostCluster
        Spawns the clients (``spawn_client``) and reports a failed server (``check``).
    plan : mapping
        :func:`job_plan`'s plan.
    workdir : Path
        Where the plan, results and logs go.
    deadline : float
        ``time.monotonic()`` by which every client must have finished.
    say : callable
        Progress messages.

    Returns
    -------
    list of dict
        Every client's results (one per group and config).

    Raises
    ------
    CommschedError
        If a client fails (with the tail of its log) or the deadline passes.
    """
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


def cluster_run(params: LiveParams, loads: list[Workload], workdir: Path,
                say: Callable[[str], None]) -> list[dict[str, Any]]:
    """Measure every workload on the cluster: ``live.hosts``, else an emulated one.

    Workloads are grouped by bandwidth; the links are reshaped between groups. The
    emulated cluster is torn down when this returns or raises (also on SIGTERM or after
    ``live.timeout_s``).

    Parameters
    ----------
    params : LiveParams
        The cluster's shape and the timeouts.
    loads : list of Workload
        What to measure.
    workdir : Path
        Plans, results and client logs, one folder per bandwidth.
    say : callable
        Progress messages.

    Returns
    -------
    list of dict
        The job clients' results (:func:`run_clients`).

    Raises
    ------
    CommschedError
        If the cluster cannot be built, or as :func:`run_clients`.
    """
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
                results += run_clients(hc, job_plan(params, hc, ws), workdir / bw, deadline,
                                        say)
        return results
    first = next(iter(by_bw))
    capture = params.grpc_capture_iterations > 0
    cfg = ClusterConfig(n_ps=params.ps, n_workers=params.workers, bandwidth=first,
                        burst=params.burst, latency=params.latency, threads=params.threads,
                        ps_vmodule=SEND_LOG_VMODULE if capture else "")
    window_s = params.step_timeout_s * (params.grpc_capture_iterations + 1)
    with emulated_cluster(cfg, timeout=params.timeout_s) as c:
        say(f"cluster {c.run_id} up: {c.spec}")
        for bw, ws in by_bw.items():
            c.set_bandwidth(bw)
            say(f"bandwidth {bw}: {', '.join(w.group_id for w in ws)}")
            with (capturing(c, cfg.hosts()[:params.ps], workdir / bw / "capture",
                            params.workers, _CAPTURE_WAIT_S, window_s, SEND_LOG_MATCH)
                  if capture else nullcontext(None)) as files:
                results += run_clients(c, job_plan(params, c, ws, files), workdir / bw,
                                       deadline, say)
    return results


#: How long a client waits for the capture processes' sockets at a window (they may
#: still be parsing the previous window).
_CAPTURE_WAIT_S = 120.0


def load_captures(workdir: Path) -> list[dict[str, Any]]:
    """The capture windows a run left under ``workdir`` (``*/capture/*.json``).

    Parameters
    ----------
    workdir : Path
        The run's ``--workdir``.

    Returns
    -------
    list of dict
        Every window of every capture process (:func:`commsched.cluster.capture.main`),
        by file name.
    """
    return [json.loads(p.read_text()) for p in sorted(workdir.glob("*/capture/*.json"))]


def reuse_results(workdir: Path, loads: Sequence[Workload]) -> list[dict[str, Any]]:
    """The job results an earlier run left under ``workdir``, for re-analysis.

    Parameters
    ----------
    workdir : Path
        The earlier run's ``--workdir`` (``*/result-w*.json``).
    loads : sequence of Workload
        The configured workloads; every one must have results there.

    Returns
    -------
    list of dict
        The results.

    Raises
    ------
    CommschedError
        If a configured workload has no results.
    """
    results = []
    for path in sorted(workdir.glob("*/result-w*.json")):
        results.extend(json.loads(path.read_text())["results"])
    missing = {w.group_id for w in loads} - {r["group"] for r in results}
    if missing:
        raise CommschedError(f"{workdir}: no job results of {', '.join(sorted(missing))}")
    return results
