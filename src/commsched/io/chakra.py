"""Chakra execution traces (MLCommons) in and out of commsched's op graph.

A Chakra execution trace (ET) is one file per rank: a length-delimited protobuf stream
(each message preceded by its size as a varint) of one ``GlobalMetadata`` followed by
``Node`` messages (schema ``et_def.proto`` of the ``mlc-chakra`` package). A node has an
``id``, a ``name``, a ``type`` (``COMP_NODE``, ``COMM_SEND_NODE``, ``COMM_RECV_NODE``,
``COMM_COLL_NODE``, ``MEM_LOAD_NODE``, ``MEM_STORE_NODE``, ``METADATA_NODE``),
``data_deps`` and ``ctrl_deps`` (ids of nodes of the same file it waits for),
``duration_micros``, tensor ``inputs``/``outputs`` and typed attributes (``comm_type``,
``comm_size``, ``comm_src``, ``comm_dst``, ``comm_tag``, ``pg_name``, ...).

Import (:func:`import_chakra`) maps node by node:

=====================================  ===============================================
Chakra                                 commsched op graph
=====================================  ===============================================
``COMP_NODE``                          op of kind ``compute`` on the rank's compute
                                       resource (``cpu``; ``rank<r>:cpu`` with several
                                       ranks), ``duration`` = ``duration_micros`` * 1e-6
``COMM_COLL_NODE``, one per member     one op joining the ranks (``ranks``): kind
rank (the k-th of its ``pg_name`` on   ``allreduce`` for ``ALL_REDUCE``, else
each rank)                             ``collective`` with ``collective`` = the type
                                       name; ``bytes`` = ``comm_size``; resource
                                       ``net`` (``net:<pg_name>``); duration the longest
                                       member's
``COMM_SEND_NODE`` on a and the        one ``transfer`` op (``src``, ``dst``, ``tag``,
matching ``COMM_RECV_NODE`` on b       ``bytes`` = ``comm_size``) on ``link:a->b``;
(k-th a->b send with tag t = k-th      without the peer's file: a ``send`` / ``recv``
receive from a with tag t)             op with ``peer``
``data_deps`` / ``ctrl_deps``          edges with ``control`` False / True
``name``                               ``name`` and ``op_type``
``MEM_LOAD``/``MEM_STORE``/            kept as ``compute`` ops with ``chakra_type``
``METADATA``/``INVALID`` nodes         (and ``bytes`` = ``tensor_size``), counted as
                                       unmapped
=====================================  ===============================================

Every op also gets the traced-graph fields of :mod:`commsched.model.traced` (``samples``
= [duration], ``out_bytes`` from the outputs' shapes and types, ``is_gradient``) and the
graph gets ``meta`` and ``variables``, so that the views, PACE and the placement suite
accept an imported rank. For a PyTorch ET (the ``ExecutionTraceObserver`` path, with an
``Optimizer.step`` node), the import finds the parameters from the
tensor ids: the optimizer's in-place updates name a parameter and its gradient, a
``torch::autograd::AccumulateGrad`` op outputs the gradient (``grad_of``), forward ops
that take the parameter read it (``reads``), ops under ``autograd::engine`` are the
backward pass (``is_gradient``).

What cannot be mapped is counted (:attr:`Imported.unmapped`, one summary line) and never
dropped silently: node types without a commsched kind (kept as compute ops), collectives
or point-to-point ops without a size (kept without ``bytes``), dependencies on nodes that
are not in the file (dropped: there is no node to connect to; real PyTorch ETs contain
them after the converter removes dangling nodes), collectives whose k-th members disagree
in type or size and point-to-point ops without their peer's file (kept per rank, not
joined). ``strict=True`` turns any of these into an error. A malformed protobuf, a
duplicate node id or rank, and a cycle are always errors.

Export (:func:`export_chakra`) writes one ET per rank: a node's rank is its ``rank``
attribute (0 if absent); ``compute`` -> ``COMP_NODE``, ``allreduce``/``collective`` ->
``COMM_COLL_NODE`` on every rank of ``ranks`` (all ranks if absent), ``transfer`` with
``src``/``dst`` -> a ``COMM_SEND_NODE`` on ``src`` and a ``COMM_RECV_NODE`` on ``dst``,
``send``/``recv`` -> ``COMM_SEND_NODE``/``COMM_RECV_NODE``; ``duration_micros`` =
round(duration * 1e6), ``comm_size`` = bytes. Chakra's fields cannot hold everything a
commsched graph has (sub-microsecond times, resources, traced-graph fields, edge bytes,
dependencies across ranks), so every node also carries its commsched id and attributes
as JSON in the attributes ``commsched.id`` / ``commsched.attrs`` / ``commsched.in_edges``
and the graph attributes travel in ``GlobalMetadata`` (the key ``commsched.graph``): import of an
ET commsched wrote gives the same graph back (nodes, edges and all attributes), while
Chakra's own fields stay authoritative where they disagree (an ET edited by another tool).
``replicas=N`` writes a one-rank graph as N data-parallel ranks (collectives on all).

References
----------
MLCommons Chakra, ``schema/protobuf/et_def.proto`` and ``src/third_party/utils/protolib.py``
(length-delimited messages), https://github.com/mlcommons/chakra.
"""

