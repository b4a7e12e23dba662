"""commsched.tictac.live.grpcorder without a cluster: RecvTensor requests, rendezvous keys,
the per-transfer processing order of captured steps (from synthetic HTTP/2 traffic through
commsched.cluster.capture), the out-of-order counts, and the job plan's captured steps."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pandas as pd
import pytest

from commsched.cluster.capture import Segment, http2_connections
from commsched.model.graph import add_op, new_graph
from commsched.tictac.live.analysis import metrics
from commsched.tictac.live.config import LiveParams
from commsched.tictac.live.grpcorder import (
    parse_rendezvous_key,
    processing_order,
    processing_out_of_order,
    recv_tensor_request,
    window_name,
)
from commsched.tictac.live.runner import job_plan
from commsched.tictac.live.workload import Workload

PS = ("10.77.0.2", 2222)
W0 = ("10.77.0.3", 40001)
PS_DEV = "/job:ps/replica:0/task:0/device:CPU:0"
T0 = 1_700_000_000.0  # the traced step's first event (wall clock, s)


def varint(n: int) -> bytes:
    out = b""
    while True:
        b, n = n & 0x7F, n >> 7
        out += bytes([b | (0x80 if n else 0)])
        if not n:
            return out


def key(var: str, task: int = 0) -> str:
    return (f"{PS_DEV};0123abcd;/job:worker/replica:0/task:{task}/device:CPU:0;"
            f"edge_{len(var)}_{var}/ReadVariableOp;0:0")


def request_message(step_id: int, k: str) -> bytes:
    kb = k.encode()
    body = b"\x08" + varint(step_id) + b"\x12" + varint(len(kb)) + kb + b"\x18\x01" \
        + b"\x38" + varint(12345)  # dma_ok, request_id
    return b"\x00" + len(body).to_bytes(4, "big") + body


def frame(ftype: int, flags: int, sid: int, payload: bytes = b"") -> bytes:
    return len(payload).to_bytes(3, "big") + bytes([ftype, flags]) + sid.to_bytes(4, "big") \
        + payload


def test_recv_tensor_request_and_key():
    k = key("conv/kernel", task=1)
    assert recv_tensor_request(request_message(2**40 + 3, k)) == (2**40 + 3, k)
    msg = request_message(7, k)
    assert recv_tensor_request(msg[:30]) is None                 # cut before the key ends
    assert recv_tensor_request(b"\x01" + msg[1:]) is None        # compressed
    assert recv_tensor_request(b"\x00\x00\x00\x00\x04\x08\x01\x12\x00") is None  # no key
    assert recv_tensor_request(b"\x00\x00\x00\x00\x03\x0f\xff\xff") is None   # garbage
    assert parse_rendezvous_key(k) == (PS_DEV, 1, "edge_11_conv/kernel/ReadVariableOp")
    assert parse_rendezvous_key("a;b;/job:ps/replica:0/task:0/device:CPU:0;t;0:0")[1] is None
    assert window_name("inception_v1.infer", "tic-sender") == "inception_v1.infer.tic-sender"


def _workload() -> Workload:
    g = new_graph({"net:ps0": 1, "cpu": 1})
    add_op(g, "c", "compute", "cpu", 1.0)
    configs = [{"name": "baseline", "order": "none", "enforce": "none", "priorities": {}},
               {"name": "tac-sender", "order": "tac", "enforce": "sender",
                "priorities": {"a": 0, "b": 1, "c": 2}}]
    return Workload("toy", "infer", 4, 8, "1gbit", g, {}, {}, configs, {}, 1.0)


def _capture(steps: dict[int, tuple[list[str], list[str]]], times: dict,
             sends: dict[tuple[int, str], float] | None = None) -> dict:
    """A capture window of worker 0's connection: per step id, the request order and the
    response (wire) order of the variables; ``times[(step, var, side)]`` the frame times,
    ``sends[(step, var)]`` the PS's send (its log line)."""
    segs, sid, req_seq, resp_seq = [], 1, 1000, 5000
    ids: dict[tuple[int, str], int] = {}
    for step, (reqs, _) in steps.items():
        for v in reqs:
            ids[step, v] = sid
            data = frame(1, 0x04, sid, b"h") + frame(0, 0x01, sid,
                                                     request_message(step, key(v)))
            segs.append(Segment(times[step, v, "req"], W0, PS, req_seq, data))
            req_seq += len(data)
            sid += 2
    for step, (_, wire) in steps.items():
        for v in wire:
            s = ids[step, v]
            data = frame(1, 0x04, s, b"200") + frame(0, 0, s, bytes(100)) \
                + frame(1, 0x05, s, b"trailers")
            segs.append(Segment(times[step, v, "wire"], PS, W0, resp_seq, data))
            resp_seq += len(data)
    segs.sort(key=lambda x: x.t)
    log = [f"I0000 00:00:{t:.6f}    7611 base_rendezvous_mgr.cc:163] BaseRemoteRendezvous "
           f"Send 0x7f5c90507390 {key(v)}" for (_, v), t in (sends or {}).items()]
    return {"name": window_name("toy.infer", "tac-sender"), "id": "ps0",
            "connections": http2_connections(segs, PS), "log": log}


