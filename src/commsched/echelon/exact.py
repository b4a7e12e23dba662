"""Minimum weighted sum of EchelonFlow tardiness on small instances, and optimality gaps.

EchelonFlow scheduling is NP-hard (Pan et al., HotNets 2022, Property 3), so the exact
optimum is for small instances: it measures how far each heuristic of
:mod:`commsched.echelon.schedulers` (and any other flow policy) is from the best schedule.

The problem (fluid, preemptive). Flows with routes over links of given capacities (any
:class:`commsched.sim.flow.Network`; the big switch in our experiments), sizes, releases,
ideal finish times ``d_i`` and EchelonFlow ids; any rate schedule that respects the
capacities and releases. Minimise ``sum_g w_g t_g`` with ``t_g = max_{i in g} e_i - d_i``
(Eq. 4 weighted), ``e_i`` the finish time of flow ``i``.

:func:`solve_exact` -- an *event-position* MILP (HiGHS through PuLP). Sort the events of a
schedule (the ``m`` distinct release times and the ``n`` finish times) into positions
``1..m+n`` with times ``tau_1 <= ... <= tau_{m+n}``; binaries ``a[e, k]`` put event ``e``
at position ``k`` (a permutation; releases in their order, each pinned to its time by
big-M rows). Flow ``i`` sends ``x[i, k]`` bytes in ``(tau_{k-1}, tau_k]`` only if its
release sits before position ``k`` and its finish at or after it; every link carries at
most ``capacity * (tau_k - tau_{k-1})`` in that interval; every flow sends its size; and
``t_g >= tau_k - d_i`` where flow ``i`` finishes at ``k``. **Exactness.** Any schedule
defines such an event order, and the averages of its rates over the intervals between
consecutive events respect the capacities, so it is a solution of equal cost; conversely
a solution, run at constant rates within each interval, is a schedule in which flow ``i``
ends by its event time. So the MILP optimum is the optimum of the fluid problem on any
topology, with no time discretisation. The big-M constants come from a feasible schedule
(:func:`upper_bound`: the best of fair sharing and the EchelonFlow heuristics): no optimal
schedule ends a flow later than ``d_i + `` the largest tardiness that cost allows, given
the lower bound ``r_i + size_i / capacity - d_i`` of every other EchelonFlow. Solutions
are polished (the event order of the MILP's solution fixed, the LP solved again, so that
no big-M row is relaxed by the integrality tolerance) and returned as a recorded
:class:`commsched.sim.flow.FlowResult` that
:func:`commsched.sim.flow.check_flow_schedule` accepts.

:func:`brute_force_priorities` -- an independent check: every strict priority order of
the flows, each run in the flow simulator (:func:`commsched.sim.flow.priority_max_min`),
the best kept. Always an upper bound on the optimum; equal to it when all flows share
one bottleneck link: the optimal schedule's finish times, used as deadlines, are met by
earliest-deadline-first (Jackson / Horn), a static priority order. Up to 8 flows.

:func:`optimality_gaps` -- seeded random small instances (Coflows and GPipe-like
EchelonFlows on a big switch), every policy's objective beside the optimum.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pulp

from commsched.echelon.arrangement import coflow, gpipe
from commsched.echelon.model import EchelonFlow, FlowTable, flow_table, simulate_echelonflows
from commsched.echelon.schedulers import ECHELON_SCHEDULERS, FLOW_SCHEDULERS
from commsched.errors import CommschedError
from commsched.sim.flow import (
    FlowResult,
    Network,
    Policy,
    Segment,
    View,
    big_switch,
    priority_max_min,
)

__all__ = [
    "POLICIES",
    "ExactResult",
    "brute_force_priorities",
    "optimality_gaps",
    "random_instance",
    "solve_exact",
    "upper_bound",
]

#: Largest instance :func:`solve_exact` accepts (flows), and :func:`brute_force_priorities`.
MAX_EXACT_FLOWS = 12
MAX_BRUTE_FLOWS = 8


@dataclass(frozen=True, eq=False)
class ExactResult:
    """The optimum of :func:`solve_exact`.

    Parameters
    ----------
    objective : float
        The weighted sum of EchelonFlow tardiness (Eq. 4 weighted).
    finish : numpy.ndarray
        Per flow.
    tardiness : numpy.ndarray
        Per EchelonFlow (Eq. 2).
    result : FlowResult
        The schedule, recorded (for :func:`commsched.sim.flow.check_flow_schedule`).
    """

    objective: float
    finish: np.ndarray
    tardiness: np.ndarray
    result: FlowResult


#: The policies measured against the optimum by default: fair sharing, Varys (each
#: EchelonFlow as one Coflow) and the EchelonFlow schedulers, from the one registry
#: :data:`commsched.echelon.schedulers.FLOW_SCHEDULERS`.
POLICIES: dict[str, Callable[[], Policy]] = {
    n: FLOW_SCHEDULERS[n] for n in ("fair", "sebf", *ECHELON_SCHEDULERS)}


def _route_cap(net: Network, tab: FlowTable) -> np.ndarray:
    links = net.routes[tab.src, tab.dst]
    return np.where(links >= 0, net.capacity[np.where(links >= 0, links, 0)], np.inf).min(axis=1)


def upper_bound(net: Network, tab: FlowTable,
                policies: Mapping[str, Callable[[], Policy]] | None = None) -> float:
    """The best objective of ``policies`` (an upper bound on the optimum).

    Parameters
    ----------
    net : Network
    tab : FlowTable
    policies : mapping of str to policy factory, optional
        Default :data:`POLICIES` (fair sharing, Varys' ``sebf`` and the EchelonFlow
        schedulers).

    Returns
    -------
    float

    References
    ----------
    EchelonFlow (Pan et al., HotNets 2022), Sec. 3.2, Eq. 4.
    """
    pols = dict(policies) if policies else POLICIES
    return min(simulate_echelonflows(net, tab, f()).objective for f in pols.values())


def solve_exact(net: Network, echelonflows: list[EchelonFlow] | FlowTable,
                upper: float | None = None, time_limit: float = 60.0) -> ExactResult:
    """Minimum weighted sum of EchelonFlow tardiness (module docstring).

    Parameters
    ----------
    net : Network
        Any topology.
    echelonflows : list of EchelonFlow or FlowTable
        At most :data:`MAX_EXACT_FLOWS` flows.
    upper : float, optional
        The cost of a known schedule (default :func:`upper_bound`).
    time_limit : float
        Seconds (wall clock) per solve.

    Returns
    -------
    ExactResult

    Raises
    ------
    CommschedError
        If there are too many flows, or HiGHS does not prove the optimum within
        ``time_limit``.

    References
    ----------
    EchelonFlow (Pan et al., HotNets 2022), Sec. 3.2, Eqs. 2-4 (the objective; the paper gives no
    solver).
    """
    tab = echelonflows if isinstance(echelonflows, FlowTable) else flow_table(echelonflows)
    n = tab.n
    if n > MAX_EXACT_FLOWS:
        raise CommschedError(f"exact solver: {n} flows, at most {MAX_EXACT_FLOWS}")
    rho = np.unique(tab.release)
    m = len(rho)
    rel_of = np.searchsorted(rho, tab.release)
    G = tab.groups
    w = tab.weight
    lb_flow = tab.release + tab.size / _route_cap(net, tab) - tab.ideal
    lb = np.full(G, -np.inf)
    np.maximum.at(lb, tab.group, lb_flow)
    ub = upper_bound(net, tab) if upper is None else float(upper)
    tu = (ub - (np.sum(w * lb) - w * lb)) / w  # largest tardiness of g in an optimum
    horizon = float(max(rho[-1], np.max(tab.ideal + tu[tab.group])))
    horizon += 1e-6 * max(1.0, abs(horizon))
    t0 = float(rho[0])
    big = horizon - t0
    K = m + n
    # events: 0..m-1 the distinct releases (in order), m + i the finish of flow i
    lp = pulp.LpProblem("echelon_exact", pulp.LpMinimize)
    a = {(e, k): lp.add_variable(f"a_{e}_{k}", cat="Binary")
         for e in range(K) for k in range(K)}
    tau = [lp.add_variable(f"tau_{k}", lowBound=t0, upBound=horizon) for k in range(K)]
    x = {(i, k): lp.add_variable(f"x_{i}_{k}", lowBound=0, upBound=float(tab.size[i]))
         for i in range(n) for k in range(1, K)}
    t = [lp.add_variable(f"t_{g}", lowBound=float(lb[g])) for g in range(G)]
    lp += pulp.lpSum(float(w[g]) * t[g] for g in range(G))
    for e in range(K):
        lp += pulp.lpSum(a[e, k] for k in range(K)) == 1, f"one_pos_{e}"
    for k in range(K):
        lp += pulp.lpSum(a[e, k] for e in range(K)) == 1, f"one_event_{k}"
        if k:
            lp += tau[k] >= tau[k - 1], f"sorted_{k}"
    lp += a[0, 0] == 1, "first_release_first"

    def pos(e: int) -> pulp.LpAffineExpression:
        return pulp.lpSum(k * a[e, k] for k in range(K))

    for j in range(m):
        if j:
            lp += pos(j) >= pos(j - 1) + 1, f"release_order_{j}"
        for k in range(K):
            lp += tau[k] >= float(rho[j]) - big * (1 - a[j, k]), f"pin_lo_{j}_{k}"
            lp += tau[k] <= float(rho[j]) + big * (1 - a[j, k]), f"pin_hi_{j}_{k}"
    for i in range(n):
        ce, re = m + i, int(rel_of[i])
        lp += pos(ce) >= pos(re) + 1, f"finish_after_release_{i}"
        for k in range(1, K):
            lp += x[i, k] <= float(tab.size[i]) * pulp.lpSum(a[re, q] for q in range(k)), \
                f"released_{i}_{k}"
            lp += x[i, k] <= float(tab.size[i]) * pulp.lpSum(a[ce, q] for q in range(k, K)), \
                f"unfinished_{i}_{k}"
        lp += pulp.lpSum(x[i, k] for k in range(1, K)) == float(tab.size[i]), f"size_{i}"
        g = int(tab.group[i])
        slack = horizon - float(tab.ideal[i]) - float(lb[g])
        for k in range(K):
            lp += t[g] >= tau[k] - float(tab.ideal[i]) - slack * (1 - a[ce, k]), f"tard_{i}_{k}"
    links = net.routes[tab.src, tab.dst]
    for link in np.unique(links[links >= 0]).tolist():
        on = np.flatnonzero((links == link).any(axis=1)).tolist()
        for k in range(1, K):
            lp += pulp.lpSum(x[i, k] for i in on) <= float(net.capacity[link]) * (
                tau[k] - tau[k - 1]), f"cap_{link}_{k}"
    solver = pulp.HiGHS(msg=False, timeLimit=time_limit, gapRel=1e-9, gapAbs=1e-9)
    for stage in ("MILP", "LP with the MILP's event order"):
        status = pulp.LpStatus[lp.solve(solver)]
        # PuLP reports a solution cut short by the time limit as "Optimal" too; only
        # sol_status tells a proven optimum from a merely feasible one
        if status != "Optimal" or lp.sol_status != pulp.LpSolutionOptimal:
            found = pulp.LpSolution.get(lp.sol_status, lp.sol_status)
            raise CommschedError(f"exact solver: no proven optimum of the {stage} (status "
                                 f"{status!r}, {found.lower()}; time limit {time_limit:g} s, "
                                 f"{n} flows)")
        # polish: a binary within the integrality tolerance of 0 or 1 still relaxes a big-M
        # row by up to tolerance * M; fixing the event order and solving the LP removes it
        for v in a.values():
            v.lowBound = v.upBound = round(v.value() or 0.0)
    taus = np.array([v.value() or 0.0 for v in tau])
    amt = np.array([[0.0] + [x[i, k].value() or 0.0 for k in range(1, K)] for i in range(n)])
    amt[amt < 1e-9 * tab.size[:, None]] = 0.0
    segs = []
    finish = np.full(n, np.nan)
    for k in range(1, K):
        dt = taus[k] - taus[k - 1]
        ids = np.flatnonzero(amt[:, k] > 0)
        if dt <= 0 or not len(ids):
            continue
        segs.append(Segment(float(taus[k - 1]), float(taus[k]), ids, amt[ids, k] / dt))
        finish[ids] = taus[k]
    res = FlowResult(tab.release.copy(), finish, segs)
    tard = np.full(G, -np.inf)
    np.maximum.at(tard, tab.group, finish - tab.ideal)
    return ExactResult(float(np.sum(w * tard)), finish, tard, res)


def brute_force_priorities(net: Network, echelonflows: list[EchelonFlow] | FlowTable
                           ) -> tuple[float, tuple[int, ...]]:
    """The best objective over all strict priority orders of the flows (module
    docstring) and one order attaining it.

    Parameters
    ----------
    net : Network
    echelonflows : list of EchelonFlow or FlowTable
        At most :data:`MAX_BRUTE_FLOWS` flows.

    Returns
    -------
    tuple of (float, tuple of int)
        The objective (Eq. 4 weighted) and the order (flow ids, highest priority first).

    Raises
    ------
    CommschedError
        If there are too many flows.
    """
    tab = echelonflows if isinstance(echelonflows, FlowTable) else flow_table(echelonflows)
    if tab.n > MAX_BRUTE_FLOWS:
        raise CommschedError(f"brute force: {tab.n} flows, at most {MAX_BRUTE_FLOWS}")
    best, arg = math.inf, tuple(range(tab.n))
    for perm in itertools.permutations(range(tab.n)):
        klass = np.empty(tab.n, dtype=np.int64)
        klass[list(perm)] = np.arange(tab.n)

        def policy(view: View, klass: np.ndarray = klass) -> np.ndarray:
            return priority_max_min(view.links, view.net.capacity, klass[view.active])

        cost = simulate_echelonflows(net, tab, policy).objective
        if cost < best - 1e-12:
            best, arg = cost, perm
    return best, arg


def random_instance(rng: np.random.Generator, hosts: int, groups: int,
                    flows_per_group: int) -> list[EchelonFlow]:
    """Small random EchelonFlows on ``hosts`` hosts: each a Coflow (random pairs, one
    release) or, with probability 1/2, a GPipe EchelonFlow (one host pair, flow ``j``
    released at ``r + j T``, Eq. 6 offsets); integer sizes 1-4, releases 0-3, T 1-2.

    Parameters
    ----------
    rng : numpy.random.Generator
        The seeded source of every choice.
    hosts, groups, flows_per_group : int
        The instance's size.

    Returns
    -------
    list of EchelonFlow

    Raises
    ------
    CommschedError
        If ``hosts < 2``.

    References
    ----------
    EchelonFlow (Pan et al., HotNets 2022), Sec. 4, Eqs. 5-6.
    """
    if hosts < 2:
        raise CommschedError("random instance: needs at least two hosts")
    out = []
    for g in range(groups):
        k = flows_per_group
        r = float(rng.integers(0, 4))
        size = rng.integers(1, 5, size=k).astype(float)
        if rng.random() < 0.5:
            src = rng.integers(0, hosts, size=k)
            dst = (src + rng.integers(1, hosts, size=k)) % hosts
            out.append(EchelonFlow(src, dst, size, [r] * k, coflow(k), name=f"coflow{g}"))
        else:
            s = int(rng.integers(0, hosts))
            d = (s + int(rng.integers(1, hosts))) % hosts
            step = float(rng.integers(1, 3))
            off = gpipe(k, step)
            out.append(EchelonFlow([s] * k, [d] * k, size, r + off, off, name=f"gpipe{g}"))
    return out


def optimality_gaps(seed: int, instances: int, hosts: int = 3, groups: int = 2,
                    flows_per_group: int = 2,
                    policies: Mapping[str, Callable[[], Policy]] | None = None
                    ) -> pd.DataFrame:
    """Per random instance (seeded) and policy (default: fair sharing, Varys' ``sebf``
    treating each EchelonFlow as one Coflow, and the EchelonFlow schedulers): its objective, the
    optimum (:func:`solve_exact`), the absolute gap and the ratio to the optimum (the
    optimum is positive: every EchelonFlow's head flow has offset 0 and a positive
    transfer time).

    Parameters
    ----------
    seed : int
        Seeds the instances.
    instances : int
        How many.
    hosts, groups, flows_per_group : int
        Each instance's size (on a big switch of 1 byte/s ports).
    policies : mapping of str to policy factory, optional
        Default :data:`POLICIES`.

    Returns
    -------
    pandas.DataFrame
        ``instance, policy, objective, optimum, gap, ratio``.

    Raises
    ------
    CommschedError
        As :func:`random_instance` and :func:`solve_exact`.

    References
    ----------
    EchelonFlow (Pan et al., HotNets 2022), Sec. 3.2, Eq. 4 and Sec. 3.3, Property 4 (the schedulers
    measured).
    """
    pols = dict(policies) if policies else POLICIES
    rng = np.random.default_rng(seed)
    net = big_switch(hosts, 1.0)
    rows = []
    for inst in range(instances):
        tab = flow_table(random_instance(rng, hosts, groups, flows_per_group))
        costs = {name: simulate_echelonflows(net, tab, f()).objective
                 for name, f in pols.items()}
        opt = solve_exact(net, tab, upper=min(costs.values())).objective
        for name, c in costs.items():
            rows.append({"instance": inst, "policy": name, "objective": c, "optimum": opt,
                         "gap": c - opt, "ratio": c / opt})
    return pd.DataFrame(rows)
