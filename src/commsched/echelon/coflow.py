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
``fair`` -- per-flow max-min fair sharing (what TCP approximates; Coflows ignored).
``fair-ports`` -- per-flow fairness as Varys' simulator approximates it: each flow takes the
    smaller of its equal shares at its links; capacity a flow cannot use is not
    redistributed (:func:`commsched.sim.flow.port_share`).

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

from commsched.errors import CommschedError
from commsched.io.coflow import MB, CoflowTrace
from commsched.sim.flow import (
    REL_TOL,
    Policy,
    View,
    big_switch,
    max_min,
    port_share,
    priority_max_min,
    simulate,
)

__all__ = ["COFLOW_SCHEDULERS", "GBPS", "CoflowOrder", "bottleneck", "madd", "replay"]

#: 1 Gbit/s in bytes/s: the port rate of the replay by default (Varys' simulator's).
GBPS = 1e9 / 8


def _groups(view: View) -> tuple[np.ndarray, np.ndarray]:
    col = view.sim.meta.get("group")
    if col is None:
        raise CommschedError("Coflow scheduling needs the flow meta column 'group' "
                             "(the Coflow id of each flow)")
    gids, gidx = np.unique(col[view.active].astype(np.int64), return_inverse=True)
    return gids, gidx.reshape(-1)


def _link_bytes(links: np.ndarray, rem: np.ndarray, gidx: np.ndarray, ngroups: int,
                nlinks: int) -> np.ndarray:
    """``(groups, links)`` remaining bytes of each group on each link."""
    rows, hop = np.nonzero(links >= 0)
    out = np.zeros(ngroups * nlinks)
    np.add.at(out, gidx[rows] * nlinks + links[rows, hop], rem[rows])
    return out.reshape(ngroups, nlinks)


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
    bottleneck first) or ``fifo`` (``order="fifo"``, arrival order). Module docstring."""

    def __init__(self, order: str) -> None:
        if order not in ("sebf", "fifo"):
            raise CommschedError(f"Coflow order must be sebf or fifo, not {order!r}")
        self.order = order

    def __call__(self, view: View) -> np.ndarray:
        n = len(view.active)
        if n == 0:
            return np.zeros(0)
        gids, gidx = _groups(view)
        cap = view.net.capacity.astype(float)
        rem = view.remaining
        b = _link_bytes(view.links, rem, gidx, len(gids), len(cap))
        if self.order == "sebf":
            key = np.max(b / cap[None, :], axis=1)
        else:
            key = np.full(len(gids), np.inf)
            np.minimum.at(key, gidx, view.sim.release[view.active])
        # ties by Coflow id up to float noise (a remaining byte count carries the rounding
        # of every earlier step, ~1e-16 of the current time): the order, and so the
        # schedule, does not change when every release is shifted by the same time
        tick = 1e-9 * max(1.0, abs(view.now))
        order = np.lexsort((gids, np.round(key / tick)))
        pos = np.empty(len(gids), dtype=np.int64)
        pos[order] = np.arange(len(gids))
        # MADD in rank order on what the Coflows before left: Coflow k's flows get
        # rem / gamma_k with gamma_k = max_l b[k, l] / left_l, so it loads link l with
        # b[k, l] / gamma_k <= left_l (equality on its bottleneck).
        gamma = np.full(len(gids), np.inf)
        left = cap.copy()
        tol = REL_TOL * float(np.max(cap, initial=1.0))
        for k in order:
            need = b[k] > 0
            if not need.any() or np.any(left[need] <= tol):
                continue  # a link it needs is saturated: it waits (back-fill aside)
            g = float(np.max(b[k, need] / left[need]))
            gamma[k] = g
            left[need] = np.maximum(left[need] - b[k, need] / g, 0.0)
        rates = rem / gamma[gidx]
        return rates + priority_max_min(view.links, left, pos[gidx], weight=rem)


def _fair() -> Policy:
    return lambda v: max_min(v.links, v.net.capacity)


def _fair_ports() -> Policy:
    return lambda v: port_share(v.links, v.net.capacity)


#: Coflow schedulers by name: a factory of a fresh policy per simulation.
COFLOW_SCHEDULERS: dict[str, Callable[[], Policy]] = {
    "fair": _fair,
    "fair-ports": _fair_ports,
    "fifo": lambda: CoflowOrder("fifo"),
    "sebf": lambda: CoflowOrder("sebf"),
}


def replay(trace: CoflowTrace, scheduler: str, port_rate: float = GBPS,
           mb: float = MB) -> pd.DataFrame:
    """Replay a Coflow trace on a big switch of ``trace.ports`` ports of ``port_rate``
    bytes/s under ``scheduler`` (a name in :data:`COFLOW_SCHEDULERS`); one row per Coflow:
    ``id``, ``arrival`` and ``finish`` (s), ``cct`` (s), ``total_mb``, ``width`` (flows) and
    ``longest_mb`` (the Coflow's largest flow).

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
    f = trace.flows(mb)
    res = simulate(big_switch(trace.ports, port_rate), f["src"], f["dst"], f["size"],
                   f["release"], policy=COFLOW_SCHEDULERS[scheduler](), group=f["coflow"])
    finish = np.full(len(trace), -np.inf)
    np.maximum.at(finish, f["coflow"], res.finish)
    arrival = trace.arrival_ms / 1000.0
    return pd.DataFrame({"id": trace.ids, "arrival": arrival, "finish": finish,
                         "cct": finish - arrival, "total_mb": trace.total_mb(),
                         "width": np.bincount(f["coflow"], minlength=len(trace)),
                         "longest_mb": [float(v.max()) / len(m) for m, v
                                        in zip(trace.mappers, trace.reducer_mb, strict=True)]})
