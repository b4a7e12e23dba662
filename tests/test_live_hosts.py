"""The PyTorch live jobs on a host list, launched as on real hosts (commsched.cluster.torchrun).

The torchrun command of one host (c10d rendezvous at the first host), the PACE live config's
``hosts`` and ``launcher`` keys, the commands ``--prepare`` prints; and, as root, one
small PACE live job whose hosts are the emulated cluster's namespaces, given as a host
list exactly as a user with real hosts gives theirs: the printed command of host ``i`` is
run in namespace ``i``, both ranks write their results, ``--reuse`` analyses them, and
the cluster's teardown leaves no namespace and no process (bounded: about 40-60 s on 2
loaded cores).
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import time
from pathlib import Path
from typing import Any

import networkx as nx
import pytest
from conftest import procs_with

from commsched.cluster import net
from commsched.cluster.emulated import ClusterConfig, emulated_cluster
from commsched.cluster.torchrun import hosts_argv, torchrun_argv
from commsched.errors import CommschedError
from commsched.io.structured import read_yaml
from commsched.model.graph import save
from commsched.pace.experiments.live import main
from commsched.pace.experiments.live_plans import Params
from commsched.results import read_table
from commsched.trace.torch import trace_model

ROOT = Path(__file__).resolve().parent.parent
TRACE = "tiny_cnn-torch-cpu-train-b4"


@pytest.fixture(scope="module")
def trace_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("traces")
    g: nx.DiGraph = trace_model("tiny_cnn", 4, "train", iterations=1, warmup=0)
    save(g, d / f"{TRACE}.json.gz")
    return d


def config(trace_dir: Path, **kw: Any) -> dict[str, Any]:
    """A small pace_live section: tiny_cnn, DDP and WFBP, two timed steps each."""
    base = read_yaml(ROOT / "config/config.yaml")["pace_live"]
    return {**base, "enabled": True, "models": [{"trace": TRACE, "bandwidth": "100mbit"}],
            "policies": ["ddp", "wfbp"], "warmup": 1, "iterations": 2, "rounds": 1,
            "trace_dir": str(trace_dir), "timeout_s": 120, **kw}


def test_one_hosts_torchrun_command() -> None:
    first, other = hosts_argv(["10.0.0.2", "10.0.0.3"], "m", ["c.json"], port=29511,
                              run_id="job", join_timeout=30.5, log_dir="logs")
    assert first[first.index("--rdzv-backend") + 1] == "c10d"
    for argv, addr, is_host in ((first, "10.0.0.2", 1), (other, "10.0.0.3", 0)):
        module = len(argv) - 1 - argv[::-1].index("-m")  # the worker's -m, not python's
        opt = {argv[i]: argv[i + 1] for i in range(3, module, 2)}
        assert opt == {"--nnodes": "2", "--nproc-per-node": "1", "--rdzv-backend": "c10d",
                       "--rdzv-endpoint": "10.0.0.2:29511", "--rdzv-id": "job",
                       "--rdzv-conf": f"is_host={is_host},join_timeout=31",
                       "--local-addr": addr, "--max-restarts": "0", "--log-dir": "logs"}
        assert argv[:3] == [sys.executable, "-m", "torch.distributed.run"]
        assert argv[module:] == ["-m", "m", "c.json"]
    for bad in (lambda: torchrun_argv(2, 2, "h:1", "h", "m"),
                lambda: torchrun_argv(2, 0, "h", "h", "m"),
                lambda: torchrun_argv(2, 0, "h:1", "h", "m", join_timeout=0),
                lambda: hosts_argv(["a", "a"], "m")):
        with pytest.raises(CommschedError):
            bad()


def test_hosts_and_launcher_config_keys(trace_dir: Path) -> None:
    p = Params.from_config(config(trace_dir, hosts=["node1", "node2"]))
    assert p.hosts == ("node1", "node2") and p.launcher == "torchrun"
    for change, match in [({"hosts": ["node1"]}, r"pace_live\.hosts"),
                          ({"hosts": ["node1:22", "node2"]}, r"pace_live\.hosts"),
                          ({"launcher": "mpirun"}, r"pace_live\.launcher"),
                          ({"hosts": ["a", "b", "c"]}, "names 3 hosts but n_workers is 2")]:
        with pytest.raises(CommschedError, match=match):
            Params.from_config(config(trace_dir, **change))


def test_prepare_prints_every_hosts_command_and_run_refuses_real_hosts(
        trace_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = json.dumps(config(trace_dir, hosts=["node1", "node2"]))
    assert main(["--config-json", cfg, "--workdir", str(tmp_path), "--prepare"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0] == f"# {TRACE}: line i on host i of 2" and len(lines) == 3
    worker = tmp_path / TRACE / "worker.json"
    assert json.loads(worker.read_text())["master"] == "env"
    for i, line in enumerate(lines[1:]):
        argv = shlex.split(line)
        assert argv[0] == "torchrun" and argv[-2:] == ["commsched.pace.live.ddp", str(worker)]
        assert "--rdzv-endpoint node1:29500" in line and f"is_host={int(i == 0)}" in line
        assert f"--local-addr node{i + 1}" in line
    tables = [f"--{n}={tmp_path / n}.csv" for n in ("steps", "allreduces", "link", "summary",
                                                     "metrics")]
    assert main(["--config-json", cfg, "--workdir", str(tmp_path), *tables]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "pace_live.hosts is set" in err[0]
    unset = json.dumps(config(trace_dir))
    assert main(["--config-json", unset, "--workdir", str(tmp_path), "--prepare"]) == 2
    assert "pace_live.hosts is null" in capsys.readouterr().err


REASON = net.check_support()


@pytest.mark.live
@pytest.mark.slow
@pytest.mark.skipif(REASON is not None, reason=f"emulated cluster unavailable: {REASON}")
def test_a_host_list_of_namespaces_runs_the_printed_commands(
        trace_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Two namespaces as two hosts: the user's steps, from the host list to the tables
    (``python -m commsched.pace.experiments.live`` is :func:`main` in this process)."""
    work = tmp_path / "hosts"
    with emulated_cluster(ClusterConfig(n_ps=0, n_workers=2, bandwidth="200mbit",
                                        burst="256kb", servers=False), timeout=240) as cl:
        run_id = cl.run_id
        hosts = [a.split(":")[0] for a in cl.spec["worker"]]
        cfg = json.dumps(config(trace_dir, hosts=hosts))
        assert main(["--config-json", cfg, "--workdir", str(work), "--prepare"]) == 0
        lines = [x for x in capsys.readouterr().out.splitlines() if not x.startswith("#")]
        assert len(lines) == 2
        # the environment a user's shell on each host has: the venv's torchrun on PATH,
        # gloo on the interface of the host's address
        env = {"PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
               "GLOO_SOCKET_IFNAME": "eth0", "OMP_NUM_THREADS": "1"}
        procs = [cl.spawn_client(i, shlex.split(line), tmp_path / f"host{i}.log", env)
                 for i, line in enumerate(lines)]
        deadline = time.monotonic() + 150
        while any(p.poll() is None for p in procs) and time.monotonic() < deadline:
            time.sleep(0.2)
        codes = [p.poll() for p in procs]
        logs = [(tmp_path / f"host{i}.log").read_text()[-600:] for i in range(2)]
        assert codes == [0, 0], logs
    assert net.list_namespaces(f"{net.NS_PREFIX}{run_id}-") == []
    assert procs_with(str(work)) == []
    results = [json.loads((work / TRACE / f"result{r}.json").read_text()) for r in range(2)]
    assert [r["rank"] for r in results] == [0, 1]
    for r in results:
        assert r["config"]["world"] == 2 and r["config"]["master"] == "env"
        assert [(p["policy"], len(p["step_s"])) for p in r["policies"]] == [
            ("none", 2), ("ddp", 2), ("wfbp", 2)]
    tables = [f"--{n}={tmp_path / n}.csv" for n in ("steps", "allreduces", "link", "summary",
                                                     "metrics")]
    assert main(["--config-json", cfg, "--workdir", str(work), "--reuse", *tables]) == 0
    steps = read_table(tmp_path / "steps.csv")
    assert sorted(steps["rank"].unique()) == [0, 1]
    assert set(read_table(tmp_path / "summary.csv")["policy"]) == {"ddp", "wfbp"}
