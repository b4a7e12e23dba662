"""An emulated parameter-server cluster on one machine, and clusters from a host list.

:class:`EmulatedCluster` builds the network of :mod:`commsched.cluster.net` (one namespace
per server, a bridge in its own namespace, every link shaped with ``tbf``), starts one
TensorFlow gRPC server per namespace (:mod:`commsched.cluster.server`) and waits, with a
timeout, until each listens. :func:`emulated_cluster` wraps it in a context manager that
*always* tears down: on normal exit, on an exception, on SIGINT, SIGTERM or SIGHUP and
when its time limit expires (SIGALRM); the servers additionally exit when their owner
dies, and :func:`status` finds and removes what a run killed with SIGKILL left behind.

:class:`HostCluster` is the same interface for a real cluster whose servers were started
with ``commsched cluster serve`` on each host (``live.hosts`` in the config): nothing is
created or removed; clients run on the calling machine.

Examples
--------
>>> cfg = ClusterConfig(n_ps=1, n_workers=2, bandwidth="1gbit")
>>> cfg.hosts()
['ps0', 'w0', 'w1']
"""

from __future__ import annotations

import dataclasses
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

from commsched.cluster import net
from commsched.cluster.procs import (
    ProcRecord,
    alive,
    end_processes,
    self_owner,
    spawn,
    start_time,
)
from commsched.cluster.state import RunState, list_runs, run_base
from commsched.errors import CommschedError

__all__ = [
    "ClusterConfig",
    "ClusterInterrupted",
    "EmulatedCluster",
    "HostCluster",
    "UpDown",
    "attach",
    "down",
    "emulated_cluster",
    "guard",
    "status",
    "up_inside",
]


class ClusterInterrupted(CommschedError):
    """A signal or the time limit ended a cluster run (its teardown has run)."""


@dataclass(frozen=True)
class ClusterConfig:
    """Shape of an emulated cluster.

    ``bandwidth``/``burst``/``latency`` are the ``tbf`` parameters of every host link
    (FACTS: ``1gbit``, ``64kb``, ``10ms`` gave 109 MiB/s between namespaces). ``threads``
    is each server's intra-op and inter-op thread count. ``start_timeout`` bounds the wait
    for the servers (they take about 8 s); ``ttl`` bounds a server's life. With
    ``servers=False`` only the network is built (hosts ``w0..``; ``n_ps`` may be 0): the
    caller starts its own processes with :meth:`EmulatedCluster.spawn_client` (the live
    DDP runs, :mod:`commsched.pace.experiments.live`).

    ``pair_rates`` (bytes/s, host ``i`` to host ``j`` in :meth:`hosts` order; the
    diagonal is ignored) gives every directed host pair a link of its own rate instead:
    each host's ``eth0`` gets :func:`commsched.cluster.net.shape_peers` (an ``htb`` class
    per peer, ``u32`` on the destination address, ``bandwidth`` for the default class)
    and the bridge ends stay unshaped, so pairs do not share a host port (Laich's device
    model: a transfer rate per device pair). Needs ``htb`` and ``u32``
    (:func:`commsched.cluster.net.check_htb`).

    ``ps_vmodule``, when set, is the parameter servers' ``TF_CPP_VMODULE`` (with
    ``TF_CPP_MIN_LOG_LEVEL`` 0, so that TensorFlow's verbose lines reach their logs):
    ``base_rendezvous_mgr=1`` logs every value a server gives to its rendezvous, with a
    microsecond wall-clock time (:func:`commsched.cluster.capture.capturing` keeps those
    of its windows).
    """

    n_ps: int = 1
    n_workers: int = 2
    bandwidth: str = "1gbit"
    burst: str = "64kb"
    latency: str = "10ms"
    port: int = 2222
    threads: int = 1
    start_timeout: float = 90.0
    ttl: float = 3600.0
    servers: bool = True
    pair_rates: tuple[tuple[float, ...], ...] | None = None
    ps_vmodule: str = ""

    def __post_init__(self) -> None:
        if self.n_ps < int(self.servers) or self.n_workers < 1:
            raise CommschedError("a cluster needs at least one ps and one worker")
        if self.pair_rates is not None:
            n = self.n_ps + self.n_workers
            if len(self.pair_rates) != n or any(len(r) != n for r in self.pair_rates):
                raise CommschedError(f"pair_rates must be {n} x {n} (one per host pair)")
            bad = [(i, j) for i in range(n) for j in range(n)
                   if i != j and not self.pair_rates[i][j] > 0]
            if bad:
                raise CommschedError(f"pair_rates[{bad[0][0]}][{bad[0][1]}] must be positive")
        if not 1 <= self.port <= 65535:
            raise CommschedError(f"port {self.port} out of range")
        if self.threads < 1:
            raise CommschedError("threads must be >= 1")
        net.parse_rate(self.bandwidth)
        net.parse_size(self.burst)

    def hosts(self) -> list[str]:
        return [f"ps{i}" for i in range(self.n_ps)] + [f"w{i}" for i in range(self.n_workers)]

    @property
    def bandwidth_bytes(self) -> float:
        """Link rate in bytes per second."""
        return net.parse_rate(self.bandwidth)


