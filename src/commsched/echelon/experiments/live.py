"""EchelonFlow live: real training jobs whose flows are scheduled on an emulated core.

Three jobs (config ``echelon_live.jobs``: a pipeline, an FSDP job and a data-parallel
all-reduce job, :mod:`commsched.echelon.live.jobs`), one process per host launched with
``torchrun``, share the oversubscribed core of a two-rack emulated cluster
(:mod:`commsched.echelon.live.topology`). Every policy of ``policies`` (``none``: the
kernel's own sharing; ``fair``, ``sebf`` = Varys, ``echelon-*``, ``eiff``: the
simulator's flow schedulers, enforced with htb by :mod:`commsched.echelon.live.controller`)
runs as one phase of the same processes, ``repeats`` times in rotated order
(:func:`commsched.echelon.live.runner.run_live`).

Measured, per policy and repeat: every iteration's end (the last rank's), each job's
completion time (JCT: its last iteration's end after the phase's start), every flow's
start, size and finish (from its sender) and from them each EchelonFlow's tardiness
(Eq. 2: the largest ``finish - ideal`` over its flows, ``ideal`` = the start of the
group's first flow + the flow's offset from the job's arrangement; Eq. 4: their sum per
job), and the controller's update latency per flow event (sender's event to the htb
classes in force).

Prediction (:func:`predict`): the coupled compute + flow simulator
(:func:`commsched.echelon.cluster_sim.run_jobs`) runs the same three jobs (the job graphs the
live flows were matched to, with the live jobs' serial collectives: one communication
thread per process) on :func:`~commsched.echelon.live.topology.network` with the
*measured* core rate (one TCP stream across the core before the runs; the host links
scaled by the same ratio) and compute times *traced* from the live runs (per job and
computation kind, the median over every policy and repeat: one profile per job, not one
per run). What the fluid simulator lacks is modelled from the traces, never fitted to a
JCT: a per-message overhead per job (:func:`fit_overheads`: the low quantile of every flow's
time beyond its bytes at the path rate) as each flow's latency; a sender's lanes
(:func:`limit_lanes`: no more flows in flight to a peer than
:func:`~commsched.echelon.live.jobs.send_lanes` gives it; on the reference run this took
the in-sample median error from 9.9 to 9.0% and the leave-one-job-out one from 7.6 to
7.9%); each job's start after the phase's go (:func:`start_offsets`, 35-65 ms; 9.0 ->
9.0% and 7.9 -> 7.8%); policy ``none`` as the
kernel's FIFO (:func:`kernel_fifo`: shares by message bytes); every other policy as the
controller enforces it (:class:`~commsched.echelon.live.tc.EnforcedPolicy`: decisions in
force after the measured median update latency, htb classes and borrowing, and one 64 KiB
GSO packet of a held flow at each message boundary of a favoured one); the flows'
EchelonFlow offsets are the ones the live flows carried (:func:`arranged_profiles`).
Tried and left out (README, "EchelonFlow live", with the numbers): the ring collectives'
lockstep (a ring flow pausing until its predecessor's message arrived), the transport's
own per-message cost (0.3-0.4 ms) in place of the fitted latency, and no packet leak for
single-message flows. ``error = predicted / measured - 1`` of each job's JCT;
``predicted_fluid_jct_s``: the same jobs with the policy as it asks and no overhead.
Leave one job out (:func:`predict_held_out`): each job predicted with nothing of its own
records, from its profile measured before the run and overheads and start fitted on the
other jobs (:func:`fit_held_out`), as a user would predict a job that has not run yet;
``error_lojo_median``.

Without root, without htb/u32, or with ``enabled: false`` nothing runs: every table says
``skipped: <reason>`` and the metrics are empty, so the claims stay pending. Run as
``python -m commsched.echelon.experiments.live --config-json '{...}' --workdir DIR
--jobs J.csv --iterations I.csv --flows F.csv --updates U.csv --summary S.csv --metrics
M.csv`` (``--reuse``: re-analyse the ``run.json`` a run left in ``DIR``).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from commsched import driver
from commsched.cluster import net
from commsched.cluster.net import parse_rate
from commsched.cluster.torchrun import LAUNCHERS
from commsched.echelon.cluster_sim import ClusterRun, run_jobs
from commsched.echelon.jobs import JobGraph, build_job
from commsched.echelon.live.controller import POLICIES
from commsched.echelon.live.jobs import LiveJob, profile_compute, send_lanes, simulator_profile
from commsched.echelon.live.runner import TAGS_PER_PROCESS, JobPlacement, run_live
from commsched.echelon.live.tc import GSO_BYTES, EnforcedPolicy
from commsched.echelon.live.topology import network
from commsched.echelon.live.worker import BACKENDS
from commsched.echelon.profile import LayerProfile
from commsched.echelon.schedulers import FLOW_SCHEDULERS
from commsched.errors import CommschedError
from commsched.sim.flow import Policy, View, max_min

__all__ = ["FIGURE_KINDS", "HELD_OUT_COLUMNS", "FigureConfig", "HeldOutFit", "Params",
           "analyse", "arranged_profiles", "fit_held_out", "fit_overheads", "kernel_fifo",
           "limit_lanes", "messages", "metrics", "predict", "predict_held_out", "skipped_reason",
           "start_offsets", "summarize", "traced_profiles", "update_latency"]

TABLES = ("jobs", "iterations", "flows", "updates", "summary")
#: :func:`summarize`'s leave-one-job-out columns (:func:`predict_held_out`).
HELD_OUT_COLUMNS = ("predicted_lojo_jct_s", "lojo_compute_scale", "lojo_message_overhead_s",
                    "lojo_update_latency_s", "lojo_start_s", "error_lojo_median",
                    "error_lojo_abs_median")
#: The figures of ``notebooks/echelon_live.ipynb``.
FIGURE_KINDS = ("jct", "prediction")


@dataclass(frozen=True)
class Params:
    """The ``echelon_live`` config section (see ``config/config.yaml``)."""

    enabled: bool
    jobs: tuple[JobPlacement, ...]
    policies: tuple[str, ...]
    repeats: int = 2
    host_rate: str = "400mbit"
    core_rate: str = "50mbit"
    launcher: str = "torchrun"
    backend: str = "tagged"
    profile_reps: int = 5
    timeout_s: float = 840.0
    phase_timeout_s: float = 120.0

    def __post_init__(self) -> None:
        bad = [p for p in self.policies if p not in POLICIES]
        if bad:
            raise CommschedError(f"echelon_live: unknown policy {bad[0]!r}; known: "
                                 f"{', '.join(POLICIES)}")
        if self.launcher not in LAUNCHERS:
            raise CommschedError(f"echelon_live: launcher must be one of {', '.join(LAUNCHERS)}")
        if self.backend not in BACKENDS:
            raise CommschedError(f"echelon_live: backend must be one of {', '.join(BACKENDS)}")
        if not self.policies or self.repeats < 1 or not self.jobs:
            raise CommschedError("echelon_live: need jobs, policies and repeats >= 1")
        parse_rate(self.host_rate)  # one-line errors for a bad or zero bandwidth
        parse_rate(self.core_rate)
        names = [jp.job.name for jp in self.jobs]
        if len(set(names)) != len(names):
            raise CommschedError("echelon_live: job names must be unique")

    @staticmethod
    def from_config(cfg: Mapping[str, Any]) -> Params:
        """Build and check the section as ``config/config.yaml`` writes it.

        Parameters
        ----------
        cfg : mapping
            The ``echelon_live`` section; each ``jobs`` entry holds ``racks`` (one per
            process) and the :class:`~commsched.echelon.live.jobs.LiveJob` fields.

        Returns
        -------
        Params

        Raises
        ------
        CommschedError
            An unknown key, a job without ``racks`` or with an unknown field, or any
            check of :class:`Params`, :class:`JobPlacement` or ``LiveJob``.
        """
        known = {f.name for f in fields(Params)}
        extra = sorted(set(cfg) - known)
        if extra:
            raise CommschedError(f"echelon_live: unknown key {extra[0]!r}")
        args = dict(cfg)
        jobs = []
        for i, j in enumerate(cfg.get("jobs", [])):
            j = dict(j)
            racks = j.pop("racks", None)
            if racks is None:
                raise CommschedError(f"echelon_live.jobs[{i}]: racks is required")
            try:
                job = LiveJob(**{"world": len(racks), **j})
            except TypeError as e:
                raise CommschedError(f"echelon_live.jobs[{i}]: {e}") from None
            jobs.append(JobPlacement(job, tuple(int(r) for r in racks)))
        args["jobs"] = tuple(jobs)
        args["policies"] = tuple(cfg.get("policies", ()))
        return Params(**args)


def skipped_reason(params: Params) -> str | None:
    """Why the live run cannot run here (None: it can).

    Parameters
    ----------
    params : Params
        The checked config section.

    Returns
    -------
    str or None
        ``echelon_live.enabled is false``, or
        :func:`commsched.cluster.net.check_htb`'s reason (no root, no htb or u32).
    """
    if not params.enabled:
        return "echelon_live.enabled is false"
    return net.check_htb()


# --------------------------------------------------------------------------------------
# Analysis.


def analyse(run: Mapping[str, Any]) -> dict[str, pd.DataFrame]:
    """Tables ``iterations``, ``jobs``, ``flows``, ``updates`` and ``tasks`` of a run.

    The warm-up phase (the first of every repeat) is left out. Times are seconds after
    the phase's start.

    Parameters
    ----------
    run : mapping
        :func:`commsched.echelon.live.runner.run_live`'s result (or its ``run.json``).

    Returns
    -------
    dict of str to pandas.DataFrame
        Rows carry ``repeat`` and ``policy``, all but ``updates`` also ``job`` and
        ``paradigm``. ``iterations``: ``end_s``, ``iteration_s``. ``jobs``: ``jct_s``,
        ``iteration_mean_s``, ``flows`` and ``tardiness_s`` (Eq. 4 over the job's
        EchelonFlows, each Eq. 2 with its first flow's start as reference). ``flows``:
        the senders' records plus ``ideal`` and ``tardiness_s``. ``updates``: per
        controller event, ``latency_s`` (to the htb classes in force) and ``recv_s``.
        ``tasks``: ``label``, ``start_s``, ``duration_s``.

    References
    ----------
    .. [1] Pan et al., "EchelonFlow", HotNets 2022, Sec. 3.2, Eqs. 2 and 4.
    """
    its, jobs, flows, ups, tasks = [], [], [], [], []
    for r in run["runs"]:
        rep = r["repeat"]
        for name, ranks in r["workers"].items():
            paradigm = ranks[0]["paradigm"]
            for p in range(1, len(r["phases"])):
                ph = [rk["phases"][p] for rk in ranks]
                go, policy = ph[0]["go"], ph[0]["policy"]
                ends = np.max([x["iteration_end"] for x in ph], axis=0) - go
                key = {"repeat": rep, "policy": policy, "job": name, "paradigm": paradigm}
                prev = 0.0
                for i, e in enumerate(ends):
                    its.append({**key, "iteration": i, "end_s": float(e),
                                "iteration_s": float(e - prev)})
                    prev = float(e)
                fl = pd.DataFrame([f for x in ph for f in x["flows"]])
                fl["start"] -= go
                fl["finish"] -= go
                ref = fl.groupby(["iteration", "group"])["start"].transform("min")
                fl["ideal"] = ref + fl["offset"]
                fl["tardiness_s"] = fl["finish"] - fl["ideal"]
                for k, v in key.items():
                    fl[k] = v
                flows.append(fl)
                tard = fl.groupby(["iteration", "group"])["tardiness_s"].max().sum()
                jobs.append({**key, "jct_s": float(ends[-1]),
                             "iteration_mean_s": float(np.mean(np.diff(ends, prepend=0.0))),
                             "tardiness_s": float(tard), "flows": len(fl)})
                for x in ph:
                    for t in x["tasks"]:
                        tasks.append({**key, "label": t["label"], "start_s": t["start"] - go,
                                      "duration_s": t["end"] - t["start"]})
        for ph in r["controller"]["phases"][1:]:
            for e, fid, t_send, t_recv, t_applied in ph["events"]:
                ups.append({"repeat": rep, "policy": ph["policy"], "event": e, "flow": fid,
                            "latency_s": t_applied - t_send, "recv_s": t_recv - t_send})
    return {"iterations": pd.DataFrame(its), "jobs": pd.DataFrame(jobs),
            "flows": pd.concat(flows, ignore_index=True) if flows else pd.DataFrame(),
            "updates": pd.DataFrame(ups), "tasks": pd.DataFrame(tasks)}


def _kind(label: str) -> tuple[str, int]:
    """``("fwd" | "bwd", block or stage)`` of a computation label of the job graphs.

    >>> _kind("B2.3"), _kind("fwd1"), _kind("fwd")
    (('bwd', 2), ('fwd', 1), ('fwd', -1))
    """
    if label[0] in "FB" and "." in label:
        return ("fwd" if label[0] == "F" else "bwd"), int(label[1:label.index(".")])
    kind = label[:3]
    rest = label[3:]
    return kind, int(rest) if rest else -1


def traced_profiles(tasks: pd.DataFrame, jobs: Sequence[LiveJob]) -> dict[str, Any]:
    """Per job, forward and backward times per block (pipelines: per stage and
    micro-batch): the median over every recorded computation of that kind (all policies
    and repeats); a DP job's single forward is spread evenly over its blocks.

    Parameters
    ----------
    tasks : pandas.DataFrame
        :func:`analyse`'s ``tasks`` table (``job``, ``label``, ``duration_s``).
    jobs : sequence of LiveJob
        The jobs; a block with no recorded computation gets 0 s.

    Returns
    -------
    dict of str to LayerProfile
        Per job name, :func:`commsched.echelon.live.jobs.simulator_profile` of the times.
    """
    out = {}
    for job in jobs:
        t = tasks[tasks["job"] == job.name]
        n = job.world if job.pipeline else job.blocks
        k = pd.DataFrame([_kind(str(x)) for x in t["label"]], columns=["kind", "block"],
                         index=t.index)
        med = {(str(a), int(b)): float(v) for (a, b), v in
               t["duration_s"].groupby([k["kind"], k["block"]]).median().items()}
        if ("fwd", -1) in med:  # DP: one forward task
            fwd = [med[("fwd", -1)] / n] * n
        else:
            fwd = [med.get(("fwd", b), 0.0) for b in range(n)]
        bwd = [med.get(("bwd", b), 0.0) for b in range(n)]
        out[job.name] = simulator_profile(job, fwd, bwd)
    return out


def messages(label: str, world: int) -> int:
    """Messages (acknowledged sends) of one flow of group ``label``: a ring all-reduce
    sends ``2 (W - 1)`` chunks, a reduce-scatter or all-gather ``W - 1``, a pipeline
    activation or gradient one.

    Parameters
    ----------
    label : str
        The group's label in the job graph (``allreduce<k>``, ``allgather...``,
        ``reduce-scatter...``, anything else: one message).
    world : int
        ``W``, the job's processes (>= 1).

    Returns
    -------
    int

    Examples
    --------
    >>> messages("allreduce3", 3), messages("allgather", 3), messages("act0", 3)
    (4, 2, 1)
    """
    if label.startswith("allreduce"):
        return 2 * (world - 1)
    if label.startswith(("allgather", "reduce-scatter")):
        return world - 1
    return 1


def fit_overheads(flows: pd.DataFrame, jobs: Sequence[JobPlacement], core_Bps: float,
                  host_Bps: float, quantile: float = 0.1) -> dict[str, float]:
    """Per job, the fixed cost of one message (s): the ``quantile`` over all its flows of
    every policy and repeat of ``(duration - bytes / path rate) / messages`` (the path
    rate: the core's for a flow between racks, else the host link's). The low quantile
    is the flow that met no contention: what is left is the transport's own cost
    (acknowledgement round trips, thread wake-ups on a loaded machine), which the fluid
    simulator does not have.

    Parameters
    ----------
    flows : pandas.DataFrame
        :func:`analyse`'s ``flows`` (``job``, ``src``, ``dst`` ranks, ``group``,
        ``bytes``, ``start`` and ``finish`` in s).
    jobs : sequence of JobPlacement
        The jobs and the rack of each rank.
    core_Bps, host_Bps : float
        The core's and a host link's rate, bytes/s (> 0).
    quantile : float, optional
        In [0, 1].

    Returns
    -------
    dict of str to float
        Seconds per message, per job name; >= 0 (0 for a job without flows).
    """
    out = {}
    for jp in jobs:
        extra = _message_extra(flows, jp, core_Bps, host_Bps)
        out[jp.job.name] = max(float(np.quantile(extra, quantile)), 0.0) if len(extra) else 0.0
    return out


def _message_extra(flows: pd.DataFrame, jp: JobPlacement, core_Bps: float,
                   host_Bps: float) -> np.ndarray:
    """Every flow of job ``jp``: ``(duration - bytes / path rate) / messages`` (s)."""
    f = flows[flows["job"] == jp.job.name] if len(flows) else flows
    if f.empty:
        return np.zeros(0)
    racks = np.asarray(jp.racks)
    cross = racks[f["src"].to_numpy()] != racks[f["dst"].to_numpy()]
    rate = np.where(cross, core_Bps, host_Bps)
    n = np.array([messages(g, jp.job.world) for g in f["group"]])
    return np.asarray(((f["finish"] - f["start"]).to_numpy() - f["bytes"].to_numpy() / rate)
                      / n, dtype=float)


def start_offsets(t: Mapping[str, pd.DataFrame], exclude_job: str | None = None
                  ) -> dict[str, float]:
    """Per job, when it starts after the phase's go (s): per phase (repeat and policy),
    its first computation's or flow's start, whichever is first; the median over phases.
    The processes leave the phase barrier, wake their threads and build the iteration's
    data first (35-65 ms per job on the runs of 2026-11-25/26), which the simulator's
    jobs, arriving at 0, do not.

    Parameters
    ----------
    t : mapping of str to pandas.DataFrame
        :func:`analyse`'s tables: ``tasks`` (``start_s``) and ``flows`` (``start``), both
        with ``job``, ``repeat``, ``policy``.
    exclude_job : str, optional
        Leave this job out and add ``"*"``: the median over the other jobs' phases
        pooled (the leave-one-job-out fit).

    Returns
    -------
    dict of str to float
        Seconds (>= 0) per job name (with ``exclude_job``: the others and ``"*"``).
    """
    key = ["job", "repeat", "policy"]
    firsts = [t["tasks"].groupby(key)["start_s"].min() if len(t["tasks"]) else None,
              t["flows"].groupby(key)["start"].min() if len(t["flows"]) else None]
    both = pd.concat([f for f in firsts if f is not None], axis=1)
    first = both.min(axis=1).clip(lower=0.0)
    jobs = first.index.get_level_values("job")
    if exclude_job is not None:
        first = first[jobs != exclude_job]
        jobs = first.index.get_level_values("job")
    out = {str(j): float(v) for j, v in first.groupby(jobs).median().items()}
    if exclude_job is not None:
        out["*"] = float(first.median()) if len(first) else 0.0
    return out


def update_latency(updates: pd.DataFrame, exclude_job: str | None = None) -> float:
    """The controller's update latency (s): the median over every flow event of the
    controlled policies (all but ``none``) of the time from the sender's event to the
    htb classes in force.

    Parameters
    ----------
    updates : pandas.DataFrame
        :func:`analyse`'s ``updates`` (``policy``, ``flow``, ``latency_s``); a flow id
        starts with its job's name and ``/``.
    exclude_job : str, optional
        Leave out the events of this job's flows (the leave-one-job-out fit).

    Returns
    -------
    float
        Seconds; 0 without events.
    """
    lat = _controlled_latencies(updates, exclude_job)
    return float(lat.median()) if len(lat) else 0.0


def _controlled_latencies(updates: pd.DataFrame, exclude_job: str | None = None) -> pd.Series:
    """The update latencies (s) of the controlled policies' flow events (all but
    ``none``), without ``exclude_job``'s flows."""
    if not len(updates):
        return pd.Series(dtype=float)
    keep = updates["policy"] != "none"
    if exclude_job is not None:
        keep &= updates["flow"].astype(str).str.split("/").str[0] != exclude_job
    return updates.loc[keep, "latency_s"]


