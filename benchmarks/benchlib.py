"""Shared by the benchmark scripts: timing, machine description, recording a result.

Every result file under ``benchmarks/results/`` carries the machine it ran on and the
provenance of :func:`commsched.results.provenance` (version, git revision, UTC time).
"""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import networkx as nx

from commsched.atomic import atomic_write_text
from commsched.results import provenance

__all__ = ["cpu_model", "machine", "report", "timed", "write_result"]

T = TypeVar("T")


def timed(fn: Callable[[], T], repeat: int) -> tuple[list[float], T]:
    """Run ``fn`` ``repeat`` (>= 1) times; the wall times and the last result."""
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return times, out


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def machine() -> dict[str, Any]:
    """The machine a benchmark runs on, with its load (other work skews timings)."""
    return {
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "networkx": nx.__version__,
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }


def write_result(path: str | os.PathLike[str], result: dict[str, Any]) -> None:
    """Write ``result`` with the machine and provenance, atomically, as JSON."""
    prov = provenance()
    del prov["config"]
    record = {**result, "machine": machine(), **prov}
    atomic_write_text(path, json.dumps(record, indent=1) + "\n")


def report(path: str | os.PathLike[str], result: dict[str, Any], summary: str, target: str,
           after: str = "") -> int:
    """Write ``result`` (:func:`write_result`) and print the benchmark's one line.

    The line reads ``<summary> (target <target>: met|MISSED)<after>; wrote <path>``, by
    ``result["target_met"]``. Returns 0, the benchmark's exit status.
    """
    write_result(path, result)
    print(f"{summary} (target {target}: {'met' if result['target_met'] else 'MISSED'})"
          f"{after}; wrote {path}")
    return 0
