"""Live area, the parts that need neither root nor TensorFlow: priorities and groups,
variable matching, step-trace parsing, order agreement, config checks, run state, signal
guard, the experiment's tables and metrics, and the skipped path."""

from __future__ import annotations

import dataclasses
import math
import os
import signal
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from commsched.claims import evaluate, load_claims
from commsched.cluster import net
from commsched.cluster.emulated import ClusterConfig, ClusterInterrupted, HostCluster, guard
from commsched.cluster.procs import ProcRecord, alive, start_time
from commsched.cluster.state import RunState, list_runs
from commsched.cost.overhead import (
    DISPATCH,
    Overhead,
    dag_gates,
    fit_compute,
    fit_dispatch,
    fit_fallback,
    fit_gate,
    fit_worker_noise,
)
from commsched.errors import CommschedError
from commsched.model.graph import add_op, new_graph
from commsched.results import read_metrics, read_table
from commsched.tictac.experiments import live
from commsched.tictac.live.analysis import (
    fit_overhead,
    metrics,
    runtime_predictions,
    summarize,
    workload_compute_factors,
)
from commsched.tictac.live.config import LiveParams
from commsched.tictac.live.order import match_variables, priority_groups, variable_priorities
from commsched.tictac.live.steptrace import parse_label, transfers
from commsched.tictac.live.tables import (
    agreement,
    arrival_order_repeats,
    out_of_order_rate,
    tables,
    traced_steps,
)
from commsched.tictac.live.workload import Workload, achieved_ranks
from commsched.tictac.sim import compose, iteration

ROOT = Path(__file__).resolve().parent.parent

# --- priorities, groups, matching ----------------------------------------------------


def test_variable_priorities_take_the_smallest_recv_priority():
    g = new_graph({"net": 1, "cpu": 1})
    add_op(g, "r1", "recv", "net", 1.0, param="w")
    add_op(g, "r2", "recv", "net", 1.0, param="w")  # a variable may have two recvs
    add_op(g, "r3", "recv", "net", 1.0, param="b")
    add_op(g, "c", "compute", "cpu", 1.0)
    out = variable_priorities(g, {"r1": 3, "r2": 1, "r3": 2, "c": 0})
    assert out == {"w": 1, "b": 2}  # compute ops are ignored
    with pytest.raises(CommschedError, match="not in the view"):
        variable_priorities(g, {"nope": 1})
    add_op(g, "r4", "recv", "net", 1.0)
    with pytest.raises(CommschedError, match="no 'param'"):
        variable_priorities(g, {"r4": 1})


@given(st.dictionaries(st.sampled_from("abcdefgh"), st.integers(0, 3)),
       st.lists(st.sampled_from("abcdefghij"), unique=True))
def test_priority_groups_partition_the_prioritized_names(prios, names):
    groups = priority_groups(prios, names)
    flat = [n for grp in groups for n in grp]
    assert sorted(flat) == sorted(n for n in names if n in prios)  # each once, none extra
    levels = [prios[grp[0]] for grp in groups]
    assert levels == sorted(set(levels))  # strictly increasing priority
    assert all(prios[n] == prios[grp[0]] for grp in groups for n in grp)
    for grp in groups:  # the order of `names` is kept inside a group
        assert grp == [n for n in names if n in grp]


def test_match_variables_exact_suffix_order_and_errors():
    assert match_variables({"a/k": [2]}, {"a/k": [2], "x": [1]}) == {"a/k": "a/k"}
    # Keras' per-process suffixes on auto-generated names
    assert match_variables({"seed_generator/s": [2], "d/k": [3]},
                           {"d/k": [3], "seed_generator_4/s": [2]}) == {
        "seed_generator/s": "seed_generator_4/s", "d/k": "d/k"}
    # names differ entirely but creation order and shapes agree
    assert match_variables({"p": [2], "q": [3]}, {"u": [2], "v": [3]}) == {"p": "u", "q": "v"}
    with pytest.raises(CommschedError, match="shape"):
        match_variables({"a": [2]}, {"a": [3]})
    with pytest.raises(CommschedError, match="no counterpart"):
        match_variables({"a": [2]}, {"b": [2], "c": [2]})
    # two live candidates with the same canonical name: ambiguous, so order decides
    assert match_variables({"s/x": [1], "t": [2]}, {"s_1/x": [1], "s_2/x": [2]}) == {
        "s/x": "s_1/x", "t": "s_2/x"}


# --- step traces and order agreement ----------------------------------------------------


def test_parse_label_and_transfers():
    label = ("[14.1MB] [662.3Mb/s] edge_18_m/d_1/Cast/ReadVariableOp from "
             "/job:ps/replica:0/task:0/device:CPU:0 to /job:worker/replica:0/task:0/device:CPU:0")
    assert parse_label(label) == ("m/d_1/Cast/ReadVariableOp",
                                  "/job:ps/replica:0/task:0/device:CPU:0",
                                  "/job:worker/replica:0/task:0/device:CPU:0")
    assert parse_label("m/d = MatMul(a, b)") is None
    stats = [
        {"node_name": "RecvTensor", "timeline_label": label, "all_start_micros": 1_000_500,
         "op_end_rel_micros": 2_000},
        {"node_name": "MatMul", "timeline_label": "x = MatMul(a)", "all_start_micros": 1_000_000,
         "op_end_rel_micros": 10},
        {"node_name": "RecvTensor", "timeline_label": "[1B] [1Mb/s] edge_3_a from /x to /y",
         "all_start_micros": 1_000_100, "op_end_rel_micros": 1},
    ]
    out = transfers(stats, 1_000_000)
    assert [t.src_op for t in out] == ["a", "m/d_1/Cast/ReadVariableOp"]  # sorted by start
    assert out[1].start == pytest.approx(0.0005) and out[1].end == pytest.approx(0.0025)


@given(st.lists(st.floats(0, 1), min_size=2, max_size=8),
       st.lists(st.integers(0, 3), min_size=2, max_size=8))
