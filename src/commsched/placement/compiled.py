"""The thesis' per-device schedulers compiled into the simulators' loops (numba).

:func:`simulate_scheduler` returns the schedule that
:func:`~commsched.sim.devices.simulate_devices` returns with the ready queues of
:data:`~commsched.placement.schedulers.DEVICE_SCHEDULERS` (FIFO, PCT, MSR; thesis
semantics), equal in every field: start and end times, decisions, busy times, peak memory
and the memory series (``tests/test_placement_compiled.py`` checks it on random instances,
link contention and memory recording included). The Python queues stay the readable
statement of each rule and the extension point for a new scheduler
(:func:`~commsched.placement.run.schedule` runs a registry name the kernel lacks through
them); this kernel is what the suite runs: on the 5,271-node graph of
``benchmarks/bench_placement.py`` (executed graphs of 6-23k nodes) a schedule takes
about 10-20 ms in the kernel against 0.05-0.45 s through the queues.

The kernel (:func:`_run`) is the event loop of ``simulate_devices`` over the executed
graph's CSR arrays (its helpers are inlined: called per heap step, a call that passes
arrays costs reference counting, about a third of the kernel's time otherwise): one heap
of events keyed (time, sequence number); at each instant the devices that became free or
got an executable node decide in id order. Each device's ready nodes sit in an indexed
binary heap keyed ``(k1, k2, node)``, smallest first:

* FIFO: ``k1`` = how many nodes became executable before (the queue's order);
* PCT: ``k1`` = minus Eq. 5.1's value, ties to the lower index;
* MSR: nodes whose rank targets all sit on their own device have ``k1`` = minus Eq. 5.2's
  rank without the idle term, ``k2`` = minus PCT, and move in the heap when an input of a
  target starts (the "lacks one input" term changes); nodes with a target on another
  device wait in a list that is scanned at the decision, since the +5 of an idle target
  device depends on that moment (as :class:`~commsched.placement.schedulers._MsrRanks`
  does). The Python queue updates ranks lazily at the next decision; the kernel does at
  once: both rank every node from the same counts at every decision.

Under ``published-code`` semantics, :func:`simulate_published` runs the published Java
simulator's loop (Sec. 3.2 as that code runs it: devices in a list by local clock, the
first decides; the schedulers of :mod:`~commsched.placement.schedulers`' docstring) as a
kernel (:func:`_run_lowest_clock`), equal in every field to the Python loop it replaced
(``simulate_lowest_clock`` in ``tests/placement_published_reference.py``; checked in the
same test file): each device's ready
nodes and its tensors under way are linked lists in the order they came (the Java lists'
order, which decides ties), the successors are pre-sorted in the hash order drawn from the
seed, and the memory series is computed from the start and end times as ``_memory`` does.
On Table 7.1's graph 1 (36k nodes, 100 devices) a schedule takes 0.1-0.4 s instead of
1.4-5.7 s in Python.

References
----------
Laich 2017, Sec. 3.2 (the simulation), Secs. 5.2-5.4 (FIFO, PCT Eq. 5.1, MSR Eq. 5.2).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numba import njit

from commsched.errors import CommschedError
from commsched.placement.model import Cluster, Options, identity_hashes
from commsched.placement.schedulers import DEVICE_SCHEDULERS, pct_values
from commsched.sim.devices import COMPUTE, RECV, SEND, DeviceSchedule, ExecGraph, InvalidSchedule

__all__ = ["COMPILED", "simulate_published", "simulate_scheduler"]

#: The registry's schedulers the kernel runs, with the kernel's policy code.
COMPILED = {"fifo": 0, "pct": 1, "msr": 2}
_FIFO, _PCT, _MSR = 0, 1, 2


@njit(cache=True, inline="always")
def _less(a: int, b: int, k1: np.ndarray, k2: np.ndarray) -> bool:  # pragma: no cover
    """``(k1[a], k2[a], a) < (k1[b], k2[b], b)``."""
    if k1[a] != k1[b]:
        return bool(k1[a] < k1[b])
    if k2[a] != k2[b]:
        return bool(k2[a] < k2[b])
    return a < b


@njit(cache=True, inline="always")
def _sift(heap: np.ndarray, pos: np.ndarray, lo: int, size: int, i: int, k1: np.ndarray,
          k2: np.ndarray) -> None:  # pragma: no cover - compiled
    """Move the item at ``heap[lo + i]`` to its place in the binary heap
    ``heap[lo:lo + size]``: up while it is smaller than its parent, else down while a child
    is smaller; ``pos`` follows every item moved."""
    x = heap[lo + i]
    while i > 0 and _less(x, heap[lo + ((i - 1) >> 1)], k1, k2):
        parent = (i - 1) >> 1
        heap[lo + i] = heap[lo + parent]
        pos[heap[lo + i]] = i
        i = parent
    while 2 * i + 1 < size:
        child = 2 * i + 1
        if child + 1 < size and _less(heap[lo + child + 1], heap[lo + child], k1, k2):
            child += 1
        if not _less(heap[lo + child], x, k1, k2):
            break
        heap[lo + i] = heap[lo + child]
        pos[heap[lo + i]] = i
        i = child
    heap[lo + i] = x
    pos[x] = i


@njit(cache=True, inline="always")
def _heap_push(heap: np.ndarray, pos: np.ndarray, lo: int, size: int, x: int,
               k1: np.ndarray, k2: np.ndarray) -> None:  # pragma: no cover - compiled
    """Add ``x`` to ``heap[lo:lo + size]`` (which must have room)."""
    heap[lo + size] = x
    _sift(heap, pos, lo, size + 1, size, k1, k2)


@njit(cache=True, inline="always")
def _heap_pop(heap: np.ndarray, pos: np.ndarray, lo: int, size: int, k1: np.ndarray,
              k2: np.ndarray) -> int:  # pragma: no cover - compiled
    """Remove and return the smallest item of the non-empty ``heap[lo:lo + size]``."""
    top = heap[lo]
    pos[top] = -1
    size -= 1
    if size > 0:
        heap[lo] = heap[lo + size]
        _sift(heap, pos, lo, size, 0, k1, k2)
    return top


@njit(cache=True)
def _rank_targets(n: int, kind: np.ndarray, sp: np.ndarray, si: np.ndarray,
                  ) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """CSR of MSR's targets (:func:`~commsched.placement.schedulers._rank_targets`): a
    compute successor itself, through a send node its receive node's successors, through
    a receive node its successors."""
    count = np.zeros(n, dtype=np.int64)
    for x in range(n):
        for k in range(sp[x], sp[x + 1]):
            j = si[k]
            if kind[j] == COMPUTE:
                count[x] += 1
            elif kind[j] == SEND:
                r = si[sp[j]]
                count[x] += sp[r + 1] - sp[r]
            else:
                count[x] += sp[j + 1] - sp[j]
    ptr = np.zeros(n + 1, dtype=np.int64)
    ptr[1:] = np.cumsum(count)
    idx = np.empty(ptr[n], dtype=np.int64)
    m = 0
    for x in range(n):
        for k in range(sp[x], sp[x + 1]):
            j = si[k]
            if kind[j] == COMPUTE:
                idx[m] = j
                m += 1
            else:
                r = si[sp[j]] if kind[j] == SEND else j
                for q in range(sp[r], sp[r + 1]):
                    idx[m] = si[q]
                    m += 1
    return ptr, idx


@njit(cache=True, inline="always")
def _make_ready(i: int, pushed: int, policy: int, device: np.ndarray, lo: np.ndarray,
                heap: np.ndarray, pos: np.ndarray, hsize: np.ndarray, scan: np.ndarray,
                ssize: np.ndarray, k1: np.ndarray, k2: np.ndarray,
                has_cross: np.ndarray) -> int:  # pragma: no cover - compiled
    """Node ``i`` became executable, the ``pushed``-th to do so: into its device's heap
    (FIFO keys it by ``pushed``) or, for MSR with a target elsewhere, its scan list.
    Returns ``pushed + 1``."""
    d = device[i]
    if policy == _FIFO:
        k1[i] = pushed
    if policy == _MSR and has_cross[i]:
        scan[lo[d] + ssize[d]] = i
        ssize[d] += 1
    else:
        _heap_push(heap, pos, lo[d], hsize[d], i, k1, k2)
        hsize[d] += 1
    return pushed + 1


@njit(cache=True, inline="always")
def _push_event(time: float, code: int, seq: int, nev: int, ev_t: np.ndarray,
                ev_c: np.ndarray, ev_heap: np.ndarray,
                ev_pos: np.ndarray) -> int:  # pragma: no cover - compiled
    """Event ``code`` at ``time`` into slot ``seq`` and the event heap of ``nev`` slots
    (ordered by time, then slot); returns the next slot."""
    ev_t[seq] = time
    ev_c[seq] = code
    _heap_push(ev_heap, ev_pos, 0, nev, seq, ev_t, ev_t)
    return seq + 1


@njit(cache=True, inline="always")
def _record(record: bool, t: float, d: int, held: np.ndarray, mem_t: np.ndarray,
            mem_d: np.ndarray, mem_h: np.ndarray, nm: int) -> int:  # pragma: no cover
    """Append (``t``, ``d``, memory ``d`` holds) to the series of ``nm`` entries when
    ``record``; returns its new length."""
    if not record:
        return nm
    mem_t[nm], mem_d[nm], mem_h[nm] = t, d, held[d]
    return nm + 1


@njit(cache=True)
def _run(policy: int, ndev: int, device: np.ndarray, duration: np.ndarray,
         tensor: np.ndarray, sp: np.ndarray, si: np.ndarray, sd: np.ndarray, pp: np.ndarray,
         pi: np.ndarray, val: np.ndarray, tp: np.ndarray, ti: np.ndarray,
         link_contention: bool, record_memory: bool,
         ) -> tuple[Any, ...]:  # pragma: no cover - compiled
    """The event loop of ``simulate_devices`` with the ready queues of ``policy``.

    Returns start, end, busy time and peak memory per device, the decisions as four
    arrays (device, time, executable nodes before, node) and the memory series as three
    (time, device, held), each cut to its length, and the number of nodes that ran."""
    n = device.shape[0]
    # ready heaps: device d's in heap[lo[d]:lo[d] + hsize[d]]; MSR's scanned nodes in
    # scan[lo[d]:lo[d] + ssize[d]]
    lo = np.zeros(ndev + 1, dtype=np.int64)
    for i in range(n):
        lo[device[i] + 1] += 1
    for d in range(ndev):
        lo[d + 1] += lo[d]
    heap = np.empty(n, dtype=np.int64)
    scan = np.empty(n, dtype=np.int64)
    pos = np.full(n, -1, dtype=np.int64)
    hsize = np.zeros(ndev, dtype=np.int64)
    ssize = np.zeros(ndev, dtype=np.int64)
    k1 = np.zeros(n)
    k2 = np.zeros(n)
    if policy == _PCT:
        k1[:] = -val
    # MSR: a = Eq. 5.2 without the idle term, from the per-target flags "lacks one input"
    a = np.zeros(n, dtype=np.int64)
    last = np.zeros(n, dtype=np.bool_)
    has_cross = np.zeros(n, dtype=np.bool_)
    cp = np.zeros(n + 1, dtype=np.int64)
    ci = np.empty(ti.shape[0], dtype=np.int64)
    rp = np.zeros(n + 1, dtype=np.int64)
    ri = np.empty(ti.shape[0], dtype=np.int64)
    if policy == _MSR:
        for j in range(n):
            last[j] = pp[j + 1] - pp[j] == 1
        m = 0
        for x in range(n):
            for q in range(tp[x], tp[x + 1]):
                j = ti[q]
                a[x] += 1
                if last[j]:
                    a[x] += 1
                rp[j + 1] += 1
                if device[j] != device[x]:
                    a[x] += 1
                    ci[m] = j
                    m += 1
            cp[x + 1] = m
            has_cross[x] = cp[x + 1] > cp[x]
            k1[x] = -a[x]
            k2[x] = -val[x]
        for j in range(n):
            rp[j + 1] += rp[j]
        fill = rp[:n].copy()
        for x in range(n):
            for q in range(tp[x], tp[x + 1]):
                j = ti[q]
                ri[fill[j]] = x
                fill[j] += 1
    pushed = 0
    missing = pp[1:] - pp[:n]
    unstarted = missing.copy()
    consumers = sp[1:] - sp[:n]
    start = np.full(n, -1.0)
    end = np.full(n, -1.0)
    busy = np.zeros(ndev, dtype=np.bool_)
    busy_time = np.zeros(ndev)
    held = np.zeros(ndev)
    peak = np.zeros(ndev)
    link_free = np.zeros((ndev, ndev))
    dec_d = np.empty(n, dtype=np.int64)
    dec_t = np.empty(n)
    dec_r = np.empty(n, dtype=np.int64)
    dec_x = np.empty(n, dtype=np.int64)
    nd = 0
    mem_t = np.empty(2 * n + 1 if record_memory else 0)
    mem_d = np.empty(2 * n + 1 if record_memory else 0, dtype=np.int64)
    mem_h = np.empty(2 * n + 1 if record_memory else 0)
    nm = 0
    # events: slot s holds (ev_t[s], code ev_c[s]) pushed s-th; code >= 0: node ends,
    # < 0: a tensor reaches node -code-1; the heap orders slots by (time, slot)
    cap = n + sd.shape[0] + 1
    ev_t = np.empty(cap)
    ev_c = np.empty(cap, dtype=np.int64)
    ev_heap = np.empty(cap, dtype=np.int64)
    ev_pos = np.empty(cap, dtype=np.int64)
    nev = 0
    seq = 0
    touched = np.zeros(ndev, dtype=np.bool_)
    for i in range(n):
        if missing[i] == 0:
            pushed = _make_ready(i, pushed, policy, device, lo, heap, pos, hsize, scan,
                                 ssize, k1, k2, has_cross)
            touched[device[i]] = True
    done = 0
    t = 0.0
    while True:
        for d in range(ndev):
            if not touched[d]:
                continue
            touched[d] = False
            ready = hsize[d] + ssize[d]
            if busy[d] or ready == 0:
                continue
            # the decision
            if policy != _MSR:
                x = _heap_pop(heap, pos, lo[d], hsize[d], k1, k2)
                hsize[d] -= 1
            else:
                best_k, br, bv, bx = -1, -1, 0.0, 0
                for s in range(lo[d], lo[d] + ssize[d]):
                    y = scan[s]
                    rank = a[y]
                    for q in range(cp[y], cp[y + 1]):
                        j = ci[q]
                        if last[j]:
                            dj = device[j]
                            if not busy[dj] and hsize[dj] + ssize[dj] == 0:
                                rank += 5
                    if rank > br or (rank == br and (val[y] > bv or (val[y] == bv
                                                                      and y < bx))):
                        best_k, br, bv, bx = s, rank, val[y], y
                take_heap = False
                if hsize[d] > 0:
                    y = heap[lo[d]]
                    take_heap = best_k < 0 or a[y] > br or (a[y] == br and (
                        val[y] > bv or (val[y] == bv and y < bx)))
                if take_heap:
                    x = _heap_pop(heap, pos, lo[d], hsize[d], k1, k2)
                    hsize[d] -= 1
                else:
                    x = scan[best_k]
                    ssize[d] -= 1
                    scan[best_k] = scan[lo[d] + ssize[d]]
            dec_d[nd], dec_t[nd], dec_r[nd], dec_x[nd] = d, t, ready, x
            nd += 1
            start[x], end[x] = t, t + duration[x]
            busy[d] = True
            busy_time[d] += duration[x]
            for k in range(pp[x], pp[x + 1]):
                p = pi[k]
                consumers[p] -= 1
                if consumers[p] == 0 and tensor[p] != 0.0:  # its last consumer starts
                    held[device[p]] -= tensor[p]
                    nm = _record(record_memory, t, device[p], held, mem_t, mem_d, mem_h, nm)
            for k in range(sp[x], sp[x + 1]):
                j = si[k]
                unstarted[j] -= 1
                if policy == _MSR and unstarted[j] < 2 and (unstarted[j] == 1) != last[j]:
                    last[j] = unstarted[j] == 1
                    delta = 1 if last[j] else -1
                    for q in range(rp[j], rp[j + 1]):
                        y = ri[q]
                        a[y] += delta
                        k1[y] = -a[y]
                        if pos[y] >= 0:  # waiting in its device's heap: re-place it
                            dy = device[y]
                            _sift(heap, pos, lo[dy], hsize[dy], pos[y], k1, k2)
            seq = _push_event(end[x], x, seq, nev, ev_t, ev_c, ev_heap, ev_pos)
            nev += 1
        if nev == 0:
            break
        t = ev_t[ev_heap[0]]
        while nev > 0 and ev_t[ev_heap[0]] == t:
            code = ev_c[_heap_pop(ev_heap, ev_pos, 0, nev, ev_t, ev_t)]
            nev -= 1
            if code < 0:  # a tensor arrives at node -code-1
                j = -code - 1
                missing[j] -= 1
                if missing[j] == 0:
                    pushed = _make_ready(j, pushed, policy, device, lo, heap, pos, hsize,
                                         scan, ssize, k1, k2, has_cross)
                    touched[device[j]] = True
                continue
            x = code
            d = device[x]
            busy[d] = False
            touched[d] = True
            done += 1
            if consumers[x] != 0 and tensor[x] != 0.0:  # its output stays in memory
                held[d] += tensor[x]
                if held[d] > peak[d]:
                    peak[d] = held[d]
                nm = _record(record_memory, t, d, held, mem_t, mem_d, mem_h, nm)
            for k in range(sp[x], sp[x + 1]):
                j = si[k]
                delay = sd[k]
                if delay == 0.0:
                    missing[j] -= 1
                    if missing[j] == 0:
                        pushed = _make_ready(j, pushed, policy, device, lo, heap, pos,
                                             hsize, scan, ssize, k1, k2, has_cross)
                        touched[device[j]] = True
                    continue
                arrive = t + delay
                if link_contention:
                    begin = max(t, link_free[d, device[j]])
                    arrive = begin + delay
                    link_free[d, device[j]] = arrive
                seq = _push_event(arrive, -j - 1, seq, nev, ev_t, ev_c, ev_heap, ev_pos)
                nev += 1
    return (start, end, busy_time, peak, dec_d[:nd], dec_t[:nd], dec_r[:nd], dec_x[:nd],
            mem_t[:nm], mem_d[:nm], mem_h[:nm], done)


# --------------------------------------------------------------------------------------
# The published simulator's loop (``simulate_lowest_clock`` with ``published_chooser``)
# --------------------------------------------------------------------------------------

@njit(cache=True, inline="always")
def _append(lst: int, x: int, d: int, head: np.ndarray, tail: np.ndarray,
            nxt: np.ndarray) -> None:  # pragma: no cover - compiled
    """Append node ``x`` to device ``d``'s list ``lst`` (0: ready, 1: pending arrivals)."""
    nxt[x] = -1
    if tail[lst, d] >= 0:
        nxt[tail[lst, d]] = x
    else:
        head[lst, d] = x
    tail[lst, d] = x


