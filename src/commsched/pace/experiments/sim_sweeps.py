"""The sweeps of PACE Sec. VI in simulation: every all-reduce policy on traced models.

The setting (compute times, all-reduce cost, compute resource, PACE's slots, speed) is
described in :mod:`commsched.pace.experiments.sim`, the driver that runs these sweeps.
:class:`Params` is its config section ``pace_sim``, :func:`load_models` prepares the
traced models, :func:`run_experiment` runs one sweep (Figs. 8, 9 and our compute-scale
sweep) and :func:`run_usage` the channel's traffic (Fig. 10).
"""

from __future__ import annotations

import itertools
import json
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np
import pandas as pd

from commsched import driver
from commsched.cost.allreduce import allreduce_model
from commsched.errors import CommschedError
from commsched.model.traced import load_trace
from commsched.pace.baselines import PolicyContext
from commsched.pace.experiments.calibration import load_calibration
from commsched.pace.planrun import PlanRun
from commsched.pace.policies import run_policy
from commsched.pace.sim import Workload

__all__ = [
    "SWEEPS",
    "Model",
    "ModelSpec",
    "Params",
    "idle_valleys",
    "load_models",
    "run_experiment",
    "run_usage",
]

#: The experiments that sweep a setting over the models and policies (Fig. 2 is its own:
#: :mod:`commsched.pace.experiments.fig2`).
SWEEPS = ("workers", "bandwidth", "usage", "scale")


@dataclass(frozen=True)
class ModelSpec:
    """One model of the study (an entry of ``pace_sim.models``).

    Parameters
    ----------
    name : str
        The paper's name of the model (``vgg16``), used in tables and metrics.
    trace : str
        Our trace of it (``data/traces/<trace>.json.gz``).
    batch : int
        The paper's batch per worker (Sec. VI-A), in ``unit``.
    unit : str
        What a sample is (``images``, ``tokens``).
    """

    name: str
    trace: str
    batch: int
    unit: str


@dataclass(frozen=True)
class Params(driver.SectionParams):
    """The ``pace_sim:`` config section (schema: ``src/commsched/schemas/config.schema.yaml``).

    Build it with :meth:`from_mapping` (from a file: :meth:`from_file`),
    which checks the section against the schema (:func:`commsched.driver.config_section`).

    Parameters
    ----------
    models : tuple of ModelSpec
        ``models``.
    calibration, compute_capacity, latency_s, overhead_s, policies, options
        The section's keys of these names (``config/config.yaml`` explains each;
        ``calibration`` is the table of :func:`~.calibration.load_calibration`).
    workers_bandwidth_gbps, workers
        Sub-section ``workers`` (Fig. 8): ``bandwidth_gbps``, ``n_workers``.
    bandwidth_workers, bandwidths_gbps
        Sub-section ``bandwidth`` (Fig. 9): ``n_workers``, ``gbps``.
    usage_workers, usage_bandwidth_gbps, usage_bin_ms, usage_iterations, usage_policies
        Sub-section ``usage`` (Fig. 10).
    scale_workers, scale_bandwidth_gbps, scale_compute_factors, scale_policies
        Sub-section ``scale`` (our compute-scale sweep: ``compute_factors`` multiply every
        model's calibrated compute time).
    raw : dict
        The section as given (recorded in the tables' provenance).
    """

    models: tuple[ModelSpec, ...]
    calibration: str
    compute_capacity: int | str  # an integer or 'unbounded' (pace.sim.compute_slots)
    latency_s: float
    overhead_s: float
    policies: tuple[str, ...]
    options: Mapping[str, Mapping[str, Any]]
    workers_bandwidth_gbps: float
    workers: tuple[int, ...]
    bandwidth_workers: int
    bandwidths_gbps: tuple[float, ...]
    usage_workers: int
    usage_bandwidth_gbps: float
    usage_bin_ms: float
    usage_iterations: int
    usage_policies: tuple[str, ...]
    scale_workers: int
    scale_bandwidth_gbps: float
    scale_compute_factors: tuple[float, ...]
    scale_policies: tuple[str, ...]
    SECTION = "pace_sim"

    @classmethod
    def _fields(cls, m: dict[str, Any]) -> dict[str, Any]:
        wk, bw, us, sc = m["workers"], m["bandwidth"], m["usage"], m["scale"]
        return dict(
            models=tuple(ModelSpec(x["name"], x["trace"], x["batch"], x["unit"])
                         for x in m["models"]),
            calibration=str(m["calibration"]),
            compute_capacity=m["compute_capacity"],
            latency_s=float(m["latency_s"]), overhead_s=float(m["overhead_s"]),
            policies=tuple(m["policies"]),
            options={k: dict(v) for k, v in m["options"].items()},
            workers_bandwidth_gbps=float(wk["bandwidth_gbps"]),
            workers=tuple(wk["n_workers"]),
            bandwidth_workers=bw["n_workers"],
            bandwidths_gbps=tuple(bw["gbps"]),
            usage_workers=us["n_workers"],
            usage_bandwidth_gbps=float(us["bandwidth_gbps"]),
            usage_bin_ms=float(us["bin_ms"]),
            usage_iterations=us["iterations"],
            usage_policies=tuple(us["policies"]),
            scale_workers=sc["n_workers"],
            scale_bandwidth_gbps=float(sc["bandwidth_gbps"]),
            scale_compute_factors=tuple(float(f) for f in sc["compute_factors"]),
            scale_policies=tuple(sc["policies"]),
        )