def test_agreement_is_a_fraction_and_symmetric_under_reversal(starts, prios):
    n = min(len(starts), len(prios))
    s = {str(i): starts[i] for i in range(n)}
    p = {str(i): prios[i] for i in range(n)}
    a = agreement(s, p)
    if len(set(p.values())) < 2:
        assert math.isnan(a)
        return
    assert 0.0 <= a <= 1.0
    # reversing time reverses every strict pair and keeps ties: a -> 1 - a
    assert agreement({k: -v for k, v in s.items()}, p) == pytest.approx(1.0 - a)


# --- network names and parameters ------------------------------------------------------


def test_rates_sizes_and_names():
    assert net.parse_rate("1gbit") == 125e6
    assert net.parse_rate("100mbit") == 12.5e6
    assert net.parse_size("64kb") == 65536
    assert net.tc_bits(net.parse_rate("100mbit")) == "100000000bit"
    assert net.tc_bits(0.6) == "5bit"  # 4.8 bits rounds to 5
    assert net.tc_bits(10.0, floor_bit=8000) == "8000bit"
    for bad in ("fast", "1 parsec", "-3mbit", "0gbit"):
        with pytest.raises(CommschedError):
            net.parse_rate(bad)
    br, links = net.names("r1", ["ps0", "w0", "w1"])
    assert br == "cs-r1-br"
    assert [lk.namespace for lk in links] == ["cs-r1-ps0", "cs-r1-w0", "cs-r1-w1"]
    assert len({lk.address for lk in links}) == 3
    assert all(len(lk.bridge_dev) <= 15 for lk in links)  # Linux interface name limit
    with pytest.raises(CommschedError, match="run id"):
        net.names("Bad_Id", ["ps0"])


def test_cluster_config_and_host_cluster_checks(tmp_path):
    cfg = ClusterConfig(n_ps=2, n_workers=3)
    assert cfg.hosts() == ["ps0", "ps1", "w0", "w1", "w2"]
    assert cfg.bandwidth_bytes == 125e6
    for bad in ({"n_workers": 0}, {"port": 70000}, {"bandwidth": "fast"}, {"threads": 0}):
        with pytest.raises(CommschedError):
            ClusterConfig(**bad)
    hc = HostCluster({"ps": ["h1:2222"], "worker": ["h2:2222", "h3:2222"]}, 125e6, tmp_path)
    assert hc.targets == ["grpc://h2:2222", "grpc://h3:2222"]
    with pytest.raises(CommschedError, match="host:port"):
        HostCluster({"ps": ["h1"], "worker": ["h2:1"]}, 1.0, tmp_path)


# --- run state and processes -------------------------------------------------------------


def test_run_state_roundtrip_and_staleness(tmp_path, monkeypatch):
    monkeypatch.setenv("COMMSCHED_RUN_DIR", str(tmp_path))
    me = f"{os.getpid()}:{start_time(os.getpid())}"
    live_run = RunState("aaa", tmp_path / "aaa", me, "up", ["cs-aaa-br"],
                        [ProcRecord(os.getpid(), start_time(os.getpid()) or 0, "ps0", None, "")])
    live_run.save()
    dead = RunState("bbb", tmp_path / "bbb", "1:1", "up", ["cs-bbb-br"])  # pid 1, wrong start
    dead.save()
    runs = {r.run_id: r for r in list_runs(tmp_path)}
    assert set(runs) == {"aaa", "bbb"}
    assert runs["aaa"].processes[0].role == "ps0" and alive(runs["aaa"].processes[0])
    assert not runs["aaa"].stale and runs["bbb"].stale
    assert not alive(ProcRecord(os.getpid(), 1, "x", None, ""))  # same PID, other start


def test_guard_turns_alarm_and_sigterm_into_errors_and_restores_handlers():
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(ClusterInterrupted, match="time limit"), guard(timeout=0.2):
        time.sleep(5)
    with pytest.raises(ClusterInterrupted, match="SIGTERM"), guard():
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)
    assert signal.getsignal(signal.SIGTERM) is before
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


# --- experiment: config, tables, metrics, skipped path -----------------------------------

SECTION = {
    "enabled": True, "hosts": None, "ps": 1, "workers": 2, "bandwidth": "1gbit",
    "burst": "64kb", "latency": "10ms", "threads": 1, "modes": ["infer"],
    "configs": ["tac-sender"], "models": [{"model": "toy", "size": 8, "batch": 4}],
    "trace": {"warmup": 1, "iterations": 1}, "warmup": 1, "iterations": 3,
    "trace_iterations": 1, "sim_iterations": 5, "timeout_s": 60, "step_timeout_s": 10,
    "seed": 0,
}


def test_live_params_reject_bad_sections():
    p = LiveParams.from_config(SECTION)
    assert p.configs == [("tac", "sender")] and p.models[0].batch == {"infer": 4}
    for key, value, msg in [("configs", ["toc-sender"], r"live\.configs\.0: 'toc-sender'"),
                            ("modes", ["fly"], "mode"),
                            ("models", [{"model": "m", "size": 8, "batch": 2,
                                         "bandwidth": "1gbyte"}], "bandwidth"),
                            ("models", [{"model": "m", "size": 8, "batch": {"train": 2}}],
                             "no batch"),
                            ("models", [{"model": "m", "batch": 2}], "size")]:
        with pytest.raises(CommschedError, match=msg):
            LiveParams.from_config({**SECTION, key: value})
    with pytest.raises(CommschedError, match="'ps' is a required property"):
        LiveParams.from_config({k: v for k, v in SECTION.items() if k != "ps"})


def test_config_file_section_parses():
    import yaml

    section = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())["live"]
    params = LiveParams.from_config(section)
    assert params.workers >= 2 and len(params.models) >= 2 and set(params.modes) == {
        "infer", "train"}


