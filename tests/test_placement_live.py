"""Live placement (issue 24 items 2-3, 5): the mapping of a placement and an order onto a
TensorFlow graph, the simulator's prediction, the driver's skip and error paths (no root
needed), and one tiny end-to-end run on an emulated cluster (root only, else skipped).
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import procs_with

from commsched.claims import load_claims
from commsched.cluster import net
from commsched.cluster.server import session_config
from commsched.cluster.state import run_base
from commsched.io.thesis import read_devices
from commsched.model.graph import add_op, new_graph
from commsched.model.traced import load_trace
from commsched.placement.experiments import live as driver
from commsched.placement.live.job import peak_bytes, run_plan, slow_down
from commsched.placement.live.mapping import (
    apply,
    device_names,
    order_edges,
    placed_devices,
    relative_speeds,
    slowdowns,
)
from commsched.placement.live.predict import (
    Fit,
    calibration_placements,
    live_cluster,
    nominal_rates,
    placed_fraction,
    predict,
    run_op_overhead_us,
)
from commsched.placement.model import Options, PlacementError, Problem
from commsched.placement.run import run_all
from commsched.results import read_table

ROOT = Path(__file__).resolve().parent.parent
SPEC = {"ps": ["h0:1"], "worker": ["h1:1"]}
DEVS = device_names(SPEC)
DEVICES = ROOT / "tests" / "data" / "live2-devices.csv"  # speeds 100, 50; 4 GB each
TINY = {"enabled": True, "traces": ["thesis_cnn-infer-b8"], "device_csv": str(DEVICES),
        "slow_min_us": 100, "partitioners": ["hashing", "heft"], "schedulers": ["fifo", "pct"],
        "bandwidth": "1gbit", "burst": "64kb", "latency": "10ms",
        "warmup": 1, "steps": 3, "trace_steps": 1, "calib_trace_steps": 2,
        "time_trace_iterations": 2, "seed": 0,
        "step_timeout_s": 30, "timeout_s": 150}


def _traced() -> object:
    """a (1 ms, 1000 B) -> b (2 ms); w a variable that r reads, r -> b."""
    g = new_graph({"cpu": 1}, variables={"w": {"bytes": 16, "shape": [4], "dtype": "float32",
                                               "trainable": True, "path": "w"}},
                  meta={"iterations": 1, "step_wall_s": [0.004], "sum_op_s": [0.004]})
    for name, t, b, extra in (("w", 0.0, 0, {"op_type": "VarHandleOp"}),
                              ("r", 0.0, 16, {"op_type": "ReadVariableOp", "reads": ["w"]}),
                              ("a", 1e-3, 1000, {"op_type": "MatMul"}),
                              ("b", 2e-3, 8, {"op_type": "MatMul"})):
        add_op(g, name, "compute", "cpu", t, samples=[t], out_bytes=b, is_gradient=False,
               **extra)
    g.add_edge("w", "r", control=False, bytes=0)
    g.add_edge("r", "b", control=False, bytes=16)
    g.add_edge("a", "b", control=False, bytes=1000)
    return g


def test_device_names_ps_first():
    assert DEVS == ["/job:ps/replica:0/task:0/device:CPU:0",
                    "/job:worker/replica:0/task:0/device:CPU:0"]


def test_placement_onto_missing_device_is_one_line_error():
    with pytest.raises(PlacementError, match=r"^op 'b' is placed on device 2, but the cluster "
                                             r"has 2 devices \(0\.\.1\)$"):
        placed_devices(["a", "b"], np.array([0, 2]), DEVS)


def test_order_edges_chain_each_device_in_start_order_and_skip_handles():
    p = Problem.build(ops=[5, 1, 1, 1], size=[1, 1, 1, 1], edges=[(0, 1), (0, 2), (0, 3)])
    c = live_cluster([1, 1], [1e9, 1e9], 1e6)
    r = run_all(p, c, ["hashing"], ["fifo"], Options(send_ops=0.0))[0]
    edges = order_edges(r.exec_graph, r.schedule, p.n)
    for a, b in edges:
        assert r.placement[a] == r.placement[b]
        assert r.schedule.start[a] <= r.schedule.start[b]
    per_dev = [int((r.placement == d).sum()) for d in range(2)]
    assert len(edges) == sum(max(0, k - 1) for k in per_dev)
    assert all(0 not in e for e in order_edges(r.exec_graph, r.schedule, p.n, skip={0}))


def test_apply_sets_devices_control_inputs_container_and_follows_colocation():
    graph_pb2 = pytest.importorskip("tensorflow.core.framework.graph_pb2")
    gd = graph_pb2.GraphDef()
    for name, op, inputs in (("w", "VarHandleOp", []), ("r", "ReadVariableOp", ["w"]),
                             ("x", "Const", []), ("m", "MatMul", ["x", "r"]),
                             ("w/init", "Const", []), ("w/Assign", "AssignVariableOp",
                                                       ["w", "w/init"])):
        n = gd.node.add(name=name, op=op)
        n.input.extend(inputs)
    gd.node[4].attr["_class"].list.s.append(b"loc:@w")
    gd.node[3].attr["_class"].list.s.append(b"loc:@r")  # as tf.gradients colocates
    placed = placed_devices(["w", "r", "x", "m"], np.array([1, 1, 0, 0]), DEVS)
    apply(gd, placed, [("x", "r")], ["w", "r", "x", "m"], "pl-c", DEVS[0])
    dev = {n.name: n.device for n in gd.node}
    assert dev == {"w": DEVS[1], "r": DEVS[1], "x": DEVS[0], "m": DEVS[0],
                   "w/init": DEVS[1], "w/Assign": DEVS[1]}
    assert list(gd.node[1].input) == ["w", "^x"]
    assert "_class" not in gd.node[3].attr and "_class" in gd.node[4].attr
    assert gd.node[0].attr["container"].s == b"pl-c"
    with pytest.raises(PlacementError, match=r"^op 'm' of the live graph is not in the trace: "
                                             r"it cannot be mapped \(1 such ops\)$"):
        apply(gd, {k: v for k, v in placed.items() if k != "m"}, [], ["w", "r", "x", "m"],
              "pl-c", DEVS[0])
    with pytest.raises(PlacementError, match="names an op the graph lacks"):
        apply(gd, placed, [("x", "nope")], ["w", "r", "x", "m"], "pl-c", DEVS[0])


def test_predict_adds_latency_rate_overheads():
    g = _traced()
    f = Fit(op_us=0.0, time_factor=1.0, step_s=0.01, transfer_s=1e-3, rate_Bps=1e6)
    # a on 1, everything else on 0: a's 1000 B cross: 1 ms + 1 ms + 1 ms, then b 2 ms
    assert predict(g, np.array([0, 0, 1, 0]), [], {}, 2, f) == pytest.approx(0.015)
    assert predict(g, np.array([0, 0, 0, 0]), [], {}, 2, f) == pytest.approx(0.013)
    f2 = Fit(op_us=100.0, time_factor=2.0, step_s=0.0, transfer_s=0.0, rate_Bps=1e6)
    # one device: 4 ops x 100 us + 2 x (1 + 2) ms
    assert predict(g, np.array([0, 0, 0, 0]), [], {}, 2, f2) == pytest.approx(0.0064)
    # a slowed down by k = 3 (a device of relative speed 1/4): 2 x 4 x 1 ms instead
    assert predict(g, np.array([0, 0, 0, 0]), [], {"a": 3.0}, 2, f2) \
        == pytest.approx(0.0064 + 2 * 3 * 1e-3)


def test_per_pair_rates_reach_the_planner_and_the_prediction():
    # the device file's rate unit is a byte per microsecond; a uniform file: bandwidth
    links = read_devices(ROOT / "data" / "devices" / "live3-links.csv")
    rates, per_pair = nominal_rates(links.rates, 1e8)
    assert per_pair and rates[0, 1] == 125e6 and rates[2, 0] == 25e6 and rates[1, 2] == 50e6
    uniform, per_pair = nominal_rates(read_devices(ROOT / "data" / "devices" / "live3.csv")
                                      .rates, 1e8)
    assert not per_pair and (uniform[~np.eye(3, dtype=bool)] == 1e8).all()
    c = live_cluster(links.speed, links.ram, rates)  # what the partitioners see
    assert c.rate[0, 2] == 25.0 and c.rate[2, 1] == 50.0 and np.isinf(c.rate[2, 2])
    g = _traced()
    f = Fit(op_us=0.0, time_factor=1.0, step_s=0.01, transfer_s=1e-3, rate_Bps=1e6,
            pair_scale=((1.0, 1.0), (0.5, 1.0)))
    assert f.rates(2).tolist() == [[np.inf, 1e6], [5e5, np.inf]]
    # a's 1000 B cross 1 -> 0 at half the fitted rate: 2 ms instead of 1 ms
    assert predict(g, np.array([0, 0, 1, 0]), [], {}, 2, f) == pytest.approx(0.016)
    assert "pair_scale" not in f.as_dict()


def test_speeds_become_slowdowns_of_long_ops_on_slower_devices():
    r = relative_speeds([100, 50, 25])
    assert r.tolist() == [1.0, 0.5, 0.25]
    names, t = ["a", "b", "c", "d"], [1e-3, 2e-3, 5e-5, 1e-3]
    slow = slowdowns(names, t, np.array([0, 1, 1, 2]), r, 100.0)
    assert slow == {"b": 1.0, "d": 3.0}  # a: fastest device; c: shorter than 100 us
    assert slowdowns(names, t, np.array([0, 1, 1, 2]), r, 10.0)["c"] == 1.0
    c = live_cluster([100, 50, 25], [1e8, 2e8, 4e8], 125e6)
    assert c.speed.tolist() == [1.0, 0.5, 0.25] and c.memory.tolist() == [1e8, 2e8, 4e8]
    assert c.rate[0, 1] == 125.0 and np.isinf(c.rate[1, 1])
    with pytest.raises(PlacementError, match=r"^device 1 has speed 0: a speed must be "
                                             r"positive$"):
        relative_speeds([1, 0])


def test_measured_memory_adds_the_placed_variables_to_each_tasks_step_peak():
    g = _traced()  # variable w (16 bytes), handle op w is node 0
    step = {DEVS[0]: [{"alloc_records": [[1, 100], [2, -100]]}],
            DEVS[1].replace("device:CPU", "cpu"): [{"alloc_records": [[1, 40], [2, 50]]}]}
    assert driver.measured_memory(g, [1, 1, 0, 0], {"traced": [step]}, 2) == [100.0, 106.0]
    assert driver.measured_memory(g, [0, 0, 0, 0], {"traced": []}, 2) == [16.0, 0.0]


def test_slow_down_gates_every_consumer_behind_the_wait():
    tf = pytest.importorskip("tensorflow")
    g = tf.Graph()
    with g.as_default():
        a = tf.constant([[1.0, 2.0], [3.0, 4.0]], name="a")
        b = tf.matmul(a, a, name="b")
        c = tf.add(b, 1.0, name="c")
        with tf.control_dependencies([b]):
            d = tf.no_op(name="d")
    assert slow_down(tf, g, {"b": 1.0, "nosuch": 2.0}) == 1
    gate = c.op.inputs[0].op  # c reads b through an Identity that waits for the loop
    assert gate.type == "Identity" and gate.inputs[0].op is b.op
    wait = gate.control_inputs[0]
    assert wait.name.startswith("b/slow/") and wait in d.control_inputs
    start = b.op.control_inputs[0]
    assert start.type == "Timestamp" and start.name.startswith("b/slow/")
    with tf.compat.v1.Session(graph=g) as sess:  # same values, the wait ends
        assert sess.run(c).tolist() == [[8.0, 11.0], [16.0, 23.0]]
        sess.run(d)


def test_peak_bytes_and_run_op_overhead():
    step = {"/job:ps/replica:0/task:0/device:CPU:0": [
        {"node_name": "a", "timeline_label": "a = MatMul()", "all_start_micros": 0,
         "op_end_rel_micros": 100, "alloc_records": [[10, 1000], [150, -1000]]},
        {"node_name": "b", "timeline_label": "b = MatMul()", "all_start_micros": 120,
         "op_end_rel_micros": 40, "alloc_records": [[130, 500], [150, 64]]},
        {"node_name": "b/slow/Timestamp", "timeline_label": "x = Timestamp()",
         "all_start_micros": 400, "op_end_rel_micros": 1, "alloc_records": []}]}
    # 1000 + 500 live at 130 us; at 150 the 1000 are freed before the 64 are allocated
    assert peak_bytes(step) == {"/job:ps/replica:0/task:0/device:CPU:0": 1500.0}
    # span 0..160 us, busy 140 us over 2 ops (the slow-down's op is not the graph's)
    assert run_op_overhead_us([step, step], {"a", "b"}) == 10.0


def test_calibration_placements_keep_colocation():
    p = Problem.build(ops=[1, 1, 1, 1], size=[1, 1, 1, 1], edges=[(0, 1), (1, 3), (2, 3)],
                      colocation=[(0, 1)])
    pl = calibration_placements(p, 2)
    assert (pl["calib-one"] == 0).all()
    assert pl["calib-split"][0] == pl["calib-split"][1]
    assert set(pl["calib-split"]) == {0, 1}


def test_rankings():
    t = pd.DataFrame({"partitioner": ["heft", "heft", "mite", "mite", "hashing", "hashing",
                                      "batch_split", "batch_split"],
                      "scheduler": ["fifo", "pct"] * 4,
                      "live_s": [2.0, 1.0, 4.0, 4.0, 9.0, 8.0, 7.0, 6.0]})
    assert driver.rankings(t, "live_s") == {"pct_best_frac": 1.0, "bs_hashing_worst": 1.0,
                                            "heft_over_mite": 0.375}
    # the live claims rows name metrics the driver writes: a ranking of the live steps,
    # or one of its error / placement summaries
    written = {f"placement_live.live.{k}" for k in driver.rankings(t, "live_s")} | {
        "placement_live.median_abs_error", "placement_live.placed_frac_min",
        "placement_live.error_lomo_median_abs_pct"}
    rows = [c for c in load_claims(ROOT / "papers" / "claims" / "placement.yaml")
            if c["target"] == "placement_live"]
    assert rows and {c["metric"] for c in rows} <= written


def test_disabled_run_writes_skipped_table(tmp_path):
    cfg = json.dumps({**TINY, "enabled": False})
    assert driver.main(["--config-json", cfg, "--table", str(tmp_path / "t.csv"),
                        "--metrics", str(tmp_path / "m.csv")]) == 0
    t = read_table(tmp_path / "t.csv")
    assert list(t["status"]) == ["skipped"] and "enabled: false" in t["reason"][0]
    assert read_table(tmp_path / "m.csv").empty


def test_config_error_is_one_line(tmp_path, capsys):
    cfg = json.dumps({**TINY, "slow_min_us": -1})
    assert driver.main(["--config-json", cfg, "--table", str(tmp_path / "t.csv"),
                        "--metrics", str(tmp_path / "m.csv")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("placement_live: error:") and "\n" not in err
    assert not (tmp_path / "t.csv").exists()


REASON = net.check_support()


def _run_live(tmp_path: Path, cfg: dict) -> tuple[str, pd.DataFrame, dict]:
    """Run the driver on ``cfg`` (bounded), check that it tore everything down; return its
    cluster's run id, its table and its metrics by name."""
    table, metrics = tmp_path / "t.csv", tmp_path / "m.csv"
    p = subprocess.run([sys.executable, "-m", "commsched.placement.experiments.live",
                        "--config-json", json.dumps(cfg), "--trace-dir",
                        str(ROOT / "data" / "traces"), "--workdir", str(tmp_path / "run"),
                        "--table", str(table), "--metrics", str(metrics)],
                       capture_output=True, text=True, timeout=240, cwd=ROOT)
    assert p.returncode == 0, p.stderr[-2000:]
    up = re.search(r"cluster (\w+) up: .*; links (.*)", p.stderr)
    run_id = up.group(1)
    assert net.list_namespaces(f"{net.NS_PREFIX}{run_id}-") == []
    assert not (run_base() / run_id).exists()
    assert procs_with(f"/{run_id}/") == [] and procs_with(str(tmp_path / "run")) == []
    m = read_table(metrics)
    return up.group(2), read_table(table), dict(zip(m["metric"], m["value"], strict=True))


