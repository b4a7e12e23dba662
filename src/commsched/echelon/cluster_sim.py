"""The coupled compute + network simulation of training jobs (EchelonFlow, Sec. 3.3).

EchelonFlow (Pan et al., HotNets 2022, Sec. 3.3) claims that tardiness scheduling shortens
training (Property 1); tardiness itself is only a proxy. To measure iteration times, a job
is built as a DAG of *compute tasks* (on hosts, with profiled durations) and *flows*
(between hosts, with sizes) by :func:`commsched.echelon.jobs.build_job`, and
:func:`run_jobs` runs the tasks as events beside the flow-level network
(:class:`commsched.sim.flow.FlowSim`, interleaved with
:meth:`~commsched.sim.flow.FlowSim.advance`): a flow is released when its producers finish,
a task waits for its flows, and a scheduler (any flow policy) only changes the flow rates.

Every flow belongs to a group (one EchelonFlow, Sec. 3.2) whose arrangement gives it an
offset (:mod:`commsched.echelon.jobs`). The reference time ``r`` is the release of the
group's first flow, known only at run time; when a flow is released, :func:`run_jobs` gives
it the FlowSim meta columns ``job``, ``group`` (unique over all jobs), ``index`` (its
position in the group, in release order) and ``ideal`` (``r + offset``), which the
schedulers of :mod:`commsched.echelon.schedulers` read.

Examples
--------
A two-stage GPipe job with two micro-batches on two hosts of a 1 byte/s switch, every
stage taking 1 s forward and 2 s backward per micro-batch and 1-byte activations:

>>> from commsched.echelon.jobs import JobSpec, build_job
>>> from commsched.echelon.profile import LayerProfile
>>> from commsched.sim.flow import big_switch
>>> prof = LayerProfile("toy", fwd=(1.0, 1.0), bwd=(2.0, 2.0), params=(4, 4), act=(1, 0))
>>> job = build_job(JobSpec("pp", "gpipe", hosts=(0, 1), micro_batches=2), prof)
>>> run = run_jobs([job], big_switch(2, rate=1.0), "fair")
>>> run.iteration_times()["iteration_s"].tolist()
[11.0]
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from commsched.echelon.jobs import JobGraph, Node
from commsched.echelon.schedulers import FLOW_SCHEDULERS
from commsched.errors import CommschedError
from commsched.sim.flow import FlowSim, Network, Policy, check_flow_schedule

__all__ = ["ClusterRun", "run_jobs"]


@dataclass
class ClusterRun:
    """Outcome of :func:`run_jobs` (times in seconds).

    Parameters
    ----------
    jobs : list of JobGraph
        The jobs, in the order of the ``job`` columns.
    tasks : pandas.DataFrame
        One row per task: ``job, iteration, label, host, start, finish``.
    flows : pandas.DataFrame
        One row per flow: ``job, iteration, group, kind, index, src, dst, size, release,
        finish, ideal``.
    """

    jobs: list[JobGraph]
    tasks: pd.DataFrame
    flows: pd.DataFrame

    def iteration_times(self) -> pd.DataFrame:
        """Per job and iteration: its end and its duration.

        Returns
        -------
        pandas.DataFrame
            ``job, name, paradigm, iteration, end_s`` (its last task or flow) and
            ``iteration_s`` (since the previous iteration's end; the job's arrival for the
            first iteration).
        """
        both = pd.concat([self.tasks[["job", "iteration", "finish"]],
                          self.flows[["job", "iteration", "finish"]]])
        end = both.groupby(["job", "iteration"], sort=True)["finish"].max().reset_index()
        rows = []
        for j, job in enumerate(self.jobs):
            e = end[end["job"] == j].sort_values("iteration")["finish"].to_numpy()
            prev = np.concatenate([[job.spec.arrival], e[:-1]])
            for it, (a, b) in enumerate(zip(prev, e, strict=True)):
                rows.append({"job": j, "name": job.spec.name, "paradigm": job.spec.paradigm,
                             "iteration": it, "end_s": b, "iteration_s": b - a})
        return pd.DataFrame(rows)

    def tardiness(self) -> pd.DataFrame:
        """Per EchelonFlow: its tardiness.

        Returns
        -------
        pandas.DataFrame
            ``job, group, kind, iteration, tardiness_s``.

        References
        ----------
        EchelonFlow (Pan et al., HotNets 2022), Sec. 3.2, Eq. 2: the largest
        ``finish - ideal`` over the EchelonFlow's flows.
        """
        f = self.flows.assign(tardiness_s=self.flows["finish"] - self.flows["ideal"])
        return (f.groupby(["job", "group", "kind", "iteration"], sort=True)["tardiness_s"]
                .max().reset_index())

    def jobs_table(self) -> pd.DataFrame:
        """Per job: completion time, mean iteration time and summed tardiness.

        Returns
        -------
        pandas.DataFrame
            ``job, name, paradigm, model, workers, arrival_s, jct_s`` (last iteration's
            end minus arrival), ``iteration_mean_s`` and ``tardiness_s`` (EchelonFlow Eq.
            4 restricted to the job: the sum of its EchelonFlows' Eq. 2 tardiness).
        """
        it = self.iteration_times()
        tard = self.tardiness().groupby("job")["tardiness_s"].sum()
        rows = []
        for j, job in enumerate(self.jobs):
            mine = it[it["job"] == j]
            rows.append({"job": j, "name": job.spec.name, "paradigm": job.spec.paradigm,
                         "model": job.model, "workers": len(job.spec.hosts),
                         "arrival_s": job.spec.arrival,
                         "jct_s": float(mine["end_s"].max()) - job.spec.arrival,
                         "iteration_mean_s": float(mine["iteration_s"].mean()),
                         "tardiness_s": float(tard.get(j, 0.0))})
        return pd.DataFrame(rows)


def run_jobs(jobs: Sequence[JobGraph], net: Network, policy: Policy | str,
             check: bool = True) -> ClusterRun:
    """Run ``jobs`` together on ``net`` with flow ``policy`` (a policy, or the name of one
    in :data:`commsched.echelon.schedulers.FLOW_SCHEDULERS`).

    Hosts run one task at a time, in the order the job created them (after the job's
    arrival and the task's predecessors); a flow's consumers see it done its
    ``flow_latency`` after its last byte; jobs must use disjoint hosts (dedicated devices,
    the paper's Sec. 5 setting). With ``check`` the flow schedule is recorded and verified
    by :func:`commsched.sim.flow.check_flow_schedule`.

    Parameters
    ----------
    jobs : sequence of JobGraph
        Jobs on disjoint hosts (:func:`commsched.echelon.jobs.build_job`).
    net : Network
        The fabric.
    policy : Policy or str
        A flow policy or a name in ``FLOW_SCHEDULERS``.
    check : bool
        Record and verify the flow schedule.

    Returns
    -------
    ClusterRun

    Raises
    ------
    CommschedError
        If ``policy`` names no registered scheduler, a job uses a host outside the
        network, two jobs share a host, or the job graphs deadlock.
    InvalidFlowSchedule
        If ``check`` finds the schedule infeasible.

    References
    ----------
    EchelonFlow (Pan et al., HotNets 2022), Sec. 3.3 (Property 1: tardiness scheduling
    shortens training, measured here as iteration times) and Sec. 3.2 (Eq. 1: each flow's
    ideal finish time ``r + offset``, ``r`` the release of its group's first flow).
    """
    pol = FLOW_SCHEDULERS[policy]() if isinstance(policy, str) else policy
    owner: dict[int, int] = {}
    for j, job in enumerate(jobs):
        for h in set(job.task_host) | set(job.flow_src) | set(job.flow_dst):
            if not 0 <= h < net.hosts:
                raise CommschedError(f"job {job.spec.name}: host {h} is not in 0..{net.hosts - 1}")
            if owner.setdefault(h, j) != j:
                raise CommschedError(f"jobs {jobs[owner[h]].spec.name} and {job.spec.name} "
                                     f"share host {h}")
    # global numbering: tasks, then flows, job after job
    t0 = np.cumsum([0] + [len(j.task_host) for j in jobs])
    f0 = np.cumsum([0] + [len(j.flow_src) for j in jobs])
    g0 = np.cumsum([0] + [len(j.groups) for j in jobs])
    nt, nf = int(t0[-1]), int(f0[-1])
    succ: list[list[int]] = [[] for _ in range(nt + nf)]  # node: task i or flow nt + i
    missing = np.zeros(nt + nf, dtype=np.int64)
    queue: dict[int, list[int]] = {}
    earliest = np.zeros(nt)
    for j, job in enumerate(jobs):
        def gid(n: Node, j: int = j) -> int:
            return int(t0[j] + n[1]) if n[0] == "t" else int(nt + f0[j] + n[1])
        for node, ps in job.preds.items():
            v = gid(node)
            for p in ps:
                succ[gid(p)].append(v)
            missing[v] = len(ps)
        for i, h in enumerate(job.task_host):
            queue.setdefault(h, []).append(int(t0[j] + i))
        earliest[t0[j]:t0[j + 1]] = job.spec.arrival
    host = np.concatenate([np.asarray(j.task_host, dtype=np.int64) for j in jobs])
    dur = np.concatenate([np.asarray(j.task_dur, dtype=float) for j in jobs])
    src = np.concatenate([np.asarray(j.flow_src, dtype=np.int64) for j in jobs])
    dst = np.concatenate([np.asarray(j.flow_dst, dtype=np.int64) for j in jobs])
    size = np.concatenate([np.asarray(j.flow_size, dtype=float) for j in jobs])
    group = np.concatenate([np.asarray(j.flow_group, dtype=np.int64) + g0[k]
                            for k, j in enumerate(jobs)])
    index = np.concatenate([np.asarray(j.flow_index, dtype=np.int64) for j in jobs])
    offset = np.concatenate([np.asarray(j.flow_offset, dtype=float) for j in jobs])
    latency = np.concatenate([np.asarray(j.flow_latency, dtype=float) for j in jobs])
    fjob = np.repeat(np.arange(len(jobs)), np.diff(f0))
    start, finish = np.full(nt, np.nan), np.full(nt, np.nan)
    sim_id = np.full(nf, -1, dtype=np.int64)
    flow_of_sim: list[int] = []
    reference: dict[int, float] = {}
    ideal = np.full(nf, np.nan)
    head = dict.fromkeys(queue, 0)
    busy: set[int] = set()
    events: list[tuple[float, int]] = []  # (time, task | nt + flow seen done | -1 - job)
    sim = FlowSim(net, pol, record=check)
    done = 0

    def release(flows: list[int], now: float) -> None:
        for f in flows:
            reference.setdefault(int(group[f]), now)
            ideal[f] = reference[int(group[f])] + offset[f]
        ids = sim.add(src[flows], dst[flows], size[flows], np.full(len(flows), now),
                      job=fjob[flows], group=group[flows], index=index[flows],
                      ideal=ideal[flows])
        sim_id[flows] = ids
        flow_of_sim.extend(flows)

    def complete(node: int, now: float) -> None:
        nonlocal done
        done += 1
        ready: list[int] = []
        for v in succ[node]:
            missing[v] -= 1
            if missing[v] == 0 and v >= nt:
                ready.append(v - nt)
        if ready:
            release(ready, now)

    # an arrival event per job (code -1 - job) releases its predecessor-free flows
    free = {j: [int(f0[j] + i) for i in range(len(job.flow_src)) if not job.preds[("f", i)]]
            for j, job in enumerate(jobs)}
    for j, job in enumerate(jobs):
        heapq.heappush(events, (job.spec.arrival, -1 - j))
    now = 0.0
    while True:
        for h, q in queue.items():  # start every task that can start now
            while h not in busy and head[h] < len(q):
                t = q[head[h]]
                if missing[t] or earliest[t] > now:
                    break
                start[t] = now
                head[h] += 1
                busy.add(h)
                heapq.heappush(events, (now + float(dur[t]), t))
        t_next = events[0][0] if events else math.inf
        fin = sim.advance(until=t_next)
        if len(fin):
            now = sim.now
            for s in fin:
                f = flow_of_sim[int(s)]
                if latency[f] > 0:  # its consumers see it done later; the link is free
                    heapq.heappush(events, (now + float(latency[f]), nt + f))
                else:
                    complete(nt + f, now)
            continue
        if t_next == math.inf:
            break
        now = t_next
        while events and events[0][0] <= now:
            _, t = heapq.heappop(events)
            if t < 0:
                if free[-1 - t]:
                    release(free[-1 - t], now)
            elif t >= nt:
                complete(t, now)
            else:
                finish[t] = now
                busy.discard(int(host[t]))
                complete(t, now)
    if done < nt + nf:
        stuck = [k for k in range(nt) if np.isnan(finish[k])]
        raise CommschedError(f"job graph deadlock: {len(stuck)} tasks and "
                             f"{int(np.sum(sim_id < 0))} flows never became ready")
    result = sim.result()
    frel, ffin = result.release[sim_id], result.finish[sim_id]
    if check:
        check_flow_schedule(net, sim.src[: sim.n], sim.dst[: sim.n], sim.size[: sim.n],
                            result.release, result)
    tjob = np.repeat(np.arange(len(jobs)), np.diff(t0))
    tasks = pd.DataFrame({
        "job": tjob, "iteration": np.concatenate([j.task_iter for j in jobs]).astype(int),
        "label": [x for j in jobs for x in j.task_label], "host": host,
        "start": start, "finish": finish})
    kinds = [g.kind for j in jobs for g in j.groups]
    flows = pd.DataFrame({
        "job": fjob, "iteration": np.concatenate([j.flow_iter for j in jobs]).astype(int),
        "group": group,
        "kind": [kinds[g] for g in group], "index": index, "src": src, "dst": dst,
        "size": size, "release": frel, "finish": ffin, "ideal": ideal})
    return ClusterRun(list(jobs), tasks, flows)
