"""All-reduce plans: fused groups, their partitions and priorities, as a versioned file.

A *plan* says how the gradients of one data-parallel training iteration are all-reduced.
PACE (Bao, Peng, Chen, Wu; INFOCOM 2020) produces one (Sec. V fuses all-reduce operators
into groups; Sec. IV-B's preemptive schedule splits a group into partitions; Sec. VI gives
each partition the priority t of the time slot where its execution starts, smaller first),
and so does every baseline policy (WFBP: one group per gradient; DDP and Horovod: buckets).
The simulator runs a plan and the live layer (DistributedDataParallel) enforces it, so the
format is the contract between them.

Execution semantics (what a simulator and an enforcement layer must both do):

* A group's buffer is its member tensors concatenated in the listed order; a partition is
  the byte range ``[offset, offset + bytes)`` of that buffer. The partitions of a group
  cover its buffer exactly, without overlap.
* A partition becomes *ready* when every member tensor of its group has been produced
  (the group's gradients are computed).
* One all-reduce runs at a time (one communication channel). Whenever the channel is free,
  the ready partition with the smallest ``(priority, group index, offset)`` starts and runs
  to completion. Preemption therefore happens at partition boundaries: a partition of a
  later group with a smaller priority runs between two partitions of an earlier group.
* Every worker executes the same plan, so every worker all-reduces in the same order.

Tensors are named by the trace's variable names (:func:`commsched.model.traced.variables`;
for PyTorch traces, ``model.named_parameters()`` names) with their sizes in bytes.

File format (JSON, ``schema_version`` 1)::

    {"schema_version": 1,
     "format": "commsched-allreduce-plan",
     "policy": "pace",                       # the policy that made it
     "meta": {...},                          # free-form provenance: trace, workers, bandwidth,
                                             # slot length, cost model, ...
     "groups": [
       {"tensors": [{"name": "conv1/kernel", "bytes": 37632}, ...],
        "partitions": [{"offset": 0, "bytes": 20000, "priority": 3},
                       {"offset": 20000, "bytes": 17632, "priority": 9}]},
       ...]}

Examples
--------
>>> p = Plan("wfbp", (Group((("w", 8),), (Partition(0, 8, 0),)),
...                   Group((("b", 4), ("c", 4)), (Partition(0, 2, 1), Partition(2, 6, 0)))))
>>> p.groups[1].bytes
8
>>> [(g, part.offset) for g, part in p.priority_order()]
[(0, 0), (1, 2), (1, 0)]
>>> Plan.from_dict(p.to_dict()) == p
True
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from commsched.atomic import atomic_write_text
from commsched.errors import CommschedError
from commsched.io.structured import read_json

__all__ = [
    "PLAN_FORMAT",
    "SCHEMA_VERSION",
    "Group",
    "Partition",
    "Plan",
    "PlanError",
    "load_plan",
    "save_plan",
]

#: Version of the plan file format written by :func:`save_plan`.
SCHEMA_VERSION = 1
#: Value of the ``format`` field, so that other JSON files are not mistaken for plans.
PLAN_FORMAT = "commsched-allreduce-plan"


class PlanError(CommschedError):
    """A plan that is malformed or does not fit the model it is used with.

    A :class:`~commsched.errors.CommschedError`: one line naming the file or field.
    """


@dataclass(frozen=True)
class Partition:
    """A byte range of a group's buffer, all-reduced as one operation.

    Parameters
    ----------
    offset : int
        First byte in the group's buffer.
    bytes : int
        Its size (> 0).
    priority : int
        Smaller runs first (>= 0).

    References
    ----------
    PACE (Bao et al., INFOCOM 2020), Sec. II-C: preemption at partition boundaries.
    """

    offset: int
    bytes: int
    priority: int


@dataclass(frozen=True)
class Group:
    """Fused tensors and the partitions of their buffer.

    Parameters
    ----------
    tensors : tuple of (str, int)
        ``(name, bytes)`` in buffer order.
    partitions : tuple of Partition
        Covering the buffer without gaps or overlaps (checked by :class:`Plan`).

    References
    ----------
    PACE (Bao et al., INFOCOM 2020), Sec. V (tensor fusion).
    """

    tensors: tuple[tuple[str, int], ...]
    partitions: tuple[Partition, ...]

    @property
    def bytes(self) -> int:
        """Size of the group's buffer (the sum of its tensors' sizes)."""
        return sum(b for _, b in self.tensors)

    @property
    def names(self) -> tuple[str, ...]:
        """The tensors' names in buffer order."""
        return tuple(n for n, _ in self.tensors)