@pytest.mark.slow
@pytest.mark.live
@pytest.mark.skipif(REASON is not None, reason=f"live cluster unavailable: {REASON}")
def test_tiny_run_end_to_end_places_ops_and_tears_down(tmp_path):
    links, t, m = _run_live(tmp_path, TINY)
    assert len(t) == 2 + 4
    assert (t["placed_frac"] == 1.0).all()  # every op ran on its partition's task
    # the slower task's long ops were slowed down; memory was measured and fits 4 GB
    assert (t["slowed_ops"] > 0).any() and (t.loc[t["calibration"], "slowed_ops"] == 0).all()
    assert (t["live_peak_bytes_max"] > 0).all() and (t["memory_use"] < 1).all()
    assert t.loc[t["partitioner"] == "calib-one", "devices_used"].tolist() == [1]
    assert (t["live_s"] > 0).all() and t["predicted_s"].notna().all()
    assert m["placement_live.combinations"] == 4
    # one rate in the device file: every link tbf at bandwidth, as before per-pair rates
    assert links == "all 1gbit" and m["placement_live.per_pair_links"] == 0.0


LINKS = {**TINY, "device_csv": str(ROOT / "data" / "devices" / "live3-links.csv"),
         "partitioners": ["hashing", "heft"], "schedulers": ["pct"]}


