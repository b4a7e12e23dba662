"""Read and write the CSV graph and device formats of the partitioning thesis' simulator.

The formats are those of the simulator published with Laich's B.Sc. thesis (Stuttgart
2017) and Mayer, Mayer & Laich, "The TensorFlow partitioning and scheduling problem: it's
the critical path!", DIDL 2017 (doi:10.1145/3154842.3154843); thesis Sec. 5 describes the
simulator's input. Lists inside a field are separated by ``;``; an empty field is an empty
list.

Graph files have one header line (optionally preceded by a ``Meta,...`` line that the
thesis' generator writes) and one line per node, in one of two variants:

* 6 columns: Id, successors, predecessors, colocation ids, #tensorSize, #operations;
* 9 columns: the same, then RAM storage, device constraint (``CPU``, ``GPU``, ``TPU``
  or ``NO``) and the TensorFlow op name.

:func:`read_graph` returns a :class:`networkx.DiGraph` with integer node ids and the node
attributes

``tensor_size``  size of the node's output tensor (the same on every outgoing edge), int;
``operations``   compute cost; the time on a device is ``operations / speed``, int;
``ram``          memory the node needs on its device (int), None in the 6-column variant;
``constraint``   ``CPU``, ``GPU``, ``TPU`` or ``NO`` (any device); ``NO`` in the 6-column
                 variant;
``name``         the TensorFlow op name, None in the 6-column variant;
``colocation``   the colocation group id: the smallest node id of the node's group, where
                 groups are the transitive closure of the colocation lists (a node without
                 colocation partners is its own group).

and graph attribute ``columns`` (6 or 9). Successor and predecessor lists are redundant;
the reader checks that they agree.

Device files have one header line and one line per device: Id (0..n-1), RAM, speed
(operations per time unit), transfer rates to the devices with larger ids (device i lists
i+1, ..., n-1: an upper triangular matrix; rates are symmetric, a device talks to itself
for free) and type (``CPU``, ``GPU``, ``TPU``). :func:`read_devices` returns a
:class:`Devices`.

Every malformed input raises :class:`~commsched.errors.CommschedError` with one line naming
the file, the line and the column; every integer must lie in ``0..2**53``
(:data:`commsched.validation.MAX_BYTES`), and a graph needs at least one node line.

Examples
--------
>>> import tempfile, pathlib
>>> with tempfile.TemporaryDirectory() as d:
...     p = pathlib.Path(d, "g.csv")
...     _ = p.write_text("Id,out,in,coloc,size,ops\\n0,1,,1,10,5\\n1,,0,0,20,7\\n")
...     g = read_graph(p)
>>> sorted(g.edges), g.nodes[1]["operations"], g.nodes[1]["colocation"]
([(0, 1)], 7, 0)
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import networkx as nx

from commsched.atomic import atomic_write_text
from commsched.errors import CommschedError
from commsched.model.graph import add_op, new_graph
from commsched.validation import MAX_BYTES, read_text, short

__all__ = [
    "CONSTRAINTS",
    "DEVICE_TYPES",
    "Devices",
    "colocation_groups",
    "read_devices",
    "read_graph",
    "to_op_graph",
    "write_devices",
    "write_graph",
]

#: Device constraint values of the 9-column graph variant (``NO`` = any device).
CONSTRAINTS = ("CPU", "GPU", "TPU", "NO")
#: Device types of the device format.
DEVICE_TYPES = ("CPU", "GPU", "TPU")

_GRAPH_COLUMNS = {
    6: ("Id", "successors", "predecessors", "colocation", "#tensorSize", "#operations"),
    9: ("Id", "successors", "predecessors", "colocation", "#tensorSize", "#operations",
        "RAM storage", "device constraint", "name"),
}
_GRAPH_HEADER = {
    6: "Id,(Outgoing) node,(Incoming) node,Colocation nodes,#tensorSize, #operations",
    9: "Id,(Outgoing) node,(Incoming) node,Colocation nodes,#tensorSize, #operations, "
       "RAM storage,Device constraint ,name",
}
_DEVICE_COLUMNS = ("Id", "RAM", "#operations", "communication speed", "type")
_DEVICE_HEADER = "Id,RAM,#operations,commnication speed,type"


class _Lines:
    """Numbered, split lines of a CSV file with one-line error messages."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        text = read_text(self.path)
        self.lines = [(i + 1, line) for i, line in enumerate(text.splitlines()) if line.strip()]

    def error(
        self, line: int, msg: str, column: int | None = None, name: str = ""
    ) -> CommschedError:
        if column is None:
            return CommschedError(f"{self.path}:{line}: {msg}")
        label = f" ({name})" if name else ""
        return CommschedError(f"{self.path}:{line}: column {column}{label}: {msg}")

    def integer(self, line: int, field: str, column: int, name: str, minimum: int = 0) -> int:
        try:
            value = int(field.strip())
        except ValueError:
            raise self.error(line, f"not an integer: {short(field.strip())}", column,
                             name) from None
        if value < minimum:
            raise self.error(line, f"must be >= {minimum}, got {short(value)}", column, name)
        if value > MAX_BYTES:
            raise self.error(line, f"must be <= {MAX_BYTES}, got {short(value)}", column, name)
        return value

    def int_list(self, line: int, field: str, column: int, name: str) -> list[int]:
        field = field.strip()
        if not field:
            return []
        return [self.integer(line, x, column, name) for x in field.split(";")]