@dataclass(frozen=True)
class HeldOutFit:
    """What the leave-one-job-out prediction of job ``job`` takes from the run, all of it
    fitted on the *other* jobs' records (:func:`fit_held_out`).

    Parameters
    ----------
    job : str
        The held-out job.
    compute_scale : float
        Live compute time over the profile measured before the run, the median over the
        other jobs (> 0).
    message_overhead_s : float
        Seconds per message, :func:`fit_overheads`' quantile over the other jobs' flows
        pooled (>= 0).
    update_s : float
        The controller's median update latency over the other jobs' flow events (s).
    start_s : float
        When the job starts after the phase's go, the median over the other jobs'
        phases (:func:`start_offsets`, s).
    """

    job: str
    compute_scale: float
    message_overhead_s: float
    update_s: float
    start_s: float


def fit_held_out(t: Mapping[str, pd.DataFrame], jobs: Sequence[JobPlacement], held_out: str,
                 arranged: Mapping[str, LayerProfile], core_Bps: float, host_Bps: float,
                 quantile: float = 0.1) -> HeldOutFit:
    """Fit the runtime's overheads on every job but ``held_out``, pooled (none per job).

    ``compute_scale``: per other job, its traced compute (:func:`traced_profiles`, the sum
    of forward and backward times) over the same sum of the profile measured before the
    run, alone in one process (``arranged``: what a user has of a job before running it);
    the median over those jobs. ``message_overhead_s``: the ``quantile`` of
    :func:`fit_overheads`' per-message excess over the other jobs' flows, pooled.
    ``update_s``: :func:`update_latency` without the held-out job's flow events.
    ``start_s``: :func:`start_offsets` over the other jobs' phases, pooled. The core
    rate (measured before the runs) and the GSO packet (the links' ``gso_max_size``)
    belong to the cluster, not to a job, and are not fitted here.

    Parameters
    ----------
    t : mapping of str to pandas.DataFrame
        :func:`analyse`'s tables (``tasks``, ``flows``, ``updates`` are read).
    jobs : sequence of JobPlacement
        Every job of the run.
    held_out : str
        The job left out; none of its records enters the fit.
    arranged : mapping of str to LayerProfile
        Per job, the profile measured before the run (:func:`arranged_profiles`).
    core_Bps, host_Bps : float
        The core's and a host link's rate, bytes/s.
    quantile : float, optional
        As for :func:`fit_overheads`.

    Returns
    -------
    HeldOutFit

    Raises
    ------
    CommschedError
        ``held_out`` is not a job, no other job is left, or an other job has no traced
        or no profiled compute.

    References
    ----------
    .. [1] Pan et al., "EchelonFlow", HotNets 2022, Sec. 4 (the per-layer compute times
       of the job graphs).
    """
    names = [jp.job.name for jp in jobs]
    if held_out not in names:
        raise CommschedError(f"fit_held_out: no job {held_out!r}")
    others = [jp for jp in jobs if jp.job.name != held_out]
    if not others:
        raise CommschedError(f"fit_held_out: no job but {held_out!r} to fit on")
    tasks = t["tasks"]
    traced = traced_profiles(tasks[tasks["job"] != held_out], [jp.job for jp in others])
    scales = []
    for jp in others:
        n = jp.job.name
        live = sum(traced[n].fwd) + sum(traced[n].bwd)
        alone = sum(arranged[n].fwd) + sum(arranged[n].bwd)
        if live <= 0 or alone <= 0:
            raise CommschedError(f"fit_held_out: job {n!r} has no traced or no profiled "
                                 "compute")
        scales.append(live / alone)
    extra = np.concatenate([_message_extra(t["flows"], jp, core_Bps, host_Bps)
                            for jp in others])
    over = max(float(np.quantile(extra, quantile)), 0.0) if len(extra) else 0.0
    return HeldOutFit(held_out, float(np.median(scales)), over,
                      update_latency(t["updates"], held_out),
                      start_offsets(t, held_out)["*"])


