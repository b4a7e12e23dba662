"""An EchelonFlow training job as a commsched op graph (one rank per host).

:func:`job_op_graph` turns the tasks and flows of :class:`commsched.echelon.jobs.JobGraph`
into an op graph that the priority simulator, ``commsched validate`` and the Chakra export
(:func:`commsched.io.chakra.export_chakra`: one ET per host) take:

* task ``i`` -> op ``t<i>`` (kind ``compute``, resource ``host<h>`` of capacity 1,
  ``rank`` = its host, ``duration`` = its compute time, ``name`` = its label, ``iteration``);
  consecutive tasks of a host are chained by control edges (a host runs its tasks in
  creation order, as :func:`commsched.echelon.cluster_sim.run_jobs` does);
* flow ``j`` -> op ``f<j>`` (kind ``transfer``, ``src``/``dst`` hosts, ``bytes``, resource
  ``link:<src>-><dst>``, ``duration`` = bytes / ``bandwidth_Bps``, ``group`` = its
  EchelonFlow's label, ``offset`` = its arrangement offset);
* every predecessor of a task or flow -> a data edge.

What the op graph does not keep: the fluid network sharing of the flow simulator (each flow
is one op on its own link at the full ``bandwidth_Bps``) and the arrangement as a
scheduling objective (the offsets stay as attributes).
"""

from __future__ import annotations

import networkx as nx

from commsched.echelon.jobs import JobGraph
from commsched.errors import CommschedError
from commsched.model.graph import new_graph, validate

__all__ = ["job_op_graph"]


def job_op_graph(job: JobGraph, bandwidth_Bps: float) -> nx.DiGraph:
    """The op graph of ``job`` (see the module docstring).

    Parameters
    ----------
    job
        A job built by :func:`commsched.echelon.jobs.build_job`.
    bandwidth_Bps
        Link rate that turns a flow's bytes into its duration (bytes per second, > 0).

    Returns
    -------
    networkx.DiGraph
        A valid op graph with graph attributes ``job`` (name, paradigm, model) and
        ``groups`` (the EchelonFlows' kinds and labels).

    Raises
    ------
    CommschedError
        ``bandwidth_Bps`` is not positive.
    """
    if not bandwidth_Bps > 0:
        raise CommschedError(f"bandwidth_Bps must be > 0, got {bandwidth_Bps!r}")
    spec = job.spec
    g = new_graph({}, job={"name": spec.name, "paradigm": spec.paradigm, "model": job.model},
                  groups=[[grp.kind, grp.label] for grp in job.groups])
    res = g.graph["resources"]
    last: dict[int, str] = {}
    for i, (h, d, it, label) in enumerate(zip(job.task_host, job.task_dur, job.task_iter,
                                              job.task_label, strict=True)):
        op = f"t{i}"
        res.setdefault(f"host{h}", 1)
        g.add_node(op, kind="compute", resource=f"host{h}", duration=float(d), rank=int(h),
                   name=label, iteration=int(it))
        if h in last:
            g.add_edge(last[h], op, control=True)
        last[h] = op
    for j, (s, t, size) in enumerate(zip(job.flow_src, job.flow_dst, job.flow_size,
                                         strict=True)):
        link = f"link:{s}->{t}"
        res.setdefault(link, 1)
        grp = job.groups[job.flow_group[j]]
        g.add_node(f"f{j}", kind="transfer", resource=link, duration=size / bandwidth_Bps,
                   bytes=round(size), src=int(s), dst=int(t), iteration=job.flow_iter[j],
                   group=grp.label, offset=job.flow_offset[j])
    for (what, k), preds in job.preds.items():
        for pw, pk in preds:
            g.add_edge(f"{pw}{pk}", f"{what}{k}", control=False)
    validate(g)
    return g
