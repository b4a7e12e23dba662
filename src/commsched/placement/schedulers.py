"""Per-device schedulers of the thesis (Laich 2017, Ch. 5): FIFO, PCT and MSR.

A scheduler turns an executed graph (:class:`~commsched.sim.devices.ExecGraph`) into one
ready queue per device; the simulator (:func:`~commsched.sim.devices.simulate_devices`)
asks a device's queue which executable node to run next. :data:`DEVICE_SCHEDULERS` is the
registry (name -> callable with the signature of :data:`Scheduler`; the thesis' full names,
e.g. ``path-computation-time-first``, are aliases): the command line, the config schema and
the contract test read it, so a new scheduler is one function and one registry line.

* ``fifo`` (Sec. 5.2): in the order the nodes became executable.
* ``pct`` (Sec. 5.3, Eq. 5.1): largest upward path computation time first, computed on the
  executed graph (send and receive nodes included; a transfer counts on the send-receive
  edge; the time of a node is its time on its device).
* ``msr`` (Sec. 5.4, Eq. 5.2): largest successor rank first, PCT breaking ties. Our
  reading where the text is open: a node's successors are the original consumers of the
  tensor it produces or carries (for a node whose consumer sits on another device: the
  consumer reached through the send/receive pair, so the cross-device and idle terms can
  apply); ``pred_notex`` counts the consumer's direct predecessors in the executed graph
  that have not started; a device is idle when it runs nothing and has no executable
  node at the decision.

Ties (same key) go to the lower node index. Under ``semantics="published-code"`` the
schedule comes from the published simulator's loop
(:func:`~commsched.placement.compiled.simulate_published`, compiled; its Python statement,
which it replaced, is ``tests/placement_published_reference.py``), whose schedulers read
the Java classes' rules: FIFO takes the head of the ready list; PCT the first node of largest
Eq. 5.1 value, charging receive nodes ``send_ops`` operations on their device (the Java
code does, although a receive takes no time in its simulation); MSR sums over the node's
successors in the executed graph 1 each, and for a successor on another device (only a
send node's receive) 1 + 1 (the receive lacks one input) + 5 when the receiving device
has nothing executable at its clock, ties by PCT, then the first in the ready list.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable

import numpy as np
from numba import njit

from commsched.placement.model import Cluster, Options
from commsched.registry import Registry
from commsched.sim.devices import (
    COMPUTE,
    RECV,
    SEND,
    ExecGraph,
    FifoQueue,
    ReadyQueue,
    SimState,
)

__all__ = ["DEVICE_SCHEDULERS", "Scheduler", "fifo", "msr", "pct", "pct_values"]


#: A scheduler: executed graph, devices, options -> one ready queue per device.
Scheduler = Callable[[ExecGraph, Cluster, Options], list[ReadyQueue]]


@njit(cache=True)
def _upward(own: np.ndarray, sp: np.ndarray, si: np.ndarray, sd: np.ndarray,
            pp: np.ndarray) -> np.ndarray:  # pragma: no cover - compiled
    """Eq. 5.1 over a Kahn order of the executed graph: a node's own time plus the
    largest value of a successor plus the edge's transfer time (0 for a sink; nodes on a
    cycle, which no executed graph has, keep 0)."""
    n = own.shape[0]
    indeg = pp[1:] - pp[:n]
    order = np.empty(n, dtype=np.int64)
    m = 0
    for i in range(n):
        if indeg[i] == 0:
            order[m] = i
            m += 1
    k = 0
    while k < m:
        x = order[k]
        for q in range(sp[x], sp[x + 1]):
            s = si[q]
            indeg[s] -= 1
            if indeg[s] == 0:
                order[m] = s
                m += 1
        k += 1
    val = np.zeros(n)
    for k in range(m - 1, -1, -1):
        x = order[k]
        best = 0.0
        for q in range(sp[x], sp[x + 1]):
            v = val[si[q]] + sd[q]
            if v > best:
                best = v
        val[x] = best + own[x]
    return val


def pct_values(eg: ExecGraph, c: Cluster, opts: Options) -> list[float]:
    """Eq. 5.1 for every node of the executed graph.

    Parameters
    ----------
    eg : ExecGraph
        The executed graph.
    c : Cluster
        The devices (a node's time is its operations over its device's speed).
    opts : Options
        Under ``published-code`` receive nodes are charged ``send_ops`` operations.

    Returns
    -------
    list of float
        The upward path computation time of every node of ``eg``.

    References
    ----------
    Laich 2017, Sec. 5.3, Eq. 5.1.

    Examples
    --------
    >>> import numpy as np
    >>> eg = ExecGraph.build(1, [0, 0], [2.0, 3.0], [0, 0], [0, 1], [1.0, 1.0],
    ...                      [(0, 1, 0.0)], 0.0)
    >>> c = Cluster(np.array([1.0]), np.array([9.0]), np.array([0]), np.array([[np.inf]]))
    >>> from commsched.placement.model import Options
    >>> pct_values(eg, c, Options())
    [5.0, 3.0]
    """
    x = eg.arrays
    own = x.duration
    if opts.semantics == "published-code":
        recv = x.kind == RECV
        own = own.copy()
        own[recv] = opts.send_ops / c.speed[x.device[recv]]
    val: list[float] = _upward(own, x.succ_ptr, x.succ_idx, x.succ_delay, x.pred_ptr).tolist()
    return val


class _HeapQueue:
    def __init__(self, key: list[tuple[float, float]]) -> None:
        self._key = key
        self._h: list[tuple[float, float, int]] = []

    def push(self, node: int) -> None:
        k = self._key[node]
        heapq.heappush(self._h, (k[0], k[1], node))

    def pop(self, state: SimState) -> int:
        return heapq.heappop(self._h)[2]

    def __len__(self) -> int:
        return len(self._h)


def fifo(eg: ExecGraph, c: Cluster, opts: Options) -> list[ReadyQueue]:
    """FIFO (Sec. 5.2): one queue per device in the order nodes became executable.

    Parameters
    ----------
    eg, c : ExecGraph, Cluster
        The executed graph (Sec. 2.4) and the devices (unused by FIFO).
    opts : Options
        Unused.

    Returns
    -------
    list of ReadyQueue
        One queue per device (queues in the order the nodes became executable).

    References
    ----------
    Laich 2017, Sec. 5.2 (FIFO).
    """
    return [FifoQueue() for _ in range(eg.n_devices)]


def pct(eg: ExecGraph, c: Cluster, opts: Options) -> list[ReadyQueue]:
    """PCT (Sec. 5.3): the executable node with the largest Eq. 5.1 value first.

    Parameters
    ----------
    eg, c : ExecGraph, Cluster
        The executed graph (Sec. 2.4) and the devices (node times for Eq. 5.1).
    opts : Options
        The run's options, passed to :func:`pct_values`.

    Returns
    -------
    list of ReadyQueue
        One queue per device (largest Eq. 5.1 value first).

    References
    ----------
    Laich 2017, Sec. 5.3 (PCT, Eq. 5.1).
    """
    val = pct_values(eg, c, opts)
    key = [(-val[i], float(i)) for i in range(eg.n)]
    return [_HeapQueue(key) for _ in range(eg.n_devices)]


def _rank_targets(eg: ExecGraph) -> list[list[int]]:
    sp, si = eg.succ_ptr, eg.succ_idx
    out: list[list[int]] = []
    for x in range(eg.n):
        t: list[int] = []
        for k in range(sp[x], sp[x + 1]):
            j = si[k]
            kj = eg.kind[j]
            if kj == COMPUTE:
                t.append(j)
            elif kj == SEND:
                r = si[sp[j]]
                t.extend(si[sp[r]:sp[r + 1]])
            else:
                t.extend(si[sp[j]:sp[j + 1]])
        out.append(t)
    return out


class _MsrRanks:
    """Eq. 5.2's parts shared by the queues of one run.

    ``a[x]`` = 1 per target, +1 per target on another device, +1 per target that lacks
    only one input, kept up to date from the simulator's :attr:`SimState.low`; the +5 of a
    target on another device whose device is idle is added at the decision, so only
    nodes with targets on other devices need ranking then; the others wait in a heap by
    ``(a, PCT, -index)``. A target on the deciding device never earns the +5 (that device
    holds the node being ranked). ``count`` is the number of executable nodes per device.
    """

    def __init__(self, eg: ExecGraph, targets: list[list[int]], val: list[float]) -> None:
        dev = eg.device
        self.dev, self.val = dev, val
        self.cross = [[j for j in t if dev[j] != dev[x]] for x, t in enumerate(targets)]
        self.last = [eg.pred_ptr[j + 1] - eg.pred_ptr[j] == 1 for j in range(eg.n)]
        last = self.last
        self.a = [len(t) + len(cr) + sum(last[j] for j in t)
                  for t, cr in zip(targets, self.cross, strict=True)]
        self.rev: list[list[int]] = [[] for _ in range(eg.n)]
        for x, t in enumerate(targets):
            for j in t:
                self.rev[j].append(x)
        self.queued = [False] * eg.n
        self.heaps: list[list[tuple[int, float, int]]] = [[] for _ in range(eg.n_devices)]
        self.count = [0] * eg.n_devices

    def sync(self, state: SimState) -> None:
        low = state.low
        if not low:
            return
        unstarted, last, a, rev = state.unstarted, self.last, self.a, self.rev
        queued, cross, heaps, dev, val = self.queued, self.cross, self.heaps, self.dev, \
            self.val
        for j in low:
            now = unstarted[j] == 1
            if now != last[j]:
                last[j] = now
                delta = 1 if now else -1
                for x in rev[j]:
                    a[x] += delta
                    if queued[x] and not cross[x]:
                        heapq.heappush(heaps[dev[x]], (-a[x], -val[x], x))
        low.clear()


class _MsrQueue:
    """MSR's ready nodes of one device (see :class:`_MsrRanks`)."""

    def __init__(self, d: int, r: _MsrRanks) -> None:
        self._d, self._r = d, r
        self._heap = r.heaps[d]
        self._scan: list[int] = []

    def push(self, node: int) -> None:
        r = self._r
        r.count[self._d] += 1
        r.queued[node] = True
        if r.cross[node]:
            self._scan.append(node)
        else:
            heapq.heappush(self._heap, (-r.a[node], -r.val[node], node))

    def pop(self, state: SimState) -> int:
        r = self._r
        r.count[self._d] -= 1
        r.sync(state)
        heap, a, queued = self._heap, r.a, r.queued
        while heap and (not queued[heap[0][2]] or -heap[0][0] != a[heap[0][2]]):
            heapq.heappop(heap)  # stale: its rank changed or it already ran
        busy, count, dev, last, val, cross = state.busy, r.count, r.dev, r.last, r.val, \
            r.cross
        best_k, br, bv, bx = -1, -1, 0.0, 0
        for k, x in enumerate(self._scan):
            rank = a[x]
            for j in cross[x]:
                if last[j]:
                    dj = dev[j]
                    if not busy[dj] and not count[dj]:
                        rank += 5
            if rank > br or (rank == br and (val[x] > bv or (val[x] == bv and x < bx))):
                best_k, br, bv, bx = k, rank, val[x], x
        if heap:
            na, nv, x = heap[0]
            if best_k < 0 or -na > br or (-na == br and (-nv > bv or (-nv == bv and x < bx))):
                heapq.heappop(heap)
                queued[x] = False
                return x
        scan = self._scan
        x = scan[best_k]
        scan[best_k] = scan[-1]
        scan.pop()
        queued[x] = False
        return x

    def __len__(self) -> int:
        return self._r.count[self._d]


