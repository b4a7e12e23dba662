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
from commsched.placement.compiled import COMPILED, simulate_published, simulate_scheduler
from commsched.placement.model import (
    Cluster,
    Options,
    Placement,
    Problem,
    check_fits,
    check_placement,
    traffic,
)
from commsched.placement.partitioners import PARTITIONERS
from commsched.placement.schedulers import DEVICE_SCHEDULERS
from commsched.placement.sendrecv import insert_send_recv
from commsched.sim.devices import (
    DeviceSchedule,
    ExecGraph,
    check_device_schedule,
    simulate_devices,
)

__all__ = ["RunResult", "partition", "run", "run_all", "schedule"]


@dataclass
class RunResult:
    """The outcome of one partitioner x scheduler run.

    Attributes
    ----------
    partitioner, scheduler : str
        The registries' names.
    makespan : float
        The simulated execution time (Sec. 2.5).
    traffic : float
        Bytes on cross-device edges (Eq. 2.2).
    partition_s, schedule_s : float
        Wall times of partitioning and of simulation (seconds); the first scheduler run
        on a placement also counts the insertion of send and receive nodes, which the
        others reuse.
    placement : numpy.ndarray
        The device of every node.
    exec_graph : ExecGraph
        The executed graph with send and receive nodes (Sec. 2.4).
    schedule : DeviceSchedule
        The validated schedule.
    """

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
        """The numbers ``commsched place --json`` prints.

        Returns
        -------
        dict
            Names, makespan, traffic and the two wall times.
        """
        return {"partitioner": self.partitioner, "scheduler": self.scheduler,
                "makespan": self.makespan, "traffic": self.traffic,
                "partition_s": self.partition_s, "schedule_s": self.schedule_s}


def partition(p: Problem, c: Cluster, name: str, opts: Options) -> tuple[Placement, float]:
    """Run partitioner ``name`` and validate its placement.

    Parameters
    ----------
    p, c : Problem, Cluster
        The graph to partition and the devices.
    name : str
        A member of :data:`~commsched.placement.partitioners.PARTITIONERS` or an alias.
    opts : Options
        Semantics, seed and send operations.

    Returns
    -------
    Placement
        The placement (devices and the published code's source order).
    float
        The partitioner's wall time in seconds (Figs. 7.3, 7.6 report it).

    Raises
    ------
    CommschedError
        For an unknown name, or (:class:`~commsched.placement.model.PlacementError`) a
        placement that breaks Sec. 4.1's constraints.

    References
    ----------
    Laich 2017, Ch. 4 (the partitioners) and Sec. 4.1 (the constraints).
    """
    part = PARTITIONERS[name]
    t0 = time.perf_counter()
    placement = part(p, c, opts)
    dt = time.perf_counter() - t0
    check_placement(p, c, placement.device, strict=opts.semantics == "thesis")
    return placement, dt