@njit(cache=True, inline="always")
def _unlink(lst: int, x: int, prev: int, d: int, head: np.ndarray, tail: np.ndarray,
            nxt: np.ndarray) -> None:  # pragma: no cover - compiled
    """Remove node ``x``, which follows ``prev`` (-1: the head), from list ``lst`` of ``d``."""
    if prev < 0:
        head[lst, d] = nxt[x]
    else:
        nxt[prev] = nxt[x]
    if tail[lst, d] == x:
        tail[lst, d] = prev
    nxt[x] = -1


@njit(cache=True, inline="always")
def _notify(x: int, hp: np.ndarray, hi: np.ndarray, available: np.ndarray,
            indeg: np.ndarray, device: np.ndarray, head: np.ndarray, tail: np.ndarray,
            nxt: np.ndarray, nready: np.ndarray) -> None:  # pragma: no cover - compiled
    """``x``'s output reaches its successors (hash order); those with every input become
    ready at the end of their device's list."""
    for k in range(hp[x], hp[x + 1]):
        j = hi[k]
        available[j] += 1
        if available[j] == indeg[j]:
            _append(0, j, device[j], head, tail, nxt)
            nready[device[j]] += 1


@njit(cache=True, inline="always")
def _receive_past(d: int, clock: np.ndarray, next_arrival: np.ndarray, arrive: np.ndarray,
                  head: np.ndarray, tail: np.ndarray, nxt: np.ndarray, nready: np.ndarray,
                  available: np.ndarray, indeg: np.ndarray, device: np.ndarray,
                  hp: np.ndarray, hi: np.ndarray) -> None:  # pragma: no cover - compiled
    """``ClockState.receive_past``: the tensors that reached ``d`` by its clock make their
    consumers ready (in the order the arrivals were sent); the earliest pending arrival
    is recomputed."""
    if head[1, d] < 0:
        return
    now = clock[d]
    if next_arrival[d] > now:
        return
    t_next = np.inf
    prev = -1
    r = head[1, d]
    while r >= 0:
        following = nxt[r]
        if arrive[r] <= now:
            _unlink(1, r, prev, d, head, tail, nxt)
            _notify(r, hp, hi, available, indeg, device, head, tail, nxt, nready)
        else:
            if arrive[r] < t_next:
                t_next = arrive[r]
            prev = r
        r = following
    next_arrival[d] = t_next


