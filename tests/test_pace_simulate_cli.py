"""``commsched pace simulate``: a plan file run in the all-reduce simulator, one-line errors."""

from __future__ import annotations

import pytest

from commsched.cli import main
from commsched.cost.allreduce import allreduce_cost
from commsched.model.traced import load_trace
from commsched.pace.plan import load_plan
from commsched.pace.sim import simulate_plan
from commsched.results import read_provenance, read_table

TOY = "data/traces/thesis_cnn-train-b8.json.gz"
VGG = "data/traces/vgg16-train-b2.json.gz"
CLUSTER = ["--workers", "2", "--bandwidth", "0.01"]


@pytest.fixture(scope="module")
def plan_file(tmp_path_factory):
    out = tmp_path_factory.mktemp("plan") / "plan.json"
    assert main(["pace", "plan", TOY, *CLUSTER, "--slot", "0.1", "-o", str(out)]) == 0
    return out


def test_simulate_prints_and_writes_the_run(plan_file, tmp_path, capsys):
    capsys.readouterr()
    table, usage = tmp_path / "t.csv", tmp_path / "u.csv"
    args = ["pace", "simulate", str(plan_file), TOY, *CLUSTER, "--compute-capacity",
            "unbounded", "--table", str(table), "--usage", str(usage), "--bin-ms", "2"]
    assert main(args) == 0
    out = capsys.readouterr().out
    # the same run through the library
    cost = allreduce_cost("ring", 2, 0.01e9 / 8)
    run = simulate_plan(load_trace(TOY), load_plan(plan_file), cost,
                        compute_capacity="unbounded")
    assert f"iteration {run.iteration_time * 1e3:.2f} ms" in out
    t = read_table(table)
    assert len(t) == len(run.partitions) == sum(len(g.partitions)
                                                for g in load_plan(plan_file).groups)
    assert t.end.max() == pytest.approx(max(p.end for p in run.partitions))
    u = read_table(usage)
    assert u.busy.sum() * 2e-3 == pytest.approx(run.comm_time)
    # ring: a worker sends 2(W-1)/W of every partition's bytes
    assert u.wire_bytes.sum() == pytest.approx(t["bytes"].sum())
    assert read_provenance(usage)["config"]["bin_ms"] == 2.0
    # PACE's own model predicted the simulated time up to its slot rounding (0.1 ms slots)
    assert run.iteration_time == pytest.approx(load_plan(plan_file).meta["iter_time_s"],
                                               abs=0.1e-3 * len(run.partitions) + 1e-9)


@pytest.mark.parametrize("extra, message", [
    (["--compute-capacity", "many"], "--compute-capacity must be an integer"),
    (["--compute-capacity", "0"], "compute capacity must be an integer >= 1"),
    (["--bin-ms", "0"], "argument --bin-ms: must be a finite number > 0"),
    (["--bandwidth", "0"], "argument --bandwidth: must be a finite number > 0"),
    (["--workers", "1"], "argument --workers: must be an integer >= 2"),
])
def test_bad_settings_are_one_line_errors(plan_file, capsys, extra, message):
    capsys.readouterr()
    assert main(["pace", "simulate", str(plan_file), TOY, *CLUSTER, *extra]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_plan_of_another_model_and_bad_files(plan_file, tmp_path, capsys):
    capsys.readouterr()
    assert main(["pace", "simulate", str(plan_file), VGG, *CLUSTER]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert main(["pace", "simulate", str(bad), TOY, *CLUSTER]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    assert main(["pace", "simulate", str(tmp_path / "missing.json"), TOY, *CLUSTER]) == 2
    assert capsys.readouterr().err.count("\n") == 1
