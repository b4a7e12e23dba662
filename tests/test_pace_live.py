"""The live all-reduce experiment's driver (commsched.pace.experiments.live) without a
cluster: config, plans, prediction, tables and metrics from a synthetic run, the skipped
path, and the claims it feeds. The live run itself is tested in tests/test_ddp_enforce.py
(namespaces) and by rule pace_live_run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import networkx as nx
import pandas as pd
import pytest

from commsched.claims import load_claims
from commsched.errors import CommschedError
from commsched.io.structured import read_yaml
from commsched.pace.experiments.live import main
from commsched.pace.experiments.live_analysis import (
    fit_cost,
    fit_runtime,
    metrics,
    summarize,
    tables,
    transfer,
)
from commsched.pace.experiments.live_plans import Params, cost_model, make_plans, predict
from commsched.pace.sim import Workload
from commsched.results import read_metrics, read_table
from commsched.trace.torch import trace_model

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def trace() -> nx.DiGraph:
    return trace_model("tiny_cnn", 4, "train", iterations=1, warmup=0)


def params(**kw: Any) -> Params:
    base: dict[str, Any] = {"enabled": True, "models": (),
                            "policies": ("ddp", "ddp_buckets", "wfbp", "horovod", "pace")}
    return Params(**{**base, **kw})


def test_the_repository_config_section_is_valid() -> None:
    cfg = read_yaml(ROOT / "config/config.yaml")["pace_live"]
    p = Params.from_config(cfg)
    assert p.n_workers >= 2 and p.threads == 1 and p.models
    for m in p.models:
        assert (ROOT / p.trace_dir / f"{m.trace}.json.gz").is_file()


def test_bad_configs_are_one_line_errors() -> None:
    """The config schema checks the section (commsched.driver.config_section); Params
    itself checks only what spans keys."""
    good = read_yaml(ROOT / "config/config.yaml")["pace_live"]
    for change, match in [({"policies": ["fifo"]}, r"pace_live\.policies\.0: 'fifo' is not one"),
                          ({"bogus": 1}, r"'bogus' was unexpected"),
                          ({"n_workers": 1}, r"pace_live\.n_workers: 1 is less than the minimum")]:
        with pytest.raises(CommschedError, match=match):
            Params.from_config({**good, **change})
    with pytest.raises(CommschedError, match="is a required property"):
        Params.from_config({"enabled": True, "policies": ["wfbp"]})
    with pytest.raises(CommschedError, match=r"policy 'plan' needs pace_live\.plan_file"):
        Params.from_config({**good, "policies": ["plan"], "plan_file": None})
    with pytest.raises(CommschedError, match=r"policy 'plan' needs pace_live\.plan_file"):
        params(policies=("plan",))


def test_plans_cover_the_model_and_ddp_runs_no_plan(trace: nx.DiGraph) -> None:
    w = Workload(trace)
    plans = make_plans(trace, params(slot_ms=1.0), 1e6, w)
    assert list(plans) == ["ddp", "ddp_buckets", "wfbp", "horovod", "pace"]
    assert plans["ddp"][0] is None
    for plan, decision in plans.values():
        decision.plan.check_tensors(w.sizes)
        if plan is not None:
            plan.check_tensors(w.sizes)
    # the executor fuses Horovod's units at run time; the simulator realises the fusion
    assert all(len(g.tensors) == 1 for g in plans["horovod"][0].groups)  # type: ignore[union-attr]
    assert plans["horovod"][1].release
    # DDP's buckets in the executor launch by plan order: no release times
    assert not plans["ddp_buckets"][1].release and plans["ddp"][1].release


def test_ddp_waits_for_every_bucket_the_executor_overlaps(trace: nx.DiGraph) -> None:
    w = Workload(trace)
    model = cost_model(params(), 1e5)  # slow links: communication dominates
    _, decision = make_plans(trace, params(), 1e5, w)["ddp"]
    overlap, run = predict(w, decision, model)
    sync, _ = predict(w, decision, model, sync=True)
    last = max(p.end for p in run.partitions)
    assert sync == pytest.approx(max(last, w.compute_time))
    assert overlap <= sync + 1e-12


def test_the_cost_fit_uses_the_wfbp_all_reduces() -> None:
    nominal = cost_model(params(), 1e8)
    ars = pd.DataFrame({"policy": ["wfbp"] * 3 + ["pace"], "bytes": [1e3, 1e6, 2e6, 5e6],
                        "start_s": [0.0, 0.0, 0.0, 0.0], "end_s": [0.002, 0.003, 0.004, 9.0]})
    f = fit_cost(ars, nominal)
    assert f.a == pytest.approx(0.002, abs=1e-6) and f.b == pytest.approx(1e-9, rel=1e-3)
    assert fit_cost(ars.iloc[3:], nominal) is nominal
    # with the agreement rounds recorded, each all-reduce's cost starts at its round
    f = fit_cost(ars.assign(agree_s=ars.start_s - 0.001), nominal)
    assert f.a == pytest.approx(0.003, abs=1e-6)


def test_the_runtime_fit_pools_models_of_different_link_rates() -> None:
    # a and b: 2 ms start-up, 80% of the link rate (1 and 4 MB/s), compute 1.2 and 1.8 x
    # the trace's; c is far off (20 ms, 10%, 5 x): leaving it out gives a and b's
    rows, summ = [], []
    for model, bw, rate, a, scale in (("a", "8mbit", 1e6, 0.002, 1.2),
                                      ("b", "32mbit", 4e6, 0.002, 1.8),
                                      ("c", "8mbit", 1e6, 0.02, 5.0)):
        frac = 0.1 if model == "c" else 0.8
        for nbytes in (1e3, 1e4, 1e5):
            rows.append({"model": model, "bandwidth": bw, "policy": "wfbp", "bytes": nbytes,
                         "agree_s": 1.0, "start_s": 1.001,
                         "end_s": 1.0 + a + nbytes / (frac * rate)})
        rows.append({"model": model, "bandwidth": bw, "policy": "pace", "bytes": 5e5,
                     "agree_s": 0.0, "start_s": 0.0, "end_s": 99.0})
        summ.append({"model": model, "policy": "wfbp", "compute_s": scale,
                     "trace_compute_s": 1.0})
    ars, summary = pd.DataFrame(rows), pd.DataFrame(summ)
    f = fit_runtime(summary, ars, exclude_model="c")
    assert f.compute_scale == pytest.approx(1.5)
    assert f.startup_s == pytest.approx(0.002) and f.rate_fraction == pytest.approx(0.8)
    assert f.cost(4e6).time(1e5) == pytest.approx(0.002 + 1e5 / 3.2e6)
    assert fit_runtime(summary, ars).rate_fraction < 0.5  # c pulls the pooled fit
    assert fit_runtime(summary, ars, "b").compute_scale == pytest.approx(3.1)
    with pytest.raises(CommschedError, match="too few wfbp all-reduces"):
        fit_runtime(summary[summary.model == "a"], ars[ars.model == "a"], "a")


def synthetic_run(trace: nx.DiGraph) -> dict[str, Any]:
    """What two workers of a live run return, with made-up times."""
    w = Workload(trace)
    p = params()
    plans = make_plans(trace, p, 1e6, w)
    results = []
    for rank in range(2):
        pols = []
        for k, policy in enumerate(["none", *plans]):
            t0 = 100.0 * k
            step = 1.0 if policy == "none" else 2.0 + 0.1 * (policy == "wfbp")
            starts = [t0 + step * i for i in range(4)]
            ars = [] if policy == "none" else [
                {"iteration": i, "start": t0 + step * i + 0.5 + 0.1 * j,
                 "end": t0 + step * i + 0.55 + 0.1 * j + 1e-9 * b, "bytes": b,
                 "parts": [[j, 0, b, j]]}
                for i in range(3) for j, b in enumerate([4000, 40000, 400000])]
            pols.append({"policy": policy, "iteration_start": starts,
                         "step_s": [step] * 2, "warmup_step_s": [step], "allreduces": ars})
        times = [100.0 * k + 0.001 * i for k in range(6) for i in range(7000)]
        rows = [[t, 1e6 * t, 1e4 * t] for t in times]  # 1 MB/s out, 10 kB/s in
        results.append({"rank": rank, "policies": pols, "link": {"rows": rows}})
    return {"model": "tiny_cnn", "trace": "tiny", "bandwidth": "8mbit", "bandwidth_Bps": 1e6,
            "trace_graph": trace, "workload": w, "plans": plans, "results": results}


def test_tables_summary_and_metrics_of_a_run(trace: nx.DiGraph) -> None:
    run = synthetic_run(trace)
    t = tables(run)
    assert set(t["steps"].policy) == {"none", *run["plans"]}
    assert len(t["steps"]) == 2 * 6 * 2
    # the warm-up's all-reduces (iteration 0) end before the first timed step: dropped
    assert t["allreduces"].iteration.min() == 0 and len(t["allreduces"]) == 2 * 5 * 6
    # 1000 bytes per ms = 1 MB/s on a 1 MB/s link: utilisation 1 in every 5 ms bin
    assert t["link"].utilisation.to_numpy() == pytest.approx(1.0)
    assert t["link"].rx_MBps.to_numpy() == pytest.approx(0.01)
    s = summarize(run, t["steps"], t["allreduces"], params())
    assert list(s.policy) == list(run["plans"])
    assert (s.measured_s[s.policy == "wfbp"] == 2.1).all()
    assert s.gain_over_wfbp[s.policy == "pace"].iloc[0] == pytest.approx(2.1 / 2.0 - 1)
    assert (s.compute_s == 1.0).all()
    m = metrics(s)
    assert m["pace_live.tiny_cnn.pace_gain_over_wfbp_pct"] == pytest.approx(5.0)
    assert m["pace_live.error_median_abs_pct"] == pytest.approx(
        100 * s.error.abs().median())


def synthetic_runs(trace: nx.DiGraph, models: tuple[str, ...]
                   ) -> tuple[list[dict[str, Any]], list[pd.DataFrame], list[pd.DataFrame]]:
    """:func:`synthetic_run` under each model name: the runs, summaries and all-reduces."""
    runs, sums, ars = [], [], []
    for model in models:
        run = {**synthetic_run(trace), "model": model}
        t = tables(run)
        runs.append(run)
        sums.append(summarize(run, t["steps"], t["allreduces"], params()))
        ars.append(t["allreduces"])
    return runs, sums, ars


def test_transfer_predicts_each_model_from_the_others_fit(trace: nx.DiGraph) -> None:
    runs, sums, ars = synthetic_runs(trace, ("m1", "m2"))
    summary, allreduces = pd.concat(sums, ignore_index=True), pd.concat(ars, ignore_index=True)
    out = transfer(runs, summary, allreduces)
    fit = fit_runtime(summary, allreduces, exclude_model="m1")
    run = runs[0]
    pace = predict(Workload(trace, compute_scale=fit.compute_scale), run["plans"]["pace"][1],
                   fit.cost(run["bandwidth_Bps"]))[0]
    row = out[(out.model == "m1") & (out.policy == "pace")].iloc[0]
    assert row.predicted_lomo_s == pytest.approx(pace)
    assert row.error_lomo == pytest.approx(pace / row.measured_s - 1)
    assert out.error_runtime.notna().all() and out.error_lomo.notna().all()
    m = metrics(out)
    assert m["pace_live.error_lomo_median_abs_pct"] == pytest.approx(
        100 * out.error_lomo.abs().median())
    assert "pace_live.error_runtime_median_abs_pct" in m
    no_wfbp = transfer(runs, summary, allreduces[allreduces.policy != "wfbp"])
    assert no_wfbp.error_runtime.isna().all() and no_wfbp.error_lomo.isna().all()
    one = transfer(runs[:1], sums[0], ars[0])  # one model: nothing to leave it out of
    assert one.error_lomo.isna().all() and "pace_live.error_lomo_median_abs_pct" not in metrics(one)


def test_transfer_without_a_slope_predicts_nothing_and_says_why(
        trace: nx.DiGraph, capsys: pytest.CaptureFixture[str]) -> None:
    # a short run on a fast link: the larger all-reduces happened to finish sooner
    runs, sums, ars = synthetic_runs(trace, ("m1", "m2"))
    summary, allreduces = pd.concat(sums, ignore_index=True), pd.concat(ars, ignore_index=True)
    wfbp = allreduces.policy == "wfbp"
    begin = allreduces["agree_s"] if "agree_s" in allreduces else allreduces["start_s"]
    allreduces.loc[wfbp, "end_s"] = begin[wfbp] + 1.0 / allreduces.loc[wfbp, "bytes"]
    with pytest.raises(CommschedError, match="do not grow with the bytes"):
        fit_runtime(summary, allreduces)
    out = transfer(runs, summary, allreduces)
    assert out.error_runtime.isna().all() and out.error_lomo.isna().all()
    assert out.error.notna().all()  # the run's own predictions stand
    err = capsys.readouterr().err
    assert "pace_live: no runtime prediction: fit_runtime: all-reduce durations" in err
    assert "no runtime prediction without m1:" in err
    assert "pace_live.error_runtime_median_abs_pct" not in metrics(out)


def test_every_pace_live_claim_metric_is_produced(trace: nx.DiGraph) -> None:
    claims = [c for c in load_claims([ROOT / "papers/claims/pace-live.yaml"])
              if c["target"] == "pace_live"]
    assert {c["id"] for c in claims} >= {"pace-live-resnet50-over-wfbp",
                                         "pace-live-resnet50-over-ddp",
                                         "pace-live-simulator-error",
                                         "pace-live-simulator-lomo-error"}
    runs, sums, ars = synthetic_runs(trace, ("resnet50", "alexnet"))
    s = transfer(runs, pd.concat(sums, ignore_index=True), pd.concat(ars, ignore_index=True))
    assert {c["metric"] for c in claims} <= set(metrics(s))


def test_skipped_run_writes_tables_that_say_why(tmp_path: Path) -> None:
    out = {n: tmp_path / f"{n}.csv" for n in ("steps", "allreduces", "link", "summary",
                                               "metrics")}
    cfg = {**read_yaml(ROOT / "config/config.yaml")["pace_live"], "enabled": False}
    argv = ["--config-json", json.dumps(cfg), "--workdir", str(tmp_path / "w")]
    for n, p in out.items():
        argv += [f"--{n}", str(p)]
    assert main(argv) == 0
    df = read_table(out["summary"])
    assert list(df.status) == ["skipped"] and "enabled is false" in df.reason.iloc[0]
    assert read_metrics([out["metrics"]]) == {}
    assert main([*argv[:1], json.dumps({**cfg, "policies": ["x"]}), *argv[2:]]) == 2
