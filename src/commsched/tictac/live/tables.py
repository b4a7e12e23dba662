"""The tables of a live TicTac run: steps, transfers, traced steps, and order measures.

From the job clients' results (:mod:`commsched.tictac.live.job`): :func:`tables` (one row
per measured step and worker, one per traced parameter or gradient transfer) and
:func:`traced_steps` (one row per traced step and worker); and what the transfers say
about order: :func:`agreement`, :func:`arrival_order_repeats`, :func:`overtaken` and
:func:`out_of_order_rate` (step 4 of :mod:`commsched.tictac.experiments.live`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from commsched.tictac.live.workload import Workload, live_reference, oracle_compute
from commsched.tictac.sim import union_busy

__all__ = [
    "agreement",
    "arrival_order_repeats",
    "out_of_order_rate",
    "overtaken",
    "tables",
    "traced_steps",
]


def agreement(starts: Mapping[str, float], priorities: Mapping[str, float]) -> float:
    """How well transfers followed their priorities: the order agreement.

    Parameters
    ----------
    starts : mapping of str to float
        Each transfer's time (its start, or its arrival for the *end agreement*).
    priorities : mapping of str to float
        Each transfer's priority, lower first; transfers without one are left out.

    Returns
    -------
    float
        The fraction of pairs of transfers with different priorities whose times are in
        priority order (equal times count one half): 1 = perfectly ordered, about 0.5 =
        unordered; NaN when there is no such pair.

    References
    ----------
    .. [1] Hashemi, Jyothi & Campbell, "TicTac", SysML 2019, Sec. 5.1 (enforcing the order
       at the sender).

    Examples
    --------
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
    """The per-step table and the per-transfer table of a run's results.

    Parameters
    ----------
    results : sequence of mapping
        The job clients' results (one per group, config and worker).
    loads : sequence of Workload
        The workloads they belong to.
    n_workers : int
        Workers of the run.

    Returns
    -------
    steps : pandas.DataFrame
        One row per measured step, config and worker: ``work_s``, ``barrier_s``,
        ``step_s``, and per step ``iteration_s`` (the largest ``work + barrier``) and
        ``straggler`` (the longest barrier wait over ``iteration_s``, TicTac Sec. 6.3).
    transfers : pandas.DataFrame
        One row per traced parameter (``recv``) or gradient (``grad``) transfer: its
        variable, bytes, priority (the config's, or TAC's for the baseline,
        :func:`~commsched.tictac.live.workload.live_reference`), start and end, and for a
        parameter transfer ``idle_s``: the worker executor's idle time since the
        arrival before it (that interval less the compute ops' time in it; NaN for the
        step's first arrival), what the DAG hook's gate cost is fitted on
        (:func:`~commsched.cost.overhead.fit_gate`).
    """
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
        ref = r["priorities"] or live_reference(w, r)
        for k, tr in enumerate(r["traces"]):
            idle = _idle_before([x["end"] for x in tr["recvs"]], tr.get("ops"))
            for kind in ("recvs", "grads"):
                for i, x in enumerate(tr[kind]):
                    xfer_rows.append({
                        "model": w.model, "mode": w.mode, "config": r["config"],
                        "hook": cfg["enforce"],
                        "trace_step": k, "worker": r["task"], "kind": kind[:-1],
                        "variable": x["var"], "bytes": r["variables"].get(x["var"], {}).get(
                            "bytes", 0), "priority": ref.get(x["var"], math.nan),
                        "start_s": x["start"], "end_s": x["end"],
                        "idle_s": idle[i] if kind == "recvs" else math.nan})
    steps = pd.DataFrame(step_rows)
    if not steps.empty:
        per = steps.groupby(["model", "mode", "config", "step"])
        steps["iteration_s"] = per["step_s"].transform("max")
        steps["straggler"] = per["barrier_s"].transform("max") / steps["iteration_s"]
    return steps, pd.DataFrame(xfer_rows)


def _idle_before(ends: Sequence[float], ops: Sequence[Sequence[float]] | None
                 ) -> list[float]:
    """Per arrival, the worker executor's idle time since the arrival before it: the
    interval less the time of the compute ops run in it (NaN for the first arrival, or
    without the executor's timeline)."""
    out = [math.nan] * len(ends)
    iv = np.asarray(ops or [], dtype=float).reshape(-1, 2)
    if not len(iv):
        return out
    order = sorted(range(len(ends)), key=lambda i: ends[i])
    for prev, i in itertools.pairwise(order):
        a, b = ends[prev], ends[i]
        busy = float((np.clip(iv[:, 1], a, b) - np.clip(iv[:, 0], a, b)).sum())
        out[i] = (b - a) - busy
    return out


