"""Benchmark of the EchelonFlow schedulers and the exact solver (issue 11, items 4 and 8).

Measured (``benchmarks/results/echelon_core.json``):

* ``exact``: :func:`commsched.echelon.exact.solve_exact` (event-position MILP, HiGHS) on
  seeded random instances of :func:`commsched.echelon.exact.random_instance` (3 hosts) of
  4 to 12 flows: wall and CPU time per instance (the upper bound from the heuristics is
  given, so only the MILP and its polishing LP are timed; every optimum is proven within
  ``--time-limit`` wall seconds per solve, else the run stops with the solver's error).
* ``policies``: every policy of :data:`commsched.echelon.exact.POLICIES` (fair sharing,
  Varys' ``sebf`` and the EchelonFlow schedulers) on one seeded random instance of
  ``--flows`` flows (EchelonFlows of 6 flows on a 32-host big switch, releases spread):
  wall and CPU time of the simulation, policy calls, objective.

The machine is shared (several engineers on 2 cores): the record carries the load
average; CPU time (``time.process_time``) is what the work itself costs.

Run: ``python benchmarks/bench_echelon_core.py`` (about a minute on an idle machine).
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from benchlib import write_result

from commsched.echelon.exact import POLICIES, random_instance, solve_exact
from commsched.echelon.model import FlowTable, flow_table, simulate_echelonflows
from commsched.echelon.schedulers import FLOW_SCHEDULERS
from commsched.sim.flow import View, big_switch


def _clock(fn: Any) -> tuple[float, float, Any]:
    w, c = time.perf_counter(), time.process_time()
    out = fn()
    return time.perf_counter() - w, time.process_time() - c, out


def bench_exact(sizes: list[tuple[int, int]], repeats: int, seed: int,
                time_limit: float) -> list[dict]:
    rows = []
    net = big_switch(3, 1.0)
    for groups, k in sizes:
        rng = np.random.default_rng(seed)
        for rep in range(repeats):
            tab = flow_table(random_instance(rng, 3, groups, k))
            edf = FLOW_SCHEDULERS["echelon-edf-bottleneck"]()
            ub = simulate_echelonflows(net, tab, edf).objective
            wall, cpu, res = _clock(lambda tab=tab, ub=ub: solve_exact(
                net, tab, upper=ub, time_limit=time_limit))
            rows.append({"case": "exact", "flows": tab.n, "groups": groups, "repeat": rep,
                         "wall_s": round(wall, 4), "cpu_s": round(cpu, 4),
                         "objective": res.objective})
            print(rows[-1], flush=True)
    return rows


def _spread(tab: FlowTable, factor: float) -> FlowTable:
    """The same instance with releases and ideal times stretched by ``factor``."""
    return FlowTable(tab.src, tab.dst, tab.size, tab.release * factor, tab.ideal * factor,
                     tab.group, tab.index, tab.weight)


def bench_policies(flows: int, seed: int) -> list[dict]:
    rng = np.random.default_rng(seed)
    tab = _spread(flow_table(random_instance(rng, 32, max(1, flows // 6), 6)), 30.0)
    net = big_switch(32, 1.0)
    rows = []
    for name, make in POLICIES.items():
        calls = 0
        inner = make()

        def counted(view: View, inner: Any = inner) -> np.ndarray:
            nonlocal calls
            calls += 1
            return np.asarray(inner(view))

        wall, cpu, run = _clock(lambda: simulate_echelonflows(net, tab, counted))
        rows.append({"case": "policies", "policy": name, "flows": tab.n,
                     "echelonflows": tab.groups, "wall_s": round(wall, 3),
                     "cpu_s": round(cpu, 3), "policy_calls": calls,
                     "objective": round(run.objective, 3)})
        print(rows[-1], flush=True)
    return rows


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--flows", type=int, default=1800, help="policies case: flows")
    p.add_argument("--repeats", type=int, default=3, help="exact case: instances per size")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-flows", type=int, default=12, choices=range(4, 13),
                   metavar="4..12", help="exact case: largest instance (flows)")
    p.add_argument("--time-limit", type=float, default=600.0,
                   help="exact case: HiGHS wall-clock limit per solve (s)")
    p.add_argument("--out", default="benchmarks/results/echelon_core.json")
    a = p.parse_args()
    sizes = [(g, k) for g, k in [(2, 2), (3, 2), (2, 4), (4, 2), (5, 2), (3, 4), (6, 2)]
             if g * k <= a.max_flows]
    rows = bench_exact(sizes, a.repeats, a.seed, a.time_limit) + bench_policies(a.flows, a.seed)
    write_result(Path(a.out), {
        "benchmark": "echelon_core", "seed": a.seed, "max_flows": a.max_flows,
        "time_limit_s": a.time_limit,
        "runs": rows,
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
