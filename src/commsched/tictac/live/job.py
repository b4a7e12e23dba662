"""The live job: synchronous parameter-server training or inference, one worker's client.

``python -m commsched.tictac.live.job --plan PLAN.json --task I --out RESULT.json`` runs, as
worker ``I`` of a running cluster, every *group* of the plan (one TensorFlow import per
worker for the whole experiment). A group is one model, mode and batch measured under
several *configs* (an order and an enforcement hook each, e.g. baseline, TIC with the
sender hook, TAC with the DAG hook).

Graph (one per config; ``tf.compat.v1`` graph mode, between-graph replication)
    Built by the tracer's own :func:`commsched.trace.tf.build_step` (synthetic
    uniform inputs and labels drawn in the graph, the zoo model, mean sparse softmax
    cross-entropy, ``tf.gradients``, plain SGD named ``SGD``, the model's own state updates),
    but under ``replica_device_setter`` and inside a per-config resource container: the
    variables live on the parameter servers, everything else on the worker, the updates
    run on the servers. The learning rate is divided by the number of workers, so the N
    updates of a step add up to one step of synchronous SGD on the averaged gradient.
Order
    The config's variable priorities (keyed by the trace's variable names) are matched to
    the live graph's variables (:func:`commsched.tictac.live.order.match_variables`) and the
    config's hook (:mod:`commsched.tictac.live.hooks`) adds its control edges.
Synchronisation
    A step is two session runs: the *work* run (reads, forward, backward, update) and a
    *barrier* run (FIFO queues on ``/job:ps/task:0``: each worker enqueues a token for
    every other worker and dequeues N-1 of its own), so no worker starts step k+1 before
    every update of step k has been applied. A worker's barrier time is its wait for the
    slowest worker (plus one round trip).
Measurement
    Every config gets W warm-up steps; then the K measured steps run *interleaved*: step k
    of every config before step k+1 of any, in an order rotated each step, so that slow
    drifts of a shared machine hit every config alike. Then T steps per config with
    ``FULL_TRACE`` (a config's own ``trace_iterations`` overrides the group's), whose
``RecvTensor`` entries give each parameter transfer's start (the
    sender's send start) and end (arrival), and whose PS stats give the read times
    (:mod:`commsched.tictac.live.steptrace`). Last, a config with ``capture_iterations``
    (the sender-hook configs, when the plan has ``capture``) runs that many more
    FULL_TRACE steps inside a capture window
    (:class:`commsched.cluster.capture.CaptureWindow`): a process in the PS's namespace
    records its link and the PS's rendezvous log meanwhile, for the order in which the
    PS's gRPC sent the transfers
    (:mod:`commsched.tictac.live.grpcorder`). They are kept apart (``captured``) from
    the traced steps that the overhead fit uses.

Every session run has a timeout (``timeout_s``). The chief (task 0) initialises the
variables of each config and resets its container at the end of the group.
"""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from commsched.cluster.capture import CaptureWindow
from commsched.cluster.client import client_main
from commsched.cluster.server import session_config
from commsched.errors import CommschedError
from commsched.tictac.live.hooks import apply_hook, ps_variables, reads_by_variable
from commsched.tictac.live.order import match_variables
from commsched.tictac.live.steptrace import compute_busy, compute_intervals, transfers
from commsched.trace import zoo
from commsched.trace.tf import build_step

__all__ = ["Built", "build_config", "main", "run_plan"]


@dataclass
class Built:
    """One config's graph and the handles the step loop needs.

    Attributes
    ----------
    graph : tf.Graph
        The config's graph.
    work, barrier, init_ps : tf.Operation
        A step's work, the barrier after it, the variables' initialiser.
    reads : dict
        The PS reads per variable (:func:`commsched.tictac.live.hooks.reads_by_variable`).
    variables : dict
        The PS variables (:func:`commsched.tictac.live.hooks.ps_variables`).
    var_priorities : dict of str to float
        The config's priorities under the live variable names.
    edges : list of tuple of (str, str)
        The hook's control edges.
    grad_src : dict of str to str
        Gradient op -> its variable (to name the gradient transfers).
    container : str
        The config's resource container.
    """

    graph: Any
    work: Any
    barrier: Any
    init_ps: Any
    reads: dict[str, list[Any]]
    variables: dict[str, dict[str, Any]]
    var_priorities: dict[str, float]
    edges: list[tuple[str, str]]
    grad_src: dict[str, str]
    container: str


