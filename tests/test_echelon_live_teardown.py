"""EchelonFlow live on the emulated cluster (root, namespaces, htb and u32 needed, else
skipped): the htb/u32 tree and its updates, a short live run end to end, and teardown of
every namespace, qdisc, process and state file on normal exit, SIGTERM, Ctrl-C, the time
limit, a killed controller and a job whose peer dies (each a one-line error within its
timeout). Bounded: every run has a time limit; the module takes about 2-3 minutes on 2
loaded cores."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import procs_with, sigint_default

from commsched.cluster import net
from commsched.cluster.state import run_base
from commsched.echelon.live.tc import HtbLink, classid
from commsched.echelon.live.topology import CORE_DEV, LiveCluster, Topology, live_cluster

REASON = net.check_htb()
pytestmark = [
    pytest.mark.live,
    pytest.mark.slow,
    pytest.mark.skipif(REASON is not None, reason=f"live cluster unavailable: {REASON}"),
]

ROOT = Path(__file__).resolve().parent.parent


def _assert_nothing_left(run_ids: list[str], workdir: Path) -> None:
    for rid in run_ids:
        assert net.list_namespaces(f"{net.NS_PREFIX}{rid}-") == []
        assert not (run_base() / rid).exists()
    assert procs_with(str(workdir)) == []


def _ecl_runs() -> set[str]:
    return {ns.split("-")[1] for ns in net.list_namespaces(f"{net.NS_PREFIX}ecl")}


def test_htb_tree_classes_filters_and_teardown() -> None:
    topo = Topology((0, 1), host_rate="200mbit", core_rate="40mbit")
    with live_cluster(topo, timeout=120) as cl:
        rid = cl.run_id
        link = HtbLink(cl.bridges[0], CORE_DEV, topo.core_Bps, range(1, 64))
        link.setup("classes")
        qd = net.run(["tc", "-n", cl.bridges[0], "class", "show", "dev", CORE_DEV])
        assert qd.count("class htb") == 2 + 63
        filters = net.run(["tc", "-n", cl.bridges[0], "filter", "show", "dev", CORE_DEV])
        assert "match 00140000/00fc0000" in filters  # DSCP 5 = TOS 0x14
        assert link.update({5: (1e6, 0), 6: (0.0, 7)}) == 2
        out = net.run(["tc", "-n", cl.bridges[0], "class", "show", "dev", CORE_DEV,
                       "classid", classid(5)])
        assert "prio 0" in out and "rate 8Mbit" in out
        assert link.update({5: (1e6, 0), 6: (0.0, 7)}) == 0  # nothing changed: no command
        assert set(link.counters()) == set(range(1, 64))
        link.setup("none")
        assert net.run(["tc", "-n", cl.bridges[0], "class", "show", "dev",
                        CORE_DEV]).count("class htb") == 2
        link.close()
    assert net.list_namespaces(f"{net.NS_PREFIX}{rid}-") == []


def _config(**kw: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "enabled": True, "policies": ["fair", "echelon-edf-bottleneck"], "repeats": 1,
        "host_rate": "200mbit", "core_rate": "40mbit", "launcher": "direct",
        "backend": "tagged", "profile_reps": 1, "timeout_s": 240, "phase_timeout_s": 60,
        "jobs": [{"name": "pp", "paradigm": "1f1b", "racks": [0, 1, 0], "width": 64,
                  "blocks": 3, "batch": 16, "micro_batches": 2, "iterations": 2},
                 {"name": "dp", "paradigm": "dp-allreduce", "racks": [1, 0], "width": 64,
                  "blocks": 2, "batch": 8, "iterations": 2}]}
    return {**base, **kw}


def _start(tmp: Path, cfg: dict[str, Any]) -> subprocess.Popen[str]:
    args = [f"--{n}={tmp / (n + '.csv')}" for n in
            ("jobs", "iterations", "flows", "updates", "summary", "metrics")]
    return subprocess.Popen(
        [sys.executable, "-m", "commsched.echelon.experiments.live", "--config-json",
         json.dumps(cfg), "--workdir", str(tmp / "run"), *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")}, start_new_session=True,
        preexec_fn=sigint_default)


def _wait_for(pred: Any, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.2)


def test_short_live_run_end_to_end(tmp_path: Path) -> None:
    """As the pipeline runs it: every process under torchrun (c10d, one agent per host)."""
    before = _ecl_runs()
    p = _start(tmp_path, _config(launcher="torchrun"))
    _, err = p.communicate(timeout=300)
    assert p.returncode == 0, err
    summary = (tmp_path / "summary.csv").read_text()
    assert "echelon-edf-bottleneck" in summary and "predicted_jct_s" in summary
    metrics = (tmp_path / "metrics.csv").read_text()
    assert "echelon_live.update_latency_median_ms" in metrics
    _assert_nothing_left(list(_ecl_runs() - before), tmp_path / "run")


@pytest.mark.parametrize("how", ["sigterm", "sigint", "controller", "peer"])
def test_teardown_when_interrupted_or_a_process_dies(tmp_path: Path, how: str) -> None:
    before = _ecl_runs()
    cfg = _config(jobs=[{**_config()["jobs"][0], "iterations": 400}], phase_timeout_s=20)
    p = _start(tmp_path, cfg)
    work = tmp_path / "run"
    _wait_for(lambda: procs_with(f"{work}/repeat0/pp-r1.json"), 120)
    new = list(_ecl_runs() - before)
    time.sleep(3.0)  # inside a phase
    if how == "sigterm":
        os.kill(p.pid, signal.SIGTERM)
        want = "interrupted by SIGTERM"
    elif how == "sigint":
        os.kill(p.pid, signal.SIGINT)
        want = "interrupted"
    elif how == "controller":
        for pid in procs_with(f"{work}/repeat0/controller-config.json"):
            os.kill(pid, signal.SIGKILL)
        want = "the controller failed"
    else:
        for pid in procs_with(f"{work}/repeat0/pp-r1.json"):
            os.kill(pid, signal.SIGKILL)
        want = "pp-r"
    t0 = time.monotonic()
    _, err = p.communicate(timeout=120)
    assert p.returncode != 0
    lines = [x for x in err.strip().splitlines() if x.startswith("echelon_live")]
    assert lines and want in lines[-1], err[-2000:]
    assert time.monotonic() - t0 < 60  # within the phase timeout and teardown
    _assert_nothing_left(new, work)


def test_time_limit_ends_the_run(tmp_path: Path) -> None:
    before = _ecl_runs()
    # far more iterations than 25 s allow on any machine: the time limit must end the run
    cfg = _config(jobs=[{**_config()["jobs"][0], "iterations": 100_000}], timeout_s=25)
    p = _start(tmp_path, cfg)
    _, err = p.communicate(timeout=120)
    assert p.returncode == 2 and "time limit of 25 s" in err.strip().splitlines()[-1], err
    _assert_nothing_left(list(_ecl_runs() - before), tmp_path / "run")


def test_cluster_object_without_up_tears_down_nothing() -> None:
    c = LiveCluster(Topology((0, 1)))
    c.down()  # no state file: nothing to do, no error
