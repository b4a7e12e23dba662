"""One placement run: partition, insert send/receive nodes, schedule, simulate, validate.

:func:`run` measures the partitioning time (wall clock of the partitioner, as the thesis'
Figs. 7.3 and 7.6 do), validates the placement against Sec. 4.1 and the simulated schedule
with :func:`~commsched.sim.devices.check_device_schedule`, and returns the numbers the
thesis reports. :func:`run_all` partitions once per partitioner and schedules that
placement with every scheduler (traffic does not depend on the scheduler, Sec. 5.1).

Examples
--------
>>> import numpy as np
>>> from commsched.placement.model import Cluster, Problem
>>> p = Problem.build(ops=[10, 20, 30], size=[5, 5, 5], edges=[(0, 1), (0, 2)])
>>> c = Cluster(np.array([10.0, 10.0]), np.array([1e6, 1e6]), np.array([0, 1]),
...             np.array([[np.inf, 5.0], [5.0, np.inf]]))
>>> [(r.partitioner, r.scheduler, r.makespan) for r in run_all(p, c, ["hashing"], ["pct"])]
[('hashing', 'pct', 5.0)]
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from commsched.errors import CommschedError
from commsched.placement.model import (
    Cluster,
    Options,
    Placement,
    Problem,
    check_fits,
    check_placement,
    identity_hashes,
    traffic,
)
from commsched.placement.partitioners import PARTITIONERS
from commsched.placement.schedulers import SCHEDULERS, published_chooser
from commsched.placement.sendrecv import insert_send_recv
from commsched.sim.devices import (
    DeviceSchedule,
    ExecGraph,
    check_device_schedule,
    simulate_devices,
    simulate_lowest_clock,
)

__all__ = ["RunResult", "partition", "run", "run_all", "schedule"]


@dataclass
class RunResult:
    """The outcome of one partitioner x scheduler run."""

    partitioner: str
    scheduler: str
    makespan: float
    traffic: float
    partition_s: float
    schedule_s: float
    placement: np.ndarray = field(repr=False)
    exec_graph: ExecGraph = field(repr=False)
    schedule: DeviceSchedule = field(repr=False)

    def summary(self) -> dict[str, float | str]:
        """The numbers ``commsched place --json`` prints."""
        return {"partitioner": self.partitioner, "scheduler": self.scheduler,
                "makespan": self.makespan, "traffic": self.traffic,
                "partition_s": self.partition_s, "schedule_s": self.schedule_s}


def _lookup(registry: dict[str, object], name: str, what: str) -> None:
    if name not in registry:
        raise CommschedError(f"unknown {what} {name!r} (known: {', '.join(registry)})")


def partition(p: Problem, c: Cluster, name: str, opts: Options) -> tuple[Placement, float]:
    """Run partitioner ``name``; the validated placement and its wall time (s)."""
    _lookup(PARTITIONERS, name, "partitioner")  # type: ignore[arg-type]
    t0 = time.perf_counter()
    placement = PARTITIONERS[name](p, c, opts)
    dt = time.perf_counter() - t0
    check_placement(p, c, placement.device, strict=opts.semantics == "thesis")
    return placement, dt


def schedule(p: Problem, c: Cluster, placement: Placement, name: str, opts: Options,
             link_contention: bool = False, record_memory: bool = False,
             ) -> tuple[ExecGraph, DeviceSchedule, float]:
    """Insert send/receive nodes, simulate with scheduler ``name`` and validate.

    Under ``published-code`` the published simulator's loop runs
    (:func:`~commsched.sim.devices.simulate_lowest_clock`, the Java hash-set orders drawn
    from ``opts.seed``); it has no link contention.
    """
    _lookup(SCHEDULERS, name, "scheduler")  # type: ignore[arg-type]
    published = opts.semantics == "published-code"
    if published and link_contention:
        raise CommschedError("link contention is an extension of the thesis semantics; "
                             "the published code has none")
    t0 = time.perf_counter()
    eg = insert_send_recv(p, c, placement.device, opts.send_ops)
    if published:
        s = simulate_lowest_clock(eg, published_chooser(name, eg, c, opts),
                                  identity_hashes(eg.n, opts.seed),
                                  source_order=placement.order, record_memory=record_memory)
    else:
        s = simulate_devices(eg, SCHEDULERS[name](eg, c, opts),
                             link_contention=link_contention, record_memory=record_memory)
    dt = time.perf_counter() - t0
    check_device_schedule(eg, s)
    return eg, s, dt


def run(p: Problem, c: Cluster, partitioner: str, scheduler: str,
        opts: Options | None = None, link_contention: bool = False) -> RunResult:
    """One run of ``partitioner`` and ``scheduler``."""
    return run_all(p, c, [partitioner], [scheduler], opts, link_contention)[0]


def run_all(p: Problem, c: Cluster, partitioners: Sequence[str], schedulers: Sequence[str],
            opts: Options | None = None, link_contention: bool = False,
            record_memory: bool = False) -> list[RunResult]:
    """Every combination; each partitioner runs once, its placement is reused."""
    opts = opts or Options()
    check_fits(p, c, strict=opts.semantics == "thesis")
    out: list[RunResult] = []
    for pn in partitioners:
        placement, pt = partition(p, c, pn, opts)
        tr = traffic(p, placement.device)
        for sn in schedulers:
            eg, s, st = schedule(p, c, placement, sn, opts, link_contention, record_memory)
            if abs(eg.traffic - tr) > 1e-9 * max(1.0, tr):
                raise AssertionError(f"traffic {eg.traffic} != Eq. 2.2 {tr}")  # a bug
            out.append(RunResult(pn, sn, s.makespan, tr, pt, st, placement.device, eg, s))
    return out