def _barrier_op(tf: Any, n_workers: int, task: int) -> Any:
    qs = [tf.queue.FIFOQueue(4 * n_workers + 4, [tf.int32], shapes=[[]],
                             shared_name=f"barrier_q{j}", name=f"barrier_q{j}")
          for j in range(n_workers)]
    enq = [q.enqueue(tf.constant(1)) for j, q in enumerate(qs) if j != task]
    with tf.control_dependencies(enq):
        if n_workers == 1:
            return tf.no_op(name="barrier_done")
        return qs[task].dequeue_many(n_workers - 1).op


def _container(group_id: str, config: str) -> str:
    """The config's resource container (TensorFlow allows letters, digits, '.', '-')."""
    name = f"{group_id}.{config}"
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9.-]*", name):
        raise CommschedError(f"group/config id {name!r}: use letters, digits, '.' and '-'")
    return name


def build_config(group: Mapping[str, Any], config: Mapping[str, Any],
                 cluster: Mapping[str, Sequence[str]], task: int,
                 sender_lifo: bool = True) -> Built:
    """Build the graph of one config of ``group`` for worker ``task`` (module docstring).

    Parameters
    ----------
    group : mapping
        The plan's group (model, mode, batch, size, seed, ...).
    config : mapping
        One of its configs (``name``, ``enforce``, ``priorities``, ...).
    cluster : mapping of str to sequence of str
        ``{"ps": [...], "worker": [...]}`` host:port lists.
    task : int
        This worker.
    sender_lifo : bool, optional
        Goes to :func:`commsched.tictac.live.hooks.apply_hook`: true for servers with one
        inter-op thread (measured), false otherwise (not measured: the natural chain).

    Returns
    -------
    Built

    Raises
    ------
    CommschedError
        If the model or size is unknown, the group/config id is not a valid container
        name, or the priorities name a variable the live graph lacks.
    """

    tf, keras = zoo.load_tensorflow()
    tf.compat.v1.disable_eager_execution()
    spec = zoo.get(str(group["model"]))
    size = int(group.get("size") or spec.size)
    spec.check_size(size)
    batch, mode = int(group["batch"]), str(group["mode"])
    seed, lr = int(group.get("seed", 0)), float(group.get("lr", 0.01))
    n_workers = len(cluster["worker"])
    worker = f"/job:worker/task:{task}"
    setter = tf.compat.v1.train.replica_device_setter(
        worker_device=worker, cluster=tf.train.ClusterSpec({k: list(v) for k, v in
                                                            cluster.items()}))
    container = _container(str(group["id"]), str(config["name"]))
    g = tf.Graph()
    with g.as_default(), tf.compat.v1.container(container), tf.compat.v1.device(setter):
        step = build_step(tf, keras, spec, batch, mode, size, seed, lr / n_workers)
        grad_src = {op: v.handle.op.get_attr("shared_name").decode()
                    for op, v in step.grad_vars}
        with tf.device(worker):
            work = tf.group(*step.targets, name="work")
        with tf.device("/job:ps/task:0"):
            barrier = _barrier_op(tf, n_workers, task)
        init_ps = tf.compat.v1.global_variables_initializer()
    reads = reads_by_variable(g, [work])
    variables = ps_variables(g)
    prios = _live_priorities(config, {v: variables[v]["shape"] for v in reads})
    edges = apply_hook(g, reads, prios, str(config["enforce"]), worker, sender_lifo)
    return Built(g, work, barrier, init_ps, reads, variables, prios, edges, grad_src,
                 container)