from __future__ import annotations

import ast
import bisect
import gzip
import json
import math
import os
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import networkx as nx
from chakra.schema.protobuf import et_def_pb2 as pb
from google.protobuf.message import DecodeError

from commsched.atomic import atomic_write_bytes
from commsched.errors import CommschedError, GraphError
from commsched.io.varint import read_varint, write_varint
from commsched.model import graph

__all__ = [
    "COLLECTIVE_KIND",
    "Imported",
    "export_chakra",
    "import_chakra",
    "link_kineto_cpu",
    "read_et",
    "write_et",
]

#: Op kind of a collective other than all-reduce (its type in the ``collective``
#: attribute; one of :data:`commsched.model.graph.KINDS`).
COLLECTIVE_KIND = "collective"

_ID, _ATTRS, _IN_EDGES, _GRAPH, _RANK, _INDEX = (
    "commsched.id", "commsched.attrs", "commsched.in_edges", "commsched.graph", "commsched.rank",
    "commsched.index",
)
_NODE_TYPE = {v: k for k, v in pb.NodeType.items()}
_COLL_TYPE = {v: k for k, v in pb.CollectiveCommType.items()}
_KIND_TYPE = {
    "compute": pb.COMP_NODE, "allreduce": pb.COMM_COLL_NODE, COLLECTIVE_KIND: pb.COMM_COLL_NODE,
    "send": pb.COMM_SEND_NODE, "recv": pb.COMM_RECV_NODE,
}
_ROOTS = ("[pytorch|profiler|execution_trace|thread]", "[pytorch|profiler|execution_graph|thread]")
_DTYPE_BYTES = {
    "float": 4, "double": 8, "half": 2, "bfloat16": 2, "long": 8, "int": 4, "short": 2,
    "char": 1, "signed char": 1, "unsigned char": 1, "bool": 1, "c10::half": 2,
    "c10::bfloat16": 2, "int64_t": 8, "long int": 8, "complex<float>": 8,
    "complex<double>": 16, "c10::complex<float>": 8, "c10::complex<double>": 16,
}


# --------------------------------------------------------------------------------------
# The file format: length-delimited protobuf messages.


def read_et(path: str | os.PathLike[str]) -> tuple[Any, list[Any]]:
    """The ``GlobalMetadata`` and the ``Node`` messages of one Chakra ET file.

    Reads the stream Chakra's ``protolib.encodeMessage`` writes (gzip-compressed or
    not): each message preceded by its size as a varint, ``GlobalMetadata`` first.

    Parameters
    ----------
    path
        The ET file.

    Returns
    -------
    tuple
        ``(GlobalMetadata, [Node, ...])``, the messages of ``et_def_pb2``.

    Raises
    ------
    CommschedError
        The file cannot be read or is not a well-formed stream of Chakra messages
        (one line naming the file and the message).
    """
    p = Path(path)
    try:
        buf = p.read_bytes()
        if buf[:2] == b"\x1f\x8b":
            buf = gzip.decompress(buf)
    except (OSError, EOFError) as e:
        raise CommschedError(f"{p}: cannot read: {getattr(e, 'strerror', None) or e}") from None
    where = str(p)
    messages: list[bytes] = []
    pos = 0
    while pos < len(buf):
        try:
            size, pos = read_varint(buf, pos)
        except ValueError as e:
            raise CommschedError(f"{where}: malformed Chakra trace: message length: {e}"
                                 ) from None
        if pos + size > len(buf):
            raise CommschedError(
                f"{where}: malformed Chakra trace: message #{len(messages)} is truncated "
                f"({size} bytes announced, {len(buf) - pos} left)"
            )
        messages.append(buf[pos:pos + size])
        pos += size
    if not messages:
        raise CommschedError(f"{where}: empty Chakra trace (no GlobalMetadata)")
    meta = pb.GlobalMetadata()
    nodes = []
    try:
        meta.ParseFromString(messages[0])
        for m in messages[1:]:
            n = pb.Node()
            n.ParseFromString(m)
            nodes.append(n)
    except DecodeError as e:
        what = f"node #{len(nodes)}" if len(nodes) or meta.ByteSize() else "GlobalMetadata"
        raise CommschedError(f"{where}: malformed Chakra trace: {what}: {e}") from None
    return meta, nodes