def traced_steps(results: Sequence[Mapping[str, Any]], loads: Sequence[Workload]
                 ) -> pd.DataFrame:
    """The traced steps of a run, what the simulator's overheads are fitted on.

    Parameters
    ----------
    results : sequence of mapping
        The job clients' results.
    loads : sequence of Workload
        The workloads they belong to.

    Returns
    -------
    pandas.DataFrame
        One row per traced step and worker: the worker's compute time and op count
        (``compute_s``, ``compute_ops``,
        :func:`commsched.tictac.live.steptrace.compute_busy`) and its parameter transfers
        (``recvs``, ``recv_bytes``, ``recv_span_s`` = first start to last arrival,
        ``first_recv_s`` = the first request's start from the step's start),
        beside the trace's (the time oracle's) compute time and op count; from the
        executor's timeline (the compute ops' intervals, where recorded): the step's span
        (``step_s``), the worker's last parameter arrival (``last_recv_s``) and, after
        it, when nothing waits for the network any more, the compute thread's wall time
        to its last op (``tail_wall_s``) beside the summed time (``tail_op_s``) and number
        (``tail_ops``) of the ops it ran there; ``net_overlap``, the share of the compute
        ops' time during which a transfer of the step (any worker's parameter or
        gradient, from request to arrival; the workers' clocks aligned by their step
        starts) was in flight.
    """
    by_group = {w.group_id: w for w in loads}
    peers: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for r in results:
        peers.setdefault((r["group"], r["config"]), []).append(r)
    rows = []
    for r in results:
        w = by_group[r["group"]]
        oracle_s, oracle_ops = oracle_compute(w.view)
        for k, tr in enumerate(r["traces"]):
            recvs = tr["recvs"]
            last = max((x["end"] for x in recvs), default=math.nan)
            first = min((x["start"] for x in recvs), default=math.nan)
            ops = np.asarray(tr.get("ops") or [], dtype=float).reshape(-1, 2)
            flight = [(x["start"] + shift, x["end"] + shift)
                      for p in peers[r["group"], r["config"]] if k < len(p["traces"])
                      for shift in [(p["traces"][k].get("t0_us", 0) - tr.get("t0_us", 0)) / 1e6]
                      for x in [*p["traces"][k]["recvs"], *p["traces"][k].get("grads", [])]]
            tail = ops[ops[:, 0] >= last] if recvs else ops[:0]
            rows.append({
                "model": w.model, "mode": w.mode, "config": r["config"], "trace_step": k,
                "worker": r["task"], "compute_s": tr.get("compute_s", math.nan),
                "compute_ops": tr.get("compute_ops", 0), "oracle_compute_s": oracle_s,
                "oracle_ops": oracle_ops, "recvs": len(recvs),
                "recv_bytes": sum(r["variables"].get(x["var"], {}).get("bytes", 0)
                                  for x in recvs),
                "recv_span_s": last - first, "first_recv_s": first,
                "step_s": tr.get("step_s", math.nan), "last_recv_s": last,
                "tail_wall_s": float(tail[:, 1].max() - last) if len(tail) else math.nan,
                "tail_op_s": float((tail[:, 1] - tail[:, 0]).sum()), "tail_ops": len(tail),
                "net_overlap": _overlap_share(ops, flight)})
    return pd.DataFrame(rows)


def _overlap_share(ops: np.ndarray, flight: Sequence[tuple[float, float]]) -> float:
    """The share of the ops' summed time during which some transfer was in flight (NaN
    without ops)."""
    total = float((ops[:, 1] - ops[:, 0]).sum())
    if total <= 0:
        return math.nan
    fl = np.asarray(flight, dtype=float).reshape(-1, 2)
    return float(union_busy(fl[:, 0], fl[:, 1], ops[:, 0], ops[:, 1]).sum()) / total


def arrival_order_repeats(xfers: pd.DataFrame, config: str = "baseline") -> pd.DataFrame:
    """How often an order of arrival repeats.

    Parameters
    ----------
    xfers : pandas.DataFrame
        The per-transfer table (:func:`tables`).
    config : str, optional
        The config whose traced steps count (default the baseline).

    Returns
    -------
    pandas.DataFrame
        One row per model, mode and worker of ``config``: ``steps`` traced steps and
        ``distinct`` orders among them, where a step's order is its parameter transfers
        sorted by arrival (ties, within a microsecond, broken by variable name, which can
        only make orders coincide), and ``unique_frac`` = distinct / steps (1: every one
        unique).

    References
    ----------
    .. [1] Hashemi, Jyothi & Campbell, "TicTac", SysML 2019, Secs. 1 and 2.2 (in
       TensorFlow's own order, every iteration had an order not seen before).
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
    """How many transfers overtook one handed to the network earlier.

    Parameters
    ----------
    starts : sequence of float
        When each transfer was handed to the network (or its rank in that order).
    ends : sequence of float
        When each arrived.

    Returns
    -------
    int
        The transfers that arrived before a transfer with a strictly earlier start
        arrived (strictly later arrival): the network did not deliver them in the order
        they were queued.

    Examples
    --------
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
    """Transfers delivered out of order at the worker (a check beside TicTac Sec. 5.1).

    Sec. 5.1 counts the transfers that gRPC *processed* out of the order they were
    queued at the sender; that is measured at the parameter server
    (:func:`commsched.tictac.live.grpcorder.processing_out_of_order`). This is the
    receiver's view. Under the sender hook (``hook == "sender"``) the intended order is
    the priority order, so a transfer counts when it arrived before one of smaller
    priority, whatever delayed the other (the hook's hand-off, gRPC, a shared
    connection on which a small response overtakes a large one). The traced
    ``start_s`` is the worker's RecvTensor start, the time the *request* was issued, so
    it is the order only where nothing is enforced at the sender (baseline, DAG hook).

    Parameters
    ----------
    xfers : pandas.DataFrame
        The per-transfer table (:func:`tables`).

    Returns
    -------
    pandas.DataFrame
        One row per model, mode and config, over every traced step and worker:
        ``transfers``, ``overtaken`` (:func:`overtaken` per step and worker) and ``rate``.

    References
    ----------
    .. [1] Hashemi, Jyothi & Campbell, "TicTac", SysML 2019, Sec. 5.1 (0.4-0.5% of the
       transfers processed out of order by gRPC under enforcement).
    """
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
