"""Optimal placement and order of tiny graphs by exhaustive search (test oracle).

For every feasible placement (all ``|D|^n`` maps, kept when they meet Sec. 4.1) the send
and receive nodes are inserted as usual and every topological order of the executed graph
is tried as a list schedule: nodes are started in that order, each as early as its inputs
and its device allow (a device runs its nodes in the order of the list). Every
combination of per-device orders arises from some topological order, and for fixed
per-device orders starting each node as early as possible is optimal, so the minimum over
all orders is the optimal makespan of the placement (idling allowed, non-preemptive).
Branch and bound prunes partial orders that cannot beat the best one.
Only for graphs of a handful of nodes.

Examples
--------
>>> import numpy as np
>>> from commsched.placement.model import Cluster, Problem
>>> p = Problem.build(ops=[10, 10], size=[100, 1], edges=[(0, 1)])
>>> c = Cluster(np.array([10.0, 10.0]), np.array([1e6, 1e6]), np.array([0, 0]),
...             np.array([[np.inf, 1.0], [1.0, np.inf]]))
>>> best = optimum(p, c)
>>> best.makespan, best.placement.tolist()
(2.0, [0, 0])
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from commsched.placement.model import Cluster, PlacementError, Problem, check_placement
from commsched.placement.sendrecv import DEFAULT_SEND_OPS, insert_send_recv
from commsched.sim.devices import ExecGraph

__all__ = ["Optimum", "best_order_makespan", "optimum"]


@dataclass
class Optimum:
    """The best makespan, a placement and a topological order reaching it.

    References
    ----------
    Laich 2017, Sec. 2.3 (the problem: minimise the makespan).
    """

    makespan: float
    placement: np.ndarray
    order: list[int]


def best_order_makespan(eg: ExecGraph, bound: float = np.inf) -> tuple[float, list[int]]:
    """The least makespan over all orders of ``eg`` below ``bound`` (else ``(inf, [])``).

    Parameters
    ----------
    eg : ExecGraph
        An executed graph.
    bound : float
        Orders that cannot beat it are cut.

    Returns
    -------
    float
        The least makespan (``inf`` when none is below ``bound``).
    list of int
        An order reaching it.

    References
    ----------
    Laich 2017, Sec. 5.1 (the scheduling problem).
    """
    n = eg.n
    sp, si, sd = eg.succ_ptr, eg.succ_idx, eg.succ_delay
    missing = [eg.pred_ptr[i + 1] - eg.pred_ptr[i] for i in range(n)]
    ready_at = [0.0] * n
    dev_free = [0.0] * eg.n_devices
    best_span = bound
    best_order: list[int] = []
    order: list[int] = []

    def rec(span: float) -> None:
        nonlocal best_span, best_order
        if span >= best_span:
            return
        if len(order) == n:
            best_span, best_order = span, list(order)
            return
        for x in range(n):
            if missing[x] != 0:
                continue
            d = eg.device[x]
            t = max(ready_at[x], dev_free[d])
            f = t + eg.duration[x]
            saved_free = dev_free[d]
            saved = [(si[k], ready_at[si[k]]) for k in range(sp[x], sp[x + 1])]
            dev_free[d] = f
            missing[x] = -1
            for k in range(sp[x], sp[x + 1]):
                j = si[k]
                missing[j] -= 1
                ready_at[j] = max(ready_at[j], f + sd[k])
            order.append(x)
            rec(max(span, f))
            order.pop()
            for k in range(sp[x], sp[x + 1]):
                missing[si[k]] += 1
            for j, r in saved:
                ready_at[j] = r
            missing[x] = 0
            dev_free[d] = saved_free

    rec(0.0)
    return float(best_span), best_order


def optimum(p: Problem, c: Cluster, send_ops: float = DEFAULT_SEND_OPS) -> Optimum:
    """The optimal placement and order of ``p`` on ``c`` (exhaustive; tiny graphs only).

    Parameters
    ----------
    p : Problem
        A tiny graph.
    c : Cluster
        Its devices.
    send_ops : float
        Operations of a send node.

    Returns
    -------
    Optimum

    References
    ----------
    Laich 2017, Secs. 2.3 and 4.1 (the problem and its constraints).
    """
    if c.n ** p.n > 100_000:
        raise ValueError(f"{c.n}^{p.n} placements is too many for brute force")
    best: Optimum | None = None
    for combo in itertools.product(range(c.n), repeat=p.n):
        placement = np.asarray(combo, dtype=np.int64)
        try:
            check_placement(p, c, placement)
        except PlacementError:
            continue
        eg = insert_send_recv(p, c, placement, send_ops)
        span, order = best_order_makespan(eg, best.makespan if best else np.inf)
        if order and (best is None or span < best.makespan):
            best = Optimum(span, placement, order)
    if best is None:
        raise PlacementError("no placement meets the constraints")
    return best