@njit(cache=True)
def _run_lowest_clock(policy: int, ndev: int, device: np.ndarray, duration: np.ndarray,
                      kind: np.ndarray, tensor: np.ndarray, sp: np.ndarray, si: np.ndarray,
                      sd: np.ndarray, pp: np.ndarray, pi: np.ndarray, hp: np.ndarray,
                      hi: np.ndarray, val: np.ndarray, sources: np.ndarray,
                      record_memory: bool) -> tuple[Any, ...]:  # pragma: no cover
    """``simulate_lowest_clock`` with the chooser of ``policy`` (``published_chooser``);
    ``hp``/``hi``: every node's successors in hash order (CSR). Returns start, end, busy
    time, peak memory, the decisions as four arrays, the memory series as three, the
    makespan and the first node that never ran (-1: none)."""
    n = device.shape[0]
    clock = np.zeros(ndev)
    # per device two singly linked lists of nodes in ``nxt``: ready (0) and the
    # receive nodes whose tensor is under way (1); a node is in at most one list
    head = np.full((2, ndev), -1, dtype=np.int64)
    tail = np.full((2, ndev), -1, dtype=np.int64)
    nxt = np.full(n, -1, dtype=np.int64)
    nready = np.zeros(ndev, dtype=np.int64)
    arrive = np.zeros(n)
    next_arrival = np.full(ndev, np.inf)
    available = np.zeros(n, dtype=np.int64)
    indeg = pp[1:] - pp[:n]
    start = np.full(n, -1.0)
    end = np.full(n, -1.0)
    busy_time = np.zeros(ndev)
    dec_d = np.empty(n, dtype=np.int64)
    dec_t = np.empty(n)
    dec_r = np.empty(n, dtype=np.int64)
    dec_x = np.empty(n, dtype=np.int64)
    nd = 0
    for i in sources:
        if indeg[i] == 0:
            _append(0, i, device[i], head, tail, nxt)
            nready[device[i]] += 1
    order = np.arange(ndev)
    while True:
        d = order[0]
        _receive_past(d, clock, next_arrival, arrive, head, tail, nxt, nready, available,
                      indeg, device, hp, hi)
        if nready[d] > 0:  # run_first: the chooser's node runs to its end
            x, xprev = head[0, d], -1
            if policy != _FIFO:
                top = 0
                if policy == _MSR:  # Eq. 5.2 as the Java code sums it
                    y = x
                    while y >= 0:
                        r = 0
                        for k in range(hp[y], hp[y + 1]):
                            j = hi[k]
                            r += 1
                            if device[j] != device[y]:
                                r += 1
                                if indeg[j] - available[j] == 1:
                                    dj = device[j]
                                    _receive_past(dj, clock, next_arrival, arrive, head, tail,
                                                  nxt, nready, available, indeg, device, hp,
                                                  hi)
                                    r += 1 + 5 * (nready[dj] == 0)
                        if y == x:
                            top = r
                        elif r > top or (r == top and val[y] > val[x]):
                            x, top = y, r
                        y = nxt[y]
                else:  # PCT: the first node of largest Eq. 5.1 value
                    y = nxt[x]
                    while y >= 0:
                        if val[y] > val[x]:
                            x = y
                        y = nxt[y]
                if x != head[0, d]:
                    xprev = head[0, d]
                    while nxt[xprev] != x:
                        xprev = nxt[xprev]
            dec_d[nd], dec_t[nd], dec_r[nd], dec_x[nd] = d, clock[d], nready[d], x
            nd += 1
            _unlink(0, x, xprev, d, head, tail, nxt)
            nready[d] -= 1
            start[x] = clock[d]
            clock[d] += duration[x]
            end[x] = clock[d]
            busy_time[d] += duration[x]
            if kind[x] == SEND:
                k = sp[x]
                r = si[k]
                dr = device[r]
                arrive[r] = clock[d] + sd[k]
                _append(1, r, dr, head, tail, nxt)
                if arrive[r] < next_arrival[dr]:
                    next_arrival[dr] = arrive[r]
            else:
                _notify(x, hp, hi, available, indeg, device, head, tail, nxt, nready)
            if ndev > 1 and clock[order[1]] < clock[d]:
                pos = 1
                while pos + 1 < ndev and clock[order[pos + 1]] < clock[d]:
                    pos += 1
                order[:pos] = order[1:pos + 1].copy()
                order[pos] = d
            continue
        # advance: for j = 1, 2, ...: an arrival on a device among the first j + 1 by the
        # clock of device j (the earliest, the last such device on ties) or else device j
        # deciding
        moved = False
        found, front, upto, t_min = 0, -1, 0, next_arrival[order[0]]
        for j in range(1, ndev):
            t = next_arrival[order[j]]
            if t <= t_min:
                t_min, found = t, j
            if t_min <= clock[order[j]]:
                if t_min < clock[order[found]]:
                    dj = order[found]
                    _receive_past(dj, clock, next_arrival, arrive, head, tail, nxt, nready,
                                  available, indeg, device, hp, hi)
                else:
                    front, upto = found, j
                moved = True
                break
            dj = order[j]
            # the Java code takes in device j's arrivals first; none is due (its earliest,
            # at least t_min, lies after its clock), so its ready list decides
            if nready[dj] > 0:
                for m in range(j):
                    clock[order[m]] = clock[dj]
                order[1:j + 1] = order[:j].copy()
                order[0] = dj
                moved = True
                break
        if not moved:  # next_arrival_anywhere: every clock jumps to the next arrival
            t_min, found = np.inf, -1
            for m in range(ndev):
                if next_arrival[order[m]] < t_min:
                    t_min, found = next_arrival[order[m]], m
            if found < 0:
                break
            front, upto = found, ndev
        if front >= 0:  # to_front
            for m in range(upto):
                clock[order[m]] = t_min
            dj = order[front]
            order[1:front + 1] = order[:front].copy()
            order[0] = dj
            _receive_past(dj, clock, next_arrival, arrive, head, tail, nxt, nready,
                          available, indeg, device, hp, hi)
    for i in range(n):  # receive nodes: no time, at their tensor's arrival
        if kind[i] == RECV and start[i] < 0:
            p = pi[pp[i]]
            if end[p] >= 0:
                start[i] = end[p] + sd[sp[p]]
                end[i] = start[i]
    stuck = -1
    for i in range(n):
        if start[i] < 0:
            stuck = i
            break
    # tensor memory (``_memory`` of sim.devices): held from the producer's end until its
    # last consumer starts; events by time, arrivals before releases, then node order
    ne = 0
    for i in range(n):
        if sp[i + 1] > sp[i] and tensor[i] != 0.0:
            ne += 2
    ev_t = np.empty(ne)
    ev_k = np.empty(ne, dtype=np.int64)
    ev_d = np.empty(ne, dtype=np.int64)
    ev_x = np.empty(ne)
    m = 0
    for i in range(n):
        if sp[i + 1] > sp[i] and tensor[i] != 0.0:
            last = start[si[sp[i]]]
            for k in range(sp[i] + 1, sp[i + 1]):
                if start[si[k]] > last:
                    last = start[si[k]]
            ev_t[m], ev_k[m], ev_d[m], ev_x[m] = end[i], 0, device[i], tensor[i]
            ev_t[m + 1], ev_k[m + 1], ev_d[m + 1], ev_x[m + 1] = last, 1, device[i], -tensor[i]
            m += 2
    by_kind = np.argsort(ev_k, kind="mergesort")
    ev = by_kind[np.argsort(ev_t[by_kind], kind="mergesort")]
    held = np.zeros(ndev)
    peak = np.zeros(ndev)
    nm = ne if record_memory else 0
    mem_t = np.empty(nm)
    mem_d = np.empty(nm, dtype=np.int64)
    mem_h = np.empty(nm)
    for q in range(ne):
        e = ev[q]
        dq = ev_d[e]
        held[dq] += ev_x[e]
        if held[dq] > peak[dq]:
            peak[dq] = held[dq]
        if record_memory:
            mem_t[q], mem_d[q], mem_h[q] = ev_t[e], dq, held[dq]
    return (start, end, busy_time, peak, dec_d[:nd], dec_t[:nd], dec_r[:nd], dec_x[:nd],
            mem_t, mem_d, mem_h, clock[order[ndev - 1]], stuck)


