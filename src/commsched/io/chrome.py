"""Chrome / Perfetto trace export of a simulated schedule (one track per resource)."""

from __future__ import annotations

import json
import os

from commsched.graph import CompiledGraph
from commsched.io.atomic import atomic_write_text
from commsched.sim.priority import Schedule

__all__ = ["chrome_trace", "write_chrome_trace"]


def chrome_trace(cg: CompiledGraph, s: Schedule) -> dict[str, object]:
    """Trace Event Format dictionary: one thread (track) per resource slot, times in us.

    A resource of capacity c gets c tracks; each op goes on the lowest free track of its
    resource so overlapping ops never share a track.
    """
    events: list[dict[str, object]] = []
    tid_of: dict[tuple[int, int], int] = {}
    for r, name in enumerate(cg.resource_names):
        for slot in range(cg.capacity[r]):
            tid = len(tid_of) + 1
            tid_of[(r, slot)] = tid
            label = name if cg.capacity[r] == 1 else f"{name}[{slot}]"
            events.append({"ph": "M", "name": "thread_name", "pid": 1, "tid": tid,
                           "args": {"name": label}})
    busy_until: dict[tuple[int, int], float] = {}
    for i in sorted(range(cg.n), key=lambda k: (s.start[k], s.end[k])):
        r = cg.resource[i]
        slot = next(
            (k for k in range(cg.capacity[r]) if busy_until.get((r, k), 0.0) <= s.start[i]),
            0,
        )
        busy_until[(r, slot)] = s.end[i]
        events.append({"ph": "X", "name": cg.ids[i], "pid": 1, "tid": tid_of[(r, slot)],
                       "ts": s.start[i] * 1e6, "dur": (s.end[i] - s.start[i]) * 1e6})
    return {"traceEvents": events, "displayTimeUnit": "ms"}


def write_chrome_trace(path: str | os.PathLike[str], cg: CompiledGraph, s: Schedule) -> None:
    """Write :func:`chrome_trace` to ``path`` atomically (open it in ui.perfetto.dev)."""
    atomic_write_text(path, json.dumps(chrome_trace(cg, s)))
