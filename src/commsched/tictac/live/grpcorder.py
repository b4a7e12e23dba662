"""The order in which the parameter server's gRPC sent the parameter transfers.

TicTac's enforcement module (SysML 2019, Sec. 5.1) blocks each transfer at the sender
until its turn and then hands it to gRPC; "gRPC may not always process transfers in the
order they are queued" (Inception: 0.5% of the transfers with TIC, 0.4% with TAC). The
worker's trace shows only the order of arrival. This module reads the server's side of
the *captured steps* of the live job (:mod:`commsched.tictac.live.job`): the packet
capture of the PS's link during those steps (:mod:`commsched.cluster.capture`) and the
PS's rendezvous log: with ``TF_CPP_VMODULE=base_rendezvous_mgr=1``
(:data:`SEND_LOG_VMODULE`) the server logs every value it gives to its rendezvous, with a
microsecond wall-clock time (its step stats leave the ``_Send`` ops out).

Per transfer, one ``RecvTensor`` RPC of a worker to a parameter server, in seconds from
the traced step's first event:

``request_s``
    the worker's request reached the PS (first frame of the request, capture);
``sent_s``
    the PS's ``_Send`` gave the value to the rendezvous (the log line
    ``BaseRemoteRendezvous Send``, written as the send begins). When the request is
    already waiting, TensorFlow's local rendezvous runs the waiting ``RecvTensor``
    callback inside that send, which encodes the response and hands it to gRPC
    (``GrpcWorker::GrpcRecvTensorAsync``); otherwise the response is handed over when
    the request's handler runs;
``handoff_s``
    so ``max(sent_s, request_s)``: when the response was handed to gRPC (the handler of
    a late request may run a little after its arrival, on the PS's busy inter-op thread);
``wire_s``, ``wire_pos``, ``wire_rank``
    the response's first frame left the PS (capture time; byte position in the
    connection's PS-to-worker stream; rank by that position among the step's transfers
    of that worker and PS: the order in which gRPC wrote the responses);
``done_s``
    the response's last frame left the PS.

:func:`processing_order` builds that table; :func:`processing_out_of_order` counts the
transfers gRPC sent out of the order in which they were handed to it, the paper's
quantity, and, for comparison, those sent out of priority order (the whole sender path:
hook, executor and gRPC).
"""

from __future__ import annotations

import bisect
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pandas as pd

from commsched.io.varint import read_varint
from commsched.tictac.live.workload import Workload

__all__ = [
    "SEND_LOG_MATCH",
    "SEND_LOG_VMODULE",
    "displaced",
    "parse_rendezvous_key",
    "parse_send_log",
    "processing_order",
    "processing_out_of_order",
    "recv_tensor_request",
    "window_name",
]

#: The parameter servers' ``TF_CPP_VMODULE``: log every rendezvous send.
SEND_LOG_VMODULE = "base_rendezvous_mgr=1"
#: What a send's log line contains (the capture keeps those of its windows).
SEND_LOG_MATCH = "BaseRemoteRendezvous Send "
_SEND_LINE = re.compile(r"^I0000 00:00:(?P<t>\d+\.\d+)\s+\d+ \S+\] "
                        r"BaseRemoteRendezvous Send (?P<ptr>\S+) (?P<key>\S+)\s*$")
_TASK = re.compile(r"/job:worker/replica:\d+/task:(\d+)/")
_EDGE = re.compile(r"^edge_\d+_(.+)$")


def window_name(group: str, config: str) -> str:
    """The capture window of a config's captured steps.

    Parameters
    ----------
    group : str
        The plan's group id (``<model>.<mode>``).
    config : str
        The config's name.

    Returns
    -------
    str
        ``GROUP.CONFIG`` (:class:`commsched.cluster.capture.CaptureWindow`'s name).
    """
    return f"{group}.{config}"