def _policy(name: str) -> int:
    """The kernel's policy code of scheduler ``name``; CommschedError when it has none."""
    name = DEVICE_SCHEDULERS.canonical(name)
    if name not in COMPILED:
        raise CommschedError(f"scheduler {name!r} has no compiled kernel "
                             f"(compiled: {', '.join(COMPILED)})")
    return COMPILED[name]


def _schedule(eg: ExecGraph, start: list[float], end: list[float], makespan: float,
              busy_time: np.ndarray, peak: np.ndarray, decisions: tuple[np.ndarray, ...],
              series: tuple[np.ndarray, ...]) -> DeviceSchedule:
    """A kernel's arrays as the :class:`~commsched.sim.devices.DeviceSchedule` of Python
    values the Python simulators return."""
    return DeviceSchedule(start, end, makespan, eg.traffic, busy_time.tolist(),
                          list(zip(*(a.tolist() for a in decisions), strict=True)),
                          peak.tolist(), list(zip(*(a.tolist() for a in series), strict=True)))


def simulate_scheduler(eg: ExecGraph, c: Cluster, name: str, opts: Options,
                       link_contention: bool = False, record_memory: bool = False,
                       ) -> DeviceSchedule:
    """Simulate ``eg`` under the thesis' scheduler ``name`` (compiled; see the module
    docstring): the schedule of ``simulate_devices(eg, DEVICE_SCHEDULERS[name](eg, c,
    opts), link_contention, record_memory)``.

    Parameters
    ----------
    eg : ExecGraph
        The executed graph (Sec. 2.4).
    c : Cluster
        The devices (node times for the PCT values of PCT and MSR).
    name : str
        ``fifo``, ``pct`` or ``msr`` (or an alias; :data:`COMPILED`).
    opts : Options
        The run's options, passed to :func:`~commsched.placement.schedulers.pct_values`.
    link_contention : bool
        Serialise the transfers of each directed device pair (our extension).
    record_memory : bool
        Keep the memory series (the peak per device is always computed).

    Returns
    -------
    DeviceSchedule
        Equal in every field to the one the Python queues give.

    Raises
    ------
    CommschedError
        For a name that is not a compiled scheduler.
    InvalidSchedule
        When some node never becomes executable.

    References
    ----------
    Laich 2017, Sec. 3.2, Secs. 5.2-5.4 (Eqs. 5.1, 5.2).
    """
    policy = _policy(name)
    x = eg.arrays
    val = np.asarray(pct_values(eg, c, opts)) if policy != _FIFO else np.zeros(eg.n)
    if policy == _MSR:
        tp, ti = _rank_targets(eg.n, x.kind, x.succ_ptr, x.succ_idx)
    else:
        tp, ti = np.zeros(eg.n + 1, dtype=np.int64), np.zeros(0, dtype=np.int64)
    (start, end, busy_time, peak, dec_d, dec_t, dec_r, dec_x, mem_t, mem_d, mem_h,
     done) = _run(policy, eg.n_devices, x.device, x.duration, x.tensor, x.succ_ptr,
                  x.succ_idx, x.succ_delay, x.pred_ptr, x.pred_idx, val, tp, ti,
                  link_contention, record_memory)
    starts = start.tolist()
    if done != eg.n:
        stuck = next(i for i in range(eg.n) if starts[i] < 0)
        raise InvalidSchedule(f"simulation stalled: node {stuck} never became executable")
    ends = end.tolist()
    return _schedule(eg, starts, ends, max(ends, default=0.0), busy_time, peak,
                     (dec_d, dec_t, dec_r, dec_x), (mem_t, mem_d, mem_h))


