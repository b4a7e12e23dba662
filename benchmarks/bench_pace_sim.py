"""Benchmark of the all-reduce simulator: one plan on a traced model in under 0.1 s.

For each traced model of the PACE study (VGG-16, ResNet-50, Seq2Seq, Transformer; 12
workers, 10 Gbit/s ring all-reduce with 50 us per ring step, compute as traced, PACE's
unbounded compute), times building the :class:`commsched.pace.sim.Workload` (once per
model and compute scale), each policy's decision (:data:`commsched.pace.policies.POLICIES`:
WFBP, Horovod, P3's many slices, ByteScheduler's tuning grid, PACE's planner) and the
simulation of the decided plan (:meth:`Workload.simulate`, median of ``--repeat`` runs,
with and without the schedule validator). The target is the simulation of one plan with
validation, the unit every sweep point repeats; the slowest of the models must be under
:data:`TARGET_S`. Peak memory: the process's maximum resident set size at the end.

Run: ``python benchmarks/bench_pace_sim.py`` (about a minute on 2 cores); writes
``benchmarks/results/pace_sim.json``.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import time
from pathlib import Path

from benchlib import report, timed

from commsched.cost.allreduce import allreduce_cost
from commsched.model.traced import load_trace
from commsched.pace.baselines import PolicyContext
from commsched.pace.policies import POLICIES as REGISTRY
from commsched.pace.sim import UNBOUNDED, Workload

ROOT = Path(__file__).resolve().parents[1]
TRACES = ("vgg16-train-b2", "resnet50_v1-train-b4", "seq2seq_lstm-train-b4",
          "transformer-train-b4")
POLICIES = ("wfbp", "horovod-0.20", "p3", "bytescheduler", "pace")
TARGET_S = 0.1


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--repeat", type=int, default=5, choices=range(1, 101), metavar="1..100")
    p.add_argument("--workers", type=int, default=12)
    p.add_argument("--bandwidth-gbps", type=float, default=10.0)
    p.add_argument("--out", default=str(Path(__file__).parent / "results" / "pace_sim.json"))
    args = p.parse_args(argv)

    cost = allreduce_cost("ring", args.workers, args.bandwidth_gbps * 1e9 / 8, 50e-6)
    med = statistics.median
    models = {}
    for name in TRACES:
        trace = load_trace(ROOT / "data" / "traces" / f"{name}.json.gz")
        t = time.perf_counter()
        w = Workload(trace, 1.0, UNBOUNDED)
        build_s = time.perf_counter() - t
        rows = {}
        for policy in POLICIES:
            ctx = PolicyContext(w, cost, trace, args.workers, args.bandwidth_gbps * 1e9 / 8)
            t = time.perf_counter()
            d = REGISTRY[policy](ctx)
            decide_s = time.perf_counter() - t
            rel = d.release or None
            checked, run = timed(lambda w=w, d=d, rel=rel: w.simulate(d.plan, cost, rel),
                                 args.repeat)
            bare, _ = timed(lambda w=w, d=d, rel=rel: w.simulate(d.plan, cost, rel,
                                                                  validate=False), args.repeat)
            rows[policy] = {"partitions": len(run.partitions), "decide_s": decide_s,
                            "simulate_validated_median_s": med(checked),
                            "simulate_median_s": med(bare),
                            "iteration_s": run.iteration_time}
        models[name] = {"ops": trace.number_of_nodes(), "gradients": len(w.sizes),
                        "workload_build_s": build_s, "policies": rows}
        print(f"{name}: " + ", ".join(
            f"{k} {v['partitions']} parts {v['simulate_validated_median_s'] * 1e3:.1f} ms"
            for k, v in rows.items()), flush=True)
    worst = max(r["simulate_validated_median_s"] for m in models.values()
                for r in m["policies"].values())
    result = {
        "benchmark": "all-reduce simulator (commsched.pace.sim) on traced models",
        "workers": args.workers, "bandwidth_gbps": args.bandwidth_gbps,
        "latency_s_per_ring_step": 50e-6, "compute_capacity": UNBOUNDED,
        "repeat": args.repeat, "models": models,
        "worst_simulate_validated_s": worst,
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "target": f"< {TARGET_S:g} s to simulate (and validate) one plan, every model and "
                  "policy",
        "target_met": worst < TARGET_S,
    }
    return report(args.out, result, f"slowest validated simulation {worst * 1e3:.1f} ms",
                  f"< {TARGET_S * 1e3:g} ms")


if __name__ == "__main__":
    sys.exit(main())