def _result(n_steps: int) -> dict:
    return {"group": "toy.infer", "config": "tac-sender", "task": 0, "steps": [],
            "traces": [], "priorities": {"a": 0, "b": 1, "c": 2},
            "variables": {v: {"shape": [1], "bytes": 4} for v in "abc"}, "enforce_edges": 3,
            "read_ops": {f"{v}/ReadVariableOp": v for v in "abc"},
            "captured": [{"t0_us": int((T0 + k) * 1e6), "step_s": 0.5, "capture_on": True}
                         for k in range(n_steps)]}


def test_processing_order_and_out_of_order_counts():
    # step 100: handed over a, b, c; on the wire a, b, c
    # step 101: handed over a, b, c; on the wire b, a, c (gRPC swapped a and b)
    # c's request of step 101 reached the PS after its value was sent: hand-off = request
    times = {}
    for k, step in enumerate((100, 101)):
        for i, v in enumerate("abc"):
            times[step, v, "req"] = T0 + k + 0.001 * i
        for i, v in enumerate("abc" if step == 100 else "bac"):
            times[step, v, "wire"] = T0 + k + 0.1 + 0.01 * i
    times[101, "c", "req"] = T0 + 1 + 0.05
    sends = {(step, v): T0 + k + t for k, step in enumerate((100, 101))
             for v, t in (("a", 0.02), ("b", 0.03), ("c", 0.04))}
    cap = _capture({100: (list("abc"), list("abc")), 101: (list("abc"), list("bac"))}, times,
                   sends)
    order = processing_order([_result(2)], [cap], [_workload()])
    assert len(order) == 6 and set(order.hook) == {"sender"}
    s1 = order[order.trace_step == 1].set_index("variable")
    assert s1.wire_rank.to_dict() == {"b": 0, "a": 1, "c": 2}
    assert s1.loc["a", "handoff_s"] == pytest.approx(0.02, abs=1e-6)
    assert s1.loc["c", "request_s"] == pytest.approx(0.05, abs=1e-6)
    assert s1.loc["c", "handoff_s"] == pytest.approx(0.05, abs=1e-6)  # the late request
    assert s1.loc["b", "wire_s"] == pytest.approx(0.1, abs=1e-6)
    assert (s1.done_s >= s1.wire_s).all() and s1.bytes.tolist() == [4, 4, 4]
    rates = processing_out_of_order(order)
    (r,) = rates.itertuples()
    assert (r.steps, r.transfers, r.out_of_order, r.ranked, r.out_of_priority) == \
        (2, 6, 1, 6, 1)
    assert r.rate == pytest.approx(1 / 6) and r.late_requests == 1
    m = metrics(_empty_summary(), processing=rates)
    assert m["live.toy.tac-sender.grpc_processing_out_of_order"] == pytest.approx(1 / 6)
    assert m["live.toy.infer.tac-sender.grpc_processing_out_of_order"] == pytest.approx(1 / 6)
    assert m["live.toy.tac-sender.grpc_processing_transfers"] == 6
    assert m["live.toy.tac-sender.ps_send_out_of_priority"] == pytest.approx(1 / 6)


