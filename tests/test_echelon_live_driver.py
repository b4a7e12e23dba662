"""The EchelonFlow live driver (commsched.echelon.experiments.live) without a cluster:
config checks, the skipped path, the analysis of a run's records (tardiness from flow
records, traced profiles, the simulator's prediction, metrics) on records of real jobs run
over the tagged transport on loopback, the controller's view of flows, and the claims."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from commsched.claims import load_claims
from commsched.echelon.experiments.live import (
    Params,
    analyse,
    main,
    metrics,
    predict,
    summarize,
    traced_profiles,
)
from commsched.echelon.live.controller import ControllerConfig, PhaseState
from commsched.echelon.live.jobs import LiveJob, run_on_loopback
from commsched.echelon.live.runner import JobPlacement
from commsched.echelon.live.tc import enforce
from commsched.echelon.live.topology import network
from commsched.echelon.schedulers import FLOW_SCHEDULERS
from commsched.errors import CommschedError
from commsched.io.structured import read_yaml
from commsched.results import read_metrics, read_table

ROOT = Path(__file__).resolve().parent.parent


def test_the_repository_config_section_is_valid() -> None:
    p = Params.from_config(read_yaml(ROOT / "config/config.yaml")["echelon_live"])
    assert {jp.job.paradigm for jp in p.jobs} == {"gpipe", "fsdp", "dp-allreduce"}
    assert sum(jp.job.world for jp in p.jobs) <= 9 and "none" in p.policies
    assert {0, 1} <= {r for jp in p.jobs for r in jp.racks}


def test_bad_configs_are_one_line_errors() -> None:
    base = read_yaml(ROOT / "config/config.yaml")["echelon_live"]
    with pytest.raises(CommschedError, match="unknown policy 'wfq'"):
        Params.from_config({**base, "policies": ["wfq"]})
    with pytest.raises(CommschedError, match="unknown key 'bogus'"):
        Params.from_config({**base, "bogus": 1})
    job = dict(base["jobs"][0])
    with pytest.raises(CommschedError, match="unknown paradigm 'moe'"):
        Params.from_config({**base, "jobs": [{**job, "paradigm": "moe"}]})
    with pytest.raises(CommschedError, match="stages but only 2 blocks"):
        Params.from_config({**base, "jobs": [{**job, "blocks": 2}]})
    with pytest.raises(CommschedError, match="must be positive"):
        Params.from_config({**base, "core_rate": "0mbit"})
    with pytest.raises(CommschedError, match="racks is required"):
        Params.from_config({**base, "jobs": [{k: v for k, v in job.items() if k != "racks"}]})


def test_zero_bandwidth_is_a_one_line_error(tmp_path: Path, capsys: Any) -> None:
    cfg = {**read_yaml(ROOT / "config/config.yaml")["echelon_live"], "core_rate": "0mbit"}
    args = [f"--{n}={tmp_path / n}.csv" for n in
            ("jobs", "iterations", "flows", "updates", "summary", "metrics")]
    assert main(["--config-json", json.dumps(cfg), "--workdir", str(tmp_path), *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "must be positive" in err[0]
    assert not (tmp_path / "summary.csv").exists()


def test_disabled_run_writes_skipped_tables(tmp_path: Path) -> None:
    cfg = {**read_yaml(ROOT / "config/config.yaml")["echelon_live"], "enabled": False}
    args = [f"--{n}={tmp_path / n}.csv" for n in
            ("jobs", "iterations", "flows", "updates", "summary", "metrics")]
    assert main(["--config-json", json.dumps(cfg), "--workdir", str(tmp_path), *args]) == 0
    assert read_table(tmp_path / "summary.csv")["reason"].iloc[0] == "echelon_live.enabled is false"
    assert read_metrics([tmp_path / "metrics.csv"]) == {}


def _records(jp: JobPlacement, policy: str, go: float) -> list[dict[str, Any]]:
    """Rank results of ``jp`` run on loopback threads, as a worker writes them."""
    phase = {"go": go, "policy": policy}
    return [{"paradigm": jp.job.paradigm, "phases": [
        {**phase, "policy": "none", "tasks": [], "iteration_end": [], "flows": []},
        {**phase, "tasks": r.tasks, "iteration_end": r.iteration_end, "flows": r.flows}]}
        for r in run_on_loopback(jp.job, timeout=20)]


@pytest.fixture(scope="module")
def run() -> tuple[Params, dict[str, Any]]:
    jobs = (JobPlacement(LiveJob("pp", "gpipe", width=32, blocks=3, batch=8, micro_batches=2,
                                 iterations=2), (0, 1, 0)),
            JobPlacement(LiveJob("dp", "dp-allreduce", world=2, width=32, blocks=2, batch=8,
                                 iterations=2), (1, 0)))
    params = Params(True, jobs, ("fair",), repeats=1)
    go = time.time()
    workers = {jp.job.name: _records(jp, "fair", go) for jp in jobs}
    ctl = {"phases": [{"policy": "none", "events": []},
                      {"policy": "fair", "events": [["s", "x", go, go + 0.001, go + 0.004]]}]}
    return params, {"runs": [{"repeat": 0, "phases": ["none", "fair"], "workers": workers,
                              "controller": ctl}],
                    "core_Bps_measured": 5e6, "topology": {}}


def test_analysis_tardiness_profiles_prediction_metrics(run: tuple[Params, Any]) -> None:
    params, r = run
    t = analyse(r)
    assert set(t["jobs"]["job"]) == {"pp", "dp"} and (t["jobs"]["jct_s"] > 0).all()
    fl = t["flows"]
    # Eq. 2 from the records: a group's first flow has ideal = its own start + offset 0
    head = fl.sort_values("start").groupby(["job", "iteration", "group"]).head(1)
    assert np.allclose(head["ideal"], head["start"] + head["offset"])
    prof = traced_profiles(t["tasks"], [jp.job for jp in params.jobs])
    assert len(prof["pp"].fwd) == 3 and all(x > 0 for x in prof["pp"].fwd)
    assert len(prof["dp"].bwd) == 2
    sim = predict(params.jobs, prof, 5e6, 2e7, "fair").jobs_table()
    assert list(sim["name"]) == ["pp", "dp"]
    s = summarize(params, t, 5e6, 5e6, 2e7)
    assert set(s["job"]) == {"pp", "dp"} and (s["predicted_jct_s"] > 0).all()
    m = metrics(s, t["updates"])
    assert m["echelon_live.fair.pp.jct_vs_fair"] == 1.0
    assert m["echelon_live.update_latency_median_ms"] == pytest.approx(4.0, abs=1e-3)
    # without the profiles measured before the run no job can be held out
    assert s["error_lojo_abs_median"].isna().all()
    assert "echelon_live.error_lojo_median_abs_pct" not in m
    # with them (here the traced ones), each job is predicted from the other's fit
    s = summarize(params, t, 5e6, 5e6, 2e7, prof)
    assert (s["predicted_lojo_jct_s"] > 0).all() and (s["lojo_compute_scale"] == 1.0).all()
    m = metrics(s, t["updates"])
    assert m["echelon_live.error_lojo_median_abs_pct"] == pytest.approx(
        100 * s["error_lojo_abs_median"].median())
    assert {"echelon_live.pp.error_lojo_median_abs_pct",
            "echelon_live.dp.error_lojo_median_abs_pct"} <= set(m)


def test_controller_view_and_enforcement() -> None:
    net = network([0, 1, 0], 100.0, 10.0)
    st = PhaseState(net, FLOW_SCHEDULERS["echelon-edf-bottleneck"](), [0, 1, 0], go=100.0)
    for i, (src, dst, off) in enumerate([(0, 1, 0.0), (0, 1, 1.0), (0, 2, 0.0)]):
        st.event({"e": "s", "id": f"f{i}", "src": src, "dst": dst, "size": 10.0,
                  "tag": i + 1, "group": "j/0/act0", "index": i, "offset": off, "job": "j",
                  "t": 100.0})
    classes = st.decide(100.0, [{}, {}])
    # two flows cross the core from rack 0; EDF within the EchelonFlow: the earlier ideal
    # finish first, the other held at the floor with prio 7; the intra-rack flow has no class
    assert set(classes[0]) == {1, 2} and classes[1] == {}
    assert classes[0][1][1] == 0 and classes[0][2][1] == 7
    st.event({"e": "f", "id": "f0", "t": 101.0})
    assert st.active == [1, 2] and st.sim.finish[0] == 1.0
    assert enforce({}, 10.0) == {}


def test_controller_config_rejects_unknown_policies() -> None:
    with pytest.raises(CommschedError, match="unknown policy 'wfq'"):
        ControllerConfig([0], 1.0, 1.0, ["a"], ["wfq"], 1, 1, 1, "x")


def test_claims_file_is_valid_and_ours() -> None:
    claims = load_claims(ROOT / "papers/claims/echelon-live.yaml")
    assert claims and all("-ours-" in c["id"] and c["kind"] == "ours"
                          and c["target"] == "echelon_live" for c in claims)
    assert all(c["statement"].startswith("Ours:") for c in claims)
