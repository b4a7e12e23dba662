"""Benchmark of the multi-worker PS simulation: 1,000 iterations of 16 workers in under 1 min.

Issue 4, item 7 ("simulate 1000 iterations of 16 workers in under a minute"). The graph
is the parameter-server view of the largest traced training graph in ``data/traces``
(``*-train-*.json.gz``, largest file; ResNet-50 when the zoo is traced), with the link and
settings of the ``tictac:`` section of ``config/config.yaml`` (calibrated bandwidth,
jitter, sharding, duplex), ``--servers`` servers and ``--workers`` workers.

Measured (``benchmarks/results/multiworker.json``):

* ``headline``: :func:`commsched.tictac.sim.run` of the random baseline (the costliest
  policy: a fresh permutation per worker and iteration) for ``--iterations`` iterations on
  the coarsened view (:func:`commsched.tictac.sim.coarsen`, what the TicTac
  experiments simulate), without per-iteration validation; then ``--validate``
  iterations validated with :func:`commsched.sim.check_schedule` to show they pass.
* ``fine``: seconds per iteration on the full (not coarsened) view, from
  ``--fine-iterations`` iterations, and the extrapolated time of the headline run.
* ``accuracy``: for every traced model of the config, the mean iteration time of the
  baseline and of TAC and the TAC gain on the full and on the coarsened view
  (``--accuracy-workers`` workers, one server per four workers, ``--accuracy-iterations``
  iterations, same seed), i.e. what coarsening changes in the TicTac study.
* ``setup``: seconds to load the trace, build the view, coarsen and compose.

Run: ``python benchmarks/bench_multiworker.py`` (a few minutes on 2 cores).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path
from typing import Any

from bench_tictac import largest_training_trace
from benchlib import report

from commsched.tictac.experiments.sweep_config import Params
from commsched.tictac.experiments.sweep_setting import load_models, trace_file
from commsched.tictac.sim import compose, run

TARGET_S = 60.0
ROOT = Path(__file__).resolve().parent.parent


def _clock() -> float:
    return time.perf_counter()


def accuracy(paths: list[str], params: Params, n_workers: int, iters: int) -> list[dict[str, Any]]:
    """Baseline / TAC iteration times and the TAC gain on full and coarsened views."""
    rows = []
    for path in paths:
        (model,) = load_models([path], params)
        n_servers = max(1, math.ceil(n_workers / params.workers_per_server))
        tac_order = model.orders(params, n_servers, 1.0)["tac"]
        row: dict[str, Any] = {"trace": str(Path(path).relative_to(ROOT)),
                               "model": model.name, "mode": model.mode,
                               "n_workers": n_workers, "n_servers": n_servers,
                               "iterations": iters}
        for kind, simulated in (("full", False), ("coarse", True)):
            g = model.view(params, n_servers, simulated=simulated)
            mw = compose(g, n_workers)
            t0 = _clock()
            base = run(mw, None, iters, params.jitter, params.seed, validate_every=0,
                       interleave=params.baseline_interleave)
            tac = run(mw, tac_order, iters, params.jitter, params.seed, validate_every=0)
            b, t = float(base.iteration_time.mean()), float(tac.iteration_time.mean())
            row[kind] = {"ops_per_worker": g.number_of_nodes(), "baseline_s": b, "tac_s": t,
                         "gain_pct": (b / t - 1) * 100, "sim_seconds": _clock() - t0}
        row["gain_diff_pp"] = row["coarse"]["gain_pct"] - row["full"]["gain_pct"]
        row["baseline_rel_diff"] = row["coarse"]["baseline_s"] / row["full"]["baseline_s"] - 1
        row["tac_rel_diff"] = row["coarse"]["tac_s"] / row["full"]["tac_s"] - 1
        rows.append(row)
        model.clear()
        print(f"accuracy {model.name}/{model.mode}: gain full {row['full']['gain_pct']:.2f}% "
              f"coarse {row['coarse']['gain_pct']:.2f}%", file=sys.stderr, flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--trace", help="traced training graph (default: the largest one)")
    p.add_argument("--config", default=str(ROOT / "config" / "config.yaml"))
    p.add_argument("--workers", type=int, default=16)
    p.add_argument("--servers", type=int, default=4)
    p.add_argument("--iterations", type=int, default=1000)
    p.add_argument("--validate", type=int, default=5, help="validated iterations")
    p.add_argument("--fine-iterations", type=int, default=3)
    p.add_argument("--accuracy-workers", type=int, default=4)
    p.add_argument("--accuracy-iterations", type=int, default=10)
    p.add_argument("--no-accuracy", action="store_true")
    p.add_argument("--out", default=str(Path(__file__).parent / "results" / "multiworker.json"))
    args = p.parse_args(argv)

    params = Params.from_file(args.config)
    trace = Path(args.trace) if args.trace else largest_training_trace()
    if trace is None:
        raise SystemExit("no traced training graph in data/traces")
    setup: dict[str, float] = {}
    t0 = _clock()
    (model,) = load_models([str(trace)], params)
    setup["load_and_calibrate_s"] = _clock() - t0
    t0 = _clock()
    fine = model.view(params, args.servers)
    setup["ps_view_s"] = _clock() - t0
    t0 = _clock()
    coarse = model.view(params, args.servers, simulated=True)
    setup["coarsen_s"] = _clock() - t0
    t0 = _clock()
    mw = compose(coarse, args.workers)
    setup["compose_s"] = _clock() - t0

    t0 = _clock()
    res = run(mw, None, args.iterations, params.jitter, params.seed, validate_every=0,
              interleave=params.baseline_interleave)
    seconds = _clock() - t0
    checked = run(mw, None, args.validate, params.jitter, params.seed + 1, validate_every=1)
    print(f"{trace.name}: {args.iterations} iterations x {args.workers} workers "
          f"({mw.cg.n} ops per iteration): {seconds:.1f} s", file=sys.stderr, flush=True)

    mw_fine = compose(fine, args.workers)
    t0 = _clock()
    run(mw_fine, None, args.fine_iterations, params.jitter, params.seed, validate_every=0)
    fine_per_iter = (_clock() - t0) / args.fine_iterations

    committed = [trace_file(str(ROOT / "data" / "traces"), t) for t in params.traces]
    rows = [] if args.no_accuracy else accuracy(
        committed, params, args.accuracy_workers, args.accuracy_iterations)
    result = {
        "benchmark": "multi-worker PS simulation (commsched.tictac.sim.run)",
        "trace": str(trace.relative_to(ROOT) if trace.is_absolute() else trace),
        "model": model.name, "mode": model.mode,
        "settings": {"n_workers": args.workers, "n_servers": args.servers,
                     "iterations": args.iterations, "policy": "random baseline",
                     "jitter": params.jitter, "interleave": params.baseline_interleave,
                     "bandwidth_Bps": model.link.bandwidth_Bps,
                     "latency_s": model.link.latency_s, "duplex": params.duplex,
                     "sharding": params.sharding},
        "setup": setup,
        "headline": {
            "ops_per_worker_full": fine.number_of_nodes(),
            "ops_per_worker_coarse": coarse.number_of_nodes(),
            "ops_per_iteration": mw.cg.n,
            "seconds": seconds,
            "iterations_per_s": args.iterations / seconds,
            "mean_iteration_time_s": float(res.iteration_time.mean()),
            "validated_iterations": checked.validated,
        },
        "fine": {"ops_per_iteration": mw_fine.cg.n, "seconds_per_iteration": fine_per_iter,
                 "extrapolated_seconds": fine_per_iter * args.iterations},
        "accuracy": rows,
        "target": f"< {TARGET_S:g} s for {args.iterations} iterations of {args.workers} workers",
        "target_met": seconds < TARGET_S,
    }
    return report(args.out, result, f"{model.name}/{model.mode}: {seconds:.1f} s",
                  f"< {TARGET_S:g} s",
                  f"; full graph would take {fine_per_iter * args.iterations:.0f} s")


if __name__ == "__main__":
    sys.exit(main())
