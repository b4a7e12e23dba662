"""``commsched cluster up|down|status|serve``: the emulated parameter-server cluster.

``up`` builds a detached emulated cluster (namespaces, shaped veth links, one TensorFlow
server per namespace) and prints its run id and cluster spec; it stays up until ``down``
or the servers' ``--ttl``. ``status`` lists runs and leftover namespaces; ``--clean``
removes the stale ones (a run whose owner died, a detached run whose servers are gone,
a namespace with our prefix that no run claims). ``serve`` runs one server of a real
cluster from a host list (config ``live.hosts``), in the foreground; ``hosts`` writes such a
host list for a SLURM allocation (see ``docs/scale-out.md``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
from typing import Any

import yaml

from commsched.atomic import atomic_write_text
from commsched.cluster.emulated import ClusterConfig, EmulatedCluster, down, status
from commsched.cluster.state import list_runs
from commsched.errors import CommschedError
from commsched.io.structured import read_yaml
from commsched.validation import MAX_SECONDS, flag, input_file, output_file

TASKS = flag(1, 256, integer=True)
THREADS = flag(1, 1024, integer=True)


def register(sub: Any) -> None:
    p = sub.add_parser("cluster", help="emulated TensorFlow parameter-server cluster")
    csub = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    up = csub.add_parser("up", help="start a detached emulated cluster")
    up.add_argument("--ps", type=TASKS, default=1, help="parameter servers (default 1)")
    up.add_argument("--workers", type=TASKS, default=2, help="workers (default 2)")
    up.add_argument("--bandwidth", default="1gbit", help="tbf rate per link (default 1gbit)")
    up.add_argument("--burst", default="64kb", help="tbf burst (default 64kb)")
    up.add_argument("--latency", default="10ms", help="tbf latency (default 10ms)")
    up.add_argument("--threads", type=THREADS, default=1, help="intra/inter-op threads (1)")
    up.add_argument("--ttl", type=flag(0, MAX_SECONDS), default=3600.0,
                    help="servers exit after s (3600)")
    up.add_argument("--timeout", type=flag(0, 1e6, lo_open=True), default=90.0,
                    help="start-up timeout in s (90)")
    up.add_argument("--run-id", help="run id (default: random)")
    dn = csub.add_parser("down", help="tear down a run (or every run with --all)")
    dn.add_argument("run_id", nargs="?", help="run id printed by 'up'")
    dn.add_argument("--all", action="store_true", help="every run under the run directory")
    st = csub.add_parser("status", help="list runs and leftovers")
    st.add_argument("--clean", action="store_true", help="remove stale runs and orphans")
    st.add_argument("--json", action="store_true", help="print the report as JSON")
    sv = csub.add_parser("serve", help="run one server of a real cluster (live.hosts)")
    sv.add_argument("--config", nargs="+", type=input_file, default=["config/config.yaml"],
                    help="config file(s); the last one with live.hosts wins")
    sv.add_argument("--job", choices=["ps", "worker"])
    sv.add_argument("--task", type=flag(0, 2**20, integer=True))
    sv.add_argument("--slurm", action="store_true",
                    help="take job and task from SLURM_PROCID (ps tasks first, then workers)")
    sv.add_argument("--threads", type=THREADS, default=1)
    sv.add_argument("--ttl", type=flag(0, MAX_SECONDS), default=0.0, help="exit after s (0: never)")
    hs = csub.add_parser("hosts", help="write a live.hosts config for a real cluster")
    hs.add_argument("--ps", type=TASKS, default=1)
    hs.add_argument("--workers", type=TASKS, default=2)
    hs.add_argument("--port", type=flag(1, 65535, integer=True), default=2222,
                    help="first port on every node")
    hs.add_argument("--nodes", help="comma-separated host names (default: the SLURM "
                    "allocation, scontrol show hostnames)")
    hs.add_argument("-o", "--out", required=True, type=output_file, help="YAML file to write")
    p.set_defaults(func=run)


def host_list(nodes: list[str], n_ps: int, n_workers: int, port: int) -> dict[str, list[str]]:
    """``live.hosts`` for tasks dealt cyclically over ``nodes`` (ps tasks first).

    Task ``i`` (the i-th ps, then the workers) runs on ``nodes[i % len(nodes)]`` with port
    ``port + i // len(nodes)``, which is where ``srun --distribution=cyclic`` puts
    ``SLURM_PROCID`` ``i``.

    >>> host_list(["a", "b"], 1, 2, 2222)
    {'ps': ['a:2222'], 'worker': ['b:2222', 'a:2223']}
    """
    if not nodes or n_ps < 1 or n_workers < 1:
        raise CommschedError("need at least one node, one ps and one worker")
    addr = [f"{nodes[i % len(nodes)]}:{port + i // len(nodes)}" for i in range(n_ps + n_workers)]
    return {"ps": addr[:n_ps], "worker": addr[n_ps:]}


def _hosts(args: argparse.Namespace) -> int:
    if args.nodes:
        nodes = [n for n in args.nodes.split(",") if n]
    else:
        nodelist = os.environ.get("SLURM_JOB_NODELIST")
        if not nodelist:
            raise CommschedError("give --nodes or run inside a SLURM allocation")
        try:
            out = subprocess.run(["scontrol", "show", "hostnames", nodelist], check=True,
                                 capture_output=True, text=True, timeout=30).stdout
        except (OSError, subprocess.SubprocessError) as e:
            raise CommschedError(f"scontrol show hostnames failed: {e}") from None
        nodes = out.split()
    hosts = host_list(nodes, args.ps, args.workers, args.port)
    atomic_write_text(args.out, yaml.safe_dump({"live": {"hosts": hosts}}))
    print(json.dumps(hosts))
    return 0


def _up(args: argparse.Namespace) -> int:
    cfg = ClusterConfig(n_ps=args.ps, n_workers=args.workers, bandwidth=args.bandwidth,
                        burst=args.burst, latency=args.latency, threads=args.threads,
                        start_timeout=args.timeout, ttl=args.ttl)
    c = EmulatedCluster(cfg, args.run_id, detached=True)
    try:
        c.up()
    except BaseException:
        c.down()
        raise
    print(json.dumps({"run_id": c.run_id, "spec": c.spec, "targets": c.targets,
                      "namespaces": c.state.namespaces, "logs": str(c.log_dir)}, indent=1))
    print(f"run a client inside a worker: ip netns exec {c.links[cfg.n_ps].namespace} ...")
    print(f"tear down: commsched cluster down {c.run_id}")
    return 0


def _serve(args: argparse.Namespace) -> int:
    from commsched.cluster import server

    hosts = None
    for path in args.config:
        hosts = ((read_yaml(path) or {}).get("live") or {}).get("hosts") or hosts
    if not hosts:
        raise CommschedError(f"{', '.join(args.config)}: no live.hosts")
    job, task = args.job, args.task
    if args.slurm:
        procid = int(os.environ.get("SLURM_PROCID", "-1"))
        if procid < 0:
            raise CommschedError("--slurm needs SLURM_PROCID (run it under srun)")
        n_ps = len(hosts["ps"])
        job, task = ("ps", procid) if procid < n_ps else ("worker", procid - n_ps)
    if job is None or task is None:
        raise CommschedError("give --job and --task, or --slurm")
    if task >= len(hosts.get(job, [])):
        raise CommschedError(f"live.hosts.{job} has no task {task}")
    return server.main(["--cluster", json.dumps(hosts), "--job", job, "--task", str(task),
                        "--threads", str(args.threads), "--ttl", str(args.ttl)])


def run(args: argparse.Namespace) -> int:
    if args.action == "up":
        return _up(args)
    if args.action == "serve":
        return _serve(args)
    if args.action == "hosts":
        return _hosts(args)
    if args.action == "down":
        if args.all == bool(args.run_id):
            raise CommschedError("give a run id or --all")
        ids = [r.run_id for r in list_runs()] if args.all else [args.run_id]
        for rid in ids:
            down(rid)
            print(f"run {rid}: down")
        return 0
    report = status(clean=args.clean)
    if args.json:
        print(json.dumps(report, indent=1))
        return 0
    print(f"run directory: {report['base']}")
    for r in report["runs"]:
        flag = " STALE" if r["stale"] else ""
        print(f"run {r['run_id']}: {r['status']}{flag}, owner {r['owner']}, "
              f"{len(r['namespaces'])} namespaces, servers alive: "
              f"{', '.join(r['processes_alive']) or 'none'}")
    for ns in report["orphans"]:
        print(f"orphan namespace {ns}")
    if not report["runs"] and not report["orphans"]:
        print("no runs, no leftovers")
    for x in report["removed"]:
        print(f"removed {x}")
    return 0
