"""Launch the workers of a live data-parallel run and bound it.

:func:`launch` starts one ``python -m commsched.pace.live.ddp`` worker per config (on
loopback, or in a cluster's network namespaces), bounds the whole run and ends every worker
it started on every exit path.
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
from commsched.cluster.procs import ProcRecord, end_processes, spawn, start_time, wait_all
from commsched.pace.live.ddp import WorkerConfig

__all__ = ["SpawnWorker", "launch"]


#: ``spawn_worker(rank, argv, log, env)``: start one worker process (see :func:`launch`).
SpawnWorker = Callable[[int, list[str], Path, Mapping[str, str]], "subprocess.Popen[bytes]"]


def _last_error(log: Path) -> str:
    try:
        lines = log.read_text(errors="replace").strip().splitlines()
    except OSError:
        return "(no log)"
    errs = [x for x in lines if "error:" in x]
    return (errs or lines or ["(empty log)"])[-1].strip()[:300]


def launch(cfgs: Sequence[WorkerConfig], workdir: str | os.PathLike[str], timeout: float,
           spawn_worker: SpawnWorker | None = None, ifname: str = "lo",
           poll: float = 0.1) -> list[dict[str, Any]]:
    """Run one worker process per config (``python -m commsched.pace.live.ddp``).

    On every exit path -- success, a worker's error, the time limit, an exception or
    Ctrl-C here -- every worker still running is ended (SIGTERM, then SIGKILL), by PID.

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

    Returns
    -------
    list of dict
        The results (the JSON each worker wrote to ``cfg.out``) in rank order.

    Raises
    ------
    CommschedError
        One line quoting a failed worker's error, or saying the time limit ended the run.
    """
    work = Path(workdir)
    work.mkdir(parents=True, exist_ok=True)
    env = {"GLOO_SOCKET_IFNAME": ifname, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    started: dict[int, tuple[subprocess.Popen[bytes], ProcRecord, Path]] = {}

    def local(rank: int, argv: list[str], log: Path, env: Mapping[str, str]
              ) -> subprocess.Popen[bytes]:
        return spawn(argv, f"ddp-w{rank}", log, env=env)[0]

    start = spawn_worker or local
    try:
        for cfg in cfgs:
            path = work / f"worker{cfg.rank}.json"
            atomic_write_text(path, json.dumps(asdict(cfg)) + "\n")
            log = work / f"worker{cfg.rank}.log"
            log.unlink(missing_ok=True)
            p = start(cfg.rank, [sys.executable, "-m", "commsched.pace.live.ddp", str(path)],
                      log, env)
            started[cfg.rank] = (p, ProcRecord(p.pid, start_time(p.pid) or 0,
                                               f"ddp-w{cfg.rank}", None, str(log)), log)
        wait_all({r: (p, log) for r, (p, _, log) in started.items()}, timeout, poll,
                 _last_error, label="ddp worker {}", all_label="ddp workers")
    finally:
        end_processes([rec for _, rec, _ in started.values()],
                      popens={p.pid: p for p, _, _ in started.values()})
    return [json.loads(Path(cfg.out).read_text()) for cfg in cfgs]
