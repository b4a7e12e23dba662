"""The thesis' simulator: a partitioned graph executed on heterogeneous devices.

Laich (B.Sc. thesis, Stuttgart 2017) simulates the execution of a partitioned dataflow graph
with send and receive nodes inserted (Sec. 2.4): every device runs one node at a time,
without preemption, and may idle when no node is executable (Sec. 5.1); a node becomes
*executable* on its device once every input has arrived (a cross-device input arrives
``size / rate`` after its send node ended). Sec. 3.2 keeps one local clock per device and
lets the device with the *lowest local timestamp* take the next decision, so no decision is
made before every input that could arrive earlier is known (its Fig. 3.2: device 1 must start
node 3 at 50 rather than after node 5).

We implement the same rule as a discrete-event simulation: events (node ends, tensor
arrivals) are processed in time order, and at each instant every free device, in device-id
order, takes a decision among its executable nodes. Both give the same schedule: a device
with the lowest clock decides exactly when no earlier event is pending. The per-device
choice is delegated to a ready queue (:class:`ReadyQueue`) made by a scheduler
(:mod:`commsched.placement.schedulers`).

Transfers do not contend for links (as in the thesis). ``link_contention=True`` (our
extension, off by default) serialises the transfers of each directed device pair in the
order their send nodes end; with ``host_ports=True`` as well, each device has one
outgoing and one incoming port instead (a full-duplex host link), so the transfers leaving
a device and those entering one are serialised whatever their peers (a transfer starts
when its sender's outgoing and its receiver's incoming port are both free and holds both).

Outputs (:class:`DeviceSchedule`): start and end of every executed node, makespan (Eq. 2.1),
busy time per device (the utilisation Gantt of Fig. 7.9), the number of executable nodes
before every decision (Fig. 7.10) and the memory the devices hold for produced tensors over
time (Sec. 3.1.6: a node's output stays in memory until its last direct successor starts;
an output nobody consumes is dropped at once).

Examples
--------
Two nodes on device 0, the second one sent to device 1 (rate 2, size 4: 2 time units):

>>> eg = ExecGraph.build(n_devices=2, device=[0, 0, 0, 1], duration=[1.0, 1.0, 0.5, 0.0],
...                      kind=[0, 0, 1, 2], origin=[0, 1, 1, 1], tensor=[1.0, 4.0, 0.0, 4.0],
...                      edges=[(0, 1, 0.0), (1, 2, 0.0), (2, 3, 2.0)], traffic=4.0)
>>> s = simulate_devices(eg, [FifoQueue(), FifoQueue()])
>>> s.makespan, s.start
(4.5, [0.0, 1.0, 2.0, 4.5])
>>> check_device_schedule(eg, s)
"""

from __future__ import annotations

import gc
import heapq
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Generic, NamedTuple, Protocol, TypeVar, overload

import numpy as np

from commsched.model.graph import CompiledGraph
from commsched.sim.priority import Schedule
from commsched.sim.validate import InvalidSchedule

__all__ = [
    "COMPUTE",
    "RECV",
    "SEND",
    "DeviceSchedule",
    "ExecArrays",
    "ExecGraph",
    "FifoQueue",
    "ReadyQueue",
    "SimState",
    "check_device_schedule",
    "simulate_devices",
]

_T = TypeVar("_T")

#: Node kinds of an executed graph.
COMPUTE, SEND, RECV = 0, 1, 2


class ExecArrays(NamedTuple):
    """The node and edge arrays of an :class:`ExecGraph` (int64 indices, float64 times and
    sizes), the one copy of its data."""

    device: np.ndarray
    duration: np.ndarray
    kind: np.ndarray
    origin: np.ndarray
    tensor: np.ndarray
    succ_ptr: np.ndarray
    succ_idx: np.ndarray
    succ_delay: np.ndarray
    pred_ptr: np.ndarray
    pred_idx: np.ndarray


