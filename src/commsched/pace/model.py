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

:func:`to_problem` turns the model into time slots (:class:`SlotProblem`):

* **Slots.** Time is cut into slots of ``slot_s`` seconds (5 ms by default, Sec. IV-A);
  slot ``s`` (0-based) is ``[s * slot_s, (s+1) * slot_s)`` and at most one all-reduce
  runs in a slot (constraint (6)). The paper asks for a slot no longer than the smallest
  (fused) all-reduce: :func:`check_slot` enforces it where a caller wants it
  (:mod:`commsched.pace.fusion` applies it to the fused operators).
* **Processing** ``p_i = ceil(g_i / slot_s)`` slots (constraint (3)), ``g_i`` from the
  all-reduce cost model (:mod:`commsched.cost`: ring all-reduce = Eq. (1) without the
  aggregation term, or the affine ``a + b*S`` fitted to our measurement, Fig. 3 analog).
* **Release (the off-by-one in (7)).** (7) forbids slots ``t < z_{u_i}``, which lets an
  all-reduce run in the very slot in which its producer finishes. *Our choice*: an
  all-reduce may use slot ``s`` only if its producer is done when the slot starts,
  ``s * slot_s >= z_{u_i}``, so its release is ``r_i = ceil(z_{u_i} / slot_s)`` (0-based;
  in the paper's 1-based slots: ``t > r_i``). Compute times stay in seconds (they are
  microseconds to milliseconds, far below a slot; rounding each op to whole slots would
  inflate the DAG).