def write_et(path: str | os.PathLike[str], meta: Any, nodes: Iterable[Any]) -> None:
    """Write one Chakra ET file atomically, as Chakra's ``protolib.encodeMessage`` does.

    Parameters
    ----------
    path
        The file to write.
    meta
        The ``GlobalMetadata`` message (written first).
    nodes
        The ``Node`` messages, in file order.
    """
    out = bytearray()
    for m in (meta, *nodes):
        data = m.SerializeToString()
        write_varint(len(data), out)
        out += data
    atomic_write_bytes(path, bytes(out))


def _attr_value(a: Any) -> Any:
    which = a.WhichOneof("value")
    if which is None:
        return None
    v = getattr(a, which)
    return list(v.values) if which.endswith("_list") else v


def _attrs(msg: Any) -> dict[str, Any]:
    return {a.name: _attr_value(a) for a in msg.attr}


# --------------------------------------------------------------------------------------
# Import.


@dataclass
class Imported:
    """The op graph of an import and what could not be mapped.

    Attributes
    ----------
    graph
        A valid op graph (:func:`commsched.model.graph.validate`) in the traced-graph format.
    unmapped
        {what: count} of everything that had no exact commsched counterpart.
    ranks
        {rank: file} of the imported files.
    """

    graph: nx.DiGraph
    unmapped: Counter[str] = field(default_factory=Counter)
    ranks: dict[int, str] = field(default_factory=dict)

    def summary(self) -> str:
        """One line: ops, edges, ranks and every unmapped count."""
        g = self.graph
        kinds = Counter(a["kind"] for _, a in g.nodes(data=True))
        what = ", ".join(f"{n} {k}" for k, n in sorted(kinds.items()))
        lost = "; ".join(f"{n} {k}" for k, n in sorted(self.unmapped.items())) or "none"
        return (f"{g.number_of_nodes()} ops ({what}), {g.number_of_edges()} edges from "
                f"{len(self.ranks)} rank(s); unmapped: {lost}")


def _rank_of(path: Path, meta_attrs: dict[str, Any]) -> int | None:
    if _RANK in meta_attrs:
        return int(meta_attrs[_RANK])
    m = re.search(r"(\d+)\.et(\.gz)?$", path.name)
    return int(m.group(1)) if m else None


def _et_files(paths: Sequence[str | os.PathLike[str]]) -> list[Path]:
    files: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            found = sorted(q for q in p.iterdir() if q.name.endswith((".et", ".et.gz")))
            if not found:
                raise CommschedError(f"{p}: no *.et files in the directory")
            files.extend(found)
        else:
            files.append(p)
    if not files:
        raise CommschedError("no Chakra trace given")
    return files


def _tensor_bytes(shapes: Any, types: Any) -> int:
    total = 0
    if not isinstance(shapes, list) or not isinstance(types, list):
        return 0
    for shape, typ in zip(shapes, types, strict=False):
        m = re.fullmatch(r"Tensor\((.+)\)", str(typ))
        if not m or not isinstance(shape, list) or not all(isinstance(d, int) for d in shape):
            continue
        total += math.prod(shape) * _DTYPE_BYTES.get(m.group(1).lower(), 0)
    return total


def _literal(s: str) -> Any:
    if not s:
        return None
    try:
        return ast.literal_eval(s)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None


@dataclass
class _Part:
    """One Chakra node of one rank, before ranks are joined."""

    rank: int
    node: Any
    attrs: dict[str, Any]