def recv_tensor_request(message: bytes) -> tuple[int, str] | None:
    """The step id and rendezvous key of a gRPC ``RecvTensorRequest`` message.

    Parameters
    ----------
    message : bytes
        The request's first DATA bytes: the gRPC message prefix (compressed flag, 4-byte
        length), then the protobuf (``tensorflow/core/protobuf/worker.proto``: field 1
        ``step_id``, field 2 ``rendezvous_key``), possibly cut short.

    Returns
    -------
    tuple of (int, str) or None
        ``(step_id, rendezvous_key)``; None for anything else (another RPC's message, a
        compressed message, a key that is not a rendezvous key, bytes cut before the
        key).

    Examples
    --------
    >>> key = (b"/job:ps/replica:0/task:0/device:CPU:0;1;/job:worker/replica:0/task:1/"
    ...        b"device:CPU:0;edge_7_a/ReadVariableOp;0:0")
    >>> msg = bytes([0x08, 0x2A, 0x12, len(key)]) + key
    >>> recv_tensor_request(b"\\x00" + len(msg).to_bytes(4, "big") + msg)[0]
    42
    >>> recv_tensor_request(b"\\x00\\x00\\x00\\x00\\x02\\x08\\x01") is None
    True
    """
    if len(message) < 5 or message[0] != 0:
        return None
    body = message[5:5 + int.from_bytes(message[1:5], "big")]
    step, key, i = None, None, 0
    try:
        while i < len(body) and (step is None or key is None):
            tag, i = read_varint(body, i)
            field, wire = tag >> 3, tag & 7
            if wire == 0:
                value, i = read_varint(body, i)
                if field == 1:
                    step = value
            elif wire == 2:
                n, i = read_varint(body, i)
                if i + n > len(body):
                    return None
                if field == 2:
                    key = body[i:i + n].decode("utf-8", "strict")
                i += n
            elif wire == 1:
                i += 8
            elif wire == 5:
                i += 4
            else:
                return None
    except (ValueError, UnicodeDecodeError):
        return None
    if step is None or key is None or key.count(";") != 4:
        return None
    return step, key


def parse_rendezvous_key(key: str) -> tuple[str, int | None, str]:
    """The sending device, receiving worker task and tensor of a rendezvous key.

    Parameters
    ----------
    key : str
        ``src_device;incarnation;dst_device;tensor_name;frame:iter`` (TensorFlow's
        ``Rendezvous::CreateKey``).

    Returns
    -------
    tuple of (str, int or None, str)
        The source device, the destination's worker task (None if it is not a worker)
        and the tensor name (``edge_N_<op>``).

    Examples
    --------
    >>> parse_rendezvous_key("/job:ps/replica:0/task:0/device:CPU:0;ab;"
    ...                      "/job:worker/replica:0/task:1/device:CPU:0;edge_7_v/Read;0:0")
    ('/job:ps/replica:0/task:0/device:CPU:0', 1, 'edge_7_v/Read')
    """
    src, _, dst, tensor, _ = key.split(";")
    m = _TASK.search(dst + "/")
    return src, int(m.group(1)) if m else None, tensor


def parse_send_log(lines: Iterable[str]) -> list[tuple[float, int, str]]:
    """The sends of a parameter server's rendezvous log (:data:`SEND_LOG_VMODULE`).

    Parameters
    ----------
    lines : iterable of str
        Log lines. TensorFlow (through absl, before ``absl::InitializeLog``) writes
        ``I0000 00:00:<seconds since the epoch> <thread> base_rendezvous_mgr.cc:<line>]
        BaseRemoteRendezvous Send <rendezvous> <key>``; other lines are skipped.

    Returns
    -------
    list of tuple of (float, int, str)
        ``(time, worker task, tensor name)`` of every send to a worker, in log order.

    Examples
    --------
    >>> parse_send_log(["I0000 00:00:1795662271.278317    7611 base_rendezvous_mgr.cc:163] "
    ...                 "BaseRemoteRendezvous Send 0x7f5c /job:ps/replica:0/task:0/device:"
    ...                 "CPU:0;0f;/job:worker/replica:0/task:1/device:CPU:0;edge_9_a/Read;0:0",
    ...                 "W0000 00:00:1.0 1 x.cc:1] something else"])
    [(1795662271.278317, 1, 'edge_9_a/Read')]
    """
    out = []
    for line in lines:
        m = _SEND_LINE.match(line)
        if m is None or m.group("key").count(";") != 4:
            continue
        _, task, tensor = parse_rendezvous_key(m.group("key"))
        if task is not None:
            out.append((float(m.group("t")), task, tensor))
    return out


