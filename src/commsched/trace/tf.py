"""The TensorFlow tracer: a real model's iteration as an op graph with measured op times.

:func:`trace_model` builds a model of :mod:`commsched.trace.zoo` (random weights) on
synthetic inputs, runs ``warmup`` untraced and ``iterations`` traced iterations, and returns
the op graph of one iteration in the traced-graph format of :mod:`commsched.model.traced`
together with the raw trace it was measured from.

Route
    The iteration is a ``tf.compat.v1`` graph run by a ``Session`` with
    ``RunOptions(trace_level=FULL_TRACE)``; the per-op times are the ``RunMetadata`` step
    stats (the second of the two routes FACTS.md lists; the other is ``tf.function`` plus
    the profiler's XPlane files). We chose it because

    * the graph we export is exactly the ``GraphDef`` the session runs, and the step stats
      name its nodes, so every event maps to a graph op by name (no captured-placeholder
      mapping, no profiler files to find and parse);
    * training is spelled out in the graph: ``tf.gradients`` makes the backward ops (we flag
      exactly the ops it created as gradients), and ``GradientDescentOptimizer`` makes one
      explicit ``ResourceApplyGradientDescent`` op per variable, so the variable updates a
      parameter server would receive are ops of the graph;
    * op names are those of a TF1-style graph, the kind TicTac's enforcement runs on a
      parameter server (``replica_device_setter``), so priorities computed on a trace can be
      applied to a live graph built the same way.

    Grappler, the classic graph optimizer (constant folding, CSE, inlining) and oneDNN's
    op fusion are switched off, so the session runs the graph's nodes under their own
    names (FACTS.md: the misses of the other settings are renamed nodes); TensorFlow
    still lowers functional control flow (``While`` of the dynamic RNN), whose events
    are charged to the functional op (:func:`commsched.model.traced.attribute`). The
    tracer measures *coverage*, the fraction of graph ops that got a time in every traced
    iteration, records it in ``meta`` and refuses a trace below ``min_coverage`` (0.95 by
    default). Ops the runtime never runs because they only feed a lowered functional op
    (unused loop accumulators) keep ``samples == []`` and are left out of the fraction
    (``meta["pruned_ops"]`` counts them).

Time oracle
    An op's sample is the executor's time for the node (``all_end_rel_nanos``: kernel plus
    the executor's bookkeeping, what TensorFlow's timeline draws); the graph keeps all K
    samples and ``duration = min(samples)`` (TicTac, SysML 2019, Sec. 5). Threads are pinned
    (``intra_op``/``inter_op`` parallelism, 2 and 1 by default: one op at a time using both
    cores, which matches the graph's single compute resource of capacity 1).

Training step
    Loss = mean sparse softmax cross-entropy of the logits against uniformly random labels;
    the backward pass is ``tf.gradients`` of the loss with respect to the trainable
    variables; the update is plain SGD (learning rate ``lr``). State updates the forward
    pass makes itself (batch-norm moving statistics, dropout seed state) are run too and
    appear as ``AssignVariableOp`` ops that ``update`` non-trainable variables.
"""

from __future__ import annotations

import os
import time
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import networkx as nx
import numpy as np

from commsched.errors import CommschedError
from commsched.model import graph
from commsched.model.traced import FUNCTIONAL_OPS, RAW_FIELDS, RAW_FORMAT, samples_from_raw
from commsched.progress import progress
from commsched.trace import zoo
from commsched.trace.common import check_args, check_coverage, cpu_model, op_time_sums, run_meta

__all__ = ["ROUTE", "BuiltIteration", "Step", "build_iteration", "build_step", "count_model",
           "keep_node_names", "trace_model"]

ROUTE = "tf.compat.v1 Session + RunMetadata step stats (FULL_TRACE), optimizers off"

#: Ops that write a variable (the rest of a variable's consumers read it).
_UPDATE_PREFIXES = ("ResourceApply", "ResourceSparseApply", "ResourceScatter", "AssignVariableOp",
                    "AssignAddVariableOp", "AssignSubVariableOp")