def msr(eg: ExecGraph, c: Cluster, opts: Options) -> list[ReadyQueue]:
    """MSR (Sec. 5.4): the largest successor rank (Eq. 5.2) first, ties by PCT.

    Parameters
    ----------
    eg, c : ExecGraph, Cluster
        The executed graph (Sec. 2.4) and the devices (node times for the PCT tie-break).
    opts : Options
        The run's options, passed to :func:`pct_values` (MSR's tie-breaker).

    Returns
    -------
    list of ReadyQueue
        One queue per device (largest Eq. 5.2 rank first, then PCT).

    References
    ----------
    Laich 2017, Sec. 5.4 (MSR, Eq. 5.2).
    """
    r = _MsrRanks(eg, _rank_targets(eg), pct_values(eg, c, opts))
    return [_MsrQueue(d, r) for d in range(eg.n_devices)]


#: The per-device scheduler registry (thesis Ch. 5); the aliases are the thesis' full names
#: (Secs. 5.2-5.4).
DEVICE_SCHEDULERS: Registry[Scheduler] = Registry("device scheduler")
DEVICE_SCHEDULERS.add("fifo", fifo, aliases=("first-in-first-out",))
DEVICE_SCHEDULERS.add("pct", pct, aliases=("path-computation-time-first",))
DEVICE_SCHEDULERS.add("msr", msr, aliases=("maximum-successor-rank-first",))