@dataclass
class Model:
    """A traced model of the study with its unscaled and its calibrated compute time.

    Parameters
    ----------
    spec : ModelSpec
        The config's entry.
    trace : networkx.DiGraph
        Its traced training iteration.
    compute_s : float
        The trace's compute time (:attr:`commsched.pace.sim.Workload.compute_time` at
        compute scale 1).
    step_s : float
        One iteration without communication on a GTX 1080 Ti at the paper's batch (the
        calibration table, :func:`~.calibration.load_calibration`).
    """

    spec: ModelSpec
    trace: nx.DiGraph
    compute_s: float
    step_s: float
    _workloads: dict[float, Workload] = field(default_factory=dict, repr=False)

    @property
    def scale(self) -> float:
        """The model's compute scale: ``step_s / compute_s`` (op times keep their
        traced proportions)."""
        return self.step_s / self.compute_s

    def workload(self, params: Params, factor: float = 1.0) -> Workload:
        """The workload with compute scaled to ``factor * step_s`` (cached).

        Parameters
        ----------
        params : Params
            The study (its ``compute_capacity``).
        factor : float
            Multiple of the calibrated compute time (1: a GTX 1080 Ti; the ``scale``
            experiment sweeps it).

        Returns
        -------
        Workload
            The prepared iteration whose compute time is ``factor * step_s``.
        """
        if factor not in self._workloads:
            self._workloads[factor] = Workload(self.trace, factor * self.scale,
                                               params.compute_capacity)
        return self._workloads[factor]


def load_models(params: Params, trace_dir: str,
                files: Sequence[str] | None = None) -> list[Model]:
    """The config's traced models, each with its unscaled and calibrated compute time.

    Parameters
    ----------
    params : Params
        The study.
    trace_dir : str
        Where ``<trace>.json.gz`` of every model lives.
    files : sequence of str, optional
        The trace files instead (named ``<trace>.json.gz``).

    Returns
    -------
    list of Model
        In the config's order.

    Raises
    ------
    CommschedError
        If ``files`` lacks a model's trace, a trace cannot be read, or the calibration
        table (``params.calibration``) is unreadable, lacks a model or gives it another
        batch than the config.
    """
    calib = load_calibration(params.calibration)
    given = {Path(f).name.removesuffix(".gz").removesuffix(".json"): f for f in files or []}
    out = []
    for spec in params.models:
        c = calib.get(spec.name)
        if c is None:
            raise CommschedError(f"{params.calibration}: no row for model {spec.name!r}")
        if c.batch != spec.batch:
            raise CommschedError(f"{params.calibration}: {spec.name} is calibrated at batch "
                                 f"{c.batch}, the config's batch is {spec.batch}")
        if files is not None and spec.trace not in given:
            raise CommschedError(f"--traces: no file for trace {spec.trace!r}")
        t = load_trace(given.get(spec.trace) or driver.trace_file(trace_dir, spec.trace))
        base = Workload(t, 1.0, params.compute_capacity)
        out.append(Model(spec, t, base.compute_time, c.step_s))
    return out