#: Ops that pass a resource handle on (a read or write happens further down).
_PASS_THROUGH = frozenset({"Identity", "IdentityN", "Enter", "Exit", "Switch", "Merge",
                           "NextIteration", "RefEnter", "RefIdentity"})
_STATE_UPDATES = frozenset({"AssignVariableOp", "AssignAddVariableOp", "AssignSubVariableOp"})


def _device_model(device: str) -> str:
    """A human-readable name of the processor the trace ran on."""
    if device == "gpu":
        from tensorflow.python.client import device_lib  # lazily, TF is installed here

        gpus = [d.physical_device_desc for d in device_lib.list_local_devices()
                if d.device_type == "GPU"]
        return "; ".join(gpus) or "GPU"
    return cpu_model()


def _nbytes(tf: Any, dtype: Any, shape: Any) -> int | None:
    """Bytes of a tensor, 0 for handles/variants/strings, None if the shape is unknown."""
    dt = tf.as_dtype(dtype)
    if dt in (tf.resource, tf.variant, tf.string):
        return 0
    if shape is None:
        return None
    dims = list(shape)
    if any(d is None or d < 0 for d in dims):
        return None
    n = 1
    for d in dims:
        n *= int(d)
    return n * dt.size


def _load_tensorflow() -> tuple[Any, Any]:
    """Import TensorFlow for tracing: oneDNN off, INFO logs off (unless the user set them).

    oneDNN's graph rewrite fuses ops under other names (Conv2D + BiasAdd become one
    ``_MklNativeConv2DWithBias`` named like the BiasAdd), so some graph ops would get no
    time; TensorFlow's own kernels keep every op. Has no effect if TensorFlow is already
    imported (``meta["onednn"]`` records the setting).
    """
    os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
    return zoo.load_tensorflow()


def _closure(gdef: Any, targets: list[str]) -> list[str]:
    """Names of the ops ``targets`` need (data and control ancestors), in GraphDef order."""
    inputs = {n.name: [i.lstrip("^").split(":")[0] for i in n.input] for n in gdef.node}
    seen: set[str] = set()
    stack = list(targets)
    while stack:
        n = stack.pop()
        if n not in seen:
            seen.add(n)
            stack.extend(inputs[n])
    return [n.name for n in gdef.node if n.name in seen]


def _events(tf: Any, md: Any) -> tuple[list[list[Any]], dict[str, dict[int, int]]]:
    """Raw events of one traced run and the runtime output sizes per op and slot."""
    stats = [(d.device, ns) for d in md.step_stats.dev_stats for ns in d.node_stats]
    t0 = min((ns.all_start_nanos for _, ns in stats), default=0)
    events: list[list[Any]] = []
    out: dict[str, dict[int, int]] = defaultdict(dict)
    for dev, ns in stats:
        label = ns.timeline_label
        op_type = label.split(" = ", 1)[1].split("(", 1)[0] if " = " in label else ""
        events.append([
            ns.node_name, op_type, dev, int(ns.thread_id), int(ns.all_start_nanos - t0),
            int(ns.op_start_rel_nanos), int(ns.op_end_rel_nanos), int(ns.all_end_rel_nanos),
        ])
        for o in ns.output:
            td = o.tensor_description
            nb = _nbytes(tf, td.dtype, [d.size for d in td.shape.dim])
            if nb is not None:
                out[ns.node_name][int(o.slot)] = nb
    return events, out


def _session_config(tf: Any, intra: int, inter: int, device: str) -> Any:
    cfg = tf.compat.v1.ConfigProto(
        intra_op_parallelism_threads=intra, inter_op_parallelism_threads=inter,
        device_count={"GPU": 0} if device == "cpu" else None,
    )
    return keep_node_names(tf, cfg)


