"""Chrome / Perfetto trace export of a simulated schedule (one track per resource).

A schedule is anything with per-op ``start`` and ``end`` times indexed like the compiled
graph (:class:`Timed`): the priority executor's :class:`commsched.sim.Schedule` and the
device simulator's schedules both are, so this format adapter needs no simulator.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Protocol

from commsched.atomic import atomic_write_text
from commsched.model.graph import CompiledGraph

__all__ = ["Timed", "chrome_trace", "write_chrome_trace"]


class Timed(Protocol):
    """Start and end time (seconds) of every op, indexed like :class:`CompiledGraph`."""

    @property
    def start(self) -> Sequence[float]: ...

    @property
    def end(self) -> Sequence[float]: ...


def chrome_trace(cg: CompiledGraph, s: Timed) -> dict[str, object]:
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


def write_chrome_trace(path: str | os.PathLike[str], cg: CompiledGraph, s: Timed) -> None:
    """Write :func:`chrome_trace` to ``path`` atomically (open it in ui.perfetto.dev)."""
    atomic_write_text(path, json.dumps(chrome_trace(cg, s)))