def _toy_workload() -> live.Workload:
    g = new_graph({"net:ps0": 1, "cpu": 1}, variables={
        "a": {"bytes": 8, "shape": [2]}, "b": {"bytes": 8, "shape": [2]}})
    add_op(g, "recv:a", "recv", "net:ps0", 1.0, param="a", bytes=8)
    add_op(g, "recv:b", "recv", "net:ps0", 1.0, param="b", bytes=8)
    add_op(g, "c", "compute", "cpu", 1.0)
    g.add_edges_from([("recv:a", "c"), ("recv:b", "c")])
    g.graph["recvs"] = {"recv:a": "a", "recv:b": "b"}
    configs = [{"name": "baseline", "order": "none", "enforce": "none", "priorities": {}},
               {"name": "tac-sender", "order": "tac", "enforce": "sender",
                "priorities": {"a": 0, "b": 1}}]
    return Workload("toy", "infer", 4, 8, "1gbit", g, {"tac": {"a": 0, "b": 1}},
                         {"tac": {"recv:a": 0, "recv:b": 1}}, configs,
                         {"baseline": 3.0, "tac-sender": 2.0}, 1.0)


def _result(config: str, task: int, work: list[float], barrier: list[float],
            starts: dict[str, float]) -> dict:
    return {"group": "toy.infer", "config": config, "task": task,
            "steps": [{"wall_start": 0.0, "work": w, "barrier": b}
                      for w, b in zip(work, barrier, strict=True)],
            "traces": [{"recvs": [{"var": v, "start": s, "end": s + 0.1}
                                  for v, s in starts.items()], "grads": [], "ps_reads": []}],
            "priorities": {} if config == "baseline" else {"a": 0, "b": 1},
            "variables": {"a": {"shape": [2], "bytes": 8}, "b": {"shape": [2], "bytes": 8}},
            "enforce_edges": 0}


def test_tables_summary_and_metrics_from_known_results():
    w = _toy_workload()
    results = [
        _result("baseline", 0, [3.0, 3.0], [1.0, 0.0], {"a": 0.2, "b": 0.1}),
        _result("baseline", 1, [4.0, 2.0], [0.0, 1.0], {"a": 0.2, "b": 0.1}),
        _result("tac-sender", 0, [2.0, 2.0], [0.0, 0.0], {"a": 0.1, "b": 0.2}),
        _result("tac-sender", 1, [2.0, 1.5], [0.0, 0.5], {"a": 0.1, "b": 0.2}),
    ]
    steps, xfers = tables(results, [w], 2)
    # iteration time = slowest worker's work + barrier: baseline 4 and 3, tac 2 and 2
    base = steps[(steps.config == "baseline") & (steps.worker == 0)]
    assert base.iteration_s.tolist() == [4.0, 3.0]
    assert base.straggler.tolist() == pytest.approx([1 / 4, 1 / 3])
    summary = summarize(steps, xfers, [w], 2).set_index("config")
    assert summary.loc["tac-sender", "gain"] == pytest.approx(3.5 / 2.0 - 1)
    assert summary.loc["tac-sender", "throughput"] == pytest.approx(2 * 4 / 2.0)
    assert summary.loc["tac-sender", "order_agreement"] == 1.0
    assert summary.loc["tac-sender", "end_agreement"] == 1.0  # ends in the same order here
    assert summary.loc["baseline", "order_agreement"] == 0.0  # b before a, TAC says a first
    assert summary.loc["tac-sender", "pred_error"] == pytest.approx(2.0 / 2.0 - 1)
    assert summary.loc["baseline", "pred_error"] == pytest.approx(3.0 / 3.5 - 1)
    assert summary.loc["baseline", "pred_error_nominal"] == pytest.approx(3.0 / 3.5 - 1)
    # straggler: baseline mean (1/4 + 1/3) / 2; tac-sender (0 + 0.5/2) / 2
    assert summary.loc["tac-sender", "straggler_reduction"] == pytest.approx(
        (1 / 4 + 1 / 3) / 2 / 0.125)
    m = metrics(summary.reset_index())
    assert m["live.toy.infer.best_gain"] == pytest.approx(0.75)
    assert m["live.toy.infer.tac-sender.gain"] == pytest.approx(0.75)
    assert m["live.straggler_increases"] == 0
    assert "live.infer.best_gain" not in m  # no best over models
    assert m["live.sender.order_agreement"] == 1.0
    assert m["live.none.order_agreement"] == 0.0
    assert m["live.pred_error.median_abs"] == pytest.approx((0 + 0.5 / 3.5) / 2)
    fitted = {"toy.infer": {"baseline": 3.5, "tac-sender": 3.0}}
    s2 = summarize(steps, xfers, [w], 2, fitted, fitted).set_index("config")
    assert s2.loc["baseline", "pred_error"] == pytest.approx(0.0)
    assert s2.loc["tac-sender", "pred_error_loo"] == pytest.approx(0.5)
    assert s2.loc["tac-sender", "pred_error_nominal"] == pytest.approx(0.0)