def _live_priorities(config: Mapping[str, Any], live: Mapping[str, Sequence[int]]
                     ) -> dict[str, float]:
    prios = {str(k): float(v) for k, v in (config.get("priorities") or {}).items()}
    if not prios:
        return {}
    traced = config.get("traced_variables") or {k: live[k] for k in prios if k in live}
    mapping = match_variables(traced, live)
    unknown = sorted(set(prios) - set(mapping))
    if unknown:
        raise CommschedError(f"config {config['name']}: priorities name unknown variable "
                             f"{unknown[0]!r}")
    return {mapping[k]: p for k, p in prios.items()}


def _stats(run_metadata: Any) -> list[tuple[str, list[dict[str, Any]]]]:
    return [(d.device, [{"node_name": n.node_name, "timeline_label": n.timeline_label,
                         "all_start_micros": n.all_start_micros,
                         "op_end_rel_micros": n.op_end_rel_micros} for n in d.node_stats])
            for d in run_metadata.step_stats.dev_stats]


def _trace_record(b: Built, run_metadata: Any) -> dict[str, Any]:
    """Parameter transfers (PS -> worker), gradient transfers (worker -> PS) and PS reads of
    one traced step, in seconds from the step's first event (``t0_us``, the stats'
    wall-clock microseconds), the worker's compute
    time (:func:`commsched.tictac.live.steptrace.compute_busy`), its compute ops' intervals
    (``ops``, :func:`~commsched.tictac.live.steptrace.compute_intervals`) and the step's
    span over every device (``step_s``), for the simulator's overhead model
    (:func:`commsched.tictac.live.analysis.fit_overhead`)."""
    devs = _stats(run_metadata)
    t0 = min((n["all_start_micros"] for _, ns in devs for n in ns), default=0)
    read_var = {r.name: v for v, rs in b.reads.items() for r in rs}
    recvs: list[dict[str, Any]] = []
    grads: list[dict[str, Any]] = []
    ps_reads: list[dict[str, Any]] = []
    busy, n_ops = 0.0, 0
    ops: list[tuple[float, float]] = []
    for dev, ns in devs:
        if "/job:worker" in dev:
            b_s, b_n = compute_busy(ns)
            busy, n_ops = busy + b_s, n_ops + b_n
            ops.extend(compute_intervals(ns, t0))
        for t in transfers(ns, t0):
            if t.src_op in read_var and "/job:worker" in t.dst_device:
                recvs.append({"var": read_var[t.src_op], "start": t.start, "end": t.end})
            elif t.src_op in b.grad_src and "/job:ps" in t.dst_device:
                grads.append({"var": b.grad_src[t.src_op], "start": t.start, "end": t.end})
        if "/job:ps" in dev:
            ps_reads.extend({"var": read_var[n["node_name"]],
                             "start": (n["all_start_micros"] - t0) / 1e6}
                            for n in ns if n["node_name"] in read_var)
    end = max((n["all_start_micros"] + n["op_end_rel_micros"] for _, ns in devs for n in ns),
              default=t0)
    return {"recvs": recvs, "grads": grads, "ps_reads": ps_reads,
            "compute_s": busy, "compute_ops": n_ops, "ops": sorted(ops),
            "step_s": (end - t0) / 1e6, "t0_us": t0}


