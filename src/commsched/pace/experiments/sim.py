"""PACE Sec. VI in simulation: every all-reduce policy on traced models (Figs. 2, 8, 9, 10).

PACE (Bao, Peng, Chen, Wu; INFOCOM 2020) measures training speed on a GPU cluster with
W workers and ring all-reduce. We run the same comparison in the all-reduce simulator
(:mod:`commsched.pace.sim`) with every policy of the registry
(:data:`commsched.pace.baselines.POLICIES`) on our traces of the paper's four models.

=============  ==========================================================  ==================
experiment     what varies (everything else from the ``pace_sim:`` config)  table
=============  ==========================================================  ==================
``fig2``       Sec. II-C / Fig. 2: FIFO vs reordering vs preemption on a     pace_sim_fig2
               three-all-reduce instance (:func:`fig2_trace`)
``workers``    Fig. 8: workers, at ``workers.bandwidth_gbps``               pace_sim_workers
``bandwidth``  Fig. 9: link bandwidth, at ``bandwidth.n_workers``           pace_sim_bandwidth
``usage``      Fig. 10: outbound traffic of a worker in 5 ms bins           pace_sim_usage
``scale``      our sweep: GPU slowdown (compute time scale), i.e. the       pace_sim_scale
               communication / computation ratio
=============  ==========================================================  ==================

Setting (our choices; the paper's testbed is 1080 Ti GPUs and 25 GbE, shaped by tc):

* **Compute times.** Our traces are CPU traces (batch 2-4). Each model's compute is
  rescaled so that one training step without communication (forward + backward pass in the
  simulator, :attr:`commsched.pace.sim.Workload.compute_time`) takes
  ``gpu_slowdown * gpu_step_ms``: ``gpu_step_ms`` is the step time of the model on one
  H100 at the paper's batch (``../shared/FACTS.md``: VGG-16 batch 64: 52.1 ms, ResNet-50
  batch 32: 33.0 ms, Transformer batch 32 x 64 tokens = 2048 tokens: 47.6 ms; Seq2Seq has
  no measurement, our estimate is given in the config) and ``gpu_slowdown`` how much
  slower the paper's GTX 1080 Ti is (config; the ``scale`` experiment sweeps it). Op times
  keep their traced proportions.
* **All-reduce time.** Ring all-reduce, PACE Eq. (1) without the aggregation term plus a
  start-up: ``2(W-1) * latency_s + overhead_s + 2(W-1)/W * S / B``
  (:class:`commsched.cost.RingAllReduce` + ``overhead_s``). Without a start-up term
  fusing tensors could never pay off (Sec. II-C); ``latency_s`` per ring step is the
  10 GbE preset's 50 us (:data:`commsched.cost.PRESETS`), our assumption.
* **Compute resource.** ``compute_capacity`` ops at once: ``unbounded`` (default) is
  PACE's ideal compute (Sec. IV-A, constraint (5)), the model in which PACE's plans are
  optimal; 1 is one op at a time (one GPU stream).
* **PACE's slots.** 1 ms (config ``options.pace.slot_ms``; Sec. IV-A only asks for a
  slot no longer than the smallest fused all-reduce and names 5 ms as an example). The
  slotted schedule rounds each all-reduce up to whole slots and sizes partitions by slot
  shares, so the simulated plan drifts from the planned times; with 5 ms slots PACE's plan
  ran 888 ms per iteration against 827 ms with 1 ms slots on VGG-16 (12 workers, 10
  Gbit/s) when we chose.
* **Preemption is not free here.** Every partition is its own all-reduce and pays the
  start-up ``2(W-1) * latency_s`` in full; PACE's model (Sec. IV-A) charges an all-reduce
  ``ceil(g_i)`` slots however many pieces preemption cuts it into. So the simulated time of
  PACE's plan can exceed its own prediction (plan meta ``predicted_iter_s``, kept in the
  tables' ``info`` column), and where that happens a non-preemptive policy can beat it.
* **Speed** = ``W * batch / iteration time`` (samples/s; Sec. VI-B: images or tokens per
  second, the paper's Fig. 8 shows the total). The iteration time is the simulator's steady
  state. ``gain_pct`` of policy A over B = ``speed_A / speed_B - 1`` in percent. The
  paper's "Horovod" is the 64 MiB / 5 ms default of its time (``horovod-0.20``).
* **Fig. 10.** Outbound traffic of one worker: a partition of ``b`` bytes sends
  ``2(W-1)/W * b`` bytes at a constant rate over its duration
  (:meth:`~commsched.pace.sim.PlanRun.channel_usage`), tiled over ``iterations``
  steady-state iterations. An idle *valley* is a maximal period without any all-reduce
  (across the iteration boundary too).

Run as ``python -m commsched.pace.experiments.sim EXPERIMENT --config config/config.yaml
--table T.csv`` and ``... metrics --tables EXP=CSV ... --metrics M.csv``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np
import pandas as pd

from commsched.cost import LinearModel
from commsched.cost.allreduce import allreduce_model
from commsched.errors import CommschedError
from commsched.io.structured import read_yaml
from commsched.model.graph import add_op, new_graph
from commsched.model.traced import load_trace
from commsched.pace.baselines import POLICIES, PolicyContext, run_policy
from commsched.pace.plan import Group, Partition, Plan
from commsched.pace.sim import PlanRun, Workload
from commsched.plotting import check_figure_inputs
from commsched.results import read_table, write_metrics, write_table

__all__ = [
    "EXPERIMENTS",
    "FIGURE_KINDS",
    "FigureConfig",
    "ModelSpec",
    "Params",
    "fig2_plans",
    "fig2_trace",
    "headline_metrics",
    "idle_valleys",
    "main",
    "run_experiment",
    "run_fig2",
]

EXPERIMENTS = ("fig2", "workers", "bandwidth", "usage", "scale")
#: The paper's baselines (Sec. VI-B) and PACE; the claims compare these.
PAPER_POLICIES = ("wfbp", "horovod-0.20", "tictac", "pace")
#: "A few milliseconds" (Sec. VI-E, Fig. 10 valleys), our reading: at most one 5 ms bin.
FEW_MS = 5.0


def _need(m: Mapping[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    if not isinstance(m, Mapping) or key not in m:
        raise CommschedError(f"{where}: missing key {key!r}")
    v = m[key]
    if isinstance(v, bool) and kind is not bool:
        raise CommschedError(f"{where}.{key}: wrong type bool ({v!r})")
    if not isinstance(v, kind):
        raise CommschedError(f"{where}.{key}: wrong type {type(v).__name__} ({v!r})")
    return v


def _positive(m: Mapping[str, Any], key: str, where: str) -> float:
    v = float(_need(m, key, (int, float), where))
    if not (v > 0 and math.isfinite(v)):
        raise CommschedError(f"{where}.{key}: must be a number > 0, got {v!r}")
    return v


def _numbers(m: Mapping[str, Any], key: str, where: str, integer: bool = False
             ) -> tuple[float, ...]:
    v = _need(m, key, list, where)
    kind = int if integer else (int, float)
    if not v or not all(isinstance(x, kind) and not isinstance(x, bool) and x > 0 for x in v):
        raise CommschedError(f"{where}.{key}: must be a non-empty list of numbers > 0")
    return tuple(v)


@dataclass(frozen=True)
class ModelSpec:
    """One model of the study: its trace, the paper's batch and unit, the GPU step time."""

    name: str
    trace: str
    batch: int
    unit: str
    gpu_step_ms: float