def test_arrival_order_repeats_and_out_of_order_rate():
    rows = []
    for step, order in enumerate([("a", "b", "c"), ("b", "a", "c"), ("a", "b", "c")]):
        for k, v in enumerate(order):
            rows.append({"model": "m", "mode": "train", "config": "baseline",
                         "hook": "none", "worker": 0, "trace_step": step, "kind": "recv",
                         "variable": v, "priority": "abc".index(v), "start_s": 0.0,
                         "end_s": 1.0 + k})
    x = pd.DataFrame(rows)
    r = arrival_order_repeats(x)
    assert r[["steps", "distinct"]].values.tolist() == [[3, 2]]
    assert r.unique_frac.iloc[0] == pytest.approx(2 / 3)
    # same start everywhere: nothing was handed to the network earlier, nothing overtaken
    assert out_of_order_rate(x).overtaken.tolist() == [0]
    x.loc[(x.trace_step == 1) & (x.variable == "c"), "start_s"] = -1.0  # c first, arrives last
    ooo = out_of_order_rate(x)
    assert ooo.overtaken.tolist() == [2] and ooo.rate.iloc[0] == pytest.approx(2 / 9)
    # under the sender hook the hand-off order is the priority order, not the request
    # time: step 1 delivered b before a (priority 0), one reordered transfer
    sender = x.assign(config="tic-sender", hook="sender")
    got = out_of_order_rate(sender)
    assert got.overtaken.tolist() == [1] and got.rate.iloc[0] == pytest.approx(1 / 9)
    m = metrics(pd.DataFrame(columns=["model", "mode", "config", "straggler",
                                           "pred_error", "pred_error_nominal", "gain",
                                           "straggler_reduction", "hook", "order",
                                           "order_agreement", "end_agreement"]), r, ooo)
    assert m["live.m.baseline.unique_order_frac"] == pytest.approx(2 / 3)
    assert m["live.m.baseline.grpc_out_of_order"] == pytest.approx(2 / 9)
    assert m["live.baseline.unique_order_frac_spread"] == 0.0  # one model
    # a second model whose three steps all take one order: 1/3 distinct
    x2 = x.assign(model="n")
    x2["end_s"] = 1.0 + x2["priority"]
    m = metrics(pd.DataFrame(columns=["model", "mode", "config", "straggler", "pred_error",
                                      "pred_error_nominal", "gain", "straggler_reduction",
                                      "hook", "order", "order_agreement", "end_agreement"]),
                arrival_order_repeats(pd.concat([x, x2])))
    assert m["live.n.baseline.unique_order_frac"] == pytest.approx(1 / 3)
    assert m["live.baseline.unique_order_frac_spread"] == pytest.approx(2 / 3 - 1 / 3)


def test_fit_overhead_recovers_known_costs():
    # two models, the link: span = n * 1 ms + bytes / 100 MB/s (baseline); under the DAG
    # hook the executor is idle 2 ms (the gate) + the transfer at every group boundary
    # (priorities 0, 1, 2, ...); compute = 1.5 x the oracle's (the op count does not
    # matter); after the last arrival the executor's wall time is 1.2 x its ops' time
    xrows, trows, srows = [], [], []
    for model, n, size, oracle in (("m1", 4, 1e6, 0.5), ("m2", 10, 3e5, 0.2)):
        for config, hook, per in (("baseline", "none", 1e-3), ("tac-dag", "dag", 3e-3)):
            for step in range(2):
                t = 0.0
                for i in range(n):
                    dur = per + size / 1e8
                    xrows.append({"model": model, "mode": "train", "config": config,
                                  "trace_step": step, "worker": 0, "kind": "recv",
                                  "variable": f"v{i}", "bytes": size, "priority": float(i),
                                  "start_s": 0.0, "end_s": t + dur,
                                  "idle_s": dur if i else math.nan})
                    t += dur
                trows.append({"model": model, "mode": "train", "config": config,
                              "compute_s": 1.5 * oracle, "oracle_compute_s": oracle,
                              "oracle_ops": n, "tail_ops": n, "tail_op_s": 0.1 * oracle,
                              "tail_wall_s": 0.12 * oracle})
                srows += [{"model": model, "mode": "train", "config": config, "hook": hook,
                           "step": step, "worker": w, "barrier_s": 0.002 + w} for w in (0, 1)]
    x, t, st = pd.DataFrame(xrows), pd.DataFrame(trows), pd.DataFrame(srows)
    ov = fit_overhead(x, t, st)
    assert ov.transfer_s == pytest.approx(1e-3, rel=1e-6)
    assert ov.rate_Bps == pytest.approx(1e8, rel=1e-6)
    assert ov.dag_gate_s == pytest.approx(2e-3, rel=1e-6)
    assert ov.compute_factor == pytest.approx(1.5) and ov.contention == 0.0  # no overlap
    assert ov.gap_factor == pytest.approx(1.2)
    assert ov.step_s == pytest.approx(0.002)
    factors = workload_compute_factors(t)
    assert factors[("m1", "train")] == pytest.approx(1.5)
    # the held-out model's boundaries leave the gate's fit: m2's gates cost 5 ms instead
    x.loc[(x.model == "m2") & (x.config == "tac-dag"), "idle_s"] += 3e-3
    assert fit_overhead(x, t, st, exclude_model="m2").dag_gate_s == pytest.approx(2e-3)
    assert fit_overhead(x, t, st, exclude_model="m1").dag_gate_s == pytest.approx(5e-3)
    assert fit_overhead(x[x.config == "baseline"], t, st).dag_gate_s is None  # no DAG steps
    with pytest.raises(CommschedError, match="no traced baseline"):
        fit_overhead(x.iloc[:0], t, st)


def test_the_held_out_model_leaves_every_pooled_fit():
    # m1 and m2: compute = 1.5 x the oracle's, baseline transfers 1 ms + 100 MB/s;
    # m3 is far off (compute 4 x, 10 ms per transfer): leaving it out gives m1 and m2's
    xrows, trows, srows = [], [], []
    for model, n, size, oracle, k, per in (("m1", 4, 1e6, 0.5, 1.5, 1e-3),
                                           ("m2", 10, 3e5, 0.2, 1.5, 1e-3),
                                           ("m3", 6, 5e5, 0.3, 4.0, 1e-2)):
        for step in range(2):
            t = 0.0
            for i in range(n):
                t += per + size / 1e8
                xrows.append({"model": model, "mode": "train", "config": "baseline",
                              "trace_step": step, "worker": 0, "kind": "recv",
                              "variable": f"v{i}", "bytes": size, "start_s": 0.0, "end_s": t})
            trows.append({"model": model, "mode": "train", "config": "baseline",
                          "compute_s": k * oracle * (1 + step),
                          "oracle_compute_s": oracle * (1 + step), "oracle_ops": 100 * n,
                          "first_recv_s": 100 * n * (1e-4 if model == "m3" else 1e-5)})
            srows.append({"model": model, "mode": "train", "config": "baseline",
                          "hook": "none", "step": step, "worker": 0, "barrier_s": 0.002})
    x, t, st = pd.DataFrame(xrows), pd.DataFrame(trows), pd.DataFrame(srows)
    held = fit_overhead(x, t, st, exclude_model="m3")
    assert held.compute_factor == pytest.approx(1.5)
    assert held.transfer_s == pytest.approx(1e-3) and held.rate_Bps == pytest.approx(1e8)
    assert held.dispatch_s == pytest.approx(1e-5)  # m3 dispatches 10 x slower
    assert fit_overhead(x, t, st).dispatch_s > 2e-5
    assert fit_overhead(x, t.drop(columns="first_recv_s"), st).dispatch_s == 0.0
    # m3's steps weigh by their compute time: (1.5 (0.5 + 1) + 1.5 (0.2 + 0.4) + 4 (0.3 +
    # 0.6)) / (1.5 + 0.6 + 0.9)
    pooled = fit_overhead(x, t, st)
    assert pooled.compute_factor == pytest.approx((1.5 * 2.1 + 4 * 0.9) / 3.0)
    assert pooled.transfer_s > 1.1e-3
    assert fit_overhead(x, t, st, exclude_model="m1").compute_factor == pytest.approx(
        (1.5 * 0.6 + 4 * 0.9) / 1.5)


