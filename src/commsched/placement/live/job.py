"""The live placement client: traced graphs, every configuration, timed on the cluster.

``python -m commsched.placement.live.job --plan PLAN.json --out RESULT.json`` runs in the
namespace of one task of the cluster (its session target). It rebuilds each model's traced
iteration with the tracer's own builder (:func:`commsched.trace.tf.build_iteration`:
same op names as the trace, random weights), and for every configuration of every model
of the plan (a partitioner x scheduler, or a calibration placement):

1. sets each op's device and adds the order's control dependencies in the ``GraphDef``
   (:func:`commsched.placement.live.mapping.apply`) and imports it into a fresh graph,
   its variables in the configuration's resource container; then slows down the ops of
   slower devices (:func:`slow_down`: the thesis' device speeds as a per-op busy-wait);
2. opens a session on the target (one intra-op and one inter-op thread, no rewrite that
   renames a node: :func:`commsched.trace.tf.keep_node_names`), initialises the
   variables and runs ``warmup`` steps;
3. then runs the ``steps`` timed steps of all configurations *interleaved* (step k of
   every configuration before step k+1 of any, in an order rotated each step, so that
   the drifts of a shared machine hit every configuration of every model alike; wall clock of
   ``Session.run`` of the iteration's targets, nothing fetched back), and
   ``trace_steps`` steps per configuration with ``FULL_TRACE`` spread over the same
   rounds (:func:`trace_rounds`, each right after the configuration's timed step of that
   round: the fitted overheads then see the load the timed steps saw, not that of a
   moment after them), whose step stats (per device: op name, timeline label, start,
   duration, bytes allocated, and the allocator's records, ``[micros, +-bytes]`` of every
   allocation and free) are kept;
4. closes the sessions and resets the containers (frees the variables).

Every session run has a timeout (``timeout_s``). The plan: ``models`` (per model: its
``name``, ``trace``: model, mode, batch, size, seed of the traced graph, and ``configs``:
``name``, ``placed``: op -> device, ``control``: pairs of op names, ``slow``: op ->
busy-wait factor, ``trace_steps``), ``target``, ``devices``, ``warmup``, ``steps``,
``timeout_s`` and ``threads``.

Device speeds are emulated by a per-op slow-down, not by CPU shares. This kernel's cgroup
v1 ``cpu`` controller would take a CFS quota per task, but a quota is CPU time per period
(at least 1 ms): it throttles in millisecond bursts rather than stretching each op, it
slows the task's gRPC threads (the transfers) too, and on a loaded machine it caps a share
the task may not get anyway, so the slow-down it gives changes with the load. The busy-wait
after an op lasts ``k`` times that op's own duration, measured in the same step (a
``Timestamp`` when its inputs are ready, one when it ends), so an op on a device of
relative speed ``r`` lasts ``1/r`` times what it lasts on the host at that moment, whatever
the load. The wait spins (a ``while`` loop on ``Timestamp`` on the op's device, one
inter-op thread: the device is busy), so it uses a core like the op.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

from commsched.cluster.client import client_main
from commsched.cluster.server import session_config
from commsched.placement.live.mapping import apply
from commsched.trace import zoo
from commsched.trace.tf import build_iteration, keep_node_names

__all__ = ["main", "peak_bytes", "run_plan", "slow_down", "trace_rounds"]


def _stats(md: Any) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for d in md.step_stats.dev_stats:
        out.setdefault(d.device, []).extend(
            {"node_name": n.node_name, "timeline_label": n.timeline_label,
             "all_start_micros": int(n.all_start_micros),
             "op_end_rel_micros": int(n.op_end_rel_micros),
             "alloc_bytes": int(sum(m.total_bytes for m in n.memory)),
             "alloc_records": [[int(r.alloc_micros), int(r.alloc_bytes)]
                               for m in n.memory for r in m.allocation_records]}
            for n in d.node_stats)
    return out


def trace_rounds(rounds: int, traces: int) -> list[int]:
    """The timed rounds after which a configuration's traced steps run, spread evenly.

    Parameters
    ----------
    rounds : int
        Timed rounds (``steps``).
    traces : int
        Traced steps of the configuration.

    Returns
    -------
    list of int
        One round per traced step (the middle of each of ``traces`` equal shares of the
        rounds; repeated when there are more traced steps than rounds).

    Examples
    --------
    >>> trace_rounds(10, 3), trace_rounds(10, 1), trace_rounds(2, 3)
    ([1, 5, 8], [5], [0, 1, 1])
    """
    return [min(rounds - 1, int((t + 0.5) * rounds / traces)) for t in range(traces)]


def peak_bytes(step: Mapping[str, Sequence[Mapping[str, Any]]]) -> dict[str, float]:
    """Each device's peak of the bytes allocated during one traced step.

    Parameters
    ----------
    step : mapping
        Node stats by device (``alloc_records``: ``[micros, +-bytes]``, as the job keeps
        them).

    Returns
    -------
    dict of str to float
        Per device, the largest running sum of its allocations and frees in time order
        (frees first at equal times): the tensor memory the step held at once on top of
        what was allocated before it (the variables).

    Examples
    --------
    >>> peak_bytes({"d": [{"alloc_records": [[1, 100], [3, -100]]},
    ...                   {"alloc_records": [[2, 50], [3, 10]]}]})
    {'d': 150.0}
    """
    out = {}
    for dev, ns in step.items():
        recs = sorted((t, b) for n in ns for t, b in n.get("alloc_records", ()))
        run = peak = 0.0
        for _, b in recs:
            run += b
            peak = max(peak, run)
        out[dev] = peak
    return out


def slow_down(tf: Any, g: Any, slow: Mapping[str, float]) -> int:
    """Follow each op of ``slow`` by a busy-wait of ``k`` times its own duration.

    For op ``v`` with factor ``k`` (all new ops on ``v``'s device): ``start``, a
    ``Timestamp`` that runs once ``v``'s inputs are there (control inputs on an
    ``Identity`` of each input, so a remote input is received once, and on ``v``'s control
    inputs), and ``v`` waits for it; ``end``, a ``Timestamp`` after ``v``; a ``while`` loop
    that spins until ``end + k (end - start)``; every output of ``v`` passes through an
    ``Identity`` that waits for the loop, and every consumer (data or control) reads that
    instead, so nothing downstream, on this device or another, starts before the wait ends.

    Parameters
    ----------
    tf : module
        TensorFlow (graph mode).
    g : tf.Graph
        The imported graph of one configuration; changed in place (before any session).
    slow : mapping of str to float
        Op name -> ``k`` (:func:`commsched.placement.live.mapping.slowdowns`).

    Returns
    -------
    int
        Ops slowed down.

    References
    ----------
    Laich 2017, Sec. 2.2 (time of a node on a device = operations / speed).
    """
    done = 0
    for op in list(g.get_operations()):  # creation order: producers before consumers
        k = slow.get(op.name)
        if k is None:
            continue
        readers = [(c, j) for c in {c for t in op.outputs for c in t.consumers()}
                   for j, t in enumerate(c.inputs) if t.op is op]
        after = list(op._control_outputs)
        with g.as_default(), tf.device(op.device), tf.name_scope(f"{op.name}/slow"):
            with tf.control_dependencies([tf.identity(t) for t in op.inputs]
                                         + list(op.control_inputs)):
                start = tf.timestamp()
            op._add_control_input(start.op)
            with tf.control_dependencies([op]):
                end = tf.timestamp()
            deadline = end + (end - start) * float(k)
            wait = tf.while_loop(lambda d: tf.timestamp() < d, tf.identity, [deadline])[0]
            with tf.control_dependencies([wait]):
                gated = [tf.identity(t) for t in op.outputs]
        for c, j in readers:
            c._update_input(j, gated[c.inputs[j].value_index])
        for c in after:
            c._add_control_input(wait.op)
        done += 1
    return done


def run_plan(plan: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Run every configuration of ``plan`` (module docstring).

    Parameters
    ----------
    plan : mapping
        The plan (:func:`commsched.placement.experiments.live` writes it).

    Returns
    -------
    list of dict
        Per configuration: ``model`` (its model's ``name``), ``name``, ``steps_s`` (timed
        steps), ``init_s``, ``traced`` (step stats of each traced step, by device) and
        ``traced_s`` (their wall times).

    Raises
    ------
    CommschedError
        If the model is unknown or a configuration cannot be mapped
        (:class:`~commsched.placement.model.PlacementError`).
    """
    tf, keras = zoo.load_tensorflow()
    tf.compat.v1.disable_eager_execution()
    cfg = keep_node_names(tf, session_config(int(plan.get("threads", 1))))
    ms = int(float(plan["timeout_s"]) * 1000)
    opts = tf.compat.v1.RunOptions(timeout_in_ms=ms)
    topts = tf.compat.v1.RunOptions(timeout_in_ms=ms,
                                    trace_level=tf.compat.v1.RunOptions.FULL_TRACE)
    built = []
    configs = [(mi, m["name"], c) for mi, m in enumerate(plan["models"]) for c in m["configs"]]
    for mi, m in enumerate(plan["models"]):
        tr = m["trace"]
        spec = zoo.get(str(tr["model"]))
        b = build_iteration(tf, keras, spec, int(tr["batch"]), str(tr["mode"]), int(tr["size"]),
                            int(tr["seed"]), 0.01)
        base = b.g.as_graph_def()
        target_names = [t.name for t in b.targets]
        for c in m["configs"]:
            gd = tf.compat.v1.GraphDef()
            gd.CopyFrom(base)
            container = f"pl-{mi}-{c['name']}"
            apply(gd, c["placed"], [tuple(e) for e in c["control"]], b.names, container,
                  plan["devices"][0])
            g = tf.Graph()
            with g.as_default():
                tf.graph_util.import_graph_def(gd, name="")
            slow_down(tf, g, c.get("slow", {}))
            built.append((container, [g.get_operation_by_name(n) for n in target_names],
                          g.get_operation_by_name(b.init.name), g))
    sessions = [tf.compat.v1.Session(plan["target"], graph=g, config=cfg)
                for _, _, _, g in built]
    steps: list[list[float]] = [[] for _ in built]
    traced: list[list[dict[str, list[dict[str, Any]]]]] = [[] for _ in built]
    traced_s: list[list[float]] = [[] for _ in built]
    init_s = []
    try:
        for sess, (_, targets, init, _) in zip(sessions, built, strict=True):
            t = time.perf_counter()
            sess.run(init, options=opts)
            for _ in range(int(plan["warmup"])):
                sess.run(targets, options=opts)
            init_s.append(time.perf_counter() - t)
        n, rounds = len(built), int(plan["steps"])
        when = [trace_rounds(rounds, int(c.get("trace_steps", 1))) for _, _, c in configs]
        for k in range(rounds):
            for j in range(n):  # interleaved, rotated: drifts of a shared machine hit all
                i = (j + k) % n
                t = time.perf_counter()
                sessions[i].run(built[i][1], options=opts)
                steps[i].append(time.perf_counter() - t)
                for _ in range(when[i].count(k)):
                    md = tf.compat.v1.RunMetadata()
                    t = time.perf_counter()
                    sessions[i].run(built[i][1], options=topts, run_metadata=md)
                    traced_s[i].append(time.perf_counter() - t)
                    traced[i].append(_stats(md))
    finally:
        for sess in sessions:
            sess.close()
        tf.compat.v1.Session.reset(plan["target"], [x[0] for x in built])
    out = [{"model": model, "name": c["name"], "steps_s": steps[i], "init_s": init_s[i],
            "traced": traced[i], "traced_s": traced_s[i]}
           for i, (_, model, c) in enumerate(configs)]
    for r in out:
        print(f"config {r['model']} {r['name']}: median {statistics.median(r['steps_s']):.4f} s",
              flush=True)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """Run a plan and write its results (module docstring).

    Parameters
    ----------
    argv : sequence of str, optional
        ``--plan`` and ``--out`` (default: ``sys.argv[1:]``).

    Returns
    -------
    int
        0, or 2 after a one-line error on stderr
        (:func:`commsched.cluster.client.client_main`).
    """
    return client_main("commsched.placement.live.job",
                       lambda plan, _task: {"results": run_plan(plan)}, argv)


if __name__ == "__main__":
    sys.exit(main())