@dataclass(frozen=True)
class Params:
    """The ``pace_sim:`` config section (schema: ``src/commsched/schemas/config.schema.yaml``)."""

    models: tuple[ModelSpec, ...]
    gpu_slowdown: float
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
    scale_slowdowns: tuple[float, ...]
    scale_policies: tuple[str, ...]
    raw: dict[str, Any] = field(compare=False, repr=False, default_factory=dict)

    @classmethod
    def from_mapping(cls, m: Mapping[str, Any], where: str = "pace_sim") -> Params:
        if not isinstance(m, Mapping):
            raise CommschedError(f"{where}: expected a mapping")
        models = []
        for k, spec in enumerate(_need(m, "models", list, where)):
            w = f"{where}.models[{k}]"
            models.append(ModelSpec(_need(spec, "name", str, w), _need(spec, "trace", str, w),
                                    int(_positive(spec, "batch", w)), _need(spec, "unit", str, w),
                                    _positive(spec, "gpu_step_ms", w)))
        if not models:
            raise CommschedError(f"{where}.models: must not be empty")

        def policies(names: Any, w: str) -> tuple[str, ...]:
            if not isinstance(names, list) or not names:
                raise CommschedError(f"{w}: must be a non-empty list of policy names")
            for n in names:
                if n not in POLICIES:
                    raise CommschedError(f"{w}: unknown policy {n!r} (known: "
                                         f"{', '.join(POLICIES)})")
            return tuple(names)

        cap = _need(m, "compute_capacity", (int, str), where)
        if (isinstance(cap, str) and cap != "unbounded") or (isinstance(cap, int) and cap < 1):
            raise CommschedError(f"{where}.compute_capacity: an integer >= 1 or 'unbounded', "
                                 f"got {cap!r}")
        lat = float(_need(m, "latency_s", (int, float), where))
        ovh = float(_need(m, "overhead_s", (int, float), where))
        if lat < 0 or ovh < 0:
            raise CommschedError(f"{where}: latency_s and overhead_s must be >= 0")
        options = _need(m, "options", dict, where)
        for name, opt in options.items():
            if name not in POLICIES or not isinstance(opt, dict):
                raise CommschedError(f"{where}.options.{name}: not a policy with a mapping")
        wk = _need(m, "workers", dict, where)
        bw = _need(m, "bandwidth", dict, where)
        us = _need(m, "usage", dict, where)
        sc = _need(m, "scale", dict, where)
        return cls(
            models=tuple(models),
            gpu_slowdown=_positive(m, "gpu_slowdown", where),
            compute_capacity=cap,
            latency_s=lat, overhead_s=ovh,
            policies=policies(_need(m, "policies", list, where), f"{where}.policies"),
            options={k: dict(v) for k, v in options.items()},
            workers_bandwidth_gbps=_positive(wk, "bandwidth_gbps", f"{where}.workers"),
            workers=tuple(int(x) for x in _numbers(wk, "n_workers", f"{where}.workers", True)),
            bandwidth_workers=int(_positive(bw, "n_workers", f"{where}.bandwidth")),
            bandwidths_gbps=_numbers(bw, "gbps", f"{where}.bandwidth"),
            usage_workers=int(_positive(us, "n_workers", f"{where}.usage")),
            usage_bandwidth_gbps=_positive(us, "bandwidth_gbps", f"{where}.usage"),
            usage_bin_ms=_positive(us, "bin_ms", f"{where}.usage"),
            usage_iterations=int(_positive(us, "iterations", f"{where}.usage")),
            usage_policies=policies(_need(us, "policies", list, f"{where}.usage"),
                                    f"{where}.usage.policies"),
            scale_workers=int(_positive(sc, "n_workers", f"{where}.scale")),
            scale_bandwidth_gbps=_positive(sc, "bandwidth_gbps", f"{where}.scale"),
            scale_slowdowns=_numbers(sc, "slowdowns", f"{where}.scale"),
            scale_policies=policies(_need(sc, "policies", list, f"{where}.scale"),
                                    f"{where}.scale.policies"),
            raw=dict(m),
        )

    @classmethod
    def from_file(cls, path: str | Path) -> Params:
        data = read_yaml(path)
        if not isinstance(data, dict) or "pace_sim" not in data:
            raise CommschedError(f"{path}: no 'pace_sim' section")
        return cls.from_mapping(data["pace_sim"], f"{path}: pace_sim")


