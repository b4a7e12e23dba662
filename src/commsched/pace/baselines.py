"""The all-reduce policy interface and PACE's static baselines (WFBP, TicTac, P3).

Every policy maps a :class:`PolicyContext` (a prepared traced iteration, the all-reduce
cost model, the cluster and the policy's options) to a :class:`Decision`: the all-reduce
plan (:mod:`commsched.pace.plan`) it executes and, for policies whose decisions depend on
the run (dynamic policies), the release time of each partition
(:mod:`commsched.pace.sim` explains the mechanism and why the simulator then
reproduces the policy's own timeline). The registry of every policy, PACE's own entries
and its ablations is :mod:`commsched.pace.policies`.

Tensors are the trace's gradient variables (:attr:`Workload.sizes`). Their *ready time* is
when their gradient is produced (:attr:`Workload.ready`), their *layer order* the time the
forward pass first reads them (:attr:`Workload.need`; earlier = closer to the input = more
urgent for the next iteration). Ties go to the variables' creation order.

========================  =====================================================================
policy                    what it does (our port to the single-channel all-reduce model)
========================  =====================================================================
``wfbp``                  wait-free backpropagation, PACE's baseline (i): one all-reduce per
                          tensor as soon as it is ready, first-in first-out, no fusion.
``tictac``                TicTac (PACE's baseline (iii)) ported to all-reduce: TicTac orders
                          parameter transfers so that the forward pass is blocked least; here
                          every tensor's all-reduce plays a transfer (a ``recv`` of duration
                          ``model.time(bytes)``) feeding the next forward pass, TAC (Alg. 3,
                          timing-aware, :func:`commsched.tictac.tac`) orders them, and the
                          channel runs whole tensors by that priority: no fusion, no
                          preemption.
``p3``                    P3 (Jayarajan et al., SysML 2019): tensors sliced into
                          ``slice_bytes`` slices, priority = layer order, preemption at slice
                          boundaries (a static plan). Slice size: option ``slice_kib``; the
                          default 200 KiB (51,200 float32 values) is our assumption.
========================  =====================================================================

Sources and parameters. WFBP: Zhang et al., "Poseidon", USENIX ATC 2017 (PACE's [3]), as
PACE Sec. VI-B describes it. TicTac: Hashemi et al., SysML 2019 (PACE's [5]), our TAC
(:mod:`commsched.tictac`). P3: Jayarajan et al., SysML 2019 (PACE's [12]); option
``slice_kib``. The dynamic baselines (Horovod, PyTorch DDP, ByteScheduler) are
:mod:`commsched.pace.dynamic`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import networkx as nx

from commsched.cost import AllReduceModel
from commsched.errors import CommschedError
from commsched.model.graph import new_graph
from commsched.pace.plan import Group, Partition, Plan
from commsched.pace.plangraph import NET, Release
from commsched.pace.sim import Workload
from commsched.tictac import tac

__all__ = [
    "Decision",
    "Policy",
    "PolicyContext",
    "fifo_order",
    "layer_order",
    "p3",
    "tictac",
    "wfbp",
    "whole_group",
]

@dataclass(frozen=True)
class PolicyContext:
    """What a policy may look at.

    Parameters
    ----------
    workload : Workload
        The prepared traced iteration (ready times, layer order, sizes).
    model : AllReduceModel
        The all-reduce time model.
    trace : networkx.DiGraph, optional
        The traced graph itself (PACE's planner builds its own model of it).
    n_workers : int
        Workers of the ring all-reduce.
    bandwidth_Bps : float
        Their link bandwidth (bytes/s).
    options : mapping
        The policy's own settings (config ``pace_sim.options.<policy>``), e.g.
        ``{"slice_kib": 200}`` for P3.
    """

    workload: Workload
    model: AllReduceModel
    trace: nx.DiGraph | None = None
    n_workers: int = 1
    bandwidth_Bps: float = math.inf
    options: Mapping[str, Any] = field(default_factory=dict)

    def option(self, key: str, default: Any) -> Any:
        """One of the policy's options.

        Parameters
        ----------
        key : str
            The option (a key of :attr:`options`).
        default : object
            Its value when not set.

        Returns
        -------
        object
            The option's value.
        """
        return self.options.get(key, default)


@dataclass(frozen=True)
class Decision:
    """What a policy decided.

    Parameters
    ----------
    plan : Plan
        The all-reduce plan it executes.
    release : mapping
        ``{(group, offset): earliest start (s)}`` of its partitions (dynamic policies;
        :mod:`commsched.pace.sim`); empty for a static plan.
    info : mapping
        What it chose (tuned settings, PACE's prediction), for the record.
    """

    plan: Plan
    release: Release = field(default_factory=dict)
    info: Mapping[str, Any] = field(default_factory=dict)


Policy = Callable[[PolicyContext], Decision]


def fifo_order(w: Workload) -> list[str]:
    """Tensors by ready time, ties in creation order.

    Parameters
    ----------
    w : Workload
        The prepared iteration (:attr:`Workload.ready`).

    Returns
    -------
    list of str
        The gradient tensors, first ready first (WFBP's order).
    """
    pos = {v: i for i, v in enumerate(w.sizes)}
    return sorted(w.sizes, key=lambda v: (w.ready[v], pos[v]))


def layer_order(w: Workload) -> list[str]:
    """Tensors by the time the forward pass first reads them, ties in creation order.

    Parameters
    ----------
    w : Workload
        The prepared iteration (:attr:`Workload.need`).

    Returns
    -------
    list of str
        The gradient tensors, the one the next forward pass needs first first (the
        priority order of P3 and ByteScheduler).
    """
    pos = {v: i for i, v in enumerate(w.sizes)}
    return sorted(w.sizes, key=lambda v: (w.need[v], pos[v]))


def whole_group(tensors: Sequence[tuple[str, int]], priority: int) -> Group:
    """One fused group of ``tensors`` all-reduced whole.

    Parameters
    ----------
    tensors : sequence of (str, int)
        ``(name, bytes)`` in buffer order.
    priority : int
        The priority of its one partition (smaller first).

    Returns
    -------
    Group
        The group with one partition covering every byte.
    """
    return Group(tuple(tensors), (Partition(0, sum(b for _, b in tensors), priority),))


def _sliced(name: str, size: int, slice_bytes: int, priority: int) -> Group:
    offs = range(0, size, slice_bytes)
    return Group(((name, size),), tuple(Partition(o, min(slice_bytes, size - o), priority)
                                        for o in offs))


def wfbp(ctx: PolicyContext) -> Decision:
    """WFBP: one all-reduce per tensor, first-in first-out (module docstring).

    Parameters
    ----------
    ctx : PolicyContext
        The iteration (ready times).

    Returns
    -------
    Decision
        One whole group per tensor, priority = ready order.

    References
    ----------
    Zhang et al., "Poseidon", USENIX ATC 2017; PACE, Sec. VI-B, baseline (i).
    """
    w = ctx.workload
    groups = tuple(whole_group([(v, w.sizes[v])], k) for k, v in enumerate(fifo_order(w)))
    return Decision(Plan("wfbp", groups, {"order": "ready time"}))


def tictac(ctx: PolicyContext) -> Decision:
    """TicTac's TAC order of whole tensors (module docstring).

    Parameters
    ----------
    ctx : PolicyContext
        The iteration (the next forward pass) and the cost model.

    Returns
    -------
    Decision
        One whole group per tensor, priority = TAC's order of its all-reduce.

    References
    ----------
    Hashemi et al., "TicTac", SysML 2019, Alg. 3 (TAC); PACE, Sec. VI-B, baseline (iii).
    """
    w = ctx.workload
    fwd = w.forward_graph()
    g = new_graph({**fwd.graph["resources"], NET: 1})
    g.add_nodes_from(fwd.nodes(data=True))
    g.add_edges_from(fwd.edges(data=True))
    for v, b in w.sizes.items():
        rid = f"recv:{v}"
        g.add_node(rid, kind="recv", resource=NET, duration=float(ctx.model.time(b)), bytes=b)
        g.add_edges_from((rid, r) for r in w.readers.get(v, []))
    prio = tac(g)
    pos = {v: i for i, v in enumerate(w.sizes)}
    order = sorted(w.sizes, key=lambda v: (prio[f"recv:{v}"], pos[v]))
    groups = tuple(whole_group([(v, w.sizes[v])], k) for k, v in enumerate(order))
    return Decision(Plan("tictac", groups, {"order": "TAC on the next forward pass"}))


def p3(ctx: PolicyContext) -> Decision:
    """P3: fixed-size slices, layer priority, preemption at slice boundaries.

    Parameters
    ----------
    ctx : PolicyContext
        The iteration; option ``slice_kib`` (default 200).

    Returns
    -------
    Decision
        One group per tensor, sliced; priority = layer order.

    Raises
    ------
    CommschedError
        If ``slice_kib`` gives less than one byte.

    References
    ----------
    Jayarajan et al., "Priority-based Parameter Propagation", SysML 2019 (PACE's [12]).
    """
    w = ctx.workload
    slice_bytes = int(float(ctx.option("slice_kib", 200)) * 1024)
    if slice_bytes < 1:
        raise CommschedError("p3: slice_kib must give at least one byte")
    groups = tuple(_sliced(v, w.sizes[v], slice_bytes, k)
                   for k, v in enumerate(layer_order(w)))
    return Decision(Plan("p3", groups, {"slice_bytes": slice_bytes}))