def schedule(p: Problem, c: Cluster, placement: Placement, name: str, opts: Options,
             link_contention: bool = False, record_memory: bool = False,
             eg: ExecGraph | None = None) -> tuple[ExecGraph, DeviceSchedule, float]:
    """Insert send/receive nodes, simulate with scheduler ``name`` and validate.

    Under ``published-code`` the published simulator's loop runs
    (:func:`~commsched.placement.compiled.simulate_published`, compiled, the Java hash-set
    orders drawn from ``opts.seed``); it has no link contention and knows the Java
    code's three schedulers only. Under ``thesis`` the thesis' schedulers run compiled
    (:func:`~commsched.placement.compiled.simulate_scheduler`, the schedule their ready
    queues give in :func:`~commsched.sim.devices.simulate_devices`); a scheduler added to
    the registry without a kernel runs through its queues.

    Parameters
    ----------
    p, c : Problem, Cluster
        The graph that ``placement`` places, and the devices.
    placement : Placement
        A placement of ``p`` on ``c`` (:func:`partition`).
    name : str
        A member of :data:`~commsched.placement.schedulers.DEVICE_SCHEDULERS` or an alias.
    opts : Options
        Semantics, seed and send operations.
    link_contention : bool
        Serialise transfers per device pair (our extension; thesis semantics only).
    record_memory : bool
        Record each device's memory over time in the schedule.
    eg : ExecGraph, optional
        The executed graph of ``placement`` with ``opts.send_ops``, when the caller has it
        (it does not depend on the scheduler: :func:`run_all` inserts once per
        placement); inserted here otherwise.

    Returns
    -------
    ExecGraph
        The executed graph (Sec. 2.4).
    DeviceSchedule
        The validated schedule.
    float
        The wall time of insertion (when done here) and simulation in seconds.

    Raises
    ------
    CommschedError
        For an unknown name, link contention under ``published-code``, or a scheduler
        the published code does not have.

    References
    ----------
    Laich 2017, Sec. 2.4 (send and receive nodes), Sec. 2.5 (execution time), Ch. 5.
    """
    make = DEVICE_SCHEDULERS[name]
    published = opts.semantics == "published-code"
    if published and link_contention:
        raise CommschedError("link contention is an extension of the thesis semantics; "
                             "the published code has none")
    t0 = time.perf_counter()
    if eg is None:
        eg = insert_send_recv(p, c, placement.device, opts.send_ops)
    if published:
        s = simulate_published(eg, c, name, opts, placement.order, record_memory)
    elif DEVICE_SCHEDULERS.canonical(name) in COMPILED:
        s = simulate_scheduler(eg, c, name, opts, link_contention, record_memory)
    else:
        s = simulate_devices(eg, make(eg, c, opts),
                             link_contention=link_contention, record_memory=record_memory)
    dt = time.perf_counter() - t0
    check_device_schedule(eg, s)
    return eg, s, dt


def run(p: Problem, c: Cluster, partitioner: str, scheduler: str,
        opts: Options | None = None, link_contention: bool = False) -> RunResult:
    """One run of ``partitioner`` and ``scheduler``.

    Parameters
    ----------
    p, c, opts, link_contention
        As in :func:`run_all`.
    partitioner : str
        A partitioner's name or alias.
    scheduler : str
        A per-device scheduler's name or alias.

    Returns
    -------
    RunResult

    Raises
    ------
    CommschedError
        As :func:`run_all`.
    """
    return run_all(p, c, [partitioner], [scheduler], opts, link_contention)[0]


def run_all(p: Problem, c: Cluster, partitioners: Sequence[str], schedulers: Sequence[str],
            opts: Options | None = None, link_contention: bool = False,
            record_memory: bool = False) -> list[RunResult]:
    """Every combination; each partitioner runs once, its placement is reused.

    Parameters
    ----------
    p, c : Problem, Cluster
        The graph and the devices every combination runs on.
    partitioners : sequence of str
        Partitioners' names or aliases (results carry the registry's names).
    schedulers : sequence of str
        Per-device schedulers' names or aliases.
    opts : Options, optional
        Semantics, seed and send operations (default ``Options()``: the thesis).
    link_contention : bool
        Serialise transfers per device pair (our extension).
    record_memory : bool
        Record each device's memory over time.

    Returns
    -------
    list of RunResult
        Partitioner-major, in the given orders.

    Raises
    ------
    CommschedError
        An unknown name; a unit that fits no device
        (:class:`~commsched.placement.model.PlacementError`); link contention under
        ``published-code``.

    References
    ----------
    Laich 2017, Sec. 5.1 (traffic does not depend on the scheduler), Ch. 7.
    """
    opts = opts or Options()
    partitioners = [PARTITIONERS.canonical(n) for n in partitioners]
    schedulers = [DEVICE_SCHEDULERS.canonical(n) for n in schedulers]
    check_fits(p, c, strict=opts.semantics == "thesis")
    out: list[RunResult] = []
    for pn in partitioners:
        placement, pt = partition(p, c, pn, opts)
        tr = traffic(p, placement.device)
        eg: ExecGraph | None = None  # inserted by the first scheduler's run, then shared
        for sn in schedulers:
            eg, s, st = schedule(p, c, placement, sn, opts, link_contention, record_memory,
                                 eg)
            if abs(eg.traffic - tr) > 1e-9 * max(1.0, tr):
                raise AssertionError(f"traffic {eg.traffic} != Eq. 2.2 {tr}")  # a bug
            out.append(RunResult(pn, sn, s.makespan, tr, pt, st, placement.device, eg, s))
    return out
