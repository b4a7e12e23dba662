"""Readers of traced op graphs and raw traces (no TensorFlow needed).

A *traced graph* is a commsched op graph (:mod:`commsched.model.graph`) of one training or
inference iteration of a real model on one device, written by
:func:`commsched.trace.tf.trace_model`. Besides the fields every op graph has:

node attributes
    ``kind="compute"``, ``resource="cpu"``; ``op_type`` (the TensorFlow op type);
    ``samples`` (the op's measured time in each of the K traced iterations, seconds,
    rounded to ns); ``duration`` = ``min(samples)``, the time oracle of TicTac Sec. 5
    (0.0 for an op that never got a time, whose ``samples`` is empty); ``out_bytes``
    (bytes of all its outputs); ``is_gradient`` (the op belongs to the backward pass:
    ``tf.gradients`` made it); optional ``reads`` / ``updates`` (names of the variables the
    op reads / writes: ``ReadVariableOp``-like ops and the optimizer's apply ops); optional
    ``grad_of`` (list of the variables whose gradient the op outputs; a list because one
    op may output several, e.g. a fused batch-norm gradient).
edge attributes
    ``control`` (False for a data edge) and ``bytes`` (bytes of the tensors the edge
    carries; 0 on control edges and on resource handles).
graph attributes
    ``variables`` = {name: {"bytes", "shape", "dtype", "trainable", "path"}}, keyed by the
    name of the variable's ``VarHandleOp`` node; ``meta`` = {"model", "mode", "batch",
    "size", "device", "device_model", "tf_version", "intra_threads", "inter_threads",
    "warmup", "iterations", "route", "coverage", "step_wall_s", ...}.

A *raw trace* (``*.raw.json.gz``) keeps every event TensorFlow recorded in each traced
iteration: ``{"format": "commsched-raw-trace", "version": 1, "meta": {...},
"fields": RAW_FIELDS, "iterations": [{"wall_s": float, "events": [[...], ...]}]}``. An
event's time is ``end_ns`` (``all_end_rel_nanos`` of TensorFlow's step stats: the whole
time the executor spent on the op, what TensorFlow's timeline draws). Events are mapped to
graph ops by :func:`attribute`; an op's sample in an iteration is the sum of its events'
times (an op inside a loop runs once per loop iteration; the ops a functional ``While`` or
``If`` runs after TensorFlow lowers it are charged to that op). :func:`samples_from_raw`
does this mapping for the tracer and :func:`check_trace` redoes it to reject a raw trace
that does not match its graph, naming the op.

Examples
--------
>>> from commsched.model.graph import new_graph, add_op
>>> g = new_graph({"cpu": 1}, variables={"w": {"bytes": 16, "shape": [4], "dtype": "float32",
...     "trainable": True, "path": "w"}}, meta={"iterations": 2})
>>> add_op(g, "w", "compute", "cpu", 0.0, op_type="VarHandleOp", samples=[0.0, 0.0],
...        out_bytes=0, is_gradient=False)
>>> add_op(g, "r", "compute", "cpu", 1e-6, op_type="ReadVariableOp", samples=[2e-6, 1e-6],
...        out_bytes=16, is_gradient=False, reads=["w"])
>>> g.add_edge("w", "r", control=False, bytes=0)
>>> reads_of(g)
{'w': ['r']}
>>> raw = {"iterations": [{"events": [["r", "ReadVariableOp", "cpu", 0, 0, 0, 0, 2000],
...                                   ["w", "VarHandleOp", "cpu", 0, 0, 0, 0, 0]]},
...                       {"events": [["r", "ReadVariableOp", "cpu", 0, 0, 0, 0, 1000],
...                                   ["w", "VarHandleOp", "cpu", 0, 0, 0, 0, 0]]}]}
>>> check_trace(g, raw)
"""

from __future__ import annotations

import gzip
import json
import os
from collections import defaultdict
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import networkx as nx

