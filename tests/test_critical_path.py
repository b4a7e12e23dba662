"""benchmarks/critical_path.py on a hand-written Snakemake log: jobs, chain and work bound."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("critical_path",
                                               ROOT / "benchmarks" / "critical_path.py")
assert _spec is not None and _spec.loader is not None
cp = importlib.util.module_from_spec(_spec)
sys.modules["critical_path"] = cp  # dataclasses look their module up
_spec.loader.exec_module(cp)


def _job(stamp: str, rule: str, jobid: int, inputs: str, outputs: str, threads: int) -> str:
    lines = [f"[Wed Nov 25 {stamp} 2026]", f"rule {rule}:"]
    if inputs:
        lines.append(f"    input: {inputs}")
    lines += [f"    output: {outputs}", f"    jobid: {jobid}"]
    if threads > 1:  # Snakemake prints threads after the jobid, only when above 1
        lines.append(f"    threads: {threads}")
    return "\n".join(lines)


def _done(stamp: str, rule: str, jobid: int) -> str:
    return f"[Wed Nov 25 {stamp} 2026]\nFinished jobid: {jobid} (Rule: {rule})"


@pytest.fixture
def log(tmp_path: Path) -> Path:
    # a (1 core, 0-100 s) -> b (1 core, 100-160 s); c (1 core, 0-50 s) beside a;
    # live (2 cores, 160-460 s) alone after b
    text = "\n".join([
        _job("10:00:00", "a", 1, "", "x.csv", 1),
        _job("10:00:00", "c", 3, "", "z.csv", 1),
        _done("10:00:50", "c", 3),
        _done("10:01:40", "a", 1),
        _job("10:01:40", "b", 2, "x.csv", "y.csv", 1),
        _done("10:02:40", "b", 2),
        _job("10:02:40", "live", 4, "y.csv", "w.csv", 2),
        _done("10:07:40", "live", 4),
    ])
    p = tmp_path / "run.snakemake.log"
    p.write_text(text + "\n")
    return p


def test_parse_reads_times_files_and_threads(log: Path) -> None:
    jobs = {j.rule: j for j in cp.parse(log)}
    assert {r: (j.seconds, j.threads) for r, j in jobs.items()} == {
        "a": (100, 1), "c": (50, 1), "b": (60, 1), "live": (300, 2)}
    assert jobs["b"].inputs == ["x.csv"] and jobs["live"].outputs == ["w.csv"]


def test_chain_and_work_bound(log: Path, tmp_path: Path) -> None:
    jobs = cp.parse(log)
    total, chain = cp.critical_path(jobs)
    assert total == 460 and [j.rule for j in chain] == ["a", "b", "live"]
    # exclusive 300 s; the others' 210 core-seconds on 2 cores: 105 s
    assert cp.work_bound(jobs, 2) == (300, 405)
    out = tmp_path / "cp.json"
    assert cp.main([str(log), "--record", str(out)]) == 0
    rec = json.loads(out.read_text())
    assert rec["cores"] == 2 and rec["work_bound_s"] == 460  # the chain is longer here
    assert [e["rule"] for e in rec["exclusive"]] == ["live"]


def test_a_log_without_jobs_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                        ) -> None:
    empty = tmp_path / "empty.log"
    empty.write_text("Building DAG of jobs...\n")
    assert cp.main([str(empty)]) == 2
    assert "no finished job" in capsys.readouterr().err
