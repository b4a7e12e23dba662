"""Benchmark of the flow-level simulator on Coflow replays (issue 11, item 8; issue 25, item 1).

Measured (``benchmarks/results/echelon.json``), each case in a fresh subprocess (its peak
resident memory is the process's ``ru_maxrss``):

* ``fb2010``: the replay of ``data/coflow/FB2010-1Hr-150-0.txt`` (526 Coflows, 706,397
  flows, 150 ports at 1 Gbit/s) under every scheduler of
  :data:`commsched.echelon.coflow.COFLOW_SCHEDULERS`: wall time of
  :func:`commsched.echelon.coflow.replay` (trace reading excluded) and its CPU time
  (``time.process_time``: what the replay itself costs when the machine is shared), events
  (rate allocations), average CCT. Target (issue 25): each <= 10 s wall on 2 cores.
* ``synthetic``: seeded random traces of ``--flows`` flows (default 100k, target <= 5 s,
  and 1M, measured): Coflows arrive as a Poisson process on 150 ports, with 1-20 mappers
  and 1-20 reducers each and log-normal reducer sizes, replayed under ``fair`` and
  ``sebf``.

Each case first replays a 20-Coflow trace in the same process so that the numba kernels
are compiled (or loaded from their on-disk cache) before the clock starts; the time that
takes is recorded as ``warmup_s``. The timed replay runs under cProfile (a few hundred
thousand Python-level calls at most, each compiled kernel call one of them: well under a
second of overhead); ``profile`` records the functions with the largest own time and their
share of the replay's wall time, which says where a replay that misses its target spends
it (the compiled kernels show as the Python calls that enter them).

The machine is shared (several engineers on 2 cores while these numbers were taken): the
record carries the load average; compare timings only between runs of similar load.

Run: ``python benchmarks/bench_echelon.py`` (a few minutes; ``--skip-fb2010`` runs the
synthetic cases only). The pipeline measures the same FB2010 replays too: rule
``echelon_replay_run`` writes each one's wall time, CPU time and peak RSS to
``results/benchmarks/echelon_replay_<scheduler>.tsv``.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from benchlib import write_result

from commsched.echelon.coflow import COFLOW_SCHEDULERS, replay
from commsched.io.coflow import CoflowTrace, read_coflow_trace

FB2010 = "data/coflow/FB2010-1Hr-150-0.txt"


def synthetic_trace(flows: int, seed: int = 0, ports: int = 150) -> CoflowTrace:
    """Seeded random Coflows until ``flows`` flows (the last Coflow trimmed to fit)."""
    rng = np.random.default_rng(seed)
    ids, arr, maps, reds, mbs = [], [], [], [], []
    t, n = 0.0, 0
    while n < flows:
        m = int(rng.integers(1, 21))
        r = int(min(rng.integers(1, 21), max(1, (flows - n) // m)))
        t += float(rng.exponential(200.0))  # ms between arrivals
        ids.append(len(ids) + 1)
        arr.append(round(t))
        maps.append(np.sort(rng.choice(ports, m, replace=False)))
        reds.append(np.sort(rng.choice(ports, r, replace=False)))
        mbs.append(np.round(rng.lognormal(2.0, 1.5, r), 1) + 0.1)
        n += m * r
    return CoflowTrace(ports, np.array(ids), np.array(arr, dtype=float), tuple(maps),
                       tuple(reds), tuple(mbs))


def one(case: str, scheduler: str, flows: int) -> dict[str, Any]:
    trace = read_coflow_trace(FB2010) if case == "fb2010" else synthetic_trace(flows)
    t = time.perf_counter()
    replay(synthetic_trace(2000, seed=1), scheduler)
    warmup = time.perf_counter() - t
    prof = cProfile.Profile()
    t, c = time.perf_counter(), time.process_time()
    prof.enable()
    df = replay(trace, scheduler)
    prof.disable()
    wall, cpu = time.perf_counter() - t, time.process_time() - c
    stats = pstats.Stats(prof).stats  # type: ignore[attr-defined]
    top = sorted(((v[2], f"{Path(k[0]).name}:{k[2]}") for k, v in stats.items()), reverse=True)
    return {"case": case, "scheduler": scheduler, "coflows": len(df),
            "flows": int(df["width"].sum()), "wall_s": round(wall, 3), "cpu_s": round(cpu, 3),
            "events": df.attrs["events"], "warmup_s": round(warmup, 3),
            "avg_cct_s": float(df["cct"].mean()),
            "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
            "profile": {name: round(own / wall, 3) for own, name in top[:5]}}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--schedulers", nargs="+", default=sorted(COFLOW_SCHEDULERS))
    p.add_argument("--flows", type=int, nargs="+", default=[100_000, 1_000_000],
                   help="synthetic trace sizes")
    p.add_argument("--skip-fb2010", action="store_true")
    p.add_argument("--out", default="benchmarks/results/echelon.json")
    p.add_argument("--one", nargs=2, metavar=("CASE", "SCHEDULER"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.one:
        print(json.dumps(one(args.one[0], args.one[1], args.flows[0])))
        return 0
    cases = [] if args.skip_fb2010 else [("fb2010", s, 0) for s in args.schedulers]
    cases += [("synthetic", s, n) for n in args.flows for s in ("fair", "sebf")]
    rows = []
    for case, s, n in cases:
        load = [round(x, 2) for x in os.getloadavg()]
        out = subprocess.run([sys.executable, __file__, "--one", case, s, "--flows", str(n)],
                             capture_output=True, text=True, check=True)
        rows.append({**json.loads(out.stdout), "load_average_before": load})
        print(rows[-1], flush=True)
        write_result(Path(args.out), {"benchmark": "echelon", "flows_synthetic": args.flows,
                                      "target_s": {"fb2010": 10.0, "synthetic_100000": 5.0},
                                      "runs": rows, "complete": len(rows) == len(cases)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
