"""A deliberately simple reference of the fluid flow simulator and the flow schedulers.

The equality tests (``tests/test_flow_equality.py``) check the compiled simulator
(:mod:`commsched.sim.flow`, :mod:`commsched.echelon.coflow`) against this file: plain Python
loops over flows and links, no numpy, no incremental state, every rate recomputed from
scratch at every event. It follows the documented semantics, not the implementation:

* fluid model: between two events (a release or a completion) rates are constant; a flow
  completes when its finish time (the current time plus its time to finish, an absolute
  time as the step's end is) is at most the step's end plus ``REL_TOL`` of the step, or
  its remaining bytes fall to ``REL_TOL`` of its size;
* ``fair``: max-min water-filling; a round raises every unfrozen flow by the smallest
  leftover/(flows) over the links, links whose leftover falls to ``REL_TOL`` of what they
  had at the start saturate (the tightest one when float noise leaves none), and the flows
  on saturated links freeze;
* ``fair-ports``: each flow the smallest ``capacity / flows`` over its links;
* ``sebf`` / ``fifo`` / ``sebf-static``: Coflows ranked by their bottleneck time
  (remaining bytes on a link over its capacity, largest over links), by their earliest
  release, or by the bottleneck time of their full sizes when first seen, rounded to 1e-9
  of the current time, ties by Coflow id; MADD in that order on what the Coflows before
  left; then back-fill: strict priority in the same order, each Coflow water-filled
  (weights: remaining bytes) on what is left;
* every other scheduler of ``FLOW_SCHEDULERS`` (EchelonFlow's, ``eiff``): the package's
  own policy, called on a :class:`~commsched.sim.flow.View` of this loop's state, with its
  compiled strict-priority water-filling (``priority_max_min``) replaced by
  :func:`priority_fill` here; so the event loop and the kernels are checked, the
  EchelonFlow rankings and pacing are the package's.
"""

from __future__ import annotations

import math
from types import SimpleNamespace
from unittest import mock

import numpy as np

from commsched.echelon import schedulers
from commsched.sim.flow import Network, View

REL_TOL = 1e-9


def water_fill(links: list[list[int]], cap: list[float], w: list[float]) -> list[float]:
    """Weighted max-min rates of flows crossing ``links`` (lists of link ids)."""
    left = list(cap)
    rate = [0.0] * len(links)
    frozen = [w[i] <= 0 or not links[i] for i in range(len(links))]
    level = 0.0
    while not all(frozen):
        wsum: dict[int, float] = {}
        for i, ls in enumerate(links):
            if not frozen[i]:
                for lk in ls:
                    wsum[lk] = wsum.get(lk, 0.0) + w[i]
        share = {lk: left[lk] / s for lk, s in wsum.items()}
        tight = min(share, key=lambda lk: (share[lk], lk))
        step = max(share[tight], 0.0)
        level += step
        for lk, s in wsum.items():
            left[lk] -= s * step
        full = {lk for lk in wsum if left[lk] <= REL_TOL * cap[lk]} or {tight}
        for i, ls in enumerate(links):
            if not frozen[i] and any(lk in full for lk in ls):
                frozen[i] = True
                rate[i] = w[i] * level
    return rate


def priority_fill(links: list[list[int]], klass: list[float], cap: list[float],
                  w: list[float]) -> list[float]:
    """Strict priority: classes in increasing ``klass``, each water-filled (weights ``w``)
    on what the classes before it left; once no link has more than ``REL_TOL`` of ``cap``
    left, the remaining classes get 0."""
    rate = [0.0] * len(links)
    left = list(cap)
    for c in sorted(set(klass)):
        if not any(x > REL_TOL * c0 for x, c0 in zip(left, cap, strict=True)):
            break
        mine = [i for i, k in enumerate(klass) if k == c]
        fill = water_fill([links[i] for i in mine], [max(x, 0.0) for x in left],
                          [w[i] for i in mine])
        for i, f in zip(mine, fill, strict=True):
            rate[i] = f
            for lk in links[i]:
                left[lk] -= f
    return rate


def priority_max_min(links, capacity, klass, weight=None):
    """:func:`priority_fill` with the signature of ``commsched.sim.flow.priority_max_min``."""
    ls = [[int(lk) for lk in row if lk >= 0] for row in np.asarray(links).tolist()]
    w = [1.0] * len(ls) if weight is None else [float(x) for x in weight]
    return np.array(priority_fill(ls, [float(k) for k in klass],
                                  [float(c) for c in capacity], w))


def fair(flows, cap, now):
    return water_fill(flows.links, cap, [1.0] * len(flows.links))


def fair_ports(flows, cap, now):
    count: dict[int, int] = {}
    for ls in flows.links:
        for lk in ls:
            count[lk] = count.get(lk, 0) + 1
    return [min(cap[lk] / count[lk] for lk in ls) for ls in flows.links]


