"""The exact fast path of one iteration: channels, then each worker, then the uplinks.

:func:`commsched.tictac.sim.iteration` uses :func:`decomposed_schedule` instead of the
general event loop when the composed graph allows it (:func:`~commsched.tictac.sim.compose.
make_plan`); the two give the same schedule (tested on random graphs).
"""

from __future__ import annotations

import heapq

import numpy as np

from commsched.tictac.sim.compose import MultiWorker, Plan

__all__ = ["decomposed_schedule"]


def decomposed_schedule(
    mw: MultiWorker, plan: Plan, prio: np.ndarray, d: np.ndarray
) -> tuple[list[float], list[float]]:
    """Start and end times of every op of one iteration, equal to the executor's.

    With recvs that depend on nothing, sends that nothing depends on and channels that
    carry only one of the two, an iteration decomposes exactly (tested against the
    reference, :func:`commsched.sim.priority.simulate_compiled`): (1) every downlink sends
    its recvs back to back from time 0 in priority order (ties: composite op order, the
    executor's fifo order at time 0); (2) each worker's compute unit then runs list
    scheduling on its own, an op being ready when its last predecessor ends, fifo by
    (ready time, the finishing predecessor's position, the op's place among that
    predecessor's successors) -- the order in which the executor's event loop makes ops
    ready; (3) every uplink serves its sends in the same fifo order.

    Parameters
    ----------
    mw : MultiWorker
        The composed cluster.
    plan : Plan
        ``mw.plan`` (not None).
    prio : numpy.ndarray
        ``(n_workers, n_recvs)`` recv priorities, lower first.
    d : numpy.ndarray
        Every op's duration in composed-graph order, all > 0 (zero-time ops start and end
        within one event time, which the executor processes in extra rounds;
        :func:`commsched.tictac.sim.iteration` falls back to the executor then).

    Returns
    -------
    start, end : list of float
        Per op, in composed-graph order.
    """
    n = mw.cg.n
    per = mw.ops_per_worker
    dl = d.tolist()
    start = [0.0] * n
    end = [0.0] * n
    pr = np.zeros(n)
    pr[mw.recv_index.ravel()] = prio.ravel()
    for idx in plan.recv_channels:
        order = idx[np.lexsort((idx, pr[idx]))]
        e = np.cumsum(d[order])
        s = np.concatenate(([0.0], e[:-1]))
        for i, a, b in zip(order.tolist(), s.tolist(), e.tolist(), strict=True):
            start[i] = a
            end[i] = b
    pred_pos, succ, rpp = plan.pred_pos, plan.compute_succ, plan.recv_pred_pos
    heappush, heappop = heapq.heappush, heapq.heappop
    for w in range(mw.n_workers):
        off = w * per
        indeg = list(plan.compute_indeg)
        heap: list[tuple[float, int, int, int]] = []
        for v in plan.compute:
            if indeg[v] == 0:  # ready at 0 or when its last recv ends
                bt, bp, bk = 0.0, -1, v
                for r, k in rpp[v]:
                    t = end[off + r]
                    if t > bt or (t == bt and r > bp):
                        bt, bp, bk = t, r, k
                heappush(heap, (bt, bp, bk, v))
        free = 0.0
        while heap:
            ready, _, _, v = heappop(heap)
            s0 = free if free > ready else ready
            free = s0 + dl[off + v]
            start[off + v] = s0
            end[off + v] = free
            for c, kc in succ[v]:
                indeg[c] -= 1
                if indeg[c] == 0:
                    # v ended last among c's compute predecessors (one compute unit, every
                    # duration > 0); a recv may still end later.
                    bt, bp, bk = free, v, kc
                    for r, k in rpp[c]:
                        t = end[off + r]
                        if t > bt or (t == bt and r > bp):
                            bt, bp, bk = t, r, k
                    heappush(heap, (bt, bp, bk, c))
    for idx in plan.send_channels:
        keys = []
        for i in idx.tolist():
            w, v = divmod(i, per)
            off = w * per
            best = (0.0, -1, i)
            for p, k in pred_pos[v]:
                cand = (end[off + p], off + p, k)
                if cand[:2] > best[:2]:
                    best = cand
            keys.append((best[0], best[1], best[2], i))
        keys.sort()
        free = 0.0
        for ready, _, _, i in keys:
            s0 = free if free > ready else ready
            free = s0 + dl[i]
            start[i] = s0
            end[i] = free
    return start, end