def predict_held_out(params: Params, t: Mapping[str, pd.DataFrame], core_Bps: float,
                     host_Bps: float, arranged: Mapping[str, LayerProfile]) -> pd.DataFrame:
    """Leave one job out: each job's JCT under every policy predicted with nothing of its
    own records (:func:`fit_held_out`).

    For held-out job ``J`` the simulator (:func:`predict`) runs all jobs together as in
    :func:`summarize`, except that ``J``'s compute times are its profile measured before
    the run (alone, ``arranged``) times the other jobs' ``compute_scale``, its
    per-message latency is the other jobs' pooled ``message_overhead_s``, its start the
    other jobs' pooled ``start_s``, and the controller's update latency is the other
    jobs' median. The other jobs keep what
    :func:`summarize` gives them (their traced profiles and their own per-message
    latencies), all of it from their own records.

    Parameters
    ----------
    params : Params
        The config section (jobs, policies).
    t : mapping of str to pandas.DataFrame
        :func:`analyse`'s tables.
    core_Bps, host_Bps : float
        The core's and a host link's rate, bytes/s.
    arranged : mapping of str to LayerProfile
        Per job, the profile measured before the run (:func:`arranged_profiles`); it
        also sets the flows' EchelonFlow offsets, as it did live.

    Returns
    -------
    pandas.DataFrame
        One row per policy and job: ``predicted_lojo_jct_s`` and the fit
        (``lojo_compute_scale``, ``lojo_message_overhead_s``, ``lojo_update_latency_s``,
        ``lojo_start_s``).
        Empty with fewer than two jobs.

    Raises
    ------
    CommschedError
        As :func:`fit_held_out` and :func:`predict`.
    """
    jobs = params.jobs
    if len(jobs) < 2:
        return pd.DataFrame()
    tasks = t["tasks"]
    rows = []
    for k, jp in enumerate(jobs):
        name = jp.job.name
        fit = fit_held_out(t, jobs, name, arranged, core_Bps, host_Bps)
        others = [o for o in jobs if o.job.name != name]
        profiles = traced_profiles(tasks[tasks["job"] != name], [o.job for o in others])
        a = arranged[name]
        profiles[name] = simulator_profile(jp.job, [fit.compute_scale * x for x in a.fwd],
                                           [fit.compute_scale * x for x in a.bwd])
        over = {**fit_overheads(t["flows"], others, core_Bps, host_Bps),
                name: fit.message_overhead_s}
        starts = {**start_offsets(t, name), name: fit.start_s}
        for policy in params.policies:
            sim = predict(jobs, profiles, core_Bps, host_Bps, policy, over, fit.update_s,
                          arranged, starts)
            rows.append({"policy": policy, "job": name,
                         "predicted_lojo_jct_s": float(_ends(sim)[k]),
                         "lojo_compute_scale": fit.compute_scale,
                         "lojo_message_overhead_s": fit.message_overhead_s,
                         "lojo_update_latency_s": fit.update_s, "lojo_start_s": fit.start_s})
    return pd.DataFrame(rows)


