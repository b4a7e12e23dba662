"""scripts/job-shell, the shell of every pipeline job (workflow/rules/common.smk): exit
statuses as bash gives them, and every process of a job (one in a session of its own, as a
Jupyter kernel is, included) ends when the process that started the job dies, by SIGKILL
too, or when it is told to stop; its SIGTERM teardown runs first."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ROOT, processes_in

JOB_SHELL = str(ROOT / "scripts" / "job-shell")
ENV = dict(os.environ, COMMSCHED_JOB_PYTHON=sys.executable)
# a job with a process in a session of its own (as papermill's kernel) and one in its group;
# each would write a file 30 s from now
LATE = ("setsid sh -c 'sleep 30; touch late-kernel' & "
        "sh -c 'sleep 30; touch late-job' & wait")
# A stand-in for Snakemake: runs CMD with job-shell as its shell, as Snakemake does, and
# waits for it.
PARENT = ("import os, subprocess, sys\n"
          "env = dict(os.environ, COMMSCHED_JOB_PARENT=str(os.getpid()))\n"
          "sys.exit(subprocess.run(sys.argv[1], shell=True, executable=sys.argv[2],"
          " env=env).returncode)\n")


def _wait_until_gone(directory: Path, timeout: float) -> dict[int, str]:
    deadline = time.monotonic() + timeout
    while (left := processes_in(directory)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


def _wait_for(pred, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def _late_job_started(directory: Path) -> bool:
    """Both ``sleep 30`` of the job run."""
    return sum(c.strip() == "sleep 30" for c in processes_in(directory).values()) == 2


@pytest.mark.parametrize(("cmd", "code"), [("echo out; exit 3", 3), ("true", 0),
                                           ("kill -TERM $$", -signal.SIGTERM)])
def test_exit_status_and_output_as_bash(tmp_path, cmd, code):
    r = subprocess.run([JOB_SHELL, "-c", cmd], cwd=tmp_path, env=ENV, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == code
    assert r.stdout == ("out\n" if "echo" in cmd else "")


def test_script_form_is_bash(tmp_path):
    (tmp_path / "s.sh").write_text('echo "script $1"\n')
    r = subprocess.run([JOB_SHELL, "s.sh", "x"], cwd=tmp_path, env=ENV, capture_output=True,
                       text=True, timeout=60)
    assert (r.returncode, r.stdout) == (0, "script x\n")


@pytest.mark.parametrize("whole_group", [False, True])
def test_job_ends_when_its_parent_is_killed(tmp_path, whole_group):
    """SIGKILL the stand-in for Snakemake (alone: job-shell's relay gets PDEATHSIG; or with
    its process group, the relay included: the keeper gets PDEATHSIG)."""
    parent = subprocess.Popen([sys.executable, "-c", PARENT, LATE, JOB_SHELL], cwd=tmp_path,
                              env=ENV, start_new_session=True)
    try:
        _wait_for(lambda: _late_job_started(tmp_path))
    finally:
        if whole_group:
            os.killpg(parent.pid, signal.SIGKILL)
        else:
            parent.kill()
        parent.wait(timeout=30)
    left = _wait_until_gone(tmp_path, 15)
    assert not left, f"left running: {left}"
    assert not list(tmp_path.glob("late-*"))


def test_stop_signal_runs_the_jobs_teardown_then_kills(tmp_path):
    """SIGINT (a Ctrl-C) to job-shell: every process gets SIGTERM once; one that tears down
    in 1 s finishes; one that ignores SIGTERM is killed after COMMSCHED_JOB_GRACE s; job-shell
    dies of the SIGINT it got."""
    cmd = ("sh -c 'trap \"sleep 1; touch torn-down; exit 1\" TERM; sleep 30 & wait' & "
           "setsid sh -c 'trap \"\" TERM; sleep 30; touch late' & wait")
    env = dict(ENV, COMMSCHED_JOB_GRACE="3")
    proc = subprocess.Popen([JOB_SHELL, "-c", cmd], cwd=tmp_path, env=env)
    _wait_for(lambda: _late_job_started(tmp_path))
    time.sleep(0.5)  # the traps are set before the sleeps start
    t = time.monotonic()
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=30) == -signal.SIGINT
    took = time.monotonic() - t
    assert not processes_in(tmp_path)
    assert (tmp_path / "torn-down").exists() and not (tmp_path / "late").exists()
    assert took >= 3  # the one ignoring SIGTERM had its grace


def test_processes_left_by_a_finished_job_are_ended(tmp_path):
    r = subprocess.run([JOB_SHELL, "-c", "setsid sleep 30 & echo done"], cwd=tmp_path,
                       env=ENV, capture_output=True, text=True, timeout=60)
    assert (r.returncode, r.stdout) == (0, "done\n")
    assert "job-shell: ended 1 process(es) the job left running" in r.stderr
    assert not processes_in(tmp_path)


def test_bad_grace_is_one_line(tmp_path):
    r = subprocess.run([JOB_SHELL, "-c", "true"], cwd=tmp_path, capture_output=True, text=True,
                       env=dict(ENV, COMMSCHED_JOB_GRACE="soon"), timeout=60)
    assert r.returncode == 2
    assert r.stderr == "job-shell: COMMSCHED_JOB_GRACE must be seconds >= 0, not 'soon'\n"
