"""Coflow schedulers (the Coflow baseline of EchelonFlow) as flow-simulator policies.

A *Coflow* is a set of flows of one communication stage whose completion time (CCT) is that
of its last flow. Flows carry their Coflow id in the flow meta column ``group`` (the same
column EchelonFlow policies read, :mod:`commsched.echelon.model`, so a Coflow scheduler runs
unchanged on EchelonFlows, treating each as one Coflow). :data:`COFLOW_SCHEDULERS` maps a
name to a factory of a :data:`~commsched.sim.flow.Policy`:

``sebf`` -- Varys (Chowdhury, Zhong, Stoica, SIGCOMM 2014, Sec. 5, Pseudocode 1), online:
    at every arrival and completion, (1) order the active Coflows by *smallest effective
    bottleneck first*: a Coflow's bottleneck ``Gamma`` is the largest, over the links its
    flows cross, of its remaining bytes on the link over the link's capacity (the time it
    would need alone on the network); ties (up to float noise) by Coflow id; (2) *MADD*: in
    that order, each Coflow gets the rates that finish all its flows together, as early as
    the capacity the Coflows before it left allows: with ``Gamma'`` its bottleneck on that
    leftover capacity, flow ``i`` gets ``remaining_i/Gamma'`` (a Coflow with a saturated
    link waits); (3) *back-fill* (work conservation): the capacity MADD leaves is given to
    the flows in the same order, each Coflow's flows weighted by their remaining bytes
    (strict priority between Coflows, weighted max-min within one: a Coflow alone on the
    network still finishes all its flows together).
``fifo`` -- the non-preemptive Coflow scheduler Varys compares with: Coflows in arrival order
    (the earliest release among the Coflow's flows; ties by id), each given MADD rates on
    what the earlier ones left, then back-fill in the same order. A later Coflow never slows
    an earlier one. (The limited multiplexing of Baraat's FIFO-LM is not modelled: every
    Coflow may use capacity the earlier ones leave.)
``sebf-static`` -- ``sebf`` with the order Varys' own simulator uses (``coflow/coflowsim``,
    ``CoflowSimulator.addToSortedJobs`` with ``SEBFComparator`` on ``Job.alpha``): the
    bottleneck of the Coflow's *full* size, fixed when it arrives, never re-ranked as its
    bytes drain.
``fair`` -- per-flow max-min fair sharing (what TCP approximates; Coflows ignored).
``fair-ports`` -- per-flow fairness as Varys' simulator approximates it: each flow takes the
    smaller of its equal shares at its links; capacity a flow cannot use is not
    redistributed (:func:`commsched.sim.flow.port_share`).

Modelling differences from Varys' simulator (``coflow/coflowsim``, read for issue 25):
it ranks SEBF statically (``sebf-static`` here); it admits Coflows in epochs of 10 of its
seconds (``Simulator.simulate``: a Coflow arriving within the next epoch starts at the
epoch's start and its CCT counts from there; :func:`replay`'s ``epoch_s``); it recomputes
rates only when a Coflow arrives or departs, not when one of its flows completes; it
back-fills greedily flow by flow (each takes ``min`` of the free capacity at its two
ports) in earliest-deadline order, where ours back-fills by weighted max-min in rank
order; it steps time in 8 ms quanta with reducer sizes rounded to whole MB per mapper;
its port rate is 2^30 bit/s with 1024 trace-ms to its second (about 7% faster than
our 1 Gbit/s per trace second). On FB2010, ``sebf-static`` raises our SEBF average CCT
by 4.4% (23.52 s -> 24.56 s), about a quarter of the 18% gap to Varys' simulator, and
10.24 s epochs change it by -0.1% (23.49 s): neither static ranking nor epoch admission
explains the gap; the rate updates at Coflow events only and the greedy back-fill are
the candidates left (not modelled here).

Examples
--------
Varys' Fig. 3-like case: two Coflows share host 0's egress (1 byte/s). ``A`` sends 1 byte
0->1; ``B`` sends 2 bytes 0->2. Per-flow fairness: A ends at 2 s, B at 3 s (average 2.5);
SEBF runs A first (bottleneck 1 s < 2 s): A at 1 s, B at 3 s (average 2).

>>> from commsched.sim.flow import big_switch, simulate
>>> net = big_switch(3, 1.0)
>>> def cct(name):
...     r = simulate(net, [0, 0], [1, 2], [1.0, 2.0], [0.0, 0.0],
...                  policy=COFLOW_SCHEDULERS[name](), group=[0, 1])
...     return r.finish.tolist()
>>> cct("fair"), cct("sebf")
([2.0, 3.0], [1.0, 3.0])
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd
from numba import njit

from commsched.errors import CommschedError
from commsched.io.coflow import MB, CoflowTrace
from commsched.progress import bar
from commsched.sim.flow import (
    REL_TOL,
    Policy,
    RouteShare,
    View,
    big_switch,
    priority_fill,
    simulate,
)

__all__ = ["COFLOW_SCHEDULERS", "GBPS", "CoflowOrder", "bottleneck", "madd", "replay"]

#: 1 Gbit/s in bytes/s: the port rate of the replay by default (Varys' simulator's).
GBPS = 1e9 / 8


def _link_bytes(links: np.ndarray, rem: np.ndarray, gidx: np.ndarray, ngroups: int,
                nlinks: int) -> np.ndarray:
    """``(groups, links)`` remaining bytes of each group on each link."""
    rows, hop = np.nonzero(links >= 0)
    return np.bincount(gidx[rows] * nlinks + links[rows, hop], weights=rem[rows],
                       minlength=ngroups * nlinks).reshape(ngroups, nlinks)


def bottleneck(links: np.ndarray, rem: np.ndarray, capacity: np.ndarray) -> float:
    """Varys' effective bottleneck ``Gamma`` of one Coflow: ``max over links l of
    (remaining bytes on l) / capacity_l`` (``inf`` if a link it needs has no capacity).

    >>> bottleneck(np.array([[0, 2], [0, 3], [1, 3]]), np.array([1.0, 2.0, 4.0]),
    ...            np.array([1.0, 1.0, 1.0, 2.0]))
    4.0
    """
    b = _link_bytes(links, rem, np.zeros(len(rem), dtype=np.int64), 1, len(capacity))[0]
    used = b > 0
    if np.any(capacity[used] <= 0):
        return float("inf")
    return float(np.max(b[used] / capacity[used], initial=0.0))


def madd(links: np.ndarray, rem: np.ndarray, capacity: np.ndarray) -> np.ndarray:
    """MADD rates of one Coflow on ``capacity``: ``rem / Gamma`` (all flows finish together
    at the bottleneck time); zeros if a link it needs is saturated.

    >>> madd(np.array([[0, 2], [0, 3], [1, 3]]), np.array([1.0, 2.0, 4.0]),
    ...      np.array([1.0, 1.0, 1.0, 2.0])).tolist()
    [0.25, 0.5, 1.0]
    """
    tol = REL_TOL * float(np.max(capacity, initial=1.0))
    g = bottleneck(links, rem, np.where(capacity > tol, capacity, 0.0))
    if not np.isfinite(g) or g <= 0:
        return np.zeros(len(rem))
    return rem / g


class CoflowOrder:
    """MADD in a Coflow order, then back-fill: ``sebf`` (``order="sebf"``, smallest
    bottleneck first), ``fifo`` (``order="fifo"``, arrival order) or ``sebf-static``
    (``order="sebf-static"``: the bottleneck of the Coflow's full size, fixed when the
    Coflow is first seen, as Varys' simulator orders Coflows). Module docstring; the
    allocation is one compiled pass (:func:`_coflow_order`)."""

    def __init__(self, order: str) -> None:
        if order not in ("sebf", "fifo", "sebf-static"):
            raise CommschedError(f"Coflow order must be sebf, fifo or sebf-static, "
                                 f"not {order!r}")
        self.order = order
        self._static: dict[int, float] = {}  # Coflow id -> bottleneck of its full size

    def __call__(self, view: View) -> np.ndarray:
        n = len(view.active)
        rates = np.zeros(n)
        if n == 0:
            return rates
        sim = view.sim
        col = sim.meta.get("group")
        if col is None:
            raise CommschedError("Coflow scheduling needs the flow meta column 'group' "
                                 "(the Coflow id of each flow)")
        gids, loc = _active_groups(view.active, col)
        static = self.order == "sebf-static"
        key = (np.array([self._static.get(g, np.nan) for g in gids.tolist()]) if static
               else np.zeros(0))
        fresh = bool(np.isnan(key).any())
        _coflow_order(view.links, view.active, sim.remaining, sim.size, sim.release, loc,
                      len(gids), view.net.capacity.astype(float), self.order == "fifo", key,
                      view.now, rates)
        if static and fresh:  # the keys of the Coflows seen for the first time
            self._static.update(zip(gids.tolist(), key.tolist(), strict=True))
        return rates


@njit(cache=True)
def _active_groups(act: np.ndarray,
                   group: np.ndarray) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover
    """The distinct Coflow ids (``group``, cast to int64) of the active flows ``act`` in
    increasing order, and each active flow's index into them (compiled; a run of flows of
    one Coflow, as admission order gives, costs one comparison a flow)."""
    n = act.shape[0]
    seen = np.empty(n, np.int64)
    ns = 0
    prev = np.int64(0)
    for j in range(n):
        g = np.int64(group[act[j]])
        if j == 0 or g != prev:
            seen[ns] = g
            ns += 1
            prev = g
    gids = np.unique(seen[:ns])
    loc = np.empty(n, np.int64)
    k = 0
    for j in range(n):
        g = np.int64(group[act[j]])
        if j == 0 or g != prev:
            k = int(np.searchsorted(gids, g))
            prev = g
        loc[j] = k
    return gids, loc


@njit(cache=True)
def _coflow_order(links: np.ndarray, act: np.ndarray, remaining: np.ndarray,
                  size: np.ndarray, release: np.ndarray, loc: np.ndarray, ng: int,
                  cap: np.ndarray, fifo: bool, fixed: np.ndarray, now: float,
                  rates: np.ndarray) -> None:  # pragma: no cover - compiled
    """:class:`CoflowOrder`'s rates of the active flows ``act`` (rows of ``links``; the
    simulator's per-flow ``remaining``, ``size`` and ``release`` arrays read at ``act``;
    Coflow indices ``loc`` in ``0..ng-1``, increasing with the Coflow id) on link
    capacities ``cap``, written to ``rates``. The ranking key is the earliest release
    (``fifo``), else the per-Coflow ``fixed`` key when given (``nan`` entries: the
    bottleneck time of the sizes of the Coflow's active flows, written back), else the
    bottleneck time of the remaining bytes."""
    n, hops = links.shape
    nl = cap.shape[0]
    rem = np.empty(n)
    for j in range(n):
        rem[j] = remaining[act[j]]
    b = np.zeros((ng, nl))  # remaining bytes per Coflow and link
    for j in range(n):
        for h in range(hops):
            lk = links[j, h]
            if lk >= 0:
                b[loc[j], lk] += rem[j]
    key = np.full(ng, np.inf)
    if fifo:
        for j in range(n):
            key[loc[j]] = min(key[loc[j]], release[act[j]])
    elif fixed.shape[0]:
        new = False
        for k in range(ng):
            new = new or np.isnan(fixed[k])
        if new:
            fb = np.zeros((ng, nl))  # their bytes of full sizes per link
            for j in range(n):
                if np.isnan(fixed[loc[j]]):
                    for h in range(hops):
                        lk = links[j, h]
                        if lk >= 0:
                            fb[loc[j], lk] += size[act[j]]
            for k in range(ng):
                if np.isnan(fixed[k]):
                    m = 0.0
                    for lk in range(nl):
                        m = max(m, fb[k, lk] / cap[lk])
                    fixed[k] = m
        key[:] = fixed
    else:
        for k in range(ng):
            m = 0.0
            for lk in range(nl):
                m = max(m, b[k, lk] / cap[lk])
            key[k] = m
    # ties by Coflow id up to float noise (a remaining byte count carries the rounding
    # of every earlier step, ~1e-16 of the current time): the order, and so the
    # schedule, does not change when every release is shifted by the same time
    tick = 1e-9 * max(1.0, abs(now))
    order = np.argsort(np.round(key / tick), kind="mergesort")
    # MADD in rank order on what the Coflows before left: Coflow k's flows get
    # rem / gamma_k with gamma_k = max_l b[k, l] / left_l, so it loads link l with
    # b[k, l] / gamma_k <= left_l (equality on its bottleneck).
    gamma = np.full(ng, np.inf)
    left = cap.copy()
    tol = REL_TOL * max(1.0, cap.max())
    for k in order:
        need = False
        full = False
        gk = 0.0
        for lk in range(nl):
            if b[k, lk] > 0:
                need = True
                if left[lk] <= tol:
                    full = True
                    break
                gk = max(gk, b[k, lk] / left[lk])
        if not need or full:
            continue  # a link it needs is saturated: it waits (back-fill aside)
        gamma[k] = gk
        for lk in range(nl):
            if b[k, lk] > 0:
                left[lk] = max(left[lk] - b[k, lk] / gk, 0.0)
    # back-fill: the Coflows in rank order as strict priority classes, each weighted
    # max-min (weights: remaining bytes) on what MADD and the classes before left
    pos = np.empty(ng, np.int64)
    for r in range(ng):
        pos[order[r]] = r
    bounds = np.zeros(ng + 1, np.int64)
    for j in range(n):
        bounds[pos[loc[j]] + 1] += 1
    for r in range(ng):
        bounds[r + 1] += bounds[r]
    fill = bounds[:ng].copy()
    by_class = np.empty(n, np.int64)
    for j in range(n):
        c = pos[loc[j]]
        by_class[fill[c]] = j
        fill[c] += 1
    priority_fill(links, by_class, bounds, left, rem, rates)
    for j in range(n):
        rates[j] += rem[j] / gamma[loc[j]]


def _fair() -> Policy:
    return RouteShare("max-min")


def _fair_ports() -> Policy:
    return RouteShare("port-share")


#: Coflow schedulers by name: a factory of a fresh policy per simulation.
COFLOW_SCHEDULERS: dict[str, Callable[[], Policy]] = {
    "fair": _fair,
    "fair-ports": _fair_ports,
    "fifo": lambda: CoflowOrder("fifo"),
    "sebf": lambda: CoflowOrder("sebf"),
    "sebf-static": lambda: CoflowOrder("sebf-static"),
}


def replay(trace: CoflowTrace, scheduler: str, port_rate: float = GBPS,
           mb: float = MB, epoch_s: float | None = None) -> pd.DataFrame:
    """Replay a Coflow trace on a big switch of ``trace.ports`` ports of ``port_rate``
    bytes/s under ``scheduler`` (a name in :data:`COFLOW_SCHEDULERS`); one row per Coflow:
    ``id``, ``arrival`` and ``finish`` (s), ``cct`` (s), ``total_mb``, ``width`` (flows) and
    ``longest_mb`` (the Coflow's largest flow).

    ``epoch_s`` admits Coflows as Varys' simulator does (``CoflowSim``,
    ``Simulator.simulate``, epochs of 10 of its seconds): a Coflow arriving in
    ``(k * epoch_s, (k + 1) * epoch_s]`` is released at ``k * epoch_s``, and its
    ``arrival`` and CCT count from there.

    >>> from commsched.io.coflow import parse_coflow_trace
    >>> t = parse_coflow_trace("2 2\\n1 0 1 0 1 1:2.0\\n2 0 1 0 1 1:1.0\\n")
    >>> replay(t, "sebf", port_rate=1.0, mb=1.0)["cct"].tolist()
    [3.0, 1.0]
    """
    if scheduler not in COFLOW_SCHEDULERS:
        raise CommschedError(f"unknown Coflow scheduler {scheduler!r}; choose from "
                             f"{', '.join(COFLOW_SCHEDULERS)}")
    if not port_rate > 0:
        raise CommschedError("port rate must be positive")
    if epoch_s is not None and not epoch_s > 0:
        raise CommschedError("epoch must be positive")
    f = trace.flows(mb)
    arrival = trace.arrival_ms / 1000.0
    if epoch_s is not None:
        arrival = np.maximum(np.ceil(arrival / epoch_s) - 1, 0) * epoch_s
        f["release"] = arrival[f["coflow"]]
    with bar(len(f["src"]), f"replay {scheduler} (flows)", log_every=10.0) as b:
        res = simulate(big_switch(trace.ports, port_rate), f["src"], f["dst"], f["size"],
                       f["release"], policy=COFLOW_SCHEDULERS[scheduler](), progress=b.update,
                       group=f["coflow"])
    finish = np.full(len(trace), -np.inf)
    np.maximum.at(finish, f["coflow"], res.finish)
    df = pd.DataFrame({"id": trace.ids, "arrival": arrival, "finish": finish,
                       "cct": finish - arrival, "total_mb": trace.total_mb(),
                       "width": np.bincount(f["coflow"], minlength=len(trace)),
                       "longest_mb": [float(v.max()) / len(m) for m, v
                                      in zip(trace.mappers, trace.reducer_mb, strict=True)]})
    df.attrs["events"] = res.events
    return df
