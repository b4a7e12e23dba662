"""The thesis' system model (Laich 2017, Ch. 2-4) as compact arrays.

A :class:`Problem` is a DAG of nodes ``0..n-1`` (the graph's own ids are kept in ``ids``)
with, per node, its number of operations (``ops``), its output tensor size (``size``, the
weight of every out-edge, Sec. 2.2), its memory demand (``ram``) and its device constraint
(``constraint``: an index into :data:`TYPES`, ``NO`` = any device). Colocation pairs close
transitively into groups (Sec. 2.3, Alg. 3.1) by a union-find (:class:`UnionFind`); a group
whose members demand different device types is rejected naming two such nodes.
An *assignment unit* (Sec. 4.1) is a colocation group or a node that is in none; every
partitioner places whole units.

:class:`Cluster` is the device set (Sec. 2.2): type, speed (operations per time unit),
memory and a symmetric transfer-rate matrix (``inf`` on the diagonal: a device talks to
itself for free).

Memory (Table 2.2, Sec. 4.1): ``size_est(n)`` = the node's memory demand + its output
tensor + its input tensors; a placement must keep ``sum size_est < memory`` on every device
(strict, as Sec. 4.1 writes it). :func:`check_placement` checks the three constraints of
Sec. 4.1; :func:`traffic` is Eq. 2.2 with one transfer per (producer, destination device),
the tensor that a send/receive pair carries (Sec. 2.4).

Examples
--------
>>> import networkx as nx
>>> g = nx.DiGraph()
>>> g.add_node(0, operations=30, tensor_size=50, ram=1, constraint="NO", colocation=0)
>>> g.add_node(1, operations=50, tensor_size=50, ram=1, constraint="GPU", colocation=0)
>>> g.add_edge(0, 1)
>>> p = Problem.from_thesis(g)
>>> p.n, p.unit_members[p.unit[0]], TYPES[p.unit_constraint[p.unit[1]]]
(2, [0, 1], 'GPU')
"""

from __future__ import annotations

import functools
import itertools
import math
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal, NamedTuple

import networkx as nx
import numpy as np

from commsched.errors import CommschedError
from commsched.io.thesis import Devices

__all__ = [
    "NO",
    "SEMANTICS",
    "TYPES",
    "Cluster",
    "Options",
    "Placement",
    "PlacementError",
    "Problem",
    "Semantics",
    "UnionFind",
    "check_fits",
    "check_placement",
    "describe_unit",
    "identity_hashes",
    "java_hash_order",
    "random_devices",
    "topological_order",
    "traffic",
]

#: Device types; index 3 (``NO``) is the constraint "any device".
TYPES = ("CPU", "GPU", "TPU", "NO")
NO = 3
#: ``thesis``: the thesis text; ``published-code``: the deviations of the published Java
#: simulator (see :mod:`commsched.placement`).
SEMANTICS = ("thesis", "published-code")
Semantics = Literal["thesis", "published-code"]


@dataclass(frozen=True)
class Options:
    """Options every partitioner and scheduler takes.

    Parameters
    ----------
    semantics : {"thesis", "published-code"}
        The text, or the published Java simulator's deviations.
    seed : int
        Every random choice (the published code's hash-set orders and random tie-breaks).
    send_ops : float
        Operations of a send node.

    Raises
    ------
    CommschedError
        For an unknown semantics.

    References
    ----------
    Laich 2017, Sec. 2.5 (send operations), Ch. 3 (the published framework).
    """

    semantics: Semantics = "thesis"
    seed: int = 0
    send_ops: float = 10.0

    def __post_init__(self) -> None:
        if self.semantics not in SEMANTICS:
            raise CommschedError(f"unknown semantics {self.semantics!r} "
                                 f"(expected one of {', '.join(SEMANTICS)})")


class PlacementError(CommschedError):
    """A node or colocation group that cannot be placed (constraints, memory)."""


class Placement(NamedTuple):
    """A partitioner's result: the device of every node and the order in which the nodes
    were assigned (the published simulator enqueues a device's sources in that order)."""

    device: np.ndarray
    order: list[int]