def import_chakra(
    paths: Sequence[str | os.PathLike[str]], strict: bool = False
) -> Imported:
    """Read Chakra ETs (files, or directories of ``*.et`` files, one per rank) into one op
    graph.

    Parameters
    ----------
    paths
        ET files or directories. A file's rank is its ``commsched.rank`` metadata, else
        the number before ``.et`` in its name (``trace.3.et``), else its position.
    strict
        Raise on the first unmapped item instead of counting it.

    Returns
    -------
    Imported
        The graph (see the module docstring for the mapping) and the unmapped counts.

    Raises
    ------
    CommschedError
        Malformed protobuf, duplicate node id or rank, a cycle, or (``strict``) any
        unmapped item; one line naming the file and the node.
    """
    files = _et_files(paths)
    loaded = []
    for p in files:
        meta, nodes = read_et(p)
        loaded.append((p, _attrs(meta), nodes))
    found = [_rank_of(p, m) for p, m, _ in loaded]
    numbers = found if None not in found or len(loaded) == 1 else [None] * len(loaded)
    ranks: dict[int, str] = {}
    parts: dict[int, dict[int, _Part]] = {}
    gattrs: dict[str, Any] = {}
    for i, ((p, mattrs, nodes), r) in enumerate(zip(loaded, numbers, strict=True)):
        rank = i if r is None else r
        if rank in ranks:
            raise CommschedError(f"{p}: rank {rank} is also {ranks[rank]}")
        ranks[rank] = str(p)
        if _GRAPH in mattrs and not gattrs:
            gattrs = json.loads(mattrs[_GRAPH])
        by_id: dict[int, _Part] = {}
        for n in nodes:
            if n.id in by_id:
                raise CommschedError(f"{p}: node id {n.id} appears twice")
            by_id[n.id] = _Part(rank, n, _attrs(n))
        parts[rank] = by_id
    unmapped: Counter[str] = Counter()

    def lost(what: str, where: str, n: int = 1) -> None:
        if strict:
            raise CommschedError(f"{where}: {what} (--strict)")
        unmapped[what] += n

    multi = len(ranks) > 1
    # Group the Chakra nodes into ops: commsched's own ETs by the op id they carry;
    # other collectives as the k-th of their process group on each rank, sends and
    # receives as the k-th a->b message with the same tag.
    members: list[list[_Part]] = []
    by_op: dict[str, list[_Part]] = defaultdict(list)
    groups: dict[tuple[str, int], list[_Part]] = defaultdict(list)
    sends: dict[tuple[int, int, int], list[_Part]] = defaultdict(list)
    recvs: dict[tuple[int, int, int], list[_Part]] = defaultdict(list)
    for r in sorted(parts):
        seen: Counter[str] = Counter()
        for nid in sorted(parts[r]):
            part = parts[r][nid]
            t, a = part.node.type, part.attrs
            if _ID in a:
                by_op[str(a[_ID])].append(part)
            elif t == pb.COMM_COLL_NODE:
                pg = str(a.get("pg_name", ""))
                groups[(pg, seen[pg])].append(part)
                seen[pg] += 1
            elif t == pb.COMM_SEND_NODE and "comm_dst" in a:
                sends[(r, int(a["comm_dst"]), int(a.get("comm_tag", 0)))].append(part)
            elif t == pb.COMM_RECV_NODE and "comm_src" in a:
                recvs[(int(a["comm_src"]), r, int(a.get("comm_tag", 0)))].append(part)
            else:
                if t in (pb.COMM_SEND_NODE, pb.COMM_RECV_NODE):
                    lost("point-to-point ops without a peer (kept unjoined)",
                         f"{ranks[r]}: node {nid}")
                members.append([part])
    # commsched's own ops come back in the graph's node order
    members.extend(sorted(by_op.values(), key=lambda ps: (int(ps[0].attrs.get(_INDEX, 0)),
                                                          ps[0].rank)))
    for (pg, k), ps in groups.items():
        sig = {(int(q.attrs.get("comm_type", -1)), q.attrs.get("comm_size")) for q in ps}
        if len(sig) == 1:
            members.append(ps)
        else:
            lost("collectives whose members differ in type or size (kept per rank)",
                 f"{ranks[ps[0].rank]}: node {ps[0].node.id} (process group {pg!r}, #{k})",
                 len(ps))
            members.extend([q] for q in ps)
    for key in sorted(set(sends) | set(recvs)):
        ss, rs = sends.get(key, []), recvs.get(key, [])
        members.extend([s, q] for s, q in zip(ss, rs, strict=False))
        for q in ss[len(rs):] + rs[len(ss):]:
            if multi:
                lost("point-to-point ops without their peer's file (kept unjoined)",
                     f"{ranks[q.rank]}: node {q.node.id}")
            members.append([q])

    g = graph.new_graph({}, **{k: v for k, v in gattrs.items()
                               if k not in ("schema_version", "resources")})
    resources: dict[str, int] = dict(gattrs.get("resources", {}))
    op_of: dict[tuple[int, int], str] = {}
    ops: list[tuple[str, list[_Part]]] = []
    for ps in members:
        op, a = _op(ps, multi, ranks, lost)
        if op in g:
            raise CommschedError(f"{ranks[ps[0].rank]}: node {ps[0].node.id}: op id {op!r} "
                                 "appears twice")
        resources.setdefault(a["resource"], 1)
        g.add_node(op, **a)
        for q in ps:
            op_of[(q.rank, q.node.id)] = op
        ops.append((op, ps))
    g.graph["resources"] = resources
    if not gattrs:  # a foreign ET: the traced-graph attributes
        g.graph["meta"] = {"model": Path(files[0]).name.split(".")[0], "mode": "train",
                           "batch": 0, "iterations": 1, "source": "chakra",
                           "ranks": sorted(ranks)}
        g.graph["variables"] = {}

    for op, ps in ops:
        stored = None
        for q in ps:
            if _IN_EDGES in q.attrs and stored is None:
                stored = json.loads(q.attrs[_IN_EDGES])
            for deps, control in ((q.node.ctrl_deps, True), (q.node.data_deps, False)):
                for d in deps:
                    src = op_of.get((q.rank, d))
                    if src is None:
                        lost("dependencies on nodes not in the file (dropped)",
                             f"{ranks[q.rank]}: node {q.node.id} depends on {d}")
                    elif src == op:
                        raise CommschedError(
                            f"{ranks[q.rank]}: node {q.node.id} depends on itself")
                    elif not control or not g.has_edge(src, op):
                        g.add_edge(src, op, control=control, bytes=0)
        for src, ea in (stored or {}).items():
            if src not in g:
                lost("dependencies on nodes not in the file (dropped)",
                     f"{ranks[ps[0].rank]}: node {ps[0].node.id} depends on {src!r}")
                continue
            g.add_edge(src, op)
            g.edges[src, op].clear()
            g.edges[src, op].update(ea)
    if not gattrs:
        _infer_pytorch_parameters(g, {op: ps[0] for op, ps in ops if len(ps) == 1})
    try:
        graph.validate(g)
    except GraphError as e:
        raise CommschedError(f"{ranks[min(ranks)]}: {e}") from None
    return Imported(g, unmapped, ranks)


