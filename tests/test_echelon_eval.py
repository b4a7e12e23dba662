"""The EchelonFlow cluster evaluation driver (commsched.echelon.experiments.eval)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from commsched.echelon.experiments import eval as ee
from commsched.echelon.schedulers import FLOW_SCHEDULERS
from commsched.errors import CommschedError
from commsched.io.structured import read_yaml
from commsched.results import read_metrics, read_provenance, read_table

ROOT = Path(__file__).resolve().parents[1]
TRACES = ROOT / "data" / "traces"

SMALL = {
    "schedulers": ["fair"], "seeds": [0], "racks": 2, "hosts_per_rack": 5, "link_Bps": 1.25e9,
    "oversubscription": [1, 4], "jobs": [2], "mean_interarrival_s": 0.01,
    "compute_scale": 0.05, "iterations": 2,
    "mix": [{"paradigm": "gpipe", "trace": "alexnet_v2-train-b4", "workers": 3,
             "micro_batches": 2},
            {"paradigm": "dp-allreduce", "trace": "alexnet_v2-train-b4", "workers": 3,
             "blocks": 2}],
}


def test_config_section_is_valid_for_the_driver() -> None:
    cfg = read_yaml(ROOT / "config" / "config.yaml")["echelon_eval"]
    assert ee._section(cfg)["schedulers"]
    hosts = cfg["racks"] * cfg["hosts_per_rack"]
    for n in cfg["jobs"]:  # every load fits the cluster
        mix = [cfg["mix"][k % len(cfg["mix"])] for k in range(n)]
        assert sum(m["workers"] + m.get("servers", 0) for m in mix) <= hosts


def test_sweep_is_deterministic_and_metrics_compare_schedulers(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a second name for fair sharing: ratios against it must be exactly 1
    monkeypatch.setattr(ee, "FLOW_SCHEDULERS",
                        {**FLOW_SCHEDULERS, "fair-again": FLOW_SCHEDULERS["fair"]})
    cfg = {**SMALL, "schedulers": ["fair", "fair-again"]}
    traces = [str(TRACES / "alexnet_v2-train-b4.json.gz")]
    jobs, its = ee.run_sweep(cfg, traces)
    again, _ = ee.run_sweep(cfg, traces)
    cols = ["scheduler", "jobs", "oversubscription", "job", "jct_s", "tardiness_s"]
    pd.testing.assert_frame_equal(jobs[cols], again[cols])
    assert len(jobs) == 2 * 2 * 2  # schedulers x oversubscription x jobs
    assert set(its["paradigm"]) == {"gpipe", "dp-allreduce"}
    assert (jobs["slowdown"] >= 1 - 1e-9).all()
    m = ee.headline_metrics(jobs, its)
    assert m["echelon_eval.fair-again.gpipe.iter_vs_fair"] == pytest.approx(1.0)
    assert m["echelon_eval.fair.jct_vs_fair-again"] == pytest.approx(1.0)
    assert m["echelon_eval.fair.gpipe.iter_mean_s"] > 0


def test_cli_writes_tables_with_provenance(tmp_path: Path) -> None:
    j, i, m = tmp_path / "j.csv", tmp_path / "i.csv", tmp_path / "m.csv"
    args = ["--config-json", json.dumps(SMALL), "--trace-dir", str(TRACES),
            "--jobs-table", str(j), "--iterations-table", str(i)]
    assert ee.main(["run", *args]) == 0
    assert read_provenance(j)["config"]["jobs"] == [2]
    assert ee.main(["metrics", *args[2:], "--metrics", str(m)]) == 0
    assert "echelon_eval.fair.slowdown_mean" in read_metrics([m])
    assert len(read_table(i)) == 2 * 2 * 2  # oversubscription x jobs x iterations


@pytest.mark.parametrize(("change", "message"), [
    ({"schedulers": ["magic"]}, "unknown schedulers magic"),
    ({"jobs": [5]}, "need 15 hosts, the cluster has 10"),
    ({"mix": [{"paradigm": "zero-bubble", "trace": "alexnet_v2-train-b4", "workers": 2}]},
     r"mix\.0\.paradigm: 'zero-bubble' is not one of"),
])
def test_bad_configs_are_one_line_errors(change: dict, message: str,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    cfg = {**SMALL, **change}
    with pytest.raises(CommschedError, match=message):
        ee.run_sweep(cfg, [str(TRACES / "alexnet_v2-train-b4.json.gz")])
    assert ee.main(["run", "--config-json", json.dumps(cfg), "--trace-dir", str(TRACES),
                    "--jobs-table", "/nonexistent/j.csv", "--iterations-table",
                    "/nonexistent/i.csv"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("echelon_eval run: error:")


@pytest.mark.parametrize("name", sorted(FLOW_SCHEDULERS))
def test_every_registered_scheduler_runs_a_validated_scenario(name: str) -> None:
    """The contract: every scheduler of the registry runs the coupled simulation (its flow
    schedule checked by check_flow_schedule) and every job finishes."""
    cfg = {**SMALL, "schedulers": [name], "oversubscription": [4], "iterations": 1}
    jobs, its = ee.run_sweep(cfg, [str(TRACES / "alexnet_v2-train-b4.json.gz")])
    assert len(jobs) == 2 and jobs["jct_s"].notna().all()
    assert (its["iteration_s"] > 0).all()
