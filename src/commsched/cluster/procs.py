"""Processes of an emulated cluster: start them inside a namespace, end them by PID.

A process is identified by its PID *and* its start time (field 22 of ``/proc/PID/stat``),
so a PID that the kernel reused for somebody else's process is never signalled. Only
processes this package started (recorded in a run's state file) or that live inside a
namespace the run created are ever ended, and only by their PID.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from commsched.errors import CommschedError

__all__ = ["ProcRecord", "alive", "end_processes", "last_error", "spawn", "start_time"]

_PR_SET_PDEATHSIG = 1


@dataclass(frozen=True)
class ProcRecord:
    """A started process: PID, kernel start time, role (``ps0``, ``w1``, ``client-w0``...)."""

    pid: int
    start_time: int
    role: str
    namespace: str | None
    log: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @staticmethod
    def from_json(d: Mapping[str, Any]) -> ProcRecord:
        return ProcRecord(int(d["pid"]), int(d["start_time"]), str(d["role"]),
                          d.get("namespace"), str(d.get("log", "")))


def start_time(pid: int) -> int | None:
    """Start time of ``pid`` in clock ticks since boot, or None if it does not exist
    (zombies count as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()  # after "pid (comm) "
    if fields[0] == "Z":
        return None
    return int(fields[19])


def alive(rec: ProcRecord) -> bool:
    """True when the recorded process still runs (same PID and same start time)."""
    return start_time(rec.pid) == rec.start_time


def _pdeathsig() -> None:  # runs in the child between fork and exec
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def spawn(
    argv: Sequence[str],
    role: str,
    log: str | os.PathLike[str],
    namespace: str | None = None,
    env: Mapping[str, str] | None = None,
    die_with_parent: bool = True,
) -> tuple[subprocess.Popen[bytes], ProcRecord]:
    """Start ``argv`` (inside ``namespace`` via ``ip netns exec`` when given).

    stdout and stderr go to ``log``. With ``die_with_parent`` the kernel sends SIGTERM to
    the process when the calling thread exits (``PR_SET_PDEATHSIG``; ``ip netns exec``
    execs the command, so the flag reaches it), a last line of defence when the caller is
    killed with SIGKILL. The process gets its own session, so a Ctrl-C in the terminal
    reaches only the caller, which then tears the cluster down in order.
    """
    cmd = (["ip", "netns", "exec", namespace] if namespace else []) + list(argv)
    full_env = dict(os.environ)
    full_env.update(env or {})
    Path(log).parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        try:
            p = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                env=full_env, start_new_session=True,
                preexec_fn=_pdeathsig if die_with_parent else None,
            )
        except OSError as e:
            raise CommschedError(f"cannot start {cmd[0]}: {e.strerror}") from None
    st = start_time(p.pid)
    # A process that already exited has no start time; record 0 so it is never signalled.
    return p, ProcRecord(p.pid, st if st is not None else 0, role, namespace, str(log))


def end_processes(
    records: Sequence[ProcRecord],
    grace: float = 5.0,
    popens: Mapping[int, subprocess.Popen[bytes]] | None = None,
) -> list[ProcRecord]:
    """SIGTERM every recorded process that still runs, SIGKILL it after ``grace`` seconds.

    Returns the records that were still running when called. Children of this process
    (``popens``, by PID) are reaped so they leave no zombies.
    """
    popens = popens or {}
    running = [r for r in records if alive(r)]
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        left = [r for r in running if alive(r)]
        for r in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(r.pid, sig)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            for r in left:
                if r.pid in popens:
                    popens[r.pid].poll()
            if not any(alive(r) for r in left):
                break
            time.sleep(0.05)
    for r in running:
        if r.pid in popens:
            with contextlib.suppress(subprocess.TimeoutExpired):
                popens[r.pid].wait(timeout=1.0)
    still = [r for r in running if alive(r)]
    if still:
        raise CommschedError(
            "could not end processes " + ", ".join(f"{r.role} (pid {r.pid})" for r in still)
        )
    return running


def last_error(log: str | os.PathLike[str]) -> str:
    """Why a process failed, from its log: the last line in the one-line error format
    (``...: error: ...``), else the last line that mentions an error (not a traceback's
    header), else the last line; at most 300 characters.

    A torchrun agent's log holds its worker's output, then the agent's own failure
    summary (``ChildFailedError``, ``error_file``, a link to ``errors.html``): the worker's
    one-line error is what this returns.

    Parameters
    ----------
    log : path
        The log file.

    Returns
    -------
    str
        The line, or ``(no log)`` / ``(empty log)``.
    """
    try:
        lines = Path(log).read_text(errors="replace").strip().splitlines()
    except OSError:
        return "(no log)"
    ours = [x for x in lines if "error:" in x]
    errs = [x for x in lines if "error" in x.lower() and "Traceback" not in x]
    return (ours or errs or lines or ["(empty log)"])[-1].strip()[:300]
