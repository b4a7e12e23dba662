"""Traced TensorFlow graphs in the thesis model (Laich 2017, Sec. 6.2 and Table 7.2).

The thesis extracted three TensorFlow graphs (a CNN, an RNN and a dynamic RNN) and gave
them random weights in 1-100 (Sec. 6.2). We use our own traces of the same three models
(:mod:`commsched.model.traced`; ``thesis_cnn``, ``thesis_rnn``, ``thesis_dynamic_rnn``)
and take the weights from the measurements, mapped into the thesis' range 1-100 on a log
scale (:func:`log_range`): traced times and byte counts span six or more decades, and
mapped linearly a handful of huge tensors (the dense layer's weights) would decide every
makespan alone. The order of the ops by time and of the tensors by size is kept.

* operations: the op's traced time (the time oracle);
* tensor size: the op's output bytes (0 bytes: size 1);
* memory demand: the bytes of the variable for a ``VarHandleOp``, else the output bytes;
* colocation: TensorFlow colocates every op that reads or updates a resource variable
  with the variable's handle op (``reads`` / ``updates`` of the trace), closed
  transitively by the union-find of :class:`~commsched.placement.model.Problem`;
* device constraint: none (our traces ran on one CPU);
* edges: every data and control dependency of the trace.

With ``measured=True`` (the live placement, :mod:`commsched.placement.live`) the weights
stay in real units instead: an op's operations are its traced time in microseconds (times
``time_factor``, one number or one per op) plus ``op_overhead_us`` (devices of speed 1
then run one operation per microsecond), tensor sizes and memory demands are bytes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import networkx as nx

from commsched.placement.model import PlacementError, Problem

__all__ = ["log_range", "problem_from_trace"]


def log_range(values: list[float], lo: float = 1.0, hi: float = 100.0) -> list[int]:
    """Map positive values onto integers ``lo..hi`` on a log scale (non-positive: ``lo``).

    Parameters
    ----------
    values : list of float
        Traced times or sizes.
    lo, hi : float
        The integer range.

    Returns
    -------
    list of int

    References
    ----------
    Laich 2017, Sec. 6.2 (weights are integers 1-100).

    Examples
    --------
    >>> log_range([0.0, 1e-6, 1e-3, 1.0])
    [1, 1, 50, 100]
    """
    pos = [v for v in values if v > 0]
    if not pos:
        return [int(lo)] * len(values)
    a, b = math.log(min(pos)), math.log(max(pos))
    span = b - a or 1.0
    return [int(lo) if v <= 0 else round(lo + (hi - lo) * (math.log(v) - a) / span)
            for v in values]


def problem_from_trace(g: nx.DiGraph, measured: bool = False, op_overhead_us: float = 0.0,
                       time_factor: float | Sequence[float] = 1.0) -> Problem:
    """The thesis problem of a traced op graph; see the module docstring.

    Parameters
    ----------
    g : networkx.DiGraph
        A traced graph (:mod:`commsched.model.traced`).
    measured : bool
        Real units (microseconds, bytes) instead of the thesis' 1-100 weights.
    op_overhead_us : float
        Added to every op's time under ``measured`` (the executor's per-op cost).
    time_factor : float or sequence of float
        Multiplies every traced time under ``measured`` (live op time over traced), or
        each op's (``g.nodes`` order; the live placement's slowed ops).

    Returns
    -------
    Problem
        Nodes in the order of ``g.nodes``.

    Raises
    ------
    PlacementError
        Naming the first op that has no traced time (a missing, negative or non-finite
        ``duration``), or whose ``out_bytes`` are not a non-negative number: such an op
        cannot be mapped to the thesis' weights.
    """
    nodes = list(g.nodes)
    index = {v: i for i, v in enumerate(nodes)}
    a = g.nodes
    for v in nodes:
        d = a[v].get("duration")
        if not isinstance(d, (int, float)) or not math.isfinite(d) or d < 0:
            raise PlacementError(f"op {v!r} has no traced time (duration {d!r}): it cannot "
                                 f"be mapped to the trace")
        b = a[v].get("out_bytes") or 0
        if not isinstance(b, (int, float)) or not math.isfinite(b) or b < 0:
            raise PlacementError(f"op {v!r}: output bytes {b!r} are not a non-negative "
                                 f"number")
    raw_size = [float(a[v].get("out_bytes") or 0) for v in nodes]
    variables = g.graph.get("variables", {})
    raw_ram = [float(variables[v]["bytes"]) if v in variables else raw_size[i]
               for i, v in enumerate(nodes)]
    coloc = []
    for v in nodes:
        for key in ("reads", "updates"):
            for var in a[v].get(key) or []:
                if var in index:
                    coloc.append((index[v], index[var]))
    times = [float(a[v]["duration"]) for v in nodes]
    if measured:
        factor = [float(time_factor)] * len(times) if isinstance(time_factor, (int, float)) \
            else [float(x) for x in time_factor]
        return Problem.build(ops=[t * 1e6 * x + op_overhead_us
                                  for t, x in zip(times, factor, strict=True)],
                             size=raw_size, ram=raw_ram,
                             edges=[(index[u], index[v]) for u, v in g.edges],
                             colocation=coloc, ids=list(range(len(nodes))))
    return Problem.build(ops=log_range(times),
                         size=log_range(raw_size), ram=log_range(raw_ram),
                         edges=[(index[u], index[v]) for u, v in g.edges],
                         colocation=coloc, ids=list(range(len(nodes))))