def test_runtime_predictions_run_the_intended_orders_with_each_hooks_overheads():
    w = _toy_workload()
    w.configs.append({"name": "tac-dag", "order": "tac", "enforce": "dag",
                      "priorities": {"a": 0, "b": 1}})
    w.predicted["tac-dag"] = 2.0
    params = LiveParams.from_config({**SECTION, "workers": 2, "sim_iterations": 4})
    # By hand (as in the achieved-order test): four 1 s transfers on the shared channel,
    # then each worker's 1 s op: 5 s + step_s 0.5. Under the DAG hook each worker's gate
    # (1 s on its executor) runs after a arrived and before b is requested: a0 [0,1],
    # a1 [1,2], gates [1,2] and [2,3], b0 [2,3], b1 [3,4], c0 [3,4], c1 [4,5]: 5 s too,
    # the gate hidden behind the other worker's transfer; with 2 s gates b0 [3,4],
    # b1 [4,5], c1 [5,6]: 6.5 s. The pooled fit's link is twice as fast: 3 s + 0.5.
    held = Overhead(0.0, 8.0, 1.0, 0.5, dag_gate_s=2.0)
    pooled = Overhead(0.0, 16.0, 1.0, 0.5)
    pred = runtime_predictions([w], params, pooled, {"toy": held})
    assert pred["lomo"]["toy.infer"]["tac-sender"] == pytest.approx(5.5)
    assert pred["lomo"]["toy.infer"]["tac-dag"] == pytest.approx(6.5)
    assert pred["runtime"]["toy.infer"]["tac-sender"] == pytest.approx(3.5)
    assert runtime_predictions([w], params, pooled, {})["lomo"] == {}
    results = [_result(c, task, [5.0], [0.0], {"a": 0.1, "b": 0.2})
               for c in ("baseline", "tac-sender", "tac-dag") for task in (0, 1)]
    steps, xfers = tables(results, [w], 2)
    s = summarize(steps, xfers, [w], 2, runtime=pred).set_index("config")
    assert s.loc["tac-dag", "pred_error_lomo"] == pytest.approx(6.5 / 5.0 - 1)
    assert s.loc["tac-sender", "pred_error_runtime"] == pytest.approx(3.5 / 5.0 - 1)
    m = metrics(s.reset_index())
    assert m["live.pred_error_lomo.max_abs"] == pytest.approx(0.3)
    assert m["live.pred_error_lomo.median_abs"] == pytest.approx(
        s.pred_error_lomo.abs().median())


def test_achieved_ranks_follow_arrivals_and_drive_the_prediction():
    w = _toy_workload()
    results = [_result("baseline", 0, [1.0], [0.0], {"a": 0.2, "b": 0.1}),  # b arrives first
               _result("baseline", 1, [1.0], [0.0], {"a": 0.1})]  # b never arrives: last
    ranks = achieved_ranks(results, [w], 2)[w.group_id]["baseline"]
    assert len(ranks) == 1
    assert ranks[0].tolist() == [[1.0, 0.0], [0.0, 1.0]]  # view order: recv:a, recv:b
    # By hand: recvs take 8 B / 8 B/s = 1 s on the shared channel, compute 1 s. With TAC's
    # achieved order (a, then b) on both workers: w0.a [0,1] w1.a [1,2] w0.b [2,3]
    # w1.b [3,4]; c of w0 [3,4], of w1 [4,5]: iteration 5, plus step_s 0.5.
    ov = Overhead(0.0, 8.0, 1.0, 0.5)
    ach = {"baseline": ranks, "tac-sender": [np.array([[0.0, 1.0], [0.0, 1.0]])]}
    pred = w.predict_achieved(2, ov, ach)
    assert pred["tac-sender"] == pytest.approx(5.5)
    with pytest.raises(CommschedError, match="no traced step"):
        w.predict_achieved(2, ov, {"baseline": ranks})


def _live_compute(oracle: float, phi: float, f0: float, s: float) -> float:
    """The live compute time of ``oracle`` seconds of ops run at ``1 / f0`` of the oracle's
    speed, at ``1 / (f0 (1 + s))`` for the share ``phi`` of the live time."""
    return f0 * oracle / ((1 - phi) + phi / (1 + s))


