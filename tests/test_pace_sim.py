"""PACE Sec. VI in simulation (commsched.pace.experiments.sim): Fig. 2 golden test, config,
metrics, a small end-to-end run."""

from __future__ import annotations

import copy
from pathlib import Path

import pandas as pd
import pytest
import yaml

from commsched.cost.allreduce import allreduce_model
from commsched.errors import CommschedError
from commsched.pace.experiments.calibration import COLUMNS, load_calibration
from commsched.pace.experiments.fig2 import FIG2_MODEL, fig2_plans, fig2_trace, run_fig2
from commsched.pace.experiments.sim import main
from commsched.pace.experiments.sim_metrics import headline_metrics
from commsched.pace.experiments.sim_sweeps import (
    Params,
    idle_valleys,
    load_models,
    run_experiment,
)
from commsched.pace.sim import Workload
from commsched.results import read_table

ROOT = Path(__file__).resolve().parents[1]
CONFIG = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())["pace_sim"]


def test_fig2_golden():
    """PACE Sec. II-C / Fig. 2, derived by hand (times in s, 1 s per byte, no start-up).

    Iteration k's forward pass (Mul 1, Add 2, ReLu 2) ends at 5, the backward pass runs
    dReLu [5,6], dAdd [6,7], dMul [7,8]: AR_1 (3 B) is ready at 6, AR_2 (2 B) at 7, AR_3
    (1 B) at 8. The next forward pass needs AR_3 for Mul, AR_2 for Add, AR_1 for ReLu.

    FIFO:     AR_1 [6,9], AR_2 [9,11], AR_3 [11,12]; Mul [12,13], Add [13,15],
              ReLu [15,17]. Iteration = 17 - 5 (the forward pass) = 12.
    Reorder:  AR_1 [6,9] (alone when it starts); then AR_3 [9,10] before AR_2 [10,12];
              Mul [10,11] overlaps AR_2; Add [12,14], ReLu [14,16]. Iteration 11.
    Preempt:  AR_1's first byte [6,7] ends when AR_2 is ready; AR_2's first byte [7,8]
              ends when AR_3 is ready; AR_3 [8,9]; AR_2's rest [9,10]; AR_1's rest
              [10,12]. Mul [9,10], Add [10,12], ReLu [12,14]. Iteration 9.
    Reduction of the preemptive schedule over FIFO: (12 - 9) / 12 = 25%, the paper's.
    """
    w = Workload(fig2_trace())
    assert w.forward_time == 5.0
    assert w.ready == {"w1": 6.0, "w2": 7.0, "w3": 8.0}
    plans = fig2_plans()
    runs = {k: w.simulate(p, FIG2_MODEL) for k, p in plans.items()}
    assert {k: r.iteration_time for k, r in runs.items()} == {
        "fifo": 12.0, "reorder": 11.0, "preempt": 9.0}
    pre = [(p.tensors[0], p.start, p.end) for p in runs["preempt"].partitions]
    assert pre == [("w1", 6, 7), ("w2", 7, 8), ("w3", 8, 9), ("w2", 9, 10), ("w1", 10, 12)]
    fifo, best = runs["fifo"].iteration_time, runs["preempt"].iteration_time
    assert (fifo - best) / fifo == 0.25
    # PACE's planner (1 s slots) finds the same preemptive schedule on its own
    df = run_fig2().set_index("strategy")
    assert df.loc["pace", "iteration_time_s"] == 9.0
    assert df.loc["preempt", "reduction_pct"] == 25.0
    assert df.loc["pace", "order"] == df.loc["preempt", "order"]


def test_params_one_line_errors():
    Params.from_mapping(CONFIG)
    for change, match in [
        (lambda c: c["policies"].append("nope"), r"pace_sim\.policies\.10: 'nope' is not one"),
        (lambda c: c.update(compute_capacity="many"), r"pace_sim\.compute_capacity: 'many'"),
        (lambda c: c.update(compute_capacity=0), r"pace_sim\.compute_capacity: 0"),
        (lambda c: c.pop("latency_s"), "'latency_s' is a required property"),
        (lambda c: c["bandwidth"].update(gbps=[0]), r"pace_sim\.bandwidth\.gbps\.0: 0"),
        (lambda c: c.pop("calibration"), "'calibration' is a required property"),
        (lambda c: c["scale"].update(compute_factors=[0]),
         r"pace_sim\.scale\.compute_factors\.0: 0"),
    ]:
        c = copy.deepcopy(CONFIG)
        change(c)
        with pytest.raises(CommschedError, match=match):
            Params.from_mapping(c)
    with pytest.raises(CommschedError, match="bandwidth must be > 0"):
        allreduce_model(4, 0.0, 0.0, 0.0)


#: The paper's model names (the claims name them), each standing for our small CNN trace.
PAPER_MODELS = ("vgg16", "resnet50", "seq2seq", "transformer")