# --- Fig. 2 -----------------------------------------------------------------------------


def fig2_trace() -> nx.DiGraph:
    """A traced iteration shaped like PACE's Fig. 1 DAG, with times chosen for Fig. 2.

    Forward: ``Mul`` (1 s) reads ``w3``, ``Add`` (2 s) reads ``w2`` after ``Mul``, ``ReLu``
    (2 s) reads ``w1`` after ``Add``. Backward: ``dReLu``, ``dAdd``, ``dMul`` (1 s each,
    a chain) output the gradients of ``w1`` (AR_1, 3 B), ``w2`` (AR_2, 2 B), ``w3`` (AR_3,
    1 B). With 1 s per byte (:func:`fig2_plans`) AR_1 is ready first and is the longest,
    so it blocks AR_2, and AR_3, needed first by the next forward pass, is ready last.
    """
    g = new_graph({"cpu": 1}, variables={
        v: {"bytes": b, "shape": [b], "dtype": "uint8", "trainable": True, "path": v}
        for v, b in (("w1", 3), ("w2", 2), ("w3", 1))},
        meta={"model": "pace_fig2", "mode": "train", "batch": 1, "iterations": 1})

    def op(name: str, d: float, **kw: Any) -> None:
        add_op(g, name, "compute", "cpu", d, op_type="Op", samples=[d], out_bytes=4,
               is_gradient=kw.pop("is_gradient", False), **kw)

    for v in ("w1", "w2", "w3"):
        op(f"read_{v}", 0.0, reads=[v])
    op("mul", 1.0)
    op("add", 2.0)
    op("relu", 2.0)
    op("d_relu", 1.0, is_gradient=True, grad_of=["w1"])
    op("d_add", 1.0, is_gradient=True, grad_of=["w2"])
    op("d_mul", 1.0, is_gradient=True, grad_of=["w3"])
    for u, v in [("read_w3", "mul"), ("mul", "add"), ("read_w2", "add"), ("add", "relu"),
                 ("read_w1", "relu"), ("relu", "d_relu"), ("d_relu", "d_add"),
                 ("d_add", "d_mul")]:
        g.add_edge(u, v, control=False, bytes=4)
    return g


