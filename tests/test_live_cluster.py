"""Live area on a real emulated cluster (root and network namespaces needed, else skipped):
set-up (namespaces, shaped links, servers), one tiny job with each hook, the PS's gRPC
order in captured steps (packet capture in its namespace), teardown on exit, on SIGINT and
after SIGKILL (status --clean), the CLI, and no leftovers afterwards.

Bounded: every cluster start waits at most 120 s, every job 240 s; the module takes about
1.5-2 minutes on two cores.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import sigint_default

from commsched.cluster import net
from commsched.cluster.capture import capturing
from commsched.cluster.emulated import ClusterConfig, EmulatedCluster, emulated_cluster, status
from commsched.cluster.procs import alive
from commsched.cluster.state import list_runs, run_base
from commsched.model.graph import add_op, new_graph
from commsched.tictac.live.grpcorder import (
    SEND_LOG_MATCH,
    SEND_LOG_VMODULE,
    processing_order,
    processing_out_of_order,
    window_name,
)
from commsched.tictac.live.runner import load_captures, run_clients
from commsched.tictac.live.workload import Workload

REASON = net.check_support()
pytestmark = [
    pytest.mark.live,
    pytest.mark.slow,
    pytest.mark.skipif(REASON is not None, reason=f"live cluster unavailable: {REASON}"),
]

ROOT = Path(__file__).resolve().parent.parent


def _leftovers(run_id: str) -> dict[str, object]:
    """Everything of run ``run_id`` that still exists: namespaces, state, processes."""
    cmdlines = []
    for d in Path("/proc").glob("[0-9]*"):
        try:
            cmdlines.append((d / "cmdline").read_bytes().replace(b"\0", b" ").decode())
        except OSError:
            continue
    return {
        "namespaces": net.list_namespaces(f"{net.NS_PREFIX}{run_id}-"),
        "state": (run_base() / run_id).exists(),
        "processes": [c for c in cmdlines if f"/{run_id}/ready/" in c],
    }


def _assert_gone(run_id: str) -> None:
    assert _leftovers(run_id) == {"namespaces": [], "state": False, "processes": []}


@pytest.fixture(scope="module")
def cluster() -> Iterator[EmulatedCluster]:
    cfg = ClusterConfig(n_ps=1, n_workers=2, bandwidth="1gbit", start_timeout=120.0,
                        ps_vmodule=SEND_LOG_VMODULE)
    with emulated_cluster(cfg, timeout=480.0) as c:
        yield c
    _assert_gone(c.run_id)


def test_setup_namespaces_links_and_shaping(cluster):
    rid = cluster.run_id
    assert net.list_namespaces(f"cs-{rid}-") == sorted(
        [f"cs-{rid}-br", f"cs-{rid}-ps0", f"cs-{rid}-w0", f"cs-{rid}-w1"])
    for lk in cluster.links:  # both ends of every host link carry the tbf
        for ns, dev in ((lk.namespace, lk.host_dev), (cluster.bridge_ns, lk.bridge_dev)):
            out = net.run(["tc", "-n", ns, "qdisc", "show", "dev", dev])
            assert "tbf" in out and "rate 1Gbit" in out, out
        assert lk.address.startswith("10.77.")
    root_links = net.run(["ip", "-o", "link", "show"])
    assert "v-ps0" not in root_links and "br0" not in root_links  # root namespace untouched
    servers = [p for p in cluster.state.processes if not p.role.startswith("client")]
    assert [p.role for p in servers] == ["ps0", "w0", "w1"] and all(map(alive, servers))


def test_link_rate_is_shaped(cluster):
    """20 MB from the PS namespace to a worker's: about the tbf rate, never above it."""
    ps, w0 = cluster.links[0], cluster.links[1]
    nbytes, rate = net.tcp_rate(ps.namespace, w0.namespace, w0.address, 20_000_000,
                                port=5999)
    assert nbytes == 20_000_000
    assert 0.4 * 125e6 < rate < 1.1 * 125e6, f"{rate / 1e6:.1f} MB/s"