class UnionFind:
    """Disjoint sets over ``0..n-1`` with path halving and union by size.

    >>> u = UnionFind(4)
    >>> _ = u.union(0, 2), u.union(2, 3)
    >>> u.find(3) == u.find(0)
    True
    """

    def __init__(self, n: int) -> None:
        self.parent = list(range(n))
        self.size = [1] * n

    def find(self, x: int) -> int:
        """The representative of ``x``'s set (halving the path on the way).

        Parameters
        ----------
        x : int
            An element, ``0..n-1``.

        Returns
        -------
        int
        """
        parent = self.parent
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    def union(self, a: int, b: int) -> int:
        """Merge the sets of ``a`` and ``b``; the larger set's root stays root.

        Parameters
        ----------
        a, b : int
            Elements.

        Returns
        -------
        int
            The merged set's representative.
        """
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return ra
        if self.size[ra] < self.size[rb]:
            ra, rb = rb, ra
        self.parent[rb] = ra
        self.size[ra] += self.size[rb]
        return ra


@dataclass
class Problem:
    """A thesis graph as arrays; build it with :meth:`from_thesis` or :meth:`build`.

    ``ops``, ``size``, ``ram`` and ``constraint`` are the node weights of Sec. 2.2; the
    assignment units (``unit*``) are the colocation groups and lone nodes of Sec. 4.1;
    ``size_est`` is a node's memory demand (RAM, output and inputs).

    References
    ----------
    Laich 2017, Secs. 2.2 and 4.1.
    """

    ids: list[int]
    ops: np.ndarray
    size: np.ndarray
    ram: np.ndarray
    constraint: np.ndarray
    succ: list[list[int]]
    pred: list[list[int]]
    topo: list[int]
    unit: np.ndarray  # node -> unit index
    unit_members: list[list[int]]  # unit -> member nodes (ascending)
    unit_constraint: np.ndarray  # unit -> type index (NO = any)
    unit_colocated: np.ndarray  # unit -> True for a colocation group of >= 2 nodes
    size_est: np.ndarray = field(init=False)
    unit_mem: np.ndarray = field(init=False)
    unit_ops: np.ndarray = field(init=False)
    #: the edges as two int arrays (source, target), by source and then in ``succ`` order
    edges: tuple[np.ndarray, np.ndarray] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        out = np.fromiter((len(s) for s in self.succ), dtype=np.int64, count=self.n)
        self.edges = (np.repeat(np.arange(self.n, dtype=np.int64), out),
                      np.fromiter(itertools.chain.from_iterable(self.succ), dtype=np.int64,
                                  count=int(out.sum())))
        insize = np.zeros(self.n)
        for v in range(self.n):
            insize[v] = sum(float(self.size[p]) for p in self.pred[v])
        self.size_est = self.ram + self.size + insize
        nu = len(self.unit_members)
        self.unit_mem = np.zeros(nu)
        self.unit_ops = np.zeros(nu)
        np.add.at(self.unit_mem, self.unit, self.size_est)
        np.add.at(self.unit_ops, self.unit, self.ops)

    @property
    def n(self) -> int:
        return len(self.ids)

    @property
    def n_edges(self) -> int:
        return sum(len(s) for s in self.succ)

    @staticmethod
    def build(ops: Sequence[float], size: Sequence[float], edges: Iterable[tuple[int, int]],
              ram: Sequence[float] | None = None, constraint: Sequence[str] | None = None,
              colocation: Iterable[tuple[int, int]] = (), ids: Sequence[int] | None = None,
              ) -> Problem:
        """A problem on nodes ``0..n-1``; ``colocation`` lists pairs that share a device.

        Parameters
        ----------
        ops : sequence of float
            Operations per node (its compute weight; time = ops / device speed).
        size : sequence of float
            Size of each node's output tensor, in the unit the transfer rates use
            (bytes for traced graphs).
        edges : iterable of (int, int)
            ``(u, v)``: ``v`` consumes ``u``'s output.
        ram : sequence of float, optional
            Memory each node needs besides its tensors; default 0.
        constraint : sequence of str, optional
            Per node, one of :data:`TYPES` (``NO``: any device); default ``NO``.
        colocation : iterable of (int, int), optional
            Pairs that must share a device (groups are their transitive closure).
        ids : sequence of int, optional
            The nodes' names in messages and results; default ``0..n-1``.

        Returns
        -------
        Problem

        Raises
        ------
        PlacementError
            An unknown constraint, a cycle, or a colocation group with two device types
            (naming two of its nodes).

        References
        ----------
        .. [1] Laich, B.Sc. thesis, Stuttgart 2017, Secs. 2.2 and 4.1.
        """
        n = len(ops)
        names = list(ids) if ids is not None else list(range(n))
        cons = [TYPES.index(c) if c in TYPES else -1 for c in (constraint or ["NO"] * n)]
        if -1 in cons:
            bad = (constraint or [])[cons.index(-1)]
            raise PlacementError(f"node {names[cons.index(-1)]}: unknown constraint {bad!r}")
        succ: list[list[int]] = [[] for _ in range(n)]
        pred: list[list[int]] = [[] for _ in range(n)]
        for u, v in edges:
            succ[u].append(v)
            pred[v].append(u)
        for lst in (*succ, *pred):
            lst.sort()
        topo = topological_order(succ)
        if len(topo) != n:
            # every node left out of Kahn's order has a predecessor left out too: walking
            # back n steps from any of them ends on a cycle
            left = set(range(n)).difference(topo)
            v = min(left)
            for _ in range(n):
                v = next(u for u in pred[v] if u in left)
            raise PlacementError(f"the graph has a cycle through node {names[v]}")
        uf = UnionFind(n)
        witness = {v: v for v in range(n) if cons[v] != NO}  # root -> a constrained member
        for a, b in colocation:
            ra, rb = uf.find(a), uf.find(b)
            if ra == rb:
                continue
            wa, wb = witness.get(ra), witness.get(rb)
            if wa is not None and wb is not None and cons[wa] != cons[wb]:
                raise PlacementError(
                    f"colocated nodes {names[wa]} ({TYPES[cons[wa]]}) and {names[wb]} "
                    f"({TYPES[cons[wb]]}) need different device types")
            r = uf.union(a, b)
            w = wa if wa is not None else wb
            witness.pop(ra, None)
            witness.pop(rb, None)
            if w is not None:
                witness[r] = w
        unit_of_root: dict[int, int] = {}
        unit = np.zeros(n, dtype=np.int64)
        members: list[list[int]] = []
        for v in range(n):
            r = uf.find(v)
            if r not in unit_of_root:
                unit_of_root[r] = len(members)
                members.append([])
            unit[v] = unit_of_root[r]
            members[unit_of_root[r]].append(v)
        ucons = np.full(len(members), NO, dtype=np.int64)
        for r, u in unit_of_root.items():
            if r in witness:
                ucons[u] = cons[witness[r]]
        return Problem(
            ids=names, ops=np.asarray(ops, dtype=float), size=np.asarray(size, dtype=float),
            ram=np.asarray(ram if ram is not None else [0] * n, dtype=float),
            constraint=np.asarray(cons, dtype=np.int64), succ=succ, pred=pred, topo=topo,
            unit=unit, unit_members=members, unit_constraint=ucons,
            unit_colocated=np.array([len(m) > 1 for m in members], dtype=bool),
        )

    @staticmethod
    def from_thesis(g: nx.DiGraph) -> Problem:
        """From a graph of :func:`commsched.io.thesis.read_graph` (or the level generator).

        Parameters
        ----------
        g : networkx.DiGraph
            Nodes with ``operations``, ``tensor_size`` and optional ``ram``,
            ``constraint`` and ``colocation`` (the node it shares a device with).

        Returns
        -------
        Problem
            Nodes in sorted id order.

        Raises
        ------
        PlacementError
            As :meth:`build`.
        """
        nodes = sorted(g.nodes)
        index = {v: i for i, v in enumerate(nodes)}
        a = g.nodes
        return Problem.build(
            ops=[a[v]["operations"] for v in nodes], size=[a[v]["tensor_size"] for v in nodes],
            edges=[(index[u], index[v]) for u, v in g.edges],
            ram=[a[v].get("ram") or 0 for v in nodes],
            constraint=[a[v].get("constraint", "NO") for v in nodes],
            colocation=[(index[v], index[a[v].get("colocation", v)]) for v in nodes],
            ids=nodes,
        )

    def ops_ranks(self) -> tuple[np.ndarray, np.ndarray]:
        """Operations source rank (Eq. 4.3) and sink rank (Eq. 4.4) of every node
        (computed once per problem, shared by the partitioners; read-only arrays)."""
        return self._ops_ranks

    @functools.cached_property
    def _ops_ranks(self) -> tuple[np.ndarray, np.ndarray]:
        src = np.zeros(self.n)
        sink = np.zeros(self.n)
        ops = self.ops
        for v in self.topo:
            if self.pred[v]:
                src[v] = max(src[p] + ops[p] for p in self.pred[v])
        for v in reversed(self.topo):
            sink[v] = ops[v] + (max(sink[s] for s in self.succ[v]) if self.succ[v] else 0.0)
        src.flags.writeable = sink.flags.writeable = False
        return src, sink