def small_calibration(path: Path) -> Path:
    """A calibration table for :func:`small_params`: model k takes (2 + k) ms at batch 8."""
    rows = [f"{m},8,images,throughput,{8e3 / (2 + k)},1,,,,,,test"
            for k, m in enumerate(PAPER_MODELS)]
    path.write_text(",".join(COLUMNS) + "\n" + "\n".join(rows) + "\n")
    return path


def small_params(calibration: Path, **over) -> Params:
    c = copy.deepcopy(CONFIG)
    c["models"] = [{"name": m, "trace": "thesis_cnn-train-b8", "batch": 8, "unit": "images"}
                   for m in PAPER_MODELS]
    c["calibration"] = str(calibration)
    c["policies"] = ["wfbp", "horovod-0.20", "tictac", "pace"]
    c["options"] = {"pace": {"slot_ms": 0.05}}
    c["workers"]["n_workers"] = [2, 8]
    c["bandwidth"]["gbps"] = [1, 6, 12, 14, 20]
    c["scale"]["compute_factors"] = [1, 4]
    c.update(over)
    return Params.from_mapping(c)


def test_small_end_to_end(tmp_path):
    p = small_params(small_calibration(tmp_path / "calib.csv"))
    models = load_models(p, str(ROOT / "data" / "traces"))
    # compute rescaled per model: a step without communication takes the calibrated time
    for k, m in enumerate(models):
        assert m.workload(p).compute_time == pytest.approx((2 + k) * 1e-3)
        assert m.workload(p, 4.0).compute_time == pytest.approx(4 * (2 + k) * 1e-3)
    tables = {e: run_experiment(e, models, p) for e in ("workers", "bandwidth", "scale")}
    tables["usage"] = run_experiment("usage", models, p)
    tables["fig2"] = run_fig2()
    w = tables["workers"]
    assert set(w.policy) == {"wfbp", "horovod-0.20", "tictac", "pace"}
    assert (w[w.policy == "pace"].pace_gain_pct == 0).all()
    # speed = workers x batch / iteration time
    assert list(w.speed * w.iteration_s) == pytest.approx(list(w.n_workers * 8))
    u = tables["usage"]
    assert u.busy.max() <= 1.0 + 1e-9 and (u.gbps <= 10 + 1e-6).all()
    for _, d in u.groupby(["model", "policy"]):  # usage.iterations iterations in bins
        period, bin_s = d.iteration_s.iloc[0], d.bin_ms.iloc[0] / 1e3
        assert len(d) == max(1, -(-p.usage_iterations * period // bin_s))
    m = headline_metrics(tables)
    assert m["pace_sim.fig2.preempt_reduction_pct"] == 25.0
    assert m["pace_sim.bandwidth.low_bw_gbps"] == 1.0
    assert "pace_sim.scale.vgg16.gain_vs_tictac_x4_pct" in m
    # every metric the claims name is produced (computed from the tables, not typed in)
    claims = yaml.safe_load((ROOT / "papers" / "claims" / "pace-sim.yaml").read_text())
    wanted = {c["metric"] for c in claims["claims"]}
    assert wanted <= set(m), wanted - set(m)
    gains = [m[f"pace_sim.workers.{x}.gain_vs_wfbp_pct"] for x in PAPER_MODELS]
    setting = w[w.policy == "wfbp"].pace_gain_pct
    assert m["pace_sim.workers.gain_vs_wfbp_setting_min_pct"] == setting.min() <= min(gains)
    assert m["pace_sim.workers.gain_vs_wfbp_setting_max_pct"] == setting.max() >= max(gains)
    assert m["pace_sim.workers.resnet50_least_gain_vs_horovod-0.20_frac"] in (0.0, 0.5, 1.0)
    for k in ("pace_sim.usage.pace_valley_few_ms_frac", "pace_sim.usage.pace_shorter_valley_frac",
              "pace_sim.bandwidth.pace_earliest_bw95_frac"):
        assert m[k] in (0.0, 0.25, 0.5, 0.75, 1.0)
    assert 0 < m["pace_sim.workers.pace_scaling_min"] <= 1.0 + 1e-9
    # the CLI: one-line errors, exit 2; the metrics table it writes
    tab = tmp_path / "fig2.csv"
    assert main(["fig2", "--table", str(tab)]) == 0
    assert read_table(tab).shape[0] == 4
    assert main(["workers"]) == 2
    assert main(["metrics", "--tables", "nope=x.csv", "--metrics", str(tmp_path / "m")]) == 2


def test_workers_metrics_per_setting_on_a_known_table():
    """The Fig. 8 ranges are read per (model, workers) setting, not on means over workers."""
    rows = []
    for model, gains in {"resnet50": (5.0, 30.0), "vgg16": (10.0, 20.0)}.items():
        for n, g in zip((2, 4), gains, strict=True):
            rows += [{"model": model, "policy": "horovod-0.20", "n_workers": n,
                      "pace_gain_pct": g, "speed": 1.0},
                     {"model": model, "policy": "pace", "n_workers": n,
                      "pace_gain_pct": 0.0, "speed": float(n)}]
    m = headline_metrics({"workers": pd.DataFrame(rows)})
    assert m["pace_sim.workers.resnet50.gain_vs_horovod-0.20_pct"] == 17.5
    assert m["pace_sim.workers.gain_vs_horovod-0.20_setting_min_pct"] == 5.0
    assert m["pace_sim.workers.gain_vs_horovod-0.20_setting_max_pct"] == 30.0
    # least of the models at 2 workers (5 < 10), not at 4 (30 > 20)
    assert m["pace_sim.workers.resnet50_least_gain_vs_horovod-0.20_frac"] == 0.5
    assert m["pace_sim.workers.pace_scaling_min"] == 1.0


def test_idle_valleys_wrap_around():
    w = Workload(fig2_trace())
    r = w.simulate(fig2_plans()["preempt"], FIG2_MODEL)
    # channel busy [6,12] continuously; iteration 9: the idle valley is 9 - 6 = 3 s
    assert idle_valleys(r) == [3.0]
    fifo = w.simulate(fig2_plans()["fifo"], FIG2_MODEL)
    assert idle_valleys(fifo) == [6.0]



def test_calibration_table_derives_each_models_step_time():
    """data/calibration/pace_gtx1080ti.csv: every step time derived from its sources' numbers
    (README of data/calibration), recomputed here by hand."""
    cal = load_calibration(ROOT / CONFIG["calibration"])
    assert set(cal) == {m["name"] for m in CONFIG["models"]}
    assert {m: cal[m].batch for m in cal} == {m["name"]: m["batch"] for m in CONFIG["models"]}
    # measured 1080 Ti throughput: batch / (images/s)
    assert cal["vgg16"].step_s == pytest.approx(64 / 125)
    assert cal["resnet50"].step_s == pytest.approx(32 / 209)
    # Transformer: P100 tokens/s (25000 tokens / 8 GPUs / 0.4 s) x the 1080 Ti / P100 ratio
    tr = 2048 / (25000 / 8 / 0.4 * 1.2333)
    assert cal["transformer"].step_s == pytest.approx(tr)
    tr_kernels = 6 * 60_719_104 * 2048 / 10.694e12
    assert cal["transformer"].kernel_s == pytest.approx(tr_kernels)
    # Seq2Seq: its kernels (GEMMs + 4 LSTM layers at DeepBench's rate) x the Transformer's
    # measured / kernel ratio
    s2s = 6 * 20_578_304 * 4096 / 10.694e12 + 4 * 4096 * 5.566e-3 / (128 * 25)
    assert cal["seq2seq"].step_s == pytest.approx(s2s * tr / tr_kernels)
    assert [round(cal[m].step_s * 1e3, 1) for m in ("vgg16", "resnet50", "transformer",
                                                   "seq2seq")] == [512.0, 153.1, 212.6, 230.9]


def test_per_model_scale_is_target_over_traced_compute(tmp_path):
    """The default study: each model's compute scale = its 1080 Ti step / its trace's compute
    time, so the scaled iteration without communication takes exactly the calibrated time."""
    p = Params.from_mapping(CONFIG)
    cal = load_calibration(ROOT / CONFIG["calibration"])
    for m in load_models(p, str(ROOT / "data" / "traces")):
        traced = Workload(m.trace, 1.0, p.compute_capacity).compute_time
        assert m.scale == pytest.approx(cal[m.spec.name].step_s / traced)
        assert m.workload(p).compute_time == pytest.approx(cal[m.spec.name].step_s)


def test_calibration_one_line_errors(tmp_path):
    good = small_calibration(tmp_path / "c.csv").read_text()
    head, *rows = good.splitlines()
    for text, match in [
        (head.replace(",source", "") + "\n", "missing column"),
        (good + rows[0] + "\n", "more than one row"),
        (good.replace("throughput", "guess", 1), "method must be throughput or kernels"),
        (good.replace(",1,,,", ",0,,,", 1), "must be > 0"),
        (head + "\nx,8,tokens,kernels,,,1,1,0,0,x,t\n", "overhead_from must name"),
        (head + "\nx,8,tokens,kernels,,,1,1,0,0,y,t\ny,8,tokens,throughput,8,1,,,,,,t\n",
         "overhead_from must name a throughput row with kernel inputs"),
    ]:
        (tmp_path / "bad.csv").write_text(text)
        with pytest.raises(CommschedError, match=match):
            load_calibration(tmp_path / "bad.csv")
    with pytest.raises(CommschedError, match="cannot read"):
        load_calibration(tmp_path / "absent.csv")
    # the config's batch must be the calibrated one; every model needs a row
    p = small_params(tmp_path / "c.csv")
    (tmp_path / "c.csv").write_text(good.replace("vgg16,8,", "vgg16,16,"))
    with pytest.raises(CommschedError, match="calibrated at batch 16"):
        load_models(p, str(ROOT / "data" / "traces"))
    (tmp_path / "c.csv").write_text("\n".join([head, *rows[1:]]) + "\n")
    with pytest.raises(CommschedError, match="no row for model 'vgg16'"):
        load_models(p, str(ROOT / "data" / "traces"))
