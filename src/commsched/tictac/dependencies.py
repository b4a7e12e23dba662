"""Communication dependencies of an op graph (TicTac Sec. 4.1), as bitsets with exact times.

``dep(op)`` is the set of recv ops that ``op`` depends on, directly or transitively (a
recv is in its own ``dep``): TicTac (Hashemi, Jyothi & Campbell, SysML 2019), Sec. 4.1,
"communication dependency". :func:`comm_index` computes it for every op as a bitset (a
Python ``int``, bit ``i`` = the ``i``-th recv in graph order) in one pass over a
topological order, so it scales to traced graphs with thousands of ops. Times become
exact integers (:func:`exact_times`: every float is an integer multiple of a power of
two), so the sums, minima and ties of Alg. 1 (:mod:`commsched.tictac.properties`) are
exact.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

import networkx as nx

from commsched.errors import CommschedError

__all__ = [
    "CommIndex",
    "comm_dependencies",
    "comm_index",
    "exact_times",
    "op_times",
    "set_bits",
]


def exact_times(values: Iterable[float]) -> tuple[list[int], int]:
    """Floats as exact integer multiples of one power of two.

    Every finite float is an integer multiple of a power of two, so sums and comparisons
    of the integers are exact where float arithmetic would round.

    Parameters
    ----------
    values : iterable of float
        Finite numbers.

    Returns
    -------
    numerators : list of int
        ``n_i`` with ``values[i] == n_i / den`` exactly.
    den : int
        The power of two (1 for no values).

    Examples
    --------
    >>> exact_times([0.5, 0.25, 3.0])
    ([2, 1, 12], 4)
    """
    ratios = [float(v).as_integer_ratio() for v in values]
    den = max((d for _, d in ratios), default=1)
    return [n * (den // d) for n, d in ratios], den


def set_bits(mask: int) -> Iterator[int]:
    """The indices of the set bits of a mask, lowest first.

    Parameters
    ----------
    mask : int
        A bitset (bit ``i`` stands for ``CommIndex.recvs[i]``).

    Yields
    ------
    int

    Examples
    --------
    >>> list(set_bits(0b1010))
    [1, 3]
    """
    while mask:
        low = mask & -mask
        yield low.bit_length() - 1
        mask ^= low


@dataclass(frozen=True)
class CommIndex:
    """The communication dependencies of an op graph in bitset form.

    Built by :func:`comm_index`. Bit ``i`` of a mask stands for ``recvs[i]``.

    Attributes
    ----------
    ops : list of str
        All ops, in a topological order.
    recvs : list of str
        The recv ops, in graph order.
    channel : list of int
        ``channel[i]``: the index in ``channels`` of the resource of ``recvs[i]``.
    channels : list of str
        The resources the recvs run on.
    dep : list of int
        ``dep[k]``: the mask of ``dep(ops[k])``.
    is_recv : list of bool
        Whether ``ops[k]`` is a recv.

    References
    ----------
    .. [1] Hashemi, Jyothi & Campbell, "TicTac: Accelerating Distributed Deep Learning with
       Communication Scheduling", SysML 2019, Sec. 4.1 and Alg. 1.
    """

    ops: list[str]
    recvs: list[str]
    channel: list[int]
    channels: list[str]
    dep: list[int]
    is_recv: list[bool]

    def mask(self, recvs: Iterable[str]) -> int:
        """The bitset of a collection of recv ids.

        Parameters
        ----------
        recvs : iterable of str
            Recv op ids.

        Returns
        -------
        int
            The mask with their bits set.

        Raises
        ------
        CommschedError
            If an id is not a recv op of the graph.
        """
        pos = {r: i for i, r in enumerate(self.recvs)}
        m = 0
        for r in recvs:
            if r not in pos:
                raise CommschedError(f"op {r!r} is not a recv op of the graph")
            m |= 1 << pos[r]
        return m


def comm_index(g: nx.DiGraph) -> CommIndex:
    """Compute ``dep`` of every op of ``g`` (TicTac Sec. 4.1, "communication dependency").

    One pass over a topological order: ``dep(v)`` is the union of its predecessors'
    ``dep``, plus ``v`` itself when ``v`` is a recv.

    Parameters
    ----------
    g : networkx.DiGraph
        An op graph; its ``recv`` ops are the parameter transfers.

    Returns
    -------
    CommIndex

    Raises
    ------
    CommschedError
        If ``g`` has a cycle.

    References
    ----------
    .. [1] Hashemi, Jyothi & Campbell, "TicTac: Accelerating Distributed Deep Learning with
       Communication Scheduling", SysML 2019, Sec. 4.1 and Alg. 1.
    """
    try:
        order = list(nx.topological_sort(g))
    except nx.NetworkXUnfeasible:
        raise CommschedError("the op graph has a cycle") from None
    nodes = g.nodes
    recvs = [n for n in g.nodes if nodes[n]["kind"] == "recv"]
    bit = {r: 1 << i for i, r in enumerate(recvs)}
    channels: list[str] = []
    chan_pos: dict[str, int] = {}
    channel = []
    for r in recvs:
        res = nodes[r]["resource"]
        if res not in chan_pos:
            chan_pos[res] = len(channels)
            channels.append(res)
        channel.append(chan_pos[res])
    dep_of: dict[str, int] = {}
    pred = g.pred
    for v in order:
        m = bit.get(v, 0)
        for u in pred[v]:
            m |= dep_of[u]
        dep_of[v] = m
    return CommIndex(
        ops=order,
        recvs=recvs,
        channel=channel,
        channels=channels,
        dep=[dep_of[v] for v in order],
        is_recv=[v in bit for v in order],
    )


def comm_dependencies(g: nx.DiGraph) -> dict[str, frozenset[str]]:
    """``dep(op)`` of every op as a set of recv ids.

    Parameters
    ----------
    g : networkx.DiGraph
        An op graph whose ``recv`` ops are the parameter transfers.

    Returns
    -------
    dict of str to frozenset of str
        ``{op: the recvs it depends on}`` (a recv depends on itself).

    Raises
    ------
    CommschedError
        If ``g`` has a cycle (as :func:`comm_index`).

    References
    ----------
    .. [1] Hashemi, Jyothi & Campbell, "TicTac", SysML 2019, Sec. 4.1 ("communication
       dependency").

    Examples
    --------
    >>> from commsched.model.graph import new_graph, add_op
    >>> g = new_graph({"net": 1, "cpu": 1})
    >>> add_op(g, "r", "recv", "net", 1.0); add_op(g, "c", "compute", "cpu", 1.0)
    >>> g.add_edge("r", "c")
    >>> comm_dependencies(g)["c"]
    frozenset({'r'})
    """
    idx = comm_index(g)
    return {
        op: frozenset(idx.recvs[i] for i in set_bits(m))
        for op, m in zip(idx.ops, idx.dep, strict=True)
    }


def op_times(
    g: nx.DiGraph, idx: CommIndex, time: Mapping[str, float] | None
) -> tuple[list[int], int]:
    """Exact integer times of the ops of a :class:`CommIndex`.

    Parameters
    ----------
    g : networkx.DiGraph
        The op graph of ``idx``.
    idx : CommIndex
        Its index.
    time : mapping of str to float or None
        A time oracle; ops it lacks use their ``duration`` attribute.

    Returns
    -------
    times : list of int
        In ``idx.ops`` order, in units of ``1 / den`` s (:func:`exact_times`).
    den : int

    Raises
    ------
    CommschedError
        If a time is not a finite number >= 0.
    """
    nodes = g.nodes
    vals = []
    for op in idx.ops:
        t = time[op] if time is not None and op in time else nodes[op]["duration"]
        if not (isinstance(t, (int, float)) and math.isfinite(t) and t >= 0):
            raise CommschedError(f"op {op!r}: time must be a finite number >= 0, got {t!r}")
        vals.append(float(t))
    return exact_times(vals)
