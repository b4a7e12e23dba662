"""What both communication views need from a traced graph: parameters, readers, gradients.

A traced graph (format: ``data/traces/*.json``, see :mod:`commsched.trace`) is the
single-device compute graph of one training iteration: forward ops, backward ops (node
attribute ``is_gradient``), ops producing a variable's gradient (``grad_of``: a variable
name, or a list of names when one op produces several gradients, e.g. a fused batch-norm
gradient yields the scale and the offset gradients), ops reading variables (``reads``) and
the optimizer's update ops (``updates``).

Neither view keeps the optimizer. In the parameter-server architecture the update runs on
the server that holds the variable (TicTac Sec. 2.3); in PACE's all-reduce DAG (Sec. IV-A)
the all-reduce of a gradient leads directly to the next iteration's forward consumers of
its parameter. So :func:`optimizer_ops` removes every update op together with

* its *exclusive ancestors*: ops, other than gradient producers, all of whose successors
  are removed (the learning-rate and iteration-counter reads, optimizer slot reads, the
  arithmetic of Adam's moments, batch-norm moving-average deltas), and
* its *exclusive descendants*: ops all of whose predecessors are removed (end-of-step
  no-ops that only wait for the updates).

Sinks that are not downstream of an update (the loss) stay. The *parameters* of the
iteration are the variables read by a remaining op or having a gradient
(:func:`parameters`); variables only the optimizer touches (slots, counters, moving
averages) are not communicated.
"""

from __future__ import annotations

from collections.abc import Iterable

import networkx as nx

from commsched.errors import CommschedError
from commsched.graph import validate

__all__ = [
    "check_trace",
    "grad_producers",
    "optimizer_ops",
    "parameters",
    "readers",
    "variable_bytes",
]


def _names(value: object, op: str, field: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return list(value)
    raise CommschedError(f"op {op!r}: field {field!r} must be a variable name or a list of names")


def check_trace(g: nx.DiGraph) -> None:
    """Raise :class:`CommschedError` unless ``g`` is a valid traced graph.

    Checks the op-graph model, the ``variables`` table and that every ``reads``,
    ``updates`` and ``grad_of`` names a known variable (the message names the op).
    """
    validate(g)
    table = g.graph.get("variables")
    if not isinstance(table, dict):
        raise CommschedError("traced graph has no 'variables' table (graph attribute)")
    for var, info in table.items():
        b = info.get("bytes") if isinstance(info, dict) else None
        if not isinstance(b, int) or isinstance(b, bool) or b < 0:
            raise CommschedError(f"variable {var!r}: 'bytes' must be an integer >= 0")
    for op, a in g.nodes(data=True):
        for field in ("reads", "updates", "grad_of"):
            for var in _names(a.get(field), op, field):
                if var not in table:
                    raise CommschedError(f"op {op!r}: {field} names unknown variable {var!r}")


def variable_bytes(g: nx.DiGraph) -> dict[str, int]:
    """{variable: bytes} in the order of the trace's ``variables`` table (creation order)."""
    return {v: int(info["bytes"]) for v, info in g.graph["variables"].items()}


def readers(g: nx.DiGraph, ops: Iterable[str] | None = None) -> dict[str, list[str]]:
    """{variable: ops that read it}, ops in graph order; only among ``ops`` if given."""
    keep = None if ops is None else set(ops)
    out: dict[str, list[str]] = {}
    for op, a in g.nodes(data=True):
        if keep is not None and op not in keep:
            continue
        for var in _names(a.get("reads"), op, "reads"):
            out.setdefault(var, []).append(op)
    return out


def grad_producers(g: nx.DiGraph) -> dict[str, list[str]]:
    """{op: variables whose gradient it produces}, in graph order."""
    out: dict[str, list[str]] = {}
    for op, a in g.nodes(data=True):
        names = _names(a.get("grad_of"), op, "grad_of")
        if names:
            out[op] = names
    return out


def optimizer_ops(g: nx.DiGraph) -> set[str]:
    """The optimizer's ops: update ops and their exclusive ancestors and descendants.

    See the module docstring. Gradient producers are never included.

    >>> from commsched.graph import new_graph, add_op
    >>> g = new_graph({"cpu": 1}, variables={"w": {"bytes": 4}, "lr": {"bytes": 4}})
    >>> for n in ("read_w", "grad_w", "read_lr", "apply", "done", "loss"):
    ...     add_op(g, n, "compute", "cpu", 1.0)
    >>> g.nodes["read_w"]["reads"] = ["w"]; g.nodes["read_lr"]["reads"] = ["lr"]
    >>> g.nodes["grad_w"]["grad_of"] = "w"; g.nodes["apply"]["updates"] = ["w"]
    >>> g.add_edges_from([("read_w", "loss"), ("loss", "grad_w"), ("grad_w", "apply"),
    ...                   ("read_lr", "apply"), ("read_w", "apply"), ("apply", "done")])
    >>> sorted(optimizer_ops(g))
    ['apply', 'done', 'read_lr']
    """
    protected = set(grad_producers(g))
    removed = {op for op, a in g.nodes(data=True) if _names(a.get("updates"), op, "updates")}
    changed = bool(removed)
    while changed:
        changed = False
        for op in g.nodes:
            if op in removed or op in protected:
                continue
            succ, pred = g.succ[op], g.pred[op]
            if (succ and all(s in removed for s in succ)) or (
                pred and all(p in removed for p in pred)
            ):
                removed.add(op)
                changed = True
    return removed


def parameters(g: nx.DiGraph, dropped: set[str]) -> dict[str, int]:
    """{variable: bytes} of the variables read by an op not in ``dropped`` or having a
    gradient, in the order of the ``variables`` table."""
    used: set[str] = set()
    for var, ops in readers(g).items():
        if any(op not in dropped for op in ops):
            used.add(var)
    for names in grad_producers(g).values():
        used.update(names)
    return {v: b for v, b in variable_bytes(g).items() if v in used}
