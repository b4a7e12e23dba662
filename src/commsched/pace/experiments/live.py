"""Live all-reduce scheduling: PACE and its baselines enforced in PyTorch data-parallel
training on the emulated cluster, with the simulator's prediction beside each measurement.

PACE (Bao, Peng, Chen, Wu; INFOCOM 2020) measured its plans in Horovod + MXNet on a GPU
cluster (Sec. VI). This driver runs the same comparison in PyTorch
(:mod:`commsched.pace.live.ddp`) on an emulated cluster (:mod:`commsched.cluster`: one
network namespace per worker, every link shaped with ``tbf`` to the model's bandwidth; gloo
over the shaped links), ``n_workers`` workers each pinned to one core with one thread.

For every configured model (``pace_live.models``: a committed PyTorch CPU trace, its batch
and input size, and a link rate at which communication is comparable to computation):

1. **Plans** (:func:`~.live_plans.make_plans`). From the trace, with
   :mod:`commsched.pace.policies` and the ring all-reduce cost model of the link
   (:func:`~.live_plans.cost_model`): ``wfbp``, ``ddp_buckets`` (DDP's buckets run by the
   plan executor), ``horovod`` (units = WFBP's tensors, fused at run time every
   ``cycle_s`` up to ``threshold_bytes``), ``pace`` (Alg. 1 + the optimal preemptive
   schedule) and, optionally, ``plan`` (the user's plan file, ``pace_live.plan_file``).
   ``ddp`` is PyTorch DDP itself.
2. **Live run.** All policies, one after the other in the same worker processes
   (``warmup`` + ``iterations`` steps each), plus :data:`commsched.pace.live.ddp.NO_COMM`:
   local steps without communication, the compute time under the run's own load.
   Measured: every worker's step times, every all-reduce's start and end, and each
   worker's interface counters every ``sample_ms`` (PACE Fig. 10 analog).
3. **Prediction** (:func:`~.live_plans.predict`, :func:`~.live_analysis.summarize`).
   :func:`commsched.pace.sim.simulate_plan` runs the same plan (Horovod's and DDP's
   realised by the policies of :mod:`commsched.pace.dynamic`) on the same trace. Three
   predictions (our choices):

   * ``predicted_nominal_s``: the trace's op times as traced and the nominal ring cost of
     the shaped link (:func:`~.live_plans.cost_model`), nothing taken from the live run;
   * ``predicted_s``: compute times scaled so that one iteration without communication
     (:attr:`~commsched.pace.sim.Workload.compute_time`) takes the measured median
     :data:`~commsched.pace.live.ddp.NO_COMM` step (the run's own load), and the all-reduce
     cost ``a + b*S`` fitted to the run's WFBP all-reduces, agreement round included
     (:func:`~.live_analysis.fit_cost`: the per-operation start-up that the nominal model
     leaves out). Not fitted to any step time.
   * ``predicted_runtime_s`` and ``predicted_lomo_s`` (:func:`~.live_analysis.transfer`):
     one set of overheads for the runtime instead of one per model
     (:func:`~.live_analysis.fit_runtime`: the median compute scale over the models, one
     start-up and one share of the link rate fitted to every model's WFBP all-reduces),
     fitted over every model and over the other models only (leave-one-model-out: the
     error of predicting a model that has not run yet).

   PyTorch DDP waits for every bucket at the end of the backward pass, so its step is
   predicted as the later of the last bucket's end and the compute time; the plan
   executor's policies overlap the next forward pass
   (:mod:`commsched.pace.live.executor`), as the simulator models. ``error = predicted /
   measured - 1`` on the median step time (the largest over the workers per iteration).

Gains: ``gain of A over B = median step of B / median step of A - 1``.

Without root or namespace support (and with ``enabled: false``) nothing runs: every table
holds one row ``skipped: <reason>`` and the metrics are empty, so the claims stay pending.
The workers run under ``torchrun`` (``launcher: torchrun``: one agent and one worker per
namespace, c10d rendezvous at the first host, the command a real host runs,
:mod:`commsched.cluster.torchrun`) or alone (``direct``). Run as ``python -m
commsched.pace.experiments.live --config-json '{...}' --workdir DIR --steps S.csv
--allreduces A.csv --link L.csv --summary Y.csv --metrics M.csv``; ``--reuse``
re-analyses the results a run left in ``DIR``. On real hosts (``pace_live.hosts``: their
addresses) ``--prepare`` writes each model's plans and worker config and prints the
command of every host (docs/scale-out.md); once they have run, ``--reuse`` analyses
their results.
"""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from commsched import driver
from commsched.atomic import atomic_write_text
from commsched.cluster import net
from commsched.cluster.emulated import ClusterConfig, emulated_cluster
from commsched.cluster.torchrun import RDZV_PORT, hosts_argv
from commsched.errors import CommschedError
from commsched.model.traced import load_trace
from commsched.pace.experiments.live_analysis import metrics, summarize, tables, transfer
from commsched.pace.experiments.live_plans import LiveModel, Params, make_plans
from commsched.pace.live.ddp import NO_COMM, WorkerConfig
from commsched.pace.live.launch import MODULE, launch
from commsched.pace.plan import save_plan
from commsched.pace.sim import Workload

