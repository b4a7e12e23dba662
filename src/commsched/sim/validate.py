"""Schedule validator: every schedule produced anywhere in commsched must pass it.

A schedule is valid for an op graph when
1. it gives every op of the graph a start and an end, and nothing else;
2. each op runs for exactly its duration (``end - start == duration``);
3. no op starts before all its predecessors ended (precedence);
4. at no instant does a resource run more ops than its capacity.
"""

from __future__ import annotations

from commsched.errors import CommschedError
from commsched.model.graph import CompiledGraph
from commsched.sim.priority import Schedule

__all__ = ["InvalidSchedule", "check_schedule"]


class InvalidSchedule(CommschedError):
    """A schedule that breaks one of the rules of :mod:`commsched.sim.validate`."""


def check_schedule(cg: CompiledGraph, s: Schedule, tol: float = 1e-9) -> None:
    """Raise :class:`InvalidSchedule` naming the first broken rule and op.

    Parameters
    ----------
    cg : CompiledGraph
        The op graph, compiled.
    s : Schedule
        A schedule of it; times in seconds.
    tol : float, optional
        Relative tolerance of every comparison, scaled by ``max(1, makespan)``.

    Raises
    ------
    InvalidSchedule
        The schedule's ops differ from the graph's (or their order), or it breaks rule
        2, 3 or 4 of the module docstring.
    """
    if list(s.ids) != list(cg.ids):
        missing = set(cg.ids) - set(s.ids)
        raise InvalidSchedule(
            f"schedule ops differ from the graph's (missing: {sorted(missing)[:3]})"
        )
    scale = max(1.0, s.makespan)
    eps = tol * scale
    for i, op in enumerate(cg.ids):
        if s.start[i] < -eps:
            raise InvalidSchedule(f"op {op!r} starts before time 0")
        if abs((s.end[i] - s.start[i]) - cg.duration[i]) > eps:
            raise InvalidSchedule(
                f"op {op!r} runs {s.end[i] - s.start[i]!r} s, its duration is {cg.duration[i]!r} s"
            )
        for k in range(cg.succ_ptr[i], cg.succ_ptr[i + 1]):
            j = cg.succ_idx[k]
            if s.start[j] < s.end[i] - eps:
                raise InvalidSchedule(
                    f"op {cg.ids[j]!r} starts at {s.start[j]!r} before its predecessor "
                    f"{op!r} ends at {s.end[i]!r}"
                )
    # Capacity: sweep each resource's intervals; ends at an instant free the slot before
    # starts at the same instant. Zero-length ops occupy no slot.
    events: dict[int, list[tuple[float, int, int]]] = {}
    for i in range(cg.n):
        if s.end[i] - s.start[i] > eps:
            ev = events.setdefault(cg.resource[i], [])
            ev.append((s.start[i] + eps, 1, i))
            ev.append((s.end[i] - eps, -1, i))
    for r, ev in events.items():
        ev.sort(key=lambda e: (e[0], e[1]))
        running = 0
        for _, delta, i in ev:
            running += delta
            if running > cg.capacity[r]:
                raise InvalidSchedule(
                    f"resource {cg.resource_names[r]!r} runs {running} ops at once when "
                    f"{cg.ids[i]!r} starts (capacity {cg.capacity[r]})"
                )