def colocation_groups(pairs: Iterable[tuple[int, int]], nodes: Iterable[int]) -> dict[int, int]:
    """Close colocation pairs transitively: ``{node: smallest node id of its group}``.

    >>> colocation_groups([(3, 1), (1, 5)], [1, 2, 3, 5])
    {1: 1, 2: 2, 3: 1, 5: 1}
    """
    u = nx.Graph()
    u.add_nodes_from(nodes)
    u.add_edges_from(pairs)
    group: dict[int, int] = {}
    for comp in nx.connected_components(u):
        root = min(comp)
        for n in comp:
            group[n] = root
    return {n: group[n] for n in u.nodes}


def read_graph(path: str | os.PathLike[str]) -> nx.DiGraph:
    """Read a thesis graph CSV (6- or 9-column variant); see the module docstring.

    Raises
    ------
    CommschedError
        One line naming file, line and column: wrong column count, bad or negative
        integer, unknown device constraint, duplicate id, a list naming a missing node,
        successor and predecessor lists that disagree, a self-loop or a cycle.
    """
    src = _Lines(path)
    lines = src.lines
    if lines and lines[0][1].split(",")[0].strip() == "Meta":
        lines = lines[1:]
    if not lines:
        raise CommschedError(f"{src.path}: empty file (expected a header line)")
    head_no, head = lines[0]
    ncol = len(head.split(","))
    if ncol not in _GRAPH_COLUMNS:
        raise src.error(head_no, f"header has {ncol} columns, expected 6 or 9")
    names = _GRAPH_COLUMNS[ncol]
    if len(lines) == 1:
        raise src.error(head_no, "no node lines after the header")
    rows: dict[int, dict[str, Any]] = {}
    for no, line in lines[1:]:
        f = line.split(",")
        if len(f) != ncol:
            raise src.error(no, f"{len(f)} columns, expected {ncol} like the header")
        nid = src.integer(no, f[0], 1, names[0])
        if nid in rows:
            raise src.error(no, f"node {nid} appears twice (first on line {rows[nid]['line']})",
                            1, names[0])
        row: dict[str, Any] = {
            "line": no,
            "succ": src.int_list(no, f[1], 2, names[1]),
            "pred": src.int_list(no, f[2], 3, names[2]),
            "coloc": src.int_list(no, f[3], 4, names[3]),
            "tensor_size": src.integer(no, f[4], 5, names[4]),
            "operations": src.integer(no, f[5], 6, names[5]),
            "ram": None,
            "constraint": "NO",
            "name": None,
        }
        if ncol == 9:
            row["ram"] = src.integer(no, f[6], 7, names[6])
            constraint = f[7].strip()
            if constraint not in CONSTRAINTS:
                raise src.error(no, f"unknown device constraint {constraint!r} "
                                f"(expected one of {', '.join(CONSTRAINTS)})", 8, names[7])
            row["constraint"] = constraint
            row["name"] = f[8].strip()
        rows[nid] = row
    for nid, row in rows.items():
        for col, key in ((2, "succ"), (3, "pred"), (4, "coloc")):
            for other in row[key]:
                if other not in rows:
                    raise src.error(row["line"], f"node {nid} names node {other}, which has no "
                                    "line", col, names[col - 1])
                if other == nid and key != "coloc":
                    raise src.error(row["line"], f"node {nid} lists itself (self-loop)", col,
                                    names[col - 1])
    for nid, row in rows.items():
        for s in row["succ"]:
            if nid not in rows[s]["pred"]:
                raise src.error(row["line"], f"node {nid} lists successor {s}, but node {s} "
                                f"(line {rows[s]['line']}) does not list {nid} as predecessor",
                                2, names[1])
        for p in row["pred"]:
            if nid not in rows[p]["succ"]:
                raise src.error(row["line"], f"node {nid} lists predecessor {p}, but node {p} "
                                f"(line {rows[p]['line']}) does not list {nid} as successor",
                                3, names[2])
    group = colocation_groups(((n, c) for n, r in rows.items() for c in r["coloc"]), rows)
    g = nx.DiGraph(columns=ncol)
    for nid, row in rows.items():
        g.add_node(nid, tensor_size=row["tensor_size"], operations=row["operations"],
                   ram=row["ram"], constraint=row["constraint"], name=row["name"],
                   colocation=group[nid])
    for nid, row in rows.items():
        g.add_edges_from((nid, s) for s in row["succ"])
    try:
        cycle = nx.find_cycle(g)
    except nx.NetworkXNoCycle:
        return g
    path_txt = " -> ".join(str(u) for u, _ in cycle) + f" -> {cycle[0][0]}"
    raise src.error(rows[cycle[0][0]]["line"], f"cycle through node {cycle[0][0]}: {path_txt}",
                    2, names[1])


