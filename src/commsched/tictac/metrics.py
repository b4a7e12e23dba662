"""Makespan bounds, ordering efficiency and speedup of TicTac SysML Sec. 3.2 (Eqs. 1-4).

TicTac (Hashemi, Jyothi & Campbell, SysML 2019), Sec. 3.2 "Scheduling Efficiency Metric"
(Sec. 3.1 "Ordering Efficiency Metric" in the arXiv version, same equation numbers).
For an op graph ``G`` whose ops run on resources ``D`` (a channel per parameter server, a
compute unit) with times ``Time``:

* Eq. (1), upper bound ``U = sum_op Time(op)``: no overlap at all, every op runs alone.
  This is the *theoretical worst* makespan: a work-conserving executor (ours: an idle
  resource never waits while it has a ready op) always has some op running, so no order
  is slower.
* Eq. (2), lower bound ``L = max_d sum_{op on d} Time(op)``: perfect overlap, the
  busiest resource never idles. This is the *theoretical best* makespan. For a resource
  of capacity ``c > 1`` (not used in the paper) its load is divided by ``c``.
* Eq. (3), ordering efficiency ``E = (U - m) / (U - L)`` of a schedule with makespan
  ``m``: 1 at the lower bound, 0 at the upper bound. When ``U == L`` every schedule is
  optimal and we return 1.
* Eq. (4), speedup ``S = (U - L) / L``: the largest relative speedup that overlapping
  communication with computation can bring over no overlap (``U / L - 1``). It is 0
  when ``L == 0`` (an empty graph or zero times).

The authors' analysis code (``utils.py``, class ``Efficiency``, of their public
experiment repository) computes the same four quantities from a measured timeline, with
the busy time of the communication and of the computation in place of our per-resource
sums; it reports ``E = -1`` in the degenerate case ``U == L`` where we return 1.

Examples
--------
>>> from commsched.model.graph import new_graph, add_op
>>> g = new_graph({"net": 1, "cpu": 1})
>>> add_op(g, "r", "recv", "net", 2.0); add_op(g, "c", "compute", "cpu", 1.0)
>>> add_op(g, "r2", "recv", "net", 1.0); g.add_edge("r", "c")
>>> makespan_upper_bound(g), makespan_lower_bound(g), speedup(g)
(4.0, 3.0, 0.3333333333333333)
>>> efficiency(g, 3.0), efficiency(g, 4.0)
(1.0, 0.0)
"""

from __future__ import annotations

import math

import networkx as nx

from commsched.errors import CommschedError
from commsched.sim.priority import Schedule

__all__ = [
    "efficiency",
    "makespan_lower_bound",
    "makespan_upper_bound",
    "overlap_metrics",
    "speedup",
]


def makespan_upper_bound(g: nx.DiGraph) -> float:
    """Eq. (1) of TicTac Sec. 3.2: the sum of all op times (the theoretical worst).

    Parameters
    ----------
    g : networkx.DiGraph
        An op graph (each op's ``duration`` counts).

    Returns
    -------
    float
        ``U``: no op overlaps another.

    References
    ----------
    .. [1] Hashemi, Jyothi & Campbell, "TicTac", SysML 2019, Sec. 3.2, Eq. 1.
    """
    return math.fsum(float(a["duration"]) for _, a in g.nodes(data=True))


def makespan_lower_bound(g: nx.DiGraph) -> float:
    """Eq. (2) of TicTac Sec. 3.2: the largest resource load (the theoretical best).

    Parameters
    ----------
    g : networkx.DiGraph
        An op graph (ops' ``resource`` and ``duration``; the capacities of the graph's
        ``resources``).

    Returns
    -------
    float
        ``L``: the largest over resources of the sum of the times of their ops divided
        by their capacity; 0 for an empty graph.

    References
    ----------
    .. [1] Hashemi, Jyothi & Campbell, "TicTac", SysML 2019, Sec. 3.2, Eq. 2.
    """
    load: dict[str, list[float]] = {}
    for _, a in g.nodes(data=True):
        load.setdefault(a["resource"], []).append(float(a["duration"]))
    caps = g.graph["resources"]
    return max((math.fsum(v) / caps[r] for r, v in load.items()), default=0.0)


def _makespan(m: float | Schedule) -> float:
    return float(m.makespan if isinstance(m, Schedule) else m)


def efficiency(g: nx.DiGraph, makespan: float | Schedule) -> float:
    """Eq. (3) of TicTac Sec. 3.2: ``E = (U - m) / (U - L)`` for makespan ``m``.

    Parameters
    ----------
    g : networkx.DiGraph
        The op graph the schedule ran.
    makespan : float or Schedule
        The makespan ``m``, or a :class:`~commsched.sim.Schedule` of ``g``.

    Returns
    -------
    float
        In [0, 1] for every makespan between the bounds; 1 when ``U == L``.

    Raises
    ------
    CommschedError
        If ``m`` lies outside ``[L, U]`` by more than rounding: it cannot be a schedule
        of ``g``.

    References
    ----------
    .. [1] Hashemi, Jyothi & Campbell, "TicTac", SysML 2019, Sec. 3.2, Eq. 3.
    """
    m = _makespan(makespan)
    upper, lower = makespan_upper_bound(g), makespan_lower_bound(g)
    tol = 1e-9 * max(1.0, upper)
    if not (lower - tol <= m <= upper + tol):
        raise CommschedError(
            f"makespan {m!r} lies outside the bounds [{lower!r}, {upper!r}] of the graph "
            "(Eqs. 1-2)"
        )
    if upper - lower <= tol:
        return 1.0
    return min(1.0, max(0.0, (upper - m) / (upper - lower)))


def speedup(g: nx.DiGraph) -> float:
    """Eq. (4) of TicTac Sec. 3.2: ``S = (U - L) / L``, the most overlap can gain.

    Parameters
    ----------
    g : networkx.DiGraph
        The op graph whose bounds ``U`` and ``L`` are compared.

    Returns
    -------
    float
        ``S``; 0 when ``L == 0``.

    References
    ----------
    .. [1] Hashemi, Jyothi & Campbell, "TicTac", SysML 2019, Sec. 3.2, Eq. 4.
    """
    upper, lower = makespan_upper_bound(g), makespan_lower_bound(g)
    return 0.0 if lower <= 0 else (upper - lower) / lower


def overlap_metrics(g: nx.DiGraph, makespan: float | Schedule) -> dict[str, float]:
    """All of Sec. 3.2 at once.

    Parameters
    ----------
    g : networkx.DiGraph
        The op graph the schedule ran.
    makespan : float or Schedule
        Its makespan, or the schedule.

    Returns
    -------
    dict of str to float
        ``upper_bound``, ``lower_bound``, ``efficiency`` and ``speedup``.

    Raises
    ------
    CommschedError
        As :func:`efficiency`.

    References
    ----------
    .. [1] Hashemi, Jyothi & Campbell, "TicTac", SysML 2019, Sec. 3.2, Eqs. 1-4.
    """
    return {
        "upper_bound": makespan_upper_bound(g),
        "lower_bound": makespan_lower_bound(g),
        "efficiency": efficiency(g, makespan),
        "speedup": speedup(g),
    }