def limit_lanes(g: JobGraph, lanes: Mapping[tuple[int, int], int]) -> None:
    """Let at most ``lanes[(src, dst)]`` flows of ``g`` from host ``src`` to ``dst`` be in
    flight at once, per iteration (in place): the ``k``-th such flow (creation order) is
    released only once the ``(k - L)``-th is done, as a live sender waits for an idle lane
    (:func:`commsched.echelon.live.jobs.send_lanes`; lanes are assumed freed in the order
    they were taken).

    Parameters
    ----------
    g : JobGraph
        The job graph; its flows' predecessors gain the earlier flows.
    lanes : mapping of (int, int) to int
        Per host pair, the lanes (>= 1); pairs not named are not limited.

    Raises
    ------
    CommschedError
        A pair has fewer than one lane.

    Examples
    --------
    >>> from commsched.echelon.jobs import JobSpec, build_job
    >>> from commsched.echelon.profile import LayerProfile
    >>> p = LayerProfile("m", (1.0, 1.0), (1.0, 1.0), (4, 4), (8, 8))
    >>> g = build_job(JobSpec("p", "gpipe", (0, 1), micro_batches=3), p)
    >>> limit_lanes(g, {(0, 1): 2})
    >>> g.preds[("f", 2)][-1]
    ('f', 0)
    """
    if any(n < 1 for n in lanes.values()):
        raise CommschedError(f"limit_lanes: a host pair has no lane ({dict(lanes)})")
    seen: dict[tuple[int, int, int], list[int]] = {}
    for f, (src, dst, it) in enumerate(zip(g.flow_src, g.flow_dst, g.flow_iter, strict=True)):
        n = lanes.get((src, dst))
        if n is None:
            continue
        mine = seen.setdefault((it, src, dst), [])
        if len(mine) >= n:
            g.preds[("f", f)].append(("f", mine[-n]))
        mine.append(f)


