"""What both communication views take from a traced graph: the worker's ops and parameters.

A traced graph (:mod:`commsched.model.traced`) is the single-device compute graph of one
training iteration: forward ops, backward ops (``is_gradient``), ops outputting variables'
gradients (``grad_of``: a list, since one op may output several, e.g. a fused batch-norm
gradient yields the scale and the offset gradients), ops reading variables (``reads``) and
the optimizer's update ops (``updates``).

Neither view keeps the optimizer. In the parameter-server architecture the update runs on
the server that holds the variable (TicTac Sec. 2.3); in PACE's all-reduce DAG (Sec. IV-A)
the all-reduce of a gradient leads directly to the next iteration's forward consumers of
its parameter. So :func:`optimizer_ops` removes every update op together with

* its *exclusive ancestors*: ops, other than gradient producers, all of whose successors
  are removed (the learning-rate reads, the handles of variables only the optimizer
  touches, the arithmetic of batch-norm moving-average updates), and
* its *exclusive descendants*: ops all of whose predecessors are removed (end-of-step
  no-ops that only wait for the updates).

Sinks that are not downstream of an update (the loss) stay. The *parameters* of the
iteration are the variables read by a remaining op or having a gradient
(:func:`parameters`); variables only the optimizer touches (moving averages, counters)
are not communicated.
"""

from __future__ import annotations

import networkx as nx

from commsched.model.graph import validate
from commsched.model.traced import check_graph, grads_of, reads_of, updates_of, variables

__all__ = [
    "check_trace",
    "grad_producers",
    "optimizer_ops",
    "parameters",
    "readers",
    "variable_bytes",
]


def check_trace(g: nx.DiGraph) -> None:
    """Raise a :class:`commsched.errors.GraphError` naming the first problem unless ``g`` is
    a valid op graph in the traced-graph format."""
    validate(g)
    check_graph(g)


def variable_bytes(g: nx.DiGraph) -> dict[str, int]:
    """{variable: bytes} in the order of the trace's ``variables`` table (creation order)."""
    return {v: int(info["bytes"]) for v, info in variables(g).items()}


def grad_producers(g: nx.DiGraph) -> dict[str, list[str]]:
    """{op: variables whose gradient it outputs}, ops in graph order, variables in the
    op's ``grad_of`` order."""
    grads_of(g)  # rejects a variable with two gradient ops
    return {op: list(a["grad_of"]) for op, a in g.nodes(data=True) if a.get("grad_of")}


def optimizer_ops(g: nx.DiGraph) -> set[str]:
    """The optimizer's ops: update ops and their exclusive ancestors and descendants.

    See the module docstring. Gradient producers are never included.

    >>> from commsched.model.graph import new_graph, add_op
    >>> g = new_graph({"cpu": 1}, variables={"w": {"bytes": 4}, "lr": {"bytes": 4}})
    >>> for n in ("read_w", "grad_w", "read_lr", "apply", "done", "loss"):
    ...     add_op(g, n, "compute", "cpu", 1.0)
    >>> g.nodes["read_w"]["reads"] = ["w"]; g.nodes["read_lr"]["reads"] = ["lr"]
    >>> g.nodes["grad_w"]["grad_of"] = ["w"]; g.nodes["apply"]["updates"] = ["w"]
    >>> g.add_edges_from([("read_w", "loss"), ("loss", "grad_w"), ("grad_w", "apply"),
    ...                   ("read_lr", "apply"), ("read_w", "apply"), ("apply", "done")])
    >>> sorted(optimizer_ops(g))
    ['apply', 'done', 'read_lr']
    """
    protected = {op for op, a in g.nodes(data=True) if a.get("grad_of")}
    removed = {op for ops in updates_of(g).values() for op in ops}
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
    used = {v for v, ops in reads_of(g).items() if any(op not in dropped for op in ops)}
    used.update(grads_of(g))
    return {v: b for v, b in variable_bytes(g).items() if v in used}


def readers(g: nx.DiGraph, ops: set[str]) -> dict[str, list[str]]:
    """{variable: ops among ``ops`` that read it}, in graph order (variables none of
    ``ops`` reads are absent)."""
    out = {v: [op for op in rs if op in ops] for v, rs in reads_of(g).items()}
    return {v: rs for v, rs in out.items() if rs}