def test_fit_compute_recovers_a_known_factor():
    # 4 traced steps whose live compute is 1.8 x the oracle's: recovered, whatever the
    # step sizes; no per-op cost in the model (Overhead.apply scales every compute op)
    oracle = [0.2, 0.5, 0.3, 0.9]
    assert fit_compute(oracle, [1.8 * x for x in oracle]) == (pytest.approx(1.8), 0.0)
    # compute at 1 / 1.2 of the oracle's speed, at 1 / (1.2 x 1.9) while a transfer is in
    # flight, for the share phi of the live time: both recovered, whatever the sizes
    phi = [0.0, 0.3, 1.0, 0.6]
    live = [_live_compute(x, p, 1.2, 0.9) for x, p in zip(oracle, phi, strict=True)]
    assert fit_compute(oracle, live, phi) == (pytest.approx(1.2), pytest.approx(0.9))
    # the simulator's stretch of oracle times, d (1 + s phi_op), read back: an op fully in
    # flight and one fully quiet, summed as one traced step, and the quiet one alone
    quiet, busy = 0.3, 0.2
    live_s = 1.2 * (quiet + busy * 1.9)
    assert fit_compute([quiet + busy, quiet], [live_s, 1.2 * quiet],
                       [1.2 * busy * 1.9 / live_s, 0.0]) == (pytest.approx(1.2),
                                                             pytest.approx(0.9))
    # compute faster in flight than quiet: no contention, one factor
    assert fit_compute([1.0, 1.0], [2.0, 1.0], [0.0, 1.0]) == (pytest.approx(1.5), 0.0)
    g = new_graph({"cpu": 1})
    add_op(g, "c", "compute", "cpu", 0.1)
    assert Overhead(0.0, 1.0, 2.0, 0.0, gap_factor=1.5).apply(g).nodes["c"]["duration"] == (
        pytest.approx(2.0 * 1.5 * 0.1))
    for bad in (([], []), ([0.0], [1.0]), ([1.0], [math.nan]), ([1.0, 2.0], [1.0]),
                ([1.0], [1.0], [0.1, 0.2])):
        with pytest.raises(CommschedError, match="fit_compute"):
            fit_compute(*bad)


def test_contention_fit_leaves_the_held_out_model():
    # m1 and m2: compute factor 1.2, contention 0.8 (_live_compute), overlaps 0.1-0.9;
    # m3 runs 3 x its oracle whatever the overlap: leaving it out recovers 1.2 and 0.8
    xrows, trows, srows = [], [], []
    for model, oracle, f0, s in (("m1", 0.5, 1.2, 0.8), ("m2", 0.2, 1.2, 0.8),
                                 ("m3", 0.3, 3.0, 0.0)):
        for step, phi in enumerate((0.1, 0.5, 0.9)):
            xrows += [{"model": model, "mode": "train", "config": "baseline",
                       "trace_step": step, "worker": 0, "kind": "recv", "variable": f"v{i}",
                       "bytes": 1e6, "start_s": 0.0, "end_s": (i + 1) * 0.011}
                      for i in range(3)]
            trows.append({"model": model, "mode": "train", "config": "baseline",
                          "compute_s": _live_compute(oracle, phi, f0, s),
                          "oracle_compute_s": oracle,
                          "net_overlap": phi})
            srows.append({"model": model, "mode": "train", "config": "baseline",
                          "hook": "none", "step": step, "worker": 0, "barrier_s": 0.002})
    x, t, st = pd.DataFrame(xrows), pd.DataFrame(trows), pd.DataFrame(srows)
    held = fit_overhead(x, t, st, exclude_model="m3")
    assert (held.compute_factor, held.contention) == (pytest.approx(1.2), pytest.approx(0.8))
    assert fit_overhead(x, t, st).contention < 0.8  # m3 in the fit pulls it down
    # a run without executor timelines (no overlap measured): one factor, no contention
    assert fit_overhead(x, t.assign(net_overlap=math.nan), st).contention == 0.0


def test_dag_gates_serialise_the_workers_compute_and_transfers():
    # ra -> ca (2 s) -> cb (1 s) <- rb; rc unranked. Gate 0 follows ra and ca (runnable
    # once group 0 arrived) and precedes rb; rc is not held back
    g = new_graph({"net:ps0": 1, "cpu": 1})
    for r in ("ra", "rb", "rc"):
        add_op(g, r, "recv", "net:ps0", 1.0, bytes=8)
    add_op(g, "ca", "compute", "cpu", 2.0)
    add_op(g, "cb", "compute", "cpu", 1.0)
    g.add_edges_from([("ra", "ca"), ("ca", "cb"), ("rb", "cb"), ("rc", "cb")])
    h = dag_gates(g, {"ra": 0, "rb": 1}, 0.5)
    assert set(h.predecessors("dag_gate/0")) == {"ra", "ca"}
    assert set(h.successors("dag_gate/0")) == {"rb"} and h.in_degree("rc") == 0
    assert h.nodes["dag_gate/0"]["resource"] == "cpu" and g.number_of_nodes() == 5
    # one worker, ra first: ra [0,1], ca [1,3], gate [3,3.5], rb [3.5,4.5], cb [4.5,5.5]
    # (rc goes [1,2] before rb, whose request waits for the gate); without gates 4 s
    prio = np.array([[0.0, 1.0, 2.0]])
    assert iteration(compose(h, 1), prio).iteration_time == pytest.approx(5.5)
    assert iteration(compose(g, 1), prio).iteration_time == pytest.approx(4.0)
    assert dag_gates(g, {"ra": 0, "rb": 0}, 0.5) is g  # one group: nothing to gate
    with pytest.raises(CommschedError, match="not recvs"):
        dag_gates(g, {"ca": 0, "rb": 1}, 0.5)
    with pytest.raises(CommschedError, match="gate"):
        dag_gates(g, {"ra": 0, "rb": 1}, -1.0)
    ov = Overhead(0.0, 8.0, 1.0, 0.0, dag_gate_s=0.5)
    assert ov.for_hook(g, "sender", {"ra": 0, "rb": 1}).number_of_nodes() == 5
    assert ov.for_hook(g, "dag", {"ra": 0, "rb": 1}).has_node("dag_gate/0")
    with pytest.raises(CommschedError, match="order"):
        ov.for_hook(g, "dag")