def _row(model: Model, params: Params, policy: str, n_workers: int, gbps: float,
         factor: float, run: PlanRun, info: Mapping[str, Any], w: Workload) -> dict[str, Any]:
    return {
        "model": model.spec.name, "trace": model.spec.trace, "policy": policy,
        "n_workers": n_workers, "bandwidth_gbps": gbps, "compute_factor": factor,
        "compute_scale": factor * model.scale,
        "batch": model.spec.batch, "unit": model.spec.unit,
        "compute_s": w.compute_time, "iteration_s": run.iteration_time,
        "comm_s": run.comm_time, "partitions": len(run.partitions),
        "speed": n_workers * model.spec.batch / run.iteration_time,
        "info": json.dumps(dict(info), sort_keys=True, default=str),
    }


def _setting(model: Model, params: Params, n_workers: int, gbps: float, factor: float,
             policies: Sequence[str]) -> list[dict[str, Any]]:
    w = model.workload(params, factor)
    cost = allreduce_model(n_workers, gbps, params.latency_s, params.overhead_s)
    rows = []
    for policy in policies:
        ctx = PolicyContext(w, cost, model.trace, n_workers, gbps * 1e9 / 8,
                            params.options.get(policy, {}))
        d, r = run_policy(policy, ctx)
        rows.append(_row(model, params, policy, n_workers, gbps, factor, r, d.info, w))
    return rows


def _add_gains(df: pd.DataFrame) -> pd.DataFrame:
    keys = ["model", "n_workers", "bandwidth_gbps", "compute_factor"]
    pace = df[df.policy == "pace"].set_index(keys)["speed"]
    idx = df.set_index(keys).index
    df = df.copy()
    df["pace_gain_pct"] = (np.asarray(idx.map(pace)) / df["speed"].to_numpy() - 1.0) * 100.0
    return df


def idle_valleys(run: PlanRun) -> list[float]:
    """Lengths of the channel's idle periods in one steady-state iteration.

    Parameters
    ----------
    run : PlanRun
        A simulated iteration.

    Returns
    -------
    list of float
        Every idle period (s), the one across the iteration boundary included (module
        docstring, "Fig. 10"); the whole iteration if nothing is all-reduced.

    References
    ----------
    PACE (Bao et al., INFOCOM 2020), Sec. VI-E and Fig. 10 (valleys of a worker's
    outbound traffic).
    """
    parts = sorted(run.partitions, key=lambda p: p.start)
    if not parts:
        return [run.iteration_time]
    gaps = [b.start - a.end for a, b in itertools.pairwise(parts)]
    wrap = run.iteration_time - (parts[-1].end - parts[0].start)
    return [g for g in [*gaps, wrap] if g > 1e-12]