#: The cost model of the Fig. 2 instance: 1 s per byte, no start-up.
FIG2_MODEL = LinearModel(0.0, 1.0)


def fig2_plans() -> dict[str, Plan]:
    """Fig. 2's three strategies on :func:`fig2_trace`.

    ``fifo``: whole tensors in ready order. ``reorder``: whole tensors, AR_3 before AR_2
    before AR_1. ``preempt``: AR_1 split so that its first part ends when AR_2 is ready
    (1 B), AR_2 split so that its first part ends when AR_3 is ready (1 B); then AR_3, the
    rest of AR_2, the rest of AR_1 (Sec. II-C).
    """
    def whole(v: str, b: int, p: int) -> Group:
        return Group(((v, b),), (Partition(0, b, p),))

    return {
        "fifo": Plan("fifo", (whole("w1", 3, 0), whole("w2", 2, 1), whole("w3", 1, 2))),
        "reorder": Plan("reorder", (whole("w1", 3, 2), whole("w2", 2, 1), whole("w3", 1, 0))),
        "preempt": Plan("preempt", (
            Group((("w1", 3),), (Partition(0, 1, 0), Partition(1, 2, 4))),
            Group((("w2", 2),), (Partition(0, 1, 1), Partition(1, 1, 3))),
            whole("w3", 1, 2))),
    }