def keep_node_names(tf: Any, cfg: Any) -> Any:
    """Switch off the rewrites that rename or remove a graph's nodes (Grappler, constant
    folding, common subexpressions, function inlining) in session config ``cfg``.

    Parameters
    ----------
    tf : module
        TensorFlow.
    cfg : ConfigProto
        Changed in place.

    Returns
    -------
    ConfigProto
        ``cfg``.
    """
    cfg.graph_options.rewrite_options.disable_meta_optimizer = True
    oo = cfg.graph_options.optimizer_options
    oo.opt_level = tf.compat.v1.OptimizerOptions.L0
    oo.do_constant_folding = False
    oo.do_common_subexpression_elimination = False
    oo.do_function_inlining = False
    return cfg


def _check_args(batch: int, mode: str, warmup: int, iterations: int, intra: int, inter: int,
                device: str, min_coverage: float) -> None:
    check_args(batch, mode, warmup, iterations, min_coverage)
    if intra < 1 or inter < 1:
        raise CommschedError(f"thread counts must be >= 1, got intra {intra}, inter {inter}")
    if device not in ("cpu", "gpu"):
        raise CommschedError(f"device must be 'cpu' or 'gpu', got {device!r}")


@dataclass
class BuiltIteration:
    """One iteration's graph, built but not run (:func:`build_iteration`)."""

    g: Any
    net: Any
    targets: list[Any]
    init: Any
    names: list[str]  # the ops the targets need, in GraphDef order
    grad_ops: set[str]
    grad_of: dict[str, list[str]]


@dataclass
class Step:
    """One iteration's ops, built into the default graph (:func:`build_step`)."""

    net: Any
    targets: list[Any]  # the update (or the logits) and the model's own state updates
    grad_ops: set[str]  # every op ``tf.gradients`` created
    grad_vars: list[tuple[str, Any]]  # (gradient op, its variable) of every applied gradient


def build_step(tf: Any, keras: Any, spec: zoo.ModelSpec, batch: int, mode: str, size: int,
               seed: int, lr: float) -> Step:
    """Build one ``mode`` iteration of ``spec`` into the default graph (module docstring,
    "Training step"): synthetic inputs and labels, the model, its loss, ``tf.gradients``
    and SGD named ``SGD``.

    The tracer's graph (:func:`build_iteration`) and the live job's
    (:func:`commsched.tictac.live.job.build_config`, under its device setter and
    container) are both this one, so their op names agree.

    Parameters
    ----------
    tf, keras : module
        :func:`commsched.trace.zoo.load_tensorflow`'s modules (graph mode on).
    spec : ModelSpec
        The zoo model.
    batch, mode, size, seed
        As in :func:`trace_model`.
    lr : float
        SGD's learning rate.

    Returns
    -------
    Step
        The model, the iteration's targets and its gradients.
    """
    g = tf.compat.v1.get_default_graph()
    tf.compat.v1.set_random_seed(seed)
    keras.utils.set_random_seed(seed)
    with tf.name_scope("inputs"):
        specs = [*spec.inputs(batch, size), spec.labels(batch, size)]
        tensors = [
            tf.random.uniform(s.shape, s.low, s.high, dtype=s.dtype, seed=seed + i,
                              name=s.name)
            for i, s in enumerate(specs)
        ]
    *xs, labels = tensors
    net = spec.build(size)
    before = {op.name for op in g.get_operations()}
    outputs = net(xs if len(xs) > 1 else xs[0], training=mode == "train")
    logits = zoo.main_logits(outputs)
    state_updates = [op for op in g.get_operations()
                     if op.name not in before and op.type in _STATE_UPDATES]
    if mode != "train":
        return Step(net, [logits.op, *state_updates], set(), [])
    with tf.name_scope("loss"):
        loss = zoo.training_loss(tf, spec, outputs, labels)
    tvars = [v.value for v in net.trainable_variables]
    pre = {op.name for op in g.get_operations()}
    grads = tf.gradients(loss, tvars)
    grad_ops = {op.name for op in g.get_operations()} - pre
    pairs = [(gr, v) for gr, v in zip(grads, tvars, strict=True) if gr is not None]
    grad_vars = [((gr.values if isinstance(gr, tf.IndexedSlices) else gr).op.name, v)
                 for gr, v in pairs]
    sgd = tf.compat.v1.train.GradientDescentOptimizer(lr, name="SGD")
    return Step(net, [sgd.apply_gradients(pairs, name="train"), *state_updates], grad_ops,
                grad_vars)


