"""Processes of an emulated cluster: start them inside a namespace, end them by PID.

A process is identified by its PID *and* its start time (field 22 of ``/proc/PID/stat``),
so a PID that the kernel reused for somebody else's process is never signalled. Only
processes this package started (recorded in a run's state file) or that live inside a
namespace the run created are ever ended, and only by their PID.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from commsched.errors import CommschedError

__all__ = ["ProcRecord", "alive", "config_main", "end_processes", "last_error", "owner_alive",
           "self_owner", "spawn", "start_time", "wait_all"]

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


def self_owner() -> str:
    """This process as an owner (``"PID:START_TIME"``) for :func:`owner_alive`.

    Returns
    -------
    str
        ``f"{pid}:{start_time(pid)}"`` of the calling process.
    """
    return f"{os.getpid()}:{start_time(os.getpid())}"


def owner_alive(owner: str | None) -> bool:
    """Whether the owner a server or controller was started for still runs.

    Parameters
    ----------
    owner : str or None
        ``"PID:START_TIME"`` (:func:`start_time`) of the owning process; None or empty
        for none (then always True).

    Returns
    -------
    bool
    """
    if not owner:
        return True
    pid, _, st = owner.partition(":")
    return start_time(int(pid)) == int(st)


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


def wait_all(procs: Mapping[Any, tuple[subprocess.Popen[bytes], Path]], timeout: float,
             poll: float, last_error: Callable[[Path], str], label: str = "{}",
             all_label: str | None = None,
             extra: Sequence[tuple[str, subprocess.Popen[bytes]]] = ()) -> None:
    """Wait until every process of ``procs`` has exited with status 0.

    Parameters
    ----------
    procs : mapping
        ``{key: (process, log)}`` (keys sort: ranks or role names).
    timeout : float
        Seconds from now after which the wait ends with an error.
    poll : float
        Seconds between two looks.
    last_error : callable
        A log file to the line that explains a failure.
    label : str
        ``label.format(key)`` names a process in messages.
    all_label : str, optional
        Names the processes still running at the time limit (default: their labels).
    extra : sequence of (str, subprocess.Popen)
        Other processes to watch (a controller); a failure of one ends the wait.

    Raises
    ------
    CommschedError
        ``<label> failed (exit N): <last_error>`` for the first process (in key order)
        that failed, ``<role> failed (exit N) while the jobs ran`` for an ``extra`` one,
        or ``<labels> still running after <timeout> s; ended``. The caller ends the
        processes (:func:`end_processes`).
    """
    deadline = time.monotonic() + timeout
    while True:
        for role, p in extra:
            if p.poll() not in (None, 0):
                raise CommschedError(f"{role} failed (exit {p.returncode}) while the jobs ran")
        codes = {k: p.poll() for k, (p, _) in procs.items()}
        for k, code in sorted(codes.items()):
            if code not in (None, 0):
                raise CommschedError(f"{label.format(k)} failed (exit {code}): "
                                     f"{last_error(procs[k][1])}")
        if all(c == 0 for c in codes.values()):
            return
        if time.monotonic() > deadline:
            late = all_label or ", ".join(label.format(k) for k, c in sorted(codes.items())
                                          if c is None)
            raise CommschedError(f"{late} still running after {timeout:g} s; ended")
        time.sleep(poll)


def config_main(argv: Sequence[str] | None, module: str, what: str,
                body: Callable[[dict[str, Any]], object]) -> int:
    """The ``main`` of a process started as ``python -m <module> CONFIG.json``.

    Parameters
    ----------
    argv : sequence of str or None
        The arguments (None: ``sys.argv[1:]``); exactly one, the JSON config file.
    module : str
        The module, for the usage line.
    what : str
        The process, for error lines (``"echelon live worker"``).
    body : callable
        Runs the process on the parsed config.

    Returns
    -------
    int
        0, or 2 after a usage line or a one-line error ``<what>: error: <first line>``
        (a :class:`CommschedError`, an unreadable or malformed file, a bad key, a
        runtime failure).
    """
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print(f"usage: python -m {module} CONFIG.json", file=sys.stderr)
        return 2
    try:
        body(json.loads(Path(args[0]).read_text()))
    except (CommschedError, OSError, TypeError, ValueError, RuntimeError) as e:
        msg = (str(e).strip().splitlines() or [type(e).__name__])[0]
        print(f"{what}: error: {msg[:300]}", file=sys.stderr)
        return 2
    return 0