def run_fig2() -> pd.DataFrame:
    """Iteration time of Fig. 2's strategies and of PACE's own plan (1 s slots)."""
    t = fig2_trace()
    w = Workload(t)
    rows = []
    plans = fig2_plans()
    d, _ = run_policy("pace", PolicyContext(w, FIG2_MODEL, t, options={"slot_ms": 1000.0}))
    plans["pace"] = d.plan
    for name, plan in plans.items():
        r = w.simulate(plan, FIG2_MODEL)
        rows.append({"strategy": name, "iteration_time_s": r.iteration_time,
                     "partitions": len(r.partitions),
                     "order": " ".join(f"{p.tensors[0]}[{p.start:g},{p.end:g}]"
                                       for p in r.partitions)})
    df = pd.DataFrame(rows)
    fifo = float(df.loc[df.strategy == "fifo", "iteration_time_s"].iloc[0])
    df["reduction_pct"] = (1.0 - df.iteration_time_s / fifo) * 100.0
    return df


# --- the sweeps -------------------------------------------------------------------------


@dataclass
class Model:
    """A traced model of the study with its unscaled compute time."""

    spec: ModelSpec
    trace: nx.DiGraph
    compute_s: float
    _workloads: dict[float, Workload] = field(default_factory=dict, repr=False)

    def workload(self, params: Params, slowdown: float) -> Workload:
        """The workload with compute scaled to ``slowdown * gpu_step_ms`` (cached)."""
        if slowdown not in self._workloads:
            scale = slowdown * self.spec.gpu_step_ms / 1e3 / self.compute_s
            self._workloads[slowdown] = Workload(self.trace, scale,
                                                 params.compute_capacity)
        return self._workloads[slowdown]


def load_models(params: Params, trace_dir: str,
                files: Sequence[str] | None = None) -> list[Model]:
    """The config's traced models (``<trace_dir>/<trace>.json.gz``, or the file of that
    name among ``files``), each with its unscaled compute time."""
    given = {Path(f).name.removesuffix(".gz").removesuffix(".json"): f for f in files or []}
    out = []
    for spec in params.models:
        if files is not None and spec.trace not in given:
            raise CommschedError(f"--traces: no file for trace {spec.trace!r}")
        t = load_trace(given.get(spec.trace) or Path(trace_dir) / f"{spec.trace}.json.gz")
        base = Workload(t, 1.0, params.compute_capacity)
        out.append(Model(spec, t, base.compute_time))
    return out


def _row(model: Model, params: Params, policy: str, n_workers: int, gbps: float,
         slowdown: float, run: PlanRun, info: Mapping[str, Any], w: Workload) -> dict[str, Any]:
    return {
        "model": model.spec.name, "trace": model.spec.trace, "policy": policy,
        "n_workers": n_workers, "bandwidth_gbps": gbps, "gpu_slowdown": slowdown,
        "batch": model.spec.batch, "unit": model.spec.unit,
        "compute_s": w.compute_time, "iteration_s": run.iteration_time,
        "comm_s": run.comm_time, "partitions": len(run.partitions),
        "speed": n_workers * model.spec.batch / run.iteration_time,
        "info": json.dumps(dict(info), sort_keys=True, default=str),
    }


def _setting(model: Model, params: Params, n_workers: int, gbps: float, slowdown: float,
             policies: Sequence[str]) -> list[dict[str, Any]]:
    w = model.workload(params, slowdown)
    cost = allreduce_model(n_workers, gbps, params.latency_s, params.overhead_s)
    rows = []
    for policy in policies:
        ctx = PolicyContext(w, cost, model.trace, n_workers, gbps * 1e9 / 8,
                            params.options.get(policy, {}))
        d, r = run_policy(policy, ctx)
        rows.append(_row(model, params, policy, n_workers, gbps, slowdown, r, d.info, w))
    return rows


def _add_gains(df: pd.DataFrame) -> pd.DataFrame:
    keys = ["model", "n_workers", "bandwidth_gbps", "gpu_slowdown"]
    pace = df[df.policy == "pace"].set_index(keys)["speed"]
    idx = df.set_index(keys).index
    df = df.copy()
    df["pace_gain_pct"] = (np.asarray(idx.map(pace)) / df["speed"].to_numpy() - 1.0) * 100.0
    return df