__all__ = ["FIGURE_KINDS", "TABLES", "FigureConfig", "host_commands", "main", "run_model",
           "skipped_reason"]


def skipped_reason(params: Params) -> str | None:
    """Why the live run cannot run here.

    Parameters
    ----------
    params : Params
        The run.

    Returns
    -------
    str or None
        The reason (disabled in the config, no root or namespace support), None if it can.
    """
    if not params.enabled:
        return "pace_live.enabled is false"
    return net.check_support()



# --------------------------------------------------------------------------------------
# The run.


def run_model(params: Params, lm: LiveModel, workdir: Path, mode: str = "run"
               ) -> dict[str, Any]:
    """One model's plans, then its live run (module docstring, steps 1 and 2).

    Parameters
    ----------
    params : Params
        The run.
    lm : LiveModel
        The model and its link.
    workdir : pathlib.Path
        Plans, worker configs, logs and results go to ``workdir/<trace>``.
    mode : {"run", "reuse", "prepare"}
        ``run`` live on the emulated cluster (``params.hosts`` unused), ``reuse`` the
        results an earlier run (or
        the hosts) left in ``workdir``, or ``prepare`` the worker config for real hosts
        (``worker.json``: rank and rendezvous from torchrun, :func:`host_commands`).

    Returns
    -------
    dict
        Model, trace, bandwidth, the trace graph, its workload, the plans and (unless
        ``prepare``) the workers' ``results``.

    Raises
    ------
    CommschedError
        If the trace is not a PyTorch training trace, ``reuse`` finds no finished run, or
        a worker failed or ran past ``timeout_s``.
    """
    trace = load_trace(driver.trace_file(params.trace_dir, lm.trace))
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
    out = str(work / "result{rank}.json")  # the rank from torchrun, or the config's

    def config(rank: int, master: str, out: str, **kw: Any) -> WorkerConfig:
        return WorkerConfig(
            rank=rank, world=params.n_workers, master=master, port=RDZV_PORT, out=out,
            model=meta["model"], batch=int(meta["batch"]), size=int(meta["size"]),
            policies=[NO_COMM, *plans], plans=files, warmup=params.warmup,
            iterations=params.iterations, rounds=params.rounds, seed=params.seed,
            timeout=min(300.0, params.timeout_s), join_timeout=60.0, threads=params.threads,
            horovod_threshold=params.threshold_bytes, horovod_cycle=params.cycle_s,
            sample_interval=params.sample_ms / 1e3, **kw)

    if mode == "prepare":
        cfg = config(0, "env", out)
        atomic_write_text(work / "worker.json", json.dumps(asdict(cfg), indent=1) + "\n")
        return run
    if mode == "reuse":
        if not all(p.is_file() for p in outs):
            raise CommschedError(f"--reuse: no finished run of {lm.trace} in {work}")
        return {**run, "results": [json.loads(p.read_text()) for p in outs]}
    cl = ClusterConfig(n_ps=0, n_workers=params.n_workers, bandwidth=lm.bandwidth,
                       burst="256kb", servers=False)
    with emulated_cluster(cl, timeout=params.timeout_s) as cluster:
        hosts = [a.split(":")[0] for a in cluster.spec["worker"]]
        cfgs = [config(r, hosts[0], out, cpu=r, sample_dev="eth0")
                for r in range(params.n_workers)]

        def spawn(rank: int, argv: list[str], log: Path, env: Mapping[str, str]) -> Any:
            return cluster.spawn_client(rank, argv, log, env)

        results = launch(cfgs, work, params.timeout_s, spawn, ifname="eth0",
                         launcher=params.launcher, hosts=hosts)
    return {**run, "results": results}