def kernel_fifo(message_bytes: np.ndarray) -> Policy:
    """The kernel's own sharing of a link (policy ``none``: one htb class, one FIFO) as a
    flow policy: max-min fair with each flow weighted by the bytes of one of its messages.

    A live sender writes a whole message into its socket and waits for the receiver's
    acknowledgement (:mod:`commsched.echelon.live.transport`), so a bulk flow keeps about
    one message queued at the bottleneck; a FIFO serves the queued bytes in order, so a
    flow's share of the link is its share of the queue: a 64 kB activation waits behind
    the 350 kB messages of the collectives instead of getting an equal share, as per-flow
    fairness would give it. ``message_bytes[g]``: the message size of the flows of
    (global) group ``g`` (the ``group`` meta column of
    :func:`commsched.echelon.cluster_sim.run_jobs`).

    Parameters
    ----------
    message_bytes : ndarray of float
        Bytes of one message, per group.

    Returns
    -------
    Policy

    Examples
    --------
    Two flows on one 10 B/s link, messages of 1 and 4 bytes: the link is split 1:4.

    >>> from commsched.sim.flow import big_switch, simulate
    >>> r = simulate(big_switch(2, 10.0), [0, 0], [1, 1], [1.0, 8.0], [0.0, 0.0],
    ...              kernel_fifo(np.array([1.0, 4.0])), group=[0, 1])
    >>> r.finish.round(2).tolist()
    [0.5, 0.9]
    """
    def policy(view: View) -> np.ndarray:
        w = message_bytes[view.sim.meta["group"][view.active]]
        return max_min(view.links, view.net.capacity, w)
    return policy


