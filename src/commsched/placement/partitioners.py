"""The seven partitioners of the thesis (Laich 2017, Ch. 4).

Every partitioner maps a :class:`~commsched.placement.model.Problem` onto a
:class:`~commsched.placement.model.Cluster` and returns the device of every node (an int
array). All place whole assignment units (a colocation group or a lone node) on devices of
the type the unit needs with enough memory left (Sec. 4.1: the units' summed ``size_est``
stays below the memory); a unit that fits nowhere raises
:class:`~commsched.placement.model.PlacementError` naming it. :data:`PARTITIONERS` is the
registry (name -> callable with the signature of :data:`Partitioner`).

=============  =======================================================================
``hashing``    Sec. 4.2: colocation groups, then lone nodes; the k-th unit tries device
               ``k mod |D|``, then the next ids, until one is feasible.
``heft``       Sec. 4.3: :func:`commsched.placement.heft.heft_core` with ranks from
               Eqs. 4.1-4.2; placement only (the order comes from the scheduler).
``batch_split`` Sec. 4.4: nodes sorted by operations rank (Eqs. 4.3-4.4, source + sink
               rank) cut into |D| ranges of equal size; range k goes to the k-th fastest
               device, or the next feasible one in that order.
``icp``        Sec. 4.5: Iterated Critical Path (see :func:`icp`).
``cp``         Sec. 4.6: the critical path on the fastest feasible devices, then every
               other unit on the feasible device with the least ``exec_min`` (Eq. 4.5).
``mite``       Sec. 4.7: the unit goes to the feasible device minimising Eq. 4.6
               (traffic x execution time x memory x importance speed boost).
``dfs``        Sec. 4.8: depth-first from the sources (largest operations rank first);
               each new unit goes to the feasible device minimising traffic x execution
               time (the MITE factors).
=============  =======================================================================

Choices where the thesis is open (documented per function, all deterministic or seeded):
units are visited in the order of their smallest node id; device ties go to the lower id;
the critical path (ICP, CP) is the longest path by operations (Eq. 4.3 ranks, each node's
path predecessor the first predecessor reaching its rank); ICP splits a subpath that fits
no device into halves.

Under ``semantics="published-code"`` the partitioners follow the published Java code where
we have read it through: HEFT (:func:`_heft_published`), Batch Split (hash-map order, ranges
by device id), MITE and DFS (the Java traffic term, :meth:`_Heuristic._traffic_java`; zero
factors as 1e-6; DFS children in hash order), the memory test (the demand may reach the
capacity) and the hash-set orders (units of Hashing, CP and MITE, colocation members,
successors: a seeded permutation, :func:`~commsched.placement.model.identity_hashes`).
Hashing's and MITE's Java code visits colocation groups in the order of a hash map keyed
by an id that depends on the file's line order; we shuffle them (groups still first).
ICP's and CP's Java code (path bookkeeping with its own recomputation) is not ported:
their published-code runs use the thesis algorithms with the seeded orders.
"""

from __future__ import annotations

import functools
import heapq
import itertools
import math
import random
from collections.abc import Callable, Iterable, Sequence

import numpy as np
from numba import njit

from commsched.placement.heft import heft_core
from commsched.placement.model import (
    Cluster,
    Options,
    Placement,
    PlacementError,
    Problem,
    describe_unit,
    identity_hashes,
    java_hash_order,
)
from commsched.registry import Registry

__all__ = [
    "PARTITIONERS",
    "Partitioner",
    "batch_split",
    "cp",
    "dfs",
    "hashing",
    "heft",
    "icp",
    "mite",
]

#: A partitioner: problem, devices, options -> device of every node.
Partitioner = Callable[[Problem, Cluster, Options], Placement]


class _State:
    """Placement under construction: devices, memory and operations per device."""

    def __init__(self, p: Problem, c: Cluster, opts: Options) -> None:
        self.p, self.c = p, c
        self.order: list[int] = []
        # the published code assigns a colocation group's members in hash-set order
        self.hash = identity_hashes(p.n, opts.seed) if opts.semantics != "thesis" else None
        # Sec. 4.1: the sum stays below the memory; the Java code lets it reach it
        self.strict = opts.semantics == "thesis"
        self.place = np.full(p.n, -1, dtype=np.int64)
        self.unit_dev = np.full(len(p.unit_members), -1, dtype=np.int64)
        self.used = np.zeros(c.n)
        self.ops = np.zeros(c.n)
        self.type_mask = {t: c.feasible_type(t) for t in range(4)}

    def feasible(self, units: Sequence[int]) -> np.ndarray:
        """Devices that take all ``units`` (type and memory)."""
        p = self.p
        mem = float(sum(p.unit_mem[u] for u in units))
        mask = (self.used + mem < self.c.memory if self.strict
                else self.used + mem <= self.c.memory)
        for u in units:
            mask &= self.type_mask[int(p.unit_constraint[u])]
        return mask

    def assign(self, u: int, d: int) -> None:
        p = self.p
        self.unit_dev[u] = d
        members = p.unit_members[u]
        self.place[members] = d
        self.order.extend(members if self.hash is None or len(members) == 1
                          else sorted(members, key=self.hash.__getitem__))
        self.used[d] += p.unit_mem[u]
        self.ops[d] += p.unit_ops[u]

    def result(self) -> Placement:
        return Placement(self.place, self.order)

    def fail(self, u: int) -> PlacementError:
        return PlacementError(f"{describe_unit(self.p, u)} fits on no device "
                              f"(device type or memory)")


