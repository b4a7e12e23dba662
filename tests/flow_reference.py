"""A deliberately simple reference of the fluid flow simulator and the Coflow schedulers.

The equality tests (``tests/test_flow_equality.py``) check the compiled simulator
(:mod:`commsched.sim.flow`, :mod:`commsched.echelon.coflow`) against this file: plain Python
loops over flows and links, no numpy, no incremental state, every rate recomputed from
scratch at every event. It follows the documented semantics, not the implementation:

* fluid model: between two events (a release or a completion) rates are constant; a flow
  completes when its time to finish is within ``REL_TOL`` of the step or its remaining
  bytes fall to ``REL_TOL`` of its size;
* ``fair``: max-min water-filling; a round raises every unfrozen flow by the smallest
  leftover/(flows) over the links, links whose leftover falls to ``REL_TOL`` of what they
  had at the start saturate (the tightest one when float noise leaves none), and the flows
  on saturated links freeze;
* ``fair-ports``: each flow the smallest ``capacity / flows`` over its links;
* ``sebf`` / ``fifo``: Coflows ranked by their bottleneck time (remaining bytes on a link
  over its capacity, largest over links) or by their earliest release, rounded to 1e-9 of
  the current time, ties by Coflow id; MADD in that order on what the Coflows before
  left; then back-fill: each Coflow in the same order water-fills (weights: remaining
  bytes) what is left.
"""

from __future__ import annotations

import math

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


def fair(links, rem, group, release, cap, now):
    return water_fill(links, cap, [1.0] * len(links))


def fair_ports(links, rem, group, release, cap, now):
    count: dict[int, int] = {}
    for ls in links:
        for lk in ls:
            count[lk] = count.get(lk, 0) + 1
    return [min(cap[lk] / count[lk] for lk in ls) for ls in links]


def coflow_order(fifo: bool):
    def policy(links, rem, group, release, cap, now):
        coflows = sorted(set(group))
        nbytes = {g: [0.0] * len(cap) for g in coflows}
        first = {g: math.inf for g in coflows}
        for ls, r, g, t in zip(links, rem, group, release, strict=True):
            first[g] = min(first[g], t)
            for lk in ls:
                nbytes[g][lk] += r
        tick = 1e-9 * max(1.0, abs(now))

        def key(g):
            k = first[g] if fifo else max(b / c for b, c in zip(nbytes[g], cap, strict=True))
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
        rate = [r / gamma[g] for r, g in zip(rem, group, strict=True)]
        start = list(left)
        for g in ranked:  # back-fill
            if not any(left[lk] > REL_TOL * start[lk] for lk in range(len(cap))):
                break
            mine = [i for i, h in enumerate(group) if h == g]
            fill = water_fill([links[i] for i in mine], [max(x, 0.0) for x in left],
                              [rem[i] for i in mine])
            for i, f in zip(mine, fill, strict=True):
                rate[i] += f
                for lk in links[i]:
                    left[lk] -= f
        return rate
    return policy


POLICIES = {"fair": fair, "fair-ports": fair_ports, "sebf": coflow_order(False),
            "fifo": coflow_order(True)}


def simulate(routes, capacity, src, dst, size, release, group, scheduler):
    """Finish time of every flow; ``routes[s][d]`` lists the links a flow s->d crosses."""
    n = len(size)
    cap = [float(c) for c in capacity]
    pending = sorted(range(n), key=lambda i: (release[i], i))
    active: list[int] = []
    rem = [float(s) for s in size]
    finish = [math.nan] * n
    now = 0.0
    policy = POLICIES[scheduler]
    while pending or active:
        while pending and release[pending[0]] <= now:
            active.append(pending.pop(0))
        t_next = release[pending[0]] if pending else math.inf
        rate = policy([[lk for lk in routes[src[i]][dst[i]] if lk >= 0] for i in active],
                      [rem[i] for i in active], [group[i] for i in active],
                      [release[i] for i in active], cap, now) if active else []
        ttf = [rem[i] / r if r > 0 else math.inf for i, r in zip(active, rate, strict=True)]
        t_end = min(now + min(ttf, default=math.inf), t_next)
        dt = t_end - now
        still = []
        for i, r, t in zip(active, rate, ttf, strict=True):
            rem[i] -= r * dt
            if t <= dt * (1 + REL_TOL) or rem[i] <= REL_TOL * size[i]:
                finish[i] = t_end
            else:
                still.append(i)
        active = still
        now = t_end
    return finish
