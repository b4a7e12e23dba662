"""The op graph: a DAG of operations, the common input of every algorithm in commsched.

An op graph is a plain :class:`networkx.DiGraph` whose nodes are ops and whose edges are
data or control dependencies ("the target may start only after the source finished").
Keeping the networkx type, rather than a subclass, lets researchers use every networkx
algorithm on it directly.

Node attributes
    ``kind``      what the op does: one of :data:`KINDS` (extensible by
                  :func:`register_kind`).
    ``resource``  name of the resource that runs the op (a compute unit, a network channel).
    ``duration``  seconds, a finite float >= 0.
    ``bytes``     optional, bytes moved or produced (int >= 0).
    ``param``     optional, name of the parameter (variable) a transfer carries.
    ``priority``  optional number; among ready ops of a resource, lower runs first.

Any further node or edge attribute is kept as it is (for example ``op_type``, ``control``).

Graph attributes
    ``resources``       {name: capacity}, capacity = how many ops the resource runs at once.
    ``schema_version``  the version of the file format, :data:`SCHEMA_VERSION`.

Files are networkx node-link JSON (``edges`` key) with the graph attributes above.

Examples
--------
>>> g = new_graph({"cpu": 1, "net": 1})
>>> add_op(g, "r", "recv", "net", 2.0, bytes=100, param="w")
>>> add_op(g, "c", "compute", "cpu", 1.0)
>>> g.add_edge("r", "c")
>>> validate(g)
>>> compile_graph(g).ids
['r', 'c']
"""

from __future__ import annotations

import gzip
import json
import os
from dataclasses import dataclass
from itertools import accumulate, chain
from pathlib import Path
from typing import Any

import networkx as nx

from commsched.atomic import atomic_write_bytes
from commsched.errors import CommschedError, GraphError
from commsched.validation import MAX_BYTES, MAX_SECONDS, number, parse_json, read_text, short

__all__ = [
    "KINDS",
    "MAX_CAPACITY",
    "SCHEMA_VERSION",
    "CompiledGraph",
    "add_op",
    "compile_graph",
    "from_json",
    "load",
    "new_graph",
    "register_kind",
    "save",
    "to_json",
    "validate",
]

SCHEMA_VERSION = 1
#: Largest capacity of a resource (ops it runs at once).
MAX_CAPACITY = 2**16

#: Known op kinds. ``compute`` runs on a device; ``recv``/``send`` are parameter-server
#: transfers (TicTac Sec. 2.3); ``allreduce`` is a collective (PACE Sec. IV-A);
#: ``transfer`` is a device-to-device copy (thesis Sec. 3.3); ``collective`` is any other
#: collective (all-gather, reduce-scatter, ...: its type in the ``collective`` attribute,
#: as imported from Chakra traces by :mod:`commsched.io.chakra`).
KINDS: set[str] = {"compute", "recv", "send", "allreduce", "transfer", "collective"}

_REQUIRED = ("kind", "resource", "duration")


def register_kind(name: str) -> None:
    """Allow a new op kind (for an extension that models another kind of op).

    Parameters
    ----------
    name : str
        The kind, added to :data:`KINDS` for the rest of the process.

    Raises
    ------
    ValueError
        ``name`` is empty or not a string.
    """
    if not name or not isinstance(name, str):
        raise ValueError("an op kind is a non-empty string")
    KINDS.add(name)


def new_graph(resources: dict[str, int], **attrs: Any) -> nx.DiGraph:
    """An empty op graph with the given resources and extra graph attributes.

    Parameters
    ----------
    resources : dict of str to int
        ``{resource: capacity}``, capacity = ops it runs at once (``1..MAX_CAPACITY``,
        checked by :func:`validate`, not here).
    **attrs
        Further graph attributes (``meta``, ``variables``, ...).

    Returns
    -------
    networkx.DiGraph
        A graph without nodes, ``schema_version`` = :data:`SCHEMA_VERSION`.
    """
    g = nx.DiGraph()
    g.graph["schema_version"] = SCHEMA_VERSION
    g.graph["resources"] = dict(resources)
    g.graph.update(attrs)
    return g


def add_op(
    g: nx.DiGraph, op_id: str, kind: str, resource: str, duration: float, **attrs: Any
) -> None:
    """Add one op to an op graph (unchecked: :func:`validate` checks the whole graph).

    Parameters
    ----------
    g : networkx.DiGraph
        The op graph, changed in place.
    op_id : str
        The new node's id.
    kind : str
        One of :data:`KINDS`.
    resource : str
        A resource of ``g.graph["resources"]``.
    duration : float
        Seconds, ``0..MAX_SECONDS``; stored as a float.
    **attrs
        Further node attributes: ``bytes``, ``param``, ``priority`` or anything else
        (module docstring).
    """
    g.add_node(op_id, kind=kind, resource=resource, duration=float(duration), **attrs)


def _where(source: str | None) -> str:
    return f"{source}: " if source else ""