def test_tiny_job_with_each_hook(cluster, tmp_path):
    layers = ["conv1", "conv2", "fc1", "out"]
    prios = {f"{name}/{v}": float(i) for i, name in enumerate(layers) for v in ("kernel", "bias")}
    configs = [{"name": "none", "order": "none", "enforce": "none", "priorities": {}},
               {"name": "dag", "order": "x", "enforce": "dag", "priorities": prios},
               {"name": "sender", "order": "x", "enforce": "sender", "priorities": prios}]
    plan = {"cluster": cluster.spec, "targets": cluster.targets, "threads": 1,
            "timeout_s": 60, "groups": [{
                "id": "tiny", "model": "thesis_cnn", "mode": "infer", "batch": 16,
                "seed": 0, "warmup": 1, "iterations": 2, "trace_iterations": 1,
                "configs": configs}]}
    results = run_clients(cluster, plan, tmp_path, time.monotonic() + 240, print)
    by = {(r["config"], r["task"]): r for r in results}
    assert set(by) == {(c["name"], t) for c in configs for t in (0, 1)}
    for (name, _), r in by.items():
        assert len(r["steps"]) == 2 and len(r["traces"]) == 1
        assert all(s["work"] > 0 and s["barrier"] >= 0 for s in r["steps"])
        recvs = r["traces"][0]["recvs"]
        assert sorted(x["var"] for x in recvs) == sorted(prios)  # every parameter traveled
        assert (r["enforce_edges"] > 0) == (name != "none")
    for task in (0, 1):
        # dag: group k+1 is requested only after all of group k arrived
        recvs = by[("dag", task)]["traces"][0]["recvs"]
        for k in range(len(layers) - 1):
            end_k = max(x["end"] for x in recvs if prios[x["var"]] == k)
            start_next = min(x["start"] for x in recvs if prios[x["var"]] == k + 1)
            assert start_next >= end_k - 5e-4, (k, end_k, start_next)
        # sender: the PS reads run group by group, in reverse priority order (LIFO dispatch)
        reads = by[("sender", task)]["traces"][0]["ps_reads"]
        for k in range(len(layers) - 1):
            later = min(x["start"] for x in reads if prios[x["var"]] == k)
            earlier = max(x["start"] for x in reads if prios[x["var"]] == k + 1)
            assert earlier <= later, (k, earlier, later)


def test_captured_steps_give_the_ps_processing_order(cluster, tmp_path):
    """The sender hook's captured steps: every parameter transfer of every step and worker
    is found at the PS, with its send, its request and its response's wire position."""
    layers = ["conv1", "conv2", "fc1", "out"]
    prios = {f"{name}/{v}": float(i) for i, name in enumerate(layers) for v in ("kernel", "bias")}
    config = {"name": "sender", "order": "x", "enforce": "sender", "priorities": prios,
              "capture_iterations": 2, "capture_window": window_name("thesis-cnn.infer", "sender")}
    with capturing(cluster, ["ps0"], tmp_path / "bw" / "capture", 2, 60.0, 120.0,
                   SEND_LOG_MATCH) as files:
        plan = {"cluster": cluster.spec, "targets": cluster.targets, "threads": 1,
                "timeout_s": 60, "capture": files, "groups": [{
                    "id": "thesis-cnn.infer", "model": "thesis_cnn", "mode": "infer",
                    "batch": 16, "seed": 0, "warmup": 1, "iterations": 1,
                    "trace_iterations": 0, "configs": [config]}]}
        results = run_clients(cluster, plan, tmp_path / "bw", time.monotonic() + 240, print)
    (cap,) = load_captures(tmp_path)
    assert cap["complete"] and cap["kernel_drops"] == 0 and not cap["truncated"]
    assert all(c["to_client"]["holes"] == 0 for c in cap["connections"])
    assert all(rec["capture_on"] for r in results for rec in r["captured"])
    g = new_graph({"net:ps0": 1, "cpu": 1})
    add_op(g, "c", "compute", "cpu", 1.0)
    w = Workload("thesis_cnn", "infer", 16, 28, "1gbit", g, {}, {}, [config], {}, 1.0)
    order = processing_order(results, [cap], [w])
    assert len(order) == 2 * 2 * len(prios)  # steps x workers x parameters
    assert order.handoff_s.notna().all() and order.wire_pos.notna().all()
    assert (order.wire_s >= order.request_s).all() and (order.done_s >= order.wire_s).all()
    for _, d in order.groupby(["trace_step", "worker"]):
        assert sorted(d.wire_rank) == list(range(len(prios)))
    (r,) = processing_out_of_order(order).itertuples()
    assert r.transfers == len(order) and 0 <= r.out_of_order < r.transfers