def _op(ps: list[_Part], multi: bool, ranks: dict[int, str],
        lost: Any) -> tuple[str, dict[str, Any]]:
    """The op id and attributes of the Chakra node(s) ``ps`` (one op)."""
    first = ps[0]
    n, a = first.node, first.attrs
    where = f"{ranks[first.rank]}: node {n.id}"
    micros = max(int(q.node.duration_micros) for q in ps)
    duration = micros * 1e-6
    kind: str
    attrs: dict[str, Any]
    cid = a.get(_ID)
    if _ATTRS in a:  # written by commsched: its attributes, Chakra's fields authoritative
        attrs = json.loads(a[_ATTRS])
        d = float(attrs.get("duration", duration))
        attrs["duration"] = d if round(d * 1e6) == micros else duration
        if _export_type(attrs, first.rank) != n.type:
            attrs["kind"] = _kind(n, a)
        if "comm_size" in a and attrs.get("bytes") != a["comm_size"]:
            attrs["bytes"] = int(a["comm_size"])
        return str(cid), attrs
    kind = _kind(n, a)
    if kind == "compute" and n.type != pb.COMP_NODE:
        lost(f"{_NODE_TYPE.get(n.type, n.type)} nodes (kept as compute ops)", where)
    cpu = f"rank{first.rank}:cpu" if multi else "cpu"
    attrs = {"kind": kind, "duration": duration, "name": n.name, "op_type": n.name,
             "samples": [duration], "is_gradient": False,
             "out_bytes": _tensor_bytes(_literal(n.outputs.shapes), _literal(n.outputs.types))}
    if kind == "compute":
        attrs["resource"] = cpu
        attrs["rank"] = first.rank
        attrs["chakra_id"] = n.id
        if n.type != pb.COMP_NODE:
            attrs["chakra_type"] = _NODE_TYPE.get(n.type, str(n.type))
        if "tensor_size" in a:  # a memory load / store: the bytes it moves
            attrs["bytes"] = int(a["tensor_size"])
        return f"{first.rank}:{n.id}", attrs
    size = a.get("comm_size", a.get("tensor_size"))  # chakra_generator's sends: tensor_size
    if size is None:
        lost("communication ops without a size (kept without bytes)", where)
    else:
        attrs["bytes"] = int(size)
    if n.type == pb.COMM_COLL_NODE:
        pg = str(a.get("pg_name", ""))
        attrs["resource"] = f"net:{pg}" if pg else "net"
        attrs["ranks"] = sorted(q.rank for q in ps)
        attrs["chakra_ids"] = [[q.rank, q.node.id] for q in ps]
        if pg:
            attrs["pg"] = pg
        if kind == COLLECTIVE_KIND:
            attrs["collective"] = _COLL_TYPE.get(int(a.get("comm_type", -1)), "UNKNOWN")
        if len(ps) == 1:
            attrs["rank"] = first.rank
        return f"coll:{pg}:{first.rank}:{n.id}", attrs
    if len(ps) == 2:  # a joined send / receive pair
        s, q = ps
        attrs.update(kind="transfer", resource=f"link:{s.rank}->{q.rank}", src=s.rank,
                     dst=q.rank, tag=int(s.attrs.get("comm_tag", 0)),
                     chakra_ids=[[s.rank, s.node.id], [q.rank, q.node.id]])
        return f"p2p:{s.rank}:{s.node.id}", attrs
    peer = a.get("comm_dst" if n.type == pb.COMM_SEND_NODE else "comm_src")
    src, dst = (first.rank, peer) if n.type == pb.COMM_SEND_NODE else (peer, first.rank)
    attrs.update(resource=f"link:{src}->{dst}", rank=first.rank, chakra_id=n.id)
    if peer is not None:
        attrs["peer"] = int(peer)
    return f"{first.rank}:{n.id}", attrs