class _AsList(Generic[_T]):
    """The array of the same name in :attr:`ExecGraph.arrays` as a Python list, made on
    first use and kept (pure-Python loops index lists several times faster than arrays)."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, eg: None, owner: type) -> _AsList[_T]: ...

    @overload
    def __get__(self, eg: ExecGraph, owner: type | None = None) -> list[_T]: ...

    def __get__(self, eg: ExecGraph | None, owner: type | None = None
                ) -> list[_T] | _AsList[_T]:
        if eg is None:  # looked up on the class
            return self
        value: list[_T] = getattr(eg.arrays, self.name).tolist()
        eg.__dict__[self.name] = value  # later reads find the list before this descriptor
        return value


@dataclass(frozen=True, eq=False)
class ExecGraph:
    """A partitioned graph with send/receive nodes, as compact arrays (nodes 0..n-1).

    ``device[i]`` runs node i for ``duration[i]``; ``kind[i]`` is :data:`COMPUTE`,
    :data:`SEND` or :data:`RECV`; ``origin[i]`` is the original node (for send and receive
    nodes: the producer whose tensor they carry); ``tensor[i]`` the size of the output the
    node leaves in its device's memory. Edges are CSR lists with ``succ_delay`` the transfer
    time on the edge (non-zero only from a send to its receive). ``traffic`` is Eq. 2.2.

    The data are :attr:`arrays` (for vectorised code and compiled kernels); each of its
    fields is also an attribute of the graph as a Python list (``eg.device``, ...), made
    from the array on first use, for the pure-Python simulators.
    """

    n_devices: int
    arrays: ExecArrays
    traffic: float

    device = _AsList[int]()
    duration = _AsList[float]()
    kind = _AsList[int]()
    origin = _AsList[int]()
    tensor = _AsList[float]()
    succ_ptr = _AsList[int]()
    succ_idx = _AsList[int]()
    succ_delay = _AsList[float]()
    pred_ptr = _AsList[int]()
    pred_idx = _AsList[int]()

    @property
    def n(self) -> int:
        return len(self.arrays.device)

    def __eq__(self, other: object) -> bool:
        """The same devices, traffic and node and edge data, element by element."""
        return (isinstance(other, ExecGraph) and self.n_devices == other.n_devices
                and self.traffic == other.traffic
                and all(np.array_equal(a, b) for a, b in zip(self.arrays, other.arrays,
                                                              strict=True)))

    @staticmethod
    def build(n_devices: int, device: Sequence[int] | np.ndarray,
              duration: Sequence[float] | np.ndarray, kind: Sequence[int] | np.ndarray,
              origin: Sequence[int] | np.ndarray, tensor: Sequence[float] | np.ndarray,
              edges: Sequence[tuple[int, int, float]] | np.ndarray,
              traffic: float) -> ExecGraph:
        """Assemble the CSR arrays from an edge list (edges keep their order within a
        source and within a target).

        Parameters
        ----------
        n_devices : int
            Devices ``0..n_devices-1``.
        device, duration, kind, origin, tensor : sequence or numpy.ndarray
            Per node, the fields of the class docstring (``duration`` in the graph's
            time unit, ``tensor`` in bytes).
        edges : sequence of (int, int, float) or numpy.ndarray
            ``(u, v, delay)``: ``v`` needs ``u``'s output, ``delay`` after ``u`` ends; an
            array has three columns (shape ``(m, 3)``).
        traffic : float
            Bytes sent between devices (thesis Eq. 2.2).

        Returns
        -------
        ExecGraph
        """
        n = len(device)
        e = np.asarray(edges, dtype=float).reshape(-1, 3)
        u, v = e[:, 0].astype(np.int64), e[:, 1].astype(np.int64)
        by_u = np.argsort(u, kind="stable")
        by_v = np.argsort(v, kind="stable")
        sp = np.zeros(n + 1, dtype=np.int64)
        pp = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(u, minlength=n), out=sp[1:])
        np.cumsum(np.bincount(v, minlength=n), out=pp[1:])
        i64 = np.int64
        arrays = ExecArrays(np.asarray(device, dtype=i64), np.asarray(duration, dtype=float),
                            np.asarray(kind, dtype=i64), np.asarray(origin, dtype=i64),
                            np.asarray(tensor, dtype=float), sp, v[by_u], e[by_u, 2], pp,
                            u[by_v])
        return ExecGraph(n_devices, arrays, float(traffic))

    def compiled(self, names: Sequence[str]) -> CompiledGraph:
        """This graph as a :class:`~commsched.model.graph.CompiledGraph` with one resource
        ``device <d>`` of capacity 1 per device (for :mod:`commsched.io.chrome`).

        Parameters
        ----------
        names : sequence of str
            One op id per node.

        Returns
        -------
        CompiledGraph
            Without priorities; edge delays are dropped.
        """
        return CompiledGraph(
            ids=list(names), duration=list(self.duration), resource=list(self.device),
            priority=[None] * self.n,
            indegree=[self.pred_ptr[i + 1] - self.pred_ptr[i] for i in range(self.n)],
            succ_ptr=list(self.succ_ptr), succ_idx=list(self.succ_idx),
            resource_names=[f"device {d}" for d in range(self.n_devices)],
            capacity=[1] * self.n_devices)


@dataclass
class SimState:
    """What a ready queue may look at when its device decides (read only)."""

    time: float
    busy: list[bool]
    queues: Sequence[ReadyQueue]
    unstarted: list[int]  # per node: direct predecessors that have not started yet
    #: nodes whose ``unstarted`` count has dropped to 1 or 0 since a queue last cleared
    #: this list (a queue that tracks counts may empty it; the simulator only appends)
    low: list[int] = field(default_factory=list)


class ReadyQueue(Protocol):
    """The executable nodes of one device; ``pop`` is the scheduler's decision."""

    def push(self, node: int) -> None:
        """Add a node that just became executable.

        Parameters
        ----------
        node : int
            The node's index in the :class:`ExecGraph`.
        """

    def pop(self, state: SimState) -> int:
        """Remove and return the node the device runs next (the queue is not empty).

        Parameters
        ----------
        state : SimState
            What the simulation exposes at this decision.

        Returns
        -------
        int
            A node that was pushed and not yet popped.
        """

    def __len__(self) -> int: ...