def _tail(path: str, lines: int = 5) -> str:
    try:
        text = Path(path).read_text(errors="replace").strip().splitlines()
    except OSError:
        return "(no log)"
    keep = [x for x in text if not x.startswith(("I0000", "WARNING: All log"))]
    return " | ".join(keep[-lines:]) or "(empty log)"


class EmulatedCluster:
    """P parameter servers and N workers in private network namespaces (see module doc).

    ``detached=True`` (``commsched cluster up``) leaves the cluster running after this
    process exits, until ``commsched cluster down`` or the servers' ``ttl``.
    """

    def __init__(self, config: ClusterConfig, run_id: str | None = None,
                 detached: bool = False) -> None:
        self.config = config
        self.run_id = run_id or secrets.token_hex(3)
        self.detached = detached
        self.bridge_ns, self.links = net.names(self.run_id, config.hosts())
        self.state = RunState(self.run_id, run_base() / self.run_id,
                              None if detached else self_owner())
        self._popens: dict[int, subprocess.Popen[bytes]] = {}
        self._down = False

    # -- the cluster's interface (shared with HostCluster) ---------------------------
    @property
    def spec(self) -> dict[str, list[str]]:
        """TensorFlow cluster spec: job name -> ``address:port`` of each task."""
        port = self.config.port
        ps = [f"{lk.address}:{port}" for lk in self.links[: self.config.n_ps]]
        wk = [f"{lk.address}:{port}" for lk in self.links[self.config.n_ps:]]
        return {"ps": ps, "worker": wk}

    @property
    def targets(self) -> list[str]:
        """Session target of each worker."""
        return [f"grpc://{a}" for a in self.spec["worker"]]

    @property
    def bandwidth(self) -> float:
        return self.config.bandwidth_bytes

    @property
    def log_dir(self) -> Path:
        return self.state.dir / "logs"

    def spawn_client(self, worker: int, argv: Sequence[str], log: str | os.PathLike[str],
                     env: Mapping[str, str] | None = None) -> subprocess.Popen[bytes]:
        """Start a client process in worker ``worker``'s namespace, recorded for teardown."""
        link = self.links[self.config.n_ps + worker]
        return self._spawn(f"client-w{worker}", argv, str(log), link.namespace, env)

    def link(self, host: str) -> net.HostLink:
        """The link of host ``host`` (``ps0``, ``w1``).

        Raises
        ------
        CommschedError
            If the cluster has no such host.
        """
        link = next((lk for lk in self.links if lk.host == host), None)
        if link is None:
            raise CommschedError(f"no host {host!r} in run {self.run_id}")
        return link

    def spawn_on(self, host: str, role: str, argv: Sequence[str], log: str | os.PathLike[str],
                 env: Mapping[str, str] | None = None) -> subprocess.Popen[bytes]:
        """Start a helper process (``role``) in host ``host``'s namespace (``ps0``, ``w1``),
        recorded for teardown; :meth:`check` watches only the servers."""
        return self._spawn(role, argv, str(log), self.link(host).namespace, env)

    # -- lifecycle ------------------------------------------------------------------
    def _spawn(self, role: str, argv: Sequence[str], log: str, namespace: str,
               env: Mapping[str, str] | None = None) -> subprocess.Popen[bytes]:
        p, rec = spawn(argv, role, log, namespace=namespace, env=env,
                       die_with_parent=not self.detached)
        self._popens[p.pid] = p
        self.state.processes.append(rec)
        self.state.save()
        return p

    def up(self) -> None:
        """Create the network, start the servers, wait until all listen (or raise)."""
        reason = net.check_support() if self.config.pair_rates is None else net.check_htb()
        if reason:
            raise CommschedError(f"emulated cluster unavailable: {reason}")
        cfg = self.config
        self.state.namespaces = [self.bridge_ns] + [lk.namespace for lk in self.links]
        self.state.info = {"config": asdict(cfg), "spec": self.spec, "targets": self.targets}
        self.state.dir.mkdir(parents=True, exist_ok=True)
        self.state.save()
        net.create_bridge(self.bridge_ns)
        for lk in self.links:
            net.add_host(self.bridge_ns, lk)
        for i, lk in enumerate(self.links):
            if cfg.pair_rates is None:
                net.shape(lk.namespace, lk.host_dev, cfg.bandwidth, cfg.burst, cfg.latency)
                net.shape(self.bridge_ns, lk.bridge_dev, cfg.bandwidth, cfg.burst,
                          cfg.latency)
            else:
                net.shape_peers(lk.namespace, lk.host_dev,
                                {o.address: cfg.pair_rates[i][j]
                                 for j, o in enumerate(self.links) if j != i},
                                cfg.bandwidth_bytes, cfg.burst)
        spec = json.dumps(self.spec)
        ready = {}
        for i, lk in enumerate(self.links if cfg.servers else []):
            job, task = ("ps", i) if i < cfg.n_ps else ("worker", i - cfg.n_ps)
            ready[lk.host] = self.state.dir / "ready" / lk.host
            argv = [sys.executable, "-m", "commsched.cluster.server", "--cluster", spec,
                    "--job", job, "--task", str(task), "--threads", str(cfg.threads),
                    "--ready", str(ready[lk.host]), "--ttl", str(cfg.ttl)]
            if self.state.owner:
                argv += ["--owner", self.state.owner]
            env = ({"TF_CPP_MIN_LOG_LEVEL": "0", "TF_CPP_VMODULE": cfg.ps_vmodule}
                   if job == "ps" and cfg.ps_vmodule else {"TF_CPP_MIN_LOG_LEVEL": "1"})
            self._spawn(lk.host, argv, str(self.log_dir / f"{lk.host}.log"), lk.namespace,
                        env=env)
        deadline = time.monotonic() + cfg.start_timeout
        while not all(p.exists() for p in ready.values()):
            for rec in self.state.processes:
                if not alive(rec):
                    raise CommschedError(
                        f"server {rec.role} exited during start-up: {_tail(rec.log)}")
            if time.monotonic() > deadline:
                late = [h for h, p in ready.items() if not p.exists()]
                raise CommschedError(
                    f"servers {', '.join(late)} not up after {cfg.start_timeout:g} s")
            time.sleep(0.2)
        self.state.status = "up"
        self.state.save()

    def set_bandwidth(self, rate: str) -> None:
        """Re-shape every link (both ends, ``tbf``) to ``rate``, e.g. between two
        experiments (per-pair rates are dropped)."""
        cfg = self.config
        for lk in self.links:
            net.shape(lk.namespace, lk.host_dev, rate, cfg.burst, cfg.latency)
            net.shape(self.bridge_ns, lk.bridge_dev, rate, cfg.burst, cfg.latency)
        self.config = dataclasses.replace(cfg, bandwidth=rate, pair_rates=None)

    def check(self) -> None:
        """Raise if a server of the cluster has exited."""
        servers = set(self.config.hosts()) if self.config.servers else set()
        for rec in self.state.processes:
            if rec.role in servers and not alive(rec):
                raise CommschedError(f"server {rec.role} exited: {_tail(rec.log)}")

    def down(self) -> None:
        """End every process, delete every namespace, remove the run directory (idempotent)."""
        if self._down:
            return
        _teardown(self.state, self._popens)
        self._down = True