def _kind(n: Any, a: dict[str, Any]) -> str:
    if n.type == pb.COMM_COLL_NODE:
        return "allreduce" if int(a.get("comm_type", -1)) == pb.ALL_REDUCE else COLLECTIVE_KIND
    if n.type == pb.COMM_SEND_NODE:
        return "send"
    if n.type == pb.COMM_RECV_NODE:
        return "recv"
    return "compute"


# --------------------------------------------------------------------------------------
# PyTorch ETs: parameters from tensor ids.


def _tensors(value: Any) -> list[list[Any]]:
    """The tensor tuples ``[id, storage, offset, numel, elem_bytes, device]`` in an ET
    ``values`` entry (lists of tensors flattened)."""
    if isinstance(value, list) and len(value) == 6 and all(isinstance(x, int) for x in value[:5]) \
            and isinstance(value[5], str):
        return [value]
    if isinstance(value, list):
        return [t for v in value for t in _tensors(v)]
    return []


def _infer_pytorch_parameters(g: nx.DiGraph, parts: dict[str, _Part]) -> None:
    """Add ``variables``, ``grad_of``, ``reads``, ``updates`` and ``is_gradient`` to the
    imported graph of a PyTorch ET (in place).

    An op under ``Optimizer.step`` (the top-level op it belongs to) that updates tensors in
    place (name ending in ``_``) takes parameters as its first argument and gradients as
    its second (``aten::add_(param, grad)``, ``aten::_foreach_add_([params], [grads])``):
    each parameter is a variable (``p<storage id>``, bytes = its elements times their
    size). The ``torch::autograd::AccumulateGrad`` op whose input shares the gradient's
    storage outputs the gradient (``grad_of``); ops before the first backward op that take
    the parameter read it (``reads``); ops under ``autograd::engine::evaluate_function``
    are the backward pass (``is_gradient``).

    Parameters
    ----------
    g
        The graph :func:`import_chakra` built.
    parts
        {op id: its Chakra node} for the ops of one Chakra node.
    """
    node = {op: p.node for op, p in parts.items()}
    roots = {n.id for n in node.values() if n.name in _ROOTS}
    # The ET numbers ops in call order, so a top-level op (called by the thread's root)
    # owns the ops numbered after it up to the next top-level op. Chakra's converter keeps
    # ctrl_deps only where the caller was converted first, so ids are the reliable record.
    tops = sorted((n.id, n.name) for n in node.values() if set(n.ctrl_deps) & roots)
    if not tops:
        return
    top_ids = [t[0] for t in tops]

    def under(op: str, prefix: str) -> bool:
        i = bisect.bisect_right(top_ids, node[op].id) - 1
        return i >= 0 and tops[i][1].startswith(prefix)

    inputs = {op: _literal(n.inputs.values) for op, n in node.items()}
    backward = {op for op in node if under(op, "autograd::engine::evaluate_function")}
    for op in backward:
        g.nodes[op]["is_gradient"] = True
    first_bwd = min((node[op].id for op in backward), default=None)
    variables: dict[str, dict[str, Any]] = {}
    grad_storage: dict[int, str] = {}
    param_storage: dict[int, str] = {}
    for op in sorted(node, key=lambda o: node[o].id):
        vals = inputs[op]
        n = node[op]
        if not n.name.endswith("_") or not isinstance(vals, list) or len(vals) < 2 \
                or not under(op, "Optimizer.step"):
            continue
        params, grads = _tensors(vals[0]), _tensors(vals[1])
        if not params or len(params) != len(grads):
            continue
        for t, gt in zip(params, grads, strict=True):
            name = f"p{t[1]}"
            if name not in variables:
                variables[name] = {"bytes": int(t[3]) * int(t[4]), "shape": [int(t[3])],
                                   "dtype": f"{t[4]}-byte", "trainable": True, "path": name}
            param_storage[t[1]] = name
            grad_storage[gt[1]] = name
            g.nodes[op].setdefault("updates", [])
            if name not in g.nodes[op]["updates"]:
                g.nodes[op]["updates"].append(name)
    if not variables:
        return
    g.graph["variables"] = variables
    for op in sorted(node, key=lambda o: node[o].id):
        n = node[op]
        ts = _tensors(inputs[op])
        if n.name == "torch::autograd::AccumulateGrad":
            names = sorted({grad_storage[t[1]] for t in ts if t[1] in grad_storage})
            if names:
                g.nodes[op]["grad_of"] = names
        elif first_bwd is None or n.id < first_bwd:
            names = sorted({param_storage[t[1]] for t in ts if t[1] in param_storage})
            if names and op not in backward and not under(op, "Optimizer"):
                g.nodes[op]["reads"] = names