def idle_valleys(run: PlanRun) -> list[float]:
    """Lengths (s) of the channel's idle periods in one steady-state iteration, the one
    across the iteration boundary included (module docstring)."""
    parts = sorted(run.partitions, key=lambda p: p.start)
    if not parts:
        return [run.iteration_time]
    gaps = [b.start - a.end for a, b in itertools.pairwise(parts)]
    wrap = run.iteration_time - (parts[-1].end - parts[0].start)
    return [g for g in [*gaps, wrap] if g > 1e-12]


def run_usage(models: Sequence[Model], params: Params) -> pd.DataFrame:
    """Fig. 10: a worker's outbound traffic per bin over ``usage.iterations`` iterations."""
    rows = []
    n, gbps = params.usage_workers, params.usage_bandwidth_gbps
    cost = allreduce_model(n, gbps, params.latency_s, params.overhead_s)
    bin_s = params.usage_bin_ms / 1e3
    for model in models:
        w = model.workload(params, params.gpu_slowdown)
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
    """The table of ``workers``, ``bandwidth``, ``usage`` or ``scale``."""
    if experiment == "usage":
        return run_usage(models, params)
    if experiment == "workers":
        settings = [(n, params.workers_bandwidth_gbps, params.gpu_slowdown)
                    for n in params.workers]
        policies = params.policies
    elif experiment == "bandwidth":
        settings = [(params.bandwidth_workers, b, params.gpu_slowdown)
                    for b in params.bandwidths_gbps]
        policies = params.policies
    elif experiment == "scale":
        settings = [(params.scale_workers, params.scale_bandwidth_gbps, s)
                    for s in params.scale_slowdowns]
        policies = params.scale_policies
    else:
        raise CommschedError(f"unknown experiment {experiment!r} (one of "
                             f"{', '.join(EXPERIMENTS)})")
    if "pace" not in policies:
        policies = (*policies, "pace")
    rows: list[dict[str, Any]] = []
    for model in models:
        for n, gbps, slowdown in settings:
            t0 = time.perf_counter()
            rows.extend(_setting(model, params, n, gbps, slowdown, policies))
            if progress:
                progress(f"{experiment}: {model.spec.name} W={n} {gbps:g} Gbit/s "
                         f"x{slowdown:g}: {time.perf_counter() - t0:.1f} s")
    return _add_gains(pd.DataFrame(rows))


# --- metrics ----------------------------------------------------------------------------


def _gain(df: pd.DataFrame, model: str, over: str, **where: float) -> float:
    d = df[(df.model == model) & (df.policy == over)]
    for k, v in where.items():
        d = d[np.isclose(d[k], v)]
    if d.empty:
        return math.nan
    return float(d.pace_gain_pct.mean())


