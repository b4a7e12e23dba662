"""The published Java simulator's loop and schedulers in Python, as they ran before
:func:`commsched.placement.compiled.simulate_published` compiled them (issue 25).

``tests/test_placement_compiled.py`` checks the kernel against :func:`simulate_lowest_clock`
with :func:`published_chooser` here: the loop of Laich 2017, Sec. 3.2 as the published code
runs it (devices in a list by local clock, ready lists in the order nodes became
executable, tensors taken in when a device's clock passes their arrival) and its FIFO, PCT
and MSR classes (Secs. 5.2-5.4 as that code reads them).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from commsched.placement.model import Cluster, Options
from commsched.placement.schedulers import DEVICE_SCHEDULERS, pct_values
from commsched.sim.devices import RECV, SEND, DeviceSchedule, ExecGraph, InvalidSchedule


class ClockState:
    """What a :data:`Chooser` may look at in :func:`simulate_lowest_clock` (read only,
    except :meth:`schedulable`, which has the side effect the published simulator's own
    check has: the device takes in every tensor that has arrived by its clock)."""

    def __init__(self, eg: ExecGraph, hash_key: Sequence[float]) -> None:
        self.eg = eg
        self.clock = [0.0] * eg.n_devices
        self.ready: list[list[int]] = [[] for _ in range(eg.n_devices)]
        #: inputs of each node that are available (a receive node never gets any)
        self.available = [0] * eg.n
        self.indegree = [eg.pred_ptr[i + 1] - eg.pred_ptr[i] for i in range(eg.n)]
        self.pending: list[list[tuple[float, int]]] = [[] for _ in range(eg.n_devices)]
        #: per device: the earliest pending arrival (``inf``: none)
        self.next_arrival = [math.inf] * eg.n_devices
        sp, si = eg.succ_ptr, eg.succ_idx
        #: successors in the order the published simulator's hash sets give them
        self.succ = [sorted(si[sp[i]:sp[i + 1]], key=hash_key.__getitem__)
                     for i in range(eg.n)]

    def _notify(self, succ: Sequence[int]) -> None:
        available, indeg, device, ready = self.available, self.indegree, self.eg.device, \
            self.ready
        for j in succ:
            available[j] += 1
            if available[j] == indeg[j]:
                ready[device[j]].append(j)

    def receive_past(self, d: int) -> None:
        """Tensors that reached device ``d`` by its clock make their consumers ready.

        Parameters
        ----------
        d : int
            The device.
        """
        pend = self.pending[d]
        if not pend:
            return
        now = self.clock[d]
        if self.next_arrival[d] > now:
            return
        keep = []
        for t, r in pend:
            if t <= now:
                self._notify(self.succ[r])
            else:
                keep.append((t, r))
        self.pending[d] = keep
        self.next_arrival[d] = min((t for t, _ in keep), default=math.inf)

    def send(self, d: int, t: float, r: int) -> None:
        """The tensor of receive node ``r`` reaches device ``d`` at ``t``.

        Parameters
        ----------
        d : int
            The receiving device.
        t : float
            Arrival time (the send's end plus the transfer time).
        r : int
            The receive node.
        """
        self.pending[d].append((t, r))
        if t < self.next_arrival[d]:
            self.next_arrival[d] = t

    def schedulable(self, d: int) -> bool:
        """Whether device ``d`` has an executable node at its clock.

        Takes in the arrivals up to the clock first (:meth:`receive_past`).

        Parameters
        ----------
        d : int
            The device asked.

        Returns
        -------
        bool
        """
        self.receive_past(d)
        return bool(self.ready[d])


#: A published-code scheduler: ``choose(device, ready, state)`` -> the position in ``ready``
#: (executable nodes in the order they became executable) of the node to run next.
Chooser = Callable[[int, list[int], ClockState], int]


def simulate_lowest_clock(eg: ExecGraph, choose: Chooser, hash_key: Sequence[float],
                          source_order: Sequence[int] | None = None,
                          record_memory: bool = False) -> DeviceSchedule:
    """The simulation loop of the thesis' published Java simulator (Laich 2017, Sec. 3.2).

    Devices sit in a list ordered by local clock; the first one decides if it has an
    executable node (after taking in the tensors that arrived by its clock), runs it to the
    end (its clock advances by the duration) and moves behind every device whose clock is
    smaller. Otherwise the first device further down the list that has an arrival by its
    own clock, or that can decide, comes to the front and the devices before it jump to its
    clock; when none can, every clock jumps to the next arrival. A decision enqueues the
    node's same-device successors at once (they can run when the clock has passed the
    node's end); a send node's tensor reaches its receive node's device ``delay`` after
    the send ends, and a receive node takes no time. Ready lists keep the order in which
    nodes became executable; ``hash_key`` (one number per node, a stand-in for the Java
    identity hashes) orders each node's successors, ``source_order`` the nodes executable
    at the start (default: by index). The makespan is the clock of the last device in the
    list. The same schedule as :func:`simulate_devices` up to the order of the ready lists
    and of decisions taken at one instant (what the schedulers may see differs).

    Parameters
    ----------
    eg : ExecGraph
        The partitioned graph.
    choose : Chooser
        The scheduler: ``choose(device, ready, state)`` -> a position in ``ready``.
    hash_key : sequence of float
        One number per node, ordering each node's successors.
    source_order : sequence of int, optional
        Order of the nodes executable at the start; default by index.
    record_memory : bool, optional
        Also keep the memory series, computed from the start and end times as
        :func:`simulate_devices` does; the peaks are always computed.

    Returns
    -------
    DeviceSchedule

    Raises
    ------
    InvalidSchedule
        Some node never became executable.
    """
    n, ndev = eg.n, eg.n_devices
    st = ClockState(eg, hash_key)
    clock, ready, next_arrival = st.clock, st.ready, st.next_arrival
    device, duration, kind = eg.device, eg.duration, eg.kind
    sp, si, sd = eg.succ_ptr, eg.succ_idx, eg.succ_delay
    start = [-1.0] * n
    end = [-1.0] * n
    busy_time = [0.0] * ndev
    decisions: list[tuple[int, float, int, int]] = []
    for i in (range(n) if source_order is None else source_order):
        if st.indegree[i] == 0:
            ready[device[i]].append(i)
    order = list(range(ndev))

    def run_first() -> None:
        d = order[0]
        q = ready[d]
        waiting = len(q)
        x = q.pop(choose(d, q, st))
        decisions.append((d, clock[d], waiting, x))
        start[x] = clock[d]
        clock[d] += duration[x]
        end[x] = clock[d]
        busy_time[d] += duration[x]
        if kind[x] == SEND:
            k = sp[x]
            r = si[k]
            st.send(device[r], clock[d] + sd[k], r)
        else:
            st._notify(st.succ[x])
        if ndev > 1 and clock[order[1]] < clock[d]:
            pos = 1
            while pos + 1 < ndev and clock[order[pos + 1]] < clock[d]:
                pos += 1
            order.pop(0)
            order.insert(pos, d)

    def to_front(k: int, t: float, upto: int) -> None:
        for m in range(upto):
            clock[order[m]] = t
        d = order.pop(k)
        st.receive_past(d)
        order.insert(0, d)

    def advance() -> bool:
        # for j = 1, 2, ...: an arrival on a device among the first j + 1 by the clock of
        # device j (the earliest, the last such device on ties) or else device j deciding
        t_min, found = next_arrival[order[0]], 0
        for j in range(1, ndev):
            t = next_arrival[order[j]]
            if t <= t_min:
                t_min, found = t, j
            if t_min <= clock[order[j]]:
                if t_min < clock[order[found]]:
                    st.receive_past(order[found])
                else:
                    to_front(found, t_min, j)
                return True
            if st.schedulable(order[j]):
                d = order[j]
                for m in range(j):
                    clock[order[m]] = clock[d]
                order.pop(j)
                order.insert(0, d)
                return True
        return False

    def next_arrival_anywhere() -> bool:
        t_min, found = math.inf, -1
        for r in range(ndev):
            t = next_arrival[order[r]]
            if t < t_min:
                t_min, found = t, r
        if found < 0:
            return False
        to_front(found, t_min, ndev)
        return True

    while True:
        if st.schedulable(order[0]):
            run_first()
        elif not advance() and not next_arrival_anywhere():
            break
    for i in range(n):  # receive nodes: no time, at their tensor's arrival
        if kind[i] == RECV and start[i] < 0:
            p = eg.pred_idx[eg.pred_ptr[i]]
            if end[p] >= 0:
                start[i] = end[i] = end[p] + sd[sp[p]]
    if any(s < 0 for s in start):
        stuck = next(i for i in range(n) if start[i] < 0)
        raise InvalidSchedule(f"simulation stalled: node {stuck} never became executable")
    peak, series = _memory(eg, start, end, record_memory)
    return DeviceSchedule(start, end, clock[order[-1]], eg.traffic, busy_time, decisions,
                          peak, series)


def _memory(eg: ExecGraph, start: Sequence[float], end: Sequence[float], record: bool,
            ) -> tuple[list[float], list[tuple[float, int, float]]]:
    """Tensor memory per device from start and end times (the rule of
    :func:`simulate_devices`: an output is held from its end until its last consumer
    starts; at one instant, outputs arrive before consumers free them)."""
    ev: list[tuple[float, int, int, float]] = []
    for i in range(eg.n):
        cons = eg.succ_ptr[i + 1] - eg.succ_ptr[i]
        if cons and eg.tensor[i]:
            last = max(start[eg.succ_idx[k]] for k in range(eg.succ_ptr[i], eg.succ_ptr[i + 1]))
            ev.append((end[i], 0, eg.device[i], eg.tensor[i]))
            ev.append((last, 1, eg.device[i], -eg.tensor[i]))
    ev.sort(key=lambda e: (e[0], e[1]))
    held = [0.0] * eg.n_devices
    peak = [0.0] * eg.n_devices
    series: list[tuple[float, int, float]] = []
    for t, _, d, x in ev:
        held[d] += x
        peak[d] = max(peak[d], held[d])
        if record:
            series.append((t, d, held[d]))
    return peak, series


def published_chooser(name: str, eg: ExecGraph, c: Cluster, opts: Options) -> Chooser:
    """The published Java code's scheduler ``name`` as a
    :data:`~commsched.sim.devices.Chooser` (see the module docstring).

    Parameters
    ----------
    name : str
        A member of :data:`DEVICE_SCHEDULERS` (``fifo``, ``pct``, ``msr``) or an alias.
    eg : ExecGraph
        The executed graph (send and receive nodes inserted, Sec. 2.4).
    c : Cluster
        The devices.
    opts : Options
        ``send_ops`` is charged to receive nodes in the PCT values, as the Java code does.

    Returns
    -------
    Chooser
        The index in a device's ready list of the node to run next.

    Raises
    ------
    CommschedError
        For a name that is not in :data:`DEVICE_SCHEDULERS`.

    References
    ----------
    Laich 2017, Secs. 5.2-5.4 (FIFO, PCT Eq. 5.1, MSR Eq. 5.2), as the published code reads
    them.
    """
    name = DEVICE_SCHEDULERS.canonical(name)
    if name == "fifo":
        return lambda d, ready, st: 0
    val = pct_values(eg, c, opts)
    if name == "pct":
        def choose_pct(d: int, ready: list[int], st: ClockState) -> int:
            best = 0
            for k in range(1, len(ready)):
                if val[ready[k]] > val[ready[best]]:
                    best = k
            return best
        return choose_pct
    device = eg.device

    def value(x: int, st: ClockState) -> int:
        r = 0
        for j in st.succ[x]:
            r += 1
            if device[j] != device[x]:
                r += 1
                if st.indegree[j] - st.available[j] == 1:
                    r += 1 + 5 * (not st.schedulable(device[j]))
        return r

    def choose_msr(d: int, ready: list[int], st: ClockState) -> int:
        best, top = 0, value(ready[0], st)
        for k in range(1, len(ready)):
            v = value(ready[k], st)
            if v > top or (v == top and val[ready[k]] > val[ready[best]]):
                best, top = k, v
        return best
    return choose_msr