@dataclass
class Cluster:
    """Devices as arrays.

    Parameters
    ----------
    speed, memory : numpy.ndarray
        Operations per time unit and memory of every device.
    type : numpy.ndarray
        Index into :data:`TYPES` of every device.
    rate : numpy.ndarray
        Transfer rate between every pair (``inf`` on the diagonal).

    References
    ----------
    Laich 2017, Sec. 2.2 (devices), Sec. 6.2 (generated devices).
    """

    speed: np.ndarray
    memory: np.ndarray
    type: np.ndarray
    rate: np.ndarray

    @property
    def n(self) -> int:
        return len(self.speed)

    @staticmethod
    def from_devices(d: Devices) -> Cluster:
        """From a device file read by :func:`commsched.io.thesis.read_devices`.

        Parameters
        ----------
        d : Devices
            Its types must be in :data:`TYPES`.

        Returns
        -------
        Cluster

        Raises
        ------
        ValueError
            A device type not in :data:`TYPES`.
        """
        return Cluster(np.asarray(d.speed, dtype=float), np.asarray(d.ram, dtype=float),
                       np.asarray([TYPES.index(t) for t in d.type], dtype=np.int64),
                       np.asarray(d.rates, dtype=float))

    def to_devices(self) -> Devices:
        """The :class:`~commsched.io.thesis.Devices` of this cluster (to write it)."""
        n = self.n
        return Devices(ids=list(range(n)), ram=[int(x) for x in self.memory],
                       speed=[int(x) for x in self.speed],
                       type=[TYPES[int(t)] for t in self.type],
                       rates=[[float(self.rate[i, j]) for j in range(n)] for i in range(n)])

    def feasible_type(self, constraint: int) -> np.ndarray:
        """Boolean mask of the devices whose type meets ``constraint``.

        Parameters
        ----------
        constraint : int
            An index into :data:`TYPES`; ``NO`` admits every device.

        Returns
        -------
        numpy.ndarray of bool
            One entry per device.
        """
        if constraint == NO:
            return np.ones(self.n, dtype=bool)
        return np.asarray(self.type == constraint)