def build_iteration(tf: Any, keras: Any, spec: zoo.ModelSpec, batch: int, mode: str,
                    size: int, seed: int, lr: float) -> BuiltIteration:
    """Build the graph of one ``mode`` iteration of ``spec`` (graph mode must be on).

    The graph the tracer measures (:func:`build_step` in a graph of its own); a graph
    built again with the same arguments has the same op names, so a trace's ops name the
    ops of a rebuilt graph (the live placement, :mod:`commsched.placement.live`).

    Parameters
    ----------
    tf, keras : module
        :func:`commsched.trace.zoo.load_tensorflow`'s modules.
    spec : ModelSpec
        The zoo model.
    batch, mode, size, seed, lr
        As in :func:`trace_model`.

    Returns
    -------
    BuiltIteration
        The graph, its targets, the variables' initialiser and the ops the targets need.
    """
    g = tf.Graph()
    with g.as_default():
        step = build_step(tf, keras, spec, batch, mode, size, seed, lr)
        init = tf.compat.v1.global_variables_initializer()
    names = _closure(g.as_graph_def(), [t.name for t in step.targets])
    grad_of: dict[str, list[str]] = defaultdict(list)
    for op, v in step.grad_vars:
        grad_of[op].append(v.handle.op.name)
    return BuiltIteration(g, step.net, step.targets, init, names, step.grad_ops & set(names),
                          dict(grad_of))


def count_model(
    model: str, size: int | None = None, batch: int | None = None, seed: int = 0
) -> dict[str, Any]:
    """TicTac Table 1 columns of ``model`` without running it.

    Builds the inference and the training graph exactly as :func:`trace_model` does and
    counts their ops (the ops an iteration runs: the ancestors of its targets), the
    trainable variables and their bytes. The defaults are the model's size and standard
    batch, those of the committed traces: op counts depend on the sequence length of the
    unrolled recurrent models and, for Keras' LSTM, on whether the batch is 1.
    """
    spec = zoo.get(model)
    size = spec.size if size is None else size
    batch = spec.standard_batch if batch is None else batch
    spec.check_size(size)
    tf, keras = _load_tensorflow()
    tf.compat.v1.disable_eager_execution()
    out: dict[str, Any] = {"model": model, "size": size, "batch": batch}
    for mode in ("infer", "train"):
        b = build_iteration(tf, keras, spec, batch, mode, size, seed, 0.01)
        out[f"ops_{mode}"] = len(b.names)
        tvars = b.net.trainable_variables
        out["params"] = len(tvars)
        out["param_bytes"] = sum(
            int(np.prod(v.shape)) * tf.as_dtype(v.dtype).size for v in tvars
        )
    out.update(tf_version=tf.__version__, keras_version=keras.__version__)
    return out


