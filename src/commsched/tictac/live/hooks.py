"""Enforcement hooks: impose a transfer order on a TensorFlow parameter-server graph.

The live job (:mod:`commsched.tictac.live.job`) builds a model in ``tf.compat.v1`` graph mode
with ``replica_device_setter``: each variable lives on a parameter server (``/job:ps``),
and each use of it on the worker goes through a ``ReadVariableOp``. Keras' reads carry no
device, so the placer colocates them with their variable on the PS; the read's output then
crosses to the worker by a Send (on the PS) / Recv (on the worker) pair. The worker's Recv
ops have no inputs: they are all activated at the start of a step and each issues a
``RecvTensor`` RPC, which the PS answers as soon as the matching read has produced its
value. Hence *when each read runs on the PS decides when each transfer is handed to
gRPC*. Three hooks, selected by ``enforce``:

``none``
    Vanilla TensorFlow: the reads run in whatever order the PS's executor picks, so the
    transfers start in an arbitrary order (TicTac Sec. 2.2, the baseline).

``dag``
    TicTac Sec. 5.1, "DAG" option: the order is written into the worker's dataflow graph.
    For every read, a worker-side ``Identity`` of its value completes only when the
    transfer has arrived; a ``NoOp`` gate on the worker waits for all identities of
    priority group *k*, and every read of group *k+1* gets a control input from that gate
    (a cross-device control edge, which TensorFlow implements with a tiny Send/Recv of
    a control token). Transfers of one group run concurrently; group *k+1* is requested
    only after all of group *k* has arrived, so there is no pipelining across groups and
    every group boundary costs a round trip: the drawback the paper cites for rejecting
    this option.

``sender``
    The paper's choice (Sec. 5.1-5.2): order the *activation* of transfers at the sender,
    before they are handed to gRPC, and let them pipeline on the wire. Our hook is a graph
    rewrite on the PS side, in three parts:

    * *chain*: on each PS device, the reads form one chain, a ``NoOp`` gate between each
      read and the next, in priority order, so the PS produces the values one after the
      other (reads take microseconds; nothing waits for a transfer, so transfers still
      pipeline). Reads of equal priority (TIC's groups) are chained too, in variable
      creation order: the paper lets equal priorities go in any order, and we measured
      that leaving a large group unchained scrambles the dispatch (TIC on Inception v1:
      order agreement 0.30 with group gates, 0.91 with the full chain);
    * *start gate*: the first group's reads wait for a control token from the worker's
      step start, so the worker's ``RecvTensor`` requests are (mostly) already waiting at
      the PS when the values appear; a value that is ready before its request arrives is
      answered in request-arrival order, which is the worker's arbitrary order;
    * *dispatch order*: a PS with one inter-op thread runs the whole chain in one executor
      pass, and we observed TensorFlow 2.21 hand the responses that became ready during
      the pass to gRPC mostly *last-in first-out*: with the chain in priority order, the
      send-start order of the transfers came out reversed (order agreement 0.0 on the
      thesis CNN) and the step slower than the baseline. Our explanation, not verified in
      TensorFlow's source: each response is scheduled on the executor thread's own
      thread-pool queue, which Eigen pops from the front. So with ``sender_lifo`` (the
      default, for one inter-op thread) the chain runs in *reverse* priority order and
      the responses leave mostly in priority order (measured agreement 0.68-1.0 in the
      default live run; the baseline's is about 0.46).

    How this differs from the authors' implementation: TicTac patches TensorFlow's gRPC
    runtime (about 40 lines) so that the PS *holds each RecvTensor response until the
    transfers of higher priority have been handed to gRPC*: ordering inside the RPC layer,
    independent of when requests arrive, of the executor's thread pool and of how many
    threads it has. Our hook orders the same events one layer up, in the PS's dataflow
    graph, with stock TensorFlow. Consequences: (1) it orders only values produced by
    ``ReadVariableOp``s, i.e. parameter transfers (what TIC and TAC rank); (2) a request
    that arrives after its value was produced (a late worker) is answered at once, so
    the order is not re-imposed among late requests, whereas the patched runtime would
    queue them; (3) it depends on the LIFO dispatch described above, an implementation
    detail of TensorFlow's executor. That is why every live run measures what order the
    transfers actually took (``order_agreement`` of :mod:`commsched.tictac.live.analysis`,
    from the sender's send-start times in the distributed FULL_TRACE) and, in captured
    steps, in which order the PS handed them over and its gRPC wrote them
    (:mod:`commsched.tictac.live.grpcorder`).

TensorFlow is imported by the functions, never at module import.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

from commsched.errors import CommschedError
from commsched.tictac.live.order import priority_groups

__all__ = ["ENFORCE", "Enforce", "apply_hook", "ps_variables", "reads_by_variable"]

Enforce = Literal["none", "dag", "sender"]
#: The enforcement hooks, in the order the experiment reports them.
ENFORCE: tuple[str, ...] = ("none", "dag", "sender")

_VAR_OPS = {"VarHandleOp", "VariableV2"}


def _is_ps(device: str) -> bool:
    return "/job:ps" in device


def ps_variables(graph: Any) -> dict[str, dict[str, Any]]:
    """Every variable placed on a parameter server.

    Parameters
    ----------
    graph : tf.Graph
        A graph built under ``replica_device_setter``.

    Returns
    -------
    dict
        In creation order, shared name -> ``{"shape": [...], "bytes": int}``.
    """
    import tensorflow as tf

    out: dict[str, dict[str, Any]] = {}
    for op in graph.get_operations():
        if op.type in _VAR_OPS and _is_ps(op.device):
            shape = tf.TensorShape(op.get_attr("shape")).as_list()
            n = 1
            for d in shape:
                n *= int(d)
            out[op.get_attr("shared_name").decode() or op.name] = {
                "shape": [int(d) for d in shape],
                "bytes": n * tf.as_dtype(op.get_attr("dtype")).size,
            }
    return out


def reads_by_variable(graph: Any, fetches: Iterable[Any]) -> dict[str, list[Any]]:
    """The PS-side ``ReadVariableOp``s a step of ``fetches`` runs, by variable shared name.

    Only reads that are ancestors of ``fetches`` count (TensorFlow prunes the rest), and
    only reads of variables on a parameter server.

    Parameters
    ----------
    graph : tf.Graph
        The graph.
    fetches : iterable of tf.Tensor or tf.Operation
        What a step runs.

    Returns
    -------
    dict of str to list of tf.Operation
        ``{variable shared name: its reads}``.
    """
    seen: set[str] = set()
    stack = [f.op if hasattr(f, "op") else f for f in fetches]
    out: dict[str, list[Any]] = defaultdict(list)
    while stack:
        op = stack.pop()
        if op.name in seen:
            continue
        seen.add(op.name)
        if op.type == "ReadVariableOp":
            src = op.inputs[0].op
            if src.type in _VAR_OPS and _is_ps(src.device):
                out[src.get_attr("shared_name").decode() or src.name].append(op)
        stack.extend(t.op for t in op.inputs)
        stack.extend(op.control_inputs)
    return dict(out)


def apply_hook(
    graph: Any,
    reads: Mapping[str, Sequence[Any]],
    priorities: Mapping[str, float],
    enforce: str,
    worker_device: str,
    sender_lifo: bool = True,
) -> list[tuple[str, str]]:
    """Add the control edges of an enforcement hook to a graph (module docstring).

    Every read must already be placed, i.e. the graph was built under
    ``replica_device_setter``.

    Parameters
    ----------
    graph : tf.Graph
        The worker's graph.
    reads : mapping of str to sequence of tf.Operation
        :func:`reads_by_variable`'s reads.
    priorities : mapping of str to float
        The same variable names to numbers, lower first; variables without one are never
        held back.
    enforce : str
        One of :data:`ENFORCE`.
    worker_device : str
        The worker's device (the DAG hook's gates and the sender hook's start run there).
    sender_lifo : bool, optional
        Chain the sender hook's groups in reverse priority order, for a PS whose executor
        dispatches the responses of one pass last-in first-out (one inter-op thread;
        default).

    Returns
    -------
    list of tuple of (str, str)
        The added control edges, (from op, to op).

    Raises
    ------
    CommschedError
        If ``enforce`` is not a hook.

    References
    ----------
    .. [1] Hashemi, Jyothi & Campbell, "TicTac", SysML 2019, Secs. 5.1-5.2 (the DAG option
       and enforcement at the sender).
    """
    import tensorflow as tf

    if enforce not in ENFORCE:
        raise CommschedError(f"enforce {enforce!r}: expected one of {', '.join(ENFORCE)}")
    if enforce == "none":
        return []
    edges: list[tuple[str, str]] = []
    names = list(reads)
    with graph.as_default():
        if enforce == "sender":
            by_device: dict[str, list[str]] = defaultdict(list)
            for v in names:  # a read has no device of its own: it runs where its variable is
                by_device[reads[v][0].inputs[0].op.device].append(v)
            with tf.device(worker_device):
                start = tf.no_op(name="enforce_sender/start")
            created = {n: i for i, n in enumerate(ps_variables(graph))}
            for dev, vs in sorted(by_device.items()):
                # one read per step of the chain: ties (TIC's groups) in creation order
                vs = sorted(vs, key=lambda v: created.get(v, len(created)))
                groups = [[v] for grp in priority_groups(priorities, vs) for v in grp]
                if sender_lifo:  # the PS dispatches a pass's responses last-in first-out
                    groups.reverse()
                for v in groups[0] if groups else []:
                    for r in reads[v]:
                        r._add_control_inputs([start])
                        edges.append((start.name, r.name))
                for k in range(len(groups) - 1):
                    ops = [r for v in groups[k] for r in reads[v]]
                    with tf.device(dev), tf.control_dependencies(ops):
                        gate = tf.no_op(name=f"enforce_sender/gate_{k}")
                    for v in groups[k + 1]:
                        for r in reads[v]:
                            r._add_control_inputs([gate])
                            edges.append((gate.name, r.name))
        else:  # dag
            groups = priority_groups(priorities, names)
            for k in range(len(groups) - 1):
                with tf.device(worker_device):
                    arrived = [
                        tf.identity(r.outputs[0], name=f"enforce_dag/arrived_{k}_{i}").op
                        for i, r in enumerate(x for v in groups[k] for x in reads[v])
                    ]
                    with tf.control_dependencies(arrived):
                        gate = tf.no_op(name=f"enforce_dag/gate_{k}")
                for v in groups[k + 1]:
                    for r in reads[v]:
                        r._add_control_inputs([gate])
                        edges.append((gate.name, r.name))
    return edges
