"""EchelonFlow scheduling (Pan et al., HotNets 2022, Property 4) as flow-simulator policies.

Property 4 adapts Varys (Chowdhury et al., SIGCOMM 2014): *inter*-EchelonFlow, rank the
EchelonFlows by their tardiness (Eq. 2) where SEBF ranks Coflows by their bottleneck
completion time; *intra*-EchelonFlow, the flow with the largest tardiness sets the pace,
where MADD paces a Coflow by its slowest flow. The sentence leaves two things open, and
each reading is a policy here (:data:`FLOW_SCHEDULERS`, names ``echelon-<intra>-<rank>``):

Intra-EchelonFlow rates (``intra``)
    ``madd`` -- constant rates, MADD's way: the smallest tardiness ``t`` such that, on
    the capacity the EchelonFlows ranked before left, every remaining flow ``i`` can
    finish by ``d_i + t`` at the constant rate ``rem_i / (d_i + t - now)`` (closed form
    for a Coflow, bisection otherwise); every flow gets exactly that rate, so all flows
    of the EchelonFlow are equally tardy. For a Coflow this is MADD.
    ``edf`` -- earliest ideal finish first: the EchelonFlow's flows are strict priority
    classes by ideal finish time (ties: one class, shared in proportion to the remaining
    bytes, MADD-like), so earlier-needed data is sent first and the rest is not slowed
    for it. On one bottleneck link this minimises the EchelonFlow's maximum lateness
    (Jackson's rule).

Inter-EchelonFlow ranking (``rank``), ascending, ties by EchelonFlow id
    ``remaining`` -- the tardiness the unfinished flows would have alone on the network:
    per link, serve the EchelonFlow's flows crossing it in ideal-finish order at the
    link's full capacity; the largest lateness over links and flows (a lower bound on
    the EchelonFlow's remaining tardiness, exact on one bottleneck; for a Coflow it is
    Varys' bottleneck time, counted from the reference time);
    ``total`` -- Eq. 2 over all flows: the larger of the above and the tardiness its
    finished flows already have. With ``total`` a ``madd`` EchelonFlow that is already
    that late is also paced to it (its flows need not finish earlier than the tardiness
    it already has), which leaves bandwidth to the others.
    ``bottleneck`` -- not a reading of Property 4 but Varys' own SEBF key kept beside
    it: the time the unfinished flows need alone (the largest of their bytes on a link
    over its capacity), ideal times ignored. Ranking by tardiness serves an EchelonFlow
    that has waited longer *later* (its lateness grows with its age); for the sum of
    tardiness of EchelonFlows on one link, shortest remaining first is what minimises
    it (Smith's rule with equal weights), and this ranking keeps that.

Both then back-fill (Varys' work conservation): what the paced allocation leaves is given
to the flows in rank order, each EchelonFlow's flows in proportion to remaining bytes.

``eiff`` -- *earliest ideal finish first across jobs*: every active flow is one strict
priority class by its ideal finish time, whatever EchelonFlow it belongs to (ties shared
as above): global EDF with the ideal finish times as deadlines.

Policies read the meta columns ``group`` and ``ideal`` (see
:mod:`commsched.echelon.model`); they keep state (the tardiness of finished flows), so
:data:`FLOW_SCHEDULERS` maps a name to a *factory* of a fresh policy per simulation. Weights
are not used by the heuristics (the exact solver, :mod:`commsched.echelon.exact`, takes
them).

Examples
--------
Fig. 2 (three 2-byte activations produced at 1, 2, 3 s on a 1 byte/s link, ideal finish
times 1, 2, 3 s): earliest ideal finish first sends them one after the other:

>>> from commsched.echelon.model import EchelonFlow, simulate_echelonflows
>>> from commsched.sim.flow import big_switch
>>> h = EchelonFlow([0, 0, 0], [1, 1, 1], [2.0] * 3, [1.0, 2.0, 3.0], [0.0, 1.0, 2.0])
>>> run = simulate_echelonflows(big_switch(2, 1.0), [h], FLOW_SCHEDULERS["echelon-edf-total"]())
>>> run.finish.tolist(), run.tardiness.tolist()
([3.0, 5.0, 7.0], [4.0])
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial

import numpy as np

from commsched.echelon.coflow import COFLOW_SCHEDULERS
from commsched.errors import CommschedError
from commsched.registry import Registry
from commsched.sim.flow import REL_TOL, Policy, View, priority_max_min

__all__ = ["ECHELON_SCHEDULERS", "FLOW_SCHEDULERS", "INTRA", "RANKS", "EchelonScheduler", "Eiff"]

#: Intra-EchelonFlow rate rules and inter-EchelonFlow ranking keys.
INTRA = ("madd", "edf")
RANKS = ("total", "remaining", "bottleneck")


def _meta(view: View, name: str) -> np.ndarray:
    col = view.sim.meta.get(name)
    if col is None:
        raise CommschedError(f"EchelonFlow scheduling needs the flow meta column {name!r} "
                             "(see commsched.echelon.model)")
    return col[view.active]


def _isolated_bound(now: float, links: np.ndarray, rem: np.ndarray, ideal: np.ndarray,
                    gidx: np.ndarray, ngroups: int, cap: np.ndarray) -> np.ndarray:
    """Per dense group index: ``max over links, flows`` of ``now + (bytes of the group's
    flows on the link with ideal <= this flow's) / capacity - ideal``."""
    valid = links >= 0
    rows, hop = np.nonzero(valid)
    lk = links[rows, hop]
    g, d, r = gidx[rows], ideal[rows], rem[rows]
    order = np.lexsort((d, lk, g))
    g, lk, d, r = g[order], lk[order], d[order], r[order]
    cs = np.cumsum(r)
    seg = np.flatnonzero(np.r_[True, (np.diff(g) != 0) | (np.diff(lk) != 0)])
    start = np.repeat(cs[seg] - r[seg], np.diff(np.r_[seg, len(r)]))
    late = now + (cs - start) / cap[lk] - d
    out = np.full(ngroups, -np.inf)
    np.maximum.at(out, g, late)
    return out


def _pace(now: float, links: np.ndarray, rem: np.ndarray, ideal: np.ndarray,
          cap: np.ndarray, floor: float, empty: np.ndarray) -> float:
    """Smallest ``t >= floor`` with ``sum_{i on l} rem_i / (ideal_i + t - now) <= cap_l``
    on every link ``l`` of these flows (``inf`` when a link has at most ``empty[l]`` left)."""
    valid = links >= 0
    lk = links[valid]
    rows = np.nonzero(valid)[0]
    if np.any(cap[lk] <= empty[lk]):
        return math.inf
    lo = float(np.max(now - ideal))  # every flow needs ideal + t > now
    if np.all(ideal == ideal[0]):  # a Coflow: MADD's closed form, the bottleneck's time
        load = np.bincount(lk, weights=rem[rows], minlength=len(cap))
        return max(floor, lo + float(np.max(load[lk] / cap[lk])))

    def ok(t: float) -> bool:
        load = np.bincount(lk, weights=rem[rows] / (ideal[rows] + t - now),
                           minlength=len(cap))
        return bool(np.all(load[lk] <= cap[lk]))

    if floor > lo:
        if ok(floor):
            return floor
        lo = floor  # the answer lies above the floor
    step = max(1e-9 * max(1.0, abs(lo)), float(np.max(rem[rows] / cap[lk])))
    hi = lo + step
    while not ok(hi):
        step *= 2.0
        hi = lo + step
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if mid <= lo or mid >= hi:
            break
        if ok(mid):
            hi = mid
        else:
            lo = mid
        if hi - lo <= 1e-12 * max(1.0, abs(hi)):
            break
    return hi


class EchelonScheduler:
    """EchelonFlow scheduling (Property 4), one of its readings (module docstring).

    A flow policy: called with the flow simulator's
    :class:`~commsched.sim.flow.View`, it returns the rate of every active flow, reading
    the meta columns ``group``, ``ideal`` and ``index``.

    Parameters
    ----------
    intra : str
        How flows of one EchelonFlow share: one of :data:`INTRA`.
    rank : str
        How EchelonFlows are ordered: one of :data:`RANKS`.

    Raises
    ------
    CommschedError
        If ``intra`` or ``rank`` is unknown.

    References
    ----------
    EchelonFlow (Pan et al., HotNets 2022), Sec. 3.3, Property 4 (the scheduling rule), Sec.
    3.2, Eqs. 1-4 (the tardiness it minimises).
    """

    def __init__(self, intra: str = "madd", rank: str = "total") -> None:
        if intra not in INTRA or rank not in RANKS:
            raise CommschedError(f"EchelonFlow scheduler: intra in {INTRA}, rank in {RANKS}")
        self.intra, self.rank = intra, rank
        self._done: dict[int, float] = {}  # group -> largest tardiness of finished flows
        self._last = np.zeros(0, dtype=np.int64)

    def _update_done(self, view: View) -> None:
        gone = np.setdiff1d(self._last, view.active, assume_unique=True)
        sim = view.sim
        fin = gone[np.isfinite(sim.finish[gone])]
        if len(fin):
            t = sim.finish[fin] - sim.meta["ideal"][fin]
            for g, v in zip(sim.meta["group"][fin].astype(np.int64).tolist(), t.tolist(),
                            strict=True):
                self._done[g] = max(self._done.get(g, -math.inf), v)
        self._last = view.active.copy()

    def __call__(self, view: View) -> np.ndarray:
        self._update_done(view)
        n = len(view.active)
        if n == 0:
            return np.zeros(0)
        group = _meta(view, "group").astype(np.int64)
        ideal = _meta(view, "ideal").astype(float)
        cap = view.net.capacity.astype(float)
        gids, gidx = np.unique(group, return_inverse=True)
        done = np.array([self._done.get(int(g), -math.inf) for g in gids])
        if self.rank == "bottleneck":
            valid = view.links >= 0
            rows = np.nonzero(valid)[0]
            L = len(cap)
            per = np.bincount(gidx[rows] * L + view.links[valid],
                              weights=view.remaining[rows], minlength=len(gids) * L)
            key = np.max(per.reshape(len(gids), L) / cap[None, :], axis=1)
        else:
            key = _isolated_bound(view.now, view.links, view.remaining, ideal, gidx,
                                  len(gids), cap)
        if self.rank == "total":
            key = np.maximum(key, done)
        # equal keys (up to float noise) tie by EchelonFlow id, whatever the time origin
        tick = 1e-9 * max(1.0, abs(view.now))
        order = np.lexsort((gids, np.round(key / tick)))  # rank position -> group index
        pos = np.empty(len(gids), dtype=np.int64)
        pos[order] = np.arange(len(gids))
        rem = view.remaining
        if self.intra == "edf":
            # classes: (group rank, ideal finish time), densely numbered
            _, klass = np.unique(np.stack([pos[gidx], ideal]), axis=1, return_inverse=True)
            return priority_max_min(view.links, cap, klass.reshape(-1), weight=rem)
        rates = np.zeros(n)
        left = cap.copy()
        members = np.split(np.argsort(gidx, kind="stable"),
                           np.cumsum(np.bincount(gidx, minlength=len(gids)))[:-1])
        for k in order:
            f = members[k]
            floor = done[k] if self.rank == "total" else -math.inf
            t = _pace(view.now, view.links[f], rem[f], ideal[f], left, floor, REL_TOL * cap)
            if not math.isfinite(t):
                continue
            r = rem[f] / (ideal[f] + t - view.now)
            valid = view.links[f] >= 0
            load = np.bincount(view.links[f][valid],
                               weights=np.broadcast_to(r[:, None], valid.shape)[valid],
                               minlength=len(left))
            # < 1 only by the float noise of the pace
            over = load > left
            scale = min(1.0, float(np.min(left[over] / load[over]))) if over.any() else 1.0
            rates[f] = r * scale
            left = np.maximum(left - load * scale, 0.0)
        fill = priority_max_min(view.links, left, pos[gidx], weight=rem)
        return rates + fill


class Eiff:
    """Earliest ideal finish first across all EchelonFlows (module docstring).

    A flow policy: strict priority by each flow's ideal finish time (meta column
    ``ideal``), max-min among equal ones weighted by the remaining bytes.

    References
    ----------
    EchelonFlow (Pan et al., HotNets 2022), Sec. 3.2, Eq. 1 (the ideal finish times);
    a baseline of ours, not the paper's.
    """

    def __call__(self, view: View) -> np.ndarray:
        if len(view.active) == 0:
            return np.zeros(0)
        ideal = _meta(view, "ideal").astype(float)
        _, klass = np.unique(ideal, return_inverse=True)
        return priority_max_min(view.links, view.net.capacity, klass.reshape(-1),
                                weight=view.remaining)


#: Every flow scheduler by name, a factory of a fresh policy per run: the one registry that
#: the simulator, the cluster evaluation, the optimality gaps, the FB2010 replay and the live
#: controller read. The Coflow schedulers of :mod:`commsched.echelon.coflow` (``fair``,
#: ``fair-ports``, ``fifo``, ``sebf`` = Varys' SEBF + MADD + back-fill, alias ``varys``), then
#: the EchelonFlow ones: Property 4's readings ``echelon-<intra>-<rank>`` and EIFF.
FLOW_SCHEDULERS: Registry[Callable[[], Policy]] = Registry("flow scheduler")
for _name, _make in COFLOW_SCHEDULERS.items():
    FLOW_SCHEDULERS.add(_name, _make, aliases=("varys",) if _name == "sebf" else ())
for _intra in INTRA:
    for _rank in RANKS:
        FLOW_SCHEDULERS.add(f"echelon-{_intra}-{_rank}", partial(EchelonScheduler, _intra, _rank))
FLOW_SCHEDULERS.add("eiff", Eiff)
#: The EchelonFlow schedulers' names (every member that is not a Coflow scheduler).
ECHELON_SCHEDULERS = tuple(n for n in FLOW_SCHEDULERS if n not in COFLOW_SCHEDULERS)
