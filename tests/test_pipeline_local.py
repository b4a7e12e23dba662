"""A pipeline run leaves the checkout clean (benchmark records go to results/benchmarks/,
`make record-benchmarks` copies them into the committed benchmarks/results/), a run killed
mid-way is finished by running scripts/reproduce.sh again, and the jobs of a killed
Snakemake end with it (scripts/job-shell)."""

from __future__ import annotations

import os
import subprocess
import time

import pandas as pd
import pytest
from conftest import (
    SMALL_CONFIG,
    kill_when,
    pipeline_env,
    processes_in,
    run_ok,
    scratch_checkout,
)

from commsched.cluster import check_support
from commsched.results import read_table

pytestmark = pytest.mark.slow


def _porcelain(checkout) -> str:
    return subprocess.run(["git", "status", "--porcelain"], cwd=checkout, capture_output=True,
                          text=True, check=True).stdout


def test_run_leaves_tree_clean_and_records_benchmarks_on_request(local_pipeline_run):
    assert _porcelain(local_pipeline_run) == ""
    records = sorted(p.name for p in (local_pipeline_run / "results/benchmarks").glob("*.tsv"))
    assert records == ["placement_seven.tsv", "placement_synthetic.tsv",
                       "placement_tensorflow.tsv"]
    run_ok(["make", "-s", "record-benchmarks"], local_pipeline_run,
           pipeline_env(local_pipeline_run))
    changed = sorted(line[3:] for line in _porcelain(local_pipeline_run).splitlines())
    assert changed == [f"benchmarks/results/{r}" for r in records]
    subprocess.run(["git", "checkout", "--", "benchmarks/results"], cwd=local_pipeline_run,
                   check=True)


def test_record_benchmarks_without_a_run_fails_cleanly(tmp_path):
    checkout = scratch_checkout(tmp_path / "repo")
    r = subprocess.run(["make", "-s", "record-benchmarks"], cwd=checkout, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode != 0 and "run the pipeline first" in r.stderr
    assert _porcelain(checkout) == ""


def test_killed_run_finishes_when_run_again(local_pipeline_run, tmp_path):
    """SIGKILL a run of the toys' tables (snakemake and its jobs) while toys_simulate runs;
    running scripts/reproduce.sh again removes the stale lock and finishes with the same
    tables."""
    checkout = scratch_checkout(tmp_path / "repo")
    env = pipeline_env(checkout)
    cmd = ["bash", "scripts/reproduce.sh", "--cores", "1", "results/metrics/toys.csv",
           "--configfile", SMALL_CONFIG]
    kill_when(cmd, checkout, env, (checkout / "logs/toys/simulate.log").exists,
              "toys_simulate started")
    locks = checkout / ".snakemake/locks"
    assert locks.exists() and any(locks.iterdir())
    assert not (checkout / "results/tables/toys_makespans.csv").exists()
    r = run_ok(cmd, checkout, env)
    assert "removing the stale lock" in r.stderr
    for name in ("results/tables/toys_makespans.csv", "results/metrics/toys.csv"):
        pd.testing.assert_frame_equal(read_table(local_pipeline_run / name),
                                      read_table(checkout / name), obj=name)
    assert _porcelain(checkout) == ""


def test_notebook_job_ends_with_a_killed_snakemake(tmp_path):
    """SIGKILL only snakemake (not its jobs) while the toys' notebook runs in papermill:
    within 60 s no process of the run is left (papermill, its kernel, job-shell), the
    figures the notebook would have drawn never appear and the executed notebook is not
    written after the kill; running scripts/reproduce.sh again makes them."""
    checkout = scratch_checkout(tmp_path / "repo")
    env = pipeline_env(checkout)
    cmd = ["bash", "scripts/reproduce.sh", "--cores", "1", "toys", "--configfile", SMALL_CONFIG]

    def kernel_runs() -> bool:
        return any("ipykernel" in c for c in processes_in(checkout).values())

    killed_at = kill_when(cmd, checkout, env, kernel_runs, "the toys notebook's kernel",
                          only_snakemake=True)
    deadline = time.monotonic() + 60
    while (left := processes_in(checkout)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not left, f"processes of the killed run still there after 60 s: {left}"
    figures = [checkout / f"results/figures/toys_makespan.{ext}" for ext in ("pdf", "png")]
    assert not any(f.exists() for f in figures)
    notebook = checkout / "results/notebooks/toys.ipynb"
    # (papermill saves it after each cell: one save may be under way at the kill)
    assert not notebook.exists() or notebook.stat().st_mtime < killed_at + 1.0

    r = run_ok(cmd, checkout, env)
    assert "removing the stale lock" in r.stderr
    assert all(f.exists() for f in figures) and notebook.stat().st_mtime > killed_at
    assert not processes_in(checkout)
    assert _porcelain(checkout) == ""


def _namespace_of(pid: int) -> str | None:
    r = subprocess.run(["ip", "netns", "identify", str(pid)], capture_output=True, text=True)
    return r.stdout.strip() or None


@pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")
def test_live_job_tears_down_when_snakemake_is_killed(tmp_path):
    """SIGKILL only snakemake while a small PACE live run's DDP workers run in their
    namespaces: the driver gets SIGTERM from job-shell and tears its cluster down (the
    workers' namespaces are gone), and no process of the run is left within 60 s."""
    reason = check_support()
    if reason:
        pytest.skip(reason)
    checkout = scratch_checkout(tmp_path / "repo")
    (checkout / "live.yaml").write_text(
        "pace_live:\n  enabled: true\n"
        "  models: [{trace: alexnet-torch-cpu-train-b8, bandwidth: 1gbit}]\n"
        "  policies: [ddp]\n  warmup: 1\n  iterations: 50\n  rounds: 3\n")
    env = pipeline_env(checkout)
    cmd = ["bash", "scripts/reproduce.sh", "--cores", "2", "results/metrics/pace_live.csv",
           "--configfile", SMALL_CONFIG, "live.yaml"]
    namespaces: set[str] = set()

    def workers_run() -> bool:
        for pid, c in processes_in(checkout).items():
            if "commsched.pace.live.ddp" in c and (ns := _namespace_of(pid)):
                namespaces.add(ns)
        return len(namespaces) >= 2

    kill_when(cmd, checkout, env, workers_run, "the DDP workers", timeout=600,
              only_snakemake=True)
    deadline = time.monotonic() + 60
    while (left := processes_in(checkout)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not left, f"processes of the killed run still there after 60 s: {left}"
    existing = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True,
                              check=True).stdout.split()
    assert not namespaces & set(existing), "the live run's namespaces were not torn down"
    assert "interrupted by SIGTERM" in (checkout / "logs/pace_live/run.log").read_text()
