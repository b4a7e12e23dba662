"""Start the processes of live jobs (``torchrun`` or directly), bound them, end them.

:func:`worker_argv` is the command of one job process: torchrun with the c10d rendezvous
at rank 0's host (:func:`commsched.cluster.torchrun.torchrun_argv`: one torchrun agent and
one worker per host, the command a real host runs; the job's name is the rendezvous id,
the rank's data address its ``--local-addr``), or the worker module alone with torchrun's
environment set by the launcher (``direct``: half the processes, for tests). Under
torchrun a process keeps the rank of its config (its peers and DSCP tags are its own),
whatever number c10d gives its agent. :func:`launch` starts every process through
``spawn`` (default: on this machine), waits for all of them with a deadline and, on every
exit path (success, a process's error, the deadline, an exception or Ctrl-C), ends every
process it started that still runs (SIGTERM, then SIGKILL, by PID). A failed process is
a one-line :class:`~commsched.errors.CommschedError` quoting its last error line.
"""

from __future__ import annotations

import json
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
from commsched.echelon.live.worker import WorkerConfig
from commsched.errors import CommschedError

__all__ = ["SpawnProcess", "launch", "worker_argv"]

#: ``spawn(role, argv, log, env)``: start one process (see :func:`launch`).
SpawnProcess = Callable[[str, list[str], Path, Mapping[str, str]], "subprocess.Popen[bytes]"]


def worker_argv(launcher: str, config: str, cfg: WorkerConfig, port: int,
                log_dir: str | None = None) -> tuple[list[str], dict[str, str]]:
    """Command and extra environment of one job process (module docstring).

    Parameters
    ----------
    launcher : {"torchrun", "direct"}
        How the process starts (:data:`commsched.cluster.torchrun.LAUNCHERS`).
    config : str
        The file ``cfg`` is written to, the worker's one argument.
    cfg : WorkerConfig
        The rank's config; ``len(cfg.peers)`` is the world size.
    port : int
        The job's rendezvous port on rank 0's host (``cfg.master``).
    log_dir : str, optional
        Torchrun's log directory.

    Returns
    -------
    argv : list of str
    env : dict of str to str
        Variables to add to the environment (torchrun's, for ``direct``; none for
        ``torchrun``, which sets them itself).

    Raises
    ------
    CommschedError
        An unknown launcher.

    Examples
    --------
    >>> cfg = WorkerConfig(job={"name": "j"}, rank=1, peers=[["10.0.0.2", 7000]] * 3,
    ...                    out="o", master="10.0.0.2")
    >>> worker_argv("direct", "c.json", cfg, 29500)[1]["RANK"]
    '1'
    >>> worker_argv("torchrun", "c.json", cfg, 29500)[0][-7:-1]
    ['--local-addr', '10.0.0.2', '--max-restarts', '0', '-m', 'commsched.echelon.live.worker']
    """
    world = len(cfg.peers)
    if launcher == "torchrun":
        return (torchrun_argv(world, cfg.rank, f"{cfg.master}:{port}",
                              str(cfg.peers[cfg.rank][0]), "commsched.echelon.live.worker",
                              [config],
                              run_id=str(cfg.job.get("name", "commsched")),
                              join_timeout=cfg.join_timeout, log_dir=log_dir), {})
    if launcher == "direct":
        return ([sys.executable, "-m", "commsched.echelon.live.worker", config],
                {"RANK": str(cfg.rank), "LOCAL_RANK": "0", "WORLD_SIZE": str(world),
                 "MASTER_ADDR": cfg.master, "MASTER_PORT": str(port)})
    raise CommschedError(f"unknown launcher {launcher!r}; known: {', '.join(LAUNCHERS)}")


def launch(jobs: Mapping[str, Sequence[WorkerConfig]], workdir: str | Path, timeout: float,
           launcher: str = "direct", spawn_process: SpawnProcess | None = None,
           ports: Mapping[str, int] | None = None, extra: Sequence[tuple[str, Any]] = (),
           poll: float = 0.1) -> dict[str, list[dict[str, Any]]]:
    """Run every job's processes (``jobs``: name -> one config per rank, whose
    ``master`` is rank 0's address); return each job's results (the JSON each rank
    wrote) in rank order. ``ports[name]``: the job's rendezvous port (default 29500 + its
    position); ``extra``: ``(role, Popen)`` of other processes to watch (the controller:
    its failure ends the run). Bounded by ``timeout`` s (module docstring).

    Parameters
    ----------
    jobs : mapping of str to sequence of WorkerConfig
        Per job name, one config per rank.
    workdir : str or Path
        Created if missing; gets each rank's config ``<job>-r<rank>.json`` and log.
    timeout : float
        Seconds for all processes together.
    launcher : {"direct", "torchrun"}, optional
        As in :func:`worker_argv`.
    spawn_process : SpawnProcess, optional
        Starts one process (e.g. in a host's namespace); default: here.
    ports : mapping of str to int, optional
        Rendezvous port per job.
    extra : sequence of (str, Popen), optional
        Other processes to watch.
    poll : float, optional
        Seconds between checks.

    Returns
    -------
    dict of str to list of dict
        Per job, the JSON results of its ranks, in rank order.

    Raises
    ------
    CommschedError
        An unknown launcher, a process failed (its last error line quoted), an
        ``extra`` process failed, or the deadline passed; every started process is ended
        before it propagates.
    """
    work = Path(workdir)
    work.mkdir(parents=True, exist_ok=True)
    env0 = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "GLOO_SOCKET_IFNAME": ""}

    def local(role: str, argv: list[str], log: Path, env: Mapping[str, str]
              ) -> subprocess.Popen[bytes]:
        return spawn(argv, role, log, env=env)[0]

    start = spawn_process or local
    started: dict[str, tuple[subprocess.Popen[bytes], ProcRecord, Path]] = {}
    try:
        for k, (name, cfgs) in enumerate(jobs.items()):
            port = (ports or {}).get(name, 29500 + k)
            for cfg in cfgs:
                role = f"{name}-r{cfg.rank}"
                path = work / f"{role}.json"
                atomic_write_text(path, json.dumps(asdict(cfg)) + "\n")
                log = work / f"{role}.log"
                log.unlink(missing_ok=True)
                argv, env = worker_argv(launcher, str(path), cfg, port, str(work / "torchrun"))
                env = {**env0, **env}
                if not env["GLOO_SOCKET_IFNAME"]:
                    del env["GLOO_SOCKET_IFNAME"]
                p = start(role, argv, log, env)
                started[role] = (p, ProcRecord(p.pid, start_time(p.pid) or 0, role, None,
                                               str(log)), log)
        procs.wait_all({r: (p, log) for r, (p, _, log) in started.items()}, timeout, poll,
                       procs.last_error, extra=extra)
    finally:
        end_processes([rec for _, rec, _ in started.values()],
                      popens={p.pid: p for p, _, _ in started.values()})
    return {name: [json.loads(Path(c.out).read_text()) for c in cfgs]
            for name, cfgs in jobs.items()}
