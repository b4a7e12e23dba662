"""Benchmark of the coupled compute + network simulation (commsched.echelon.cluster_sim).

Builds the echelon_eval mix (config/config.yaml) at cluster scale: ``--jobs`` jobs on
``--racks`` x 16 hosts under a 4:1 core, ``--iterations`` iterations each, and times
:func:`commsched.echelon.cluster_sim.run_jobs` under per-flow fair sharing with the flow schedule
recorded and validated (as every evaluation run is), and without. Writes
``benchmarks/results/echelon_jobs.json`` with wall times, task and flow counts and the
process' peak RSS. Target: the validated run in under 60 s.

Run: ``python benchmarks/bench_echelon_jobs.py`` (about a minute on 2 cores).
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
from pathlib import Path

from benchlib import report, timed

from commsched.echelon.cluster_sim import run_jobs
from commsched.echelon.experiments.eval import PROFILE_BLOCKS, Scenario, make_jobs
from commsched.echelon.profile import layer_profile
from commsched.io.structured import read_yaml
from commsched.model.traced import load_trace
from commsched.sim.flow import two_tier

TARGET_S = 60.0
ROOT = Path(__file__).resolve().parent.parent


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--jobs", type=int, default=30)
    p.add_argument("--racks", type=int, default=8)
    p.add_argument("--iterations", type=int, default=20)
    p.add_argument("--repeat", type=int, default=1, choices=range(1, 11), metavar="1..10")
    p.add_argument("--out", default=str(Path(__file__).parent / "results" / "echelon_jobs.json"))
    args = p.parse_args(argv)
    cfg = {**read_yaml(ROOT / "config" / "config.yaml")["echelon_eval"],
           "racks": args.racks, "hosts_per_rack": 16, "iterations": args.iterations}
    profiles = {m["trace"]: layer_profile(load_trace(ROOT / "data" / "traces"
                                                     / f"{m['trace']}.json.gz"),
                                          PROFILE_BLOCKS).scaled(cfg["compute_scale"])
                for m in cfg["mix"]}
    net = two_tier(args.racks, 16, float(cfg["link_Bps"]), 4.0)
    jobs = make_jobs(cfg, profiles, Scenario(args.jobs, 4.0, 0))
    rows = {}
    for check in (True, False):
        times, run = timed(lambda c=check: run_jobs(jobs, net, "fair", check=c), args.repeat)
        rows["validated" if check else "unrecorded"] = {
            "wall_s": statistics.median(times), "tasks": len(run.tasks),
            "flows": len(run.flows)}
        print(f"check={check}: {statistics.median(times):.2f} s, {len(run.tasks)} tasks, "
              f"{len(run.flows)} flows")
    wall = rows["validated"]["wall_s"]
    result = {
        "benchmark": ("coupled compute + network simulation "
                      "(commsched.echelon.cluster_sim.run_jobs)"),
        "jobs": args.jobs, "hosts": args.racks * 16, "iterations": args.iterations,
        "repeat": args.repeat, "runs": rows,
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "target": f"< {TARGET_S:g} s validated", "target_met": wall < TARGET_S,
    }
    return report(args.out, result, f"validated run {wall:.2f} s", f"< {TARGET_S:g} s")


if __name__ == "__main__":
    sys.exit(main())