* **Tails** ``q_i = L_i / slot_s`` and ``C0 / slot_s`` in (fractional) slots. An
  all-reduce whose last slot is ``s`` completes at ``y_i = s + 1`` (the paper's 1-based
  index of that slot), and the DAG ends at ``max(C0/slot_s, max_i (y_i + q_i))`` slots.
  LP (14)'s lexicographic transform needs integer exponents: :meth:`SlotProblem.
  integral` rounds the tails up to whole slots (the paper's ``f_j`` are whole slots).

Examples
--------
>>> p = SlotProblem(release=(0, 1), proc=(3, 1), tail=(1.0, 4.0), base=0.0, slot_s=0.005)
>>> p.horizon
5
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import networkx as nx

from commsched.cost import AllReduceModel, LinearModel
from commsched.errors import CommschedError
from commsched.views.allreduce import NEXT_PREFIX, allreduce_view

__all__ = [
    "DEFAULT_SLOT_S",
    "AllReduceOp",
    "PaceModel",
    "SlotProblem",
    "build_model",
    "check_slot",
    "model_of_window",
    "slots",
    "to_problem",
    "window",
]

#: The paper's example slot length (Sec. IV-A), seconds.
DEFAULT_SLOT_S = 0.005
# Relative tolerance when rounding a time to slots (7.0000000001 slots is 7).
_EPS = 1e-9


def slots(seconds: float, slot_s: float) -> int:
    """``ceil(seconds / slot_s)`` robust to floating-point noise.

    >>> slots(0.015, 0.005), slots(0.0150001, 0.005), slots(0.0, 0.005)
    (3, 4, 0)
    """
    x = seconds / slot_s
    return max(0, math.ceil(x - _EPS * max(1.0, abs(x))))


@dataclass(frozen=True)
class AllReduceOp:
    """One (possibly fused) all-reduce operator of the model.

    ``tensors`` are ``(variable, bytes)`` in buffer order; ``producer`` is ``u_i`` (for a
    fused op: the member producer that finishes last, Alg. 1 line 5); ``ready_s`` is
    ``z_{u_i}`` and ``tail_s`` is ``L_i`` (seconds).
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

    ``ops`` are sorted by ready time (ties keep the trace's order); ``compute_only_s`` is
    the longest compute-only path ``C0``; ``n_compute`` the window's compute ops;
    ``meta`` free-form provenance.
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
        """The window's time when all-reduce ``i`` completes at ``ends_s[i]`` seconds."""
        ends = zip(ends_s, self.ops, strict=True)
        return max([self.compute_only_s] + [e + op.tail_s for e, op in ends])


def window(trace: nx.DiGraph) -> nx.DiGraph:
    """The window of PACE's optimisation (see the module docstring) as an op graph.

    Compute ops keep their traced ``duration``; all-reduce ops are those of
    :func:`commsched.views.allreduce.allreduce_view` (their ``duration`` is not used here:
    the cost model is applied later, by :func:`to_problem`).
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

    ``compute_scale`` multiplies every compute time (to put a CPU trace on a GPU's scale).

    Raises :class:`CommschedError` for a trace without gradients, a non-positive scale, or
    a DAG where an all-reduce precedes a producer (Lemma 1's precondition).
    """
    if not (math.isfinite(compute_scale) and compute_scale > 0):
        raise CommschedError(f"compute_scale must be a finite number > 0, got {compute_scale!r}")
    w = window(trace)
    return model_of_window(w, compute_scale, dict(trace.graph.get("meta", {})))


def model_of_window(w: nx.DiGraph, compute_scale: float = 1.0,
                    meta: Mapping[str, Any] | None = None) -> PaceModel:
    """:func:`build_model` on an already built window (or a fused one,
    :func:`commsched.pace.fusion.fuse_window`). All-reduce ops carry ``params`` and
    ``bytes``; member sizes come from the graph's ``variables`` table."""
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


@dataclass(frozen=True)
class SlotProblem:
    """Single-channel preemptive scheduling in slots: ``1 | r_j, pmtn | max(C_j + q_j)``.

    Operator ``i`` may run in slots ``s >= release[i]`` (0-based), needs ``proc[i] >= 1``
    slots and, once its last slot ``s`` is done (``y_i = s + 1``), delays the end of the
    DAG to ``y_i + tail[i]``; ``base`` is ``C0`` in slots. ``slot_s`` converts to seconds.
    """

    release: tuple[int, ...]
    proc: tuple[int, ...]
    tail: tuple[float, ...]
    base: float = 0.0
    slot_s: float = DEFAULT_SLOT_S

    def __post_init__(self) -> None:
        n = len(self.release)
        if len(self.proc) != n or len(self.tail) != n:
            raise CommschedError("a slot problem needs release, proc and tail of equal length")
        if any(r < 0 for r in self.release) or any(p < 1 for p in self.proc):
            raise CommschedError("a slot problem needs releases >= 0 and processing >= 1 slot")
        if any(not math.isfinite(q) or q < 0 for q in self.tail):
            raise CommschedError("a slot problem needs finite tails >= 0")
        if not (math.isfinite(self.slot_s) and self.slot_s > 0):
            raise CommschedError(f"slot length must be > 0 s, got {self.slot_s!r}")

    @property
    def n(self) -> int:
        return len(self.release)

    @property
    def horizon(self) -> int:
        """Slots enough for any schedule without needless idling: ``max r + sum p``."""
        return max(self.release, default=0) + sum(self.proc)

    def integral(self) -> SlotProblem:
        """The same problem with tails and base rounded up to whole slots (for LP (14))."""
        return replace(self, tail=tuple(float(math.ceil(q - _EPS)) for q in self.tail),
                       base=float(math.ceil(self.base - _EPS)))


def to_problem(model: PaceModel, cost: AllReduceModel, slot_s: float = DEFAULT_SLOT_S
               ) -> SlotProblem:
    """Slot the model (module docstring): ``r = ceil(z/slot)``, ``p = max(1, ceil(g/slot))``,
    ``q = L/slot``, ``base = C0/slot``."""
    if not (math.isfinite(slot_s) and slot_s > 0):
        raise CommschedError(f"slot length must be a finite number > 0 s, got {slot_s!r}")
    return SlotProblem(
        release=tuple(slots(op.ready_s, slot_s) for op in model.ops),
        proc=tuple(max(1, slots(cost.time(op.bytes), slot_s)) for op in model.ops),
        tail=tuple(op.tail_s / slot_s for op in model.ops),
        base=model.compute_only_s / slot_s,
        slot_s=slot_s,
    )


def check_slot(model: PaceModel, cost: AllReduceModel, slot_s: float) -> None:
    """Sec. IV-A's guidance: a slot no longer than the smallest all-reduce; else a
    one-line :class:`CommschedError` naming it."""
    smallest = min(model.ops, key=lambda op: cost.time(op.bytes))
    g = cost.time(smallest.bytes)
    if slot_s > g * (1 + _EPS):
        raise CommschedError(
            f"slot of {slot_s * 1e3:g} ms is longer than the smallest all-reduce "
            f"({smallest.name!r}, {smallest.bytes} B, {g * 1e3:.3g} ms); PACE Sec. IV-A needs "
            "slots no longer than any all-reduce: use a shorter slot or fuse tensors"
        )