def _join(xs: Iterable[int]) -> str:
    return ";".join(str(x) for x in xs)


def write_graph(g: nx.DiGraph, path: str | os.PathLike[str], columns: int | None = None) -> None:
    """Write a thesis-style graph (as returned by :func:`read_graph`) as CSV, atomically.

    ``columns`` (6 or 9) defaults to the graph attribute ``columns``, else 9. A node's
    colocation field lists the other members of its group.
    """
    ncol = columns if columns is not None else int(g.graph.get("columns", 9))
    if ncol not in _GRAPH_COLUMNS:
        raise ValueError(f"columns must be 6 or 9, got {ncol}")
    members: dict[int, list[int]] = {}
    for n, a in g.nodes(data=True):
        members.setdefault(a.get("colocation", n), []).append(n)
    out = [_GRAPH_HEADER[ncol]]
    for n, a in g.nodes(data=True):
        peers = [m for m in members[a.get("colocation", n)] if m != n]
        f = [str(n), _join(g.successors(n)), _join(g.predecessors(n)), _join(peers),
             str(a["tensor_size"]), str(a["operations"])]
        if ncol == 9:
            ram = a.get("ram")
            f += ["0" if ram is None else str(ram), a.get("constraint", "NO"), a.get("name") or ""]
        out.append(",".join(f))
    atomic_write_text(path, "\n".join(out) + "\n")


@dataclass(frozen=True)
class Devices:
    """Devices of a thesis device file, indexed 0..n-1.

    ``rates[i][j]`` is the symmetric transfer rate between devices i and j (tensor size per
    time unit); ``rates[i][i]`` is ``inf`` (a device talks to itself for free).
    """

    ids: list[int]
    ram: list[int]
    speed: list[int]
    type: list[str]
    rates: list[list[float]]

    @property
    def n(self) -> int:
        return len(self.ids)

    def rate(self, a: int, b: int) -> float:
        """Transfer rate between devices ``a`` and ``b`` (``inf`` when ``a == b``)."""
        return self.rates[a][b]

    def transfer_time(self, tensor_size: float, a: int, b: int) -> float:
        """Time to move ``tensor_size`` from device ``a`` to ``b``: size / rate (Sec. 3.3)."""
        return 0.0 if a == b else tensor_size / self.rates[a][b]

    def compute_time(self, operations: float, device: int) -> float:
        """Time of ``operations`` on ``device``: operations / speed."""
        return operations / self.speed[device]