def _is_id(x: object) -> bool:
    return isinstance(x, (str, int)) and not isinstance(x, bool)


def validate(g: nx.DiGraph, source: str | None = None) -> None:
    """Raise :class:`GraphError` naming the first problem found, else return None.

    Checks, in this order: the resources table (capacities are integers in
    ``1..MAX_CAPACITY``), every node's attributes (``duration`` in
    ``[0, commsched.validation.MAX_SECONDS]``, ``bytes`` in ``[0, MAX_BYTES]``, a finite
    ``priority``), then acyclicity.

    Parameters
    ----------
    g : networkx.DiGraph
        The op graph.
    source : str, optional
        A file name, prefixing the message.

    Raises
    ------
    GraphError
        No or an empty ``resources`` table, a bad capacity, a node missing ``kind``,
        ``resource`` or ``duration``, an unknown kind or resource, a value out of range,
        or a cycle (the message spells it).
    """
    where = _where(source)
    resources = g.graph.get("resources")
    if not isinstance(resources, dict) or not resources:
        raise GraphError(f"{where}graph attribute 'resources' must be a non-empty mapping")
    try:
        for name, cap in resources.items():
            number(cap, f"{where}resource {short(name)}: capacity", 1, MAX_CAPACITY,
                   integer=True)
        for n, a in g.nodes(data=True):
            for field in _REQUIRED:
                if field not in a:
                    raise GraphError(f"{where}node {short(n)}: missing field {field!r}")
            if not isinstance(a["kind"], str) or a["kind"] not in KINDS:
                raise GraphError(f"{where}node {short(n)}: unknown kind {short(a['kind'])} "
                                 f"(known: {', '.join(sorted(KINDS))})")
            if not isinstance(a["resource"], str) or a["resource"] not in resources:
                raise GraphError(f"{where}node {short(n)}: unknown resource "
                                 f"{short(a['resource'])}")
            number(a["duration"], f"{where}node {short(n)}: duration", 0, MAX_SECONDS)
            if a.get("bytes") is not None:
                number(a["bytes"], f"{where}node {short(n)}: bytes", 0, MAX_BYTES)
            if a.get("priority") is not None:
                number(a["priority"], f"{where}node {short(n)}: priority")
    except GraphError:
        raise
    except CommschedError as e:
        raise GraphError(str(e)) from None
    if nx.is_directed_acyclic_graph(g):  # linear time; find_cycle only to name the cycle
        return
    cycle = nx.find_cycle(g)
    path = " -> ".join(str(u) for u, _ in cycle) + f" -> {cycle[0][0]}"
    raise GraphError(f"{where}cycle through node {cycle[0][0]!r}: {path}")


def to_json(g: nx.DiGraph) -> dict[str, Any]:
    """The node-link dictionary of ``g`` (the on-disk format).

    Parameters
    ----------
    g : networkx.DiGraph
        An op graph; it is not validated.

    Returns
    -------
    dict
        ``{"graph", "nodes", "edges", ...}`` as :func:`networkx.node_link_data` writes
        it (``edges`` key), with ``schema_version`` first among the graph attributes.
    """
    data: dict[str, Any] = nx.node_link_data(g, edges="edges")
    data["graph"] = {"schema_version": SCHEMA_VERSION, **data["graph"]}
    return data


def from_json(data: object, source: str | None = None) -> nx.DiGraph:
    """Build and validate an op graph from its node-link dictionary.

    Parameters
    ----------
    data : object
        Decoded JSON, as :func:`to_json` writes it.
    source : str, optional
        A file name, prefixing every message.

    Returns
    -------
    networkx.DiGraph
        The valid op graph.

    Raises
    ------
    GraphError
        ``data`` is not an object with ``graph``, ``nodes`` and ``edges``, has another
        ``schema_version``, a node without a string or integer id, a duplicate id, an
        edge to a missing node, or fails :func:`validate`.
    """
    where = _where(source)
    if not isinstance(data, dict):
        raise GraphError(f"{where}expected a JSON object with 'nodes' and 'edges'")
    for key in ("graph", "nodes", "edges"):
        if key not in data:
            raise GraphError(f"{where}missing top-level field {key!r}")
    version = data["graph"].get("schema_version") if isinstance(data["graph"], dict) else None
    if version != SCHEMA_VERSION:
        raise GraphError(
            f"{where}schema_version {version!r} is not supported (expected {SCHEMA_VERSION})"
        )
    for key in ("nodes", "edges"):
        if not isinstance(data[key], list):
            raise GraphError(f"{where}top-level field {key!r} must be a list, got "
                             f"{type(data[key]).__name__}")
    ids = set()
    for i, node in enumerate(data["nodes"]):
        if not isinstance(node, dict) or "id" not in node:
            raise GraphError(f"{where}node #{i}: missing field 'id'")
        if not _is_id(node["id"]):
            raise GraphError(f"{where}node #{i}: id must be a string or an integer, got "
                             f"{short(node['id'])}")
        if node["id"] in ids:
            raise GraphError(f"{where}node {short(node['id'])}: duplicate id")
        ids.add(node["id"])
    for i, edge in enumerate(data["edges"]):
        if not isinstance(edge, dict) or "source" not in edge or "target" not in edge:
            raise GraphError(f"{where}edge #{i}: needs 'source' and 'target'")
        for end in ("source", "target"):
            if not _is_id(edge[end]) or edge[end] not in ids:
                raise GraphError(
                    f"{where}edge #{i} {short(edge['source'])} -> {short(edge['target'])}: "
                    f"node {short(edge[end])} does not exist"
                )
    g: nx.DiGraph = nx.node_link_graph(data, directed=True, multigraph=False, edges="edges")
    validate(g, source)
    return g