def arranged_profiles(run: Mapping[str, Any]) -> dict[str, LayerProfile]:
    """Per job, the profile that set its live flows' EchelonFlow offsets (the one
    measured before the runs, as each worker recorded it).

    Parameters
    ----------
    run : mapping
        :func:`commsched.echelon.live.runner.run_live`'s result; rank 0's ``profile``
        of each job in the first repeat is read.

    Returns
    -------
    dict of str to LayerProfile
    """
    return {name: LayerProfile(**ranks[0]["profile"])
            for name, ranks in run["runs"][0]["workers"].items()}


def predict(jobs: Sequence[JobPlacement], profiles: Mapping[str, Any], core_Bps: float,
            host_Bps: float, policy: str, overheads: Mapping[str, float] | None = None,
            update_s: float | None = None,
            arranged: Mapping[str, LayerProfile] | None = None,
            starts: Mapping[str, float] | None = None) -> ClusterRun:
    """The simulator's run of ``jobs`` under ``policy`` (module docstring). With
    ``overheads`` (s per message, :func:`fit_overheads`) a flow's consumers see it done
    that much later per message of it (its ``flow_latency``; the link is free meanwhile:
    the fluid simulator has no latency), and no sender has more flows in flight to a
    peer than it has lanes to it (:func:`limit_lanes`). ``none`` runs :func:`kernel_fifo`; any other
    policy, with ``update_s`` (the controller's measured update latency, s), runs as the
    live controller enforces it (:class:`~commsched.echelon.live.tc.EnforcedPolicy`),
    without it as the policy asks. ``profiles`` set the compute times; ``arranged``
    (:func:`arranged_profiles`), where given, the flows' EchelonFlow offsets, as the live
    flows carried them (else ``profiles`` set both).

    Parameters
    ----------
    jobs : sequence of JobPlacement
        The live jobs; job ``k``'s ranks take the next ``world`` hosts.
    profiles : mapping of str to LayerProfile
        Per job name, its compute times (:func:`traced_profiles`).
    core_Bps, host_Bps : float
        Core and host link rates, bytes/s.
    policy : str
        ``none`` or a name in :data:`commsched.echelon.schedulers.FLOW_SCHEDULERS`.
    overheads : mapping of str to float, optional
        Seconds per message, per job name; absent: 0.
    update_s : float, optional
        The controller's update latency, s.
    arranged : mapping of str to LayerProfile, optional
        Per job name, the profile of its flows' offsets.
    starts : mapping of str to float, optional
        Per job name, its arrival after the phase's go (s, :func:`start_offsets`);
        absent: 0. A job's JCT after the go is its ``jct_s`` plus ``arrival_s``.

    Returns
    -------
    ClusterRun
        The simulated run of the three jobs together.

    Raises
    ------
    CommschedError
        ``policy`` is neither ``none`` nor a flow scheduler (or an alias of one), or the
        job graphs deadlock (:func:`commsched.echelon.cluster_sim.run_jobs`).
    KeyError
        A job has no profile.
    """
    racks = [r for jp in jobs for r in jp.racks]
    graphs, msg_bytes, h = [], [], 0
    for jp in jobs:
        hosts = tuple(range(h, h + jp.job.world))
        h += jp.job.world
        spec = replace(jp.job.spec(hosts), arrival=(starts or {}).get(jp.job.name, 0.0))
        g = build_job(spec, profiles[jp.job.name])
        if arranged is not None:
            g.flow_offset = build_job(jp.job.spec(hosts), arranged[jp.job.name]).flow_offset
        if overheads is not None:
            limit_lanes(g, {(hosts[a], hosts[b]): n for (a, b), n
                            in send_lanes(jp.job, TAGS_PER_PROCESS).items()})
        n = {k: messages(grp.label, jp.job.world) for k, grp in enumerate(g.groups)}
        size = {k: 0.0 for k in n}
        for f, k in enumerate(g.flow_group):
            size[k] = g.flow_size[f]
        msg_bytes += [size[k] / n[k] for k in range(len(g.groups))]
        a = (overheads or {}).get(jp.job.name, 0.0)
        g.flow_latency = [a * n[k] for k in g.flow_group]
        graphs.append(g)
    net = network(racks, host_Bps, core_Bps)
    pol: Policy | str = policy
    if policy == "none":
        pol = kernel_fifo(np.array(msg_bytes))
    elif update_s is not None:
        pol = EnforcedPolicy(FLOW_SCHEDULERS[policy](), update_s,
                             [len(net.capacity) - 2, len(net.capacity) - 1],  # the core
                             np.array(msg_bytes), GSO_BYTES)
    return run_jobs(graphs, net, pol)