def simulate_published(eg: ExecGraph, c: Cluster, name: str, opts: Options,
                       source_order: Sequence[int] | None = None,
                       record_memory: bool = False) -> DeviceSchedule:
    """Simulate ``eg`` as the published Java simulator does with its scheduler ``name``
    (compiled): the schedule of ``simulate_lowest_clock(eg, published_chooser(name, eg, c,
    opts), identity_hashes(eg.n, opts.seed), source_order, record_memory)`` (the Python loop
    of ``tests/placement_published_reference.py``), equal in every field.

    Parameters
    ----------
    eg, c, name
        As in :func:`simulate_scheduler`.
    opts : Options
        ``seed`` draws the hash-set orders of the successors
        (:func:`~commsched.placement.model.identity_hashes`); ``send_ops`` is charged to
        receive nodes in the PCT values, as the Java code does.
    source_order : sequence of int, optional
        Order of the nodes executable at the start (the partitioner's assignment order);
        default by index.
    record_memory : bool
        As in :func:`simulate_scheduler`.

    Returns
    -------
    DeviceSchedule
        Equal in every field to the one the Python loop gives.

    Raises
    ------
    CommschedError, InvalidSchedule
        As :func:`simulate_scheduler` raises them.

    References
    ----------
    Laich 2017, Sec. 3.2 (the lowest local clock decides), Secs. 5.2-5.4 as the published
    code reads them.
    """
    policy = _policy(name)
    x = eg.arrays
    n = eg.n
    # successors in the order of the Java hash sets (a stable sort, as sorted() is)
    key = np.asarray(identity_hashes(n, opts.seed))
    owner = np.repeat(np.arange(n), np.diff(x.succ_ptr))
    hi = x.succ_idx[np.lexsort((key[x.succ_idx], owner))]
    val = np.asarray(pct_values(eg, c, opts)) if policy != _FIFO else np.zeros(n)
    sources = (np.arange(n) if source_order is None
               else np.asarray(source_order, dtype=np.int64))
    (start, end, busy_time, peak, dec_d, dec_t, dec_r, dec_x, mem_t, mem_d, mem_h,
     makespan, stuck) = _run_lowest_clock(
        policy, eg.n_devices, x.device, x.duration, x.kind, x.tensor, x.succ_ptr,
        x.succ_idx, x.succ_delay, x.pred_ptr, x.pred_idx, x.succ_ptr, hi, val, sources,
        record_memory)
    if stuck >= 0:
        raise InvalidSchedule(f"simulation stalled: node {stuck} never became executable")
    return _schedule(eg, start.tolist(), end.tolist(), float(makespan), busy_time, peak,
                     (dec_d, dec_t, dec_r, dec_x), (mem_t, mem_d, mem_h))