def test_dispatch_delays_every_request_by_the_executors_ops():
    # first requests at 10 us per op of the step's graph (two models, NaN left out)
    assert fit_dispatch([0.01, 0.04, math.nan, 0.0005], [1000, 4000, 10, 50]) == (
        pytest.approx(1e-5))
    with pytest.raises(CommschedError, match="fit_dispatch"):
        fit_dispatch([math.nan], [10])
    # r (1 s) -> c (2 s): 3 s; the dispatch of 2 ops x 0.25 s comes first on the worker's
    # executor and holds the request back: 3.5 s, c after it as well
    g = new_graph({"net:ps0": 1, "cpu": 1})
    add_op(g, "r", "recv", "net:ps0", 1.0, bytes=8)
    add_op(g, "c", "compute", "cpu", 2.0)
    add_op(g, "d", "compute", "cpu", 0.0)
    g.add_edges_from([("r", "c"), ("c", "d")])
    ov = Overhead(0.0, 8.0, 1.0, 0.0)
    prio = np.zeros((1, 1))
    assert iteration(compose(ov.apply(g), 1), prio).iteration_time == pytest.approx(3.0)
    h = dataclasses.replace(ov, dispatch_s=0.25).apply(g)
    assert h.nodes[DISPATCH]["duration"] == pytest.approx(0.5)
    assert iteration(compose(h, 1), prio).iteration_time == pytest.approx(3.5)
    gates = dataclasses.replace(ov, dispatch_s=0.25, dag_gate_s=0.1).for_hook(
        g, "dag", {"r": 0})
    assert gates.has_node(DISPATCH)  # one group: no gate, the dispatch stays
    with pytest.raises(CommschedError, match="dispatch"):
        two = g.copy()
        add_op(two, "e", "compute", "gpu", 1.0)
        dataclasses.replace(ov, dispatch_s=0.25).apply(two)


def test_fit_gate_takes_the_median_boundary_less_the_transfer():
    # gates of 2 ms; transfers 1e5 B at 100 MB/s + 0.1 ms; one boundary waited 10 ms
    # more for another worker's transfer: the median leaves it out
    idle = [2e-3 + 1e-4 + 1e-3] * 4 + [13e-3]
    assert fit_gate(idle, [1e5] * 5, 1e-4, 1e8) == pytest.approx(2e-3)
    assert fit_gate([1e-4], [0.0], 1e-3, 1e8) == 0.0  # never negative
    with pytest.raises(CommschedError, match="fit_gate"):
        fit_gate([math.nan], [1.0], 0.0, 1e8)


def _sender_steps(rng: np.random.Generator, model: str, mode: str, share: float,
                  speed: float, n: int = 60) -> list[dict[str, object]]:
    """Measured steps of a baseline (work ~ N(mean, 3%)) and a sender config whose steps
    fall back to the baseline's time with probability ``share``, else run ``speed`` x it."""
    mean = {"infer": 1.0, "train": 2.0}[mode]
    base = rng.normal(mean, 0.03 * mean, n)
    snd = rng.normal(mean, 0.03 * mean, n) * np.where(rng.random(n) < share, 1.0, speed)
    return [{"model": model, "mode": mode, "config": c, "hook": h, "step": k, "worker": 0,
             "work_s": float(v), "barrier_s": 0.002}
            for c, h, vals in (("baseline", "none", base), ("tac-sender", "sender", snd))
            for k, v in enumerate(vals)]


def test_fallback_fit_reads_the_measured_steps_bimodality():
    rng = np.random.default_rng(1)
    # two models whose sender steps fall back 30% of the time, 25% faster otherwise
    st = pd.DataFrame([r for m in ("m1", "m2") for r in _sender_steps(rng, m, "infer", 0.3,
                                                                       0.75, 200)])
    pairs = [(d.work_s[d.config == "tac-sender"], d.work_s[d.config == "baseline"])
             for _, d in st.groupby("model")]
    assert fit_fallback(pairs) == pytest.approx(0.3, abs=0.05)
    # a mode whose order gains nothing (speed 1) says nothing about the share: drawn with
    # 90% fallbacks, it leaves the estimate where the informative configs put it
    flat = pd.DataFrame(_sender_steps(rng, "m1", "train", 0.9, 1.0, 200))
    flat_pair = (flat.work_s[flat.config == "tac-sender"],
                 flat.work_s[flat.config == "baseline"])
    assert fit_fallback([*pairs, flat_pair]) == pytest.approx(fit_fallback(pairs), abs=0.05)
    # nearly every step falls back, or none does
    for share, lo, hi in ((0.9, 0.8, 1.0), (0.0, 0.0, 0.05)):
        d = pd.DataFrame(_sender_steps(rng, "m1", "infer", share, 0.7, 200))
        assert lo <= fit_fallback([(d.work_s[d.config == "tac-sender"],
                                    d.work_s[d.config == "baseline"])]) <= hi
    with pytest.raises(CommschedError, match="fit_fallback"):
        fit_fallback([([1.0], [1.0, math.nan])])


def test_fallback_fit_leaves_the_held_out_model():
    # m1 and m2 fall back 30% of their sender steps, m3 90%: leaving m3 out reads m1 and
    # m2's share, and m3's steps never enter
    rng = np.random.default_rng(2)
    st = pd.DataFrame([r for m, share in (("m1", 0.3), ("m2", 0.3), ("m3", 0.9))
                       for r in _sender_steps(rng, m, "infer", share, 0.75, 150)])
    x = pd.DataFrame([{"model": m, "mode": "infer", "config": "baseline", "trace_step": 0,
                       "worker": 0, "kind": "recv", "variable": f"v{i}", "bytes": 1e6,
                       "start_s": 0.0, "end_s": (i + 1) * 0.011}
                      for m in ("m1", "m2", "m3") for i in range(3)])
    t = pd.DataFrame([{"model": m, "mode": "infer", "config": "baseline", "compute_s": 1.0,
                       "oracle_compute_s": 1.0} for m in ("m1", "m2", "m3")])
    held = fit_overhead(x, t, st, exclude_model="m3").sender_fallback
    assert held == pytest.approx(0.3, abs=0.06)
    assert fit_overhead(x, t, st).sender_fallback > held + 0.1  # m3 pulls it up
    st.loc[st.model == "m3", "work_s"] *= 5.0  # m3's steps change: the held-out fit does not
    assert fit_overhead(x, t, st, exclude_model="m3").sender_fallback == held
    no_sender = st[st.hook != "sender"]
    assert fit_overhead(x, t, no_sender).sender_fallback == 0.0


