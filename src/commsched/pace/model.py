"""PACE's scheduling model (Bao, Peng, Chen, Wu; INFOCOM 2020, Sec. IV-A, Table I).

From a traced training iteration (:mod:`commsched.model.traced`) we build the DAG the
paper optimises and reduce it, as Sec. IV-B does, to the data of a single-channel
preemptive scheduling problem:

* **Window.** PACE minimises the execution time of the DAG one worker runs between two
  forward passes: the *backward pass of iteration k, its all-reduces and the forward pass
  of iteration k+1*. We take the all-reduce view (:func:`commsched.views.allreduce.
  allreduce_view`, next iteration appended) and keep its backward ops (``is_gradient`` or
  gradient producers), its all-reduce ops and the ``next:`` forward ops. Iteration k's
  forward ops are dropped: they are done when the window starts (time 0), so a backward
  op whose inputs come from them is a source of the window. In steady state the window's
  length is the iteration time (iteration k+1's backward needs no communication).
* **Operators.** Compute op ``j`` has time ``f_j`` (its traced ``duration`` times
  ``compute_scale``; seconds). All-reduce op ``i`` (one per op that outputs gradients:
  the gradients one op produces share their ready time, Sec. IV-A) has size ``S_i`` (the
  sum of its gradients' bytes), producer ``u_i`` and the compute ops ``j`` with
  ``v_j = i`` are its successors in the window (the next forward's readers of its
  parameters).
* **Optimizer updates.** The all-reduce view removes the optimizer; the all-reduce of a
  parameter leads straight to its readers in the next forward pass. *Our choice*: the
  update's time is not modelled (it is element-wise and tiny next to an all-reduce;
  the paper's Sec. IV-A DAG has no update op either).
* **Several all-reduces per compute op.** The paper allows at most one ``v_j``. A
  PyTorch-style op may read two parameters with different producers (weight and bias);
  we allow a set: ``z_j = f_j + max(max_{k in P_j} z_k, max_{i in V_j} y_i)``, and
  Theorem 1 holds unchanged (the induction takes the max over the set).
* **Ready times (Lemma 1).** ``z_{u_i}`` is the longest compute-only path from the
  window's start to the end of ``u_i``. We check Lemma 1's precondition (no all-reduce is
  an ancestor of a producer) and reject a DAG that breaks it.
* **Tails (Theorem 1).** ``L_i`` is the longest computation path from a successor of
  all-reduce ``i`` to the end of the DAG (a dummy sink of time 0 after every sink,
  Theorem 1's footnote), the successor's own time included; 0 for an all-reduce no op
  waits for.
* **Compute-only paths in the objective.** Theorem 1's objective keeps only paths that
  start at an all-reduce; the DAG's execution time is
  ``max(C0, max_i (y_i + L_i))`` where ``C0`` is the longest compute-only path. *Our
  choice*: we report the DAG's time, so ``C0`` is part of every objective we compute; it
  is a constant and changes no argmin.

The slotted scheduling problem of the model is :mod:`commsched.pace.slots`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import networkx as nx

from commsched.cost import LinearModel
from commsched.errors import CommschedError
from commsched.views.allreduce import NEXT_PREFIX, allreduce_view

__all__ = ["AllReduceOp", "PaceModel", "build_model", "model_of_window", "window", "window_end"]

@dataclass(frozen=True)
class AllReduceOp:
    """One (possibly fused) all-reduce operator of the model.

    Parameters
    ----------
    name : str
        Its op id in the window.
    producer : str
        ``u_i``, the op that outputs its gradients (for a fused op: the member producer
        that finishes last, Alg. 1 line 5).
    tensors : tuple of (str, int)
        ``(variable, bytes)`` in buffer order.
    ready_s : float
        ``z_{u_i}``, when its gradients are ready (Lemma 1).
    tail_s : float
        ``L_i``, the longest compute path after it (Theorem 1).

    References
    ----------
    PACE, Sec. IV-A (the model) and Sec. V, Alg. 1 (fusion).
    """

    name: str
    producer: str
    tensors: tuple[tuple[str, int], ...]
    ready_s: float
    tail_s: float

    @property
    def bytes(self) -> int:
        """``S_i``."""
        return sum(b for _, b in self.tensors)


@dataclass(frozen=True)
class PaceModel:
    """The all-reduce operators of a window, in Alg. 1's chain order, and ``C0``.

    Parameters
    ----------
    ops : tuple of AllReduceOp
        Sorted by ready time (ties keep the trace's order).
    compute_only_s : float
        ``C0``, the longest compute-only path.
    n_compute : int
        The window's compute ops.
    meta : mapping
        Free-form provenance.

    References
    ----------
    PACE, Sec. IV-A (the DAG of one iteration) and Sec. V, Alg. 1 (the chain order).
    """

    ops: tuple[AllReduceOp, ...]
    compute_only_s: float
    n_compute: int
    meta: Mapping[str, Any] = field(default_factory=dict, compare=False)

    @property
    def tensors(self) -> dict[str, int]:
        """``{variable: bytes}`` of every all-reduced gradient."""
        return {n: b for op in self.ops for n, b in op.tensors}

    def iteration_time(self, ends_s: Sequence[float]) -> float:
        """The window's time when all-reduce ``i`` completes at ``ends_s[i]`` seconds.

        Parameters
        ----------
        ends_s : sequence of float
            One end per op of :attr:`ops`.

        Returns
        -------
        float
            ``max(C0, max_i(ends_s[i] + L_i))`` (Theorem 1).
        """
        ends = zip(ends_s, self.ops, strict=True)
        return max([self.compute_only_s] + [e + op.tail_s for e, op in ends])


def window(trace: nx.DiGraph) -> nx.DiGraph:
    """The window of PACE's optimisation (see the module docstring) as an op graph.

    Compute ops keep their traced ``duration``; all-reduce ops are those of
    :func:`commsched.views.allreduce.allreduce_view` (their ``duration`` is not used here:
    the cost model is applied later, by :func:`commsched.pace.slots.to_problem`).

    Parameters
    ----------
    trace : networkx.DiGraph
        A traced training iteration.

    Returns
    -------
    networkx.DiGraph
        Backward pass of iteration k, its all-reduces and the forward pass of k+1.

    References
    ----------
    PACE, Sec. IV-A.
    """
    view = allreduce_view(trace, LinearModel(0.0, 0.0), next_forward=True)
    keep = []
    for op, a in view.nodes(data=True):
        if (a["kind"] == "allreduce" or a.get("is_gradient") or a.get("grad_of")
                or op.startswith(NEXT_PREFIX)):
            keep.append(op)
    w = view.subgraph(keep).copy()
    w.graph["window"] = "backward(k) + all-reduces + forward(k+1)"
    return w


def build_model(trace: nx.DiGraph, compute_scale: float = 1.0) -> PaceModel:
    """PACE's model of a traced training iteration (Sec. IV-A; module docstring).

    Parameters
    ----------
    trace : networkx.DiGraph
        A traced training iteration.
    compute_scale : float
        Multiplies every compute time (to put a CPU trace on a GPU's scale).

    Returns
    -------
    PaceModel
        The all-reduce operators with ready times and tails, and ``C0``.

    Raises
    ------
    CommschedError
        For a trace without gradients, a non-positive scale, or a DAG where an all-reduce
        precedes a producer (Lemma 1's precondition).

    References
    ----------
    PACE, Sec. IV-A, Lemma 1 (ready times) and Theorem 1 (tails).
    """
    if not (math.isfinite(compute_scale) and compute_scale > 0):
        raise CommschedError(f"compute_scale must be a finite number > 0, got {compute_scale!r}")
    w = window(trace)
    return model_of_window(w, compute_scale, dict(trace.graph.get("meta", {})))


def model_of_window(w: nx.DiGraph, compute_scale: float = 1.0,
                    meta: Mapping[str, Any] | None = None) -> PaceModel:
    """:func:`build_model` on an already built window.

    Parameters
    ----------
    w : networkx.DiGraph
        A window (:func:`window`) or a fused one
        (:func:`commsched.pace.fusion.fuse_window`); all-reduce ops carry ``params`` and
        ``bytes``, member sizes come from the graph's ``variables`` table.
    compute_scale : float
        Multiplies every compute time.
    meta : mapping, optional
        Provenance for :attr:`PaceModel.meta`.

    Returns
    -------
    PaceModel
        The model.

    Raises
    ------
    CommschedError
        If the window has no all-reduce, or one has several producers or a producer that
        depends on an all-reduce (Lemma 1).

    References
    ----------
    PACE, Sec. IV-A, Lemma 1 and Theorem 1.
    """
    kind = nx.get_node_attributes(w, "kind")
    ars = [op for op in w.nodes if kind[op] == "allreduce"]
    if not ars:
        raise CommschedError("the window has no all-reduce ops (no gradients in the trace)")
    order = list(nx.topological_sort(w))
    f = {op: float(w.nodes[op]["duration"]) * compute_scale
         for op in w.nodes if kind[op] != "allreduce"}
    # z_j over compute-only paths, and whether an all-reduce is an ancestor of j.
    z: dict[str, float] = {}
    after_ar: dict[str, bool] = {}
    for op in order:
        if kind[op] == "allreduce":
            continue
        preds = [p for p in w.pred[op] if kind[p] != "allreduce"]
        z[op] = f[op] + max((z[p] for p in preds), default=0.0)
        after_ar[op] = any(kind[p] == "allreduce" or after_ar[p] for p in w.pred[op])
    tail: dict[str, float] = {}
    for op in reversed(order):
        if kind[op] == "allreduce":
            continue
        succ = [s for s in w.succ[op] if kind[s] != "allreduce"]
        tail[op] = f[op] + max((tail[s] for s in succ), default=0.0)
    variables = w.graph.get("variables", {})
    ops = []
    for pos, aid in enumerate(ars):
        if len(w.pred[aid]) != 1:
            raise CommschedError(f"all-reduce {aid!r} needs exactly one producer op")
        producer = next(iter(w.pred[aid]))
        if after_ar[producer]:
            raise CommschedError(
                f"all-reduce {aid!r}: its producer {producer!r} depends on an all-reduce "
                "(PACE Lemma 1 needs producers that depend on computation only)"
            )
        names = list(w.nodes[aid]["params"])
        tensors = tuple((v, int(variables[v]["bytes"])) for v in names)
        lt = max((tail[s] for s in w.succ[aid]), default=0.0)
        ops.append((z[producer], pos, AllReduceOp(aid, producer, tensors, z[producer], lt)))
    ops.sort(key=lambda t: (t[0], t[1]))
    n_compute = len(f)
    return PaceModel(tuple(o for _, _, o in ops), max(z.values(), default=0.0), n_compute,
                     dict(meta or {}, compute_scale=compute_scale))


def window_end(w: nx.DiGraph, ends_s: Mapping[str, float]) -> float:
    """The window's execution time by plain earliest-start evaluation of its DAG.

    Every compute op starts when all its predecessors are done (constraints (5) and (9));
    all-reduce ``i`` is done at ``ends_s[i]``. This is problem (2)'s objective evaluated on
    the DAG itself, without Theorem 1's reduction to ready times and tails, so that
    :meth:`PaceModel.iteration_time` can be checked against it.

    Parameters
    ----------
    w : networkx.DiGraph
        A window (:func:`window`): compute ops with ``duration``, all-reduce ops.
    ends_s : mapping
        ``{all-reduce op: its end in seconds}``, one per all-reduce op of ``w``.

    Returns
    -------
    float
        The latest finish time of any op.

    References
    ----------
    PACE, Sec. IV-A, problem (2) with constraints (4), (5), (9) and Theorem 1.
    """
    z: dict[str, float] = {}
    for op in nx.topological_sort(w):
        if w.nodes[op]["kind"] == "allreduce":
            z[op] = ends_s[op]
        else:
            z[op] = float(w.nodes[op]["duration"]) + max((z[p] for p in w.pred[op]),
                                                         default=0.0)
    return max(z.values())