from commsched.atomic import atomic_write_bytes
from commsched.errors import CommschedError, GraphError
from commsched.model import graph
from commsched.validation import MAX_BYTES, MAX_SECONDS, number, parse_json, read_text, short

__all__ = [
    "FUNCTIONAL_OPS",
    "RAW_FIELDS",
    "RAW_FORMAT",
    "attribute",
    "check_graph",
    "check_trace",
    "example_trace",
    "gradient_ops",
    "grads_of",
    "load_raw",
    "load_trace",
    "reads_of",
    "samples_from_raw",
    "save_raw",
    "summary",
    "trainable_variables",
    "updates_of",
    "variables",
]

RAW_FORMAT = "commsched-raw-trace"
#: Columns of a raw event: op name, op type (from TensorFlow's timeline label), device,
#: thread id, start (ns after the iteration's first event), and the op start, op end and
#: end of the event relative to its start (ns).
RAW_FIELDS = ("node", "op_type", "device", "thread", "start_ns", "op_start_ns", "op_end_ns",
              "end_ns")
#: Op types that run a function; TensorFlow lowers them into ops named under theirs.
FUNCTIONAL_OPS = frozenset({
    "While", "StatelessWhile", "If", "StatelessIf", "Case", "StatelessCase",
    "PartitionedCall", "StatefulPartitionedCall",
})
_NODE_FIELDS = ("op_type", "samples", "out_bytes", "is_gradient")
_META_FIELDS = ("model", "mode", "batch", "iterations")


def _where(source: str | None) -> str:
    return f"{source}: " if source else ""


def check_graph(g: nx.DiGraph, source: str | None = None) -> None:
    """Raise :class:`GraphError` if ``g`` is not a traced graph (see the module docstring).

    Checks the graph attributes ``meta`` and ``variables``, every node's trace fields,
    ``duration == min(samples)``, and that ``reads``/``updates``/``grad_of`` name known
    variables. The first problem found is reported, naming the op.

    Parameters
    ----------
    g : networkx.DiGraph
        The op graph to check.
    source : str, optional
        A file name, prefixing the message.

    Raises
    ------
    GraphError
        A missing or malformed graph attribute, node field or edge field, a value out of
        range (times in ``[0, MAX_SECONDS]``, bytes in ``[0, MAX_BYTES]``), a ``duration``
        other than ``min(samples)``, or an unknown variable name.
    """
    where = _where(source)
    try:
        _check_traced(g, where)
    except GraphError:
        raise
    except CommschedError as e:
        raise GraphError(str(e)) from None


def _names(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(x, str) for x in value)


