"""Op properties of TicTac's Alg. 1: communication dependencies, ``M``, ``P`` and ``M+``.

TicTac (Hashemi, Jyothi & Campbell, "TicTac: Accelerating Distributed Deep Learning with
Communication Scheduling", SysML 2019), Sec. 4.1 and Alg. 1 ("property update"). Given an
op graph whose parameter transfers are ``recv`` ops, a set ``R`` of *outstanding* recvs
and a time oracle ``Time``:

``dep(op)``
    The communication dependencies: the recv ops ``op`` depends on, directly or
    transitively. A recv is in its own ``dep``.
``M(op)``
    The communication time needed to make ``op`` executable: the time to complete the
    outstanding recvs it depends on, ``dep(op) ∩ R``. The recvs of one channel (a recv's
    ``resource``) run one after the other, channels run in parallel, so the sum is taken
    per channel and ``M`` is the maximum over channels (with one channel, the plain sum
    of the paper).
``P(r)``, ``r`` in ``R``
    The directly-dependent compute load: the total ``Time`` of the ops that completing
    ``r`` alone makes executable, i.e. the non-recv ops with ``dep(op) ∩ R == {r}``.
``M+(r)``, ``r`` in ``R``
    The impending communication load: the smallest ``M(op)`` over the non-recv ops that
    need ``r`` *and at least one other* outstanding recv (``r in dep(op) ∩ R`` and
    ``|dep(op) ∩ R| > 1``); ``inf`` when there is none.

The restriction of ``P`` to single-dependency ops and of ``M+`` to multi-dependency ops,
and ``M(r) = Time(r)`` for a recv without recv ancestors, follow the authors' public
implementation (``tictac/common.py``, ``_update_properties``). "Non-recv ops" are every op
whose ``kind`` is not ``recv`` (compute, and sends or collectives if a view has them).

Implementation: ``dep`` is a bitset and times are exact integers
(:mod:`commsched.tictac.dependencies`), so sums, minima and ties are exact; results are
converted back to floats. Ops with the same ``dep ∩ R`` are grouped, so the work per
update is proportional to the number of distinct dependency sets, not to the number of
ops.

Examples
--------
>>> from commsched.model.graph import new_graph, add_op
>>> g = new_graph({"net": 1, "cpu": 1})
>>> for r in ("a", "b"):
...     add_op(g, r, "recv", "net", 2.0)
>>> add_op(g, "x", "compute", "cpu", 3.0); g.add_edge("a", "x")
>>> add_op(g, "y", "compute", "cpu", 1.0); g.add_edge("x", "y"); g.add_edge("b", "y")
>>> p = op_properties(g)
>>> p.P, p.M_plus
({'a': 3.0, 'b': 0.0}, {'a': 4.0, 'b': 4.0})
>>> op_properties(g, outstanding=["b"]).P
{'b': 1.0}
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import networkx as nx

from commsched.tictac.dependencies import CommIndex, comm_index, op_times, set_bits

__all__ = [
    "ExactProperties",
    "IncrementalProperties",
    "OpProperties",
    "exact_op_properties",
    "op_properties",
]


@dataclass(frozen=True)
class OpProperties:
    """The properties of Alg. 1 for one set of outstanding recvs, in seconds.

    Attributes
    ----------
    M : dict of str to float
        ``M(op)`` of every op of the graph.
    P : dict of str to float
        ``P(r)`` of every outstanding recv.
    M_plus : dict of str to float
        ``M+(r)`` of every outstanding recv; ``math.inf`` for a recv that no
        multi-dependency op needs.

    References
    ----------
    .. [1] Hashemi, Jyothi & Campbell, "TicTac: Accelerating Distributed Deep Learning with
       Communication Scheduling", SysML 2019, Sec. 4.1 and Alg. 1.
    """

    M: dict[str, float]
    P: dict[str, float]
    M_plus: dict[str, float]


class IncrementalProperties:
    """``P``, ``M`` and ``M+`` of TicTac's Alg. 1, kept exact while recvs complete.

    TAC (Alg. 3) reruns the property update of Alg. 1 after every chosen recv. Instead of
    recomputing from scratch, this class groups the non-recv ops by their ``dep`` set and
    keeps, per group, the per-channel communication time and the number of outstanding
    recvs; :meth:`remove` (one recv completes) touches only the groups that contain that
    recv. The results equal :func:`op_properties` after the same removals (tested).

    Parameters
    ----------
    idx : CommIndex
        The graph's index (:func:`~commsched.tictac.dependencies.comm_index`).
    times : list of int
        Exact integer time of every op of ``idx.ops``
        (:func:`~commsched.tictac.dependencies.exact_times`).

    Attributes
    ----------
    outstanding : int
        The mask of the recvs not yet completed (all at the start).
    P : list of int
        ``P`` of every recv, by position in ``idx.recvs`` (meaningful while outstanding).

    References
    ----------
    .. [1] Hashemi, Jyothi & Campbell, "TicTac", SysML 2019, Alg. 1 (property update) and
       Alg. 3, line 4 (TAC reruns it after every chosen recv).
    """

    def __init__(self, idx: CommIndex, times: list[int]) -> None:
        self.idx = idx
        nrecv = len(idx.recvs)
        self.outstanding = (1 << nrecv) - 1
        self.recv_time = [0] * nrecv
        recv_pos = {r: i for i, r in enumerate(idx.recvs)}
        # Recvs whose dep holds other recvs (rare: a recv after a computation) need M
        # recomputed; the others have M = their own time.
        self._recv_dep: dict[int, int] = {}
        group_of: dict[int, int] = {}
        self.masks: list[int] = []
        self.load: list[int] = []  # total time of the group's ops
        for k, op in enumerate(idx.ops):
            m = idx.dep[k]
            if idx.is_recv[k]:
                i = recv_pos[op]
                self.recv_time[i] = times[k]
                if m != 1 << i:
                    self._recv_dep[i] = m
            elif m:
                j = group_of.get(m)
                if j is None:
                    group_of[m] = j = len(self.masks)
                    self.masks.append(m)
                    self.load.append(0)
                self.load[j] += times[k]
        nch = len(idx.channels)
        self.count = [m.bit_count() for m in self.masks]
        self.chan_load = [[0] * nch for _ in self.masks]
        self.groups_of_recv: list[list[int]] = [[] for _ in range(nrecv)]
        for j, m in enumerate(self.masks):
            cl = self.chan_load[j]
            for i in set_bits(m):
                cl[idx.channel[i]] += self.recv_time[i]
                self.groups_of_recv[i].append(j)
        self.P = [0] * nrecv
        for j, m in enumerate(self.masks):
            if self.count[j] == 1:
                self.P[m.bit_length() - 1] += self.load[j]

    def group_M(self, j: int) -> int:
        """``M`` of the ops of one group: the largest per-channel outstanding time.

        Parameters
        ----------
        j : int
            The group (ops with one ``dep`` set).

        Returns
        -------
        int
        """
        return max(self.chan_load[j])

    def cost(self, mask: int) -> int:
        """``M`` of an op, under the current outstanding set.

        Parameters
        ----------
        mask : int
            The op's ``dep``.

        Returns
        -------
        int
            The largest per-channel time of its outstanding recvs.
        """
        per = [0] * len(self.idx.channels)
        for i in set_bits(mask & self.outstanding):
            per[self.idx.channel[i]] += self.recv_time[i]
        return max(per, default=0)

    def recv_M(self, i: int) -> int:
        """``M`` of a recv: its own time unless it depends on other outstanding recvs.

        Parameters
        ----------
        i : int
            The recv's position in ``idx.recvs``.

        Returns
        -------
        int
        """
        m = self._recv_dep.get(i)
        return self.recv_time[i] if m is None else self.cost(m)

    def remove(self, i: int) -> None:
        """A recv completes: drop it from the outstanding set and update the groups.

        Parameters
        ----------
        i : int
            The recv's position in ``idx.recvs``.

        Raises
        ------
        ValueError
            If the recv is not outstanding.
        """
        b = 1 << i
        if not self.outstanding & b:
            raise ValueError(f"recv {self.idx.recvs[i]!r} is not outstanding")
        self.outstanding ^= b
        ch, t = self.idx.channel[i], self.recv_time[i]
        for j in self.groups_of_recv[i]:
            self.chan_load[j][ch] -= t
            self.count[j] -= 1
            if self.count[j] == 1:  # the group now waits for one recv only: it adds to P
                self.P[(self.masks[j] & self.outstanding).bit_length() - 1] += self.load[j]

    def m_plus(self) -> list[int | None]:
        """``M+`` of every recv.

        Each recv's ``M+`` is the ``M`` of the cheapest multi-dependency group holding
        it: sweep the groups by increasing ``M`` and give each still unassigned recv the
        first ``M`` that reaches it (every recv is assigned once).

        Returns
        -------
        list of int or None
            By position in ``idx.recvs``; None for infinity or a recv not outstanding.
        """
        out: list[int | None] = [None] * len(self.idx.recvs)
        active = [(self.group_M(j), j) for j, c in enumerate(self.count) if c > 1]
        active.sort()
        unassigned = self.outstanding
        for cost, j in active:
            new = self.masks[j] & unassigned
            if new:
                unassigned ^= new
                for i in set_bits(new):
                    out[i] = cost
                if not unassigned:
                    break
        return out


def op_properties(
    g: nx.DiGraph,
    outstanding: Iterable[str] | None = None,
    time: Mapping[str, float] | None = None,
) -> OpProperties:
    """Alg. 1 of TicTac (SysML 2019, Sec. 4.1): ``M``, ``P`` and ``M+`` from scratch.

    Parameters
    ----------
    g : networkx.DiGraph
        Op graph; its ``recv`` ops are the parameter transfers.
    outstanding : iterable of str, optional
        The recvs not yet completed, ``R``; all recvs by default.
    time : mapping of str to float, optional
        Time oracle, op id -> seconds; ops it lacks use their ``duration`` attribute.
        TIC (Alg. 2) uses 1 for recvs and 0 for everything else.

    Returns
    -------
    OpProperties
        ``M`` of every op, ``P`` and ``M+`` of every outstanding recv, in seconds, rounded
        to floats; :func:`exact_op_properties` keeps them exact (two values can round to
        the same float and still differ).

    Raises
    ------
    CommschedError
        If ``g`` has a cycle, an outstanding id is not a recv, or a time is not a finite
        number >= 0.

    Notes
    -----
    This is the direct form of Alg. 1: every op is visited once per call. TAC uses
    :class:`IncrementalProperties`, which must agree with it.

    References
    ----------
    .. [1] Hashemi, Jyothi & Campbell, "TicTac: Accelerating Distributed Deep Learning with
       Communication Scheduling", SysML 2019, Sec. 4.1 and Alg. 1.
    """
    ex = exact_op_properties(g, outstanding, time)
    return OpProperties(
        M={op: v / ex.den for op, v in ex.M.items()},
        P={r: v / ex.den for r, v in ex.P.items()},
        M_plus={r: math.inf if v is None else v / ex.den for r, v in ex.M_plus.items()},
    )


@dataclass(frozen=True)
class ExactProperties:
    """:class:`OpProperties` in exact integer units of ``1 / den`` seconds.

    Attributes
    ----------
    M, P : dict of str to int
        As in :class:`OpProperties`.
    M_plus : dict of str to int or None
        None for a recv that no multi-dependency op needs.
    den : int
        The unit's denominator (:func:`~commsched.tictac.dependencies.exact_times`).
    """

    M: dict[str, int]
    P: dict[str, int]
    M_plus: dict[str, int | None]
    den: int


def exact_op_properties(
    g: nx.DiGraph,
    outstanding: Iterable[str] | None = None,
    time: Mapping[str, float] | None = None,
) -> ExactProperties:
    """Alg. 1 as :func:`op_properties`, with exact integer results.

    Parameters
    ----------
    g : networkx.DiGraph
        Op graph.
    outstanding : iterable of str, optional
        ``R``; all recvs by default.
    time : mapping of str to float, optional
        Time oracle (default: the ``duration`` attributes).

    Returns
    -------
    ExactProperties
        In units of ``1 / den`` s (:func:`~commsched.tictac.dependencies.exact_times`).

    Raises
    ------
    CommschedError
        As :func:`op_properties`.

    References
    ----------
    .. [1] Hashemi, Jyothi & Campbell, "TicTac: Accelerating Distributed Deep Learning with
       Communication Scheduling", SysML 2019, Sec. 4.1 and Alg. 1.
    """
    idx = comm_index(g)
    times, den = op_times(g, idx, time)
    R = (1 << len(idx.recvs)) - 1 if outstanding is None else idx.mask(outstanding)
    recv_pos = {r: i for i, r in enumerate(idx.recvs)}
    times_of_recv = [0] * len(idx.recvs)
    for k, op in enumerate(idx.ops):
        if idx.is_recv[k]:
            times_of_recv[recv_pos[op]] = times[k]

    def cost(mask: int) -> int:
        per = [0] * len(idx.channels)
        for i in set_bits(mask):
            per[idx.channel[i]] += times_of_recv[i]
        return max(per, default=0)

    M: dict[str, int] = {}
    P = dict.fromkeys(set_bits(R), 0)
    M_plus: dict[int, int] = {}
    cache: dict[int, int] = {}
    for k, op in enumerate(idx.ops):
        D = idx.dep[k] & R
        c = cache.get(D)
        if c is None:
            cache[D] = c = cost(D)
        M[op] = c
        if idx.is_recv[k] or not D:
            continue
        if D & (D - 1) == 0:  # exactly one outstanding dependency
            P[D.bit_length() - 1] += times[k]
        else:
            for i in set_bits(D):
                if i not in M_plus or c < M_plus[i]:
                    M_plus[i] = c
    return ExactProperties(
        M=M,
        P={idx.recvs[i]: v for i, v in P.items()},
        M_plus={idx.recvs[i]: M_plus.get(i) for i in set_bits(R)},
        den=den,
    )