def _captured_transfers(captures: Iterable[Mapping[str, Any]]
                        ) -> dict[str, list[dict[str, Any]]]:
    """Every parameter-server RecvTensor RPC of every window, by window name, with the
    time of the PS's send of its value (the nearest one, NaN if none lies within a
    second of the request)."""
    out: dict[str, list[dict[str, Any]]] = {}
    for cap in captures:
        rows = out.setdefault(str(cap["name"]), [])
        sent: dict[tuple[int, str], list[float]] = {}
        for t, task, tensor in parse_send_log(cap.get("log") or []):
            sent.setdefault((task, tensor), []).append(t)
        for conn in cap["connections"]:
            for s in conn["streams"]:
                req, resp = s["request"], s["response"]
                parsed = recv_tensor_request(bytes.fromhex(req["head"])) if req else None
                if parsed is None:
                    continue
                step_id, key = parsed
                _, worker, tensor = parse_rendezvous_key(key)
                if worker is None:
                    continue
                m = _EDGE.match(tensor)
                times = sent.get((worker, tensor), [])
                near = min(times, key=lambda t: abs(t - req["t"]), default=math.nan)
                rows.append({
                    "ps": str(cap["id"]), "conn": conn["client"], "worker": worker,
                    "step_id": step_id,
                    "tensor": tensor, "src_op": m.group(1) if m else tensor,
                    "request_t": req["t"],
                    "sent_t": near if abs(near - req["t"]) < 1.0 else math.nan,
                    "wire_t": resp["t"] if resp else math.nan,
                    "wire_pos": resp["pos"] if resp else math.nan,
                    "done_t": (resp["end_t"] if resp and resp["end_t"] is not None
                               else math.nan)})
    return out


def _match_steps(rpcs: Sequence[Mapping[str, Any]], records: Sequence[Mapping[str, Any]]
                 ) -> dict[int, int]:
    """Traced step index -> step id: the step id whose first request is nearest the
    record's start, among those whose first request falls inside the record's span."""
    first: dict[int, float] = {}
    for r in rpcs:
        first[r["step_id"]] = min(first.get(r["step_id"], math.inf), r["request_t"])
    out: dict[int, int] = {}
    for k, rec in enumerate(records):
        t0 = rec["t0_us"] / 1e6
        inside = [(abs(t - t0), sid) for sid, t in first.items()
                  if t0 - 0.05 <= t <= t0 + rec["step_s"] + 0.05]
        if inside:
            out[k] = min(inside)[1]
    return out


def processing_order(results: Sequence[Mapping[str, Any]],
                     captures: Iterable[Mapping[str, Any]],
                     loads: Sequence[Workload]) -> pd.DataFrame:
    """The per-transfer table of the captured steps (module docstring).

    Parameters
    ----------
    results : sequence of mapping
        The job clients' results; those with ``captured`` steps count (a step recorded
        while a capture process had no socket open, ``capture_on`` false, is left out).
    captures : iterable of mapping
        The capture windows' files (:func:`commsched.cluster.capture.main`): ``name``
        (:func:`window_name`), ``id``, ``connections`` and ``log`` (the PS's send lines,
        :func:`parse_send_log`).
    loads : sequence of Workload
        The workloads of the results.

    Returns
    -------
    pandas.DataFrame
        One row per parameter transfer of a captured step: model, mode, config, hook,
        ``trace_step``, ``worker``, ``ps``, ``conn`` (the worker's end of the
        connection), ``variable``, ``bytes``, ``priority`` (the config's), the times of
        the module docstring, ``wire_pos`` and ``wire_rank`` (0-based, per step, worker,
        PS and connection). Empty (with these columns) without captures.
    """
    cols = ["model", "mode", "config", "hook", "trace_step", "worker", "ps", "conn",
            "variable", "bytes", "priority", "request_s", "sent_s", "handoff_s", "wire_s",
            "wire_pos", "wire_rank", "done_s"]
    by_group = {w.group_id: w for w in loads}
    windows = _captured_transfers(captures)
    rows: list[dict[str, Any]] = []
    for r in results:
        records = r.get("captured") or []
        rpcs = [x for x in windows.get(window_name(r["group"], r["config"]), [])
                if x["worker"] == r["task"]]
        if not records or not rpcs:
            continue
        w = by_group[r["group"]]
        cfg = next(c for c in w.configs if c["name"] == r["config"])
        read_var = r.get("read_ops") or {}
        for k, sid in sorted(_match_steps(rpcs, records).items()):
            rec = records[k]
            if not rec.get("capture_on", True):
                continue
            t0 = rec["t0_us"] / 1e6
            step = [x for x in rpcs if x["step_id"] == sid and x["src_op"] in read_var]
            ranks: dict[tuple[str, str], list[float]] = {}
            for x in step:
                ranks.setdefault((x["ps"], x["conn"]), []).append(x["wire_pos"])
            for x in step:
                var = read_var[x["src_op"]]
                request = x["request_t"] - t0
                sent = x["sent_t"] - t0
                rows.append({
                    "model": w.model, "mode": w.mode, "config": r["config"],
                    "hook": cfg["enforce"], "trace_step": k, "worker": r["task"],
                    "ps": x["ps"], "conn": x["conn"], "variable": var,
                    "bytes": r["variables"].get(var, {}).get("bytes", 0),
                    "priority": (r["priorities"] or {}).get(var, math.nan),
                    "request_s": request, "sent_s": sent,
                    "handoff_s": math.nan if math.isnan(sent) else max(sent, request),
                    "wire_s": x["wire_t"] - t0, "wire_pos": x["wire_pos"],
                    "wire_rank": sorted(ranks[x["ps"], x["conn"]]).index(x["wire_pos"]),
                    "done_s": x["done_t"] - t0})
    return pd.DataFrame(rows, columns=cols)