_SCRIPT = """
import sys, time
from commsched.cluster import ClusterConfig, emulated_cluster
with emulated_cluster(ClusterConfig(n_workers=1, start_timeout=120.0), run_id=sys.argv[1],
                      timeout=300) as c:
    print("UP", flush=True)
    time.sleep(300)
"""


def _start_holder(tmp_path: Path, run_id: str) -> subprocess.Popen[str]:
    script = tmp_path / "hold.py"
    script.write_text(_SCRIPT)
    p = subprocess.Popen([sys.executable, str(script), run_id], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, preexec_fn=sigint_default)
    assert p.stdout is not None
    deadline = time.monotonic() + 150
    for line in p.stdout:  # ends when the holder exits
        if line.startswith("UP"):
            return p
        assert time.monotonic() < deadline, "cluster did not come up"
    pytest.fail(f"holder exited (code {p.wait()}) before the cluster was up")


def test_sigint_tears_down(tmp_path):
    p = _start_holder(tmp_path, "tsigint")
    assert len(_leftovers("tsigint")["namespaces"]) == 3
    p.send_signal(signal.SIGINT)
    assert p.wait(timeout=60) != 0
    _assert_gone("tsigint")


def test_sigkill_leftovers_are_found_and_removed(tmp_path):
    p = _start_holder(tmp_path, "tsigkill")
    p.kill()
    p.wait(timeout=10)
    stale = next(r for r in list_runs() if r.run_id == "tsigkill")
    assert stale.stale and len(_leftovers("tsigkill")["namespaces"]) == 3
    deadline = time.monotonic() + 30  # servers exit with their owner (PDEATHSIG, owner check)
    while any(alive(r) for r in stale.processes) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not any(alive(r) for r in stale.processes)
    report = status(clean=True)
    assert "tsigkill" in report["removed"]
    _assert_gone("tsigkill")


def test_cli_up_status_down():
    cli = [sys.executable, "-m", "commsched"]
    up = subprocess.run([*cli, "cluster", "up", "--workers", "1", "--run-id", "tcli",
                         "--ttl", "300", "--timeout", "120"], capture_output=True, text=True,
                        timeout=180, cwd=ROOT)
    try:
        assert up.returncode == 0, up.stderr
        info = json.loads(up.stdout[: up.stdout.rindex("}") + 1])
        assert info["run_id"] == "tcli" and len(info["spec"]["worker"]) == 1
        st = subprocess.run([*cli, "cluster", "status", "--json"], capture_output=True,
                            text=True, timeout=60, cwd=ROOT)
        run = next(r for r in json.loads(st.stdout)["runs"] if r["run_id"] == "tcli")
        assert run["status"] == "up" and not run["stale"]
        assert sorted(run["processes_alive"]) == ["ps0", "w0"]
    finally:
        down = subprocess.run([*cli, "cluster", "down", "tcli"], capture_output=True,
                              text=True, timeout=60, cwd=ROOT)
    assert down.returncode == 0, down.stderr
    _assert_gone("tcli")
    bad = subprocess.run([*cli, "cluster", "down", "no-such-run"], capture_output=True,
                         text=True, timeout=60, cwd=ROOT)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1
