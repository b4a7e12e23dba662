"""``commsched pace plan``: the plan it writes and its one-line errors on bad input."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from commsched.cli import main
from commsched.cost.allreduce import allreduce_cost
from commsched.errors import CommschedError
from commsched.model.traced import load_trace
from commsched.pace.model import build_model
from commsched.pace.plan import load_plan

VGG = "data/traces/vgg16-train-b2.json.gz"
TOY = "data/traces/thesis_cnn-train-b8.json.gz"


def test_plan_covers_the_model_and_records_its_setting(tmp_path, capsys):
    out = tmp_path / "plan.json"
    assert main(["pace", "plan", VGG, "--workers", "8", "--bandwidth", "10", "-o", str(out)]) == 0
    plan = load_plan(out)
    plan.check_tensors(build_model(load_trace(VGG)).tensors)
    assert plan.policy == "pace"
    assert plan.meta["workers"] == 8 and plan.meta["slot_s"] == 0.005
    assert 1 <= plan.meta["R"] <= 32
    assert "groups" in capsys.readouterr().out


def test_no_fusion_keeps_one_group_per_allreduce(tmp_path):
    out = tmp_path / "plan.json"
    args = ["pace", "plan", TOY, "--workers", "2", "--bandwidth", "0.01", "--slot", "0.1",
            "--no-fusion", "-o", str(out)]
    assert main(args) == 0
    plan = load_plan(out)
    assert plan.policy == "pace-nofusion"
    assert len(plan.groups) == len(build_model(load_trace(TOY)).ops)


@pytest.mark.parametrize("fusion", [[], ["--no-fusion"]])
def test_the_paper_lexicographic_lp_as_oracle(tmp_path, fusion):
    # lex-lp is optimal for tails rounded up to whole slots: within one slot of exact.
    times = {}
    for solver in ("exact", "lex-lp"):
        out = tmp_path / f"{solver}.json"
        args = ["pace", "plan", TOY, "--workers", "2", "--bandwidth", "0.01", "--slot", "100",
                *fusion, "--no-slot-guidance", "--solver", solver, "-o", str(out)]
        assert main(args) == 0
        plan = load_plan(out)
        plan.check_tensors(build_model(load_trace(TOY)).tensors)
        assert plan.meta["solver"] == solver
        times[solver] = plan.meta["iter_time_s"]
    assert times["exact"] - 1e-12 <= times["lex-lp"] <= times["exact"] + 0.1 + 1e-12  # a slot


@pytest.mark.parametrize("extra, message", [
    (["--bandwidth", "0"], "argument --bandwidth: must be a finite number > 0"),
    (["--bandwidth", "10", "--slot", "0"], "argument --slot: must be a finite number > 0"),
    (["--bandwidth", "10", "--workers", "1"], "argument --workers: must be an integer >= 2"),
    (["--bandwidth", "10", "--slot", "5000"], "longer than the all-reduce of every"),
    (["--bandwidth", "10", "--no-fusion"], "longer than the smallest all-reduce"),
    (["--bandwidth", "10", "--compute-scale", "-1"], "argument --compute-scale"),
])
def test_bad_settings_are_one_line_errors(tmp_path, capsys, extra, message):
    out = tmp_path / "plan.json"
    out.write_text("keep me")
    argv = ["pace", "plan", VGG, "--workers", "8", *extra, "-o", str(out)]
    # --workers given twice: argparse keeps the last one.
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert out.read_text() == "keep me"  # nothing good is overwritten


def test_bad_traces_are_one_line_errors(tmp_path, capsys):
    bad = tmp_path / "bad.json.gz"
    bad.write_bytes(gzip.compress(b"{not json"))
    good = json.loads(gzip.decompress((Path(TOY)).read_bytes()))
    e = good["edges"][0]
    cyclic = {**good, "edges": [*good["edges"], {**e, "source": e["target"],
                                                 "target": e["source"]}]}
    (tmp_path / "cyclic.json.gz").write_bytes(gzip.compress(json.dumps(cyclic).encode()))
    no_duration = {**good, "nodes": [dict(n) for n in good["nodes"]]}
    del no_duration["nodes"][3]["duration"]
    (tmp_path / "nodur.json.gz").write_bytes(gzip.compress(json.dumps(no_duration).encode()))
    for trace, message in [("data/traces/vgg16-infer-b2.json.gz", "no gradient ops"),
                           (str(bad), "bad.json.gz"), (str(tmp_path / "none.json.gz"), "none"),
                           (str(tmp_path / "cyclic.json.gz"), "cycle through node"),
                           (str(tmp_path / "nodur.json.gz"), "missing field 'duration'")]:
        assert main(["pace", "plan", trace, "--workers", "8", "--bandwidth", "10",
                     "-o", str(tmp_path / "p.json")]) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1


def test_cost_models():
    ring = allreduce_cost("ring", 4, 1e9, latency_s=0.0)
    assert ring.time(4e6) == pytest.approx(2 * 3 / 4 * 4e6 / 1e9)  # Eq. (1), G = inf
    fit = allreduce_cost("fit", 4, 1e9)
    assert fit.time(0) > 0  # the measured start-up
    assert fit.time(4e6) - fit.time(0) == pytest.approx(ring.time(4e6))
    with pytest.raises(CommschedError, match="unknown all-reduce cost"):
        allreduce_cost("tree", 4, 1e9)