def topological_order(succ: Sequence[Sequence[int]]) -> list[int]:
    """Kahn's order of the nodes ``0..len(succ)-1`` (sources by id, then in the order they
    become free); shorter than ``len(succ)`` when the graph has a cycle.

    Parameters
    ----------
    succ : sequence of sequence of int
        Successor lists.

    Returns
    -------
    list of int
        The nodes in topological order.

    References
    ----------
    Laich 2017, Sec. 2.2 (the graph is a DAG).

    Examples
    --------
    >>> topological_order([[2], [2], []])
    [0, 1, 2]
    """
    indeg = [0] * len(succ)
    for ss in succ:
        for s in ss:
            indeg[s] += 1
    order = [v for v in range(len(succ)) if indeg[v] == 0]
    k = 0
    while k < len(order):
        for s in succ[order[k]]:
            indeg[s] -= 1
            if indeg[s] == 0:
                order.append(s)
        k += 1
    return order


def identity_hashes(n: int, seed: int) -> list[float]:
    """Seeded stand-ins for the Java identity hash codes of ``n`` objects.

    The published simulator keeps nodes in ``HashSet<Node>`` without ``hashCode``, so every
    set (successors, colocation groups) iterates in an order fixed by the objects' identity
    hashes, which differ from run to run. Ordering by these keys gives such an order; the
    keys of the graph's nodes are the first ``n`` of a longer list with the same seed.

    Parameters
    ----------
    n : int
        How many keys.
    seed : int
        The run's seed.

    Returns
    -------
    list of float
        One sort key per object.

    References
    ----------
    Laich 2017, Ch. 3 (the evaluation framework, published as Java code).
    """
    rng = random.Random(seed)
    return [rng.random() for _ in range(n)]


