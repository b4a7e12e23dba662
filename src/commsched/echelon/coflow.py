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

Modelling differences from Varys' simulator (``coflow/coflowsim`` at b61f209, read and
run for issue 25), each a switch of :func:`replay` whose default is this package's model:
(1) it ranks SEBF statically (``sebf-static`` here); (2) it admits Coflows in epochs of 10
of its seconds (``epoch_s``, :data:`VARYS_EPOCH_S`; ``Simulator.simulate``: a Coflow
arriving within the next epoch starts at the epoch's start and its CCT counts from
there); (3) it recomputes rates only when a Coflow arrives or departs, not when one of its
flows completes (``rate_updates="coflow"``, :class:`CoflowEvents`); (4) it back-fills
greedily (``backfill="greedy"``): the Coflows MADD skipped first share what MADD left per
port, then flow by flow each flow takes the ``min`` of what its two ports have left,
Coflows in earliest-deadline order (its deadlines: arrival plus the static bottleneck
times a random factor in [1, 2) of ``java.util.Random(17)``, in whole ms), where ours
back-fills by weighted max-min in rank order; (5) it steps time in 8 ms quanta
(``quantum_s``, :data:`VARYS_QUANTUM_S`; :class:`~commsched.sim.flow.Quantized`: rates
change on the grid only, finishes round up to it); (6) its port rate is 2^30 bit/s with
1024 trace ms to its second (:data:`VARYS_PORT_RATE`, 4.9% above our 1 Gbit/s per trace
second). It also rounds
reducer sizes up to whole MB per mapper and merges a Coflow's mappers and reducers per
port: no-ops on FB2010 (every reducer's MB there is a multiple of its mapper count; no
Coflow has two mappers or two reducers on one port). With all six (``sebf-static``;
``fair-ports`` with (2), (5), (6) for its per-flow fairness, which it recomputes every
step) the replay reproduces Varys' simulator Coflow by Coflow on the first 120 FB2010
Coflows (``tests/data/coflowsim_fb2010_120.csv``). On all of FB2010 (its SEBF output:
``tests/data/coflowsim_fb2010_sebf.csv``, average 28.53 s) it gives 503 of the 526 CCTs
to 1 ms and 27.64 s on average: the other 23 (large Coflows of the busy period from
Coflow 187 on) diverge after Coflow 219 ends 0.74 ms past an 8 ms step here, one step
after Varys' simulator ends it, and the cause of that first difference was not found.

On all of FB2010 (average CCT; ``benchmarks/results/echelon_varys.json``) ``sebf`` is
23.52 s. Alone, (3) raises it 3.5% (24.35 s), (1) 4.4% (24.56 s), (5) 0.04%, (2) -0.1%,
and (6) lowers it 5.5% (22.23 s); (4) alone was not run on the whole trace (each
completion then recomputes every rate: over two hours here; +0.01% on the first 120
Coflows, where (3) alone is +0.1% and the two together +0.7%). (3) and (4) together raise
it 22% (28.74 s); all six give 27.64 s, 17.5% above ours, and all but (4) 23.90 s.
Varys' simulator itself gives 28.53 s: the switches account for 4.11 s of the 5.00 s
(21%) it is above ours, and the rest is the divergence above. So Varys' simulator's SEBF
is slower than ours mainly because of its greedy back-fill combined with its rate
updates at Coflow events: greedy back-fill hands a port's whole leftover to
the first flow in deadline order, so a Coflow's flows finish at different times, and
each early finisher's capacity then stays idle until some Coflow arrives or departs
(:class:`CoflowEvents`' example: the idle port costs the waiting Coflow 1 s of 6).
``fair-ports`` goes from 76.94 s to 70.59 s with (2), (5), (6) (70.32 s with (6) alone:
the faster port), so the fair/SEBF ratio is 2.55 under Varys' simulator's model
(70.59 / 27.64) against 3.27 under ours; over its own SEBF average it is 2.47 (70.59 /
28.53), issue 25's figure for that simulator (its FAIR on all of FB2010 was not run
here: about 18 min of CPU; on the first 120 Coflows the emulation equals it).

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
from typing import Any

import numpy as np
import pandas as pd
from numba import njit

from commsched.errors import CommschedError
from commsched.io.coflow import MB, CoflowTrace
from commsched.progress import bar
from commsched.sim.flow import (
    REL_TOL,
    FlowResult,
    FlowSim,
    Policy,
    Quantized,
    RouteShare,
    View,
    big_switch,
    priority_fill,
    run_in_chunks,
    simulate,
    water_fill_by_link,
)

__all__ = ["BACKFILLS", "COFLOW_SCHEDULERS", "GBPS", "RATE_UPDATES", "VARYS_EPOCH_S",
           "VARYS_PORT_RATE", "VARYS_QUANTUM_S", "CoflowEvents", "CoflowOrder", "bottleneck",
           "java_doubles", "madd", "replay"]

#: 1 Gbit/s in bytes/s: the port rate of the replay by default.
GBPS = 1e9 / 8
#: Varys' simulator's port rate in bytes per trace second: 2^30 bit per its second, which
#: is 1024 trace ms (``Constants.RACK_BITS_PER_SEC``, ``SIMULATION_SECOND_MILLIS``).
VARYS_PORT_RATE = 2.0**30 / 8 * 1000 / 1024
#: Varys' simulator's admission epoch (10 of its seconds) in trace seconds.
VARYS_EPOCH_S = 10.24
#: Varys' simulator's time step (``Constants.SIMULATION_QUANTA``, 8 ms) in trace seconds.
VARYS_QUANTUM_S = 0.008
#: :class:`CoflowOrder`'s back-fills: weighted max-min in rank order, or Varys' simulator's.
BACKFILLS = ("max-min", "greedy")
#: When a replay recomputes rates: at every flow arrival and completion, or (Varys'
#: simulator) only when a Coflow arrives or departs (:class:`CoflowEvents`).
RATE_UPDATES = ("flow", "coflow")