def summarize(params: Params, t: Mapping[str, pd.DataFrame], core_Bps: float,
              core_nominal: float, host_nominal: float,
              arranged: Mapping[str, LayerProfile] | None = None) -> pd.DataFrame:
    """Per policy and job: measured JCT, iteration time and tardiness (median over
    repeats), the simulator's prediction and its error.

    Parameters
    ----------
    params : Params
        The config section (its jobs and policies).
    t : mapping of str to pandas.DataFrame
        :func:`analyse`'s tables.
    core_Bps : float
        The measured core rate, bytes/s.
    core_nominal, host_nominal : float
        The configured core and host rates, bytes/s; the host rate used is
        ``host_nominal`` scaled by ``core_Bps / core_nominal``.
    arranged : mapping of str to LayerProfile, optional
        As for :func:`predict`; also the held-out job's compute profile of
        :func:`predict_held_out`.

    Returns
    -------
    pandas.DataFrame
        One row per policy and job that ran: measured ``jct_s`` (median, min, max),
        ``iteration_mean_s``, ``tardiness_s``; ``predicted_jct_s``,
        ``predicted_tardiness_s``, ``predicted_fluid_jct_s``; ``error_median``,
        ``error_abs_median``, ``error_fluid_median`` (predicted / measured - 1);
        ``message_overhead_s``, ``update_latency_s``, ``start_s`` (s), ``core_Bps``; with
        ``arranged`` and two jobs or more, the leave-one-job-out prediction
        (:func:`predict_held_out`) and its errors, :data:`HELD_OUT_COLUMNS` (else NaN).
    """
    profiles = traced_profiles(t["tasks"], [jp.job for jp in params.jobs])
    host = host_nominal * core_Bps / core_nominal
    over = fit_overheads(t["flows"], params.jobs, core_Bps, host)
    update_s = update_latency(t["updates"])
    starts = start_offsets(t)
    held = (predict_held_out(params, t, core_Bps, host, arranged) if arranged is not None
            else pd.DataFrame())
    if not held.empty:
        held = held.set_index(["policy", "job"])
    rows = []
    jobs = t["jobs"]
    for policy in params.policies:
        run = predict(params.jobs, profiles, core_Bps, host, policy, over, update_s,
                      arranged, starts)
        sim, end = run.jobs_table(), _ends(run)
        nominal = predict(params.jobs, profiles, core_Bps, host, policy).jobs_table()
        for k, jp in enumerate(params.jobs):
            m = jobs[(jobs["policy"] == policy) & (jobs["job"] == jp.job.name)]
            if m.empty:
                continue
            pred = float(end[k])
            errs = pred / m["jct_s"] - 1
            rows.append({"policy": policy, "job": jp.job.name,
                         "paradigm": jp.job.paradigm, "repeats": len(m),
                         "jct_s": float(m["jct_s"].median()),
                         "jct_min_s": float(m["jct_s"].min()),
                         "jct_max_s": float(m["jct_s"].max()),
                         "iteration_mean_s": float(m["iteration_mean_s"].median()),
                         "tardiness_s": float(m["tardiness_s"].median()),
                         "predicted_jct_s": pred,
                         "predicted_tardiness_s": float(sim.loc[k, "tardiness_s"]),
                         "message_overhead_s": over[jp.job.name],
                         "start_s": starts.get(jp.job.name, 0.0),
                         "update_latency_s": update_s,
                         "predicted_fluid_jct_s": float(nominal.loc[k, "jct_s"]),
                         "error_fluid_median": float((float(nominal.loc[k, "jct_s"])
                                                      / m["jct_s"] - 1).median()),
                         "error_median": float(errs.median()),
                         "error_abs_median": float(errs.abs().median()),
                         "core_Bps": core_Bps, **_held_out_columns(held, policy, jp, m)})
    return pd.DataFrame(rows)


def _ends(run: ClusterRun) -> np.ndarray:
    """Per job of ``run``, its last iteration's end after time 0 (the phase's go)."""
    jt = run.jobs_table()
    return (jt["jct_s"] + jt["arrival_s"]).to_numpy(dtype=float)


def _held_out_columns(held: pd.DataFrame, policy: str, jp: JobPlacement,
                      m: pd.DataFrame) -> dict[str, float]:
    """:func:`summarize`'s leave-one-job-out columns of one policy and job (NaN without
    :func:`predict_held_out`'s row)."""
    key = (policy, jp.job.name)
    if held.empty or key not in held.index:
        return {c: float("nan") for c in HELD_OUT_COLUMNS}
    h = held.loc[key]
    errs = float(h["predicted_lojo_jct_s"]) / m["jct_s"] - 1
    return {**{c: float(h[c]) for c in HELD_OUT_COLUMNS if c in h.index},
            "error_lojo_median": float(errs.median()),
            "error_lojo_abs_median": float(errs.abs().median())}


def _kendall(a: Sequence[float], b: Sequence[float]) -> float:
    n, s = len(a), 0.0
    pairs = 0
    for i in range(n):
        for j in range(i + 1, n):
            s += float(np.sign(a[i] - a[j]) * np.sign(b[i] - b[j]))
            pairs += 1
    return s / pairs if pairs else float("nan")


