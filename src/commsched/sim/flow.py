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

import heapq
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from commsched.errors import CommschedError

__all__ = [
    "FlowResult",
    "FlowSim",
    "InvalidFlowSchedule",
    "Network",
    "Policy",
    "Segment",
    "View",
    "big_switch",
    "check_flow_schedule",
    "max_min",
    "port_share",
    "priority_max_min",
    "simulate",
    "two_tier",
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
    (link ``hosts + h``) of ``rate`` (``ingress_rate``) bytes/s."""
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
    ``[2H+R, 2H+2R)`` of capacity ``hosts_per_rack * rate / oversubscription``."""
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
    flow table), their remaining bytes and links, and the network."""

    now: float
    active: np.ndarray
    remaining: np.ndarray
    links: np.ndarray
    net: Network
    sim: FlowSim


#: A rate allocation policy: the rates of ``view.active`` (same order).
Policy = Callable[[View], np.ndarray]


def max_min(links: np.ndarray, capacity: np.ndarray,
            weight: np.ndarray | None = None) -> np.ndarray:
    """Weighted max-min fair rates by water-filling.

    ``links`` is ``(flows, hops)`` padded with -1; a flow of weight ``w`` gets ``w * x``
    where ``x`` is its bottleneck's fair level. Flows with weight 0 or no link get 0.
    Flows on the same route share its bottleneck, so they are water-filled as one
    aggregate of their summed weight (a big switch has at most hosts^2 routes however
    many flows there are) and split it in proportion to their weights.

    >>> max_min(np.array([[0, 1], [0, 2], [3, 2]]), np.array([2.0, 9, 3, 9])).tolist()
    [1.0, 1.0, 2.0]
    """
    n = len(links)
    if n == 0:
        return np.zeros(0)
    w = np.ones(n) if weight is None else np.asarray(weight, dtype=float)
    routes, inv = _routes(links, len(capacity))
    if len(routes) == n:
        return _water_fill(links, capacity, w)
    wsum = np.bincount(inv, weights=w, minlength=len(routes))
    agg = _water_fill(routes, capacity, wsum)
    per = np.divide(agg, wsum, out=np.zeros(len(routes)), where=wsum > 0)
    return np.asarray(w * per[inv], dtype=float)


def _routes(links: np.ndarray, n_links: int) -> tuple[np.ndarray, np.ndarray]:
    """Distinct rows of ``links`` and each row's index among them (rows encoded as one
    integer when that fits in 62 bits: much faster than a row-wise unique)."""
    base = n_links + 1
    if links.shape[1] * math.log2(base) < 62:
        key = (links + 1) @ (base ** np.arange(links.shape[1], dtype=np.int64))
        _, first, inv = np.unique(key, return_index=True, return_inverse=True)
        return links[first], inv.reshape(-1)
    routes, inv = np.unique(links, axis=0, return_inverse=True)
    return routes, inv.reshape(-1)


def _water_fill(links: np.ndarray, capacity: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Weighted water-filling. Each round raises the level of every growing route until a
    link saturates; the routes through saturated links freeze. Link weight sums are
    updated by the frozen routes only, so a round costs O(links + frozen routes)."""
    n = len(links)
    rate = np.zeros(n)
    cap = capacity.astype(float).copy()
    nl = len(cap)
    tol = REL_TOL * cap
    valid = links >= 0
    live = (w > 0) & valid.any(axis=1)
    rows, hop = np.nonzero(valid & live[:, None])
    lk = links[rows, hop]
    wsum = np.bincount(lk, weights=w[rows], minlength=nl)
    cnt = np.bincount(lk, minlength=nl)
    by_link = rows[np.argsort(lk, kind="stable")]  # routes grouped by link (CSR)
    start = np.concatenate([[0], np.cumsum(cnt)])
    total = 0.0
    while True:
        used = cnt > 0
        if not used.any():
            return rate
        share = cap[used] / wsum[used]
        level = max(float(np.min(share)), 0.0)
        total += level
        cap[used] -= wsum[used] * level
        full = used & (cap <= tol)
        if not full.any():  # float noise: saturate the tightest link
            full[np.flatnonzero(used)[np.argmin(share)]] = True
        hit = np.unique(np.concatenate([by_link[start[j]:start[j + 1]]
                                        for j in np.flatnonzero(full)]))
        hit = hit[live[hit]]
        live[hit] = False
        rate[hit] = w[hit] * total
        hv = valid[hit]
        hl = links[hit][hv]
        np.subtract.at(wsum, hl, np.broadcast_to(w[hit][:, None], hv.shape)[hv])
        np.subtract.at(cnt, hl, 1)
        cnt[full] = 0  # every route through a full link is frozen now
        wsum[full] = 0.0


