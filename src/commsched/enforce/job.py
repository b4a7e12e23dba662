"""The live job: synchronous parameter-server training or inference, one worker's client.

``python -m commsched.enforce.job --plan PLAN.json --task I --out RESULT.json`` runs, on
worker ``I`` of a running cluster, every job of the plan in turn (one TensorFlow import
per worker for the whole experiment). Per job:

1. **Graph** (``tf.compat.v1`` graph mode, between-graph replication). The model's
   variables are created under ``replica_device_setter`` inside a per-job resource
   container, so they live on the parameter servers; the synthetic input (a fixed random
   batch) and a synthetic target live in worker-local variables, so a step reads no data
   from anywhere. Inference fetches a scalar reduction of the model output; training adds
   a mean-squared loss against the target, ``tf.gradients`` over the PS variables and a
   plain gradient-descent update applied on the PS (learning rate ``lr / N`` per worker,
   i.e. the averaged gradient of synchronous SGD).
2. **Order.** The job's PS-side reads are matched to the trace's variables
   (:func:`commsched.enforce.order.match_variables`) and the hook named by ``enforce``
   (:mod:`commsched.enforce.hooks`) adds its control edges.
3. **Synchronisation.** A step is two session runs: the *work* run (reads, forward,
   backward, update) and a *barrier* run (FIFO queues on ``/job:ps/task:0``: each worker
   enqueues a token for every other worker and dequeues N-1 tokens of its own), so every
   worker starts step k+1 after every update of step k has been applied: synchronous
   training. The time a worker spends in the barrier is its wait for the slowest worker.
4. **Measurement.** W warm-up steps, K measured steps (no tracing), then T steps with
   ``FULL_TRACE``, from which the per-parameter ``RecvTensor`` start and end times and the
   PS-side read start times are taken (:mod:`commsched.enforce.steptrace`).

Every session run has a timeout (``timeout_s``); the chief (task 0) initialises the
variables and resets the job's container at the end.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from commsched.enforce.hooks import apply_hook, ps_variables, reads_by_variable
from commsched.enforce.order import match_variables
from commsched.enforce.steptrace import transfers
from commsched.errors import CommschedError
from commsched.io.atomic import atomic_write_text

__all__ = ["Built", "build_job", "main", "run_plan"]


@dataclass
class Built:
    """A job's graph and the handles the step loop needs."""

    graph: Any
    work: Any
    barrier: Any
    init_ps: Any
    init_local: Any
    reads: dict[str, list[Any]]
    variables: dict[str, dict[str, Any]]
    var_priorities: dict[str, float]
    edges: list[tuple[str, str]]
    grad_src: dict[str, str]


def _barrier_op(tf: Any, n_workers: int, task: int, name: str) -> Any:
    qs = [
        tf.queue.FIFOQueue(4 * n_workers + 4, [tf.int32], shapes=[[]],
                           shared_name=f"{name}_q{j}", name=f"{name}_q{j}")
        for j in range(n_workers)
    ]
    enq = [q.enqueue(tf.constant(1)) for j, q in enumerate(qs) if j != task]
    with tf.control_dependencies(enq):
        if n_workers == 1:
            return tf.no_op(name=f"{name}_done")
        return qs[task].dequeue_many(n_workers - 1).op


def _container(job: Mapping[str, Any]) -> str:
    """The job's resource container (TensorFlow allows letters, digits, '.', '-')."""
    jid = str(job["id"])
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9.-]*", jid):
        raise CommschedError(f"job id {jid!r}: use letters, digits, '.' and '-'")
    return f"job-{jid}"


