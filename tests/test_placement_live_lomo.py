"""Live placement, one fit for the runtime (issue 27 item 6): each model's calibration
measured (:func:`~commsched.placement.live.predict.calibrate`), pooled over models and left
out of its own leave-one-model-out fit; the op times of a trace taken with the live
threads; host ports; synthetic step stats of known overheads, no cluster.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import networkx as nx
import numpy as np
import pytest

from commsched.errors import CommschedError
from commsched.io.thesis import read_devices
from commsched.model.graph import add_op, new_graph
from commsched.placement.experiments import live as driver
from commsched.placement.live.mapping import device_names
from commsched.placement.live.predict import (
    CALIB_ONE,
    CALIB_SPLIT,
    Fit,
    calibrate,
    lomo_fits,
    pooled_fit,
    predict,
    with_op_times,
)
from commsched.results import read_table

ROOT = Path(__file__).resolve().parent.parent
DEVICES = ROOT / "tests" / "data" / "live2-devices.csv"  # speeds 100, 50
DEVS = device_names({"ps": ["-"], "worker": ["-"]})
#: the runtime's overheads the synthetic runs are made of
TRUE = {"op_us": 20.0, "time_factor": 2.5, "step_s": 0.004, "transfer_s": 3e-4,
        "rate_Bps": 1e8}
#: the links' nominal rates (every pair alike: the rate the fit takes, not fits)
RATES = np.full((2, 2), TRUE["rate_Bps"])


def _chain(n: int, seed: int) -> object:
    """A chain of ``n`` ops (traced 0.1-2 ms, outputs 1 kB-1 MB)."""
    rng = np.random.default_rng(seed)
    g = new_graph({"cpu": 1}, meta={"iterations": 1, "step_wall_s": [0.01],
                                    "sum_op_s": [0.01]})
    for i in range(n):
        add_op(g, f"op{i}", "compute", "cpu", float(rng.uniform(1e-4, 2e-3)),
               samples=[0.0], out_bytes=int(rng.integers(1_000, 1_000_000)),
               is_gradient=False, op_type="MatMul")
        if i:
            g.add_edge(f"op{i - 1}", f"op{i}", control=False, bytes=0)
    return g


def _stat(name: str, start_us: float, dur_us: float, label: str | None = None) -> dict:
    return {"node_name": name, "timeline_label": label or f"{name} = MatMul()",
            "all_start_micros": round(start_us), "op_end_rel_micros": round(dur_us)}


def _calib(g: object, p: dict, steps: int = 3) -> dict:
    """``calib-one`` and ``calib-split`` results of a chain under the overheads ``p``:
    every op ``time_factor`` x its traced time, gaps so that (span - busy) / ops is
    ``op_us``, a step ``step_s`` longer than its simulation; in ``calib-split`` the ops
    alternate between the two tasks and each output crosses alone in ``transfer_s +
    bytes / rate_Bps``."""
    names = list(g.nodes)
    n = len(names)
    live = [float(g.nodes[v]["duration"]) * 1e6 * p["time_factor"] for v in names]
    gap = p["op_us"] * n / (n - 1)
    one, t = [], 0.0
    for v, d in zip(names, live, strict=True):
        one.append(_stat(v, t, d))
        t += d + gap
    split: dict[str, list[dict]] = {DEVS[0]: [], DEVS[1]: []}
    t = 0.0
    for i, (v, d) in enumerate(zip(names, live, strict=True)):
        split[DEVS[i % 2]].append(_stat(v, t, d))
        t += d
        if i + 1 < n:
            b = float(g.nodes[v]["out_bytes"])
            x = (p["transfer_s"] + b / p["rate_Bps"]) * 1e6
            split[DEVS[(i + 1) % 2]].append(_stat(
                "RecvTensor", t, x, f"[{b:g}B] [1Mb/s] edge_{i}_{v} from {DEVS[i % 2]} to "
                f"{DEVS[(i + 1) % 2]}"))
            t += x + 50  # the next transfer starts after this one ends: alone on the link
    step = (sum(live) + n * p["op_us"]) / 1e6 + p["step_s"]  # the simulation + step_s
    return {CALIB_ONE: {"steps_s": [step] * 5, "traced": [{DEVS[0]: one}] * steps},
            CALIB_SPLIT: {"steps_s": [1.0] * 5, "traced": [split] * steps}}


def _close(f: object, p: dict) -> None:
    got = f.as_dict()
    for k, v in p.items():
        assert got[k] == pytest.approx(v, rel=1e-2), k  # step stats: whole microseconds


def test_calibration_and_fits_recover_known_overheads():
    g = _chain(12, 0)
    cal = calibrate(g, _calib(g, TRUE), 2, RATES)
    assert cal.live_op_s / cal.traced_op_s == pytest.approx(TRUE["time_factor"], rel=1e-3)
    assert len(cal.link_s) == 11 and set(cal.op_s) == set(g.nodes)
    own = pooled_fit([cal], own_op_times=True)
    _close(own, TRUE)
    assert own.op_s == cal.op_s  # the model's own live op times
    # two models of the same runtime: the pooled fit and each one's left-out fit recover it
    h = _chain(30, 1)
    cals = {"g": cal, "h": calibrate(h, _calib(h, TRUE), 2, RATES)}
    _close(pooled_fit(list(cals.values())), TRUE)
    for m, f in lomo_fits(cals).items():
        _close(f, TRUE)
        assert f.op_s == {}, m  # no op's live time: every op its traced time x the factor
    # the pooled factor is the summed live op time over the summed traced time
    slow = calibrate(h, _calib(h, {**TRUE, "time_factor": 4.0}), 2, RATES)
    both = pooled_fit([cal, slow])
    assert both.time_factor == pytest.approx(
        (cal.live_op_s + slow.live_op_s) / (cal.traced_op_s + slow.traced_op_s))
    assert 2.5 < both.time_factor < 4.0


def test_the_held_out_models_data_never_enters_its_fit():
    gs = {"a": _chain(10, 2), "b": _chain(14, 3), "c": _chain(8, 4)}
    runtimes = {"a": TRUE, "b": {**TRUE, "time_factor": 1.5, "step_s": 0.01},
                "c": {**TRUE, "op_us": 40.0, "transfer_s": 1e-3}}
    cals = {m: calibrate(g, _calib(g, runtimes[m]), 2, RATES) for m, g in gs.items()}
    lomo = lomo_fits(cals)
    assert set(lomo) == {"a", "b", "c"}
    assert lomo["a"] == pooled_fit([cals["b"], cals["c"]])
    # a wildly different run of model a changes every fit but a's own
    wild = {**TRUE, "time_factor": 9.0, "op_us": 500.0, "step_s": 0.5, "transfer_s": 0.01}
    other = lomo_fits({**cals, "a": calibrate(gs["a"], _calib(gs["a"], wild), 2, RATES)})
    assert other["a"] == lomo["a"]
    assert other["b"] != lomo["b"] and other["c"] != lomo["c"]
    # the prediction of a left-out model uses only its trace (op times x the others' factor)
    placement = np.zeros(10, dtype=np.int64)
    assert predict(gs["a"], placement, [], {}, 2, other["a"]) == \
        predict(gs["a"], placement, [], {}, 2, lomo["a"])
    assert lomo_fits({"a": cals["a"]}) == {}


def test_pooling_refuses_what_cannot_be_pooled():
    g = _chain(6, 5)
    cal = calibrate(g, _calib(g, TRUE), 2, RATES)
    with pytest.raises(CommschedError, match="no calibration"):
        pooled_fit([])
    with pytest.raises(CommschedError, match="one model's"):
        pooled_fit([cal, cal], own_op_times=True)
    with pytest.raises(CommschedError, match="different links"):
        pooled_fit([cal, replace(cal, pair_scale=((1.0, 0.5), (0.5, 1.0)))])
    with pytest.raises(CommschedError, match="different links"):
        pooled_fit([cal, replace(cal, rate_Bps=5e7)])
    with pytest.raises(CommschedError, match="no transfer alone"):
        pooled_fit([replace(cal, link_bytes=(), link_s=())])


TINY = {"enabled": True, "traces": ["thesis_cnn-infer-b8"],
        "device_csv": str(DEVICES), "slow_min_us": 100,
        "partitioners": ["hashing"], "schedulers": ["fifo"], "bandwidth": "1gbit",
        "burst": "64kb", "latency": "10ms", "warmup": 1, "steps": 3, "trace_steps": 1,
        "calib_trace_steps": 2, "time_trace_iterations": 2, "seed": 0, "step_timeout_s": 30,
        "timeout_s": 150}


@pytest.mark.parametrize(("change", "match"), [
    ({"traces": []}, "traces"),
    ({"traces": ["thesis_cnn-infer-b8", "thesis_cnn-infer-b8"]}, "traces"),
    ({"traces": ["Not A Trace"]}, "traces"),
    ({"traces": "thesis_cnn-infer-b8"}, "traces"),
    ({"trace": "thesis_cnn-infer-b8"}, "trace"),
])
def test_traces_config_is_validated(tmp_path, capsys, change, match):
    cfg = {**TINY, **change}
    assert driver.main(["--config-json", json.dumps(cfg), "--table", str(tmp_path / "t.csv"),
                        "--metrics", str(tmp_path / "m.csv")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("placement_live: error:") and "\n" not in err and match in err
    assert not (tmp_path / "t.csv").exists()


def test_disabled_run_with_several_traces_is_skipped(tmp_path):
    cfg = {**TINY, "enabled": False, "traces": ["thesis_cnn-infer-b8", "thesis_rnn-train-b8"]}
    assert driver.main(["--config-json", json.dumps(cfg), "--table", str(tmp_path / "t.csv"),
                        "--metrics", str(tmp_path / "m.csv")]) == 0
    assert list(read_table(tmp_path / "t.csv")["status"]) == ["skipped"]


def test_the_driver_predicts_each_model_left_out_from_the_others_only():
    """The run's table: a model's ``predicted_lomo_s`` does not move when its own
    calibration results change, its own-fit ``predicted_s`` and the other model's
    ``predicted_lomo_s`` do; the metrics pool both models."""
    dev = read_devices(DEVICES)
    graphs = {"a": _chain(8, 6), "b": _chain(12, 7)}
    section = {**TINY, "partitioners": ["hashing", "heft"], "schedulers": ["fifo"]}
    configs = {m: driver.plan_configs(g, section, dev, DEVS) for m, g in graphs.items()}

    def results(runtime_a: dict) -> list[dict]:
        out = []
        for m, g in graphs.items():
            calib = _calib(g, runtime_a if m == "a" else TRUE)
            for c in configs[m]:
                r = calib.get(c["name"], {"steps_s": [0.05, 0.06, 0.07], "traced": []})
                out.append({"model": m, "name": c["name"], "init_s": 1.0, **r})
        return out

    rates = np.full((2, 2), 1.25e8)
    t1, m1 = driver._table(graphs, configs, results(TRUE), dev, rates, False, lambda _: None)
    wild = {**TRUE, "time_factor": 9.0, "op_us": 300.0, "step_s": 0.3}
    t2, _ = driver._table(graphs, configs, results(wild), dev, rates, False, lambda _: None)
    a1, a2 = (t[t["model"] == "a"].reset_index() for t in (t1, t2))
    b1, b2 = (t[t["model"] == "b"].reset_index() for t in (t1, t2))
    assert (a1["predicted_lomo_s"] == a2["predicted_lomo_s"]).all()
    assert (a1["predicted_s"] != a2["predicted_s"]).all()
    assert (b1["predicted_s"] == b2["predicted_s"]).all()
    assert (b1["predicted_lomo_s"] != b2["predicted_lomo_s"]).all()
    combos = t1[~t1["calibration"]]
    assert len(combos) == 4 and m1["placement_live.models"] == 2
    assert m1["placement_live.error_lomo_median_abs_pct"] == pytest.approx(
        100 * combos["error_lomo"].abs().median())
    assert m1["placement_live.median_abs_error"] == pytest.approx(
        combos[combos["model"] == "a"]["error"].abs().median())  # the first model's
    assert "placement_live.b.lomo_fit.time_factor" in m1


def test_op_times_come_from_a_trace_taken_with_the_live_threads():
    g = _chain(5, 8)
    g.graph["meta"].update(intra_threads=2, inter_threads=1)
    timed = _chain(5, 9)  # same op names, other times
    timed.graph["meta"].update(intra_threads=1, inter_threads=1, model="m")
    h = with_op_times(g, timed, 1)
    assert list(h.nodes) == list(g.nodes) and list(h.edges) == list(g.edges)
    assert all(h.nodes[v]["duration"] == timed.nodes[v]["duration"] for v in h.nodes)
    assert all(h.nodes[v]["out_bytes"] == g.nodes[v]["out_bytes"] for v in h.nodes)
    assert g.nodes["op0"]["duration"] != h.nodes["op0"]["duration"]  # g itself unchanged
    with pytest.raises(CommschedError, match="threads 2/1"):
        with_op_times(g, g, 1)
    with pytest.raises(CommschedError, match="ops differ"):
        with_op_times(g, nx.relabel_nodes(timed, {"op4": "other"}), 1)


def test_host_links_serialise_every_transfer_out_of_a_device():
    """With every pair alike each device has one port each way (``tbf`` host links): two
    tensors sent from one device to two others queue; with per-pair links they overlap."""
    g = new_graph({"cpu": 1}, meta={"iterations": 1, "step_wall_s": [0.01], "sum_op_s": [0.01]})
    for v, b in (("a", 1_000_000), ("b", 8), ("c", 8)):
        add_op(g, v, "compute", "cpu", 1e-3, samples=[1e-3], out_bytes=b, is_gradient=False,
               op_type="MatMul")
    g.add_edge("a", "b", control=False, bytes=0)
    g.add_edge("a", "c", control=False, bytes=0)
    f = Fit(op_us=0.0, time_factor=1.0, step_s=0.0, transfer_s=0.0, rate_Bps=1e8)
    placement = np.array([0, 1, 2])
    x = 1e6 / 1e8  # one transfer: 10 ms
    ports = predict(g, placement, [], {}, 3, f)
    pairs = predict(g, placement, [], {}, 3, replace(f, pair_scale=((1.0,) * 3,) * 3))
    assert pairs == pytest.approx(2e-3 + x)
    assert ports == pytest.approx(2e-3 + 2 * x)


def test_an_op_time_trace_of_other_threads_is_an_error(tmp_path, capsys):
    # the committed traces have two intra-op threads; the live tasks run one
    assert driver.main(["--config-json", json.dumps(TINY), "--op-time-dir",
                        str(ROOT / "data" / "traces"), "--table", str(tmp_path / "t.csv"),
                        "--metrics", str(tmp_path / "m.csv")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "threads 2/1" in err and "run 1/1" in err
    assert not (tmp_path / "t.csv").exists()


def test_reuse_refuses_job_results_of_another_plan(tmp_path):
    dev = read_devices(DEVICES)
    g = _chain(8, 10)
    configs = {"a": driver.plan_configs(g, {**TINY, "partitioners": ["hashing", "heft"]},
                                        dev, DEVS)}
    # the plan as the job saw it (JSON: pairs become lists)
    plan = json.loads(json.dumps({"models": [{"name": "a", "configs": [
        {"name": c["name"], "placed": c["placed"], "control": c["control"],
         "slow": c["slow"]} for c in configs["a"]]}]}))
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    (tmp_path / "result.json").write_text(json.dumps({"results": [
        {"model": "a", "name": c["name"]} for c in configs["a"]]}))
    assert len(driver._reused(tmp_path, configs)) == len(configs["a"])
    moved = plan["models"][0]["configs"][-1]["placed"]
    v = next(iter(moved))
    moved[v] = DEVS[1] if moved[v] == DEVS[0] else DEVS[0]
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    with pytest.raises(CommschedError, match="another plan"):
        driver._reused(tmp_path, configs)