def _teardown(state: RunState, popens: Mapping[int, subprocess.Popen[bytes]] | None = None,
              keep_dir: bool = False) -> None:
    state.status = "stopping"
    if state.dir.is_dir():
        state.save()
    recs = list(state.processes)
    known = {r.pid for r in recs}
    present = set(net.list_namespaces(f"{net.NS_PREFIX}{state.run_id}-"))
    for ns in state.namespaces:
        if ns in present:
            for pid in net.namespace_pids(ns):
                st = start_time(pid)
                if pid not in known and st is not None:  # lives in our namespace: ours
                    recs.append(ProcRecord(pid, st, f"unrecorded-in-{ns}", ns, ""))
    end_processes(recs, popens=popens)
    errors = []
    for ns in sorted(present, key=lambda n: n.endswith("-br")):  # hosts first, bridge last
        try:
            net.delete_namespace(ns)
        except CommschedError as e:
            errors.append(str(e))
    if errors:
        raise CommschedError("teardown incomplete: " + "; ".join(errors))
    state.status = "down"
    if keep_dir:
        state.save()
    else:
        shutil.rmtree(state.dir, ignore_errors=True)


@contextmanager
def guard(timeout: float | None = None) -> Iterator[None]:
    """Turn SIGTERM/SIGHUP (and SIGALRM after ``timeout`` s) into :class:`ClusterInterrupted`
    inside the block, so ``finally`` clauses run; restore the handlers afterwards.

    Only the main thread can receive signals; elsewhere the block runs unguarded (the
    servers still exit with their owner).
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_signal(signum: int, _frame: Any) -> None:
        raise ClusterInterrupted(f"interrupted by {signal.Signals(signum).name}")

    def on_alarm(_signum: int, _frame: Any) -> None:
        raise ClusterInterrupted(f"cluster run exceeded its time limit of {timeout:g} s")

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGHUP)}
    if timeout:
        old[signal.SIGALRM] = signal.signal(signal.SIGALRM, on_alarm)
        signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        yield
    finally:
        if timeout:
            signal.setitimer(signal.ITIMER_REAL, 0)
        for s, h in old.items():
            signal.signal(s, h)


@contextmanager
def _signals_blocked() -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    sigs = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGALRM}
    old = signal.pthread_sigmask(signal.SIG_BLOCK, sigs)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


class UpDown(Protocol):
    """A cluster that :func:`up_inside` can bring up and tear down."""

    def up(self) -> None:
        """Start the cluster."""

    def down(self) -> None:
        """Tear the cluster down (idempotent)."""


C = TypeVar("C", bound=UpDown)


@contextmanager
def up_inside(c: C, timeout: float | None = None) -> Iterator[C]:
    """Bring ``c`` up for the block and always tear it down, under :func:`guard`.

    Parameters
    ----------
    c : cluster
        Anything with ``up()`` and ``down()`` (:class:`EmulatedCluster`,
        :class:`commsched.echelon.live.topology.LiveCluster`).
    timeout : float, optional
        Seconds that bound the whole block, start-up included (SIGALRM).

    Yields
    ------
    cluster
        ``c``, up. Teardown runs with SIGINT/SIGTERM/SIGHUP/SIGALRM blocked, so a second
        Ctrl-C cannot interrupt it.

    Raises
    ------
    ClusterInterrupted
        On SIGTERM/SIGHUP or when ``timeout`` runs out.
    """
    with guard(timeout):
        try:
            c.up()
            yield c
        finally:
            if timeout and threading.current_thread() is threading.main_thread():
                signal.setitimer(signal.ITIMER_REAL, 0)
            with _signals_blocked():
                c.down()


@contextmanager
def emulated_cluster(config: ClusterConfig, run_id: str | None = None,
                     timeout: float | None = None) -> Iterator[EmulatedCluster]:
    """An :class:`EmulatedCluster` that is up inside the block and always torn down
    (:func:`up_inside`; ``timeout`` in s bounds the whole block, start-up included)."""
    with up_inside(EmulatedCluster(config, run_id), timeout) as c:
        yield c


@dataclass
class HostCluster:
    """A real cluster from a host list: ``{"ps": [host:port..], "worker": [..]}``.

    The servers run already (``commsched cluster serve`` on each host, e.g. via ``srun``);
    the clients run on this machine and reach the workers over the real network.
    ``bandwidth`` is the hosts' nominal link rate in bytes/s, used for the simulator's
    prediction.
    """

    hosts: dict[str, list[str]]
    bandwidth: float
    log_dir: Path

    def __post_init__(self) -> None:
        if not self.hosts.get("ps") or not self.hosts.get("worker"):
            raise CommschedError("live.hosts needs non-empty 'ps' and 'worker' lists")
        for h in self.hosts["ps"] + self.hosts["worker"]:
            host, _, port = str(h).rpartition(":")
            if not host or not port.isdigit():
                raise CommschedError(f"live.hosts: {h!r} is not host:port")
        self._popens: list[subprocess.Popen[bytes]] = []

    @property
    def spec(self) -> dict[str, list[str]]:
        return {"ps": list(self.hosts["ps"]), "worker": list(self.hosts["worker"])}

    @property
    def targets(self) -> list[str]:
        return [f"grpc://{a}" for a in self.hosts["worker"]]

    def spawn_client(self, worker: int, argv: Sequence[str], log: str | os.PathLike[str],
                     env: Mapping[str, str] | None = None) -> subprocess.Popen[bytes]:
        p, _ = spawn(argv, f"client-w{worker}", log, env=env)
        self._popens.append(p)
        return p

    def set_bandwidth(self, rate: str) -> None:
        """A real network's rate is what it is: record ``rate`` as the nominal one."""
        self.bandwidth = net.parse_rate(rate)

    def check(self) -> None:
        """Nothing to check locally: a dead remote server shows up as a session timeout."""