def java_hash_order(ids: Sequence[int]) -> list[int]:
    """Positions of ``ids`` in the order a Java ``HashMap<Integer, ...>`` iterates them.

    The published simulator keeps the graph's nodes in such a map and builds its node lists
    from it. The table has the smallest power-of-two capacity >= 16 that holds
    ``len(ids)`` at load factor 0.75; a key goes to bucket ``(h ^ (h >>> 16)) & (cap -
    1)`` with ``h`` the id; a bucket keeps insertion order, here the order of ``ids``
    (buckets of 8 or more keys, which Java turns into trees, do not occur for graphs whose
    ids are ``0..n-1``: there the order is ascending).

    Parameters
    ----------
    ids : sequence of int
        Non-negative integer keys in insertion order.

    Returns
    -------
    list of int
        Positions into ``ids`` in iteration order.

    References
    ----------
    Laich 2017, Sec. 3.1.1 (the graph reader of the published framework).

    >>> java_hash_order([40, 3, 17, 1])
    [2, 3, 1, 0]
    """
    cap = 16
    while len(ids) > 0.75 * cap:
        cap *= 2

    def bucket(k: int) -> int:
        h = k & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (cap - 1)

    return sorted(range(len(ids)), key=lambda i: bucket(ids[i]))


def random_devices(n: int, seed: int, cpu_prob: float = 0.6, speed: tuple[int, int] = (10, 100),
                   rate: tuple[int, int] = (10, 60), memory_scale: float = 1e9) -> Cluster:
    """Devices generated as the thesis' Sec. 6.2 describes.

    Type CPU with ``cpu_prob`` (60%), else GPU; speed uniform in ``speed`` (10-100
    operations per time unit); transfer rate of every pair uniform in ``rate`` (10-60);
    memory ``floor(memory_scale / speed)``, so faster devices have less memory. The inverse
    relation and the scale 1e9 are read off the device files published with the thesis'
    simulator (their memory times speed is 1e9, or 1e10 for the 7-device file).

    Parameters
    ----------
    n : int
        Number of devices.
    seed : int
        Seed of every draw.
    cpu_prob : float
        Probability of a CPU.
    speed, rate : tuple of int
        Inclusive ranges of speeds and pairwise transfer rates.
    memory_scale : float
        Memory is ``floor(memory_scale / speed)``.

    Returns
    -------
    Cluster

    References
    ----------
    Laich 2017, Sec. 6.2.
    """
    if n < 1:
        raise ValueError(f"need n >= 1 devices, got {n}")
    rng = random.Random(seed)
    types = [0 if rng.random() < cpu_prob else 1 for _ in range(n)]
    speeds = [rng.randint(*speed) for _ in range(n)]
    r = np.full((n, n), math.inf)
    for i in range(n):
        for j in range(i + 1, n):
            r[i, j] = r[j, i] = rng.randint(*rate)
    return Cluster(np.asarray(speeds, dtype=float),
                   np.asarray([math.floor(memory_scale / s) for s in speeds], dtype=float),
                   np.asarray(types, dtype=np.int64), r)


def traffic(p: Problem, placement: np.ndarray) -> float:
    """Eq. 2.2, one transfer per (producer, destination device) (Sec. 2.4).

    Parameters
    ----------
    p : Problem
        The graph.
    placement : numpy.ndarray
        The device of every node.

    Returns
    -------
    float
        The bytes moved between devices.

    References
    ----------
    Laich 2017, Eq. 2.2, Sec. 2.4.
    """
    total = 0.0
    for v in range(p.n):
        dv = placement[v]
        dests = {int(placement[s]) for s in p.succ[v]} - {int(dv)}
        total += len(dests) * float(p.size[v])
    return total


def describe_unit(p: Problem, u: int) -> str:
    """``node X`` or ``colocation group of nodes X, Y, ... (k nodes)``.

    Parameters
    ----------
    p : Problem
        The graph.
    u : int
        An assignment unit.

    Returns
    -------
    str

    References
    ----------
    Laich 2017, Sec. 4.1 (assignment units).
    """
    m = p.unit_members[u]
    if len(m) == 1:
        return f"node {p.ids[m[0]]}"
    names = ", ".join(str(p.ids[v]) for v in m[:3])
    return f"colocation group of nodes {names}{', ...' if len(m) > 3 else ''} ({len(m)} nodes)"


