"""Shared fixtures: a single-node SLURM cluster (scripts/slurm-cluster.sh) and scratch
checkouts of this tree in which the pipeline runs without touching the tree itself."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SLURM_SCRIPT = ROOT / "scripts" / "slurm-cluster.sh"
# Small-scale configuration of the pipeline tests (merged over config/config.yaml).
SMALL_CONFIG = "tests/data/pipeline-small.yaml"
# A representative small target set: the trace area's model table (no TensorFlow), the
# TicTac toys (with a notebook figure), PACE's model and plans, the thesis' placement runs
# (rules with a Snakemake benchmark record) and their metrics.
PIPELINE_TARGETS = ["trace_all", "toys", "pace_model", "results/metrics/placement.csv"]


def _free_port_pair() -> int:
    """A port p with p and p + 1 free on this host now (slurmctld, slurmd)."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port >= 65535:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port + 1))
            except OSError:
                continue
        return port
    raise RuntimeError("no two consecutive free ports")


def slurm_skip_reason() -> str | None:
    """Why the SLURM tests cannot run here, or None."""
    if os.geteuid() != 0:
        return "the SLURM test cluster needs root (slurmd launches jobs; apt-get installs it)"
    have = all(shutil.which(c) for c in ("munged", "slurmctld", "slurmd", "sbatch"))
    if not have and not shutil.which("apt-get"):
        return "munge/slurm are not installed and apt-get is not available to install them"
    return None


def slurm_up(run_dir: Path) -> dict[str, str]:
    """Bring up a cluster in ``run_dir``; return the environment its clients need."""
    env = dict(os.environ, COMMSCHED_SLURM_DIR=str(run_dir),
               COMMSCHED_SLURM_PORT=str(_free_port_pair()))
    r = subprocess.run(["bash", str(SLURM_SCRIPT), "up"], env=env, capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, f"slurm-cluster.sh up failed:\n{r.stdout}\n{r.stderr}"
    env["SLURM_CONF"] = str(run_dir / "slurm.conf")
    env["PATH"] = f"{run_dir / 'bin'}:{Path(sys.executable).parent}:{env['PATH']}"
    return env


def slurm_down(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Tear down the cluster of ``env`` (cancel its jobs, stop its daemons by pid)."""
    return subprocess.run(["bash", str(SLURM_SCRIPT), "down"], env=env, capture_output=True,
                          text=True, timeout=300)


@pytest.fixture(scope="session")
def slurm_cluster(tmp_path_factory):
    """Environment (SLURM_CONF, PATH) of a single-node SLURM cluster for the session."""
    reason = slurm_skip_reason()
    if reason:
        pytest.skip(reason)
    env = slurm_up(tmp_path_factory.mktemp("slurm") / "cluster")
    yield env
    r = slurm_down(env)
    assert r.returncode == 0, r.stderr


def scratch_checkout(dest: Path) -> Path:
    """This tree's files (tracked and untracked, not ignored) copied to ``dest`` and
    committed in a fresh git repository there; the pipeline runs in it as in a clone."""
    files = subprocess.run(["git", "ls-files", "-z", "-co", "--exclude-standard"], cwd=ROOT,
                           capture_output=True, check=True).stdout.split(b"\0")
    dest.mkdir(parents=True)
    for name in (f.decode() for f in files if f):
        src = ROOT / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    git = ["git", "-c", "user.name=test", "-c", "user.email=test@localhost"]
    subprocess.run([*git, "init", "-q"], cwd=dest, check=True)
    subprocess.run([*git, "add", "-A"], cwd=dest, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "scratch"], cwd=dest, check=True)
    return dest


def pipeline_env(checkout: Path, base: dict[str, str] | None = None) -> dict[str, str]:
    """Environment for running the pipeline in ``checkout`` with its own sources."""
    env = dict(base or os.environ)
    env["PYTHONPATH"] = str(checkout / "src")
    env["PATH"] = f"{Path(sys.executable).parent}:{env['PATH']}"
    return env


def run_ok(cmd: list[str], cwd: Path, env: dict[str, str], timeout: float = 1500):
    """Run ``cmd``; fail the test with the end of its output if it fails."""
    r = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, f"{' '.join(cmd)} failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return r


@pytest.fixture(scope="session")
def local_pipeline_run(tmp_path_factory):
    """PIPELINE_TARGETS run by scripts/reproduce.sh (default profile) in a scratch checkout."""
    checkout = scratch_checkout(tmp_path_factory.mktemp("local") / "repo")
    run_ok(["bash", "scripts/reproduce.sh", "--cores", "2", *PIPELINE_TARGETS,
            "--configfile", SMALL_CONFIG], checkout, pipeline_env(checkout))
    return checkout


def _command_lines() -> Iterator[tuple[Path, int, str]]:
    """``(/proc/PID, PID, command line)`` of every living process but this one."""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        yield proc, int(proc.name), cmdline


def processes_in(directory: Path) -> dict[int, str]:
    """Living processes (not this one) whose working directory is in ``directory`` or with
    an argument that is a path in it: PID -> command line."""
    found = {}
    inside = re.compile(rf"(^|[\s'\"=]){re.escape(str(directory))}(/|[\s'\"]|$)")
    for proc, pid, cmdline in _command_lines():
        try:
            cwd = os.readlink(proc / "cwd")
        except OSError:
            continue
        if Path(cwd).is_relative_to(directory) or inside.search(cmdline):
            found[pid] = cmdline
    return found


def _snakemake_below(pid: int) -> int:
    """PID of the snakemake process that ``pid`` started (a script running it as a child)."""
    for proc in Path("/proc").iterdir():
        try:
            stat = (proc / "stat").read_text()
            cmdline = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        if ppid == pid and any(a.endswith(b"snakemake") for a in cmdline[:2]):
            return int(proc.name)
    raise AssertionError(f"no snakemake started by pid {pid}")


def kill_when(cmd: list[str], cwd: Path, env: dict[str, str], ready: Callable[[], bool],
              what: str, timeout: float = 300, only_snakemake: bool = False) -> float:
    """Start ``cmd`` in its own session, wait (at most ``timeout`` s) until ``ready()``,
    then SIGKILL its whole process group, as a crash or a lost terminal would; with
    ``only_snakemake``, SIGKILL only the snakemake process ``cmd`` started (as the kernel's
    OOM killer might), not its jobs. Returns the time (``time.time()``) of the kill."""
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    killed_at = None
    try:
        deadline = time.monotonic() + timeout
        while not ready():
            assert proc.poll() is None, f"the run ended before {what}"
            assert time.monotonic() < deadline, f"no {what} within {timeout:g} s"
            time.sleep(0.2)
        if only_snakemake:
            victim = _snakemake_below(proc.pid)
            killed_at = time.time()
            os.kill(victim, signal.SIGKILL)
    finally:
        if killed_at is None:  # the whole group, or a test that failed before the kill
            killed_at = time.time()
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    return killed_at


def procs_with(text: str) -> list[int]:
    """PIDs of the processes (other than this one) whose command line contains ``text``."""
    return [pid for _, pid, cmdline in _command_lines() if text in cmdline]


def sigint_default() -> None:
    """``preexec_fn`` for a process a test will interrupt with SIGINT: a suite started in
    the background (``make test &``) inherits SIGINT ignored, and Python then installs no
    KeyboardInterrupt handler in its children."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