def trace_model(
    model: str,
    batch: int,
    mode: str = "train",
    *,
    size: int | None = None,
    warmup: int = 2,
    iterations: int = 3,
    intra_threads: int = 2,
    inter_threads: int = 1,
    device: str = "cpu",
    seed: int = 0,
    lr: float = 0.01,
    min_coverage: float = 0.95,
) -> tuple[nx.DiGraph, dict[str, Any]]:
    """Trace one iteration of ``model``; return ``(traced graph, raw trace)``.

    Parameters
    ----------
    model, batch, mode
        A name of :mod:`commsched.trace.zoo`, the batch size, and ``"train"`` (forward,
        backward and SGD update) or ``"infer"`` (forward only).
    size
        Input size (image side or sequence length); default the model's ``size``.
    warmup, iterations
        Untraced warm-up iterations, then traced ones (the K samples of every op).
    intra_threads, inter_threads
        TensorFlow's intra-op and inter-op thread pool sizes.
    device
        ``"cpu"`` (GPUs hidden) or ``"gpu"`` (TensorFlow places ops; needs a GPU).
    seed
        Seeds the weights' initialisation and the synthetic inputs and labels.
    min_coverage
        Raise :class:`CommschedError` if fewer ops than this fraction got a time in every
        traced iteration (ops the runtime pruned are not counted, see the module docstring).

    Notes
    -----
    Switches TensorFlow to graph mode for the rest of the process (run it in its own
    process, as ``commsched trace`` does). See the module docstring for the route and the
    time oracle (TicTac, SysML 2019, Sec. 5).
    """
    spec = zoo.get(model)
    size = spec.size if size is None else size
    spec.check_size(size)
    _check_args(batch, mode, warmup, iterations, intra_threads, inter_threads, device,
                min_coverage)
    tf, keras = _load_tensorflow()
    if device == "gpu" and not tf.config.list_physical_devices("GPU"):
        raise CommschedError("trace device 'gpu' asked for, but TensorFlow sees no GPU")
    tf.compat.v1.disable_eager_execution()
    b = build_iteration(tf, keras, spec, batch, mode, size, seed, lr)
    g, names = b.g, b.names
    ops = {n: g.get_operation_by_name(n).type for n in names}

    iterations_raw: list[dict[str, Any]] = []
    warm_wall: list[float] = []
    runtime_bytes: dict[str, dict[int, int]] = {}
    cfg = _session_config(tf, intra_threads, inter_threads, device)
    with tf.compat.v1.Session(graph=g, config=cfg) as sess:
        sess.run(b.init)
        for _ in progress(range(warmup), f"{model} warm-up"):
            t = time.perf_counter()
            sess.run(b.targets)
            warm_wall.append(time.perf_counter() - t)
        opts = tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE)
        for _ in progress(range(iterations), f"{model} traced steps"):
            md = tf.compat.v1.RunMetadata()
            t = time.perf_counter()
            sess.run(b.targets, options=opts, run_metadata=md)
            wall = time.perf_counter() - t
            events, out = _events(tf, md)
            runtime_bytes = runtime_bytes or dict(out)
            iterations_raw.append({"wall_s": round(wall, 9), "events": events})

    meta: dict[str, Any] = {
        "model": model, "mode": mode, "batch": batch, "size": size, "device": device,
        "device_model": _device_model(device), "tf_version": tf.__version__,
        "keras_version": keras.__version__, "intra_threads": intra_threads,
        "inter_threads": inter_threads, "warmup": warmup, "iterations": iterations,
        "route": ROUTE, "onednn": os.environ["TF_ENABLE_ONEDNN_OPTS"],
        "time": "all_end_rel_nanos, min over iterations", **run_meta(mode, lr, seed),
    }
    raw = {"format": RAW_FORMAT, "version": 1, "meta": meta, "fields": list(RAW_FIELDS),
           "iterations": iterations_raw}
    samples, unattributed = samples_from_raw(raw, ops)

    # Variables, keyed by their VarHandleOp node.
    keras_vars = {v.value.handle.op.name: v for v in b.net.variables}
    trainable = {v.value.handle.op.name for v in b.net.trainable_variables}
    variables: dict[str, dict[str, Any]] = {}
    for n in names:
        op = g.get_operation_by_name(n)
        if op.type != "VarHandleOp":
            continue
        shape = [int(d) for d in tf.TensorShape(op.get_attr("shape")).as_list()]
        kv = keras_vars.get(n)
        variables[n] = {
            "bytes": _nbytes(tf, op.get_attr("dtype"), shape) or 0,
            "shape": shape, "dtype": tf.as_dtype(op.get_attr("dtype")).name,
            "trainable": n in trainable, "path": kv.path if kv is not None else n,
        }
    reads, updates = _variable_access(g, names, variables)

    out_g = graph.new_graph({"cpu": 1}, variables=variables, meta=meta)
    slot_bytes: dict[str, dict[int, int]] = {}
    for n in names:
        op = g.get_operation_by_name(n)
        sizes = {}
        for i, t in enumerate(op.outputs):
            nb = _nbytes(tf, t.dtype, t.shape.as_list() if t.shape.rank is not None else None)
            if nb is None:
                nb = runtime_bytes.get(n, {}).get(i, 0)
            sizes[i] = nb
        slot_bytes[n] = sizes
        s = samples.get(n, [])
        attrs: dict[str, Any] = {
            "op_type": op.type, "samples": s, "out_bytes": sum(sizes.values()),
            "is_gradient": n in b.grad_ops,
        }
        if n in reads:
            attrs["reads"] = reads[n]
        if n in updates:
            attrs["updates"] = updates[n]
        if n in b.grad_of:
            attrs["grad_of"] = b.grad_of[n]
        graph.add_op(out_g, n, "compute", "cpu", min(s) if s else 0.0, **attrs)
    for node in g.as_graph_def().node:
        if node.name not in ops:
            continue
        for inp in node.input:
            control = inp.startswith("^")
            src, _, slot = inp.lstrip("^").partition(":")
            nb = 0 if control else slot_bytes[src].get(int(slot or 0), 0)
            if out_g.has_edge(src, node.name):
                e = out_g.edges[src, node.name]
                if not control:
                    e["bytes"] = (0 if e["control"] else e["bytes"]) + nb
                    e["control"] = False
            else:
                out_g.add_edge(src, node.name, control=control, bytes=nb)

    untimed = [n for n in names if len(samples.get(n, [])) != iterations]
    pruned = _pruned_inputs(out_g, untimed, samples)
    counted = len(names) - len(pruned)
    meta["coverage"] = round((counted - len(set(untimed) - pruned)) / counted, 6)
    meta["untimed_ops"] = [n for n in untimed if n not in pruned][:50]
    meta["pruned_ops"] = len(pruned)
    meta["unattributed_events"] = sum(unattributed.values())
    meta["step_wall_s"] = [it["wall_s"] for it in iterations_raw]
    meta["warmup_wall_s"] = [round(w, 9) for w in warm_wall]
    meta["sum_op_s"] = op_time_sums(samples, iterations)
    check_coverage(meta, model, mode, counted, min_coverage)
    return out_g, raw