def priority_max_min(links: np.ndarray, capacity: np.ndarray, klass: np.ndarray,
                     weight: np.ndarray | None = None) -> np.ndarray:
    """Strict priority: classes in increasing ``klass`` order, each water-filled (weighted
    max-min) on the capacity the classes before it left.

    >>> priority_max_min(np.array([[0, 1], [0, 2]]), np.ones(3), np.array([1, 0])).tolist()
    [0.0, 1.0]
    """
    rate = np.zeros(len(links))
    cap = capacity.astype(float).copy()
    w = np.ones(len(links)) if weight is None else np.asarray(weight, dtype=float)
    order = np.argsort(klass, kind="stable")
    ks = klass[order]
    bounds = np.flatnonzero(np.diff(ks)) + 1
    for grp in np.split(order, bounds):
        if not (cap > REL_TOL * capacity).any():
            break
        r = max_min(links[grp], np.maximum(cap, 0.0), w[grp])
        rate[grp] = r
        cap -= _load(links[grp], r, len(cap))
    return rate


def port_share(links: np.ndarray, capacity: np.ndarray) -> np.ndarray:
    """Each flow takes the smallest of ``capacity / (flows on the link)`` over its links;
    what a flow cannot use is not given to others.

    >>> port_share(np.array([[0, 1], [0, 2], [3, 2]]), np.array([2.0, 9, 3, 9])).tolist()
    [1.0, 1.0, 1.5]
    """
    if len(links) == 0:
        return np.zeros(0)
    valid = links >= 0
    count = np.bincount(links[valid], minlength=len(capacity))
    share = np.where(valid, capacity[np.where(valid, links, 0)]
                     / np.maximum(count[np.where(valid, links, 0)], 1), np.inf)
    return np.asarray(share.min(axis=1), dtype=float)


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
    """The outcome of a simulation: per-flow finish times (``nan`` if unfinished)."""

    release: np.ndarray
    finish: np.ndarray
    segments: list[Segment] = field(default_factory=list)