def _check_traced(g: nx.DiGraph, where: str) -> None:
    meta = g.graph.get("meta")
    if not isinstance(meta, dict):
        raise GraphError(f"{where}not a traced graph: graph attribute 'meta' is missing")
    for key in _META_FIELDS:
        if key not in meta:
            raise GraphError(f"{where}graph attribute meta: missing field {key!r}")
    number(meta["batch"], f"{where}meta.batch", 0, MAX_BYTES, integer=True)  # 0: unknown
    number(meta["iterations"], f"{where}meta.iterations", 0, MAX_BYTES, integer=True)
    vs = g.graph.get("variables")
    if not isinstance(vs, dict):
        raise GraphError(f"{where}not a traced graph: graph attribute 'variables' is missing")
    for name, v in vs.items():
        if not isinstance(v, dict):
            raise GraphError(f"{where}variable {short(name)}: must be an object")
        number(v.get("bytes"), f"{where}variable {short(name)}: bytes", 0, MAX_BYTES,
               integer=True)
    for n, a in g.nodes(data=True):
        for key in _NODE_FIELDS:
            if key not in a:
                raise GraphError(f"{where}op {short(n)}: missing field {key!r}")
        s = a["samples"]
        if not isinstance(s, list):
            raise GraphError(f"{where}op {short(n)}: samples must be a list of times >= 0")
        for x in s:
            number(x, f"{where}op {short(n)}: samples", 0, MAX_SECONDS)
        number(a["out_bytes"], f"{where}op {short(n)}: out_bytes", 0, MAX_BYTES, integer=True)
        if not isinstance(a["is_gradient"], bool):
            raise GraphError(f"{where}op {short(n)}: is_gradient must be true or false")
        if not isinstance(a["op_type"], str):
            raise GraphError(f"{where}op {short(n)}: op_type must be a string")
        expected = min(s) if s else 0.0
        if abs(a["duration"] - expected) > 1e-12:
            raise GraphError(
                f"{where}op {short(n)}: duration {a['duration']!r} is not min(samples) = "
                f"{expected!r}"
            )
        for key in ("reads", "updates", "grad_of"):
            names = a.get(key, [])
            if not _names(names):
                raise GraphError(f"{where}op {short(n)}: {key} must be a list of variable names")
            for var in names:
                if var not in vs:
                    raise GraphError(f"{where}op {short(n)}: {key} names unknown variable "
                                     f"{short(var)}")
    for u, v, a in g.edges(data=True):
        if "control" not in a or "bytes" not in a:
            raise GraphError(f"{where}edge {short(u)} -> {short(v)}: needs 'control' and "
                             "'bytes'")
        if not isinstance(a["control"], bool):
            raise GraphError(f"{where}edge {short(u)} -> {short(v)}: control must be true or "
                             "false")
        number(a["bytes"], f"{where}edge {short(u)} -> {short(v)}: bytes", 0, MAX_BYTES,
               integer=True)


def example_trace() -> nx.DiGraph:
    """The smallest traced training iteration, the start of the views' and simulators'
    docstring examples.

    Returns
    -------
    networkx.DiGraph
        Ops ``read`` (0 s, reads variable ``w`` of 100 bytes) -> ``mm`` (1 s) -> ``grad``
        (1 s, the gradient of ``w``), one sample each, 4 bytes on every edge and out of
        every op; meta: model ``toy``, mode ``train``, batch 1, 1 iteration.

    Examples
    --------
    >>> t = example_trace()
    >>> list(t.edges), grads_of(t)
    ([('read', 'mm'), ('mm', 'grad')], {'w': 'grad'})
    """
    t = graph.new_graph({"cpu": 1}, variables={"w": {"bytes": 100}},
                        meta={"model": "toy", "mode": "train", "batch": 1, "iterations": 1})
    ops: list[tuple[str, float, dict[str, Any]]] = [
        ("read", 0.0, {"reads": ["w"]}), ("mm", 1.0, {}),
        ("grad", 1.0, {"grad_of": ["w"], "is_gradient": True})]
    for name, d, extra in ops:
        graph.add_op(t, name, "compute", "cpu", d, **{"op_type": "Op", "samples": [d],
                     "out_bytes": 4, "is_gradient": False, **extra})
    t.add_edges_from([("read", "mm"), ("mm", "grad")], control=False, bytes=4)
    return t


def load_trace(path: str | os.PathLike[str]) -> nx.DiGraph:
    """Read a traced graph: :func:`commsched.model.graph.load` plus :func:`check_graph`.

    Parameters
    ----------
    path : str or os.PathLike
        A traced graph file (``.json`` or ``.json.gz``).

    Returns
    -------
    networkx.DiGraph
        The traced graph.

    Raises
    ------
    GraphError
        The file is unreadable, not an op graph, or not a traced graph; the message names it.
    """
    g = graph.load(path)
    check_graph(g, str(path))
    return g


def variables(g: nx.DiGraph) -> dict[str, dict[str, Any]]:
    """The graph's variables, ``{name: {"bytes", "shape", "dtype", "trainable", ...}}``.

    Parameters
    ----------
    g : networkx.DiGraph
        A traced graph (or any op graph: then empty).

    Returns
    -------
    dict
        A shallow copy of the ``variables`` graph attribute, keyed by variable name.
    """
    return dict(g.graph.get("variables", {}))