def coflow_order(order: str):
    """A fresh ``sebf`` / ``fifo`` / ``sebf-static`` policy (``sebf-static`` remembers each
    Coflow's key from the first call that sees it)."""
    static: dict[int, float] = {}

    def policy(flows, cap, now):
        coflows = sorted(set(flows.group))
        nbytes = {g: [0.0] * len(cap) for g in coflows}
        full = {g: [0.0] * len(cap) for g in coflows}
        first = {g: math.inf for g in coflows}
        for ls, r, s, g, t in zip(flows.links, flows.rem, flows.size, flows.group,
                                  flows.release, strict=True):
            first[g] = min(first[g], t)
            for lk in ls:
                nbytes[g][lk] += r
                full[g][lk] += s
        for g in coflows:
            if g not in static:
                static[g] = max(b / c for b, c in zip(full[g], cap, strict=True))
        tick = 1e-9 * max(1.0, abs(now))

        def key(g):
            if order == "fifo":
                k = first[g]
            elif order == "sebf-static":
                k = static[g]
            else:
                k = max(b / c for b, c in zip(nbytes[g], cap, strict=True))
            return (round(k / tick), g)

        ranked = sorted(coflows, key=key)
        left = list(cap)
        tol = REL_TOL * max([1.0, *cap])
        gamma = {g: math.inf for g in coflows}
        for g in ranked:  # MADD
            need = [lk for lk, b in enumerate(nbytes[g]) if b > 0]
            if not need or any(left[lk] <= tol for lk in need):
                continue
            gamma[g] = max(nbytes[g][lk] / left[lk] for lk in need)
            for lk in need:
                left[lk] = max(left[lk] - nbytes[g][lk] / gamma[g], 0.0)
        pos = {g: p for p, g in enumerate(ranked)}
        fill = priority_fill(flows.links, [pos[g] for g in flows.group], left, flows.rem)
        return [r / gamma[g] + f
                for r, g, f in zip(flows.rem, flows.group, fill, strict=True)]
    return policy


REFERENCE_POLICIES = {"fair": lambda: fair, "fair-ports": lambda: fair_ports,
                      "sebf": lambda: coflow_order("sebf"), "fifo": lambda: coflow_order("fifo"),
                      "sebf-static": lambda: coflow_order("sebf-static")}


def package_policy(name: str, net: Network, meta: dict[str, list[float]], finish: list[float],
                   rem: list[float], size: list[float], release: list[float]):
    """The package's policy ``name`` on a :class:`View` of this loop's state (the lists are
    the loop's own, read at each call), its strict-priority kernel replaced."""
    policy = schedulers.FLOW_SCHEDULERS[name]()
    hops = net.routes.shape[2]

    def call(flows, cap, now):
        state = SimpleNamespace(meta={k: np.array(v) for k, v in meta.items()},
                                finish=np.array(finish), remaining=np.array(rem),
                                size=np.array(size), release=np.array(release))
        links = np.array([ls + [-1] * (hops - len(ls)) for ls in flows.links],
                         dtype=np.int64).reshape(len(flows.links), hops)
        view = View(now, np.array(flows.ids, dtype=np.int64), links, net, state)
        with mock.patch.object(schedulers, "priority_max_min", priority_max_min):
            return [float(r) for r in policy(view)]
    return call


def simulate(net: Network, src, dst, size, release, scheduler, **meta):
    """Finish time of every flow; ``net.routes[s][d]`` lists the links a flow s->d
    crosses; ``meta`` columns (``group``, ``ideal``) as the package's simulator takes."""
    n = len(size)
    routes = net.routes.tolist()
    cap = [float(c) for c in net.capacity]
    pending = sorted(range(n), key=lambda i: (release[i], i))
    active: list[int] = []
    rem = [float(s) for s in size]
    finish = [math.nan] * n
    group = list(meta.get("group", [0] * n))
    now = 0.0
    if scheduler in REFERENCE_POLICIES:
        policy = REFERENCE_POLICIES[scheduler]()
    else:
        policy = package_policy(scheduler, net, {k: list(v) for k, v in meta.items()}, finish,
                                rem, list(size), list(release))
    while pending or active:
        while pending and release[pending[0]] <= now:
            active.append(pending.pop(0))
        t_next = release[pending[0]] if pending else math.inf
        flows = SimpleNamespace(ids=active,
                                links=[[lk for lk in routes[src[i]][dst[i]] if lk >= 0]
                                       for i in active],
                                rem=[rem[i] for i in active], size=[size[i] for i in active],
                                group=[group[i] for i in active],
                                release=[release[i] for i in active])
        rate = policy(flows, cap, now) if active else []
        ttf = [rem[i] / r if r > 0 else math.inf for i, r in zip(active, rate, strict=True)]
        t_end = min(now + min(ttf, default=math.inf), t_next)
        if t_end == math.inf:
            raise RuntimeError(f"stalled at t={now}: active flows get no rate")
        dt = t_end - now
        still = []
        for i, r, t in zip(active, rate, ttf, strict=True):
            rem[i] -= r * dt
            if now + t <= t_end + REL_TOL * dt or rem[i] <= REL_TOL * size[i]:
                finish[i] = t_end
                rem[i] = 0.0
            else:
                still.append(i)
        active = still
        now = t_end
    return finish