def run_usage(models: Sequence[Model], params: Params) -> pd.DataFrame:
    """A worker's outbound traffic per bin over ``usage.iterations`` iterations.

    Parameters
    ----------
    models : sequence of Model
        The study's models.
    params : Params
        The study (sub-section ``usage``).

    Returns
    -------
    pandas.DataFrame
        One row per model, policy and bin: busy fraction, Gbit/s, the iteration time and
        the longest idle valley (:func:`idle_valleys`).

    References
    ----------
    PACE (Bao et al., INFOCOM 2020), Sec. VI-E and Fig. 10.
    """
    rows = []
    n, gbps = params.usage_workers, params.usage_bandwidth_gbps
    cost = allreduce_model(n, gbps, params.latency_s, params.overhead_s)
    bin_s = params.usage_bin_ms / 1e3
    for model in models:
        w = model.workload(params)
        for policy in params.usage_policies:
            ctx = PolicyContext(w, cost, model.trace, n, gbps * 1e9 / 8,
                                params.options.get(policy, {}))
            _, r = run_policy(policy, ctx)
            # tile the iteration: shift its partitions by whole iterations, re-bin
            period = r.iteration_time
            k = max(1, math.ceil(params.usage_iterations * period / bin_s))
            busy = np.zeros(k)
            wire = np.zeros(k)
            edges = bin_s * np.arange(k + 1)
            off = r.forward_time
            for it in range(params.usage_iterations + 1):
                for p in r.partitions:
                    s, e = p.start - off + it * period, p.end - off + it * period
                    if e <= s:
                        continue
                    lo = np.clip(edges[:-1], s, e)
                    hi = np.clip(edges[1:], s, e)
                    busy += (hi - lo) / bin_s
                    wire += (hi - lo) / (e - s) * 2 * (n - 1) / n * p.bytes
            valleys = idle_valleys(r)
            for b in range(k):
                rows.append({"model": model.spec.name, "policy": policy, "n_workers": n,
                             "bandwidth_gbps": gbps, "bin_ms": params.usage_bin_ms,
                             "t_ms": edges[b] * 1e3, "busy": busy[b],
                             "gbps": wire[b] * 8 / bin_s / 1e9,
                             "iteration_s": period,
                             "longest_valley_ms": max(valleys, default=0.0) * 1e3})
    return pd.DataFrame(rows)


def run_experiment(experiment: str, models: Sequence[Model], params: Params,
                   progress: Callable[[str], None] | None = None) -> pd.DataFrame:
    """The table of one experiment (module docstring).

    Parameters
    ----------
    experiment : {"workers", "bandwidth", "usage", "scale"}
        Which sweep (``fig2`` is :func:`commsched.pace.experiments.fig2.run_fig2`).
    models : sequence of Model
        The study's models.
    params : Params
        The study.
    progress : callable, optional
        Called with one line after every setting.

    Returns
    -------
    pandas.DataFrame
        One row per model, setting and policy (PACE always included): iteration, compute
        and communication time, speed and PACE's gain over the policy (``pace_gain_pct``);
        for ``usage``, :func:`run_usage`'s table.

    Raises
    ------
    CommschedError
        If ``experiment`` is unknown or a policy rejects its options.

    References
    ----------
    PACE (Bao et al., INFOCOM 2020), Sec. VI-B to VI-E, Figs. 8 (workers), 9 (bandwidth)
    and 10 (usage).
    """
    if experiment == "usage":
        return run_usage(models, params)
    if experiment == "workers":
        settings = [(n, params.workers_bandwidth_gbps, 1.0) for n in params.workers]
        policies = params.policies
    elif experiment == "bandwidth":
        settings = [(params.bandwidth_workers, b, 1.0) for b in params.bandwidths_gbps]
        policies = params.policies
    elif experiment == "scale":
        settings = [(params.scale_workers, params.scale_bandwidth_gbps, s)
                    for s in params.scale_compute_factors]
        policies = params.scale_policies
    else:
        raise CommschedError(f"unknown experiment {experiment!r} (one of "
                             f"{', '.join(SWEEPS)})")
    if "pace" not in policies:
        policies = (*policies, "pace")
    rows: list[dict[str, Any]] = []
    for model in models:
        for n, gbps, factor in settings:
            t0 = time.perf_counter()
            rows.extend(_setting(model, params, n, gbps, factor, policies))
            if progress:
                progress(f"{experiment}: {model.spec.name} W={n} {gbps:g} Gbit/s "
                         f"x{factor:g}: {time.perf_counter() - t0:.1f} s")
    return _add_gains(pd.DataFrame(rows))