def build_job(job: Mapping[str, Any], cluster: Mapping[str, Sequence[str]], task: int) -> Built:
    """Build the graph of ``job`` for worker ``task`` (see the module docstring)."""
    import tensorflow as tf

    from commsched.enforce.models import build_model

    tf.compat.v1.disable_eager_execution()
    n_workers = len(cluster["worker"])
    worker = f"/job:worker/task:{task}"
    spec = tf.train.ClusterSpec({k: list(v) for k, v in cluster.items()})
    graph = tf.Graph()
    seed = int(job.get("seed", 0))
    with graph.as_default():
        tf.compat.v1.set_random_seed(seed)
        with tf.compat.v1.container(_container(job)):
            with tf.compat.v1.device(
                tf.compat.v1.train.replica_device_setter(worker_device=worker, cluster=spec)
            ):
                model = build_model(str(job["model"]))
            in_shape = [int(job["batch"]), *[int(d) for d in model.inputs[0].shape[1:]]]
            with tf.device(worker):
                x = tf.compat.v1.get_local_variable(
                    "synthetic_input", initializer=tf.random.uniform(in_shape, seed=seed),
                    trainable=False, use_resource=True)
            with tf.compat.v1.device(
                tf.compat.v1.train.replica_device_setter(worker_device=worker, cluster=spec)
            ):
                y = model(x, training=job["mode"] == "train")
            with tf.device(worker):
                target = tf.compat.v1.get_local_variable(
                    "synthetic_target", initializer=tf.random.uniform(y.shape, seed=seed + 1),
                    trainable=False, use_resource=True)
                grad_src: dict[str, str] = {}
                if job["mode"] == "train":
                    loss = tf.reduce_mean(tf.square(y - target))
                    handles = [v.value for v in model.trainable_variables]
                    grads = tf.gradients(loss, handles)
                    opt = tf.compat.v1.train.GradientDescentOptimizer(
                        float(job.get("lr", 0.01)) / n_workers)
                    with tf.compat.v1.device(
                        tf.compat.v1.train.replica_device_setter(worker_device=worker,
                                                                 cluster=spec)
                    ):
                        update = opt.apply_gradients(
                            [(g, h) for g, h in zip(grads, handles, strict=True) if g is not None])
                    with tf.control_dependencies([update]):
                        work = tf.identity(loss, name="work")
                    for v, g in zip(model.trainable_variables, grads, strict=True):
                        if g is not None:
                            grad_src[g.op.name] = v.value.handle.op.get_attr(
                                "shared_name").decode()
                else:
                    work = tf.reduce_sum(y, name="work")
            with tf.device("/job:ps/task:0"):
                barrier = _barrier_op(tf, n_workers, task, "barrier")
        reads = reads_by_variable(graph, [work])
        variables = ps_variables(graph)
        var_prios = _live_priorities(job, variables)
        edges = apply_hook(graph, reads, var_prios, str(job["enforce"]), worker)
        ps_vars = [v for v in tf.compat.v1.global_variables() if "/job:ps" in v.device]
        init_ps = tf.compat.v1.variables_initializer(ps_vars)
        init_local = tf.compat.v1.local_variables_initializer()
    return Built(graph, work, barrier, init_ps, init_local, reads, variables, var_prios,
                 edges, grad_src)


def _live_priorities(job: Mapping[str, Any], variables: Mapping[str, Any]) -> dict[str, float]:
    prios = {str(k): float(v) for k, v in (job.get("priorities") or {}).items()}
    traced = job.get("traced_variables")
    if traced:
        live = {k: v["shape"] for k, v in variables.items()}
        mapping = match_variables(traced, live)
        return {mapping[k]: p for k, p in prios.items() if k in mapping}
    unknown = sorted(set(prios) - set(variables))
    if unknown:
        raise CommschedError(f"job {job['id']}: priorities name unknown variable {unknown[0]!r}")
    return prios


def _stats_dicts(run_metadata: Any) -> list[tuple[str, list[dict[str, Any]]]]:
    out = []
    for d in run_metadata.step_stats.dev_stats:
        out.append((d.device, [
            {"node_name": n.node_name, "timeline_label": n.timeline_label,
             "all_start_micros": n.all_start_micros,
             "op_end_rel_micros": n.op_end_rel_micros}
            for n in d.node_stats
        ]))
    return out


