"""Launch the workers of a live data-parallel run and bound it.

:func:`launch` starts one worker per config (on loopback, or in a cluster's network
namespaces): under ``torchrun`` with the c10d rendezvous, as on real hosts
(:func:`commsched.cluster.torchrun.torchrun_argv`), or ``python -m
commsched.pace.live.ddp`` alone; it bounds the whole run and ends every process it
started on every exit path.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from commsched.atomic import atomic_write_text
from commsched.cluster import procs
from commsched.cluster.procs import ProcRecord, end_processes, spawn, start_time
from commsched.cluster.torchrun import LAUNCHERS, torchrun_argv
from commsched.errors import CommschedError
from commsched.pace.live.ddp import WorkerConfig

__all__ = ["MODULE", "SpawnWorker", "launch"]

#: The worker module.
MODULE = "commsched.pace.live.ddp"


#: ``spawn_worker(rank, argv, log, env)``: start one worker process (see :func:`launch`).
SpawnWorker = Callable[[int, list[str], Path, Mapping[str, str]], "subprocess.Popen[bytes]"]


def launch(cfgs: Sequence[WorkerConfig], workdir: str | os.PathLike[str], timeout: float,
           spawn_worker: SpawnWorker | None = None, ifname: str = "lo",
           poll: float = 0.1, launcher: str = "direct",
           hosts: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """Run one worker per config (``commsched.pace.live.ddp``), directly or under torchrun.

    On every exit path -- success, a worker's error, the time limit, an exception or
    Ctrl-C here -- every process still running (worker or torchrun agent, whose worker
    it ends) is ended (SIGTERM, then SIGKILL), by PID.

    Parameters
    ----------
    cfgs : sequence of WorkerConfig
        One per worker (each writes ``cfg.out``).
    workdir : path
        Where the worker configs and logs are written.
    timeout : float
        Bound on the whole run, in seconds.
    spawn_worker : callable, optional
        Starts a process (default: on this machine, loopback; the live runs pass
        :meth:`commsched.cluster.emulated.EmulatedCluster.spawn_client`).
    ifname : str
        The interface gloo uses (``GLOO_SOCKET_IFNAME``).
    poll : float
        Seconds between two looks at the workers.
    launcher : {"direct", "torchrun"}
        ``direct``: ``python -m commsched.pace.live.ddp CONFIG`` with the config's rank and
        rendezvous; ``torchrun``: worker ``r`` under the torchrun command of host ``r`` of
        ``hosts`` (c10d rendezvous at ``hosts[0]:cfgs[0].port``; rank, world size and the
        process group's store from torchrun, :func:`~commsched.pace.live.ddp.from_torchrun`;
        torchrun's logs under ``workdir/torchrun``).
    hosts : sequence of str, optional
        Each worker's host address as the others reach it (torchrun); default: every
        config's ``master`` (all on one machine).

    Returns
    -------
    list of dict
        The results (the JSON each worker wrote to ``cfg.out``, ``{rank}`` replaced by the
        config's rank) in the order of their ranks.

    Raises
    ------
    CommschedError
        One line quoting a failed worker's error, or saying the time limit ended the run;
        an unknown launcher, or ``hosts`` of another length than ``cfgs``.
    """
    if launcher not in LAUNCHERS:
        raise CommschedError(f"unknown launcher {launcher!r}; known: {', '.join(LAUNCHERS)}")
    addrs = list(hosts) if hosts is not None else [c.master for c in cfgs]
    if len(addrs) != len(cfgs):
        raise CommschedError(f"{len(addrs)} hosts for {len(cfgs)} workers")
    work = Path(workdir)
    work.mkdir(parents=True, exist_ok=True)
    env = {"GLOO_SOCKET_IFNAME": ifname, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    started: dict[int, tuple[subprocess.Popen[bytes], ProcRecord, Path]] = {}

    def local(rank: int, argv: list[str], log: Path, env: Mapping[str, str]
              ) -> subprocess.Popen[bytes]:
        return spawn(argv, f"ddp-w{rank}", log, env=env)[0]

    start = spawn_worker or local
    try:
        for i, cfg in enumerate(cfgs):
            path = work / f"worker{cfg.rank}.json"
            atomic_write_text(path, json.dumps(asdict(cfg)) + "\n")
            log = work / f"worker{cfg.rank}.log"
            log.unlink(missing_ok=True)
            argv = ([sys.executable, "-m", MODULE, str(path)] if launcher == "direct" else
                    torchrun_argv(len(cfgs), i, f"{addrs[0]}:{cfg.port}", addrs[i], MODULE,
                                  [str(path)], join_timeout=cfg.join_timeout,
                                  log_dir=str(work / "torchrun")))
            p = start(cfg.rank, argv, log, env)
            started[cfg.rank] = (p, ProcRecord(p.pid, start_time(p.pid) or 0,
                                               f"ddp-w{cfg.rank}", None, str(log)), log)
        procs.wait_all({r: (p, log) for r, (p, _, log) in started.items()}, timeout, poll,
                       procs.last_error, label="ddp worker {}", all_label="ddp workers")
    finally:
        end_processes([rec for _, rec, _ in started.values()],
                      popens={p.pid: p for p, _, _ in started.values()})
    results = [json.loads(Path(cfg.out.replace("{rank}", str(cfg.rank))).read_text())
               for cfg in cfgs]
    return sorted(results, key=lambda r: int(r["rank"]))
