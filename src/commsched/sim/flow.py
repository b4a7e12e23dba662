"""Flow-level (fluid) network simulator: event-driven rate allocation over shared links.

The network is a set of *links* with capacities (bytes/s) and a *route table* that maps a
(source host, destination host) pair to the links a flow between them crosses. Two
topologies are built in:

* :func:`big_switch` -- the non-blocking switch of Varys (Chowdhury et al., SIGCOMM 2014,
  Sec. 4.1) and Sincronia: every host has an egress (uplink) and an ingress (downlink)
  port; a flow from ``s`` to ``d`` crosses ``egress[s]`` and ``ingress[d]`` (also when
  ``s == d``: a rack-level mapper and reducer in the same rack of the Coflow-Benchmark
  trace still cross their port, as in Varys' simulator);
* :func:`two_tier` -- racks of hosts under a core: an inter-rack flow also crosses its
  source rack's uplink and its destination rack's downlink, whose capacity is the rack's
  host capacity divided by the oversubscription ratio.

Any other topology is a :class:`Network` built from explicit capacities and routes.

A flow has a source, a destination, a size (bytes) and a release time; it is *active* from
its release until its last byte is delivered. Whenever the set of active flows changes (a
release, a completion, or a wake-up time asked for by the caller), the *policy* is called
with a :class:`View` of the active flows and returns their rates; rates stay constant until
the next such event (fluid model: no packets, no slow start, no latency). A policy is any
callable ``View -> ndarray`` of rates; the allocators below are the building blocks:

* :func:`max_min` -- max-min fair water-filling (per flow), optionally weighted
  (a flow of weight ``w`` gets ``w`` times the share at every bottleneck);
* :func:`priority_max_min` -- strict priority classes, each class water-filled on what
  the classes before it left;
* :func:`port_share` -- each flow takes the smaller of its equal shares at its links,
  unused capacity not redistributed (how Varys' simulator approximates per-flow fairness).

:meth:`FlowSim.advance` lets a caller interleave other events (compute tasks: see
:mod:`commsched.echelon.jobs`); :func:`simulate` runs a static set of flows to the end.
With ``record=True`` every constant-rate segment is kept and :func:`check_flow_schedule`
verifies it: capacities never exceeded, no flow before its release, every size delivered.

Examples
--------
Two flows from host 0 share its egress port fairly; the short one finishes at 2 s, the
long one then runs alone:

>>> net = big_switch(3, rate=1.0)
>>> r = simulate(net, src=[0, 0], dst=[1, 2], size=[1.0, 3.0], release=[0.0, 0.0])
>>> r.finish.tolist()
[2.0, 4.0]
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
from numba import njit

from commsched.errors import CommschedError

__all__ = [
    "FlowResult",
    "FlowSim",
    "InvalidFlowSchedule",
    "Network",
    "Policy",
    "Quantized",
    "RouteShare",
    "Segment",
    "View",
    "big_switch",
    "check_flow_schedule",
    "max_min",
    "port_share",
    "priority_fill",
    "priority_max_min",
    "run_in_chunks",
    "simulate",
    "two_tier",
    "water_fill",
    "water_fill_by_link",
]

#: Relative tolerance of the simulator's float arithmetic (completion, saturation).
REL_TOL = 1e-9


class InvalidFlowSchedule(CommschedError):
    """A recorded flow schedule that breaks a rule of :func:`check_flow_schedule`."""


@dataclass(frozen=True)
class Network:
    """Links with capacities and a route table.

    ``routes[s, d]`` lists the link ids a flow from host ``s`` to host ``d`` crosses,
    padded with -1 (shape ``(hosts, hosts, max_hops)``).
    """

    capacity: np.ndarray
    routes: np.ndarray
    link_names: tuple[str, ...]

    def __post_init__(self) -> None:
        if self.routes.ndim != 3 or self.routes.shape[0] != self.routes.shape[1]:
            raise CommschedError("network: routes must have shape (hosts, hosts, hops)")
        if len(self.link_names) != len(self.capacity):
            raise CommschedError("network: one name per link")
        if np.any(~(self.capacity > 0)) or not np.all(np.isfinite(self.capacity)):
            raise CommschedError("network: link capacities must be positive and finite")
        if self.routes.max(initial=-1) >= len(self.capacity):
            raise CommschedError("network: a route names a link that does not exist")

    @property
    def hosts(self) -> int:
        return int(self.routes.shape[0])


def big_switch(hosts: int, rate: float, ingress_rate: float | None = None) -> Network:
    """A non-blocking switch: host ``h`` has ``egress[h]`` (link ``h``) and ``ingress[h]``
    (link ``hosts + h``) of ``rate`` (``ingress_rate``) bytes/s.

    Parameters
    ----------
    hosts : int
        Number of hosts (ports).
    rate : float
        Egress capacity of every host, bytes/s.
    ingress_rate : float, optional
        Ingress capacity of every host, bytes/s (default: ``rate``).

    Returns
    -------
    Network
        ``2 * hosts`` links; every route crosses its source's egress and its
        destination's ingress.
    """
    if hosts < 1:
        raise CommschedError("big switch: needs at least one host")
    cap = np.concatenate([np.full(hosts, float(rate)),
                          np.full(hosts, float(ingress_rate if ingress_rate else rate))])
    h = np.arange(hosts)
    routes = np.stack(np.broadcast_arrays(h[:, None], hosts + h[None, :]), axis=-1)
    names = tuple(f"egress{i}" for i in h) + tuple(f"ingress{i}" for i in h)
    return Network(cap, routes.astype(np.int64), names)


def two_tier(racks: int, hosts_per_rack: int, rate: float, oversubscription: float) -> Network:
    """Racks under a core. Host ``h`` is in rack ``h // hosts_per_rack``; links: host
    egress ``[0, H)``, host ingress ``[H, 2H)``, rack uplinks ``[2H, 2H+R)`` and downlinks
    ``[2H+R, 2H+2R)`` of capacity ``hosts_per_rack * rate / oversubscription``.

    Parameters
    ----------
    racks : int
        Number of racks ``R``.
    hosts_per_rack : int
        Hosts under each rack switch (``H = racks * hosts_per_rack``).
    rate : float
        Capacity of a host's egress and ingress link, bytes/s.
    oversubscription : float
        Hosts' aggregate rate over a rack uplink's capacity (1 = non-blocking).

    Returns
    -------
    Network
        Routes within a rack cross the two host links; between racks also the source
        rack's uplink and the destination rack's downlink.
    """
    if racks < 1 or hosts_per_rack < 1 or not oversubscription >= 1.0:
        raise CommschedError("two-tier: racks, hosts per rack >= 1, oversubscription >= 1")
    n = racks * hosts_per_rack
    core = hosts_per_rack * rate / oversubscription
    cap = np.concatenate([np.full(2 * n, float(rate)), np.full(2 * racks, float(core))])
    h = np.arange(n)
    rack = h // hosts_per_rack
    s, d = np.meshgrid(h, h, indexing="ij")
    same = rack[s] == rack[d]
    routes = np.stack([s, np.where(same, n + d, 2 * n + rack[s]),
                       np.where(same, -1, 2 * n + racks + rack[d]),
                       np.where(same, -1, n + d)], axis=-1)
    names = (tuple(f"egress{i}" for i in h) + tuple(f"ingress{i}" for i in h)
             + tuple(f"up{r}" for r in range(racks)) + tuple(f"down{r}" for r in range(racks)))
    return Network(cap, routes.astype(np.int64), names)


@dataclass
class View:
    """What a policy sees at an event: the active flows (indices into the simulation's
    flow table, in admission order), their links and the network. ``remaining`` gathers
    the active flows' remaining bytes on first use (a policy that reads the simulator's
    arrays in place, ``sim.remaining[active]`` in a compiled kernel, skips the copy)."""

    now: float
    active: np.ndarray
    links: np.ndarray
    net: Network
    sim: FlowSim

    @cached_property
    def remaining(self) -> np.ndarray:
        return self.sim.remaining[self.active]


#: A rate allocation policy: the rates of ``view.active`` (same order).
Policy = Callable[[View], np.ndarray]


def max_min(links: np.ndarray, capacity: np.ndarray,
            weight: np.ndarray | None = None) -> np.ndarray:
    """Weighted max-min fair rates by water-filling (:func:`water_fill` on every flow).

    Parameters
    ----------
    links : numpy.ndarray
        ``(flows, hops)`` link ids of each flow, padded with -1.
    capacity : numpy.ndarray
        Capacity of each link (bytes/s).
    weight : numpy.ndarray, optional
        Per-flow weight (default 1 for every flow).

    Returns
    -------
    numpy.ndarray
        Per-flow rate: a flow of weight ``w`` gets ``w * x`` where ``x`` is its
        bottleneck's fair level. Flows with weight 0 or no link get 0.

    Examples
    --------
    >>> max_min(np.array([[0, 1], [0, 2], [3, 2]]), np.array([2.0, 9, 3, 9])).tolist()
    [1.0, 1.0, 2.0]
    """
    n = len(links)
    w = np.ones(n) if weight is None else np.asarray(weight, dtype=float)
    rate = np.zeros(n)
    if n:
        water_fill(np.ascontiguousarray(links, dtype=np.int64), np.arange(n),
                   np.asarray(capacity, dtype=float), w, rate)
    return rate


@njit(cache=True)
def _fill_round(cap: np.ndarray, wsum: np.ndarray, used: np.ndarray, nused: int,
                tol: np.ndarray, total: float,
                full: np.ndarray) -> tuple[float, int, float]:  # pragma: no cover - compiled
    """One water-filling round on the links ``used[:nused]`` (leftover ``cap``, weight
    of their growing flows ``wsum``): raise the level ``total`` by the smallest leftover
    per weight, take that from every link; the links whose leftover falls to ``tol``
    (the tightest one when float noise leaves none) saturate. Returns the new level, how
    many links saturated (their ids in ``full``, in ``used`` order) and the raise."""
    level = np.inf
    arg = -1
    for j in range(nused):
        lk = used[j]
        share = cap[lk] / wsum[lk]
        if share < level:
            level, arg = share, lk
    level = max(level, 0.0)
    nfull = 0
    for j in range(nused):
        lk = used[j]
        cap[lk] -= wsum[lk] * level
        if cap[lk] <= tol[lk]:
            full[nfull] = lk
            nfull += 1
    if nfull == 0:  # float noise: saturate the tightest link
        full[0] = arg
        nfull = 1
    return total + level, nfull, level


@njit(cache=True)
def _keep_growing(used: np.ndarray, nused: int,
                  left: np.ndarray) -> int:  # pragma: no cover - compiled
    """Keep in ``used[:nused]`` the links with ``left > 0`` (growing flows still cross
    them); returns how many."""
    k = 0
    for j in range(nused):
        lk = used[j]
        if left[lk] > 0:
            used[k] = lk
            k += 1
    return k


@njit(cache=True)
def water_fill(links: np.ndarray, idx: np.ndarray, capacity: np.ndarray, w: np.ndarray,
               rate: np.ndarray) -> None:  # pragma: no cover - compiled
    """Weighted max-min water-filling of the flows ``idx`` (rows of ``links``, weights
    ``w[idx]``) on ``capacity``; writes ``rate[idx]`` (compiled with numba).

    Each round raises the level of every growing flow until a link saturates (its
    leftover falls to ``REL_TOL`` of the capacity it started with, or, when float noise
    saturates none, the tightest link); the flows through saturated links freeze at
    ``w * level``. A round costs O(links used) plus the flows it freezes, so a call costs
    O(flows * hops + rounds * links); links are numbered densely from 0. Groups the flows
    that have a link and a positive weight by link and runs :func:`water_fill_by_link`.

    Parameters
    ----------
    links : ndarray of int64, shape (flows, hops)
        Link ids per flow, padded with -1.
    idx : ndarray of int64
        The flows to water-fill (distinct rows of ``links``); others are left untouched.
    capacity : ndarray of float
        Capacity per link (bytes/s); not modified.
    w : ndarray of float
        Weight per flow (indexed like ``links``); a flow of weight <= 0 gets rate 0.
    rate : ndarray of float
        Output, indexed like ``links``.
    """
    nl = capacity.shape[0]
    hops = links.shape[1]
    live = np.zeros(links.shape[0], np.bool_)
    cnt = np.zeros(nl, np.int64)
    for i in idx:
        rate[i] = 0.0
        if w[i] > 0:
            for h in range(hops):
                if links[i, h] >= 0:
                    live[i] = True
            if live[i]:
                for h in range(hops):
                    if links[i, h] >= 0:
                        cnt[links[i, h]] += 1
    start = np.zeros(nl + 1, np.int64)
    for lk in range(nl):
        start[lk + 1] = start[lk] + cnt[lk]
    fill = start[:nl].copy()
    by_link = np.empty(start[nl], np.int64)  # live flows grouped by link, in idx order
    for i in idx:
        if live[i]:
            for h in range(hops):
                lk = links[i, h]
                if lk >= 0:
                    by_link[fill[lk]] = i
                    fill[lk] += 1
    lid = np.flatnonzero(cnt)
    water_fill_by_link(links, w, lid, by_link, start[lid], cnt[lid], capacity,
                       np.zeros(links.shape[0], np.bool_), rate, np.empty(idx.shape[0], np.int64))


@njit(cache=True)
def water_fill_by_link(links: np.ndarray, w: np.ndarray, lid: np.ndarray, flows: np.ndarray,
                       start: np.ndarray, count: np.ndarray, capacity: np.ndarray,
                       frozen: np.ndarray, rate: np.ndarray,
                       out: np.ndarray) -> int:  # pragma: no cover - compiled
    """:func:`water_fill` on ``max(capacity, 0)`` of flows given by link: the flows on link
    ``lid[k]`` (``lid`` increasing) are ``flows[start[k]:start[k] + count[k]]``, in the
    order of :func:`water_fill`'s ``idx``, and every flow listed is filled (it has a
    positive weight, and all its links are among ``lid`` with it in their lists).
    Water-filling depends on the order of its flows only through each link's flows (the
    order their weights are summed and they freeze in), so the rates are
    :func:`water_fill`'s bit for bit, without its grouping of the flows by link (a caller
    that keeps the lists standing, :func:`commsched.echelon.coflow._coflow_run`, pays
    O(flows) per call instead of O(flows + links) plus a sort).

    Parameters
    ----------
    links : numpy.ndarray
        ``(flows, hops)`` link ids per flow, padded with -1.
    w : numpy.ndarray
        Per-flow weight (> 0 for the flows listed).
    lid : numpy.ndarray
        The links the flows cross, increasing.
    flows, start, count : numpy.ndarray
        The flows on link ``lid[k]``: ``flows[start[k]:start[k] + count[k]]``, in one
        order for all links.
    capacity : numpy.ndarray
        Capacity per link (bytes/s; negative read as 0); not modified.
    frozen : numpy.ndarray
        Per-flow bool work space, all False (and left so).
    rate : numpy.ndarray
        Output, per flow: the listed flows' rates.
    out : numpy.ndarray
        Output: the listed flows, each once, in the order they froze.

    Returns
    -------
    int
        The number of flows filled (written to ``out``).
    """
    nl = capacity.shape[0]
    hops = links.shape[1]
    cap = np.empty(nl)
    wsum = np.empty(nl)
    tol = np.empty(nl)
    cnt = np.empty(nl, np.int64)
    at = np.empty(nl, np.int64)  # each used link's k
    used = np.empty(lid.shape[0], np.int64)
    full = np.empty(lid.shape[0], np.int64)
    nused = 0
    for k in range(lid.shape[0]):
        if count[k]:
            s = 0.0
            for p in range(start[k], start[k] + count[k]):
                s += w[flows[p]]
            lk = lid[k]
            used[nused] = lk
            nused += 1
            at[lk] = k
            wsum[lk] = s
            cnt[lk] = count[k]
            cap[lk] = max(capacity[lk], 0.0)
            tol[lk] = REL_TOL * cap[lk]
    total = 0.0
    nout = 0
    while nused:
        total, nfull, _ = _fill_round(cap, wsum, used, nused, tol, total, full)
        for lk in full[:nfull]:
            k = at[lk]
            for p in range(start[k], start[k] + count[k]):
                i = flows[p]
                if not frozen[i]:
                    frozen[i] = True
                    out[nout] = i
                    nout += 1
                    rate[i] = w[i] * total
                    for h in range(hops):
                        q = links[i, h]
                        if q >= 0 and q != lk:  # lk's sums are cleared below
                            wsum[q] -= w[i]
                            cnt[q] -= 1
            cnt[lk] = 0
            wsum[lk] = 0.0
        nused = _keep_growing(used, nused, cnt)
    for j in range(nout):
        frozen[out[j]] = False
    return nout


def priority_max_min(links: np.ndarray, capacity: np.ndarray, klass: np.ndarray,
                     weight: np.ndarray | None = None) -> np.ndarray:
    """Strict priority: classes in increasing ``klass`` order, each water-filled (weighted
    max-min) on the capacity the classes before it left (:func:`priority_fill`).

    Parameters
    ----------
    links, capacity : numpy.ndarray
        As for :func:`max_min`.
    klass : numpy.ndarray
        Per-flow priority class; a smaller class is served first.
    weight : numpy.ndarray, optional
        Per-flow weight within its class (default 1).

    Returns
    -------
    numpy.ndarray
        Per-flow rate.

    Examples
    --------
    >>> priority_max_min(np.array([[0, 1], [0, 2]]), np.ones(3), np.array([1, 0])).tolist()
    [0.0, 1.0]
    """
    n = len(links)
    rate = np.zeros(n)
    if n == 0:
        return rate
    w = np.ones(n) if weight is None else np.asarray(weight, dtype=float)
    order = np.argsort(klass, kind="stable")
    ks = np.asarray(klass)[order]
    bounds = np.concatenate([[0], np.flatnonzero(ks[1:] != ks[:-1]) + 1, [n]])
    priority_fill(np.ascontiguousarray(links, dtype=np.int64), order, bounds,
                  np.asarray(capacity, dtype=float), w, rate)
    return rate


@njit(cache=True)
def priority_fill(links: np.ndarray, order: np.ndarray, bounds: np.ndarray,
                  capacity: np.ndarray, w: np.ndarray,
                  rate: np.ndarray) -> None:  # pragma: no cover - compiled
    """Strict-priority weighted water-filling (compiled): class ``c`` is the flows
    ``order[bounds[c]:bounds[c + 1]]``; classes in that order, each :func:`water_fill`-ed
    on what the classes before it left. Once no link has more than ``REL_TOL`` of its
    ``capacity`` left, the remaining classes get 0; within a class, a flow crossing a link
    with nothing left gets 0 without entering the water-filling (O(flows) for the rest of
    a saturated network).

    Parameters
    ----------
    links : numpy.ndarray
        ``(flows, hops)`` link ids, padded with -1.
    order : numpy.ndarray
        Flow ids, class after class.
    bounds : numpy.ndarray
        Class ``c`` is ``order[bounds[c]:bounds[c + 1]]``.
    capacity : numpy.ndarray
        Capacity of each link (bytes/s).
    w : numpy.ndarray
        Per-flow weight.
    rate : numpy.ndarray
        Output: ``rate[order]`` is written in place.
    """
    for i in order:
        rate[i] = 0.0
    cap = capacity.copy()
    hops = links.shape[1]
    sel = np.empty(order.shape[0], np.int64)
    for c in range(bounds.shape[0] - 1):
        left = False
        for lk in range(cap.shape[0]):
            if cap[lk] > REL_TOL * capacity[lk]:
                left = True
                break
        if not left:
            return
        # a flow crossing a link with nothing left gets 0: water-filling would freeze it
        # at level 0 in its first round and change nothing else, so it is left out
        m = 0
        for i in order[bounds[c]:bounds[c + 1]]:
            ok = True
            for h in range(hops):
                lk = links[i, h]
                if lk >= 0 and cap[lk] <= 0.0:
                    ok = False
                    break
            if ok:
                sel[m] = i
                m += 1
        if m == 0:
            continue
        grp = sel[:m]
        water_fill(links, grp, np.maximum(cap, 0.0), w, rate)
        for i in grp:
            for h in range(hops):
                lk = links[i, h]
                if lk >= 0:
                    cap[lk] -= rate[i]


def port_share(links: np.ndarray, capacity: np.ndarray) -> np.ndarray:
    """Each flow takes the smallest of ``capacity / (flows on the link)`` over its links;
    what a flow cannot use is not given to others (Varys' simulator's approximation of
    per-flow fairness; ``fair-ports`` in :mod:`commsched.echelon.coflow`).

    Parameters
    ----------
    links, capacity : numpy.ndarray
        As for :func:`max_min`.

    Returns
    -------
    numpy.ndarray
        Per-flow rate, bytes/s.

    Examples
    --------
    >>> port_share(np.array([[0, 1], [0, 2], [3, 2]]), np.array([2.0, 9, 3, 9])).tolist()
    [1.0, 1.0, 1.5]
    """
    rate = np.zeros(len(links))
    _port_share(np.ascontiguousarray(links, dtype=np.int64), np.asarray(capacity, dtype=float),
                rate)
    return rate


@njit(cache=True)
def _port_share(links: np.ndarray, capacity: np.ndarray,
                rate: np.ndarray) -> None:  # pragma: no cover - compiled
    count = np.zeros(capacity.shape[0], np.int64)
    for i in range(links.shape[0]):
        for h in range(links.shape[1]):
            if links[i, h] >= 0:
                count[links[i, h]] += 1
    for i in range(links.shape[0]):
        r = np.inf
        for h in range(links.shape[1]):
            lk = links[i, h]
            if lk >= 0:
                r = min(r, capacity[lk] / count[lk])
        rate[i] = r


def _load(links: np.ndarray, rate: np.ndarray, n_links: int) -> np.ndarray:
    valid = links >= 0
    return np.bincount(links[valid], weights=np.broadcast_to(rate[:, None], links.shape)[valid],
                       minlength=n_links)


@dataclass(frozen=True)
class Segment:
    """Rates that held on ``[t0, t1)`` for flows ``ids``."""

    t0: float
    t1: float
    ids: np.ndarray
    rates: np.ndarray


@dataclass
class FlowResult:
    """The outcome of a simulation: per-flow finish times (``nan`` if unfinished) and the
    number of events (rate allocations)."""

    release: np.ndarray
    finish: np.ndarray
    segments: list[Segment] = field(default_factory=list)
    events: int = 0


@njit(cache=True)
def _step(act: np.ndarray, na: int, links: np.ndarray, rates: np.ndarray,
          remaining: np.ndarray, size: np.ndarray, finish: np.ndarray, now: float,
          t_next: float, done: np.ndarray) -> tuple[int, float, int]:  # pragma: no cover
    """One constant-rate segment of the active flows ``act[:na]`` (rates ``rates[:na]``,
    links ``links[:na]``, compacted in place): from ``now`` to the first completion or
    ``t_next``. A flow completes when its finish time, ``now`` plus its time to finish,
    is at most the segment's end plus ``REL_TOL`` of the segment, or its remaining bytes
    fall to ``REL_TOL`` of its size. The finish times are compared as absolute times, as
    the segment's end is computed: the flow that sets the end always completes, also when
    its time to finish is below the float resolution of ``now`` (``now + t == now``), where
    a test on the segment's length ``dt`` would keep it active with an ever-zero segment
    (the hang of issue 25). Returns the number
    of flows still active, the segment's end and the number of completed flows (their
    ids in ``done[:k]``); an end of -1 for a stall (no rate, nothing else will happen),
    -2 for a rate that is negative or not finite."""
    dt_done = np.inf
    for j in range(na):
        r = rates[j]
        if not (r >= 0.0 and r < np.inf):
            return na, -2.0, 0
        if r > 0.0:
            t = remaining[act[j]] / r
            if t < dt_done:
                dt_done = t
    if dt_done == np.inf and t_next == np.inf:
        return na, -1.0, 0
    t_end = min(now + dt_done, t_next)
    k, nd = _advance(act, na, links, rates, remaining, size, finish, now, t_end, False, done)
    return k, t_end, nd


@njit(cache=True)
def _advance(act: np.ndarray, na: int, links: np.ndarray, rates: np.ndarray,
             remaining: np.ndarray, size: np.ndarray, finish: np.ndarray, now: float,
             t_end: float, own: bool, done: np.ndarray) -> tuple[int, int]:  # pragma: no cover
    """The active flows ``act[:na]`` at constant rates from ``now`` to ``t_end``: a flow
    whose finish time, ``now`` plus its time to finish, is at most ``t_end`` plus
    ``REL_TOL`` of the interval completes, and so does one whose remaining bytes fall to
    ``REL_TOL`` of its size; it finishes at ``t_end``, or with ``own`` (the policy holds
    its rates through completions: :class:`FlowSim`, ``hold``) at its own finish time
    when that is earlier. The others lose ``rate * (t_end - now)`` bytes. Compacts
    ``act[:na]`` (rates, links alongside) in place; returns the number of flows still
    active and of completed ones (their ids in ``done[:k]``)."""
    dt = t_end - now
    due = t_end + REL_TOL * dt
    k = 0
    nd = 0
    for j in range(na):
        i = act[j]
        r = rates[j]
        before = remaining[i]
        remaining[i] = before - r * dt
        due_now = r > 0.0 and now + before / r <= due
        if due_now or remaining[i] <= REL_TOL * size[i]:
            remaining[i] = 0.0
            finish[i] = min(now + before / r, t_end) if own and due_now else t_end
            done[nd] = i
            nd += 1
        else:
            if k < j:
                act[k] = i
                rates[k] = r
                for h in range(links.shape[1]):
                    links[k, h] = links[j, h]
            k += 1
    return k, nd


class FlowSim:
    """The event loop. Add flows with :meth:`add` (at or after :attr:`now`), then
    :meth:`advance`; flow columns beyond src/dst/size/release live in :attr:`meta`
    (name -> array, grown with the flows) for policies to read.

    The active flows, their links and rates are kept in admission order in arrays that
    are compacted in place when flows complete (no per-event rebuild); a segment (the
    time to the next completion, the remaining bytes, completions) is one compiled pass
    over them (:func:`_step`), so an event costs the policy plus O(active flows).

    A policy with a ``hold(view, rates)`` method (:class:`Quantized`,
    :class:`commsched.echelon.coflow.CoflowEvents`) says after each call until when
    its rates hold whatever completes: the simulation then runs to that time (or an
    earlier release, wake-up or ``until``) in one pass (:func:`_advance`), each flow
    completing at its own time, and calls the policy only there; a hold at or before
    the current time is an ordinary event-by-event run."""

    def __init__(self, net: Network, policy: Policy, record: bool = False) -> None:
        self.net = net
        self.policy = policy
        self.record = record
        self.now = 0.0
        self.n = 0
        self._cap = 1024
        self.src = np.zeros(self._cap, dtype=np.int64)
        self.dst = np.zeros(self._cap, dtype=np.int64)
        self.size = np.zeros(self._cap)
        self.release = np.zeros(self._cap)
        self.remaining = np.zeros(self._cap)
        self.finish = np.full(self._cap, np.nan)
        self.meta: dict[str, np.ndarray] = {}
        # not yet active: ids sorted by (release, id), from position _next on
        self._pending = np.zeros(0, dtype=np.int64)
        self._pending_at = np.zeros(0)  # their releases
        self._next = 0
        hops = net.routes.shape[2]
        self._act = np.zeros(self._cap, dtype=np.int64)  # active ids: _act[:_na]
        self._links = np.zeros((self._cap, hops), dtype=np.int64)
        self._rates = np.zeros(self._cap)
        self._done = np.zeros(self._cap, dtype=np.int64)
        self._na = 0
        self._dirty = True
        self._hold = -math.inf  # the policy's rates hold until then (hold method)
        self._wake: list[float] = []
        self.events = 0  #: policy calls so far
        self.segments: list[Segment] = []

    def _grow(self, need: int) -> None:
        if self._cap >= need:
            return
        while self._cap < need:
            self._cap *= 2
        for name in ("src", "dst", "size", "release", "remaining", "finish",
                     "_act", "_rates", "_done", "_links"):
            a = getattr(self, name)
            b = (np.full(self._cap, np.nan) if name == "finish"
                 else np.zeros((self._cap, *a.shape[1:]), a.dtype))
            b[: len(a)] = a
            setattr(self, name, b)
        for k, a in self.meta.items():
            b = np.zeros(self._cap, a.dtype)
            b[: len(a)] = a
            self.meta[k] = b

    def add(self, src: Sequence[int] | np.ndarray, dst: Sequence[int] | np.ndarray,
            size: Sequence[float] | np.ndarray, release: Sequence[float] | np.ndarray,
            **meta: Sequence[float] | np.ndarray) -> np.ndarray:
        """Add flows.

        Parameters
        ----------
        src, dst : sequence of int or numpy.ndarray
            Per flow, source and destination host.
        size : sequence of float or numpy.ndarray
            Per flow, bytes (positive, finite).
        release : sequence of float or numpy.ndarray
            Per flow, its start time in seconds (not before the current time).
        **meta : sequence of float or numpy.ndarray
            Per-flow columns for the policy, given for all flows alike (a column unknown
            so far is created with zeros for earlier flows).

        Returns
        -------
        numpy.ndarray
            The new flows' ids.

        Raises
        ------
        CommschedError
            If the columns differ in length, a host is outside the network, a size is
            not positive and finite, or a release is not finite or before the current
            time.
        """
        s = np.asarray(src, dtype=np.int64)
        k = len(s)
        d, z, r = (np.asarray(dst, dtype=np.int64), np.asarray(size, dtype=float),
                   np.asarray(release, dtype=float))
        if not (len(d) == len(z) == len(r) == k):
            raise CommschedError("flows: src, dst, size and release differ in length")
        h = self.net.hosts
        if k and (s.min() < 0 or d.min() < 0 or s.max() >= h or d.max() >= h):
            raise CommschedError(f"flows: a host is outside 0..{h - 1}")
        if k and (np.any(~(z > 0)) or not np.all(np.isfinite(z))):
            raise CommschedError("flows: sizes must be positive and finite")
        if k and (np.any(~np.isfinite(r)) or r.min() < self.now - REL_TOL * max(1, self.now)):
            raise CommschedError(f"flows: release before the current time {self.now}")
        i0 = self.n
        self._grow(i0 + k)
        sl = slice(i0, i0 + k)
        self.src[sl], self.dst[sl], self.size[sl] = s, d, z
        self.release[sl] = np.maximum(r, self.now)
        self.remaining[sl] = z
        for name, col in meta.items():
            a = np.asarray(col)
            if name not in self.meta:
                self.meta[name] = np.zeros(self._cap, a.dtype if a.dtype.kind in "if" else float)
            self.meta[name][sl] = a
        self.n += k
        ids = np.arange(i0, i0 + k)
        pend = np.concatenate([self._pending[self._next:], ids])
        self._pending = pend[np.lexsort((pend, self.release[pend]))]
        self._pending_at = self.release[self._pending]
        self._next = 0
        return ids

    def wake_at(self, t: float) -> None:
        """Ask for a policy call at time ``t`` (for time-varying policies).

        Parameters
        ----------
        t : float
            Simulated time, seconds; a time not after the current one is ignored.
        """
        if t > self.now:
            self._wake.append(t)
            self._wake.sort(reverse=True)

    @property
    def active(self) -> np.ndarray:
        """Ids of the active flows in admission order (a view: copy it to keep it)."""
        return self._act[: self._na]

    def next_release(self) -> float:
        return (float(self._pending_at[self._next])
                if self._next < len(self._pending) else math.inf)

    def _admit(self) -> None:
        stop = int(np.searchsorted(self._pending_at, self.now, side="right"))
        if stop > self._next:
            new = self._pending[self._next:stop]
            na, k = self._na, len(new)
            self._act[na:na + k] = new
            self._links[na:na + k] = self.net.routes[self.src[new], self.dst[new]]
            self._na += k
            self._next = stop
            self._dirty = True
        while self._wake and self._wake[-1] <= self.now:
            self._wake.pop()
            self._dirty = True

    def _allocate(self) -> None:
        na = self._na
        view = View(self.now, self._act[:na], self._links[:na], self.net, self)
        rates = np.asarray(self.policy(view), dtype=float)
        if rates.shape != (na,):
            raise CommschedError(_BAD_RATES)
        self._rates[:na] = rates
        self.events += 1
        self._dirty = False
        hold = getattr(self.policy, "hold", None)
        if hold is not None:
            self._hold = float(hold(view, rates))

    def advance(self, until: float = math.inf) -> np.ndarray:
        """Run until the next completion(s) or ``until``, whichever comes first.

        Parameters
        ----------
        until : float
            Simulated time to stop at, seconds.

        Returns
        -------
        numpy.ndarray
            Ids of the flows that completed (empty if ``until`` came first).
        """
        while True:
            self._admit()
            if self._dirty and self._na:
                self._allocate()
            t_next = min(until, self.next_release(), self._wake[-1] if self._wake else math.inf)
            na = self._na
            if self.record:
                ids, rates = self._act[:na].copy(), self._rates[:na].copy()
            if self._hold > self.now and na:
                t_end = min(t_next, self._hold)
                self._na, nd = _advance(self._act, na, self._links, self._rates,
                                        self.remaining, self.size, self.finish, self.now,
                                        t_end, True, self._done)
                if self.record and t_end > self.now:
                    self._record_hold(ids, rates, t_end)
                self.now = t_end
                if t_end >= self._hold:
                    self._dirty = True
                if nd:
                    return self._done[:nd].copy()
                if t_end >= until:
                    return np.zeros(0, dtype=np.int64)
                continue
            self._na, t_end, nd = _step(self._act, na, self._links, self._rates,
                                        self.remaining, self.size, self.finish, self.now,
                                        t_next, self._done)
            if t_end == -2.0:
                raise CommschedError(_BAD_RATES)
            if t_end == -1.0:
                if na:
                    raise CommschedError(_stalled(self.now, na))
                return np.zeros(0, dtype=np.int64)
            if self.record and na and t_end > self.now:
                self.segments.append(Segment(self.now, t_end, ids, rates))
            self.now = t_end
            if nd:
                self._dirty = True
                return self._done[:nd].copy()
            if t_end >= until:
                return np.zeros(0, dtype=np.int64)

    def _record_hold(self, ids: np.ndarray, rates: np.ndarray, t_end: float) -> None:
        """The segments of a held interval: one between consecutive finish times of the
        flows that completed in it (each flow sends until its own finish)."""
        t = self.now
        fin = np.where(np.isnan(self.finish[ids]), np.inf, self.finish[ids])
        for t1 in np.unique(np.append(fin[fin < t_end], t_end)):
            on = fin > t
            if t1 > t and on.any():
                self.segments.append(Segment(t, float(t1), ids[on], rates[on]))
            t = float(t1)

    def run(self, progress: Callable[[int], object] | None = None) -> None:
        """Run until every added flow has finished.

        Parameters
        ----------
        progress : callable, optional
            Called with the number of flows that completed at each completion event.
        """
        while self._next < len(self._pending) or self._na:
            done = self.advance()
            if progress is not None and len(done):
                progress(len(done))

    def result(self) -> FlowResult:
        n = self.n
        return FlowResult(self.release[:n].copy(), self.finish[:n].copy(), list(self.segments),
                          self.events)


class RouteShare:
    """A policy under which a flow's rate depends only on its route and on how many
    active flows each route has: ``"max-min"`` (:func:`max_min`, unweighted) or
    ``"port-share"`` (:func:`port_share`). Called on a :class:`View` it is an ordinary
    policy; :func:`simulate` runs it on routes instead of flows (:func:`_route_run`):
    flows on one route get the same rate, so each route keeps the bytes every one of its
    flows has received (``served``) and a heap of its flows by ``served`` at admission
    plus size, and an event costs O(active routes), not O(active flows)."""

    def __init__(self, kind: str) -> None:
        if kind not in ("max-min", "port-share"):
            raise CommschedError(f"route share must be max-min or port-share, not {kind!r}")
        self.kind = kind

    def __call__(self, view: View) -> np.ndarray:
        if self.kind == "max-min":
            return max_min(view.links, view.net.capacity)
        return port_share(view.links, view.net.capacity)

    def run_static(self, sim: FlowSim,
                   progress: Callable[[int], object] | None = None) -> FlowResult:
        """Run ``sim``'s flows, all added and none admitted yet, to the end on routes
        (:func:`_route_run`; :func:`simulate` calls it).

        Parameters
        ----------
        sim : FlowSim
            The simulation holding the flows (its event loop is not used).
        progress : callable, optional
            Called with numbers of completed flows.

        Returns
        -------
        FlowResult
            Finish times and event count (no segments).
        """
        n = sim.n
        return _simulate_routes(sim.net, sim.src[:n], sim.dst[:n], sim.size[:n],
                                sim.release[:n], self, progress)


class Quantized:
    """A policy whose rates change only at multiples of ``quantum`` seconds, as a
    time-stepped simulator's do (Varys' ``coflow/coflowsim`` steps in quanta of 8 of its
    ms, ``Simulator.simulate``): called on the grid it calls ``policy``; called between
    two grid points (a flow completed or was released there) it keeps the rates it last
    gave (0 for a flow it has not seen: a flow released between grid points waits for
    the next one), asks for a wake-up at the next grid point and leaves the capacity a
    completed flow held unused until then. Runs in :class:`FlowSim` (no route engine).

    Two flows share host 0's egress (1 byte/s); the short one ends at 0.5 s, and its half
    of the port stays idle until the grid point at 1 s (unquantized the long one ends at
    2.25):

    >>> net = big_switch(3, rate=1.0)
    >>> q = Quantized(RouteShare("max-min"), 1.0)
    >>> simulate(net, [0, 0], [1, 2], [0.25, 2.0], [0.0, 0.0], policy=q).finish.tolist()
    [0.5, 2.5]
    """

    def __init__(self, policy: Policy, quantum: float) -> None:
        if not quantum > 0:
            raise CommschedError("quantum must be positive")
        self.policy = policy
        self.quantum = quantum
        self._rate = np.zeros(0)  # by flow id: the rates of the last on-grid call

    def __call__(self, view: View) -> np.ndarray:
        q = self.quantum
        k = round(view.now / q)
        if len(self._rate) < view.sim.n:
            self._rate = np.concatenate([self._rate, np.zeros(view.sim.n - len(self._rate))])
        if abs(view.now - k * q) <= REL_TOL * max(q, abs(view.now)):
            rates = np.asarray(self.policy(view), dtype=float)
            self._rate[view.active] = rates
            return rates
        view.sim.wake_at(math.ceil(view.now / q) * q)
        return self._rate[view.active]

    def hold(self, view: View, rates: np.ndarray) -> float:
        """The rates hold until the grid point at or after the wrapped policy's next event
        (its own ``hold``, else the first completion).

        Parameters
        ----------
        view : View
            Passed on to the wrapped policy's ``hold``; its clock and remaining bytes
            give the first completion otherwise.
        rates : numpy.ndarray
            The wrapped policy's rates, bytes/s, one per active flow.

        Returns
        -------
        float
            A multiple of the quantum in simulated seconds, or ``-inf`` when no flow
            can finish at these rates.
        """
        inner = getattr(self.policy, "hold", None)
        if inner is not None:
            t = float(inner(view, rates))
        else:
            pos = rates > 0
            t = view.now + float(np.min(view.remaining[pos] / rates[pos], initial=math.inf))
        if not math.isfinite(t):
            return -math.inf
        return max(math.ceil(t / self.quantum - REL_TOL), 1) * self.quantum


@njit(cache=True)
def _heap_push(key: np.ndarray, ids: np.ndarray, ver: np.ndarray, lo: int, n: int, k: float,
               i: int, v: int) -> None:  # pragma: no cover - compiled
    """Push (k, i, v) on the binary min-heap key[lo:lo+n] (ids, versions alongside)."""
    j = n
    while j > 0:
        up = (j - 1) // 2
        if key[lo + up] <= k:
            break
        key[lo + j], ids[lo + j], ver[lo + j] = key[lo + up], ids[lo + up], ver[lo + up]
        j = up
    key[lo + j], ids[lo + j], ver[lo + j] = k, i, v


@njit(cache=True)
def _heap_sift(key: np.ndarray, ids: np.ndarray, ver: np.ndarray, lo: int, n: int, j: int,
               k: float, i: int, v: int) -> None:  # pragma: no cover - compiled
    """Put (k, i, v) at position j of the heap key[lo:lo+n] and sift it down."""
    while True:
        c = 2 * j + 1
        if c >= n:
            break
        if c + 1 < n and key[lo + c + 1] < key[lo + c]:
            c += 1
        if key[lo + c] >= k:
            break
        key[lo + j], ids[lo + j], ver[lo + j] = key[lo + c], ids[lo + c], ver[lo + c]
        j = c
    key[lo + j], ids[lo + j], ver[lo + j] = k, i, v


@njit(cache=True)
def _heap_pop(key: np.ndarray, ids: np.ndarray, ver: np.ndarray, lo: int,
              n: int) -> None:  # pragma: no cover - compiled
    """Remove the top of the heap key[lo:lo+n] (n >= 1)."""
    if n > 1:
        _heap_sift(key, ids, ver, lo, n - 1, 0, key[lo + n - 1], ids[lo + n - 1],
                   ver[lo + n - 1])


@njit(cache=True)
def _heapify(key: np.ndarray, ids: np.ndarray, ver: np.ndarray,
             n: int) -> None:  # pragma: no cover - compiled
    """Make key[:n] (ids, versions alongside) a binary min-heap, bottom-up in O(n)."""
    for j in range(n // 2 - 1, -1, -1):
        _heap_sift(key, ids, ver, 0, n, j, key[j], ids[j], ver[j])


@njit(cache=True)
def _route_max_min(route_links: np.ndarray, link_routes: np.ndarray, link_ptr: np.ndarray,
                   capacity: np.ndarray, count: np.ndarray, lcount: np.ndarray,
                   lmark: np.ndarray, x: np.ndarray, agg: np.ndarray, frozen: np.ndarray,
                   event: float, touched: np.ndarray, tlist: np.ndarray, nt: int,
                   snap: np.ndarray, lev: np.ndarray, lint: np.ndarray, fr: np.ndarray,
                   rounds: np.ndarray) -> int:  # pragma: no cover - compiled
    """:func:`water_fill` of the active routes (weights: their flow counts ``count``) for
    :func:`_route_run`, on its standing link-to-route lists (``link_routes`` from
    ``link_ptr[l]``) and per-link flow counts ``lcount`` (a link's weight sum), so it
    costs O(links per round + routes through the links that saturate), with no per-call
    gathering; the rounds, levels and saturation rule are :func:`water_fill`'s, so the
    rates are the same. Writes ``agg[r]`` (the route's rate, ``count[r]`` times its
    flows') of every active route with a link, marks ``frozen[r] = event``, and appends
    to the touched list ``tlist[nt:]`` each route whose per-flow rate differs from
    ``x[r]``; returns the new length of the touched list.

    Incremental: the rounds of the last call are kept (``snap[0/1, i, l]``: link ``l``'s
    leftover and growing weight at the start of round ``i``; ``lev[0/1, i]``: round
    ``i``'s level and the total after it; ``lint`` rows: the round each link saturated
    in, the first round it was no longer used, its ``lcount`` then; ``fr[r]``: the round
    route ``r`` froze in; ``rounds[0]``: how many). Until the first round in which a link
    whose routes changed (``lmark``) saturates, in the last call or now, every round is
    the same float for float (the other links' leftovers and weights, the level, the
    saturated links, the routes they freeze and their rates), and the changed links'
    weights are the last call's plus their change in ``lcount``: so their leftovers are
    replayed through those rounds, the water-filling restarts at that round from the
    kept state, and only the routes that freeze from then on are recomputed. The rates
    are those of a water-filling from scratch, bit for bit."""
    nl = capacity.shape[0]
    hops = route_links.shape[1]
    nrow = snap.shape[1]
    satr, leave, lold = lint[0], lint[1], lint[2]
    never = nl + 1
    tol = REL_TOL * capacity
    cap = np.empty(nl)
    wsum = np.zeros(nl)
    delta = np.zeros(nl)
    marked = np.empty(nl, np.int64)
    gone = np.full(nl, never)  # the changed links' first round no longer used, now
    # the restart round: at most the first round a changed link saturated in last time
    k = min(rounds[0], nrow - 1)
    nm = 0
    for lk in range(nl):
        if lmark[lk]:
            marked[nm] = lk
            nm += 1
            k = min(k, satr[lk])
            cap[lk] = capacity[lk]
            wsum[lk] = lcount[lk]
            delta[lk] = lcount[lk] - lold[lk]
            if lcount[lk] == 0:
                gone[lk] = 0
    # replay the changed links through the kept rounds until one of them would change
    # the round: lower its level or saturate in it
    i = 0
    while i < k:
        level = lev[0, i]
        same = True
        for j in range(nm):
            lk = marked[j]
            w = wsum[lk]
            if w > 0 and (cap[lk] / w < level or cap[lk] - w * level <= tol[lk]):
                same = False
                break
        if not same:
            break
        for j in range(nm):
            lk = marked[j]
            w = wsum[lk]
            if w > 0:
                snap[0, i, lk] = cap[lk]
                snap[1, i, lk] = w
                cap[lk] -= w * level
                # last call's weight at the next round (0 once it was no longer used)
                # plus the change: the changed routes grow through all these rounds
                wsum[lk] = (snap[1, i + 1, lk] if i + 1 < leave[lk] else 0.0) + delta[lk]
                if wsum[lk] <= 0:
                    wsum[lk] = 0.0
                    gone[lk] = i + 1
        i += 1
    start = i
    total = lev[1, start - 1] if start else 0.0
    used = np.empty(nl, np.int64)
    nused = 0
    for lk in range(nl):
        if lmark[lk]:
            leave[lk] = gone[lk]
        elif start < leave[lk]:
            cap[lk] = snap[0, start, lk]
            wsum[lk] = snap[1, start, lk]
        else:
            wsum[lk] = 0.0
        if satr[lk] >= start:
            satr[lk] = never
        if wsum[lk] > 0:
            used[nused] = lk
            nused += 1
        lold[lk] = lcount[lk]
    full = np.empty(nl, np.int64)
    while nused:
        if i < nrow:
            for j in range(nused):
                lk = used[j]
                snap[0, i, lk] = cap[lk]
                snap[1, i, lk] = wsum[lk]
        total, nfull, level = _fill_round(cap, wsum, used, nused, tol, total, full)
        lev[0, i] = level
        lev[1, i] = total
        for lk in full[:nfull]:
            satr[lk] = i
            for q in range(link_ptr[lk], link_ptr[lk + 1]):
                r = link_routes[q]
                if count[r] == 0 or fr[r] < start or frozen[r] == event:
                    continue  # inactive, or frozen in a kept round or in this one
                frozen[r] = event
                fr[r] = i
                w = float(count[r])
                agg[r] = w * total
                if not touched[r] and agg[r] / count[r] != x[r]:
                    touched[r] = 1
                    tlist[nt] = r
                    nt += 1
                for h in range(hops):
                    o = route_links[r, h]
                    if o >= 0:
                        wsum[o] -= w
            wsum[lk] = 0.0  # every route through a full link is frozen now
        i += 1
        for j in range(nused):
            if not wsum[used[j]] > 0:
                leave[used[j]] = i
        nused = _keep_growing(used, nused, wsum)
    rounds[0] = i
    return nt


@njit(cache=True)
def _route_run(route: np.ndarray, route_links: np.ndarray, link_routes: np.ndarray,
               link_ptr: np.ndarray, capacity: np.ndarray, size: np.ndarray,
               release: np.ndarray, order: np.ndarray, port_share: bool, state: np.ndarray,
               rs: np.ndarray, ri: np.ndarray, lists: np.ndarray, hkey: np.ndarray,
               hid: np.ndarray,
               hver: np.ndarray, gkey: np.ndarray, gid: np.ndarray, gver: np.ndarray,
               lcount: np.ndarray, lmark: np.ndarray, finish: np.ndarray,
               snap: np.ndarray, lev: np.ndarray, lint: np.ndarray, rounds: np.ndarray,
               stop_after: int) -> int:  # pragma: no cover - compiled
    """The event loop of :class:`RouteShare`: the events, completion rule and rates of
    :class:`FlowSim` with that policy, on routes and lazily. Route ``r`` serves each of
    its flows ``served(t) = rs[r, 1] + rate * (t - rs[r, 0])`` (``rs`` columns: base
    time, served at base, per-flow rate, max-min's rate of all its flows, the event that
    froze it, the top of its flows' heap; ``ri`` columns: active flows, version, position
    in the active list, touched, heap base, max-min's round that froze it, then its links,
    of which ``route_links`` is a view; one row per route, so that a route's fields share
    cache lines, and the heap top kept beside them: a rebase reads no flow heap; ``lists``
    rows: the active routes, the touched ones) and keeps its flows in a
    heap keyed by served-at-admission plus size (from ``hkey[ri[r, 4]]`` on); a global
    heap holds each route's next completion time, stale entries skipped by version (and
    rebuilt in O(active routes) when it holds 4 stale entries per live one). A rate is
    recomputed only for routes whose links' flow counts changed (port share) or, for
    max-min, re-water-filled over the active routes (:func:`_route_max_min`, on standing
    link-to-route lists, from the first round the change alters) and rebased where it
    changed; ``snap``, ``lev``, ``lint`` and ``rounds`` are :func:`_route_max_min`'s kept
    rounds.
    Resumable: ``state`` = [now, next flow to admit, active flows, events, global heap
    size, active routes, touched routes]; returns after ``stop_after`` completions or at
    the end (flows completed in this call; -1 for a stall)."""
    now, nxt, nflows, events = state[0], int(state[1]), int(state[2]), state[3]
    gn, nact, nt = int(state[4]), int(state[5]), int(state[6])
    # a route's fields in one row (one cache line): read together for every route visit
    t0, s0, x, agg, frozen, top = rs[:, 0], rs[:, 1], rs[:, 2], rs[:, 3], rs[:, 4], rs[:, 5]
    count, ver, pos, touched, hlo = ri[:, 0], ri[:, 1], ri[:, 2], ri[:, 3], ri[:, 4]
    fr = ri[:, 5]
    act, tlist = lists[0], lists[1]
    n = order.shape[0]
    nl = capacity.shape[0]
    hops = route_links.shape[1]
    done = 0
    while (nxt < n or nflows > 0) and done < stop_after:
        # flows released by now join their routes
        while nxt < n and release[order[nxt]] <= now:
            i = order[nxt]
            r = route[i]
            if count[r] == 0:
                t0[r], s0[r], x[r] = now, 0.0, 0.0
                fr[r] = nl + 1  # not frozen in any kept round of _route_max_min
                act[nact] = r
                pos[r] = nact
                nact += 1
            sr = s0[r] + x[r] * (now - t0[r])
            _heap_push(hkey, hid, hver, hlo[r], count[r], sr + size[i], i, 0)
            top[r] = hkey[hlo[r]]
            count[r] += 1
            nflows += 1
            for h in range(hops):
                lk = route_links[r, h]
                if lk >= 0:
                    lcount[lk] += 1
                    lmark[lk] = 1
            if not touched[r]:
                touched[r] = 1
                tlist[nt] = r
                nt += 1
            nxt += 1
        if nt:  # the active set changed: new rates where they change
            events += 1
            if port_share:
                for lk in range(nl):
                    if lmark[lk]:
                        for k in range(link_ptr[lk], link_ptr[lk + 1]):
                            r = link_routes[k]
                            if count[r] and not touched[r]:
                                touched[r] = 1
                                tlist[nt] = r
                                nt += 1
            else:
                nt = _route_max_min(route_links, link_routes, link_ptr, capacity, count,
                                    lcount, lmark, x, agg, frozen, events, touched, tlist, nt,
                                    snap, lev, lint, fr, rounds)
            for lk in range(nl):
                lmark[lk] = 0
            # push each new next completion (the old entries go stale); rebuild the heap
            # from the active routes when it is full or holds over 4 stale entries per
            # active route (a rebuild costs O(active routes), amortized over the pushes)
            rebuild = gn + nt > min(gkey.shape[0], 5 * nact + 64)
            for k in range(nt):
                r = tlist[k]
                touched[r] = 0
                if count[r] == 0:
                    continue
                if port_share:
                    nx = np.inf
                    for h in range(hops):
                        lk = route_links[r, h]
                        if lk >= 0:
                            nx = min(nx, capacity[lk] / lcount[lk])
                else:
                    nx = agg[r] / count[r]
                s0[r] = s0[r] + x[r] * (now - t0[r])
                t0[r] = now
                x[r] = nx
                ver[r] += 1
                if nx > 0 and not rebuild:
                    _heap_push(gkey, gid, gver, 0, gn, now + (top[r] - s0[r]) / nx, r,
                               ver[r])
                    gn += 1
            if rebuild:  # every active route's next completion, heapified in O(routes)
                gn = 0
                for j in range(nact):
                    q = act[j]
                    if x[q] > 0:
                        gkey[gn] = t0[q] + (top[q] - s0[q]) / x[q]
                        gid[gn], gver[gn] = q, ver[q]
                        gn += 1
                _heapify(gkey, gid, gver, gn)
            nt = 0
        while gn and gver[0] != ver[gid[0]]:
            _heap_pop(gkey, gid, gver, 0, gn)
            gn -= 1
        t_done = gkey[0] if gn else np.inf
        t_next = release[order[nxt]] if nxt < n else np.inf
        if t_done == np.inf and t_next == np.inf:
            if nflows:
                done = -1
            break
        t_end = min(t_done, t_next)
        dt = t_end - now
        # completions: every route whose next completion is due by t_end (REL_TOL of dt)
        while gn:
            if gver[0] != ver[gid[0]]:
                _heap_pop(gkey, gid, gver, 0, gn)
                gn -= 1
                continue
            if gkey[0] > t_end + REL_TOL * dt:
                break
            r = gid[0]
            _heap_pop(gkey, gid, gver, 0, gn)
            gn -= 1
            ver[r] += 1
            served = s0[r] + x[r] * (t_end - t0[r])
            lo = hlo[r]
            while count[r]:
                i = hid[lo]
                if t0[r] + (hkey[lo] - s0[r]) / x[r] <= t_end + REL_TOL * dt \
                        or hkey[lo] - served <= REL_TOL * size[i]:
                    finish[i] = t_end
                    _heap_pop(hkey, hid, hver, lo, count[r])
                    count[r] -= 1
                    nflows -= 1
                    done += 1
                    for h in range(hops):
                        lk = route_links[r, h]
                        if lk >= 0:
                            lcount[lk] -= 1
                            lmark[lk] = 1
                else:
                    break
            top[r] = hkey[lo]
            if count[r] == 0:  # the route leaves the active list
                last = act[nact - 1]
                act[pos[r]] = last
                pos[last] = pos[r]
                nact -= 1
            if not touched[r]:
                touched[r] = 1
                tlist[nt] = r
                nt += 1
        now = t_end
    state[0], state[1], state[2], state[3] = now, nxt, nflows, events
    state[4], state[5], state[6] = gn, nact, nt
    return done


def _simulate_routes(net: Network, src: np.ndarray, dst: np.ndarray, size: np.ndarray,
                     release: np.ndarray, policy: RouteShare,
                     progress: Callable[[int], object] | None) -> FlowResult:
    """:func:`_route_run` on a static set of flows."""
    h = net.hosts
    pairs, route = np.unique(src * h + dst, return_inverse=True)
    route = route.reshape(-1).astype(np.int64)
    route_links = np.ascontiguousarray(net.routes[pairs // h, pairs % h], dtype=np.int64)
    nr, nl = len(pairs), len(net.capacity)
    rows, hop = np.nonzero(route_links >= 0)
    lk = route_links[rows, hop]
    link_routes = rows[np.argsort(lk, kind="stable")].astype(np.int64)
    link_ptr = np.concatenate([[0], np.cumsum(np.bincount(lk, minlength=nl))]).astype(np.int64)
    n = len(size)
    order = np.lexsort((np.arange(n), release)).astype(np.int64)
    # a route's integer fields and then its links, one row (route_links is a view of it)
    ri = np.zeros((nr, 6 + route_links.shape[1]), np.int64)
    ri[:, 5] = nl + 1
    ri[:, 6:] = route_links
    route_links = ri[:, 6:]
    ri[:, 4] = np.concatenate([[0], np.cumsum(np.bincount(route, minlength=nr))[:-1]])
    g = 4 * nr + 16
    finish = np.full(n, np.nan)
    state = np.zeros(7)
    # _route_max_min's kept rounds: all of them (at most one per link) up to 2^21 values
    kept = min(nl + 1, max(2, (1 << 21) // nl))
    rs = np.zeros((nr, 6))
    rs[:, 4] = -1.0
    arrays = (rs, ri, np.zeros((2, nr), np.int64), np.zeros(n), np.zeros(n, np.int64),
              np.zeros(n, np.int64), np.zeros(g), np.zeros(g, np.int64),
              np.zeros(g, np.int64), np.zeros(nl, np.int64), np.zeros(nl, np.int64), finish,
              np.zeros((2, kept, nl)), np.zeros((2, nl + 1)), np.zeros((3, nl), np.int64),
              np.zeros(1, np.int64))
    cap = net.capacity.astype(float)
    run_in_chunks(lambda stop: _route_run(route, route_links, link_routes, link_ptr, cap, size,
                                          release, order, policy.kind == "port-share", state,
                                          *arrays, stop),
                  n, progress, state)
    return FlowResult(release.copy(), finish, [], int(state[3]))


_BAD_RATES = "policy returned rates of the wrong shape or negative rates"


def _stalled(now: float, active: int) -> str:
    return (f"flow simulation stalled at t={now}: {active} active flows get no rate and "
            "nothing else will happen")


def run_in_chunks(step: Callable[[int], int], n: int,
                  progress: Callable[[int], object] | None, state: np.ndarray) -> None:
    """Drive a resumable compiled event loop until ``n`` flows have completed.

    Parameters
    ----------
    step : callable
        ``step(stop_after)`` runs the loop on until ``stop_after`` more flows complete
        (or to the end) and returns how many did, or a negative code for an error (-2:
        the policy's rates were wrong; any other: the active flows get no rate).
    n : int
        Flows to complete.
    progress : callable, optional
        Called with each call's completions; given, the loop stops every 1% of ``n``.
    state : numpy.ndarray
        The loop's state (``now``, next flow, active flows, events, ...), for the errors.

    Raises
    ------
    CommschedError
        When ``step`` returns a negative code (the same messages as :class:`FlowSim`'s).
    """
    left = n
    while left:
        k = step(max(1, n // 100) if progress is not None else n)
        if k < 0:
            raise CommschedError(_BAD_RATES if k == -2 else _stalled(state[0], int(state[2])))
        left -= k
        if progress is not None and k:
            progress(k)


def simulate(net: Network, src: Sequence[int] | np.ndarray, dst: Sequence[int] | np.ndarray,
             size: Sequence[float] | np.ndarray, release: Sequence[float] | np.ndarray,
             policy: Policy | None = None, record: bool = False,
             progress: Callable[[int], object] | None = None,
             **meta: Sequence[float] | np.ndarray) -> FlowResult:
    """Simulate a static set of flows to completion (default policy: per-flow max-min).

    A policy with a ``run_static(sim, progress)`` method runs the flows itself, in an
    engine of its own, unless ``record`` asks for the segments: a :class:`RouteShare`
    (the default is ``RouteShare("max-min")``) on routes (:func:`_route_run`), a
    :class:`commsched.echelon.coflow.CoflowOrder` by Coflow (its ``run_static``); any
    other policy runs in :class:`FlowSim`.

    Parameters
    ----------
    net : Network
        Links, capacities and routes.
    src, dst : sequence of int or numpy.ndarray
        Per flow, source and destination host.
    size : sequence of float or numpy.ndarray
        Per flow, bytes (positive, finite).
    release : sequence of float or numpy.ndarray
        Per flow, the time it may start, seconds.
    policy : Policy, optional
        The rate allocation (default ``RouteShare("max-min")``).
    record : bool
        Keep every segment of constant rates (for :func:`check_flow_schedule`).
    progress : callable, optional
        Called with numbers of completed flows.
    **meta : sequence of float or numpy.ndarray
        Per-flow columns the policy reads (e.g. a Coflow id or a priority).

    Returns
    -------
    FlowResult
        Finish times, event count and (with ``record``) the segments.

    Raises
    ------
    CommschedError
        If the flow columns differ in length, a host is outside the network, a size is
        not positive and finite, or a release is not finite or is negative.
    """
    policy = policy or RouteShare("max-min")
    sim = FlowSim(net, policy, record=record)
    sim.add(src, dst, size, release, **meta)  # validates the flows
    run_static = getattr(policy, "run_static", None)
    if run_static is not None and not record:
        return run_static(sim, progress)
    sim.run(progress)
    return sim.result()


def check_flow_schedule(net: Network, src: np.ndarray, dst: np.ndarray, size: np.ndarray,
                        release: np.ndarray, result: FlowResult, tol: float = 1e-6) -> None:
    """Raise :class:`InvalidFlowSchedule` unless the recorded segments of ``result``
    never exceed a link's capacity, give no flow a rate before its release or after its
    finish, and deliver exactly every flow's size.

    Parameters
    ----------
    net : Network
        The network the flows ran on.
    src, dst, size, release : numpy.ndarray
        The flows as given to :func:`simulate`.
    result : FlowResult
        A result recorded with ``record=True``.
    tol : float
        Relative tolerance of every comparison.

    Raises
    ------
    InvalidFlowSchedule
        At the first rule a segment breaks, naming the link, flow and interval.
    """
    src, dst = np.asarray(src), np.asarray(dst)
    size, release = np.asarray(size, dtype=float), np.asarray(release, dtype=float)
    sent = np.zeros(len(size))
    last = np.full(len(size), -math.inf)
    L = len(net.capacity)
    for seg in result.segments:
        if seg.t1 < seg.t0:
            raise InvalidFlowSchedule(f"segment [{seg.t0}, {seg.t1}) ends before it starts")
        links = net.routes[src[seg.ids], dst[seg.ids]]
        load = _load(links, seg.rates, L)
        over = load > net.capacity * (1 + tol) + 1e-12
        if over.any():
            j = int(np.flatnonzero(over)[0])
            raise InvalidFlowSchedule(
                f"link {net.link_names[j]!r} carries {load[j]:.6g} > capacity "
                f"{net.capacity[j]:.6g} on [{seg.t0:.6g}, {seg.t1:.6g})")
        early = (seg.rates > 0) & (release[seg.ids] > seg.t0 + tol * max(1.0, seg.t0))
        if early.any():
            f = int(seg.ids[early][0])
            raise InvalidFlowSchedule(f"flow {f} sends at {seg.t0:.6g} before its release "
                                      f"{release[f]:.6g}")
        late = (seg.rates > 0) & (result.finish[seg.ids] < seg.t1 - tol * max(1.0, seg.t1))
        if late.any():
            f = int(seg.ids[late][0])
            raise InvalidFlowSchedule(f"flow {f} sends after its finish {result.finish[f]:.6g}")
        np.add.at(sent, seg.ids, seg.rates * (seg.t1 - seg.t0))
        pos = seg.rates > 0
        last[seg.ids[pos]] = np.maximum(last[seg.ids[pos]], seg.t1)
    bad = np.abs(sent - size) > tol * size
    if bad.any():
        f = int(np.flatnonzero(bad)[0])
        raise InvalidFlowSchedule(f"flow {f} delivered {sent[f]:.9g} of {size[f]:.9g} bytes")
    wrong = np.abs(last - result.finish) > tol * np.maximum(1.0, np.abs(result.finish))
    if wrong.any():
        f = int(np.flatnonzero(wrong)[0])
        raise InvalidFlowSchedule(f"flow {f} finishes at {result.finish[f]:.9g} but its last "
                                  f"byte is sent at {last[f]:.9g}")