def metrics(summary: pd.DataFrame, updates: pd.DataFrame) -> dict[str, float]:
    """Claimed numbers (``echelon_live.*``): per policy the mean JCT over jobs, per job
    its JCT relative to fair sharing, total tardiness, the simulator's median absolute
    error; overall the median error (and, where :func:`summarize` has it, the
    leave-one-job-out median error, overall and per held-out job), whether the
    simulator's ranking of policies (by mean JCT) holds live (Kendall's tau, best policy
    the same), and the controller's update latency.

    Parameters
    ----------
    summary : pandas.DataFrame
        :func:`summarize`'s table; empty: no metrics.
    updates : pandas.DataFrame
        :func:`analyse`'s ``updates`` table.

    Returns
    -------
    dict of str to float
        ``echelon_live.*``: seconds, ratios, percent (``_pct``), milliseconds (``_ms``),
        Kendall's tau in [-1, 1] and ``best_policy_same`` (1.0 or 0.0).
    """
    out: dict[str, float] = {}
    if summary.empty:
        return out
    mean_live = summary.groupby("policy", sort=False)["jct_s"].mean()
    mean_sim = summary.groupby("policy", sort=False)["predicted_jct_s"].mean()
    for policy, df in summary.groupby("policy", sort=False):
        out[f"echelon_live.{policy}.jct_mean_s"] = float(mean_live[policy])
        out[f"echelon_live.{policy}.tardiness_total_s"] = float(df["tardiness_s"].sum())
        out[f"echelon_live.{policy}.error_median_abs_pct"] = 100 * float(
            df["error_abs_median"].median())
        for _, row in df.iterrows():
            out[f"echelon_live.{policy}.{row['job']}.jct_s"] = float(row["jct_s"])
            fair = summary[(summary["policy"] == "fair") & (summary["job"] == row["job"])]
            if len(fair):
                out[f"echelon_live.{policy}.{row['job']}.jct_vs_fair"] = float(
                    row["jct_s"] / fair["jct_s"].iloc[0])
        if "fair" in mean_live.index:
            out[f"echelon_live.{policy}.jct_mean_vs_fair"] = float(
                mean_live[policy] / mean_live["fair"])
            fair_t = summary[summary["policy"] == "fair"]["tardiness_s"].sum()
            out[f"echelon_live.{policy}.tardiness_vs_fair"] = float(
                df["tardiness_s"].sum() / fair_t) if fair_t > 0 else float("nan")
    out["echelon_live.error_median_abs_pct"] = 100 * float(summary["error_abs_median"].median())
    out["echelon_live.error_fluid_median_abs_pct"] = 100 * float(
        summary["error_fluid_median"].abs().median())
    lojo = summary["error_lojo_abs_median"].dropna() if "error_lojo_abs_median" in summary \
        else pd.Series(dtype=float)
    if len(lojo):
        out["echelon_live.error_lojo_median_abs_pct"] = 100 * float(lojo.median())
        for job, df in summary.groupby("job", sort=False):
            out[f"echelon_live.{job}.error_lojo_median_abs_pct"] = 100 * float(
                df["error_lojo_abs_median"].median())
    out["echelon_live.ranking_kendall_tau"] = _kendall(list(mean_live), list(mean_sim))
    out["echelon_live.best_policy_same"] = float(mean_live.idxmin() == mean_sim.idxmin())
    lat = _controlled_latencies(updates)
    if len(lat):
        out["echelon_live.update_latency_median_ms"] = 1e3 * float(lat.median())
        out["echelon_live.update_latency_p95_ms"] = 1e3 * float(lat.quantile(0.95))
    return out


@dataclass(frozen=True)
class FigureConfig(driver.KindFigureConfig):
    """Parameters of ``notebooks/echelon_live.ipynb``, checked before plotting.

    ``figure`` and the checks: see :class:`~commsched.driver.KindFigureConfig`.

    Parameters
    ----------
    summary : str
        The summary table (:func:`summarize`).
    jobs : str
        The per-job table.
    kind : str
        The figure, one of :data:`FIGURE_KINDS` (default ``"jct"``).
    """

    summary: str
    jobs: str
    kind: str = "jct"
    WHAT: ClassVar[str] = "echelon_live"
    HINT: ClassVar[str] = "run rule echelon_live_run first"
    KINDS: ClassVar[tuple[str, ...]] = FIGURE_KINDS


def main(argv: Sequence[str] | None = None) -> int:
    """Run the live experiment (module docstring); one-line errors, exit 2.

    Parameters
    ----------
    argv : sequence of str, optional
        ``--config-json J --workdir DIR [--reuse]`` and one CSV per table and
        ``--metrics``; default ``sys.argv[1:]``.

    Returns
    -------
    int
        0 (also when skipped: the tables then say why), else 2 after one line: a config
        error, a failed live run, or ``--reuse`` without a ``run.json``; 130 when
        interrupted.
    """
    ap = driver.parser(__name__, __doc__)
    ap.add_argument("--config-json", required=True, help="the echelon_live config section")
    driver.add_workdir_options(ap, "worker configs, logs, records (run.json)")
    for name in (*TABLES, "metrics"):
        ap.add_argument(f"--{name}", required=True, help=f"{name} table (CSV) to write")
    args = ap.parse_args(argv)

    def body() -> None:
        raw = driver.config_section("echelon_live", args.config_json)
        params = Params.from_config(raw)
        reason = None if args.reuse else skipped_reason(params)
        if reason:
            driver.write_skipped("echelon_live", reason, [getattr(args, n) for n in TABLES],
                                 args.metrics, raw)
            return
        work = Path(args.workdir)
        if args.reuse:
            path = work / "run.json"
            if not path.is_file():
                raise CommschedError(f"--reuse: no finished run in {work}")
            run = json.loads(path.read_text())
        else:
            profiles = {}
            for jp in params.jobs:
                p = profile_compute(jp.job, params.profile_reps)
                profiles[jp.job.name] = {"fwd": list(p.fwd), "bwd": list(p.bwd)}
            run = run_live(params.jobs, params.policies, params.repeats,
                           (params.host_rate, params.core_rate), work, profiles,
                           launcher=params.launcher, backend=params.backend,
                           timeout=params.timeout_s, phase_timeout=params.phase_timeout_s)
        t = analyse(run)
        topo = run["topology"]
        s = summarize(params, t, float(run["core_Bps_measured"]),
                      parse_rate(topo["core_rate"]), parse_rate(topo["host_rate"]),
                      arranged_profiles(run))
        t["summary"] = s
        driver.write_outputs({getattr(args, n): t[n] for n in TABLES}, metrics(s, t["updates"]),
                             args.metrics, raw)
        print(s[["policy", "job", "jct_s", "predicted_jct_s", "error_median"]].to_string(
            index=False), file=sys.stderr)

    return driver.run_interruptible("echelon_live", body)


if __name__ == "__main__":
    sys.exit(main())