# --------------------------------------------------------------------------------------
# PyTorch ETs: CPU durations from the Kineto trace (what chakra_trace_link does on CPU).


def link_kineto_cpu(host_et: dict[str, Any], kineto: dict[str, Any]) -> dict[str, Any]:
    """The host ET with each op's Kineto CPU time: ``ts``, ``inclusive_dur`` and
    ``exclusive_dur`` (microseconds), the fields ``chakra_converter PyTorch`` reads.

    ``chakra_trace_link`` does this and more (GPU kernels, inter-thread and
    synchronization dependencies), but it imports ``et_replay`` (PARAM), which is not on
    PyPI. On a CPU-only trace only the CPU part applies: a host op and a Kineto
    ``cpu_op``/``user_annotation`` event are the same call when the op's ``rf_id``
    attribute equals the event's ``Record function id``; the exclusive time is the
    inclusive time minus the union of the op's children's (``ctrl_deps`` = caller).

    Parameters
    ----------
    host_et
        The ``ExecutionTraceObserver`` JSON (``nodes`` with ``attrs`` holding ``rf_id``).
    kineto
        The profiler's Chrome trace JSON (``traceEvents``).

    Returns
    -------
    dict
        A copy of ``host_et`` with the three fields on every op that has a Kineto event.
    """
    events: dict[int, tuple[float, float]] = {}
    for e in kineto.get("traceEvents", []):
        rf = (e.get("args") or {}).get("Record function id")
        if e.get("ph") == "X" and e.get("cat") in ("cpu_op", "user_annotation") and rf is not None:
            events[int(rf)] = (float(e["ts"]), float(e.get("dur", 0.0)))
    out = json.loads(json.dumps(host_et))
    span: dict[int, tuple[float, float]] = {}
    for n in out["nodes"]:
        rf = next((a["value"] for a in n.get("attrs", []) if a.get("name") == "rf_id"), None)
        if rf is not None and int(rf) in events:
            span[n["id"]] = events[int(rf)]
    children: dict[int, list[tuple[float, float]]] = defaultdict(list)
    for n in out["nodes"]:
        if n["id"] in span and n.get("ctrl_deps") in span:
            children[n["ctrl_deps"]].append(span[n["id"]])
    for n in out["nodes"]:
        if n["id"] not in span:
            continue
        ts, dur = span[n["id"]]
        busy = 0.0
        end = ts
        for cts, cdur in sorted(children[n["id"]]):
            lo, hi = max(cts, end), min(cts + cdur, ts + dur)
            if hi > lo:
                busy += hi - lo
                end = hi
        n["ts"] = int(ts)
        n["inclusive_dur"] = round(dur)
        n["exclusive_dur"] = round(max(dur - busy, 0.0))
    return out


# --------------------------------------------------------------------------------------
# Export.


def _attr(name: str, value: Any) -> Any:
    a = pb.AttributeProto(name=name)
    if isinstance(value, int):
        a.int64_val = value
    else:
        a.string_val = str(value)
    return a