def host_commands(params: Params, workdir: Path, lm: LiveModel) -> list[str]:
    """The command line of every host of ``pace_live.hosts`` for one model, in its order.

    Each runs ``torchrun`` (from the host's environment) with the c10d rendezvous at the
    first host (:func:`commsched.cluster.torchrun.hosts_argv`; the rendezvous waits at
    most ``timeout_s``) and the worker config ``--prepare`` wrote
    (``workdir/<trace>/worker.json``; every host needs it at the same path).

    Parameters
    ----------
    params : Params
        The run; ``hosts`` must be set.
    workdir : pathlib.Path
        As given to ``--prepare``.
    lm : LiveModel
        The model.

    Returns
    -------
    list of str
        One shell line per host.

    Raises
    ------
    CommschedError
        If ``pace_live.hosts`` is not set.
    """
    if params.hosts is None:
        raise CommschedError("pace_live.hosts is null: --prepare prints the commands of a "
                             "host list")
    work = workdir / lm.trace
    return [shlex.join(a) for a in hosts_argv(
        params.hosts, MODULE, [str(work / "worker.json")], run_id=lm.trace,
        join_timeout=params.timeout_s, log_dir=str(work / "torchrun"),
        torchrun=("torchrun",))]


TABLES = ("steps", "allreduces", "link", "summary")
#: The figures of ``notebooks/pace_live.ipynb``.
FIGURE_KINDS = ("steptime", "utilisation")


@dataclass(frozen=True)
class FigureConfig(driver.KindFigureConfig):
    """Parameters of ``notebooks/pace_live.ipynb``, checked before plotting.

    ``figure`` and the checks: see :class:`~commsched.driver.KindFigureConfig`.

    Parameters
    ----------
    kind : str
        ``steptime`` or ``utilisation`` (:data:`FIGURE_KINDS`).
    summary, link, allreduces : str
        The tables of rule ``pace_live_run``.
    """

    kind: str = "steptime"
    summary: str = ""
    link: str = ""
    allreduces: str = ""
    KINDS = FIGURE_KINDS
    WHAT = "pace_live"
    HINT = "run rule pace_live_run first"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the live experiment (module docstring).

    Parameters
    ----------
    argv : sequence of str, optional
        ``--config-json J --workdir D`` and the tables (or ``--prepare``).

    Returns
    -------
    int
        0 (also when the run is skipped: the tables say why), 2 after a one-line error,
        130 when interrupted (the cluster is torn down on the way out).
    """
    ap = driver.parser("commsched.pace.experiments.live", __doc__)
    ap.add_argument("--config-json", required=True, help="the pace_live config section")
    driver.add_workdir_options(ap, "plans, worker configs, logs, results")
    ap.add_argument("--prepare", action="store_true",
                    help="real hosts (pace_live.hosts): write each model's plans and "
                         "worker.json and print every host's torchrun command "
                         "(docs/scale-out.md)")
    for name in (*TABLES, "metrics"):
        ap.add_argument(f"--{name}", help=f"{name} table (CSV) to write")
    args = ap.parse_args(argv)

    def body() -> None:
        params = Params.from_config(args.config_json)
        raw = params.raw
        if args.prepare:
            lines = []
            for lm in params.models:
                cmds = host_commands(params, Path(args.workdir), lm)
                run_model(params, lm, Path(args.workdir), "prepare")
                lines += [f"# {lm.trace}: line i on host i of {len(cmds)}", *cmds]
            print("\n".join(lines))
            return
        missing = [n for n in (*TABLES, "metrics") if not getattr(args, n)]
        if missing:
            raise CommschedError(f"--{missing[0]} is required (unless --prepare)")
        if params.hosts is not None and not args.reuse:
            raise CommschedError("pace_live.hosts is set: the workers run on those hosts "
                                 "(--prepare prints each host's command; --reuse analyses "
                                 "their results)")
        reason = None if args.reuse else skipped_reason(params)
        if reason:
            driver.write_skipped("pace_live", reason, [getattr(args, n) for n in TABLES],
                                 args.metrics, raw)
            return
        parts: dict[str, list[pd.DataFrame]] = {name: [] for name in TABLES}
        runs = []
        for lm in params.models:
            driver.say(f"pace_live: {lm.trace} at {lm.bandwidth}")
            run = run_model(params, lm, Path(args.workdir), "reuse" if args.reuse else "run")
            runs.append(run)
            t = tables(run, params.sample_ms / 1e3)
            for name, df in t.items():
                parts[name].append(df)
            parts["summary"].append(summarize(run, t["steps"], t["allreduces"], params))
        out = {name: pd.concat(dfs, ignore_index=True) for name, dfs in parts.items()}
        out["summary"] = transfer(runs, out["summary"], out["allreduces"])
        driver.write_outputs({getattr(args, n): out[n] for n in TABLES}, metrics(out["summary"]),
                             args.metrics, raw)
        s = out["summary"]
        print(s[["model", "policy", "measured_s", "predicted_s", "error", "error_runtime",
                 "error_lomo"]].to_string(
            index=False), file=sys.stderr)

    return driver.run_interruptible("pace_live", body)


if __name__ == "__main__":
    sys.exit(main())