class FlowSim:
    """The event loop. Add flows with :meth:`add` (at or after :attr:`now`), then
    :meth:`advance`; flow columns beyond src/dst/size/release live in :attr:`meta`
    (name -> array, grown with the flows) for policies to read."""

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
        self._pending: list[tuple[float, int]] = []  # heap of (release, id), not yet active
        self._active = np.zeros(0, dtype=np.int64)
        self._rates = np.zeros(0)
        self._dirty = True
        self._wake: list[float] = []
        self.segments: list[Segment] = []

    def _grow(self, need: int) -> None:
        while self._cap < need:
            self._cap *= 2
        for name in ("src", "dst", "size", "release", "remaining", "finish"):
            a = getattr(self, name)
            b = np.full(self._cap, np.nan) if name == "finish" else np.zeros(self._cap, a.dtype)
            b[: len(a)] = a
            setattr(self, name, b)
        for k, a in self.meta.items():
            b = np.zeros(self._cap, a.dtype)
            b[: len(a)] = a
            self.meta[k] = b

    def add(self, src: Sequence[int] | np.ndarray, dst: Sequence[int] | np.ndarray,
            size: Sequence[float] | np.ndarray, release: Sequence[float] | np.ndarray,
            **meta: Sequence[float] | np.ndarray) -> np.ndarray:
        """Add flows; returns their ids. ``meta`` columns must be given for all flows
        alike (a column unknown so far is created with zeros for earlier flows)."""
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
        for t, i in zip(self.release[sl].tolist(), ids.tolist(), strict=True):
            heapq.heappush(self._pending, (t, i))
        return ids

    def wake_at(self, t: float) -> None:
        """Ask for a policy call at time ``t`` (for time-varying policies)."""
        if t > self.now:
            self._wake.append(t)
            self._wake.sort(reverse=True)

    @property
    def active(self) -> np.ndarray:
        return self._active

    def next_release(self) -> float:
        return self._pending[0][0] if self._pending else math.inf

    def _admit(self) -> None:
        new = []
        while self._pending and self._pending[0][0] <= self.now:
            new.append(heapq.heappop(self._pending)[1])
        if new:
            self._active = np.concatenate([self._active, np.array(new, dtype=np.int64)])
            self._dirty = True
        while self._wake and self._wake[-1] <= self.now:
            self._wake.pop()
            self._dirty = True

    def _allocate(self) -> None:
        a = self._active
        links = self.net.routes[self.src[a], self.dst[a]]
        view = View(self.now, a, self.remaining[a], links, self.net, self)
        rates = np.asarray(self.policy(view), dtype=float)
        if rates.shape != a.shape or np.any(~(rates >= 0)) or not np.all(np.isfinite(rates)):
            raise CommschedError("policy returned rates of the wrong shape or negative rates")
        self._rates = rates
        self._dirty = False

    def advance(self, until: float = math.inf) -> np.ndarray:
        """Run until the next completion(s) or ``until``, whichever comes first; returns
        the ids of the flows that completed (empty if ``until`` came first)."""
        while True:
            self._admit()
            if self._dirty and len(self._active):
                self._allocate()
            t_next = min(until, self.next_release(), self._wake[-1] if self._wake else math.inf)
            a, rates = self._active, self._rates
            moving = rates > 0
            if len(a) and moving.any():
                ttf = np.full(len(a), math.inf)
                ttf[moving] = self.remaining[a[moving]] / rates[moving]
                dt_done = float(ttf.min())
            else:
                dt_done = math.inf
            if dt_done == math.inf and t_next == math.inf:
                if len(a):
                    raise CommschedError(
                        f"flow simulation stalled at t={self.now}: {len(a)} active flows "
                        "get no rate and nothing else will happen")
                return np.zeros(0, dtype=np.int64)
            t_end = min(self.now + dt_done, t_next)
            dt = t_end - self.now
            if self.record and len(a) and dt > 0:
                self.segments.append(Segment(self.now, t_end, a.copy(), rates.copy()))
            if len(a):
                self.remaining[a] -= rates * dt
                done = (ttf <= dt * (1 + REL_TOL)) if dt_done < math.inf else np.zeros(len(a), bool)
                done |= self.remaining[a] <= REL_TOL * self.size[a]
            else:
                done = np.zeros(0, dtype=bool)
            self.now = t_end
            if done.any():
                fin = a[done]
                self.remaining[fin] = 0.0
                self.finish[fin] = t_end
                self._active, self._rates = a[~done], rates[~done]
                self._dirty = True
                return fin
            if t_end >= until:
                return np.zeros(0, dtype=np.int64)

    def run(self) -> None:
        """Run until every added flow has finished."""
        while self._pending or len(self._active):
            self.advance()

    def result(self) -> FlowResult:
        n = self.n
        return FlowResult(self.release[:n].copy(), self.finish[:n].copy(), list(self.segments))


def simulate(net: Network, src: Sequence[int] | np.ndarray, dst: Sequence[int] | np.ndarray,
             size: Sequence[float] | np.ndarray, release: Sequence[float] | np.ndarray,
             policy: Policy | None = None, record: bool = False,
             **meta: Sequence[float] | np.ndarray) -> FlowResult:
    """Simulate a static set of flows to completion (default policy: per-flow max-min)."""
    sim = FlowSim(net, policy or (lambda v: max_min(v.links, v.net.capacity)), record=record)
    sim.add(src, dst, size, release, **meta)
    sim.run()
    return sim.result()


def check_flow_schedule(net: Network, src: np.ndarray, dst: np.ndarray, size: np.ndarray,
                        release: np.ndarray, result: FlowResult, tol: float = 1e-6) -> None:
    """Raise :class:`InvalidFlowSchedule` unless the recorded segments of ``result``
    never exceed a link's capacity, give no flow a rate before its release or after its
    finish, and deliver exactly every flow's size."""
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