def test_worker_noise_fit_recovers_a_known_value():
    # two workers' compute 1 +- c: coefficient of variation c sqrt(2), each step alike
    rng = np.random.default_rng(0)
    steps = [[m * (1 + 0.05), m * (1 - 0.05)] for m in rng.uniform(0.2, 2.0, 20)]
    assert fit_worker_noise(steps) == pytest.approx(0.05 * math.sqrt(2))
    with pytest.raises(CommschedError, match="fit_worker_noise"):
        fit_worker_noise([[1.0]])


def test_sender_fallback_mixes_the_intended_and_arbitrary_orders():
    # a worker graph where the order matters: a (4 B) feeds a 2 s op, b (4 B) a 0.1 s op
    # at the end; sending a first lets the long op overlap b's transfer
    g = new_graph({"net:ps0": 1, "cpu": 1}, variables={
        "a": {"bytes": 8, "shape": [2]}, "b": {"bytes": 8, "shape": [2]}})
    add_op(g, "recv:a", "recv", "net:ps0", 1.0, param="a", bytes=8)
    add_op(g, "recv:b", "recv", "net:ps0", 1.0, param="b", bytes=8)
    add_op(g, "c", "compute", "cpu", 2.0)
    add_op(g, "d", "compute", "cpu", 0.1)
    g.add_edges_from([("recv:a", "c"), ("c", "d"), ("recv:b", "d")])
    g.graph["recvs"] = {"recv:a": "a", "recv:b": "b"}
    configs = [{"name": "baseline", "order": "none", "enforce": "none", "priorities": {}},
               {"name": "tac-sender", "order": "tac", "enforce": "sender",
                "priorities": {"a": 0, "b": 1}}]
    w = Workload("toy", "infer", 4, 8, "1gbit", g, {"tac": {"a": 0, "b": 1}},
                 {"tac": {"recv:a": 0, "recv:b": 1}}, configs, {}, 1.0)
    ov = Overhead(0.0, 8.0, 1.0, 0.0)
    never = w.predict(1, 200, 0, ov)
    always = w.predict(1, 200, 0, dataclasses.replace(ov, sender_fallback=1.0))
    half = w.predict(1, 400, 0, dataclasses.replace(ov, sender_fallback=0.5))
    # one worker: a first 3.1 s (a, c [1,3], b [1,2], d), b first 4.1 s
    assert never["tac-sender"] == pytest.approx(3.1)
    assert always["tac-sender"] == pytest.approx(always["baseline"], rel=0.1)
    assert half["tac-sender"] == pytest.approx(3.1 + 0.25, abs=0.1)  # half of them random
    assert never["baseline"] == always["baseline"]  # the baseline is not the hook's


def test_traced_steps_read_the_executor_tail():
    # recvs arrive at 0.1 and 0.6; ops [0.0,0.05] (before), [0.6,0.7] and [0.75,0.8]
    # after the last arrival: tail wall 0.8 - 0.6 = 0.2, tail op time 0.15, 2 tail ops
    w = _toy_workload()
    r = _result("baseline", 0, [1.0], [0.0], {"a": 0.0, "b": 0.5})
    r["traces"][0].update({"compute_s": 0.2, "compute_ops": 3, "step_s": 0.85,
                           "ops": [[0.0, 0.05], [0.6, 0.7], [0.75, 0.8]]})
    row = traced_steps([r], [w]).iloc[0]
    assert row.last_recv_s == 0.6 and row.step_s == 0.85
    assert row.first_recv_s == 0.0  # the first request's start (fit_dispatch)
    assert row.tail_wall_s == pytest.approx(0.2) and row.tail_op_s == pytest.approx(0.15)
    assert row.tail_ops == 2
    # transfers in flight [0.0, 0.1] and [0.5, 0.6]: of the ops' 0.2 s, 0.05 overlap
    assert row.net_overlap == pytest.approx(0.25)
    # between the arrivals at 0.1 and 0.6 the executor ran no op: idle 0.5 s
    idle = tables([r], [w], 1)[1].set_index("variable").idle_s
    assert math.isnan(idle["a"]) and idle["b"] == pytest.approx(0.5)
    old = _result("baseline", 0, [1.0], [0.0], {"a": 0.0})  # a run without timelines
    assert traced_steps([old], [w]).iloc[0].tail_ops == 0


def test_skipped_run_writes_skipped_tables_and_leaves_claims_pending(tmp_path):
    out = {k: tmp_path / f"{k}.csv" for k in ("steps", "transfers", "traced", "summary",
                                               "grpc-order", "metrics")}
    import json

    rc = live.main(["--config-json", json.dumps({**SECTION, "enabled": False}),
                    *[a for k, p in out.items() for a in (f"--{k}", str(p))]])
    assert rc == 0
    summ = read_table(out["summary"])
    assert summ.status.tolist() == ["skipped"] and "disabled" in summ.reason[0]
    assert read_metrics([out["metrics"]]) == {}
    claims = [c for c in load_claims(sorted((ROOT / "papers" / "claims").glob("*.yaml")))
              if c["metric"].startswith("live.")]
    assert claims, "the live claims rows are missing"
    for r in evaluate(claims, [out["metrics"]]):
        assert r.status == "pending"


def test_bad_section_is_a_one_line_error(capsys):
    rc = live.main(["--config-json", '{"enabled": true}', "--steps", "s", "--transfers", "t",
                    "--traced", "x", "--summary", "u", "--grpc-order", "g", "--metrics", "m"])
    assert rc == 2
    assert capsys.readouterr().err.strip().count("\n") == 0


def test_frames_are_pandas():  # the notebook relies on these columns
    w = _toy_workload()
    steps, xfers = tables([_result("baseline", 0, [1.0], [0.0], {"a": 0.0})], [w], 1)
    assert isinstance(steps, pd.DataFrame)
    assert {"iteration_s", "straggler", "config", "model", "mode"} <= set(steps.columns)
    assert {"variable", "priority", "start_s", "end_s", "kind"} <= set(xfers.columns)