def headline_metrics(tables: Mapping[str, pd.DataFrame]) -> dict[str, float]:
    """The numbers the claims compare (``pace_sim.*``), from the experiment tables.

    * ``fig2.<strategy>_reduction_pct``: iteration time reduction over FIFO.
    * ``workers.<model>.gain_vs_<policy>_pct``: PACE's speed gain over a policy at the
      Fig. 8 bandwidth, averaged over the worker counts; ``workers.gain_vs_<policy>_{min,
      max}_pct``: the smallest and largest of these over the models (the paper's ranges).
    * ``bandwidth.<model>.gain_vs_<policy>_<B>gbps_pct``: at each bandwidth of Fig. 9.
    * ``bandwidth.<model>.<policy>_bw95_gbps``: the smallest bandwidth where the policy
      reaches 95% of its highest speed in the sweep ("speed stable above"); ``bandwidth.
      pace_bw95_max_gbps`` the largest over the models.
    * ``bandwidth.low_bw_spread_max_pct``: at the lowest bandwidth, the largest relative
      spread (max/min - 1) of the paper's four policies' speeds over the models.
    * ``workers.pace_scaling_min``: over the models, the smallest ratio of PACE's speed per
      worker at the most workers to that at the fewest (1 = linear scaling, Fig. 8).
    * ``bandwidth.pace_earliest_bw95_frac``: the share of models where PACE's ``bw95`` is
      at or below that of every other paper baseline (ties count).
    * ``usage.<model>.<policy>_longest_valley_ms`` (Fig. 10); ``usage.pace_valley_few_ms_
      frac``: the share of models whose longest PACE valley is at most :data:`FEW_MS`;
      ``usage.pace_shorter_valley_frac``: the share where it is shorter than Horovod's.
    * ``scale.<model>.gain_vs_<policy>_x<s>_pct``.
    """
    out: dict[str, float] = {}
    if "fig2" in tables:
        for _, r in tables["fig2"].iterrows():
            out[f"pace_sim.fig2.{r.strategy}_reduction_pct"] = float(r.reduction_pct)
    base = [p for p in PAPER_POLICIES if p != "pace"]
    if "workers" in tables:
        df = tables["workers"]
        for policy in sorted(set(df.policy) - {"pace"}):
            gains = []
            for model in sorted(set(df.model)):
                g = _gain(df, model, policy)
                out[f"pace_sim.workers.{model}.gain_vs_{policy}_pct"] = g
                gains.append(g)
            out[f"pace_sim.workers.gain_vs_{policy}_min_pct"] = float(np.nanmin(gains))
            out[f"pace_sim.workers.gain_vs_{policy}_max_pct"] = float(np.nanmax(gains))
        eff = []
        for _, d in df[df.policy == "pace"].groupby("model"):
            lo, hi = d.loc[d.n_workers.idxmin()], d.loc[d.n_workers.idxmax()]
            eff.append((hi.speed / hi.n_workers) / (lo.speed / lo.n_workers))
        out["pace_sim.workers.pace_scaling_min"] = float(min(eff))
    if "bandwidth" in tables:
        df = tables["bandwidth"]
        bw95 = []
        earliest = []
        for model in sorted(set(df.model)):
            for policy in sorted(set(df.policy)):
                d = df[(df.model == model) & (df.policy == policy)].sort_values(
                    "bandwidth_gbps")
                if policy != "pace":
                    for b, g in zip(d.bandwidth_gbps, d.pace_gain_pct, strict=True):
                        out[f"pace_sim.bandwidth.{model}.gain_vs_{policy}_{b:g}gbps_pct"] = \
                            float(g)
                top = d.speed.max()
                b95 = float(d[d.speed >= 0.95 * top].bandwidth_gbps.min())
                out[f"pace_sim.bandwidth.{model}.{policy}_bw95_gbps"] = b95
                if policy == "pace":
                    bw95.append(b95)
            others = [out[f"pace_sim.bandwidth.{model}.{p}_bw95_gbps"] for p in base
                      if p in set(df.policy)]
            earliest.append(bw95[-1] <= min(others, default=math.inf))
        out["pace_sim.bandwidth.pace_bw95_max_gbps"] = float(max(bw95))
        out["pace_sim.bandwidth.pace_earliest_bw95_frac"] = float(np.mean(earliest))
        low = df[np.isclose(df.bandwidth_gbps, df.bandwidth_gbps.min())
                 & df.policy.isin(PAPER_POLICIES)]
        spread = low.groupby("model").speed.agg(lambda s: s.max() / s.min() - 1.0) * 100
        out["pace_sim.bandwidth.low_bw_gbps"] = float(df.bandwidth_gbps.min())
        out["pace_sim.bandwidth.low_bw_spread_max_pct"] = float(spread.max())
    if "usage" in tables:
        df = tables["usage"]
        for (model, policy), d in df.groupby(["model", "policy"]):
            out[f"pace_sim.usage.{model}.{policy}_longest_valley_ms"] = float(
                d.longest_valley_ms.iloc[0])
        valley = df.groupby(["model", "policy"]).longest_valley_ms.first()
        models = sorted(set(df.model))
        if "pace" in set(df.policy):
            few = [valley[(m, "pace")] <= FEW_MS for m in models]
            out["pace_sim.usage.pace_valley_few_ms_frac"] = float(np.mean(few))
        if {"pace", "horovod-0.20"} <= set(df.policy):
            shorter = [valley[(m, "pace")] < valley[(m, "horovod-0.20")] for m in models]
            out["pace_sim.usage.pace_shorter_valley_frac"] = float(np.mean(shorter))
    if "scale" in tables:
        df = tables["scale"]
        for model in sorted(set(df.model)):
            for s in sorted(set(df.gpu_slowdown)):
                for policy in base:
                    out[f"pace_sim.scale.{model}.gain_vs_{policy}_x{s:g}_pct"] = _gain(
                        df, model, policy, gpu_slowdown=s)
    return out