def load(path: str | os.PathLike[str]) -> nx.DiGraph:
    """Read and validate an op graph file (JSON, gzip-compressed or not); errors name it.

    Parameters
    ----------
    path : str or os.PathLike
        The file.

    Returns
    -------
    networkx.DiGraph
        The graph the file holds, validated.

    Raises
    ------
    GraphError
        The file cannot be read or decoded, or :func:`from_json` rejects it.
    """
    try:
        data = parse_json(read_text(path), path)
    except CommschedError as e:
        raise GraphError(str(e)) from None
    return from_json(data, os.fspath(path))


def save(g: nx.DiGraph, path: str | os.PathLike[str]) -> None:
    """Validate ``g`` and write it atomically as node-link JSON (gzip if ``path`` ends .gz).

    Gzip output is byte-for-byte reproducible (no timestamp in the header).

    Parameters
    ----------
    g : networkx.DiGraph
        The op graph.
    path : str or os.PathLike
        The output file, replaced atomically.

    Raises
    ------
    GraphError
        ``g`` fails :func:`validate` (nothing is written).
    """
    validate(g, os.fspath(path))
    data = json.dumps(to_json(g), separators=(",", ":"), allow_nan=False).encode("utf-8")
    if Path(path).suffix == ".gz":
        data = gzip.compress(data, mtime=0)
    atomic_write_bytes(path, data)


@dataclass(frozen=True)
class CompiledGraph:
    """Array form of an op graph for fast simulation.

    Ops are numbered 0..n-1 in the graph's node order. ``succ_ptr``/``succ_idx`` are the
    successor lists in CSR form; ``priority[i]`` is None for an op without a priority.
    """

    ids: list[str]
    duration: list[float]
    resource: list[int]
    priority: list[float | None]
    indegree: list[int]
    succ_ptr: list[int]
    succ_idx: list[int]
    resource_names: list[str]
    capacity: list[int]

    @property
    def n(self) -> int:
        return len(self.ids)


def compile_graph(g: nx.DiGraph, priorities: dict[str, float] | None = None,
                  source: str | None = None) -> CompiledGraph:
    """Compile ``g`` to arrays; ``priorities`` (op id -> number) override node priorities.

    One pass over the nodes' attributes and one over the adjacency (the successors of each
    op in their insertion order, which fixes the order in which a finishing op makes its
    successors ready); no networkx view per node (``g.nodes[n]``, ``g.adj[n]``: seconds at
    1M ops).

    Parameters
    ----------
    g : networkx.DiGraph
        A valid op graph (:func:`validate`).
    priorities : dict, optional
        Op id -> priority, overriding the ``priority`` node attribute.
    source : str, optional
        The priorities' file, prefixing the error of an op not in the graph.

    Returns
    -------
    CompiledGraph

    Raises
    ------
    GraphError
        ``priorities`` names an op that is not in ``g``.
    """
    # No list of (id, attributes) pairs: a million new tuples would start the garbage
    # collector's full passes over the graph (seconds at 1M ops).
    ids = list(g.nodes)
    attrs = [a for _, a in g.nodes(data=True)]
    index = dict(zip(ids, range(len(ids)), strict=True))
    rnames = list(g.graph["resources"])
    rindex = {r: i for i, r in enumerate(rnames)}
    prio: list[float | None] = [a.get("priority") for a in attrs]
    if priorities:
        for op, p in priorities.items():
            if op not in index:
                raise GraphError(f"{_where(source)}priorities name op {short(op)}, which is "
                                 "not in the graph")
            prio[index[op]] = p
    adjacency = [nbrs for _, nbrs in g.adjacency()]  # in node order, like ids
    succ_idx = list(map(index.__getitem__, chain.from_iterable(adjacency)))
    indeg = [0] * len(ids)
    for j in succ_idx:
        indeg[j] += 1
    return CompiledGraph(
        ids=ids,
        duration=[float(a["duration"]) for a in attrs],
        resource=[rindex[a["resource"]] for a in attrs],
        priority=prio,
        indegree=indeg,
        succ_ptr=[0, *accumulate(map(len, adjacency))],
        succ_idx=succ_idx,
        resource_names=rnames,
        capacity=[int(g.graph["resources"][r]) for r in rnames],
    )