@dataclass(frozen=True)
class Plan:
    """An all-reduce plan; see the module docstring for the format and its semantics.

    Parameters
    ----------
    policy : str
        The policy that made it (non-empty).
    groups : tuple of Group
        Every tensor in exactly one group.
    meta : mapping
        Free-form provenance (slot length, PACE's prediction).

    Raises
    ------
    PlanError
        On the first problem: an empty policy, a tensor in two groups or of size <= 0,
        partitions that do not cover their buffer.
    """

    policy: str
    groups: tuple[Group, ...]
    meta: Mapping[str, Any] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        if not self.policy:
            raise PlanError("plan: 'policy' is empty")
        seen: dict[str, int] = {}
        for gi, g in enumerate(self.groups):
            if not g.tensors:
                raise PlanError(f"plan: group {gi} has no tensors")
            for name, size in g.tensors:
                if name in seen:
                    raise PlanError(f"plan: tensor {name!r} is in groups {seen[name]} and {gi}")
                if size <= 0:
                    raise PlanError(f"plan: group {gi}: tensor {name!r} has bytes {size} <= 0")
                seen[name] = gi
            end = 0
            for part in sorted(g.partitions, key=lambda p: p.offset):
                if part.bytes <= 0 or part.priority < 0:
                    raise PlanError(
                        f"plan: group {gi}: partition at offset {part.offset} needs bytes > 0 "
                        f"and priority >= 0 (got {part.bytes}, {part.priority})"
                    )
                if part.offset != end:
                    raise PlanError(
                        f"plan: group {gi}: partitions must cover bytes 0..{g.bytes} without "
                        f"gaps or overlaps (expected offset {end}, got {part.offset})"
                    )
                end += part.bytes
            if end != g.bytes:
                raise PlanError(
                    f"plan: group {gi}: partitions cover {end} bytes, the tensors {g.bytes}"
                )

    @property
    def tensors(self) -> dict[str, int]:
        """``{name: bytes}`` of every tensor in the plan."""
        return {n: b for g in self.groups for n, b in g.tensors}

    def priority_order(self) -> list[tuple[int, Partition]]:
        """Every partition in the order the channel prefers them.

        Returns
        -------
        list of (int, Partition)
            ``(group index, partition)`` sorted by ``(priority, group index, offset)``.
        """
        parts = [(gi, p) for gi, g in enumerate(self.groups) for p in g.partitions]
        return sorted(parts, key=lambda gp: (gp[1].priority, gp[0], gp[1].offset))

    def check_tensors(self, sizes: Mapping[str, int], source: str = "plan") -> None:
        """Check that the plan covers exactly the tensors of a model.

        Parameters
        ----------
        sizes : mapping
            ``{name: bytes}`` of the model's gradients.
        source : str
            Names the plan in messages.

        Raises
        ------
        PlanError
            For a tensor in no group, of another size, or not of the model.
        """
        have = self.tensors
        for name, size in sizes.items():
            if name not in have:
                raise PlanError(f"{source}: tensor {name!r} of the model is in no group")
            if have[name] != size:
                raise PlanError(
                    f"{source}: tensor {name!r} has {have[name]} bytes, the model {size}"
                )
        extra = sorted(set(have) - set(sizes))
        if extra:
            raise PlanError(f"{source}: tensor {extra[0]!r} is not a tensor of the model")

    def to_dict(self) -> dict[str, Any]:
        """The plan's JSON form (module docstring).

        Returns
        -------
        dict
            ``schema_version``, ``format``, ``policy``, ``meta`` and ``groups``.
        """
        return {
            "schema_version": SCHEMA_VERSION,
            "format": PLAN_FORMAT,
            "policy": self.policy,
            "meta": dict(self.meta),
            "groups": [
                {
                    "tensors": [{"name": n, "bytes": b} for n, b in g.tensors],
                    "partitions": [
                        {"offset": p.offset, "bytes": p.bytes, "priority": p.priority}
                        for p in g.partitions
                    ],
                }
                for g in self.groups
            ],
        }

    @classmethod
    def from_dict(cls, data: Any, source: str = "plan") -> Plan:
        """Build a plan from its JSON form.

        Parameters
        ----------
        data : object
            The parsed JSON.
        source : str
            Names the plan in messages (its file).

        Returns
        -------
        Plan
            The validated plan.

        Raises
        ------
        PlanError
            One line naming the field: not a plan, another schema version, a missing
            field or a wrong type, or an invalid plan.
        """

        def need(obj: Any, key: str, kind: type | tuple[type, ...], where: str) -> Any:
            if not isinstance(obj, dict) or key not in obj:
                raise PlanError(f"{source}: {where}: missing field {key!r}")
            value = obj[key]
            if not isinstance(value, kind) or isinstance(value, bool):
                raise PlanError(f"{source}: {where}.{key}: wrong type {type(value).__name__}")
            return value

        if not isinstance(data, dict):
            raise PlanError(f"{source}: not a plan (expected a JSON object)")
        if data.get("format") != PLAN_FORMAT:
            raise PlanError(f"{source}: not a plan ('format' is not {PLAN_FORMAT!r})")
        version = need(data, "schema_version", int, "top level")
        if version != SCHEMA_VERSION:
            raise PlanError(
                f"{source}: schema_version {version} is not supported (this reader: "
                f"{SCHEMA_VERSION})"
            )
        groups = []
        for gi, g in enumerate(need(data, "groups", list, "top level")):
            where = f"groups[{gi}]"
            tensors = tuple(
                (need(t, "name", str, f"{where}.tensors[{ti}]"),
                 need(t, "bytes", int, f"{where}.tensors[{ti}]"))
                for ti, t in enumerate(need(g, "tensors", list, where))
            )
            parts = tuple(
                Partition(need(p, "offset", int, f"{where}.partitions[{pi}]"),
                          need(p, "bytes", int, f"{where}.partitions[{pi}]"),
                          need(p, "priority", int, f"{where}.partitions[{pi}]"))
                for pi, p in enumerate(need(g, "partitions", list, where))
            )
            groups.append(Group(tensors, parts))
        meta = data.get("meta", {})
        if not isinstance(meta, dict):
            raise PlanError(f"{source}: meta: wrong type {type(meta).__name__}")
        try:
            return cls(need(data, "policy", str, "top level"), tuple(groups), meta)
        except PlanError as e:
            raise PlanError(str(e).replace("plan:", f"{source}:", 1)) from None


def save_plan(plan: Plan, path: str | os.PathLike[str]) -> None:
    """Write ``plan`` as JSON, atomically (a failed write leaves no half-written file).

    Parameters
    ----------
    plan : Plan
        The plan.
    path : path
        The file.
    """
    atomic_write_text(path, json.dumps(plan.to_dict(), indent=1, sort_keys=True) + "\n")


def load_plan(path: str | os.PathLike[str]) -> Plan:
    """Read and validate a plan file.

    Parameters
    ----------
    path : path
        The file.

    Returns
    -------
    Plan
        The plan.

    Raises
    ------
    PlanError
        One line naming the file and the field (unreadable, invalid JSON, invalid plan).
    """
    try:
        data = read_json(path)
    except CommschedError as e:
        raise PlanError(str(e)) from None
    return Plan.from_dict(data, source=str(path))