def test_hand_off_order_is_not_the_priority_order():
    # the hook handed b over before a; gRPC kept that order: nothing out of hand-off
    # order, one transfer out of priority order
    times = {(100, v, "req"): T0 + 0.001 * i for i, v in enumerate("abc")}
    times.update({(100, v, "wire"): T0 + 0.1 + 0.01 * i for i, v in enumerate("bac")})
    cap = _capture({100: (list("abc"), list("bac"))}, times,
                   {(100, "a"): T0 + 0.03, (100, "b"): T0 + 0.02, (100, "c"): T0 + 0.04})
    order = processing_order([_result(1)], [cap], [_workload()])
    (r,) = processing_out_of_order(order).itertuples()
    assert (r.out_of_order, r.out_of_priority) == (0, 1)


def test_steps_without_capture_or_sends():
    times = {(100, v, "req"): T0 + 0.001 * i for i, v in enumerate("ab")}
    times.update({(100, v, "wire"): T0 + 0.1 + 0.01 * i for i, v in enumerate("ab")})
    cap = _capture({100: (list("ab"), list("ab"))}, times)  # no send log: no hand-off
    res = _result(1)
    order = processing_order([res], [cap], [_workload()])
    assert len(order) == 2 and order.handoff_s.isna().all()
    (r,) = processing_out_of_order(order).itertuples()
    assert r.transfers == 0 and math.isnan(r.rate) and r.ranked == 2
    res["captured"][0]["capture_on"] = False
    assert processing_order([res], [cap], [_workload()]).empty
    assert processing_order([res], [], [_workload()]).empty
    far = _result(1)
    far["captured"][0]["t0_us"] += 10_000_000  # a traced step the window did not see
    assert processing_order([far], [cap], [_workload()]).empty


def _empty_summary() -> pd.DataFrame:
    return pd.DataFrame(columns=["model", "mode", "config", "order", "hook", "gain"])


def test_job_plan_captures_only_the_sender_configs():
    section = {
        "enabled": True, "hosts": None, "ps": 1, "workers": 2, "bandwidth": "1gbit",
        "burst": "64kb", "latency": "10ms", "threads": 1, "modes": ["infer"],
        "configs": ["tac-sender", "tac-dag"], "models": [{"model": "toy", "size": 8,
                                                           "batch": 4}],
        "trace": {"warmup": 1, "iterations": 1}, "warmup": 1, "iterations": 3,
        "trace_iterations": 1, "sim_iterations": 5, "timeout_s": 60, "step_timeout_s": 10,
        "seed": 0, "grpc_capture_iterations": 2}
    params = LiveParams.from_config(section)
    assert params.grpc_capture_iterations == 2
    assert LiveParams.from_config({k: v for k, v in section.items()
                                   if k != "grpc_capture_iterations"}
                                  ).grpc_capture_iterations == 0
    w = _workload()
    w.configs.append({"name": "tac-dag", "order": "tac", "enforce": "dag", "priorities": {}})
    cluster = SimpleNamespace(spec={"ps": ["a:1"], "worker": ["b:1", "c:1"]},
                              targets=["grpc://b:1", "grpc://c:1"])
    files = {"folder": "/x", "ids": ["ps0"], "timeout_s": 60.0}
    plan = job_plan(params, cluster, [w], files)
    assert plan["capture"] == files
    by = {c["name"]: c for c in plan["groups"][0]["configs"]}
    assert by["tac-sender"]["capture_iterations"] == 2
    assert by["tac-sender"]["capture_window"] == "toy.infer.tac-sender"
    assert "capture_iterations" not in by["baseline"] and "capture_iterations" not in by["tac-dag"]
    assert "capture_iterations" not in w.configs[1]  # the workload's own configs untouched
    plain = job_plan(params, cluster, [w])
    assert plain["capture"] is None
    assert all("capture_iterations" not in c for c in plain["groups"][0]["configs"])