@pytest.mark.slow
@pytest.mark.live
@pytest.mark.skipif(net.check_htb() is not None, reason="htb/u32 unavailable")
def test_tiny_run_with_per_pair_link_rates_end_to_end(tmp_path):
    """live3-links.csv (1 Gbit/s, 200 and 400 Mbit/s pairs): the cluster is shaped per
    pair, the planner and the simulator see the file's rates, and teardown is complete."""
    links, t, m = _run_live(tmp_path, LINKS)
    assert links == "per pair, 200-1000 Mbit/s"
    assert len(t) == 2 + 2 and (t["placed_frac"] == 1.0).all()
    assert (t["live_s"] > 0).all() and t["predicted_s"].notna().all()
    assert m["placement_live.per_pair_links"] == 1.0
    assert (m["placement_live.link_min_Bps"], m["placement_live.link_max_Bps"]) == (25e6,
                                                                                   125e6)
    assert m["placement_live.fit.rate_Bps"] > 0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return int(s.getsockname()[1])


@pytest.mark.slow
def test_job_places_ops_on_in_process_servers(tmp_path):
    """The client on two in-process servers on loopback (no namespaces, no root): every op
    runs on its partition's task, under TensorFlow's order and under an enforced one."""
    tf = pytest.importorskip("tensorflow")
    g = load_trace(ROOT / "data" / "traces" / f"{TINY['traces'][0]}.json.gz")
    ports = [_free_port(), _free_port()]
    spec = {"ps": [f"localhost:{ports[0]}"], "worker": [f"localhost:{ports[1]}"]}
    cs = tf.train.ClusterSpec(spec)
    servers = [tf.distribute.Server(cs, job_name=j, task_index=0, config=session_config(1))
               for j in ("ps", "worker")]
    configs = driver.plan_configs(g, {**TINY, "partitioners": ["hashing"],
                                      "schedulers": ["pct"]}, read_devices(DEVICES),
                                  device_names(spec))
    meta = g.graph["meta"]
    plan = {"models": [{"name": "m", "trace": {x: meta[x] for x in ("model", "mode", "batch",
                                                                    "size", "seed")},
                        "configs": [{"name": c["name"], "placed": c["placed"],
                                     "control": c["control"], "slow": c["slow"],
                                     "trace_steps": 1} for c in configs]}],
            "target": servers[1].target, "devices": device_names(spec), "warmup": 0,
            "steps": 2, "timeout_s": 60, "threads": 1}
    results = {r["name"]: r for r in run_plan(plan)}
    assert {r["model"] for r in results.values()} == {"m"}
    assert set(results) == {"calib-one", "calib-split", "hashing-pct"}
    assert configs[2]["control"]  # the order was enforced by control edges
    assert configs[2]["slow"]  # and the ops of the slower task slowed down
    for c in configs:
        assert placed_fraction(results[c["name"]], c["placed"]) == 1.0
        assert len(results[c["name"]]["steps_s"]) == 2