def check_fits(p: Problem, c: Cluster, strict: bool = True) -> None:
    """Raise :class:`PlacementError` for the first assignment unit (Sec. 4.1) that no
    device could hold even if it were empty: no device of the type the unit needs, or a
    memory demand (summed ``size_est``) of at least (``strict=False``: more than) the
    largest memory among the devices of that type.

    Parameters
    ----------
    p, c : Problem, Cluster
        The graph whose units must each fit some device, and the devices.
    strict : bool
        Memory must stay below the capacity (the thesis) or may reach it (published code).

    Raises
    ------
    PlacementError
        Naming the unit and what it lacks.

    References
    ----------
    Laich 2017, Sec. 4.1.

    Examples
    --------
    >>> import numpy as np
    >>> p = Problem.build(ops=[1, 1], size=[5, 5], edges=[(0, 1)], colocation=[(0, 1)])
    >>> c = Cluster(np.array([1.0]), np.array([12.0]), np.array([0]), np.array([[np.inf]]))
    >>> try:
    ...     check_fits(p, c)
    ... except PlacementError as e:
    ...     print(e)  # doctest: +NORMALIZE_WHITESPACE
    colocation group of nodes 0, 1 (2 nodes) needs 15 of memory, the largest device of its
    type (any) holds 12
    """
    for u in range(len(p.unit_members)):
        t = int(p.unit_constraint[u])
        mask = c.feasible_type(t)
        if not mask.any():
            raise PlacementError(f"{describe_unit(p, u)} needs a {TYPES[t]} device; there is "
                                 f"none")
        cap = float(c.memory[mask].max())
        need = float(p.unit_mem[u])
        if need > cap or (strict and need == cap):
            kind = "any" if t == NO else TYPES[t]
            raise PlacementError(f"{describe_unit(p, u)} needs {need:g} of memory, the "
                                 f"largest device of its type ({kind}) holds {cap:g}")


def check_placement(p: Problem, c: Cluster, placement: np.ndarray, strict: bool = True,
                    ) -> None:
    """Raise :class:`PlacementError` naming the first broken constraint of Sec. 4.1.

    1. colocated nodes share a device; 2. every node's device has the type it needs;
    3. on every device the summed ``size_est`` stays below the memory (strictly; with
    ``strict=False`` it may reach it, as the published Java code allows).

    Parameters
    ----------
    p, c : Problem, Cluster
        The placed graph and its devices.
    placement : numpy.ndarray
        The device of every node.
    strict : bool
        As in :func:`check_fits`.

    Raises
    ------
    PlacementError
        Naming the first broken constraint.

    References
    ----------
    Laich 2017, Sec. 4.1.
    """
    if len(placement) != p.n:
        raise PlacementError(f"placement has {len(placement)} nodes, the graph {p.n}")
    if p.n and (placement.min() < 0 or placement.max() >= c.n):
        v = int(np.argmax((placement < 0) | (placement >= c.n)))
        raise PlacementError(f"node {p.ids[v]} is not placed on a device 0..{c.n - 1}")
    for members in p.unit_members:
        devs = {int(placement[v]) for v in members}
        if len(devs) > 1:
            raise PlacementError(f"colocated nodes {p.ids[members[0]]} and "
                                 f"{p.ids[members[-1]]} are on different devices")
    for v in range(p.n):
        cons = int(p.constraint[v])
        if cons != NO and c.type[placement[v]] != cons:
            raise PlacementError(f"node {p.ids[v]} needs a {TYPES[cons]} but is on device "
                                 f"{placement[v]} ({TYPES[int(c.type[placement[v]])]})")
    used = np.zeros(c.n)
    np.add.at(used, placement, p.size_est)
    occupied = np.bincount(placement, minlength=c.n) > 0
    over = np.nonzero(occupied & ((used >= c.memory) if strict else (used > c.memory)))[0]
    if len(over):
        d = int(over[0])
        raise PlacementError(f"device {d} holds {used[d]:g} of memory, its capacity is "
                             f"{c.memory[d]:g}")
