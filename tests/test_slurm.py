"""The pipeline on a real SLURM cluster (Debian's slurmctld/slurmd/munge, brought up by
scripts/slurm-cluster.sh) through the real snakemake-executor-plugin-slurm and
profiles/slurm: the cluster itself, a small representative target set with the same outputs
as the local run, and a SLURM-profile run killed mid-way and run again."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from pathlib import Path

import pandas as pd
import pytest
from conftest import (
    PIPELINE_TARGETS,
    SLURM_SCRIPT,
    SMALL_CONFIG,
    kill_when,
    pipeline_env,
    run_ok,
    scratch_checkout,
    slurm_down,
    slurm_skip_reason,
    slurm_up,
)

from commsched.results import read_table

pytestmark = pytest.mark.slurm

# Columns and metrics measured in wall-clock time (partitioning and solver times, and the
# placement metrics that rank them): they differ from run to run.
TIMED_COLUMNS = {"partition_s", "lex_s"}
TIMED_METRIC = re.compile(r"time|slowest|fastest|faster|slower")
# The toys' tables (two graphs, one simulation: three short jobs) for the kill tests.
TOYS_TABLES = "results/metrics/toys.csv"
# Fast status checks for the test (the profile keeps the plugin's 40 s for real clusters).
SLURM_ARGS = ["--profile", "profiles/slurm", "--slurm-init-seconds-before-status-checks", "2",
              "--slurm-keep-successful-logs"]


def _outputs(checkout: Path) -> dict[str, Path]:
    """Result files of a run (tables, metrics, plans, graphs, figures) by relative path; the
    committed reference run (``results/reference``) is no output of a run."""
    out = {}
    for p in sorted((checkout / "results").rglob("*")):
        rel = p.relative_to(checkout)
        if (p.is_file() and p.name != "README.md"
                and not {"notebooks", "benchmarks", "reference"} & set(rel.parts)):
            out[str(rel)] = p
    return out


def assert_same_outputs(a: Path, b: Path) -> int:
    """Same result files in checkouts ``a`` and ``b``, equal up to timings and provenance;
    returns how many were compared by content."""
    fa, fb = _outputs(a), _outputs(b)
    assert sorted(fa) == sorted(fb)
    compared = 0
    for name, pa in fa.items():
        pb = fb[name]
        if name.endswith(".csv"):
            ta, tb = read_table(pa), read_table(pb)
            if list(ta.columns) == ["metric", "value"]:
                keep = ~ta["metric"].astype(str).str.contains(TIMED_METRIC)
                ta, tb = ta[keep], tb[~tb["metric"].astype(str).str.contains(TIMED_METRIC)]
            drop = [c for c in ta.columns if c in TIMED_COLUMNS]
            pd.testing.assert_frame_equal(ta.drop(columns=drop).reset_index(drop=True),
                                          tb.drop(columns=drop).reset_index(drop=True),
                                          obj=name)
            compared += 1
        elif name.endswith(".json"):
            assert json.loads(pa.read_text()) == json.loads(pb.read_text()), name
            compared += 1
        else:  # figures: PDF/PNG carry creation times; both written and non-empty
            assert pa.stat().st_size > 0 and pb.stat().st_size > 0, name
    return compared


def _rules_submitted(stdout: str) -> set[str]:
    return set(re.findall(r"slurm_logs/rule_([a-z0-9_]+)/", stdout))


def test_cluster_schedules_cpu_and_gpu_jobs(slurm_cluster, tmp_path):
    """A batch job with a step in each partition; --gpus=1 lands on the gpu partition."""
    out = tmp_path / "job-%j.out"
    for part, extra in (("cpu", []), ("gpu", ["--gpus=1"])):
        r = run_ok(["sbatch", "--wait", "--parsable", "-p", part, *extra, "-o", str(out),
                  "--wrap", "echo partition=$SLURM_JOB_PARTITION; srun -n1 hostname"],
                 tmp_path, slurm_cluster, timeout=120)
        text = Path(str(out).replace("%j", r.stdout.strip().split(";")[0])).read_text()
        assert f"partition={part}" in text and os.uname().nodename.split(".")[0] in text


def test_cluster_up_status_down_leaves_nothing(tmp_path):
    """`down` stops every daemon `up` started (by pid) and removes the run directory."""
    reason = slurm_skip_reason()
    if reason:
        pytest.skip(reason)
    run = tmp_path / "c"
    env = slurm_up(run)
    status = subprocess.run(["bash", str(SLURM_SCRIPT), "status"], env=env,
                            capture_output=True, text=True, timeout=60)
    assert status.returncode == 0 and "node" in status.stdout and "idle" in status.stdout
    pids = [int((run / f"{d}.pid").read_text()) for d in ("munged", "slurmctld", "slurmd")]
    assert all(Path(f"/proc/{p}").exists() for p in pids)
    assert slurm_down(env).returncode == 0
    assert not any(Path(f"/proc/{p}").exists() for p in pids)
    assert not run.exists()


@pytest.mark.slow
def test_pipeline_on_slurm_same_outputs_as_local(slurm_cluster, local_pipeline_run, tmp_path):
    checkout = scratch_checkout(tmp_path / "repo")
    env = pipeline_env(checkout, slurm_cluster)
    r = run_ok(["snakemake", *SLURM_ARGS, *PIPELINE_TARGETS, "--configfile", SMALL_CONFIG],
               checkout, env)
    # every job ran as a SLURM job (the target rules themselves are local)
    submitted = _rules_submitted(r.stdout + r.stderr)
    assert {"trace_model_table", "toys_graph", "toys_simulate", "toys_figure", "pace_table2",
            "pace_solvers", "pace_plan", "placement_run", "placement_seven",
            "placement_metrics"} <= submitted
    assert assert_same_outputs(local_pipeline_run, checkout) >= 10
    assert subprocess.run(["git", "status", "--porcelain"], cwd=checkout, capture_output=True,
                          text=True, check=True).stdout == ""


def _slurm_jobs_of(checkout: Path, env) -> list[str]:
    out = subprocess.run(["squeue", "-h", "-o", "%A %Z"], env=env, capture_output=True,
                         text=True, check=True, timeout=30).stdout
    return [line.split()[0] for line in out.splitlines() if line.split()[1:] == [str(checkout)]]


def _processes_in(checkout: Path) -> list[int]:
    pids = []
    for p in Path("/proc").iterdir():
        try:
            if p.name.isdigit() and os.readlink(p / "cwd").startswith(str(checkout)):
                pids.append(int(p.name))
        except OSError:
            continue
    return pids


@pytest.mark.slow
def test_slurm_run_killed_and_rerun(slurm_cluster, local_pipeline_run, tmp_path):
    """SIGKILL the SLURM-profile pipeline while its SLURM jobs are queued; scripts/reproduce.sh
    cancels the dead run's jobs, unlocks, reruns: same outputs, nothing left behind. A job
    holding the whole node keeps the dead run's jobs queued until the rerun has cancelled
    them, so the test does not depend on how fast they would run."""
    checkout = scratch_checkout(tmp_path / "repo")
    env = pipeline_env(checkout, slurm_cluster)
    blocker = run_ok(["sbatch", "--parsable", "--exclusive", "-o", "/dev/null", "--wrap",
                      "sleep 600"], tmp_path, env, timeout=60).stdout.strip().split(";")[0]
    try:
        cmd = ["bash", "scripts/reproduce.sh", *SLURM_ARGS, TOYS_TABLES, "--configfile",
               SMALL_CONFIG]
        kill_when(cmd, checkout, env, lambda: bool(_slurm_jobs_of(checkout, env)),
                  "SLURM job of the run")
        stale = _slurm_jobs_of(checkout, env)
        assert stale and any((checkout / ".snakemake" / "locks").iterdir())
        err = tmp_path / "rerun.err"
        with open(err, "w") as fh:
            rerun = subprocess.Popen(cmd, cwd=checkout, env=env, stdout=subprocess.DEVNULL,
                                     stderr=fh)
        deadline = time.monotonic() + 300
        while set(stale) & set(_slurm_jobs_of(checkout, env)):
            assert rerun.poll() is None and time.monotonic() < deadline, err.read_text()
            time.sleep(0.5)
    finally:
        subprocess.run(["scancel", blocker], env=env, timeout=30)
    assert rerun.wait(timeout=1500) == 0, err.read_text()[-3000:]
    log = err.read_text()
    assert f"cancelling SLURM jobs of a dead run: {' '.join(stale)}" in log
    assert "removing the stale lock" in log
    assert not _slurm_jobs_of(checkout, env)
    assert not _processes_in(checkout)
    ref = {k: v for k, v in _outputs(local_pipeline_run).items()
           if "toys" in k and "figures" not in k}
    got = _outputs(checkout)
    assert sorted(ref) == sorted(got)
    for name in ref:
        if name.endswith(".csv"):
            pd.testing.assert_frame_equal(read_table(ref[name]), read_table(got[name]), obj=name)
