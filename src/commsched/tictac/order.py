"""TIC and TAC: TicTac's priority orders of parameter transfers (Alg. 2 and Alg. 3).

Numbering follows TicTac (Hashemi, Jyothi & Campbell, SysML 2019): TIC is Sec. 4.2 and
Alg. 2 with the general time oracle of Eq. (5); TAC is Sec. 4.3 and Alg. 3 with the
comparator of Eq. (6). The earlier arXiv version ("Communication Scheduling as a
First-Class Citizen in Distributed Machine Learning Systems", arXiv:1803.03288v1) calls
them TIO and TAO and numbers them the other way round: TAO is Sec. 4.2, Alg. 2,
comparator Eq. (5); TIO is Sec. 4.3, Alg. 3, time oracle Eq. (6). Both take an op graph
whose parameter transfers are ``recv`` ops and return ``{recv id: priority}`` (lower is
sent first), the format of :mod:`commsched.io.priorities`. Where the papers leave details
open we follow the authors' public implementation (``tictac/tic.py``, ``tictac/tac.py``).

TIC (SysML Alg. 2), restated::

    1  Time(op) = 1 if op is a recv else 0                      (Eq. 5)
    2  R = all recv ops; update properties (Alg. 1) with Time and R
    3  sort R by M+; op.priority = number of recvs with a smaller M+
       (recvs with equal M+ share a priority)

TAC (SysML Alg. 3), restated::

    1  Time(op) = time oracle (the graph's durations)
    2  R = all recv ops; count = 0
    3  while R is not empty:
    4      update properties (Alg. 1) with Time and R
    5      A = the first op of R under the comparator of Eq. (6)
    6      A.priority = count; count += 1; R = R - {A}

Comparator, Eq. (6) (Sec. 4.3, case 1): ``A`` goes before ``B`` when
``min(P_B, M_A) < min(P_A, M_B)``; for two recvs each feeding only its own computation
this is the condition for "A then B" to have the shorter makespan, i.e. Johnson's rule
for the two-machine flow shop (S. M. Johnson, 1954) with the channel as machine 1 (time
``M``) and the compute unit as machine 2 (time ``P``). Case 2: when the minima are equal,
the recv with the smaller ``M+`` goes first.

The printed Alg. 3 contradicts Eq. (6), in both versions (SysML Alg. 3, arXiv Alg. 2):
its comparator sets ``A <- min(P_A, M_B)``, ``B <- min(P_B, M_A)`` and returns
``A < B``, which puts A first when ``min(P_A, M_B) < min(P_B, M_A)``, the opposite of
Eq. (6). Read literally it would send first the transfer whose completion unblocks the
*least* computation. We follow Eq. (6), as the authors' code does (its comparator
compares ``min(P_B, M_A)`` with ``min(P_A, M_B)``); :func:`eq6_before` is Eq. (6) and
the tests check TAC against it, and against brute force on two-stage instances where
Eq. (6) is optimal.

Our choice where the paper is ambiguous, and where our ``M+`` tie-break differs from
the paper's: the relation of Eq. (6) is not transitive when minima tie, so "the first op"
of line 5 need not exist (the authors' code takes the head of a Python sort under it,
which depends on the input order). Step 5 picks the first op under the total preorder of
Johnson's algorithm -- ops with ``M < P`` first by increasing ``M``, then the others by
decreasing ``P`` -- and only among ops equal under it the smaller ``M+``, then the
earlier op in graph order. Johnson's order never puts ``B`` before ``A`` when Eq. (6)
strictly prefers ``A`` (for any two ops it places ``i`` before ``j``,
``min(M_i, P_j) <= min(M_j, P_i)``), so the chosen op is never strictly beaten under
Eq. (6); this is tested. The difference from the paper's comparator is in the ties of
Eq. (6): the paper breaks every tie by ``M+``, we break a tie by Johnson's key first and
reach ``M+`` only when that ties too. Example: ``A`` with ``M = P = 1`` and ``B`` with
``M = 1, P = 2`` tie under Eq. (6) (both minima are 1); the paper then takes the smaller
``M+``, we take ``B`` (``M < P``) whatever the ``M+``. When every ``P`` is 0 (all recvs
outstanding at the start, case 2 of Sec. 4.3) Johnson's key is ``(1, 0)`` for every recv
and the choice is by ``M+`` exactly as in the paper.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

import networkx as nx

from commsched.registry import Registry
from commsched.tictac.dependencies import comm_index, op_times
from commsched.tictac.properties import IncrementalProperties

#: An ordering: op graph with ``recv`` ops -> ``{recv id: priority}`` (lower goes first).
Ordering = Callable[[nx.DiGraph], dict[str, int]]

__all__ = ["ORDERINGS", "Ordering", "eq6_before", "johnson_key", "tac", "tic"]


def eq6_before(m_a: float, p_a: float, m_b: float, p_b: float) -> bool:
    """Eq. (6) without its tie-break: does recv A strictly go before recv B?

    ``min(P_B, M_A) < min(P_A, M_B)``, i.e. the makespan of "A then B" is smaller than
    that of "B then A" for two recvs on one channel that each feed their own computation
    (TicTac SysML Sec. 4.3, case 1).

    Parameters
    ----------
    m_a, p_a : float
        ``M`` and ``P`` of recv A (Alg. 1).
    m_b, p_b : float
        ``M`` and ``P`` of recv B.

    Returns
    -------
    bool

    References
    ----------
    .. [1] Hashemi, Jyothi & Campbell, "TicTac", SysML 2019, Sec. 4.3, Eq. 6.
    .. [2] S. M. Johnson, "Optimal two- and three-stage production schedules with setup
       times included", Naval Research Logistics Quarterly 1(1), 1954.

    Examples
    --------
    >>> eq6_before(1, 5, 2, 1)   # A: short transfer, long compute -> first
    True
    >>> eq6_before(2, 1, 1, 5)
    False
    """
    return min(p_b, m_a) < min(p_a, m_b)


def johnson_key(m: float, p: float) -> tuple[int, float]:
    """Sort key of Johnson's rule: ``(0, M)`` if ``M < P`` else ``(1, -P)``.

    Sorting by it gives an order in which every pair ``i`` before ``j`` satisfies
    ``min(M_i, P_j) <= min(M_j, P_i)``: it refines the comparator of Eq. (6).

    Parameters
    ----------
    m, p : float
        ``M`` (the channel, machine 1) and ``P`` (the compute unit, machine 2) of a recv.

    Returns
    -------
    tuple of (int, float)

    References
    ----------
    .. [1] S. M. Johnson, "Optimal two- and three-stage production schedules with setup
       times included", Naval Research Logistics Quarterly 1(1), 1954.
    .. [2] Hashemi, Jyothi & Campbell, "TicTac", SysML 2019, Sec. 4.3, Eq. 6.

    Examples
    --------
    >>> sorted([(2, 1), (1, 5), (3, 4)], key=lambda mp: johnson_key(*mp))
    [(1, 5), (3, 4), (2, 1)]
    """
    return (0, m) if m < p else (1, -p)


def tic(g: nx.DiGraph) -> dict[str, int]:
    """TIC (TicTac SysML Sec. 4.2, Alg. 2): priorities from ``M+`` with unit-time recvs.

    Lines 1-2 of Alg. 2 (see the module docstring): Alg. 1 with ``Time = 1`` for recvs,
    ``0`` for other ops, every recv outstanding. Line 3: a recv's priority is the number
    of recvs with a strictly smaller ``M+`` (the authors' tools write this rank), so
    recvs with equal ``M+`` share a priority; ``M+ = inf`` (no multi-dependency op
    needs the recv) sorts last.

    Parameters
    ----------
    g : networkx.DiGraph
        Op graph; its ``recv`` ops are ordered, everything else only shapes ``M+``.

    Returns
    -------
    dict of str to int
        ``{recv id: priority}``, lower first, in order of priority then graph order.

    Raises
    ------
    CommschedError
        If ``g`` has a cycle (Alg. 1 walks a topological order).

    References
    ----------
    .. [1] Hashemi, Jyothi & Campbell, "TicTac", SysML 2019, Sec. 4.2, Alg. 2 and Eq. 5
       (TIO, Sec. 4.3 and Alg. 3 of arXiv:1803.03288v1).

    Examples
    --------
    >>> from commsched.model.graph import new_graph, add_op
    >>> g = new_graph({"net": 1, "cpu": 1})
    >>> for i in range(3):
    ...     add_op(g, f"r{i}", "recv", "net", 1.0)
    ...     add_op(g, f"c{i}", "compute", "cpu", 1.0)
    ...     g.add_edge(f"r{i}", f"c{i}")
    >>> g.add_edge("c0", "c1"); g.add_edge("c1", "c2")
    >>> tic(g)
    {'r0': 0, 'r1': 0, 'r2': 2}
    """
    idx = comm_index(g)
    unit = [1 if r else 0 for r in idx.is_recv]
    state = IncrementalProperties(idx, unit)
    mp = state.m_plus()
    key = [math.inf if v is None else v for v in mp]
    order = sorted(range(len(idx.recvs)), key=lambda i: (key[i], i))
    out: dict[str, int] = {}
    rank = 0
    for pos, i in enumerate(order):
        if pos and key[i] != key[order[pos - 1]]:
            rank = pos
        out[idx.recvs[i]] = rank
    return out


def tac(g: nx.DiGraph, time: Mapping[str, float] | None = None) -> dict[str, int]:
    """TAC (TicTac SysML Sec. 4.3, Alg. 3): greedy order by the comparator of Eq. (6).

    Each round (lines 3-6 of Alg. 3, module docstring) updates the properties of the
    outstanding recvs (line 4; :class:`IncrementalProperties` applies the completion of
    the previously chosen recv instead of rerunning Alg. 1 from scratch), picks the first
    recv under Eq. (6) with the ``M+`` tie-break (line 5; see the module docstring for
    how a non-transitive tie is resolved), gives it the next priority and removes it
    (line 6).

    Parameters
    ----------
    g : networkx.DiGraph
        Op graph; recv ``duration`` is the transfer time, other ops' ``duration`` their
        compute time.
    time : mapping of str to float, optional
        Time oracle, op id -> seconds, overriding ``duration`` for the ops it has.

    Returns
    -------
    dict of str to int
        ``{recv id: priority}`` with priorities ``0 .. n-1``, in priority order.

    Raises
    ------
    CommschedError
        If ``g`` has a cycle or a time is not a finite number >= 0.

    References
    ----------
    .. [1] Hashemi, Jyothi & Campbell, "TicTac", SysML 2019, Sec. 4.3, Alg. 3 and Eq. 6
       (TAO, Sec. 4.2 and Alg. 2 of arXiv:1803.03288v1).

    Examples
    --------
    Two recvs on one channel, each feeding its own computation (Johnson's case):

    >>> from commsched.model.graph import new_graph, add_op
    >>> g = new_graph({"net": 1, "cpu": 1})
    >>> add_op(g, "A", "recv", "net", 3.0); add_op(g, "a", "compute", "cpu", 1.0)
    >>> add_op(g, "B", "recv", "net", 1.0); add_op(g, "b", "compute", "cpu", 2.0)
    >>> g.add_edge("A", "a"); g.add_edge("B", "b")
    >>> tac(g)
    {'B': 0, 'A': 1}
    """
    idx = comm_index(g)
    times, _ = op_times(g, idx, time)
    state = IncrementalProperties(idx, times)
    remaining = list(range(len(idx.recvs)))
    out: dict[str, int] = {}
    for count in range(len(remaining)):
        mp = state.m_plus()
        best = min(
            remaining,
            key=lambda i: (
                johnson_key(state.recv_M(i), state.P[i]),
                math.inf if mp[i] is None else mp[i],
                i,
            ),
        )
        out[idx.recvs[best]] = count
        remaining.remove(best)
        state.remove(best)
    return out


#: TicTac's orderings of parameter transfers (the registry the CLI's ``--algo``, the
#: simulated sweeps and the live configs read). The runtime's own order, the baseline every
#: experiment compares against, is no ordering: it is the absence of priorities.
ORDERINGS: Registry[Ordering] = Registry("ordering")
ORDERINGS.add("tic", tic, aliases=("timing-independent",))
ORDERINGS.add("tac", tac, aliases=("timing-aware",))