def read_devices(path: str | os.PathLike[str]) -> Devices:
    """Read a thesis device CSV; see the module docstring.

    Raises
    ------
    CommschedError
        One line naming file, line and column: wrong column count, bad integer, negative
        RAM, speed or rate <= 0, unknown type, duplicate or missing device id, a rate row
        of the wrong length.
    """
    src = _Lines(path)
    if not src.lines:
        raise CommschedError(f"{src.path}: empty file (expected a header line)")
    rows: dict[int, tuple[int, int, int, list[int], str]] = {}
    for no, line in src.lines[1:]:
        f = line.split(",")
        if len(f) != len(_DEVICE_COLUMNS):
            raise src.error(no, f"{len(f)} columns, expected {len(_DEVICE_COLUMNS)}")
        did = src.integer(no, f[0], 1, _DEVICE_COLUMNS[0])
        if did in rows:
            raise src.error(no, f"device {did} appears twice (first on line {rows[did][0]})", 1,
                            _DEVICE_COLUMNS[0])
        ram = src.integer(no, f[1], 2, _DEVICE_COLUMNS[1])
        speed = src.integer(no, f[2], 3, _DEVICE_COLUMNS[2], minimum=1)
        rates = [src.integer(no, x, 4, _DEVICE_COLUMNS[3], minimum=1)
                 for x in f[3].split(";")] if f[3].strip() else []
        dtype = f[4].strip()
        if dtype not in DEVICE_TYPES:
            raise src.error(no, f"unknown device type {dtype!r} (expected one of "
                            f"{', '.join(DEVICE_TYPES)})", 5, _DEVICE_COLUMNS[4])
        rows[did] = (no, ram, speed, rates, dtype)
    if not rows:
        raise CommschedError(f"{src.path}: no device lines")
    # The device count the file implies: its lines, its largest id, its longest rate row.
    implied = {i: max(i + 1, i + 1 + len(r[3])) for i, r in rows.items()}
    n = max(len(rows), *implied.values())
    missing = sorted(set(range(n)) - set(rows))
    if missing:
        i = max(implied, key=lambda k: (implied[k], -k))
        raise src.error(rows[i][0], f"device {i} implies {n} devices (ids 0..{n - 1}) but "
                        f"there is no line for device {missing[0]}", 1, _DEVICE_COLUMNS[0])
    rates_m = [[math.inf if i == j else 0.0 for j in range(n)] for i in range(n)]
    for i in range(n):
        no, _, _, row, _ = rows[i]
        if len(row) != n - 1 - i:
            raise src.error(no, f"device {i} lists {len(row)} rates, expected {n - 1 - i} "
                            f"(to devices {i + 1}..{n - 1})", 4, _DEVICE_COLUMNS[3])
        for k, r in enumerate(row):
            j = i + 1 + k
            rates_m[i][j] = rates_m[j][i] = float(r)
    return Devices(
        ids=list(range(n)),
        ram=[rows[i][1] for i in range(n)],
        speed=[rows[i][2] for i in range(n)],
        type=[rows[i][4] for i in range(n)],
        rates=rates_m,
    )


def write_devices(d: Devices, path: str | os.PathLike[str]) -> None:
    """Write ``d`` in the thesis device format, atomically (rates must be integers)."""
    out = [_DEVICE_HEADER]
    for i in d.ids:
        rates = _join(int(d.rates[i][j]) for j in range(i + 1, d.n))
        out.append(f"{i},{d.ram[i]},{d.speed[i]},{rates},{d.type[i]}")
    atomic_write_text(path, "\n".join(out) + "\n")


def to_op_graph(g: nx.DiGraph, speed: float = 1.0, resource: str = "cpu") -> nx.DiGraph:
    """The op graph of a thesis-style graph on one device of the given ``speed``.

    Each node becomes a ``compute`` op ``str(id)`` on ``resource`` (capacity 1) with
    ``duration = operations / speed`` (thesis Sec. 3.3), ``bytes = tensor_size`` and the
    thesis attributes (``tensor_size``, ``operations``, ``ram``, ``constraint``, ``name``,
    ``colocation``) kept; each edge keeps its direction and gets ``bytes = tensor_size`` of
    its source. Placement onto several devices is the partitioners' business.
    """
    if not speed > 0:
        raise ValueError(f"speed must be > 0, got {speed}")
    og = new_graph({resource: 1}, thesis_columns=int(g.graph.get("columns", 9)))
    for n, a in g.nodes(data=True):
        extra = {k: a.get(k) for k in ("tensor_size", "operations", "ram", "constraint", "name")}
        add_op(og, str(n), "compute", resource, a["operations"] / speed,
               bytes=a["tensor_size"], colocation=str(a.get("colocation", n)), **extra)
    og.add_edges_from((str(u), str(v), {"bytes": g.nodes[u]["tensor_size"]})
                      for u, v in g.edges)
    return og