class FifoQueue:
    """First in, first out (thesis Sec. 5.2)."""

    def __init__(self) -> None:
        self._q: deque[int] = deque()

    def push(self, node: int) -> None:
        """Append ``node`` (see :meth:`ReadyQueue.push`).

        Parameters
        ----------
        node : int
            Becomes the last in line.
        """
        self._q.append(node)

    def pop(self, state: SimState) -> int:
        """The node executable longest, in push order.

        Parameters
        ----------
        state : SimState
            Unused: FIFO needs no look at the simulation.

        Returns
        -------
        int
        """
        return self._q.popleft()

    def __len__(self) -> int:
        return len(self._q)


@dataclass
class DeviceSchedule:
    """The simulated execution of an :class:`ExecGraph`."""

    start: list[float]
    end: list[float]
    makespan: float
    traffic: float
    busy: list[float]  # per device: time spent running nodes
    decisions: list[tuple[int, float, int, int]]  # (device, time, executable before, node)
    peak_memory: list[float]  # per device: most tensor memory held at once
    memory: list[tuple[float, int, float]] = field(default_factory=list)  # (time, device, held)

    def as_schedule(self, names: Sequence[str]) -> Schedule:
        """Start and end times as a :class:`~commsched.sim.priority.Schedule`.

        Parameters
        ----------
        names : sequence of str
            Op id of each node, in node order.

        Returns
        -------
        Schedule
        """
        return Schedule(list(names), list(self.start), list(self.end))

    def utilisation(self) -> list[float]:
        """Busy time / makespan per device."""
        return [b / self.makespan if self.makespan > 0 else 0.0 for b in self.busy]