def export_chakra(
    g: nx.DiGraph, prefix: str | os.PathLike[str], replicas: int | None = None
) -> list[Path]:
    """Write ``g`` as Chakra ETs ``<prefix>.<rank>.et``, one per rank.

    Parameters
    ----------
    g
        Any valid op graph (see the module docstring for the mapping).
    prefix
        Path prefix of the files (ASTRA-sim's naming ``<prefix>.<rank>.et``).
    replicas
        Write a one-rank graph as this many data-parallel ranks: every rank runs its own
        copy of every op (ids ``<rank>:<op>``, resources ``rank<r>:<resource>``), each
        collective is one op joining all ranks. Default: the graph's own ranks.

    Returns
    -------
    list of Path
        The files written, by rank.

    Raises
    ------
    CommschedError
        Invalid graph, or ``replicas`` on a graph that already has several ranks.
    """
    graph.validate(g)
    prefix = Path(prefix)
    collective = {op for op, a in g.nodes(data=True) if a["kind"] in ("allreduce", COLLECTIVE_KIND)}
    own_set: set[int] = set()
    for _, a in g.nodes(data=True):
        if "ranks" in a:
            own_set.update(int(r) for r in a["ranks"])
        elif a["kind"] == "transfer" and "src" in a and "dst" in a:
            own_set.update((int(a["src"]), int(a["dst"])))
        else:
            own_set.add(int(a.get("rank", 0)))
    own = sorted(own_set) or [0]
    if replicas is not None:
        if replicas < 1:
            raise CommschedError(f"replicas must be >= 1, got {replicas}")
        if len(own) > 1:
            raise CommschedError(f"the graph already has {len(own)} ranks; replicas is for "
                                 "a one-rank graph")
    rank_list = list(range(replicas)) if replicas is not None else own
    copies = replicas is not None and replicas > 1

    def places(op: str) -> list[int]:
        a = g.nodes[op]
        if copies or (op in collective and "ranks" not in a):
            return rank_list
        if "ranks" in a:
            return [int(r) for r in a["ranks"]]
        if a["kind"] == "transfer" and "src" in a and "dst" in a:
            return [int(a["src"]), int(a["dst"])]
        return [int(a.get("rank", 0))]

    def name_at(op: str, r: int) -> str:
        return f"{r}:{op}" if copies and op not in collective else op

    def attrs_at(op: str, r: int) -> dict[str, Any]:
        a = dict(g.nodes[op])
        if copies and op in collective:
            a["ranks"] = rank_list
        elif copies:
            a.update(rank=r, resource=f"rank{r}:{a['resource']}")
        return a

    nodes: dict[int, list[Any]] = {r: [] for r in rank_list}
    cid: dict[tuple[int, str], int] = {}
    resources: dict[str, int] = {}
    for index, op in enumerate(g.nodes):
        for r in places(op):
            a = attrs_at(op, r)
            resources[a["resource"]] = g.graph["resources"][g.nodes[op]["resource"]]
            n = pb.Node(id=len(nodes[r]), name=str(a.get("name", op)), type=_export_type(a, r),
                        duration_micros=round(float(a["duration"]) * 1e6))
            n.attr.append(_attr(_ID, name_at(op, r)))
            n.attr.append(_attr(_INDEX, index))
            n.attr.append(_attr(_ATTRS, json.dumps(a, sort_keys=True)))
            if a.get("bytes") is not None and n.type != pb.COMP_NODE:
                n.attr.append(_attr("comm_size", int(a["bytes"])))
            if n.type == pb.COMM_COLL_NODE:
                ctype = pb.CollectiveCommType.Value(a["collective"]) \
                    if a.get("collective") in pb.CollectiveCommType.keys() else pb.ALL_REDUCE  # noqa: SIM118
                n.attr.append(_attr("comm_type", ctype))
                if a.get("pg"):
                    n.attr.append(_attr("pg_name", str(a["pg"])))
            elif n.type in (pb.COMM_SEND_NODE, pb.COMM_RECV_NODE):
                send = n.type == pb.COMM_SEND_NODE
                peer = a.get("dst" if send else "src", a.get("peer"))
                if peer is not None:
                    n.attr.append(_attr("comm_dst" if send else "comm_src", int(peer)))
                n.attr.append(_attr("comm_tag", int(a.get("tag", 0))))
            cid[(r, op)] = n.id
            nodes[r].append(n)
    for op in g.nodes:
        at = places(op)
        ins = list(g.in_edges(op, data=True))
        for src, _, ea in ins:
            for r in at:
                if (r, src) in cid:
                    n = nodes[r][cid[(r, op)]]
                    (n.ctrl_deps if ea.get("control") else n.data_deps).append(cid[(r, src)])
        if not ins:
            continue
        # Edge attributes and dependencies Chakra cannot hold (across ranks), by op id.
        if copies and op not in collective:
            for r in at:
                stored = {name_at(src, r): ea for src, _, ea in ins}
                nodes[r][cid[(r, op)]].attr.append(_attr(_IN_EDGES, json.dumps(stored)))
        else:
            stored = {name_at(src, r): ea for src, _, ea in ins for r in at}
            nodes[at[0]][cid[(at[0], op)]].attr.append(_attr(_IN_EDGES, json.dumps(stored)))
    gattrs = dict(g.graph)
    if copies:
        gattrs["resources"] = resources
    paths = []
    for r in rank_list:
        meta = pb.GlobalMetadata(version="0.0.4")
        meta.attr.append(_attr("schema", "commsched"))
        meta.attr.append(_attr(_RANK, r))
        meta.attr.append(_attr(_GRAPH, json.dumps(gattrs, sort_keys=True)))
        path = prefix.parent / f"{prefix.name}.{r}.et"
        write_et(path, meta, nodes[r])
        paths.append(path)
    return paths


def _export_type(a: dict[str, Any], rank: int) -> int:
    kind = a["kind"]
    if kind == "transfer" and "src" in a and "dst" in a:
        return pb.COMM_SEND_NODE if rank == int(a["src"]) else pb.COMM_RECV_NODE
    return _KIND_TYPE.get(kind, pb.COMP_NODE)
