"""All-reduce view: the DAG of one data-parallel iteration with all-reduce ops (PACE).

PACE (Bao, Peng, Chen, Wu; INFOCOM 2020), Sec. IV-A models an iteration of all-reduce
data-parallel training as a DAG of computation ops and all-reduce ops: backward ops
produce gradient tensors, the gradient tensors produced by the same op form one
all-reduce op, and the all-reduce of a parameter's gradient must finish before the
forward ops of the *next* iteration that consume the parameter may start.

:func:`allreduce_view` builds that DAG from a traced training iteration (format and the
removal of optimizer ops: :mod:`commsched.views.common`):

* every compute op of the trace that is not an optimizer op is kept with its traced
  duration, attributes and edges, on the compute resource;
* every op ``p`` whose ``grad_of`` names variables ``v1..vk`` gets one all-reduce op
  ``allreduce:<p>`` (kind ``allreduce``, resource ``net`` of capacity 1, ``bytes`` = the
  sum of the variables' bytes, ``params`` = [v1..vk], ``param`` = v1 when k = 1, duration
  = ``model.time(bytes)``) and the edge ``p -> allreduce:<p>``;
* the next iteration: we model **one iteration with the next iteration's forward ops
  appended** (``next_forward=True``, our choice; PACE's objective is the time until the
  next forward pass can run, which is what all-reduce scheduling changes). The forward
  ops (kept ops that are not ``is_gradient``) are copied as ``next:<op>`` with their
  edges among themselves, and ``allreduce:<p> -> next:<r>`` for every forward op ``r``
  reading one of the all-reduced variables. The iteration-0 forward ops need nothing
  from the network (the parameters are already in place). With ``next_forward=False``
  the all-reduce ops are sinks and the makespan is the end of the last all-reduce.

``next:`` and ``allreduce:`` ids cannot collide with TensorFlow op names (no colons).
The graph attribute ``allreduces`` maps each all-reduce id to its variables.
"""

from __future__ import annotations

import networkx as nx

from commsched.cost import AllReduceModel
from commsched.errors import CommschedError
from commsched.model.graph import new_graph, validate
from commsched.views.common import (
    check_trace,
    grad_producers,
    optimizer_ops,
    readers,
    variable_bytes,
)

__all__ = ["NEXT_PREFIX", "allreduce_view"]

#: Prefix of the next iteration's copies of the forward ops.
NEXT_PREFIX = "next:"


def allreduce_view(
    trace: nx.DiGraph,
    model: AllReduceModel,
    next_forward: bool = True,
    compute: str = "cpu",
    net: str = "net",
) -> nx.DiGraph:
    """The all-reduce DAG of a traced training iteration (PACE Sec. IV-A).

    Parameters
    ----------
    trace
        A traced graph of a training iteration (it must have gradient ops).
    model
        All-reduce time model: :class:`commsched.cost.RingAllReduce` or a
        :class:`commsched.cost.LinearModel` (e.g. fitted by
        :func:`commsched.cost.fit_linear`).
    next_forward
        Append the next iteration's forward ops (see the module docstring).
    compute, net
        Names of the compute resource and of the all-reduce channel (capacity 1 each).

    Examples
    --------
    >>> from commsched.cost import LinearModel
    >>> from commsched.model.traced import example_trace
    >>> t = example_trace()  # read -> mm -> grad (of w, 100 B)
    >>> v = allreduce_view(t, LinearModel(0.5, 0.01))
    >>> for e in sorted(v.edges): print(*e)
    allreduce:grad next:read
    grad allreduce:grad
    mm grad
    next:read next:mm
    read mm
    >>> v.nodes["allreduce:grad"]["duration"]
    1.5
    """
    check_trace(trace)
    if compute == net:
        raise CommschedError(f"compute and network resources need different names, got {net!r}")
    grads = grad_producers(trace)
    if not grads:
        raise CommschedError(
            "the trace has no gradient ops (grad_of); the all-reduce view needs a training trace"
        )
    sizes = variable_bytes(trace)
    dropped = optimizer_ops(trace)
    kept = [op for op in trace.nodes if op not in dropped]
    g = new_graph(
        {compute: 1, net: 1},
        view="allreduce",
        meta=dict(trace.graph.get("meta", {})),
        variables=dict(trace.graph["variables"]),
        model={"type": type(model).__name__, "repr": repr(model)},
        next_forward=next_forward,
    )
    for op in kept:
        g.add_node(op, **{**trace.nodes[op], "resource": compute})
    for u, w, a in trace.edges(data=True):
        if u not in dropped and w not in dropped:
            g.add_edge(u, w, **a)
    allreduces: dict[str, list[str]] = {}
    for p, names in grads.items():
        aid = f"allreduce:{p}"
        nbytes = sum(sizes[v] for v in names)
        attrs: dict[str, object] = {"bytes": nbytes, "params": list(names)}
        if len(names) == 1:
            attrs["param"] = names[0]
        g.add_node(aid, kind="allreduce", resource=net, duration=float(model.time(nbytes)), **attrs)
        g.add_edge(p, aid, control=False, bytes=nbytes)
        allreduces[aid] = list(names)
    if next_forward:
        forward = [
            op for op in kept if not trace.nodes[op].get("is_gradient", False) and op not in grads
        ]
        fset = set(forward)
        for op in forward:
            g.add_node(NEXT_PREFIX + op, **{**trace.nodes[op], "resource": compute, "iteration": 1})
        for u, w, a in trace.edges(data=True):
            if u in fset and w in fset:
                g.add_edge(NEXT_PREFIX + u, NEXT_PREFIX + w, **a)
        read_by = readers(trace, fset)
        for aid, names in allreduces.items():
            for v in names:
                for r in read_by.get(v, []):
                    g.add_edge(aid, NEXT_PREFIX + r, control=False, bytes=sizes[v])
    g.graph["allreduces"] = allreduces
    validate(g)
    return g