def _link_bytes(links: np.ndarray, rem: np.ndarray, gidx: np.ndarray, ngroups: int,
                nlinks: int) -> np.ndarray:
    """``(groups, links)`` remaining bytes of each group on each link."""
    rows, hop = np.nonzero(links >= 0)
    return np.bincount(gidx[rows] * nlinks + links[rows, hop], weights=rem[rows],
                       minlength=ngroups * nlinks).reshape(ngroups, nlinks)


def bottleneck(links: np.ndarray, rem: np.ndarray, capacity: np.ndarray) -> float:
    """Varys' effective bottleneck ``Gamma`` of one Coflow: ``max over links l of
    (remaining bytes on l) / capacity_l``.

    Parameters
    ----------
    links : numpy.ndarray
        ``(flows, hops)`` link ids of the Coflow's flows, padded with -1.
    rem : numpy.ndarray
        Remaining bytes of each flow.
    capacity : numpy.ndarray
        Capacity of each link, bytes/s (what is left of it for this Coflow).

    Returns
    -------
    float
        ``Gamma`` in seconds; ``inf`` if a link it needs has no capacity.

    References
    ----------
    Chowdhury, Zhong and Stoica, "Efficient Coflow Scheduling with Varys", SIGCOMM 2014,
    Sec. 5 (the effective bottleneck behind SEBF); not in ``papers/``.

    Examples
    --------
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
    at the bottleneck time).

    Parameters
    ----------
    links, rem, capacity : numpy.ndarray
        As for :func:`bottleneck`.

    Returns
    -------
    numpy.ndarray
        Per-flow rate, bytes/s; zeros if a link it needs is saturated.

    References
    ----------
    Varys (SIGCOMM 2014), Sec. 5, Pseudocode 1: Minimum Allocation for Desired Duration
    (MADD).

    Examples
    --------
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
    allocation is one compiled pass (:func:`_coflow_order`); on a static set of flows
    (:func:`~commsched.sim.flow.simulate`) it runs its own compiled event loop
    (:meth:`run_static`), which gives the same finish times bit for bit.

    ``backfill="greedy"`` back-fills as Varys' simulator does (:func:`_greedy_fill`):
    the Coflows MADD skipped share what it left per port, then flow by flow each takes
    all its ports have left, Coflows in increasing flow meta column ``deadline`` when
    the simulation has one (:func:`replay` writes Varys' simulator's), else in rank
    order; the default ``"max-min"`` is weighted max-min in rank order."""

    def __init__(self, order: str, backfill: str = "max-min") -> None:
        if order not in ("sebf", "fifo", "sebf-static"):
            raise CommschedError(f"Coflow order must be sebf, fifo or sebf-static, "
                                 f"not {order!r}")
        if backfill not in BACKFILLS:
            raise CommschedError(f"back-fill must be {' or '.join(BACKFILLS)}, "
                                 f"not {backfill!r}")
        self.order = order
        self.backfill = backfill
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
        greedy = self.backfill == "greedy"
        bkey = sim.meta.get("deadline") if greedy else None
        _coflow_order(view.links, view.active, sim.remaining, sim.size, sim.release, loc,
                      len(gids), view.net.capacity.astype(float), self.order == "fifo", key,
                      view.now, greedy,
                      np.zeros(0) if bkey is None else np.asarray(bkey, dtype=np.float64),
                      rates)
        if static and fresh:  # the keys of the Coflows seen for the first time
            self._static.update(zip(gids.tolist(), key.tolist(), strict=True))
        return rates

    def run_static(self, sim: FlowSim,
                   progress: Callable[[int], object] | None = None) -> FlowResult:
        """Run ``sim``'s flows, all added and none admitted yet, to the end under this
        policy (:func:`~commsched.sim.flow.simulate` calls it): with the max-min back-fill
        in one compiled loop by Coflow (:func:`_coflow_run`), the finish times and event
        count of :class:`~commsched.sim.flow.FlowSim`'s loop bit for bit, at a cost per
        event of the flows with a positive rate and the Coflows, not of every active flow
        (under ``fifo`` most active flows wait behind earlier Coflows); with the greedy
        back-fill in :class:`~commsched.sim.flow.FlowSim`.

        Parameters
        ----------
        sim, progress
            As for :meth:`~commsched.sim.flow.RouteShare.run_static` (flow meta column
            ``group``: the Coflow ids).

        Returns
        -------
        FlowResult
            As for :meth:`~commsched.sim.flow.RouteShare.run_static`.

        Raises
        ------
        CommschedError
            If the flows have no ``group`` column, or the simulation stalls.
        """
        n = sim.n
        if self.backfill == "greedy" or n == 0:
            sim.run(progress)
            return sim.result()
        col = sim.meta.get("group")
        if col is None:
            raise CommschedError("Coflow scheduling needs the flow meta column 'group' "
                                 "(the Coflow id of each flow)")
        gids, cof = np.unique(col[:n].astype(np.int64), return_inverse=True)
        cof = cof.reshape(-1).astype(np.int64)
        ng, nl = len(gids), len(sim.net.capacity)
        size, release = sim.size[:n].copy(), sim.release[:n].copy()
        # links and flow ids as int32 in the arrays read at every event: half the memory
        # traffic of int64 (2^31 flows would need hundreds of GiB first)
        links = np.ascontiguousarray(sim.net.routes[sim.src[:n], sim.dst[:n]], dtype=np.int32)
        hops = links.shape[1]
        order = np.lexsort((np.arange(n), release)).astype(np.int64)
        mstart = np.concatenate([[0], np.cumsum(np.bincount(cof, minlength=ng))]).astype(np.int64)
        # each Coflow's links, increasing, and each flow's hops as indices into them
        valid = links >= 0
        pairs, inv = np.unique((cof[:, None] * nl + links)[valid], return_inverse=True)
        clink = (pairs % nl).astype(np.int64)
        lstart = np.concatenate([[0], np.cumsum(np.bincount(pairs // nl, minlength=ng))]
                                ).astype(np.int64)
        fpos = np.full((n, hops), -1, np.int64)
        fpos[valid] = inv.reshape(-1)
        mode = ("fifo", "sebf", "sebf-static").index(self.order)
        fixed = np.array([self._static.get(g, np.nan) for g in gids.tolist()])
        finish = np.full(n, np.nan)
        state = np.zeros(7)
        ne = len(clink)
        estart = np.concatenate([[0], np.cumsum(np.bincount(fpos[valid], minlength=ne))]
                                ).astype(np.int64)
        arrays = (np.zeros(n, np.int64), np.zeros(ng, np.int64), np.zeros(estart[-1], np.int32),
                  np.zeros(ne, np.int64), np.zeros(ne), np.zeros(ne, np.int8),
                  np.zeros((ne, hops), np.int64), np.zeros(ng, np.int64), size.copy(),
                  np.zeros(n), np.zeros(n, np.int32), finish, np.zeros(n, np.int32),
                  np.zeros(n, np.bool_), np.zeros(ng, np.bool_), np.zeros(ng, np.int64),
                  np.zeros(ne, np.bool_), np.zeros(ne, np.int64),
                  np.zeros(estart[-1], np.int32), np.zeros(ne, np.int64), np.zeros(n))
        cap = sim.net.capacity.astype(float)
        run_in_chunks(lambda stop: _coflow_run(links, fpos, cof, size, release, order, mstart,
                                               clink, lstart, estart, cap, mode, fixed, state,
                                               *arrays, stop),
                      n, progress, state)
        if mode == 2:
            seen = ~np.isnan(fixed)
            self._static.update(zip(gids[seen].tolist(), fixed[seen].tolist(), strict=True))
        return FlowResult(release, finish, [], int(state[3]))


@njit(cache=True)
def _next_departure(act: np.ndarray, group: np.ndarray, rem: np.ndarray,
                    rates: np.ndarray) -> float:  # pragma: no cover - compiled
    """The time from now until the first Coflow (``group`` of the active flows ``act``)
    has all its flows done at ``rates`` (remaining bytes ``rem``); ``inf`` if none can."""
    gids, loc = _active_groups(act, group)
    last = np.zeros(gids.shape[0])
    for j in range(act.shape[0]):
        t = rem[j] / rates[j] if rates[j] > 0 else np.inf
        last[loc[j]] = max(last[loc[j]], t)
    return last.min() if last.shape[0] else np.inf


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
def _greedy_fill(links: np.ndarray, act: np.ndarray, loc: np.ndarray, ng: int,
                 order: np.ndarray, gamma: np.ndarray, bkey: np.ndarray, now: float,
                 left: np.ndarray, tol: float,
                 rates: np.ndarray) -> None:  # pragma: no cover - compiled
    """Varys' simulator's back-fill (``CoflowSimulator.updateRatesDynamicAlpha``, work
    conservation) of what MADD ``left``: (1) the flows of the Coflows MADD skipped
    (``gamma`` infinite: a link they need was saturated) whose links all have capacity
    left share it per link equally (each takes the smallest ``left / flows on the link``
    over its links); (2) the Coflows in increasing per-flow ``bkey`` (their deadline;
    ties and an empty ``bkey`` in rank ``order``), each flow in active order, add the
    ``min`` of what its links have left (greedy: the first flow at a port takes it all).
    Writes ``rates`` (the back-fill part); updates ``left``."""
    n, hops = links.shape
    nl = left.shape[0]
    cnt = np.zeros(nl)
    ok = np.zeros(n, np.bool_)
    for j in range(n):
        if gamma[loc[j]] == np.inf:
            ok[j] = True
            for h in range(hops):
                lk = links[j, h]
                if lk >= 0 and left[lk] <= tol:
                    ok[j] = False
            if ok[j]:
                for h in range(hops):
                    if links[j, h] >= 0:
                        cnt[links[j, h]] += 1.0
    for j in range(n):
        rates[j] = 0.0
        if ok[j]:
            r = np.inf
            for h in range(hops):
                lk = links[j, h]
                if lk >= 0:
                    r = min(r, left[lk] / cnt[lk])
            rates[j] = r
    for j in range(n):
        for h in range(hops):
            lk = links[j, h]
            if lk >= 0:
                left[lk] -= rates[j]
    seq = order
    if bkey.shape[0]:
        dl = np.full(ng, np.inf)
        for j in range(n):
            dl[loc[j]] = bkey[act[j]]
        ms = np.trunc((dl[order] - now) * 1000.0)  # whole ms to go, as Varys' int
        seq = order[np.argsort(ms, kind="mergesort")]
    # the active flows grouped by Coflow, in active order within one
    start = np.zeros(ng + 1, np.int64)
    for j in range(n):
        start[loc[j] + 1] += 1
    for k in range(ng):
        start[k + 1] += start[k]
    fill = start[:ng].copy()
    by = np.empty(n, np.int64)
    for j in range(n):
        by[fill[loc[j]]] = j
        fill[loc[j]] += 1
    for k in seq:
        for p in range(start[k], start[k + 1]):
            j = by[p]
            m = np.inf
            for h in range(hops):
                lk = links[j, h]
                if lk >= 0:
                    m = min(m, left[lk])
            if not m > tol:
                continue
            rates[j] += m
            for h in range(hops):
                lk = links[j, h]
                if lk >= 0:
                    left[lk] -= m


@njit(cache=True)
def _madd_start(key: np.ndarray, now: float,
                cap: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray,
                                          float]:  # pragma: no cover - compiled
    """The Coflows' rank order by ``key`` and MADD's start: no bottleneck yet (``inf``),
    every link's capacity left, the tolerance of a full link. Ties by Coflow id (the
    position in ``key``) up to float noise (a remaining byte count carries the rounding
    of every earlier step, ~1e-16 of the current time): the order, and so the schedule,
    does not change when every release is shifted by the same time."""
    tick = 1e-9 * max(1.0, abs(now))
    order = np.argsort(np.round(key / tick), kind="mergesort")
    return order, np.full(key.shape[0], np.inf), cap.copy(), REL_TOL * max(1.0, cap.max())


@njit(cache=True)
def _coflow_order(links: np.ndarray, act: np.ndarray, remaining: np.ndarray,
                  size: np.ndarray, release: np.ndarray, loc: np.ndarray, ng: int,
                  cap: np.ndarray, fifo: bool, fixed: np.ndarray, now: float,
                  greedy: bool, bkey: np.ndarray,
                  rates: np.ndarray) -> None:  # pragma: no cover - compiled
    """:class:`CoflowOrder`'s rates of the active flows ``act`` (rows of ``links``; the
    simulator's per-flow ``remaining``, ``size`` and ``release`` arrays read at ``act``;
    Coflow indices ``loc`` in ``0..ng-1``, increasing with the Coflow id) on link
    capacities ``cap``, written to ``rates``. The ranking key is the earliest release
    (``fifo``), else the per-Coflow ``fixed`` key when given (``nan`` entries: the
    bottleneck time of the sizes of the Coflow's active flows, written back), else the
    bottleneck time of the remaining bytes. ``greedy``: Varys' simulator's back-fill
    (:func:`_greedy_fill`, order ``bkey``) instead of weighted max-min in rank order."""
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
    order, gamma, left, tol = _madd_start(key, now, cap)
    # MADD in rank order on what the Coflows before left: Coflow k's flows get
    # rem / gamma_k with gamma_k = max_l b[k, l] / left_l, so it loads link l with
    # b[k, l] / gamma_k <= left_l (equality on its bottleneck).
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
    if greedy:
        _greedy_fill(links, act, loc, ng, order, gamma, bkey, now, left, tol, rates)
        for j in range(n):
            rates[j] += rem[j] / gamma[loc[j]]
        return
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


@njit(cache=True)
def _coflow_bytes(c: int, lstart: np.ndarray, elist: np.ndarray, estart: np.ndarray,
                  ecnt: np.ndarray, edirty: np.ndarray, remaining: np.ndarray,
                  cb: np.ndarray) -> None:  # pragma: no cover - compiled
    """Coflow ``c``'s remaining bytes on each of its links (``cb``), summed again, over
    the link's active flows in admission order as :func:`_coflow_order` sums them, where
    a flow on the link was admitted, completed or given a rate since the last sum
    (``edirty``; a sum of unchanged bytes would be the same float)."""
    for e in range(lstart[c], lstart[c + 1]):
        if edirty[e]:
            s = 0.0
            for p in range(estart[e], estart[e] + ecnt[e]):
                s += remaining[elist[p]]
            cb[e] = s
            edirty[e] = 0


@njit(cache=True)
def _coflow_allocate(links: np.ndarray, remaining: np.ndarray, size: np.ndarray,
                     release: np.ndarray, alist: np.ndarray, mstart: np.ndarray,
                     nact: np.ndarray, clink: np.ndarray, lstart: np.ndarray,
                     elist: np.ndarray, estart: np.ndarray, ecnt: np.ndarray,
                     cb: np.ndarray, edirty: np.ndarray, cnth: np.ndarray, acts: np.ndarray,
                     nac: int, mode: int, fixed: np.ndarray, cap: np.ndarray, now: float,
                     rate: np.ndarray, plist: np.ndarray, npos: int, sel: np.ndarray,
                     frozen: np.ndarray, wl: np.ndarray,
                     wcnt: np.ndarray) -> int:  # pragma: no cover - compiled
    """:func:`_coflow_order`'s rates, by Coflow (:func:`_coflow_run`'s allocation): the
    Coflows ``acts[:nac]`` (increasing index, i.e. Coflow id), each with its active flows
    ``alist[mstart[c]:mstart[c] + nact[c]]`` in admission order, its links
    ``clink[lstart[c]:lstart[c + 1]]`` (increasing) and on each link ``e`` its active
    flows ``elist[estart[e]:estart[e] + ecnt[e]]`` (``cnth[e, h]`` of them with it as
    hop ``h``). The same float operations in the same order as :func:`_coflow_order` on
    the same flows, so the same rates bit for bit; but a Coflow's remaining bytes on a
    link (``cb``) are summed again only where they changed and only when read (its
    ``sebf`` key; MADD, once no link it needs is full), a Coflow whose flows all cross a
    link with nothing left is passed over by the back-fill without visiting its flows,
    and the back-fill water-fills on the standing lists of flows by link
    (:func:`~commsched.sim.flow.water_fill_by_link`): a Coflow none of whose flows
    crosses a link with nothing left on the lists themselves, another on the lists of its
    other flows (``wl``, ``wcnt``: ``elist``'s layout), filtered from its links with
    something left, so that the water-filling and the capacity it takes are summed over
    the flows filled only, link by link in admission order. Marks dirty (``edirty``) the
    links of the flows it gives a rate (their bytes change in the next step). ``mode``:
    0 fifo, 1 sebf, 2 sebf-static (``fixed``: per Coflow, ``nan`` until first seen).
    Zeroes the rates of the flows ``plist[:npos]``, writes the new ``rate`` of every flow
    whose rate is not 0, lists them in ``plist`` and returns how many; ``sel``, ``frozen``
    (all False), ``wl`` and ``wcnt`` are work space."""
    nl = cap.shape[0]
    hops = links.shape[1]
    kdead = np.zeros(hops, np.int64)  # per hop, a Coflow's flows crossing a full link there
    for q in range(npos):
        rate[plist[q]] = 0.0
    npos = 0
    key = np.empty(nac)
    for a in range(nac):
        c = acts[a]
        if mode == 0:  # the earliest release: the first flow in admission order
            key[a] = release[alist[mstart[c]]]
        elif mode == 2:
            if np.isnan(fixed[c]):
                lo = lstart[c]
                fb = np.zeros(lstart[c + 1] - lo)  # its active flows' full sizes per link
                for e in range(lo, lstart[c + 1]):
                    for p in range(estart[e], estart[e] + ecnt[e]):
                        fb[e - lo] += size[elist[p]]
                m = 0.0
                for e in range(lo, lstart[c + 1]):
                    m = max(m, fb[e - lo] / cap[clink[e]])
                fixed[c] = m
            key[a] = fixed[c]
        else:
            _coflow_bytes(c, lstart, elist, estart, ecnt, edirty, remaining, cb)
            m = 0.0
            for e in range(lstart[c], lstart[c + 1]):
                m = max(m, cb[e] / cap[clink[e]])
            key[a] = m
    order, gamma, left, tol = _madd_start(key, now, cap)
    # MADD in rank order; once no link has more than tol left every later Coflow waits.
    # A link carries bytes of the Coflow (b > 0 in _coflow_order) iff it has active flows
    nopen = 0
    for lk in range(nl):
        if left[lk] > tol:
            nopen += 1
    for a in order:
        if nopen == 0:
            break
        c = acts[a]
        need = False
        full = False
        for e in range(lstart[c], lstart[c + 1]):
            if ecnt[e] > 0:
                need = True
                if left[clink[e]] <= tol:
                    full = True
                    break
        if not need or full:
            continue
        _coflow_bytes(c, lstart, elist, estart, ecnt, edirty, remaining, cb)
        gk = 0.0
        for e in range(lstart[c], lstart[c + 1]):
            if ecnt[e] > 0:
                gk = max(gk, cb[e] / left[clink[e]])
        gamma[a] = gk
        for e in range(lstart[c], lstart[c + 1]):
            if ecnt[e] > 0:
                lk = clink[e]
                left[lk] = max(left[lk] - cb[e] / gk, 0.0)
                if left[lk] <= tol:
                    nopen -= 1
    # back-fill (priority_fill): classes in rank order until no link has anything left
    capb = left.copy()
    isleft = np.zeros(nl, np.bool_)
    nleft = 0
    for lk in range(nl):
        if capb[lk] > REL_TOL * left[lk]:
            isleft[lk] = True
            nleft += 1
    for r in range(nac):
        if nleft == 0:
            break
        a = order[r]
        c = acts[a]
        lo, hi = lstart[c], lstart[c + 1]
        # every flow crosses a link with nothing left when, at some hop, all of them do
        starved = False
        dead = False  # some flow crosses one
        for h in range(hops):
            k = 0
            for e in range(lo, hi):
                if capb[clink[e]] <= 0.0:
                    k += cnth[e, h]
            if k == nact[c]:
                starved = True
                break
            kdead[h] = k
            dead = dead or k > 0
        if starved:
            continue
        fl, fc = elist, ecnt  # the flows water-filled, by link in admission order
        if dead:  # those crossing no link with nothing left
            for e in range(lo, hi):
                j = estart[e]
                if capb[clink[e]] > 0.0:
                    h0 = -1  # the hop at which all its flows cross it, if one: unchecked
                    for h in range(hops):
                        if cnth[e, h] == ecnt[e]:
                            h0 = h
                    clean = h0 >= 0  # no flow of the Coflow crosses a full link elsewhere
                    for h in range(hops):
                        if h != h0 and kdead[h] > 0:
                            clean = False
                    for p in range(estart[e], estart[e] + ecnt[e]):
                        i = elist[p]
                        ok = True
                        if not clean:
                            for h in range(hops):
                                lk = links[i, h]
                                if h != h0 and lk >= 0 and capb[lk] <= 0.0:
                                    ok = False
                                    break
                        if ok:
                            wl[j] = i
                            j += 1
                wcnt[e] = j - estart[e]
            fl, fc = wl, wcnt
        m = water_fill_by_link(links, remaining, clink[lo:hi], fl, estart[lo:hi], fc[lo:hi],
                               capb, frozen, rate, sel)
        if m == 0:
            continue
        for e in range(lo, hi):  # each link's flows in admission order, as priority_fill
            if fc[e]:
                lk = clink[e]
                x = capb[lk]
                for p in range(estart[e], estart[e] + fc[e]):
                    x -= rate[fl[p]]
                capb[lk] = x
                edirty[e] = 1  # its flows send
                if isleft[lk] and not x > REL_TOL * left[lk]:
                    isleft[lk] = False
                    nleft -= 1
        if gamma[a] == np.inf:
            for q in range(m):
                i = sel[q]
                if rate[i] != 0.0:
                    plist[npos] = i
                    npos += 1
    for a in range(nac):  # MADD's rates on top of the back-fill's
        if gamma[a] < np.inf:
            c = acts[a]
            for e in range(lstart[c], lstart[c + 1]):
                edirty[e] = 1
            for p in range(mstart[c], mstart[c] + nact[c]):
                i = alist[p]
                rate[i] += remaining[i] / gamma[a]
                if rate[i] != 0.0:
                    plist[npos] = i
                    npos += 1
    return npos


@njit(cache=True)
def _coflow_run(links: np.ndarray, fpos: np.ndarray, cof: np.ndarray, size: np.ndarray,
                release: np.ndarray, order: np.ndarray, mstart: np.ndarray,
                clink: np.ndarray, lstart: np.ndarray, estart: np.ndarray, cap: np.ndarray,
                mode: int, fixed: np.ndarray, state: np.ndarray, alist: np.ndarray,
                nact: np.ndarray, elist: np.ndarray, ecnt: np.ndarray, cb: np.ndarray,
                edirty: np.ndarray, cnth: np.ndarray, acts: np.ndarray,
                remaining: np.ndarray, rate: np.ndarray, plist: np.ndarray,
                finish: np.ndarray, sel: np.ndarray, frozen: np.ndarray,
                ctouch: np.ndarray, clst: np.ndarray,
                etouch: np.ndarray, elst: np.ndarray, wl: np.ndarray, wcnt: np.ndarray,
                tq: np.ndarray, stop_after: int) -> int:  # pragma: no cover - compiled
    """:class:`FlowSim`'s event loop under :class:`CoflowOrder` (max-min back-fill) on a
    static set of flows (``order``: admission order, by release then id; ``cof``: each
    flow's Coflow index; ``fpos[i, h]``: the index ``e`` of flow ``i``'s hop ``h`` among
    its Coflow's links ``clink``), allocating by :func:`_coflow_allocate` and stepping
    only the flows with a rate (``plist``): a flow at rate 0 keeps its remaining bytes
    and cannot complete, so a segment's end, the completions and every remaining byte
    count are those of :func:`~commsched.sim.flow._step` on all active flows (each
    flow's time to finish, computed once for the segment's end, is kept in ``tq`` for
    its completion test). Keeps each Coflow's active flows in admission order, overall
    (``alist``) and by link (``elist``, from ``estart[e]``). Resumable: ``state`` =
    [now, next flow to admit, active flows, events, active Coflows, flows in ``plist``,
    whether the rates are stale]; returns after ``stop_after`` completions or at the end
    (flows completed in this call; -1 for a stall, -2 for a rate that is negative or not
    finite)."""
    now, nxt, nflows, events = state[0], int(state[1]), int(state[2]), int(state[3])
    nac, npos, stale = int(state[4]), int(state[5]), state[6] != 0.0
    n = order.shape[0]
    hops = links.shape[1]
    done = 0
    while (nxt < n or nflows > 0) and done < stop_after:
        while nxt < n and release[order[nxt]] <= now:  # admit the flows released by now
            i = order[nxt]
            c = cof[i]
            if nact[c] == 0:  # the Coflow joins acts (kept in increasing order)
                k = nac
                while k > 0 and acts[k - 1] > c:
                    acts[k] = acts[k - 1]
                    k -= 1
                acts[k] = c
                nac += 1
            alist[mstart[c] + nact[c]] = i
            nact[c] += 1
            for h in range(hops):
                e = fpos[i, h]
                if e >= 0:
                    elist[estart[e] + ecnt[e]] = i
                    ecnt[e] += 1
                    cnth[e, h] += 1
                    edirty[e] = 1
            nflows += 1
            nxt += 1
            stale = True
        if stale and nflows:
            npos = _coflow_allocate(links, remaining, size, release, alist, mstart, nact,
                                    clink, lstart, elist, estart, ecnt, cb, edirty, cnth,
                                    acts, nac, mode, fixed, cap, now, rate, plist, npos, sel,
                                    frozen, wl, wcnt)
            events += 1
            stale = False
        t_next = release[order[nxt]] if nxt < n else np.inf
        dt_done = np.inf
        for q in range(npos):
            r = rate[plist[q]]
            if not (r >= 0.0 and r < np.inf):
                done = -2
                break
            t = remaining[plist[q]] / r
            tq[q] = t
            if t < dt_done:
                dt_done = t
        if done == -2:
            break
        if dt_done == np.inf and t_next == np.inf:
            if nflows:
                done = -1
            break
        t_end = min(now + dt_done, t_next)
        dt = t_end - now
        due = t_end + REL_TOL * dt
        nc = 0
        ne = 0
        kept = 0
        for q in range(npos):  # as _advance: the flows at rate 0 do not change
            i = plist[q]
            remaining[i] -= rate[i] * dt
            if now + tq[q] <= due or remaining[i] <= REL_TOL * size[i]:
                remaining[i] = 0.0
                rate[i] = 0.0
                finish[i] = t_end
                nflows -= 1
                done += 1
                c = cof[i]
                if not ctouch[c]:  # its lists of active flows are compacted below
                    ctouch[c] = True
                    clst[nc] = c
                    nc += 1
                for h in range(hops):
                    e = fpos[i, h]
                    if e >= 0:
                        cnth[e, h] -= 1
                        if not etouch[e]:
                            etouch[e] = True
                            elst[ne] = e
                            ne += 1
            else:
                plist[kept] = i
                kept += 1
        npos = kept
        for k in range(ne):
            e = elst[k]
            etouch[e] = False
            j = estart[e]
            for p in range(estart[e], estart[e] + ecnt[e]):
                if remaining[elist[p]] > 0.0:
                    elist[j] = elist[p]
                    j += 1
            ecnt[e] = j - estart[e]
        for k in range(nc):
            c = clst[k]
            ctouch[c] = False
            m0 = mstart[c]
            j = m0
            for p in range(m0, m0 + nact[c]):
                if remaining[alist[p]] > 0.0:
                    alist[j] = alist[p]
                    j += 1
            nact[c] = j - m0
            if nact[c] == 0:  # the Coflow leaves acts
                a = 0
                while acts[a] != c:
                    a += 1
                for b in range(a, nac - 1):
                    acts[b] = acts[b + 1]
                nac -= 1
        if nc:
            stale = True
        now = t_end
    state[0], state[1], state[2], state[3] = now, nxt, nflows, events
    state[4], state[5], state[6] = nac, npos, 1.0 if stale else 0.0
    return done


class CoflowEvents:
    """``policy`` recomputed only when a Coflow arrives or departs, as in Varys' simulator
    (``CoflowSimulator.afterJobAdmission`` and ``afterJobDeparture``): at a completion
    that leaves its Coflow other flows, the surviving flows keep their rates and the
    capacity the finished flow held stays idle until the next Coflow event. A call that
    sees a flow it has not seen (an arrival) or fewer active Coflows than its last
    recomputation (a departure; flow meta column ``group``) recomputes.

    Example (1 byte/s ports): Coflow A sends 2 bytes 0->1 and 1 byte 2->3, Coflow C
    5 bytes 2->3 and 1 byte 0->1, all at 0. SEBF runs A first (bottleneck 2 s < 5 s);
    C waits for port 0 and back-fill gives A's short flow port 2's rest: it ends at 1 s.
    Recomputed there, C's 5-byte flow takes port 2 from 1 s and ends at 6 s; recomputed
    only when A departs (2 s), it starts then and ends at 7 s.

    >>> from commsched.sim.flow import big_switch, simulate
    >>> args = (big_switch(4, 1.0), [0, 2, 2, 0], [1, 3, 3, 1], [2.0, 1.0, 5.0, 1.0],
    ...         [0.0] * 4)
    >>> simulate(*args, policy=CoflowOrder("sebf"), group=[0, 0, 1, 1]).finish.tolist()
    [2.0, 1.0, 6.0, 3.0]
    >>> simulate(*args, policy=CoflowEvents(CoflowOrder("sebf")),
    ...          group=[0, 0, 1, 1]).finish.tolist()
    [2.0, 1.0, 7.0, 3.0]
    """

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self._rate = np.zeros(0)  # by flow id: the rates of the last recomputation
        self._seen = np.zeros(0, dtype=bool)
        self._coflows = 0  # active Coflows at the last recomputation

    def __call__(self, view: View) -> np.ndarray:
        sim = view.sim
        col = sim.meta.get("group")
        if col is None:
            raise CommschedError("Coflow-event rate updates need the flow meta column "
                                 "'group' (the Coflow id of each flow)")
        if len(self._rate) < sim.n:
            grow = sim.n - len(self._rate)
            self._rate = np.concatenate([self._rate, np.zeros(grow)])
            self._seen = np.concatenate([self._seen, np.zeros(grow, dtype=bool)])
        act = view.active
        ncof = len(_active_groups(act, col)[0]) if len(act) else 0
        if ncof == self._coflows and self._seen[act].all():
            return self._rate[act]
        rates = np.asarray(self.policy(view), dtype=float)
        self._rate[act] = rates
        self._seen[act] = True
        self._coflows = ncof
        return rates

    def hold(self, view: View, rates: np.ndarray) -> float:
        """The rates hold until the next Coflow departure: the earliest, over the active
        Coflows, of the time its last flow finishes at these rates (``-inf`` when none
        can finish: event by event then; :class:`~commsched.sim.flow.FlowSim`).

        Parameters
        ----------
        view : View
            Active flows, their Coflow ids (``meta["group"]``) and remaining bytes.
        rates : numpy.ndarray
            This policy's rates, bytes/s, one per active flow.

        Returns
        -------
        float
            The next departure in simulated seconds, or ``-inf``.
        """
        t = _next_departure(view.active, view.sim.meta["group"], view.remaining, rates)
        return view.now + t if np.isfinite(t) else -np.inf


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


def java_doubles(seed: int, n: int) -> np.ndarray:
    """The first ``n`` values of ``java.util.Random(seed).nextDouble()`` (the 48-bit linear
    congruential generator of the Java SE API specification, class ``Random``): the
    deadline multipliers of Varys' simulator come from ``Random(17)``.

    Parameters
    ----------
    seed : int
        The generator's seed.
    n : int
        How many values.

    Returns
    -------
    numpy.ndarray
        ``n`` floats in ``[0, 1)``, bit for bit Java's.

    Examples
    --------
    >>> java_doubles(17, 2).round(6).tolist()
    [0.732312, 0.69737]
    """
    mask = (1 << 48) - 1
    x = (seed ^ 0x5DEECE66D) & mask

    def bits(k: int) -> int:
        nonlocal x
        x = (x * 0x5DEECE66D + 0xB) & mask
        return x >> (48 - k)

    return np.array([((bits(26) << 27) + bits(27)) * 2.0**-53 for _ in range(n)])


def replay(trace: CoflowTrace, scheduler: str, port_rate: float = GBPS,
           mb: float = MB, epoch_s: float | None = None, rate_updates: str = "flow",
           backfill: str = "max-min", quantum_s: float | None = None) -> pd.DataFrame:
    """Replay a Coflow trace on a big switch of ``trace.ports`` ports of ``port_rate``
    bytes/s under ``scheduler`` (a name in :data:`COFLOW_SCHEDULERS`); one row per Coflow:
    ``id``, ``arrival`` and ``finish`` (s), ``cct`` (s), ``total_mb``, ``width`` (flows) and
    ``longest_mb`` (the Coflow's largest flow).

    The other arguments emulate Varys' simulator (``coflow/coflowsim``; module docstring
    for what each changes on FB2010); their defaults are this package's model:

    ``epoch_s`` admits Coflows as Varys' simulator does (``CoflowSim``,
    ``Simulator.simulate``, epochs of 10 of its seconds: :data:`VARYS_EPOCH_S`): a Coflow
    arriving in ``(k * epoch_s, (k + 1) * epoch_s]`` is released at ``k * epoch_s``, and
    its ``arrival`` and CCT count from there.

    ``rate_updates="coflow"`` recomputes rates only when a Coflow arrives or departs
    (:class:`CoflowEvents`); ``backfill="greedy"`` back-fills flow by flow
    (:class:`CoflowOrder`), Coflows in the order of Varys' simulator's deadlines
    (``Job.calcAlphaDeadline``: release plus the Coflow's largest bytes at a port over
    2^27 bytes/s, times ``1 + u`` with ``u`` the :func:`java_doubles` of seed 17 in
    trace order; it divides by its port rate per its second and adds the result as
    trace ms, whatever ``port_rate``) and each
    Coflow's flows by (reducer, mapper) port; both apply to the Coflow schedulers
    ``sebf``, ``sebf-static`` and ``fifo`` only (Varys' simulator recomputes per-flow
    fairness at every step). ``quantum_s`` (:data:`VARYS_QUANTUM_S`) changes rates only
    at multiples of it (:class:`~commsched.sim.flow.Quantized`) and rounds each finish up
    to one. Varys' simulator's port rate is :data:`VARYS_PORT_RATE`.

    Parameters
    ----------
    trace : CoflowTrace
        The Coflows (Varys' trace format).
    scheduler : str
        A name in :data:`COFLOW_SCHEDULERS` (aliases such as ``varys`` included).
    port_rate : float
        Capacity of every port, bytes/s.
    mb : float
        Bytes per trace megabyte.
    epoch_s : float, optional
        Admission epoch, seconds (default: each Coflow at its arrival).
    rate_updates : {"flow", "coflow"}
        Recompute rates at every flow event, or at Coflow arrivals and departures only.
    backfill : {"max-min", "greedy"}
        How the capacity the Coflow order leaves is shared.
    quantum_s : float, optional
        Rate-change grid, seconds (default: none).

    Returns
    -------
    pandas.DataFrame
        One row per Coflow, in trace order, with the columns above.

    Raises
    ------
    CommschedError
        If the scheduler is unknown, the port rate, epoch or quantum is not positive,
        ``rate_updates`` or ``backfill`` is not one of its choices, or Coflow-event
        updates or greedy back-fill are asked of a scheduler without a Coflow order.

    Examples
    --------
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
    if quantum_s is not None and not quantum_s > 0:
        raise CommschedError("quantum must be positive")
    if rate_updates not in RATE_UPDATES:
        raise CommschedError(f"rate updates must be {' or '.join(RATE_UPDATES)}, "
                             f"not {rate_updates!r}")
    if backfill not in BACKFILLS:
        raise CommschedError(f"back-fill must be {' or '.join(BACKFILLS)}, not {backfill!r}")
    policy = COFLOW_SCHEDULERS[scheduler]()
    if not isinstance(policy, CoflowOrder) and (rate_updates != "flow"
                                                or backfill != "max-min"):
        raise CommschedError(f"Coflow-event rate updates and greedy back-fill apply to "
                             f"sebf, sebf-static and fifo, not {scheduler!r}")
    f = trace.flows(mb)
    arrival = trace.arrival_ms / 1000.0
    if epoch_s is not None:
        arrival = np.maximum(np.ceil(arrival / epoch_s) - 1, 0) * epoch_s
        f["release"] = arrival[f["coflow"]]
    meta: dict[str, Any] = {"group": f["coflow"]}
    if backfill == "greedy":
        # Varys' simulator's flow order (reducers, then mappers, by port) and deadlines
        o = np.lexsort((f["src"], f["dst"], f["coflow"]))
        f = {k: v[o] for k, v in f.items()}
        # its deadline: the largest bytes at a port over 2^27 bytes, read as seconds
        net = big_switch(trace.ports, 2.0**27)
        gamma = np.array([bottleneck(net.routes[s, d], z, net.capacity) for s, d, z in
                          _by_coflow(f, len(trace))])
        deadline = arrival + gamma * (1.0 + java_doubles(17, len(trace)))
        meta = {"group": f["coflow"], "deadline": deadline[f["coflow"]]}
        policy = CoflowOrder(scheduler, backfill)
    if rate_updates == "coflow":
        policy = CoflowEvents(policy)
    if quantum_s is not None:
        policy = Quantized(policy, quantum_s)
    with bar(len(f["src"]), f"replay {scheduler} (flows)", log_every=10.0) as b:
        res = simulate(big_switch(trace.ports, port_rate), f["src"], f["dst"], f["size"],
                       f["release"], policy=policy, progress=b.update, **meta)
    finish = np.full(len(trace), -np.inf)
    np.maximum.at(finish, f["coflow"], res.finish)
    if quantum_s is not None:  # a step's completions count at the step's end
        finish = np.ceil(finish / quantum_s - REL_TOL) * quantum_s
    df = pd.DataFrame({"id": trace.ids, "arrival": arrival, "finish": finish,
                       "cct": finish - arrival, "total_mb": trace.total_mb(),
                       "width": np.bincount(f["coflow"], minlength=len(trace)),
                       "longest_mb": [float(v.max()) / len(m) for m, v
                                      in zip(trace.mappers, trace.reducer_mb, strict=True)]})
    df.attrs["events"] = res.events
    return df


def _by_coflow(f: dict[str, np.ndarray],
               n: int) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Each Coflow's ``(src, dst, size)`` of the flows ``f`` (grouped by ``coflow``)."""
    cuts = np.searchsorted(f["coflow"], np.arange(1, n))
    return list(zip(np.split(f["src"], cuts), np.split(f["dst"], cuts),
                    np.split(f["size"], cuts), strict=True))