def status(clean: bool = False) -> dict[str, Any]:
    """Every run and every leftover namespace; with ``clean``, remove stale ones.

    A run is *stale* when its owner exited without tearing it down, or when it is detached
    and none of its servers runs any more. A namespace with our prefix that no run under
    :func:`commsched.cluster.state.run_base` claims, and in whose run no process lives, is
    an *orphan* (left by a run whose state was lost, or by a support probe killed midway).
    Live runs of other processes are never touched; every commsched process on a machine
    should use the same run directory, so that their runs claim their namespaces.
    """
    runs = list_runs()
    claimed = {ns for r in runs for ns in r.namespaces}
    present = net.list_namespaces()
    report: dict[str, Any] = {"base": str(run_base()), "runs": [], "orphans": [],
                              "removed": []}
    for r in runs:
        procs_alive = [p.role for p in r.processes if alive(p)]
        stale = r.stale or (r.status == "up" and r.owner is None and not procs_alive)
        report["runs"].append({
            "run_id": r.run_id, "status": r.status, "owner": r.owner or "detached",
            "stale": stale, "namespaces": [n for n in r.namespaces if n in present],
            "processes_alive": procs_alive, "spec": r.info.get("spec"),
        })
        if clean and (stale or r.status == "down"):
            _teardown(r)
            report["removed"].append(r.run_id)
    unclaimed = [ns for ns in present if ns not in claimed]
    busy = {_run_of(ns) for ns in unclaimed if net.namespace_pids(ns)}
    for ns in unclaimed:
        rid = _run_of(ns)
        if rid.startswith("probe-"):
            pid = rid.removeprefix("probe-")
            if pid.isdigit() and start_time(int(pid)) is not None:
                continue  # a support check in progress
        elif rid in busy:
            continue  # processes still live in this run's namespaces: not ours to judge
        report["orphans"].append(ns)
        if clean:
            net.delete_namespace(ns)
            report["removed"].append(ns)
    return report


def _run_of(namespace: str) -> str:
    """The run id part of ``cs-<run id>-<host>`` (``probe-<pid>`` for a support probe)."""
    rest = namespace.removeprefix(net.NS_PREFIX)
    return rest if rest.startswith("probe-") else rest.split("-", 1)[0]


def attach(run_id: str) -> RunState:
    """The state of run ``run_id`` (for ``commsched cluster down RUN``)."""
    path = run_base() / run_id / "state.json"
    if not path.exists():
        raise CommschedError(f"no run {run_id!r} under {run_base()}")
    return RunState.load(path)


def down(run_id: str) -> None:
    """Tear down run ``run_id`` (any status); a missing run is an error."""
    with _signals_blocked():
        _teardown(attach(run_id))
