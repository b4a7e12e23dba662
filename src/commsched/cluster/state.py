"""Run directories and state files: what a run created, so anyone can remove it later.

Each run of an emulated cluster owns ``<base>/<run id>/`` (base: ``$COMMSCHED_RUN_DIR``,
else ``/run/commsched`` when writable, else ``<tmp>/commsched-runs``) holding
``state.json``: the run's namespaces, the processes it started (PID and kernel start
time), its owner (the process whose exit means the run is over, or none for a detached
``commsched cluster up``) and its status. The state is written *before* each namespace or
process is created, so a run killed at any moment leaves a record of everything it may
have created.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from commsched.atomic import atomic_write_text
from commsched.cluster.procs import ProcRecord, start_time
from commsched.errors import CommschedError

__all__ = ["RunState", "list_runs", "run_base"]


def run_base() -> Path:
    """The directory under which every run keeps its state (see the module docstring)."""
    env = os.environ.get("COMMSCHED_RUN_DIR")
    if env:
        return Path(env)
    run = Path("/run/commsched")
    try:
        run.mkdir(parents=True, exist_ok=True)
        if os.access(run, os.W_OK):
            return run
    except OSError:
        pass
    return Path(tempfile.gettempdir()) / "commsched-runs"


@dataclass
class RunState:
    """Everything a run created. ``owner`` is ``"PID:START"`` or None (detached)."""

    run_id: str
    dir: Path
    owner: str | None
    status: str = "starting"
    namespaces: list[str] = field(default_factory=list)
    processes: list[ProcRecord] = field(default_factory=list)
    info: dict[str, Any] = field(default_factory=dict)
    created: float = field(default_factory=time.time)

    @property
    def path(self) -> Path:
        return self.dir / "state.json"

    def save(self) -> None:
        atomic_write_text(self.path, json.dumps({
            "run_id": self.run_id, "owner": self.owner, "status": self.status,
            "namespaces": self.namespaces, "processes": [p.to_json() for p in self.processes],
            "info": self.info, "created": self.created,
        }, indent=1))

    @staticmethod
    def load(path: Path) -> RunState:
        try:
            d = json.loads(path.read_text())
            return RunState(
                str(d["run_id"]), path.parent, d.get("owner"), str(d.get("status", "?")),
                list(d.get("namespaces", [])),
                [ProcRecord.from_json(p) for p in d.get("processes", [])],
                dict(d.get("info", {})), float(d.get("created", 0.0)),
            )
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise CommschedError(f"{path}: unreadable run state: {e}") from None

    def owner_alive(self) -> bool:
        """True for a detached run, else whether the owning process still runs."""
        if not self.owner:
            return True
        pid, _, st = self.owner.partition(":")
        return start_time(int(pid)) == int(st)

    @property
    def stale(self) -> bool:
        """A run whose owner is gone without tearing it down."""
        return self.status != "down" and not self.owner_alive()


def list_runs(base: Path | None = None) -> list[RunState]:
    """Every run with a state file under ``base`` (default :func:`run_base`), oldest first."""
    b = base or run_base()
    if not b.is_dir():
        return []
    runs = []
    for p in sorted(b.glob("*/state.json")):
        try:
            runs.append(RunState.load(p))
        except CommschedError:
            continue
    return sorted(runs, key=lambda r: r.created)