@pytest.mark.parametrize(("devices", "change", "match"), [
    ("0,1000,100,125,CPU\n1,1000,50,,CPU\n", {}, "fits no device|memory"),
    ("0,4000000000,100,,CPU\n", {}, r"1 devices; the live placement runs 2 to 8"),
    ("0,4000000000,100,125,CPU\n1,4000000000,0,,CPU\n", {},
     r"devices\.csv:3: column 3 \(#operations\)"),
    (None, {"traces": ["thesis_cnn-infer-b8", "nosuch-infer-b1"]}, "nosuch-infer-b1"),
])
def test_bad_input_is_one_line_error_even_without_root(tmp_path, capsys, devices, change,
                                                       match):
    csv = tmp_path / "devices.csv"
    if devices is not None:
        csv.write_text("Id,RAM,#operations,commnication speed,type\n" + devices)
    cfg = json.dumps({**TINY, **({"device_csv": str(csv)} if devices else {}), **change})
    assert driver.main(["--config-json", cfg, "--trace-dir", str(ROOT / "data" / "traces"),
                        "--table", str(tmp_path / "t.csv"),
                        "--metrics", str(tmp_path / "m.csv")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("placement_live: error:") and "\n" not in err
    assert re.search(match, err)
    assert not (tmp_path / "t.csv").exists()