def simulate_devices(eg: ExecGraph, queues: Sequence[ReadyQueue],
                     link_contention: bool = False, record_memory: bool = False,
                     host_ports: bool = False) -> DeviceSchedule:
    """Simulate ``eg`` with one ready queue per device; see the module docstring.

    Parameters
    ----------
    eg : ExecGraph
        The partitioned graph; times in the graph's unit (seconds for traced graphs).
    queues : sequence of ReadyQueue
        One per device, in device order, fresh (a scheduler's queues,
        :mod:`commsched.placement.schedulers`).
    link_contention : bool, optional
        Serialise the transfers of each directed device pair (our extension; off in the
        thesis).
    record_memory : bool, optional
        Also keep the memory series (every change); the peak per device is always
        computed.
    host_ports : bool, optional
        With ``link_contention``: serialise per device port (all transfers out of a
        device, all transfers into one) rather than per directed pair (our extension: the
        live placement's emulated hosts, each behind one shaped full-duplex link).

    Returns
    -------
    DeviceSchedule

    Raises
    ------
    ValueError
        ``len(queues) != eg.n_devices``, or ``host_ports`` without ``link_contention``.
    InvalidSchedule
        A node never became executable (the graph has a cycle).

    References
    ----------
    .. [1] Laich, B.Sc. thesis, Stuttgart 2017, Sec. 3.2 (lowest local clock decides),
       Sec. 5.1 (devices run one node at a time), Eq. 2.1 (makespan).

    Examples
    --------
    Device 0 sends one tensor to device 1 and one to device 2 (3 time units each): per
    pair they overlap, through device 0's one outgoing port the second waits.

    >>> eg = ExecGraph.build(n_devices=3, device=[0, 0, 1, 0, 2],
    ...                      duration=[1.0, 0.0, 0.0, 0.0, 0.0], kind=[0, 1, 2, 1, 2],
    ...                      origin=[0] * 5, tensor=[3.0, 0.0, 3.0, 0.0, 3.0],
    ...                      edges=[(0, 1, 0.0), (1, 2, 3.0), (0, 3, 0.0), (3, 4, 3.0)],
    ...                      traffic=6.0)
    >>> fifo = lambda: [FifoQueue() for _ in range(3)]
    >>> simulate_devices(eg, fifo(), link_contention=True).makespan
    4.0
    >>> simulate_devices(eg, fifo(), link_contention=True, host_ports=True).makespan
    7.0
    """
    if len(queues) != eg.n_devices:
        raise ValueError(f"need {eg.n_devices} ready queues, got {len(queues)}")
    if host_ports and not link_contention:
        raise ValueError("host_ports serialises transfers: it needs link_contention")
    enabled = gc.isenabled()
    gc.disable()  # the loop allocates many small tuples and no cycles
    try:
        return _simulate(eg, queues, link_contention, record_memory, host_ports)
    finally:
        if enabled:
            gc.enable()


def _simulate(eg: ExecGraph, queues: Sequence[ReadyQueue], link_contention: bool,
              record_memory: bool, host_ports: bool) -> DeviceSchedule:
    n, ndev = eg.n, eg.n_devices
    device, duration = eg.device, eg.duration
    sp, si, sd = eg.succ_ptr, eg.succ_idx, eg.succ_delay
    pp, pi = eg.pred_ptr, eg.pred_idx
    tensor = eg.tensor
    missing = [pp[i + 1] - pp[i] for i in range(n)]
    unstarted = list(missing)
    consumers = [sp[i + 1] - sp[i] for i in range(n)]
    start = [-1.0] * n
    end = [-1.0] * n
    busy = [False] * ndev
    busy_time = [0.0] * ndev
    held = [0.0] * ndev
    peak = [0.0] * ndev
    mem_series: list[tuple[float, int, float]] = []
    decisions: list[tuple[int, float, int, int]] = []
    link_free: dict[tuple[int, int], float] = {}
    state = SimState(0.0, busy, queues, unstarted)
    low = state.low
    events: list[tuple[float, int, int]] = []  # (time, seq, code): code>=0 end, <0 arrival
    seq = 0
    touched: set[int] = set()  # devices that became free or got an executable node
    for i in range(n):
        if missing[i] == 0:
            queues[device[i]].push(i)
            touched.add(device[i])
    done = 0
    t = 0.0
    while True:
        # every free device with executable nodes decides now, in device-id order
        state.time = t
        for d in sorted(touched):
            q = queues[d]
            if busy[d] or not len(q):
                continue
            ready = len(q)
            x = q.pop(state)
            decisions.append((d, t, ready, x))
            start[x] = t
            f = t + duration[x]
            end[x] = f
            busy[d] = True
            busy_time[d] += duration[x]
            for k in range(pp[x], pp[x + 1]):
                p = pi[k]
                consumers[p] -= 1
                if consumers[p] == 0 and tensor[p]:
                    dp = device[p]
                    held[dp] -= tensor[p]
                    if record_memory:
                        mem_series.append((t, dp, held[dp]))
            for k in range(sp[x], sp[x + 1]):
                j = si[k]
                unstarted[j] -= 1
                if unstarted[j] < 2:
                    low.append(j)
            heapq.heappush(events, (f, seq, x))
            seq += 1
        touched = set()
        if not events:
            break
        t = events[0][0]
        while events and events[0][0] == t:
            _, _, code = heapq.heappop(events)
            if code < 0:  # a tensor arrives at node -code-1
                j = -code - 1
                missing[j] -= 1
                if missing[j] == 0:
                    queues[device[j]].push(j)
                    touched.add(device[j])
                continue
            x = code
            d = device[x]
            busy[d] = False
            touched.add(d)
            done += 1
            if consumers[x] and tensor[x]:
                held[d] += tensor[x]
                peak[d] = max(peak[d], held[d])
                if record_memory:
                    mem_series.append((t, d, held[d]))
            for k in range(sp[x], sp[x + 1]):
                j, delay = si[k], sd[k]
                if delay == 0.0:
                    missing[j] -= 1
                    if missing[j] == 0:
                        queues[device[j]].push(j)
                        touched.add(device[j])
                    continue
                arrive = t + delay
                if link_contention:
                    # a directed pair's link, or the sender's out and the receiver's in port
                    out, into = ((d, -1), (-1, device[j])) if host_ports \
                        else ((d, device[j]),) * 2
                    begin = max(t, link_free.get(out, 0.0), link_free.get(into, 0.0))
                    arrive = begin + delay
                    link_free[out] = link_free[into] = arrive
                heapq.heappush(events, (arrive, seq, -j - 1))
                seq += 1
    if done != n:
        stuck = next(i for i in range(n) if start[i] < 0)
        raise InvalidSchedule(f"simulation stalled: node {stuck} never became executable")
    makespan = max(end, default=0.0)
    return DeviceSchedule(start, end, makespan, eg.traffic, busy_time, decisions, peak,
                          mem_series)