# --- notebooks --------------------------------------------------------------------------

#: Figures the notebooks draw (``kind`` of :class:`FigureConfig`).
FIGURE_KINDS = ("workers", "bandwidth", "usage", "scale")


@dataclass(frozen=True)
class FigureConfig:
    """Parameters of the ``notebooks/pace_*.ipynb`` notebooks, checked before plotting."""

    table: str
    figure: str  # the PDF; the PNG is written beside it
    kind: str = "workers"

    def __post_init__(self) -> None:
        check_figure_inputs("pace_sim", {"table": self.table}, self.figure,
                            "run its snakemake rule first")
        if self.kind not in FIGURE_KINDS:
            raise CommschedError(f"pace_sim figure: kind {self.kind!r} is not one of "
                                 f"{', '.join(FIGURE_KINDS)}")


def _params(args: argparse.Namespace) -> Params:
    if args.config_json is not None:
        try:
            data = json.loads(args.config_json)
        except json.JSONDecodeError as e:
            raise CommschedError(f"--config-json: invalid JSON: {e.msg}") from None
        return Params.from_mapping(data)
    return Params.from_file(args.config)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m commsched.pace.experiments.sim",
                                description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("experiment", choices=[*EXPERIMENTS, "metrics"])
    src = p.add_mutually_exclusive_group()
    src.add_argument("--config", default="config/config.yaml",
                     help="config file with a 'pace_sim' section (default %(default)s)")
    src.add_argument("--config-json", help="the 'pace_sim' section as a JSON object")
    p.add_argument("--trace-dir", default="data/traces",
                   help="where the config's traces live (default %(default)s)")
    p.add_argument("--traces", nargs="+", help="trace files (named <trace>.json.gz) instead "
                   "of --trace-dir")
    p.add_argument("--table", help="result table to write (CSV)")
    p.add_argument("--tables", nargs="+", metavar="EXPERIMENT=CSV",
                   help="metrics: the experiment tables to summarize")
    p.add_argument("--metrics", help="metrics: the metrics table to write (CSV)")
    args = p.parse_args(argv)

    def say(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    try:
        if args.experiment == "metrics":
            if not args.tables or not args.metrics:
                raise CommschedError("metrics needs --tables EXPERIMENT=CSV ... and --metrics")
            tables = {}
            for item in args.tables:
                exp, sep, path = item.partition("=")
                if not sep or exp not in EXPERIMENTS:
                    raise CommschedError(f"--tables: expected EXPERIMENT=CSV, got {item!r}")
                tables[exp] = read_table(path)
            write_metrics(headline_metrics(tables), args.metrics, {"tables": args.tables})
            return 0
        if not args.table:
            raise CommschedError(f"{args.experiment} needs --table")
        if args.experiment == "fig2":
            write_table(run_fig2(), args.table, {"experiment": "fig2"})
            return 0
        params = _params(args)
        models = load_models(params, args.trace_dir, args.traces)
        df = run_experiment(args.experiment, models, params, progress=say)
        write_table(df, args.table, {**params.raw, "experiment": args.experiment})
    except CommschedError as e:
        print(f"pace_sim {args.experiment}: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