def displaced(queued: Sequence[float], sent: Sequence[float]) -> int:
    """How many items left out of the order they were queued in: the fewest to move.

    Parameters
    ----------
    queued : sequence of float
        When (or in which rank) each item was queued.
    sent : sequence of float
        When (or in which rank) each left.

    Returns
    -------
    int
        The number of items minus the longest run, in order of leaving, whose queue
        times do not decrease: one item held back behind many counts once, not once per
        item that passed it. Items queued at the same time may leave in either order.

    Examples
    --------
    >>> displaced([0, 1, 2, 3, 4], [4, 0, 1, 2, 3])   # the first one left last
    1
    >>> displaced([0, 1, 2, 3], [3, 2, 1, 0])
    3
    >>> displaced([0, 0, 1], [1, 0, 2])
    0
    """
    keys = [q for _, q in sorted(zip(sent, queued, strict=True), key=lambda x: x[0])]
    tails: list[float] = []
    for k in keys:
        i = bisect.bisect_right(tails, k)
        if i == len(tails):
            tails.append(k)
        else:
            tails[i] = k
    return len(keys) - len(tails)


def processing_out_of_order(order: pd.DataFrame) -> pd.DataFrame:
    """TicTac Sec. 5.1's gRPC error, at the sender: transfers sent out of hand-off order.

    Per captured step, worker, parameter server and connection, the ranked transfers
    (those with a priority: what the enforcement queues; reads the orders leave out, such
    as a training step's batch-norm statistics, go whenever they are ready) whose
    responses the PS wrote out of the order in which they were handed over
    (:func:`displaced` of ``handoff_s`` and ``wire_rank``: the fewest transfers that,
    moved, leave the rest in hand-off order). The hand-off is the PS's send of the value
    (or the request's arrival, when later); a request whose handler TensorFlow runs only
    after the send (on the server's busy inter-op thread) is handed over later than
    that, and stock TensorFlow logs neither that moment nor gRPC's own queue, so this
    count is the paper's plus any such late hand-offs: an upper bound. Beside it, the
    same count against the priority order (``out_of_priority``: whatever the cause, the
    hook's hand-off order included).

    Parameters
    ----------
    order : pandas.DataFrame
        :func:`processing_order`'s table.

    Returns
    -------
    pandas.DataFrame
        One row per model, mode and config: ``steps`` (captured step and worker pairs),
        ``transfers`` (ranked, with a hand-off time and a response), ``out_of_order`` and
        ``rate``; ``ranked`` (with a priority and a response), ``out_of_priority`` and
        ``priority_rate``; ``late_requests`` (of ``transfers``, those whose request
        reached the PS after the value was sent, so that the hand-off waited for it).

    References
    ----------
    .. [1] Hashemi, Jyothi & Campbell, "TicTac", SysML 2019, Sec. 5.1 (0.5% with TIC,
       0.4% with TAC, Inception).
    """
    cols = ["model", "mode", "config", "steps", "transfers", "out_of_order", "rate",
            "ranked", "out_of_priority", "priority_rate", "late_requests"]
    rows = []
    for (model, mode, config), d in order.groupby(["model", "mode", "config"]):
        d = d[d.wire_rank.notna()]
        ranked = d[d.priority.notna()]  # what the enforcement queues
        timed = ranked[ranked.handoff_s.notna()]
        keys = ["trace_step", "worker", "ps", "conn"]
        bad = sum(displaced(g.handoff_s.tolist(), g.wire_rank.tolist())
                  for _, g in timed.groupby(keys))
        bad_p = sum(displaced(g.priority.tolist(), g.wire_rank.tolist())
                    for _, g in ranked.groupby(keys))
        rows.append({"model": model, "mode": mode, "config": config,
                     "steps": d.groupby(keys).ngroups, "transfers": len(timed),
                     "out_of_order": bad,
                     "rate": bad / len(timed) if len(timed) else math.nan,
                     "ranked": len(ranked), "out_of_priority": bad_p,
                     "priority_rate": bad_p / len(ranked) if len(ranked) else math.nan,
                     "late_requests": int((timed.request_s > timed.sent_s).sum())})
    return pd.DataFrame(rows, columns=cols)