def _run_group(group: Mapping[str, Any], plan: Mapping[str, Any], task: int
               ) -> list[dict[str, Any]]:
    import tensorflow as tf


    configs = list(group["configs"])
    lifo = int(plan.get("threads", 1)) == 1
    built = [build_config(group, c, plan["cluster"], task, lifo) for c in configs]
    timeout_ms = int(float(plan.get("timeout_s", 120)) * 1000)
    opts = tf.compat.v1.RunOptions(timeout_in_ms=timeout_ms)
    topts = tf.compat.v1.RunOptions(timeout_in_ms=timeout_ms,
                                    trace_level=tf.compat.v1.RunOptions.FULL_TRACE)
    target = plan["targets"][task]
    cfg = session_config(int(plan.get("threads", 1)))
    sessions = [tf.compat.v1.Session(target, graph=b.graph, config=cfg) for b in built]
    steps: list[list[dict[str, float]]] = [[] for _ in built]
    traces: list[list[dict[str, Any]]] = [[] for _ in built]
    captured: list[list[dict[str, Any]]] = [[] for _ in built]

    def step(i: int, into: list[dict[str, Any]] | None = None,
             capture_on: bool | None = None) -> dict[str, float]:
        """One step of config ``i``; traced into ``into`` when given (a captured step's
        record also gets ``capture_on``)."""
        md = tf.compat.v1.RunMetadata()
        wall = time.time()
        t0 = time.perf_counter()
        sessions[i].run(built[i].work, options=opts if into is None else topts,
                        run_metadata=md)
        t1 = time.perf_counter()
        sessions[i].run(built[i].barrier, options=opts)
        t2 = time.perf_counter()
        if into is not None:
            rec = _trace_record(built[i], md)
            if capture_on is not None:
                rec["capture_on"] = capture_on
            into.append(rec)
        return {"wall_start": wall, "work": t1 - t0, "barrier": t2 - t1}

    try:
        for s, b in zip(sessions, built, strict=True):
            if task == 0:
                s.run(b.init_ps, options=opts)
            s.run(b.barrier, options=opts)  # nobody starts before the chief initialised
        for i in range(len(built)):
            for _ in range(int(group["warmup"])):
                step(i)
        n = len(built)
        for k in range(int(group["iterations"])):
            for j in range(n):
                i = (j + k) % n
                steps[i].append(step(i))
        for i in range(n):
            n_traced = configs[i].get("trace_iterations", group.get("trace_iterations", 0))
            for _ in range(int(n_traced)):
                step(i, traces[i])
        capture = plan.get("capture")
        for i, c in enumerate(configs):
            if capture and int(c.get("capture_iterations", 0)):
                with CaptureWindow(capture["folder"], c["capture_window"], task,
                                   capture["ids"], float(capture["timeout_s"])) as window:
                    for _ in range(int(c["capture_iterations"])):
                        step(i, captured[i], window.on)
        for s, b in zip(sessions, built, strict=True):
            s.run(b.barrier, options=opts)  # everybody is done with the variables
    finally:
        for s in sessions:
            s.close()
    if task == 0:
        tf.compat.v1.Session.reset(target, [b.container for b in built])
    out = [{"group": group["id"], "config": c["name"], "task": task, "steps": steps[i],
            "traces": traces[i], "priorities": built[i].var_priorities,
            "variables": {v: built[i].variables[v] for v in built[i].reads},
            "enforce_edges": len(built[i].edges)}
           for i, c in enumerate(configs)]
    for i, r in enumerate(out):
        if captured[i]:
            r["captured"] = captured[i]
            r["read_ops"] = {op.name: v for v, ops in built[i].reads.items() for op in ops}
    return out


def run_plan(plan: Mapping[str, Any], task: int) -> list[dict[str, Any]]:
    """Run every group of a plan as one worker.

    Parameters
    ----------
    plan : mapping
        The plan (:func:`commsched.tictac.live.runner.job_plan`).
    task : int
        This worker.

    Returns
    -------
    list of dict
        One result per group and config: the measured steps, the traced steps, the
        priorities and variables.

    Raises
    ------
    CommschedError
        As :func:`build_config`.
    """
    out = []
    for group in plan["groups"]:
        t = time.perf_counter()
        out.extend(_run_group(group, plan, task))
        print(f"group {group['id']}: {time.perf_counter() - t:.1f} s", flush=True)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """Run a plan as one worker and write its results (module docstring).

    Parameters
    ----------
    argv : sequence of str, optional
        ``--plan``, ``--task`` and ``--out`` (default: ``sys.argv[1:]``).

    Returns
    -------
    int
        0, or 2 after a one-line error on stderr
        (:func:`commsched.cluster.client.client_main`).
    """
    return client_main("commsched.tictac.live.job", lambda plan, task: {
        "task": task, "results": run_plan(plan, int(task or 0))}, argv, task=True)


if __name__ == "__main__":
    sys.exit(main())