def _pruned_inputs(g: nx.DiGraph, untimed: list[str], samples: dict[str, list[float]]) -> set[str]:
    """Ops that never ran because they only feed functional ops TensorFlow lowered.

    When TensorFlow lowers a ``While`` it prunes loop inputs the lowered loop never uses
    (the gradient accumulators of loop values the backward pass does not need), so their
    producers never run. Such an op has no event in any iteration and all its successors
    are functional ops or other such ops.
    """
    never = {n for n in untimed if not samples.get(n)}
    pruned: set[str] = set()
    changed = True
    while changed:
        changed = False
        for n in never - pruned:
            succ = g.succ[n]
            if succ and all(
                s in pruned or g.nodes[s]["op_type"] in FUNCTIONAL_OPS for s in succ
            ):
                pruned.add(n)
                changed = True
    return pruned


def _variable_access(
    g: Any, names: list[str], variables: dict[str, Any]
) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """``(reads, updates)``: op -> variables it reads / writes, following handle copies."""
    inside = set(names)
    reads: dict[str, list[str]] = defaultdict(list)
    updates: dict[str, list[str]] = defaultdict(list)
    for var in variables:
        stack = [g.get_operation_by_name(var)]
        seen: set[str] = set()
        while stack:
            op = stack.pop()
            for t in op.outputs:
                for c in t.consumers():
                    if c.name not in inside or c.name in seen:
                        continue
                    seen.add(c.name)
                    if c.type in _PASS_THROUGH:
                        stack.append(c)
                    elif c.type.startswith(_UPDATE_PREFIXES):
                        updates[c.name].append(var)
                    else:
                        reads[c.name].append(var)
    return dict(reads), dict(updates)