def _unit_order(p: Problem, opts: Options, groups_first: bool = True) -> list[int]:
    units = list(range(len(p.unit_members)))
    if opts.semantics == "published-code":
        random.Random(opts.seed).shuffle(units)
    if groups_first:
        units.sort(key=lambda u: not p.unit_colocated[u])  # stable
    return units


def _probe(st: _State, u: int, order: Sequence[int], first: int) -> int:
    """The first feasible device of ``order`` starting at position ``first``, cyclically."""
    mask = st.feasible([u])
    k = len(order)
    for i in range(k):
        d = order[(first + i) % k]
        if mask[d]:
            return int(d)
    raise st.fail(u)


def hashing(p: Problem, c: Cluster, opts: Options) -> Placement:
    """Sec. 4.2: the k-th unit (groups first) goes to device ``k mod |D|`` or the next
    feasible id.

    Parameters
    ----------
    p, c : Problem, Cluster
        The problem (the graph whose units are hashed onto the devices).
    opts : Options
        ``semantics`` (``published-code``: the units in hash order).

    Returns
    -------
    Placement
        The device of every node and the assignment order; device ids probed from
        ``k mod |D|`` on.

    Raises
    ------
    PlacementError
        If the probe wraps around without a feasible device.

    References
    ----------
    Laich 2017, Sec. 4.2 (Hashing); the constraints of Sec. 4.1.
    """
    st = _State(p, c, opts)
    ids = list(range(c.n))
    for k, u in enumerate(_unit_order(p, opts)):
        st.assign(u, _probe(st, u, ids, k % c.n))
    return st.result()


def heft(p: Problem, c: Cluster, opts: Options) -> Placement:
    """Sec. 4.3: HEFT on feasible devices; ranks Eq. 4.1 with ``ops / mean speed`` (Eq. 4.2)
    and ``size / mean rate``; a colocation group is fixed by its first member in rank order.
    Published code: :func:`_heft_published`.

    Parameters
    ----------
    p, c : Problem, Cluster
        The problem (the graph ranked by Eqs. 4.1-4.2 on the devices).
    opts : Options
        ``semantics`` (``published-code``: the Java HEFT, :func:`_heft_published`).

    Returns
    -------
    Placement
        The device of every node and the assignment order; HEFT's device of every node.

    Raises
    ------
    PlacementError
        If no feasible device can take a node's unit.

    References
    ----------
    Laich 2017, Sec. 4.3 (HEFT); Topcuoglu et al. 2002; the constraints of Sec. 4.1.
    """
    if opts.semantics == "published-code":
        return _heft_published(p, c, opts)
    st = _State(p, c, opts)
    w = p.ops[:, None] / c.speed[None, :]
    w_mean = p.ops / float(c.speed.mean())
    size = p.size

    def choose(v: int, _lower: np.ndarray) -> np.ndarray:
        u = int(p.unit[v])
        mask = np.zeros(c.n, dtype=bool)
        if st.unit_dev[u] >= 0:
            mask[st.unit_dev[u]] = True
            return mask
        mask = st.feasible([u])
        if not mask.any():
            raise st.fail(u)
        return mask

    def placed(v: int, d: int) -> None:
        u = int(p.unit[v])
        if st.unit_dev[u] < 0:
            st.assign(u, d)

    heft_core(w, w_mean, p.succ, lambda u, _v: float(size[u]), c.rate, choose=choose,
              placed=placed)
    return st.result()


def _java_upward_ranks(p: Problem, c: Cluster, key: Sequence[float]) -> list[float]:
    """Upward ranks as the published code propagates them from the sinks.

    Mean rate: the first device's row of rates (0 to itself) summed and divided by the
    number of devices; mean speed: the mean. A node reported by a successor ``s`` whose rank
    exceeds the node's value so far takes ``rank(s) + size / mean rate`` (so the result
    depends on the order of the reports: the recursion from the sinks, every set in hash
    order); after the last report it adds ``ops / mean speed`` and reports to its
    predecessors.
    """
    first = c.rate[0]
    mean_rate = float(np.where(np.isfinite(first), first, 0.0).sum()) / c.n
    mean_speed = float(c.speed.sum()) / c.n
    rank = [0.0] * p.n
    got = [0] * p.n
    sinks = sorted((v for v in range(p.n) if not p.succ[v]), key=key.__getitem__)
    stack: list[tuple[int, int]] = [(v, -1) for v in reversed(sinks)]
    while stack:
        v, s = stack.pop()
        if s >= 0:
            got[v] += 1
            if rank[v] < rank[s]:  # (one device: no transfers, the term is 0)
                rank[v] = rank[s] + (float(p.size[v]) / mean_rate if mean_rate else 0.0)
        if got[v] == len(p.succ[v]):
            rank[v] += float(p.ops[v]) / mean_speed
            stack.extend((q, v) for q in sorted(p.pred[v], key=key.__getitem__, reverse=True))
    return rank