def _trace_record(b: Built, run_metadata: Any) -> dict[str, Any]:
    devs = _stats_dicts(run_metadata)
    t0 = min((n["all_start_micros"] for _, ns in devs for n in ns), default=0)
    read_var = {r.name: v for v, rs in b.reads.items() for r in rs}
    recvs, grads, ps_reads = [], [], []
    for dev, ns in devs:
        for t in transfers(ns, t0):
            if t.src_op in read_var and "/job:worker" in t.dst_device:
                recvs.append({"var": read_var[t.src_op], "start": t.start, "end": t.end})
            elif t.src_op in b.grad_src and "/job:ps" in t.dst_device:
                grads.append({"var": b.grad_src[t.src_op], "start": t.start, "end": t.end})
        if "/job:ps" in dev:
            for n in ns:
                if n["node_name"] in read_var:
                    ps_reads.append({"var": read_var[n["node_name"]],
                                     "start": (n["all_start_micros"] - t0) / 1e6})
    return {"recvs": recvs, "grads": grads, "ps_reads": ps_reads}


def _run_job(job: Mapping[str, Any], plan: Mapping[str, Any], task: int) -> dict[str, Any]:
    import tensorflow as tf

    from commsched.cluster.server import session_config

    b = build_job(job, plan["cluster"], task)
    timeout_ms = int(float(plan.get("timeout_s", 120)) * 1000)
    opts = tf.compat.v1.RunOptions(timeout_in_ms=timeout_ms)
    topts = tf.compat.v1.RunOptions(timeout_in_ms=timeout_ms,
                                    trace_level=tf.compat.v1.RunOptions.FULL_TRACE)
    target = plan["targets"][task]
    steps: list[dict[str, float]] = []
    traces: list[dict[str, Any]] = []
    with tf.compat.v1.Session(target, graph=b.graph,
                              config=session_config(int(plan.get("threads", 1)))) as s:
        if task == 0:
            s.run(b.init_ps, options=opts)
        s.run(b.init_local, options=opts)
        s.run(b.barrier, options=opts)  # nobody starts before the chief initialised
        n_warm, n_meas = int(job["warmup"]), int(job["iterations"])
        n_trace = int(job.get("trace_iterations", 0))
        for i in range(n_warm + n_meas + n_trace):
            traced = i >= n_warm + n_meas
            md = tf.compat.v1.RunMetadata()
            wall = time.time()
            t0 = time.perf_counter()
            s.run(b.work, options=topts if traced else opts, run_metadata=md)
            t1 = time.perf_counter()
            s.run(b.barrier, options=opts)
            t2 = time.perf_counter()
            if i >= n_warm and not traced:
                steps.append({"wall_start": wall, "work": t1 - t0, "barrier": t2 - t1})
            if traced:
                traces.append(_trace_record(b, md))
        s.run(b.barrier, options=opts)  # everybody is done with the variables
    if task == 0:
        tf.compat.v1.Session.reset(target, [_container(job)])
    return {
        "id": job["id"], "task": task, "steps": steps, "traces": traces,
        "variables": b.variables, "priorities": b.var_priorities,
        "enforce_edges": len(b.edges),
    }


def run_plan(plan: Mapping[str, Any], task: int) -> list[dict[str, Any]]:
    """Run every job of ``plan`` as worker ``task``; one result dictionary per job."""
    out = []
    for job in plan["jobs"]:
        t = time.perf_counter()
        out.append(_run_job(job, plan, task))
        print(f"job {job['id']}: {time.perf_counter() - t:.1f} s", flush=True)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m commsched.enforce.job")
    p.add_argument("--plan", required=True)
    p.add_argument("--task", type=int, required=True)
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)
    with open(args.plan) as f:
        plan = json.load(f)
    try:
        results = run_plan(plan, args.task)
    except CommschedError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    atomic_write_text(args.out, json.dumps({"task": args.task, "jobs": results}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
