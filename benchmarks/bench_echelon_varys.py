"""FB2010 replayed with each of Varys' simulator's modelling choices switched on (issue 25).

Issue 25 found our FB2010 average CCT under SEBF 18% below Varys' own simulator's
(``coflow/coflowsim``) and the fair/SEBF ratio 3.27 where that simulator gives 2.47. Each
modelling difference is a switch of :func:`commsched.echelon.coflow.replay`; this script
replays ``data/coflow/FB2010-1Hr-150-0.txt`` with each switch alone and combined and records
the average (and 95th-percentile) CCT, the policy calls and the time of each run in
``benchmarks/results/echelon_varys.json``:

=========  ===============================================================================
``none``   this package's model (the pipeline's numbers)
``a``      ``rate_updates="coflow"``: rates recomputed only when a Coflow arrives or departs
``b``      ``backfill="greedy"``: flow-by-flow back-fill in Varys' simulator's deadline order
``c``      ``quantum_s=VARYS_QUANTUM_S``: rates change every 8 ms only, finishes rounded up
``d``      ``port_rate=VARYS_PORT_RATE``: 2^30 bit per 1024 trace ms
``e``      ``epoch_s=VARYS_EPOCH_S``: Coflows admitted at the start of 10.24 s epochs
``ab``     a and b
``acde``   all but b
``all``    a, b, c, d and e (Varys' simulator as modelled here)
``cde``    c, d and e (the switches that apply to per-flow fairness, whose rates Varys'
           simulator recomputes at every step)
=========  ===============================================================================

``a`` and ``b`` apply to the Coflow schedulers only. ``b`` alone is not run by default:
its back-fill gives a Coflow's flows different finish times and each completion then
recomputes every rate (hundreds of thousands of recomputations over ~100k active flows:
well over an hour on the shared machine, about as long with 8 ms quanta; ``--runs
sebf:b`` runs it); ``--skip`` leaves runs out. The CCTs are deterministic; the times are
upper bounds on a shared 2-core machine (load recorded; the first run's time includes
compiling the kernels).

Run: ``python benchmarks/bench_echelon_varys.py`` (``--runs sebf:ab fair-ports:cde`` for a
subset).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

from benchlib import write_result

from commsched.echelon.coflow import (
    VARYS_EPOCH_S,
    VARYS_PORT_RATE,
    VARYS_QUANTUM_S,
    replay,
)
from commsched.io.coflow import read_coflow_trace

FB2010 = "data/coflow/FB2010-1Hr-150-0.txt"

A = {"rate_updates": "coflow"}
B = {"backfill": "greedy"}
C = {"quantum_s": VARYS_QUANTUM_S}
D = {"port_rate": VARYS_PORT_RATE}
E = {"epoch_s": VARYS_EPOCH_S}
SWITCHES: dict[str, dict[str, Any]] = {
    "none": {}, "a": A, "b": B, "c": C, "d": D, "e": E, "ab": {**A, **B},
    "acde": {**A, **C, **D, **E}, "all": {**A, **B, **C, **D, **E}, "cde": {**C, **D, **E}}
# the slow runs last (per-flow fairness in quanta); ``b`` alone only when asked for
RUNS = ([f"{s}:{w}" for s in ("sebf", "sebf-static")
         for w in ("none", "a", "c", "d", "e", "ab", "acde", "all")]
        + [f"fair-ports:{w}" for w in ("none", "d", "e", "cde", "c")])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", nargs="+", default=RUNS, metavar="SCHEDULER:SWITCH",
                   help=f"switches: {', '.join(SWITCHES)}")
    p.add_argument("--skip", nargs="*", default=[], metavar="SCHEDULER:SWITCH")
    p.add_argument("--out", default="benchmarks/results/echelon_varys.json")
    args = p.parse_args()
    runs = [r for r in args.runs if r not in args.skip]
    bad = [r for r in runs if r.partition(":")[2] not in SWITCHES]
    if bad:
        print(f"unknown switch in {', '.join(bad)}", file=sys.stderr)
        return 2
    trace = read_coflow_trace(FB2010)
    rows: list[dict[str, Any]] = []
    for run in runs:
        scheduler, _, switch = run.partition(":")
        load = [round(x, 2) for x in os.getloadavg()]
        t, c = time.perf_counter(), time.process_time()
        df = replay(trace, scheduler, **SWITCHES[switch])
        rows.append({"scheduler": scheduler, "switch": switch,
                     "options": dict(SWITCHES[switch]),
                     "avg_cct_s": float(df["cct"].mean()),
                     "p95_cct_s": float(df["cct"].quantile(0.95)),
                     "events": df.attrs["events"],
                     "wall_s": round(time.perf_counter() - t, 1),
                     "cpu_s": round(time.process_time() - c, 1), "load_average_before": load})
        print(rows[-1], flush=True)
        write_result(Path(args.out), {"benchmark": "echelon_varys", "trace": FB2010,
                                      "runs": rows, "complete": len(rows) == len(runs)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
