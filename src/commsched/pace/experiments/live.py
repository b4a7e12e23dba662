"""Live all-reduce scheduling: PACE and its baselines enforced in PyTorch data-parallel
training on the emulated cluster, with the simulator's prediction beside each measurement.

PACE (Bao, Peng, Chen, Wu; INFOCOM 2020) measured its plans in Horovod + MXNet on a GPU
cluster (Sec. VI). This driver runs the same comparison in PyTorch
(:mod:`commsched.pace.live.ddp`) on an emulated cluster (:mod:`commsched.cluster`: one
network namespace per worker, every link shaped with ``tbf`` to the model's bandwidth; gloo
over the shaped links), ``n_workers`` workers each pinned to one core with one thread.

For every configured model (``pace_live.models``: a committed PyTorch CPU trace, its batch
and input size, and a link rate at which communication is comparable to computation):

1. **Plans** (:func:`make_plans`). From the trace, with :mod:`commsched.pace.baselines`
   and the ring all-reduce cost model of the link (:func:`cost_model`): ``wfbp``,
   ``ddp_buckets`` (DDP's buckets run by the plan executor), ``horovod`` (units = WFBP's
   tensors, fused at run time every ``cycle_s`` up to ``threshold_bytes``), ``pace``
   (Alg. 1 + the optimal preemptive schedule) and, optionally, ``plan`` (the user's plan
   file, ``pace_live.plan_file``). ``ddp`` is PyTorch DDP itself.
2. **Live run.** All policies, one after the other in the same worker processes
   (``warmup`` + ``iterations`` steps each), plus :data:`commsched.pace.live.ddp.NO_COMM`:
   local steps without communication, the compute time under the run's own load.
   Measured: every worker's step times, every all-reduce's start and end, and each
   worker's interface counters every ``sample_ms`` (PACE Fig. 10 analog).
3. **Prediction** (:func:`predict`). :func:`commsched.pace.sim.simulate_plan` runs the
   same plan (Horovod's and DDP's realised by the policies of
   :mod:`commsched.pace.baselines`) on the same trace. Two predictions (our choices):

   * ``predicted_nominal_s``: the trace's op times as traced and the nominal ring cost of
     the shaped link (:func:`cost_model`), nothing taken from the live run;
   * ``predicted_s``: compute times scaled so that one iteration without communication
     (:attr:`~commsched.pace.sim.Workload.compute_time`) takes the measured median
     :data:`~commsched.pace.live.ddp.NO_COMM` step (the run's own load), and the all-reduce
     cost ``a + b*S`` fitted to the run's WFBP all-reduces, agreement round included
     (:func:`fit_cost`: the per-operation start-up that the nominal model leaves out).
     Not fitted to any step time.

   PyTorch DDP waits for every bucket at the end of the backward pass, so its step is
   predicted as the later of the last bucket's end and the compute time; the plan
   executor's policies overlap the next forward pass (:mod:`commsched.pace.live.ddp`), as
   the simulator models. ``error = predicted / measured - 1`` on the median step time
   (the largest over the workers per iteration).

Gains: ``gain of A over B = median step of B / median step of A - 1``.

Without root or namespace support (and with ``enabled: false``) nothing runs: every table
holds one row ``skipped: <reason>`` and the metrics are empty, so the claims stay pending.
Run as ``python -m commsched.pace.experiments.live --config-json '{...}' --workdir DIR
--steps S.csv --allreduces A.csv --link L.csv --summary Y.csv --metrics M.csv``;
``--reuse`` re-analyses the results a run left in ``DIR``; ``--prepare`` only writes each
model's plans and a worker config for ``torchrun`` on real hosts (docs/scale-out.md).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np
import pandas as pd

from commsched.atomic import atomic_write_text
from commsched.cluster import net
from commsched.cluster.emulated import ClusterConfig, emulated_cluster
from commsched.cost import LinearModel, fit_linear
from commsched.cost.allreduce import allreduce_model
from commsched.errors import CommschedError
from commsched.model.traced import load_trace
from commsched.pace.baselines import HOROVOD, POLICIES, Decision, PolicyContext
from commsched.pace.live.ddp import NO_COMM, USER_PLAN, WorkerConfig, launch
from commsched.pace.live.ddp import POLICIES as LIVE_POLICIES
from commsched.pace.plan import Plan, load_plan, save_plan
from commsched.pace.sim import PlanRun, Workload
from commsched.plotting import check_figure_inputs
from commsched.results import write_metrics, write_table

__all__ = [
    "FIGURE_KINDS",
    "FigureConfig",
    "LiveModel",
    "Params",
    "cost_model",
    "make_plans",
    "metrics",
    "predict",
    "skipped_reason",
    "summarize",
    "tables",
    "utilisation",
]



@dataclass(frozen=True)
class LiveModel:
    """One live model: its committed trace (``data/traces/<trace>.json.gz``) and link."""

    trace: str
    bandwidth: str  # tbf rate, e.g. "400mbit"

    @property
    def bandwidth_Bps(self) -> float:
        return net.parse_rate(self.bandwidth)


@dataclass(frozen=True)
class Params:
    """The ``pace_live`` config section (see ``config/config.yaml``)."""

    enabled: bool
    models: tuple[LiveModel, ...]
    policies: tuple[str, ...]
    n_workers: int = 2
    threads: int = 1
    warmup: int = 1
    iterations: int = 3
    rounds: int = 1
    latency_s: float = 1e-4
    overhead_s: float = 0.0
    sample_ms: float = 5.0
    slot_ms: float = 5.0
    threshold_bytes: int = HOROVOD["horovod-0.20"][0]
    cycle_s: float = HOROVOD["horovod-0.20"][1]
    plan_file: str | None = None
    timeout_s: float = 900.0
    seed: int = 0
    trace_dir: str = "data/traces"

    def __post_init__(self) -> None:
        bad = [p for p in self.policies if p not in LIVE_POLICIES]
        if bad:
            raise CommschedError(f"pace_live: unknown policy {bad[0]!r}; known: "
                                 f"{', '.join(LIVE_POLICIES)}")
        if "plan" in self.policies and not self.plan_file:
            raise CommschedError("pace_live: policy 'plan' needs pace_live.plan_file")
        if self.n_workers < 2 or self.iterations < 1 or self.warmup < 0 or self.rounds < 1:
            raise CommschedError("pace_live: need n_workers >= 2, iterations >= 1, "
                                 "warmup >= 0, rounds >= 1")

    @staticmethod
    def from_config(cfg: Mapping[str, Any]) -> Params:
        known = set(Params.__dataclass_fields__)
        extra = sorted(set(cfg) - known)
        if extra:
            raise CommschedError(f"pace_live: unknown key {extra[0]!r}")
        args = dict(cfg)
        try:
            args["models"] = tuple(LiveModel(**m) for m in cfg.get("models", []))
        except TypeError as e:
            raise CommschedError(f"pace_live.models: {e}") from None
        args["policies"] = tuple(cfg.get("policies", ()))
        return Params(**args)


def cost_model(params: Params, bandwidth_Bps: float) -> LinearModel:
    """Ring all-reduce of ``n_workers`` over the shaped links, PACE's ``a + b*S``
    (:func:`commsched.cost.allreduce.allreduce_model`)."""
    return allreduce_model(params.n_workers, bandwidth_Bps * 8 / 1e9, params.latency_s,
                           params.overhead_s)


def make_plans(trace: nx.DiGraph, params: Params, bandwidth_Bps: float,
               workload: Workload | None = None) -> dict[str, tuple[Plan | None, Decision]]:
    """``{policy: (plan the workers execute, the simulator's decision)}`` for every
    configured policy (module docstring); ``ddp`` executes no plan (PyTorch DDP)."""
    w = workload or Workload(trace)
    model = cost_model(params, bandwidth_Bps)
    opts: dict[str, Any] = {"slot_ms": params.slot_ms, "threshold_bytes": params.threshold_bytes,
                            "cycle_s": params.cycle_s}
    ctx = PolicyContext(w, model, trace, params.n_workers, bandwidth_Bps, opts)
    out: dict[str, tuple[Plan | None, Decision]] = {}
    for policy in params.policies:
        if policy == USER_PLAN:
            assert params.plan_file
            user = load_plan(params.plan_file)
            user.check_tensors(w.sizes, f"plan file {params.plan_file}")
            out[policy] = (user, Decision(user))
            continue
        entry = POLICIES[policy]
        d = entry(ctx)
        if entry.live == "ddp":
            out[policy] = (None, d)
        elif entry.live == "horovod":  # fused at run time: the units are WFBP's tensors
            out[policy] = (POLICIES["wfbp"](ctx).plan, d)
        elif entry.live == "plan-by-order":  # the executor launches by plan order, no release
            out[policy] = (d.plan, Decision(d.plan))
        else:
            out[policy] = (d.plan, d)
    return out


def predict(w: Workload, decision: Decision, model: LinearModel, sync: bool = False
            ) -> tuple[float, PlanRun]:
    """Predicted step time of ``decision`` on ``w`` (module docstring: ``sync`` = PyTorch
    DDP, which waits for every bucket before the update)."""
    run = w.simulate(decision.plan, model, decision.release or None)
    if not sync:
        return run.iteration_time, run
    last = max((p.end for p in run.partitions), default=0.0)
    return max(last, w.compute_time), run


def skipped_reason(params: Params) -> str | None:
    """Why the live run cannot run here (None: it can)."""
    if not params.enabled:
        return "pace_live.enabled is false"
    return net.check_support()


# --------------------------------------------------------------------------------------
# The run.


def _run_model(params: Params, lm: LiveModel, workdir: Path, mode: str = "run"
               ) -> dict[str, Any]:
    """Plans, then (``mode``) ``run`` live on the emulated cluster, ``reuse`` the results
    an earlier run left in ``workdir``, or ``prepare`` the worker config for real hosts
    (``worker.json``: rank and rendezvous from torchrun, docs/scale-out.md)."""
    trace = load_trace(Path(params.trace_dir) / f"{lm.trace}.json.gz")
    meta = trace.graph["meta"]
    if meta.get("framework") != "torch" or meta.get("mode") != "train":
        raise CommschedError(f"pace_live: {lm.trace} is not a PyTorch training trace")
    w = Workload(trace)
    plans = make_plans(trace, params, lm.bandwidth_Bps, w)
    work = workdir / lm.trace
    files = {}
    for policy, (plan, _) in plans.items():
        if plan is not None:
            files[policy] = str(work / f"plan-{policy}.json")
            save_plan(plan, files[policy])
    run = {"model": meta["model"], "trace": lm.trace, "bandwidth": lm.bandwidth,
           "bandwidth_Bps": lm.bandwidth_Bps, "trace_graph": trace, "workload": w,
           "plans": plans}
    outs = [work / f"result{r}.json" for r in range(params.n_workers)]

    def config(rank: int, master: str, out: str, **kw: Any) -> WorkerConfig:
        return WorkerConfig(
            rank=rank, world=params.n_workers, master=master, port=29500, out=out,
            model=meta["model"], batch=int(meta["batch"]), size=int(meta["size"]),
            policies=[NO_COMM, *plans], plans=files, warmup=params.warmup,
            iterations=params.iterations, rounds=params.rounds, seed=params.seed,
            timeout=min(300.0, params.timeout_s), join_timeout=60.0, threads=params.threads,
            horovod_threshold=params.threshold_bytes, horovod_cycle=params.cycle_s,
            sample_interval=params.sample_ms / 1e3, **kw)

    if mode == "prepare":
        cfg = config(0, "env", str(work / "result{rank}.json"))
        atomic_write_text(work / "worker.json", json.dumps(asdict(cfg), indent=1) + "\n")
        return run
    if mode == "reuse":
        if not all(p.is_file() for p in outs):
            raise CommschedError(f"--reuse: no finished run of {lm.trace} in {work}")
        return {**run, "results": [json.loads(p.read_text()) for p in outs]}
    cl = ClusterConfig(n_ps=0, n_workers=params.n_workers, bandwidth=lm.bandwidth,
                       burst="256kb", servers=False)
    with emulated_cluster(cl, timeout=params.timeout_s) as cluster:
        master = cluster.spec["worker"][0].split(":")[0]
        cfgs = [config(r, master, str(outs[r]), cpu=r, sample_dev="eth0")
                for r in range(params.n_workers)]

        def spawn(rank: int, argv: list[str], log: Path, env: Mapping[str, str]) -> Any:
            return cluster.spawn_client(rank, argv, log, env)

        results = launch(cfgs, work, params.timeout_s, spawn, ifname="eth0")
    return {**run, "results": results}


def utilisation(rows: Sequence[Sequence[float]], start: float, end: float, bin_s: float
                ) -> list[tuple[float, float, float]]:
    """``(bin start, tx B/s, rx B/s)`` in bins of ``bin_s`` over ``[start, end)`` from
    samples ``[time, tx bytes, rx bytes]`` of the interface counters.

    The counters are interpolated linearly at the bin edges: the samples' own spacing
    jitters (a thread's wake-ups) and the counters advance in whole (segmentation-offload)
    packets, so rates over the raw sample intervals overshoot the link rate.

    >>> utilisation([[0.0, 0, 0], [1.0, 100, 10], [2.0, 100, 30]], 0.0, 2.0, 1.0)
    [(0.0, 100.0, 10.0), (1.0, 0.0, 20.0)]
    """
    if len(rows) < 2 or end - start < bin_s:
        return []
    arr = np.asarray(rows, dtype=float)
    n = int((end - start) / bin_s + 1e-9)
    edges = start + bin_s * np.arange(n + 1)
    edges = edges[(edges >= arr[0, 0]) & (edges <= arr[-1, 0])]
    tx = np.interp(edges, arr[:, 0], arr[:, 1])
    rx = np.interp(edges, arr[:, 0], arr[:, 2])
    return [(float(edges[i]), float((tx[i + 1] - tx[i]) / bin_s),
             float((rx[i + 1] - rx[i]) / bin_s)) for i in range(len(edges) - 1)]


def tables(run: Mapping[str, Any], bin_s: float = 0.005) -> dict[str, pd.DataFrame]:
    """Steps, all-reduces and link utilisation (``bin_s`` bins) of one model's run (times
    relative to the policy's first timed step)."""
    steps, ars, link = [], [], []
    key = {"model": run["model"], "trace": run["trace"], "bandwidth": run["bandwidth"]}
    for res in run["results"]:
        rank = res["rank"]
        rows = res["link"]["rows"]
        for pol in res["policies"]:
            name, starts = pol["policy"], pol["iteration_start"]
            warm = len(pol["warmup_step_s"])
            t0 = starts[warm]
            rnd = pol.get("round", 0)
            first = rnd * len(pol["step_s"])  # iterations numbered across rounds
            for i, s in enumerate(pol["step_s"]):
                steps.append({**key, "policy": name, "rank": rank, "round": rnd,
                              "iteration": first + i, "step_s": s})
            last = warm + len(pol["step_s"])  # the untimed last step's are left out
            for r in pol["allreduces"]:  # the warm-up's last ones may end in timed steps
                if r["end"] < t0 or r["iteration"] >= last:
                    continue
                ars.append({**key, "policy": name, "rank": rank, "round": rnd,
                            "iteration": first + r["iteration"] - warm,
                            "agree_s": r.get("agree_start", r["start"]) - t0,
                            "start_s": r["start"] - t0,
                            "end_s": r["end"] - t0, "bytes": r["bytes"],
                            "partitions": len(r["parts"]),
                            "priority": min(p[3] for p in r["parts"])})
            for t, tx, rx in utilisation(rows, t0, starts[-1], bin_s):
                link.append({**key, "policy": name, "rank": rank, "round": rnd, "t_s": t - t0,
                             "tx_MBps": tx / 1e6, "rx_MBps": rx / 1e6,
                             "utilisation": tx / run["bandwidth_Bps"]})
    return {"steps": pd.DataFrame(steps), "allreduces": pd.DataFrame(ars),
            "link": pd.DataFrame(link)}


def fit_cost(allreduces: pd.DataFrame, nominal: LinearModel, policy: str = "wfbp"
             ) -> LinearModel:
    """The all-reduce cost ``a + b*S`` fitted (:func:`commsched.cost.fit_linear`) to the
    run's own all-reduces of ``policy`` (WFBP: one per tensor, sizes over several
    decades), each from the start of the agreement round that chose it (the workers'
    one small all-reduce before every decision, :class:`commsched.pace.live.ddp.
    PlanExecutor`, which the channel spends on every all-reduce too) to its end;
    ``nominal`` when the run has none."""
    d = allreduces[allreduces["policy"] == policy] if len(allreduces) else allreduces
    if len(d) < 2 or d["bytes"].nunique() < 2:
        return nominal
    begin = d["agree_s"] if "agree_s" in d else d["start_s"]
    f = fit_linear(d["bytes"], d["end_s"] - begin)
    return LinearModel(max(f.a, 0.0), f.b)


def summarize(run: Mapping[str, Any], steps: pd.DataFrame, allreduces: pd.DataFrame,
              params: Params) -> pd.DataFrame:
    """Per policy: measured median step, predictions and errors (module docstring)."""
    it = steps.groupby(["policy", "iteration"])["step_s"].max().reset_index()
    measured = it.groupby("policy")["step_s"].median()
    w: Workload = run["workload"]
    compute = float(measured[NO_COMM])
    scaled = Workload(run["trace_graph"], compute_scale=compute / w.compute_time)
    nominal = cost_model(params, run["bandwidth_Bps"])
    fitted = fit_cost(allreduces, nominal)
    rows = []
    for policy, (_, decision) in run["plans"].items():
        sync = policy == "ddp"
        pred, _ = predict(scaled, decision, fitted, sync)
        pred_nominal, _ = predict(w, decision, nominal, sync)
        m = float(measured[policy])
        rows.append({"model": run["model"], "trace": run["trace"],
                     "bandwidth": run["bandwidth"], "policy": policy,
                     "measured_s": m, "steps": int((it["policy"] == policy).sum()),
                     "compute_s": compute, "trace_compute_s": w.compute_time,
                     "cost_a_s": fitted.a, "cost_MBps": 1e-6 / fitted.b,
                     "predicted_s": pred, "error": pred / m - 1,
                     "predicted_nominal_s": pred_nominal,
                     "error_nominal": pred_nominal / m - 1,
                     "allreduce_all_s": fitted.time(sum(w.sizes.values()))})
    df = pd.DataFrame(rows)
    for base in ("wfbp", "ddp"):
        if base in measured.index:
            df[f"gain_over_{base}"] = float(measured[base]) / df["measured_s"] - 1
    return df


def metrics(summary: pd.DataFrame) -> dict[str, float]:
    """Claimed numbers (``pace_live.*``): per model PACE's gain over each other policy in
    percent, and the simulator's absolute error in percent (median and largest over every
    model and policy; ``_nominal``: the uncalibrated prediction)."""
    out: dict[str, float] = {}
    for model, df in summary.groupby("model", sort=False):
        by = df.set_index("policy")["measured_s"]
        if "pace" in by.index:
            for base in by.index.drop("pace"):
                out[f"pace_live.{model}.pace_gain_over_{base}_pct"] = 100 * float(
                    by[base] / by["pace"] - 1)
        for policy, err in df.set_index("policy")["error"].items():
            out[f"pace_live.{model}.{policy}.error_pct"] = 100 * float(err)
    if len(summary):
        err = summary["error"].abs()
        out["pace_live.error_median_abs_pct"] = 100 * float(err.median())
        out["pace_live.error_max_abs_pct"] = 100 * float(err.max())
        out["pace_live.error_nominal_median_abs_pct"] = 100 * float(
            summary["error_nominal"].abs().median())
    return out


TABLES = ("steps", "allreduces", "link", "summary")
#: The figures of ``notebooks/pace_live.ipynb``.
FIGURE_KINDS = ("steptime", "utilisation")


@dataclass(frozen=True)
class FigureConfig:
    """Parameters of ``notebooks/pace_live.ipynb``, checked before plotting."""

    summary: str
    link: str
    allreduces: str
    figure: str  # the PDF; the PNG is written beside it
    kind: str = "steptime"

    def __post_init__(self) -> None:
        check_figure_inputs("pace_live", {"summary": self.summary, "link": self.link,
                                          "allreduces": self.allreduces}, self.figure,
                            "run rule pace_live_run first")
        if self.kind not in FIGURE_KINDS:
            raise CommschedError(f"pace_live figure: kind {self.kind!r} is not one of "
                                 f"{', '.join(FIGURE_KINDS)}")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the live experiment (module docstring); one-line errors, exit 2."""
    ap = argparse.ArgumentParser(prog="python -m commsched.pace.experiments.live",
                                 description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config-json", required=True, help="the pace_live config section")
    ap.add_argument("--workdir", required=True, help="plans, worker configs, logs, results")
    ap.add_argument("--reuse", action="store_true",
                    help="re-analyse the workers' results an earlier run left in --workdir")
    ap.add_argument("--prepare", action="store_true",
                    help="only write each model's plans and worker.json (real hosts: "
                         "docs/scale-out.md)")
    for name in (*TABLES, "metrics"):
        ap.add_argument(f"--{name}", help=f"{name} table (CSV) to write")
    args = ap.parse_args(argv)
    try:
        raw = json.loads(args.config_json)
        params = Params.from_config(raw)
        if args.prepare:
            for lm in params.models:
                _run_model(params, lm, Path(args.workdir), "prepare")
                print(f"{Path(args.workdir) / lm.trace / 'worker.json'}")
            return 0
        missing = [n for n in (*TABLES, "metrics") if not getattr(args, n)]
        if missing:
            raise CommschedError(f"--{missing[0]} is required (unless --prepare)")
        reason = None if args.reuse else skipped_reason(params)
        if reason:
            print(f"pace_live skipped: {reason}", file=sys.stderr)
            skip = pd.DataFrame({"status": ["skipped"], "reason": [reason]})
            for name in TABLES:
                write_table(skip, getattr(args, name), {**raw, "skipped": reason})
            write_metrics({}, args.metrics, {**raw, "skipped": reason})
            return 0
        parts: dict[str, list[pd.DataFrame]] = {name: [] for name in TABLES}
        for lm in params.models:
            print(f"pace_live: {lm.trace} at {lm.bandwidth}", file=sys.stderr, flush=True)
            run = _run_model(params, lm, Path(args.workdir),
                             "reuse" if args.reuse else "run")
            t = tables(run, params.sample_ms / 1e3)
            for name, df in t.items():
                parts[name].append(df)
            parts["summary"].append(summarize(run, t["steps"], t["allreduces"], params))
        out = {name: pd.concat(dfs, ignore_index=True) for name, dfs in parts.items()}
        for name in TABLES:
            write_table(out[name], getattr(args, name), raw)
        write_metrics(metrics(out["summary"]), args.metrics, raw)
        s = out["summary"]
        print(s[["model", "policy", "measured_s", "predicted_s", "error"]].to_string(
            index=False), file=sys.stderr)
    except CommschedError as e:
        print(f"pace_live: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # the cluster was torn down on the way out
        print("pace_live: interrupted", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