def check_device_schedule(eg: ExecGraph, s: DeviceSchedule, tol: float = 1e-9) -> None:
    """Raise :class:`~commsched.sim.validate.InvalidSchedule` naming the first broken rule.

    Rules: every node runs once for exactly its duration on its device, not before time 0;
    no node starts before every predecessor ended plus the transfer time of the edge; a
    device runs at most one node at a time (zero-length nodes occupy nothing); the makespan
    is the last end (Eq. 2.1).

    Parameters
    ----------
    eg : ExecGraph
        The graph that was simulated.
    s : DeviceSchedule
        Its schedule (:func:`simulate_devices`, or a compiled simulator's).
    tol : float, optional
        Relative tolerance, scaled by ``max(1, makespan)``.

    Raises
    ------
    InvalidSchedule
        The first broken rule, naming the node or device.
    """
    if len(s.start) != eg.n or len(s.end) != eg.n:
        raise InvalidSchedule(f"schedule has {len(s.start)} nodes, the graph {eg.n}")
    eps = tol * max(1.0, s.makespan)
    x = eg.arrays
    start, end = np.asarray(s.start, dtype=float), np.asarray(s.end, dtype=float)
    src = np.repeat(np.arange(eg.n), np.diff(x.succ_ptr))
    bad_edge = start[x.succ_idx] < end[src] + x.succ_delay - eps
    bad_start = start < -eps
    bad_duration = np.abs(end - start - x.duration) > eps
    bad = bad_start | bad_duration
    bad[src[bad_edge]] = True
    if bad.any():  # the first node breaking a rule, its first broken rule
        i = int(np.argmax(bad))
        if bad_start[i]:
            raise InvalidSchedule(f"node {i} starts before time 0 (or never ran)")
        if bad_duration[i]:
            raise InvalidSchedule(f"node {i} runs {s.end[i] - s.start[i]!r}, its duration "
                                  f"is {eg.duration[i]!r}")
        k = eg.succ_ptr[i] + int(np.argmax(bad_edge[eg.succ_ptr[i]:eg.succ_ptr[i + 1]]))
        j = eg.succ_idx[k]
        raise InvalidSchedule(f"node {j} starts at {s.start[j]!r} before the input of "
                              f"node {i} arrives at {s.end[i] + eg.succ_delay[k]!r}")
    # per device, nodes of positive duration by (start, end, index): each must start no
    # earlier than the one before it ends
    ran = np.nonzero(x.duration > 0)[0]
    ran = ran[np.lexsort((ran, end[ran], start[ran], x.device[ran]))]
    same = x.device[ran[1:]] == x.device[ran[:-1]]
    overlap = np.nonzero(same & (start[ran[1:]] < end[ran[:-1]] - eps))[0]
    if len(overlap):
        a, b = int(ran[overlap[0]]), int(ran[overlap[0] + 1])
        raise InvalidSchedule(f"device {eg.device[a]} runs nodes {a} and {b} at once")
    last = max(s.end, default=0.0)
    if abs(last - s.makespan) > eps:
        raise InvalidSchedule(f"makespan {s.makespan!r} is not the last end {last!r}")