def _heft_published_order(p: Problem, c: Cluster, st: _State, seed: int) -> list[int]:
    """The published HEFT's node order: decreasing :func:`_java_upward_ranks`, ranks within
    5e-5 ordered by a random number per node (drawn from ``seed + 1``), sorted from the
    hash-map order."""
    assert st.hash is not None
    rank = _java_upward_ranks(p, c, st.hash)
    tie = random.Random(seed + 1).random

    breaker = [tie() for _ in range(p.n)]

    def cmp(a: int, b: int) -> int:
        if abs(rank[a] - rank[b]) < 0.00005:
            return -1 if breaker[a] > breaker[b] else 1
        return 1 if rank[b] > rank[a] else -1

    return sorted(java_hash_order(p.ids), key=functools.cmp_to_key(cmp))


@njit(cache=True)
def _heft_published_run(nodes: np.ndarray, unit: np.ndarray, unit_mem: np.ndarray,
                        unit_type: np.ndarray, type_ok: np.ndarray, memory: np.ndarray,
                        pp: np.ndarray, pi: np.ndarray, size: np.ndarray, ops: np.ndarray,
                        speed: np.ndarray, rate: np.ndarray,
                        ) -> tuple[np.ndarray, np.ndarray, int]:  # pragma: no cover
    """The device loop of :func:`_heft_published` over ``nodes`` (rank order); returns
    the units in the order they were assigned, their devices, and the first unit that fits
    nowhere (-1: none). Each device's slots are kept sorted by start (``starts``,
    ``ends``; one slot per start time): the gap search begins at the first slot that
    starts after the earliest start, the slot before it giving the end it waits for."""
    n, ndev, nu = unit.shape[0], speed.shape[0], unit_mem.shape[0]
    unit_dev = np.full(nu, -1, dtype=np.int64)
    assigned = np.empty(nu, dtype=np.int64)
    na = 0
    used = np.zeros(ndev)
    finish = np.full(n, -1.0)
    cap = max(16, 2 * n // max(ndev, 1))
    starts = np.empty((ndev, cap))
    ends = np.empty((ndev, cap))
    count = np.zeros(ndev, dtype=np.int64)
    for v in nodes:
        u = unit[v]
        fixed = unit_dev[u]
        best_d, best_a, best_b = -1, 0.0, 0.0
        for d in range(ndev):
            if fixed >= 0:
                if d != fixed:
                    continue
            elif not type_ok[unit_type[u], d] or not used[d] + unit_mem[u] <= memory[d]:
                continue
            # earliest start: the minimum over predecessors placed on other devices
            est, changed = np.inf, False
            for k in range(pp[v], pp[v + 1]):
                q = pi[k]
                dq = unit_dev[unit[q]]
                if dq < 0 or dq == d:
                    continue
                t = finish[q] + size[q] / rate[d, dq]
                if t < est:
                    est, changed = t, True
            if not changed:
                est = 0.0
            dur = ops[v] / speed[d]
            m = count[d]
            i = np.searchsorted(starts[d, :m], est, side="right")
            last_end = ends[d, i - 1] if i > 0 else 0.0
            gap = False
            for k in range(i, m):
                a = max(last_end, est)
                if starts[d, k] - a >= dur:
                    gap = True
                    break
                last_end = ends[d, k]
            if not gap:
                a = max(last_end, est)
            b = a + dur
            if best_d < 0 or b < best_b:
                best_d, best_a, best_b = d, a, b
        if best_d < 0:
            return assigned[:na], unit_dev, u
        if fixed < 0:
            unit_dev[u] = best_d
            used[best_d] += unit_mem[u]
            assigned[na] = u
            na += 1
        d, a = best_d, best_a
        finish[v] = best_b
        m = count[d]
        i = np.searchsorted(starts[d, :m], a)
        if i < m and starts[d, i] == a:
            continue  # a Java TreeSet keeps the first slot of a start time
        if m == starts.shape[1]:
            grown = np.empty((ndev, 2 * m))
            grown[:, :m] = starts
            starts = grown
            grown = np.empty((ndev, 2 * m))
            grown[:, :m] = ends
            ends = grown
        starts[d, i + 1:m + 1] = starts[d, i:m].copy()
        ends[d, i + 1:m + 1] = ends[d, i:m].copy()
        starts[d, i], ends[d, i] = a, best_b
        count[d] = m + 1
    return assigned[:na], unit_dev, -1


def _heft_published(p: Problem, c: Cluster, opts: Options) -> Placement:
    """HEFT as the published Java code partitions (read from its ``HeftPartitioning``).

    Ranks: :func:`_java_upward_ranks`. Order: decreasing rank, ranks within 5e-5 ordered by
    a random number per node (seeded here), sorted from the hash-map order. Each unplaced
    node's unit goes to the feasible device (lowest id on ties) whose slot for the node
    ends first; a node already placed with its group gets its slot on that device. The
    earliest start on a device is the *minimum* over predecessors of finish + size / rate,
    where a predecessor on the same device (rate 0 in the Java tables, so an infinite
    time) or not yet placed counts for nothing, and 0 when none counts. The slot: the
    first gap between slots (in start order, slots starting together counted once) that
    starts after the earliest start and holds the node, else after the last slot. The
    loop over nodes and devices runs compiled (:func:`_heft_published_run`).
    """
    st = _State(p, c, opts)
    nodes = _heft_published_order(p, c, st, opts.seed)
    pred_len = np.fromiter((len(x) for x in p.pred), dtype=np.int64, count=p.n)
    pp = np.zeros(p.n + 1, dtype=np.int64)
    np.cumsum(pred_len, out=pp[1:])
    pi = np.fromiter(itertools.chain.from_iterable(p.pred), dtype=np.int64, count=int(pp[-1]))
    type_ok = np.stack([st.type_mask[t] for t in range(4)])
    assigned, unit_dev, failed = _heft_published_run(
        np.asarray(nodes, dtype=np.int64), p.unit, p.unit_mem,
        np.asarray(p.unit_constraint, dtype=np.int64), type_ok, c.memory, pp, pi,
        np.asarray(p.size, dtype=float), np.asarray(p.ops, dtype=float),
        np.asarray(c.speed, dtype=float), np.asarray(c.rate, dtype=float))
    for u in assigned.tolist():
        st.assign(u, int(unit_dev[u]))
    if failed >= 0:
        raise st.fail(failed)
    return st.result()


def batch_split(p: Problem, c: Cluster, opts: Options) -> Placement:
    """Sec. 4.4: operations-rank ranges to devices by speed.

    Thesis: nodes by decreasing rank (ties: lower index) cut into ``|D|`` ranges of
    ``ceil(n / |D|)`` nodes; range k goes to the k-th fastest device, or the next feasible
    one in that order. Published code: nodes by decreasing rank in a stable sort of the
    Java hash-map order (:func:`~commsched.placement.model.java_hash_order`); the node at
    position i starts at device id ``int(i / (n / |D|))`` (single-precision floats, as the
    Java code computes it; the list sorted by speed is built but never used), then the
    next feasible device id.

    Parameters
    ----------
    p, c : Problem, Cluster
        The problem (the graph cut into |D| ranges for the devices).
    opts : Options
        ``semantics`` (``published-code``: hash-map order, ranges by device id).

    Returns
    -------
    Placement
        The device of every node and the assignment order; range k on the k-th
        fastest device or the next feasible one.

    Raises
    ------
    PlacementError
        If a unit fits on none of the devices in that order.

    References
    ----------
    Laich 2017, Sec. 4.4 (Batch Split, Eqs. 4.3-4.4); the constraints of Sec. 4.1.
    """
    st = _State(p, c, opts)
    src, sink = p.ops_ranks()
    rank = src + sink
    if opts.semantics == "thesis":
        nodes = [int(v) for v in np.lexsort((np.arange(p.n), -rank))]
        order = [int(d) for d in np.lexsort((np.arange(c.n), -c.speed))]
        per = -(-p.n // c.n)  # ceil: |D| ranges of equal size
        first = [k // per for k in range(p.n)]
    else:
        nodes = sorted(java_hash_order(p.ids), key=lambda v: -rank[v])
        order = list(range(c.n))
        per32 = np.float32(p.n) / np.float32(c.n)
        first = [int(np.float32(k) / per32) for k in range(p.n)]
    for k, v in enumerate(nodes):
        u = int(p.unit[v])
        if st.unit_dev[u] >= 0:
            continue
        st.assign(u, _probe(st, u, order, first[k]))
    return st.result()


def _critical_path(p: Problem, src: np.ndarray, pred: Sequence[Iterable[int]],
                   sinks: Iterable[int]) -> list[int]:
    """Longest path by operations ending in the sink of largest ``src + ops``."""
    ops = p.ops
    end = max(sinks, key=lambda v: (src[v] + ops[v], -v))
    path = [end]
    x = end
    while True:
        best, bp = -1.0, -1
        for q in sorted(pred[x]):
            if src[q] + ops[q] > best:
                best, bp = src[q] + ops[q], q
        if bp < 0:
            break
        path.append(bp)
        x = bp
    path.reverse()
    return path


def _min_exec(st: _State, units: Sequence[int]) -> int:
    """Feasible device with the least ``exec_min`` (Eq. 4.5) so far; -1 if none."""
    mask = st.feasible(units)
    if not mask.any():
        return -1
    em = np.where(mask, st.ops / st.c.speed, np.inf)
    return int(np.argmin(em))


def cp(p: Problem, c: Cluster, opts: Options) -> Placement:
    """Sec. 4.6: the critical path's units on the fastest feasible device each, then the
    other units (groups first) on the feasible device with the least ``exec_min``.

    Our choice for the text's "critical path based on upward ranks": the longest path by
    operations, as ICP extracts its first path (Eq. 4.3); the sink it ends in has the
    largest source rank plus own operations.

    Parameters
    ----------
    p, c : Problem, Cluster
        The problem (the graph whose critical path goes to the fastest of the devices).
    opts : Options
        ``semantics`` and ``seed`` (``published-code``: seeded unit order).

    Returns
    -------
    Placement
        The device of every node and the assignment order; the critical path fast,
        every other unit by least ``exec_min``.

    Raises
    ------
    PlacementError
        If a unit has no feasible device left.

    References
    ----------
    Laich 2017, Sec. 4.6 (Critical Path, Eq. 4.5); the constraints of Sec. 4.1.
    """
    st = _State(p, c, opts)
    src, _ = p.ops_ranks()
    path = _critical_path(p, src, p.pred, [v for v in range(p.n) if not p.succ[v]])
    by_speed = [int(d) for d in np.lexsort((np.arange(c.n), -c.speed))]
    for v in path:
        u = int(p.unit[v])
        if st.unit_dev[u] < 0:
            st.assign(u, _probe(st, u, by_speed, 0))
    for u in _unit_order(p, opts):
        if st.unit_dev[u] < 0:
            d = _min_exec(st, [u])
            if d < 0:
                raise st.fail(u)
            st.assign(u, d)
    return st.result()


def icp(p: Problem, c: Cluster, opts: Options) -> Placement:
    """Sec. 4.5: Iterated Critical Path.

    Repeat until every node is placed: among the sinks of the remaining edge set (nodes
    without remaining out-edges that still have an in-edge or are unplaced) take the one
    with the largest operations source rank (Eq. 4.3 on the remaining edges; ties: the
    larger source rank plus own operations, then the lower id); follow the path
    predecessors to a source; cut the path into subpaths at placed nodes and where the
    device type the units need changes; remove the path's edges; place each subpath's
    units together on the feasible device with the least ``exec_min`` (Eq. 4.5); a subpath
    that fits nowhere is split into halves (our choice), a single unit that fits nowhere is
    an error. Source ranks are updated incrementally (only downstream of removed edges).

    Parameters
    ----------
    p, c : Problem, Cluster
        The problem (the graph split into critical paths for the devices).
    opts : Options
        ``semantics`` and ``seed`` (``published-code``: seeded hash-set orders).

    Returns
    -------
    Placement
        The device of every node and the assignment order; each path's units on one
        device where they fit.

    Raises
    ------
    PlacementError
        If a single unit of a split path fits nowhere.

    References
    ----------
    Laich 2017, Sec. 4.5 (Iterated Critical Path); the constraints of Sec. 4.1.
    """
    st = _State(p, c, opts)
    eu, ev = p.edges
    assigned, unit_dev, failed = _icp_run(
        np.asarray(p.ops, dtype=float), eu, ev, np.asarray(p.topo, dtype=np.int64), p.unit,
        p.unit_mem, p.unit_ops, np.asarray(p.unit_constraint, dtype=np.int64),
        np.stack([st.type_mask[t] for t in range(4)]), c.memory, c.speed, st.strict)
    for u in assigned.tolist():
        st.assign(u, int(unit_dev[u]))
    if failed >= 0:
        raise st.fail(failed)
    return st.result()


@njit(cache=True)
def _icp_run(ops: np.ndarray, eu: np.ndarray, ev: np.ndarray, topo: np.ndarray,
             unit: np.ndarray, unit_mem: np.ndarray, unit_ops: np.ndarray,
             unit_type: np.ndarray,
             type_ok: np.ndarray, memory: np.ndarray, speed: np.ndarray, strict: bool,
             ) -> tuple[np.ndarray, np.ndarray, int]:  # pragma: no cover - compiled
    """The loop of :func:`icp`: the remaining edge set as the edges ``eu[k] -> ev[k]``
    with a removed flag, source ranks updated downstream of removed edges, candidate
    sinks in a heap keyed ``(-src, -(src + ops), node)`` (stale entries skipped), each
    subpath's units on the feasible device with the least ``exec_min`` (halves where they
    fit nowhere). Returns the units in the order they were assigned, their devices and
    the unit that fits nowhere (-1: none)."""
    n, ne, nu, ndev = ops.shape[0], eu.shape[0], unit_mem.shape[0], speed.shape[0]
    # out-edges are eu-major (the edge ids); in-edges as edge ids grouped by target
    sp = np.zeros(n + 1, dtype=np.int64)
    ip = np.zeros(n + 1, dtype=np.int64)
    for k in range(ne):
        sp[eu[k] + 1] += 1
        ip[ev[k] + 1] += 1
    for v in range(n):
        sp[v + 1] += sp[v]
        ip[v + 1] += ip[v]
    ie = np.empty(ne, dtype=np.int64)
    fill = ip[:n].copy()
    for k in range(ne):
        ie[fill[ev[k]]] = k
        fill[ev[k]] += 1
    removed = np.zeros(ne, dtype=np.bool_)
    nout = sp[1:] - sp[:n]
    nin = ip[1:] - ip[:n]
    pos = np.empty(n, dtype=np.int64)
    for k in range(n):
        pos[topo[k]] = k
    src = np.zeros(n)
    ppred = np.full(n, -1, dtype=np.int64)
    unit_dev = np.full(nu, -1, dtype=np.int64)
    assigned = np.empty(nu, dtype=np.int64)
    na = 0
    used = np.zeros(ndev)
    dev_ops = np.zeros(ndev)
    for v in topo:
        best, bp = 0.0, -1
        for k in range(ip[v], ip[v + 1]):
            q = eu[ie[k]]
            x = src[q] + ops[q]
            if bp < 0 or x > best or (x == best and q < bp):
                best, bp = x, q
        src[v], ppred[v] = best, bp
    heap = [(0.0, 0.0, 0)]
    heap.pop()
    for v in range(n):
        if nout[v] == 0 and (nin[v] > 0 or unit_dev[unit[v]] < 0):
            heapq.heappush(heap, (-src[v], -(src[v] + ops[v]), v))
    path = np.empty(n, dtype=np.int64)
    seg = np.empty(n, dtype=np.int64)  # the subpaths' units, back to back
    seg_end = np.empty(n + 1, dtype=np.int64)
    stack = np.empty((2 * n + 2, 2), dtype=np.int64)
    seen = np.full(n, -1, dtype=np.int64)
    touched = [(0, 0)]
    touched.pop()
    rounds = 0
    while heap:
        s, _, v = heapq.heappop(heap)
        if -s != src[v] or not (nout[v] == 0 and (nin[v] > 0 or unit_dev[unit[v]] < 0)):
            continue
        m = 0
        x = v
        while True:
            path[m] = x
            m += 1
            if ppred[x] < 0:
                break
            x = ppred[x]
        path[:m] = path[:m][::-1].copy()
        # subpaths: cut at placed nodes and where the device type changes
        nseg, ns, cur_start, cur_type = 0, 0, 0, 3
        for i in range(m):
            x = path[i]
            u = unit[x]
            if unit_dev[u] >= 0:
                if ns > cur_start:
                    seg_end[nseg] = ns
                    nseg += 1
                cur_start, cur_type = ns, 3
                continue
            t = unit_type[u]
            if ns > cur_start and t != 3 and cur_type != 3 and t != cur_type:
                seg_end[nseg] = ns
                nseg += 1
                cur_start, cur_type = ns, 3
            dup = False
            for k in range(cur_start, ns):
                if seg[k] == u:
                    dup = True
                    break
            if not dup:
                seg[ns] = u
                ns += 1
            if t != 3:
                cur_type = t
        if ns > cur_start:
            seg_end[nseg] = ns
            nseg += 1
        lo = 0
        for g in range(nseg):
            # the subpath's units still unplaced, compacted in place
            w = lo
            for k in range(lo, seg_end[g]):
                if unit_dev[seg[k]] < 0:
                    seg[w] = seg[k]
                    w += 1
            top = 0
            if w > lo:
                stack[0, 0], stack[0, 1] = lo, w
                top = 1
            while top > 0:  # depth first, the first half before the second
                top -= 1
                a, b = stack[top, 0], stack[top, 1]
                mem = 0.0
                for k in range(a, b):
                    mem += unit_mem[seg[k]]
                best_d, best_e = -1, np.inf
                for d in range(ndev):
                    fits = used[d] + mem < memory[d] if strict else used[d] + mem <= memory[d]
                    if not fits:
                        continue
                    for k in range(a, b):
                        if not type_ok[unit_type[seg[k]], d]:
                            fits = False
                            break
                    if not fits:
                        continue
                    e = dev_ops[d] / speed[d]
                    if best_d < 0 or e < best_e:
                        best_d, best_e = d, e
                if best_d >= 0:
                    for k in range(a, b):
                        u = seg[k]
                        unit_dev[u] = best_d
                        used[best_d] += unit_mem[u]
                        dev_ops[best_d] += unit_ops[u]
                        assigned[na] = u
                        na += 1
                    continue
                if b - a == 1:
                    return assigned[:na], unit_dev, seg[a]
                half = (b - a) // 2
                stack[top, 0], stack[top, 1] = a + half, b
                stack[top + 1, 0], stack[top + 1, 1] = a, a + half
                top += 2
            lo = seg_end[g]
        # remove the path's edges (every copy) and update the ranks downstream
        for i in range(m - 1):
            a, b = path[i], path[i + 1]
            for k in range(sp[a], sp[a + 1]):
                if ev[k] == b and not removed[k]:
                    removed[k] = True
                    nout[a] -= 1
                    nin[b] -= 1
            heapq.heappush(touched, (pos[b], b))
        for i in range(m):
            x = path[i]
            if nout[x] == 0 and (nin[x] > 0 or unit_dev[unit[x]] < 0):
                heapq.heappush(heap, (-src[x], -(src[x] + ops[x]), x))
        rounds += 1
        while touched:
            _, x = heapq.heappop(touched)
            if seen[x] == rounds:
                continue
            seen[x] = rounds
            best, bp = 0.0, -1
            for k in range(ip[x], ip[x + 1]):
                e = ie[k]
                if removed[e]:
                    continue
                q = eu[e]
                y = src[q] + ops[q]
                if bp < 0 or y > best or (y == best and q < bp):
                    best, bp = y, q
            changed = best != src[x]
            src[x], ppred[x] = best, bp
            if changed:
                for k in range(sp[x], sp[x + 1]):
                    if not removed[k]:
                        heapq.heappush(touched, (pos[ev[k]], ev[k]))
            if nout[x] == 0 and (nin[x] > 0 or unit_dev[unit[x]] < 0):
                heapq.heappush(heap, (-src[x], -(src[x] + ops[x]), x))
    return assigned[:na], unit_dev, -1


@njit(cache=True)
def _eq46(tt: np.ndarray, mask: np.ndarray, dev_ops: np.ndarray, unit_ops: float,
          speed: np.ndarray, used: np.ndarray, memory: np.ndarray, importance: float,
          full: bool, published: bool) -> np.ndarray:  # pragma: no cover - compiled
    """Eq. 4.6 on every device (``inf`` where ``mask`` is False; ``mask`` has a device):
    traffic ``tt`` over its maximum ``t̂`` (0 counts 1e-6), execution time with the unit
    over its maximum ``ê``, and with ``full`` (MITE; DFS uses the first two) the used
    memory portion (an empty device: a tenth of the smallest non-zero portion) and the
    speed boost ``1 - importance * speed / fastest``. Maxima over the feasible devices.

    Published code: an execution time or boost factor of 0 counts 1e-6, and the smallest
    portion is taken among the feasible devices (the text: among all)."""
    n = tt.shape[0]
    et = (dev_ops + unit_ops) / speed
    that, ehat, fhat, mtilde = -np.inf, -np.inf, -np.inf, np.inf
    for d in range(n):
        portion = used[d] / memory[d]
        if portion > 0 and (mask[d] or not published):
            mtilde = min(mtilde, portion)
        if mask[d]:
            that, ehat, fhat = max(that, tt[d]), max(ehat, et[d]), max(fhat, speed[d])
    if mtilde == np.inf:
        mtilde = 1.0
    out = np.full(n, np.inf)
    for d in range(n):
        if not mask[d]:
            continue
        traf = 1.0 if that == 0.0 else (1e-6 if tt[d] == 0.0 else tt[d] / that)
        ex = et[d] / ehat if ehat > 0 else 1.0
        if published and ex == 0.0:
            ex = 1e-6
        heu = traf * ex
        if full:
            portion = used[d] / memory[d]
            boost = 1.0 - importance * speed[d] / fhat
            if published and boost == 0.0:
                boost = 1e-6
            heu = heu * (portion if portion > 0 else mtilde / 10.0) * boost
        out[d] = heu
    return out


class _Heuristic:
    """The factors of MITE's Eq. 4.6 for one unit over all devices."""

    def __init__(self, p: Problem, c: Cluster, st: _State, opts: Options) -> None:
        self.p, self.c, self.st = p, c, st
        self.inv_rate = 1.0 / c.rate
        self.succ_devs: list[dict[int, int]] = [{} for _ in range(p.n)]
        self.published = opts.semantics == "published-code"
        src, sink = p.ops_ranks()
        rank = src + sink
        top = float(rank.max()) if p.n else 1.0
        imp = rank / top if top > 0 else np.zeros(p.n)
        self.importance = np.zeros(len(p.unit_members))
        np.add.at(self.importance, p.unit, imp)
        self.importance /= np.asarray([len(m) for m in p.unit_members], dtype=float)
        self.rank = rank

    def assign(self, u: int, d: int) -> None:
        self.st.assign(u, d)
        p = self.p
        for v in p.unit_members[u]:
            for q in p.pred[v]:
                sd = self.succ_devs[q]
                sd[d] = sd.get(d, 0) + 1

    def traffic_temp(self, u: int) -> np.ndarray:
        """Eqs. 4.7-4.10 for every device (a transfer counted once per device pair)."""
        if self.published:
            return self._traffic_java(u)
        p, place = self.p, self.st.place
        vec = np.zeros(self.c.n)
        for v in p.unit_members[u]:
            for q in p.pred[v]:
                dq = place[q]
                if dq < 0:
                    continue
                contrib = p.size[q] * self.inv_rate[dq]
                ids = list(self.succ_devs[q])
                if ids:
                    contrib = contrib.copy()
                    contrib[ids] = 0.0
                vec += contrib
            dests = {int(place[s]) for s in p.succ[v] if place[s] >= 0}
            for e in dests:
                vec += p.size[v] * self.inv_rate[:, e]
        return vec

    def _traffic_java(self, u: int) -> np.ndarray:
        """The published code's additional traffic of a unit on every device: per member,
        ``floor(size / rate)`` (Java int arithmetic) for each placed predecessor on
        another device, unless the predecessor has a successor whose node id equals the
        device id (the code's test whether it already sends there), plus one
        ``floor(size / rate)`` towards the device of the first placed successor (in hash
        order) that is on another device."""
        p, place, c = self.p, self.st.place, self.c
        vec = np.zeros(c.n)
        key = self.st.hash
        assert key is not None
        for v in p.unit_members[u]:
            for q in p.pred[v]:
                dq = place[q]
                if dq < 0:
                    continue
                contrib = np.floor(p.size[q] * self.inv_rate[dq])
                ids = [p.ids[s] for s in p.succ[q] if 0 <= p.ids[s] < c.n]
                if ids:
                    contrib[ids] = 0.0
                vec += contrib
            placed = sorted((s for s in p.succ[v] if place[s] >= 0), key=key.__getitem__)
            if placed:
                e0 = int(place[placed[0]])
                vec += np.floor(p.size[v] * self.inv_rate[:, e0])  # 0 on e0 itself
                e1 = next((int(place[s]) for s in placed if place[s] != e0), -1)
                if e1 >= 0:
                    vec[e0] += math.floor(p.size[v] / c.rate[e0, e1])
        return vec

    def factors(self, u: int, mask: np.ndarray, full: bool) -> np.ndarray:
        """Eq. 4.6 (``full``) or traffic x execution time (DFS) on the feasible devices
        (:func:`_eq46`)."""
        st = self.st
        return _eq46(self.traffic_temp(u), mask, st.ops, float(self.p.unit_ops[u]),
                     self.c.speed, st.used, self.c.memory, float(self.importance[u]), full,
                     self.published)

    def place(self, u: int, full: bool) -> None:
        mask = self.st.feasible([u])
        if not mask.any():
            raise self.st.fail(u)
        self.assign(u, int(np.argmin(self.factors(u, mask, full))))


def mite(p: Problem, c: Cluster, opts: Options) -> Placement:
    """Sec. 4.7: colocation groups, then lone nodes, each on the feasible device that
    minimises Eq. 4.6.

    Our readings: the traffic of a unit's successors on a device counts once per device
    (Eq. 4.9's intent: one send/receive pair per device); ``ê`` and ``t̂`` are the maxima
    over the feasible devices; the memory factor is the current used portion (Eq. 4.14).

    Parameters
    ----------
    p, c : Problem, Cluster
        The problem (the graph placed unit by unit by Eq. 4.6 on the devices).
    opts : Options
        ``semantics`` (``published-code``: the Java traffic term, zero factors as 1e-6).

    Returns
    -------
    Placement
        The device of every node and the assignment order; the device minimising Eq.
        4.6 for every unit.

    Raises
    ------
    PlacementError
        If Eq. 4.6 has no feasible device for a unit.

    References
    ----------
    Laich 2017, Sec. 4.7 (MITE, Eq. 4.6); the constraints of Sec. 4.1.
    """
    st = _State(p, c, opts)
    h = _Heuristic(p, c, st, opts)
    for u in _unit_order(p, opts):
        h.place(u, full=True)
    return st.result()


def dfs(p: Problem, c: Cluster, opts: Options) -> Placement:
    """Sec. 4.8: depth-first search from the sources in decreasing operations rank
    (successors in id order); each unplaced unit goes to the feasible device minimising
    MITE's traffic x execution time.

    Parameters
    ----------
    p, c : Problem, Cluster
        The problem (the graph walked depth-first from its sources over the devices).
    opts : Options
        ``semantics`` (``published-code``: successors in hash order).

    Returns
    -------
    Placement
        The device of every node and the assignment order; the device minimising
        traffic x execution time for every unit.

    Raises
    ------
    PlacementError
        If a unit reached by the walk has no feasible device.

    References
    ----------
    Laich 2017, Sec. 4.8 (Depth First Search); the constraints of Sec. 4.1.
    """
    st = _State(p, c, opts)
    h = _Heuristic(p, c, st, opts)
    sources = [v for v in range(p.n) if not p.pred[v]]
    tie = (np.arange(p.n) if opts.semantics == "thesis"
           else np.random.default_rng(opts.seed).random(p.n))
    sources.sort(key=lambda v: (-h.rank[v], tie[v]))
    visited = np.zeros(p.n, dtype=bool)
    for s in sources:
        stack = [s]
        while stack:
            v = stack.pop()
            if visited[v]:
                continue
            visited[v] = True
            u = int(p.unit[v])
            if st.unit_dev[u] < 0:
                h.place(u, full=False)
            if st.hash is None:
                stack.extend(reversed(p.succ[v]))
            else:  # the published code follows a hash set of successors
                stack.extend(sorted(p.succ[v], key=st.hash.__getitem__, reverse=True))
    return st.result()


#: The partitioner registry (thesis Ch. 4), in the thesis' order; the aliases are the
#: thesis' full names of Secs. 4.3, 4.5, 4.6 and 4.8.
PARTITIONERS: Registry[Partitioner] = Registry("partitioner")
PARTITIONERS.add("hashing", hashing)
PARTITIONERS.add("heft", heft, aliases=("heterogeneous-earliest-finish-time",))
PARTITIONERS.add("batch_split", batch_split)
PARTITIONERS.add("icp", icp, aliases=("iterated-critical-path",))
PARTITIONERS.add("cp", cp, aliases=("critical-path",))
PARTITIONERS.add("mite", mite)
PARTITIONERS.add("dfs", dfs, aliases=("depth-first-search",))