def trainable_variables(g: nx.DiGraph) -> list[str]:
    """Names of the trainable variables (the model's parameters), in the graph's order.

    Parameters
    ----------
    g : networkx.DiGraph
        A traced graph; a variable without ``trainable`` counts as trainable.

    Returns
    -------
    list of str
    """
    return [n for n, v in variables(g).items() if v.get("trainable", True)]


def _index(g: nx.DiGraph, key: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = defaultdict(list)
    for n, a in g.nodes(data=True):
        for var in a.get(key, ()):
            out[var].append(n)
    return dict(out)


def reads_of(g: nx.DiGraph) -> dict[str, list[str]]:
    """``{variable: [ops that read it]}`` in graph node order (variables never read absent).

    Parameters
    ----------
    g : networkx.DiGraph
        A traced graph; the ops that read a variable name it in ``reads``.

    Returns
    -------
    dict of str to list of str
    """
    return _index(g, "reads")


def updates_of(g: nx.DiGraph) -> dict[str, list[str]]:
    """``{variable: [ops that update it]}``: the optimizer's apply ops (and state updates).

    Parameters
    ----------
    g : networkx.DiGraph
        A traced graph, whose optimizer ops list the variables they write in ``updates``.

    Returns
    -------
    dict of str to list of str
        Ops in graph node order; variables never updated are absent.
    """
    return _index(g, "updates")


def grads_of(g: nx.DiGraph) -> dict[str, str]:
    """``{variable: op that outputs its gradient}`` (training graphs only).

    Several variables may map to the same op.

    Parameters
    ----------
    g : networkx.DiGraph
        A traced training graph, gradient ops naming their variables in ``grad_of``.

    Returns
    -------
    dict of str to str
        Variables without a gradient op are absent.

    Raises
    ------
    GraphError
        A variable has two or more gradient ops.
    """
    out: dict[str, str] = {}
    for var, ops in _index(g, "grad_of").items():
        if len(ops) != 1:
            raise GraphError(f"variable {var!r} has {len(ops)} gradient ops: {ops}")
        out[var] = ops[0]
    return out


def gradient_ops(g: nx.DiGraph) -> list[str]:
    """The ops of the backward pass, in graph node order.

    Parameters
    ----------
    g : networkx.DiGraph
        A traced graph, backward ops marked by ``is_gradient``.

    Returns
    -------
    list of str
    """
    return [n for n, a in g.nodes(data=True) if a.get("is_gradient")]


def summary(g: nx.DiGraph) -> dict[str, Any]:
    """Headline numbers of a traced graph (TicTac Table 1 columns and the trace's quality).

    Parameters
    ----------
    g : networkx.DiGraph
        A traced graph.

    Returns
    -------
    dict
        ``ops``, ``edges``, ``variables``, ``params`` (trainable variables),
        ``param_bytes`` and ``param_mib`` (their size, bytes and MiB), ``gradient_ops``,
        ``compute_s`` (sum of op durations, seconds) and ``coverage`` (from ``meta``, or None).

    References
    ----------
    .. [1] Hashemi, Jyothi & Campbell, "TicTac", SysML 2019, Appendix A, Table 1.
    """
    vs = variables(g)
    train = trainable_variables(g)
    pbytes = sum(int(vs[v]["bytes"]) for v in train)
    meta = g.graph.get("meta", {})
    return {
        "ops": g.number_of_nodes(),
        "edges": g.number_of_edges(),
        "variables": len(vs),
        "params": len(train),
        "param_bytes": pbytes,
        "param_mib": pbytes / 2**20,
        "gradient_ops": len(gradient_ops(g)),
        "compute_s": sum(float(a["duration"]) for _, a in g.nodes(data=True)),
        "coverage": meta.get("coverage"),
    }


# --------------------------------------------------------------------------------------
# Raw traces.


def save_raw(raw: Mapping[str, Any], path: str | os.PathLike[str]) -> None:
    """Write a raw trace as gzip-compressed JSON, atomically.

    Parameters
    ----------
    raw : mapping
        The raw trace (module docstring); not checked.
    path : str or os.PathLike
        The output file, replaced atomically; byte-for-byte reproducible (no gzip timestamp).
    """
    data = json.dumps(raw, separators=(",", ":")).encode()
    atomic_write_bytes(path, gzip.compress(data, compresslevel=6, mtime=0))


def load_raw(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a raw trace (gzip or plain JSON); errors name the file.

    Parameters
    ----------
    path : str or os.PathLike
        A ``*.raw.json.gz`` file (or plain JSON).

    Returns
    -------
    dict
        The raw trace as decoded.

    Raises
    ------
    CommschedError
        The file is unreadable or not JSON, its ``format`` or ``fields`` differ from
        :data:`RAW_FORMAT` / :data:`RAW_FIELDS`, an iteration has no ``events`` list, an event
        is malformed, or its ``end_ns`` is not an integer in ``[0, MAX_SECONDS * 1e9]``.
    """
    p = Path(path)
    raw = parse_json(read_text(p), p)
    if not isinstance(raw, dict) or raw.get("format") != RAW_FORMAT:
        raise CommschedError(f"{p}: not a raw trace (format is not {RAW_FORMAT!r})")
    if list(raw.get("fields", [])) != list(RAW_FIELDS):
        raise CommschedError(f"{p}: raw trace fields must be {list(RAW_FIELDS)}")
    its = raw.get("iterations")
    if not isinstance(its, list):
        raise CommschedError(f"{p}: raw trace has no 'iterations' list")
    for i, it in enumerate(its):
        events = it.get("events") if isinstance(it, dict) else None
        if not isinstance(events, list):
            raise CommschedError(f"{p}: iterations[{i}]: no 'events' list")
        for j, e in enumerate(events):
            if not (isinstance(e, list) and len(e) == len(RAW_FIELDS)
                    and isinstance(e[0], str) and isinstance(e[1], str)):
                raise CommschedError(f"{p}: iterations[{i}].events[{j}]: must be a list "
                                     f"{list(RAW_FIELDS)} with string node and op_type")
            number(e[7], f"{p}: iterations[{i}].events[{j}]: end_ns", 0,
                   MAX_SECONDS * 1e9, integer=True)
    return raw


def attribute(name: str, ops: Mapping[str, str]) -> str | None:
    """The graph op a raw event named ``name`` is charged to, or None.

    ``ops`` maps the graph's op names to their types. An event named like a graph op is
    that op's. TensorFlow's own runtime ops (names starting with ``_``) belong to no op.
    Otherwise the event is one of the ops TensorFlow made when it lowered a functional op
    (``While``, ``If``, ...; names ``<op>/...`` or ``Func/<op>/...``): it is charged to the
    functional op with the longest such prefix, or to none.

    Parameters
    ----------
    name : str
        The event's node name.
    ops : mapping of str to str
        The graph's ``{op name: op type}``.

    Returns
    -------
    str or None
        The graph op's name.

    Examples
    --------
    >>> attribute("rnn/while/body/_1/add", {"rnn/while": "While", "rnn": "Const"})
    'rnn/while'
    >>> attribute("_SOURCE", {}) is None
    True
    """
    if name in ops:
        return name
    if name.startswith("_"):
        return None
    if name.startswith("Func/"):
        name = name[5:]
    cut = name.rfind("/")
    while cut > 0:
        prefix = name[:cut]
        if ops.get(prefix) in FUNCTIONAL_OPS:
            return prefix
        cut = name.rfind("/", 0, cut)
    return None


def _prefer_streams(events: list[list[Any]]) -> list[list[Any]]:
    """On GPUs an op shows up on its device and on a stream: keep only the stream events."""
    by_node: dict[str, set[str]] = defaultdict(set)
    for e in events:
        by_node[e[0]].add(str(e[2]))
    kept = []
    for e in events:
        devs = by_node[e[0]]
        if any("stream:all" in d for d in devs):
            if "stream:all" not in str(e[2]):
                continue
        elif any("/stream:" in d for d in devs) and "/stream:" not in str(e[2]):
            continue
        kept.append(e)
    return kept


def samples_from_raw(
    raw: Mapping[str, Any], ops: Mapping[str, str]
) -> tuple[dict[str, list[float]], dict[str, int]]:
    """Per-op samples from a raw trace.

    On GPUs an op's device events are dropped when it also has stream events.

    Parameters
    ----------
    raw : mapping
        A raw trace (module docstring), e.g. from :func:`load_raw`.
    ops : mapping of str to str
        The graph's ``{op name: op type}``.

    Returns
    -------
    samples : dict of str to list of float
        ``samples[op]`` lists, for each iteration in which any event was charged to ``op``
        (see :func:`attribute`), the summed event time in seconds rounded to ns.
    unattributed : dict of str to int
        Events per name that belong to no op (TensorFlow's internal ``_``-names are not
        counted).
    """
    samples: dict[str, list[float]] = defaultdict(list)
    unattributed: dict[str, int] = defaultdict(int)
    for it in raw["iterations"]:
        total: dict[str, int] = defaultdict(int)
        for e in _prefer_streams(it["events"]):
            op = attribute(e[0], ops)
            if op is None:
                if not str(e[0]).startswith("_"):
                    unattributed[e[0]] += 1
                continue
            total[op] += int(e[7])
        for op, ns in total.items():
            samples[op].append(round(ns * 1e-9, 9))
    return dict(samples), dict(unattributed)


def check_trace(g: nx.DiGraph, raw: Mapping[str, Any]) -> None:
    """Reject a raw trace that does not match its traced graph, naming the op.

    Checks, in order: the model, mode and batch in both ``meta``; the number of
    iterations; that every raw event named like a graph
    op has that op's type; that every event is charged to some op of the graph (apart from
    TensorFlow's internal ``_``-ops); and that every op's ``samples`` are exactly the
    per-iteration times the raw trace gives (:func:`samples_from_raw`).

    Parameters
    ----------
    g : networkx.DiGraph
        A traced graph.
    raw : mapping
        Its raw trace (:func:`load_raw`).

    Raises
    ------
    CommschedError
        At the first of the mismatches above, naming the op or the ``meta`` field.
    """
    ops = {n: str(a.get("op_type", "")) for n, a in g.nodes(data=True)}
    its = raw.get("iterations", [])
    gmeta, rmeta = g.graph.get("meta", {}), raw.get("meta", {})
    for key in ("model", "mode", "batch"):
        if key in gmeta and key in rmeta and gmeta[key] != rmeta[key]:
            raise CommschedError(
                f"raw trace has {key} {rmeta[key]!r}, the graph has {gmeta[key]!r}"
            )
    meta_iters = gmeta.get("iterations")
    if meta_iters is not None and len(its) != meta_iters:
        raise CommschedError(
            f"raw trace has {len(its)} iterations, the graph was traced over {meta_iters}"
        )
    for it in its:
        for e in it["events"]:
            if e[0] in ops and e[1] and e[1] != ops[e[0]]:
                raise CommschedError(
                    f"op {e[0]!r}: raw trace says type {e[1]!r}, the graph says {ops[e[0]]!r}"
                )
    samples, unattributed = samples_from_raw(raw, ops)
    if unattributed:
        name = next(iter(unattributed))
        raise CommschedError(f"op {name!r} of the raw trace is not in the graph")
    for n, a in g.nodes(data=True):
        got = samples.get(n, [])
        if [round(float(x), 9) for x in a["samples"]] != got:
            raise CommschedError(
                f"op {n!r}: graph samples {a['samples']} differ from the raw trace's {got}"
            )
