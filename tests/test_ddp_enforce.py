"""All-reduce plans enforced in PyTorch data-parallel training (commsched.pace.live.ddp).

The gradient-equality test runs every policy in two real worker processes (gloo on
loopback) and compares each policy's averaged gradients and updated parameters with those
of PyTorch DDP itself. Every run is bounded in time and ends its processes.
"""

from __future__ import annotations

import itertools
import os
import socket
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import torch.distributed as dist
from conftest import sigint_default

from commsched.errors import CommschedError
from commsched.io.structured import read_yaml
from commsched.pace.dynamic import DDP_BUCKET_BYTES, DDP_FIRST_BUCKET_BYTES, ddp_buckets
from commsched.pace.experiments.live_plans import Params, make_plans
from commsched.pace.live.ddp import NO_COMM, POLICIES, WorkerConfig, ddp_module
from commsched.pace.live.launch import launch
from commsched.pace.plan import Group, Partition, Plan, save_plan
from commsched.pace.policies import POLICIES as ALLREDUCE_POLICIES
from commsched.trace.torch import trace_model
from commsched.trace.torch_models import build

WORLD = 2


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def user_plan() -> Plan:
    """A user's plan for tiny_cnn: everything fused in one group, split into three
    partitions of which the middle one goes first, plus fc.bias alone last."""
    sizes = {n: p.numel() * 4 for n, p in build("tiny_cnn").named_parameters()}
    rest = [(n, b) for n, b in sizes.items() if n != "fc.bias"]
    total = sum(b for _, b in rest)
    a = (total // 3) // 4 * 4
    b = (total // 3) // 4 * 4
    parts = (Partition(0, a, 2), Partition(a, b, 0), Partition(a + b, total - a - b, 1))
    bias = sizes["fc.bias"]
    return Plan("user", (Group(tuple(rest), parts),
                         Group((("fc.bias", bias),), (Partition(0, bias, 3),))))


@pytest.fixture(scope="module")
def plans(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    d = tmp_path_factory.mktemp("plans")
    save_plan(user_plan(), d / "user.json")
    params = Params(enabled=True, models=(), policies=tuple(POLICIES),
                    plan_file=str(d / "user.json"), slot_ms=1.0)
    trace = trace_model("tiny_cnn", 4, "train", iterations=1, warmup=0)
    files = {}
    for policy, (plan, _) in make_plans(trace, params, 1e6).items():
        if plan is not None:
            files[policy] = str(d / f"{policy}.json")
            save_plan(plan, files[policy])
    return files


def configs(tmp: Path, policies: list[str], plans: dict[str, str], **kw: object
            ) -> list[WorkerConfig]:
    port = free_port()
    return [WorkerConfig(rank=r, world=WORLD, master="127.0.0.1", port=port,
                         out=str(tmp / f"out{r}.json"), model="tiny_cnn", batch=4,
                         policies=policies, plans=plans, warmup=1, iterations=2,
                         timeout=60, join_timeout=30, dump=str(tmp / f"dump{r}.pt"),
                         **kw)  # type: ignore[arg-type]
            for r in range(WORLD)]


@pytest.mark.slow
def test_every_policy_averages_the_same_gradients_as_ddp(tmp_path: Path,
                                                         plans: dict[str, str]) -> None:
    policies = ["ddp", "wfbp", "ddp_buckets", "horovod", "pace", "plan"]
    # every live policy, each once (``horovod`` is an alias of ``horovod-0.20``)
    assert sorted(policies) == sorted(set(POLICIES) - {ALLREDUCE_POLICIES.canonical("horovod")})
    cfgs = configs(tmp_path, policies, plans, horovod_threshold=3000, horovod_cycle=0.002)
    results = launch(cfgs, tmp_path, timeout=240)
    assert [r["rank"] for r in results] == [0, 1]
    for rank in range(WORLD):
        dump = torch.load(tmp_path / f"dump{rank}.pt")
        ref = dump["ddp"]
        assert ref["grads"], "DDP dumped no gradients"
        for policy in policies[1:]:
            got = dump[policy]
            assert sorted(got["grads"]) == sorted(ref["grads"]), policy
            for name, g in ref["grads"].items():
                torch.testing.assert_close(got["grads"][name], g, rtol=1e-5, atol=1e-6,
                                           msg=lambda m, p=policy, n=name: f"{p} {n}: {m}")
                torch.testing.assert_close(got["params"][name], ref["params"][name],
                                           rtol=1e-5, atol=1e-6)
    # both workers end with the same averaged gradients
    d0, d1 = (torch.load(tmp_path / f"dump{r}.pt")["ddp"] for r in range(WORLD))
    for name in d0["grads"]:
        torch.testing.assert_close(d0["grads"][name], d1["grads"][name])
    # every all-reduce of every policy is recorded, one at a time per worker
    for r in results:
        for pol in r["policies"]:
            ars = sorted(pol["allreduces"], key=lambda a: a["start"])
            assert ars and len(pol["step_s"]) == 2, pol["policy"]
            if pol["policy"] != "ddp":  # the executor's one communication stream
                assert all(a["end"] <= b["start"] for a, b in itertools.pairwise(ars))


def test_the_plan_executor_runs_partitions_in_priority_order(tmp_path: Path,
                                                             plans: dict[str, str]) -> None:
    cfgs = configs(tmp_path, ["plan"], plans)
    results = launch(cfgs, tmp_path, timeout=120)
    for r in results:
        (pol,) = r["policies"]
        last = [a for a in pol["allreduces"] if a["iteration"] == 2]
        # the big group is ready only when its last gradient arrives, then its partitions
        # run by priority, not offset: the middle one (priority 0), the last (1), the
        # first (2); fc.bias's group (priority 3) is ready first, so it runs either at once
        # (nothing else ready yet) or, if the communication thread woke later, last
        order = [(a["parts"][0][3], a["parts"][0][1] > 0)
                 for a in sorted(last, key=lambda a: a["start"])]
        assert order in ([(3, False), (0, True), (1, True), (2, False)],
                         [(0, True), (1, True), (2, False), (3, False)]), order


def test_a_worker_that_never_joins_is_a_one_line_error_within_the_timeout(
        tmp_path: Path, plans: dict[str, str]) -> None:
    (cfg0, _) = configs(tmp_path, ["wfbp"], plans)
    cfg0.join_timeout = 3
    t = time.monotonic()
    with pytest.raises(CommschedError, match=r"ddp worker 0 failed \(exit 2\): .*did not all "
                                             r"join the process group .* within 3 s"):
        launch([cfg0], tmp_path, timeout=60)
    assert time.monotonic() - t < 30


def test_the_run_limit_ends_the_workers(tmp_path: Path, plans: dict[str, str]) -> None:
    (cfg0, _) = configs(tmp_path, ["wfbp"], plans)  # rank 1 never starts: rank 0 waits
    cfg0.join_timeout = 600
    t = time.monotonic()
    with pytest.raises(CommschedError, match="still running after 2 s; ended"):
        launch([cfg0], tmp_path, timeout=2)
    assert time.monotonic() - t < 20


def test_bad_worker_configs_are_one_line_errors(tmp_path: Path) -> None:
    with pytest.raises(CommschedError, match="unknown policy 'nope'"):
        WorkerConfig(0, 2, "127.0.0.1", 1, str(tmp_path / "o"), policies=["nope"])
    with pytest.raises(CommschedError, match="need 0 <= rank < world"):
        WorkerConfig(2, 2, "127.0.0.1", 1, str(tmp_path / "o"), policies=[NO_COMM])


def test_live_ddp_buckets_are_the_simulated_ones(tmp_path: Path) -> None:
    # Four 512 x 512 layers (1 MiB of weight and 2 KiB of bias each): DDP's buckets, as
    # rebuilt after the first backward pass in gradient order, are the simulator's
    # (``ddp_buckets``): the last layer alone fills the 1 MiB first bucket, the other three
    # share one bucket under the 25 MiB cap. With ``bucket_cap_mb`` given, PyTorch 2.13
    # would make one bucket of all four.
    assert dist._DEFAULT_FIRST_BUCKET_BYTES == DDP_FIRST_BUCKET_BYTES  # type: ignore[attr-defined]
    layer = (512 * 512 + 512) * 4
    assert layer >= DDP_FIRST_BUCKET_BYTES and 3 * layer < DDP_BUCKET_BYTES
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'pg'}", rank=0,
                            world_size=1)
    try:
        torch.manual_seed(0)
        net = ddp_module(torch.nn.Sequential(*(torch.nn.Linear(512, 512) for _ in range(4))))
        sizes: list[list[int]] = []

        def hook(_state, bucket):  # type: ignore[no-untyped-def]
            sizes[-1].append(bucket.buffer().numel() * 4)
            return dist.all_reduce(bucket.buffer(), async_op=True).get_future().then(
                lambda f: f.value()[0])

        net.register_comm_hook(None, hook)
        for _ in range(2):
            sizes.append([])
            net(torch.randn(8, 512)).sum().backward()
    finally:
        dist.destroy_process_group()
    assert sizes[1] == [layer, 3 * layer]
    # the simulator's rule on the parameters in creation order (``ddp_buckets`` reads only
    # the workload's sizes)
    params = {n: p.numel() * 4 for n, p in net.module.named_parameters()}
    simulated = ddp_buckets(SimpleNamespace(sizes=params))  # type: ignore[arg-type]
    assert sizes[1] == [sum(params[v] for v in b) for b in simulated]


@pytest.mark.live
@pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")
def test_ci_run_in_namespaces_leaves_nothing_behind(tmp_path: Path,
                                                    plans: dict[str, str]) -> None:
    """Setup, two iterations of every policy over shaped links, teardown, no leftovers."""
    from commsched.cluster import net
    from commsched.cluster.emulated import ClusterConfig, emulated_cluster

    reason = net.check_support()
    if reason:
        pytest.skip(reason)
    cfg = ClusterConfig(n_ps=0, n_workers=WORLD, bandwidth="200mbit", burst="256kb",
                        servers=False)
    with emulated_cluster(cfg, timeout=240) as cluster:
        run_id = cluster.run_id
        master = cluster.spec["worker"][0].split(":")[0]
        cfgs = configs(tmp_path, [NO_COMM, *POLICIES], plans, sample_dev="eth0")
        for c in cfgs:
            c.master, c.port, c.dump = master, 29500, None

        def spawn(rank: int, argv: list[str], log: Path, env: dict[str, str]):  # type: ignore[no-untyped-def]
            return cluster.spawn_client(rank, argv, log, env)

        results = launch(cfgs, tmp_path, 200, spawn, ifname="eth0")
    assert all(len(p["step_s"]) == 2 for r in results for p in r["policies"])
    assert all(len(r["link"]["rows"]) > 10 for r in results)
    assert not net.list_namespaces(f"{net.NS_PREFIX}{run_id}-")


@pytest.mark.slow
def test_torchrun_launches_the_workers_with_its_own_rendezvous(tmp_path: Path) -> None:
    """The scale-out path (docs/scale-out.md): torchrun sets rank, world and rendezvous."""
    import json
    import subprocess
    import sys

    cfg = {"rank": 0, "world": 1, "master": "unused", "port": 1, "model": "tiny_cnn",
           "batch": 4, "policies": ["ddp"], "warmup": 0, "iterations": 1, "timeout": 60,
           "join_timeout": 30, "out": str(tmp_path / "result{rank}.json")}
    (tmp_path / "cfg.json").write_text(json.dumps(cfg))
    torchrun = Path(sys.executable).with_name("torchrun")
    p = subprocess.run([str(torchrun), "--standalone", "--nnodes", "1", "--nproc-per-node",
                        str(WORLD), "-m", "commsched.pace.live.ddp", str(tmp_path / "cfg.json")],
                       env={**os.environ, "GLOO_SOCKET_IFNAME": "lo"}, capture_output=True,
                       timeout=120, check=False)
    assert p.returncode == 0, p.stderr.decode()[-500:]
    for r in range(WORLD):
        out = json.loads((tmp_path / f"result{r}.json").read_text())
        assert out["rank"] == r and out["config"]["world"] == WORLD
        assert out["config"]["master"] == "env"


@pytest.mark.live
@pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")
@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_a_signal_during_a_live_run_leaves_nothing_behind(tmp_path: Path, sig: str) -> None:
    """Ctrl-C (or SIGTERM) while the workers train: the driver tears the cluster down
    (workers ended, namespaces deleted) and exits with an error."""
    import json
    import signal
    import subprocess
    import sys

    from commsched.cluster import net
    from commsched.model.graph import save

    reason = net.check_support()
    if reason:
        pytest.skip(reason)
    save(trace_model("tiny_cnn", 4, "train", iterations=1, warmup=0),
         tmp_path / "tiny_cnn-torch-cpu-train-b4.json.gz")
    cfg = {**read_yaml(Path(__file__).resolve().parents[1] / "config/config.yaml")["pace_live"],
           "enabled": True, "models": [{"trace": "tiny_cnn-torch-cpu-train-b4",
                                        "bandwidth": "100mbit"}],
           "policies": ["wfbp"], "iterations": 100000, "trace_dir": str(tmp_path),
           "timeout_s": 120}
    out = [f"--{n}={tmp_path / n}.csv" for n in ("steps", "allreduces", "link", "summary",
                                                  "metrics")]
    p = subprocess.Popen([sys.executable, "-m", "commsched.pace.experiments.live",
                          "--config-json", json.dumps(cfg), "--workdir", str(tmp_path / "w"),
                          *out], stderr=subprocess.PIPE, text=True,
                         preexec_fn=sigint_default)
    results = tmp_path / "w" / "tiny_cnn-torch-cpu-train-b4"
    deadline = time.monotonic() + 90
    while not (results / "worker1.log").is_file():  # the workers started
        assert time.monotonic() < deadline and p.poll() is None, "workers never started"
        time.sleep(0.2)
    time.sleep(3)  # inside the training loop
    workers = [int(x) for x in subprocess.run(["pgrep", "-f", str(results / "worker")],
                                               capture_output=True, text=True).stdout.split()]
    assert workers, "no worker process found"
    # this run's namespaces (other runs may have theirs: compare by the run's prefix)
    ours = {subprocess.run(["ip", "netns", "identify", str(w)], capture_output=True,
                           text=True, timeout=30).stdout.strip() for w in workers} - {""}
    assert ours, "no worker runs in a namespace"
    prefixes = {ns.rsplit("-", 1)[0] + "-" for ns in ours}
    p.send_signal(getattr(signal, sig))
    _, err = p.communicate(timeout=60)
    last = err.strip().splitlines()[-1]
    assert (p.returncode, last) == ((130, "pace_live: interrupted") if sig == "SIGINT" else
                                    (2, "pace_live: error: interrupted by SIGTERM")), err[-500:]
    assert not [ns for pre in prefixes for ns in net.list_namespaces(pre)]
    for pid in workers:
        assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(
            f"/proc/{pid}/status").read_text().lower(), f"worker {pid} left running"
