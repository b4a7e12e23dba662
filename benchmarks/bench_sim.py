"""Benchmark of the priority simulator: growth from 10k to 1M ops (2 edges per op); target
1,000,000 ops and 2,000,000 edges in at most 5 s (issue 25, item 3).

For each size in ``--ops`` builds a seeded random DAG (ops on four resources of capacities
4, 2, 1, 1; edges from an op to a later op at most ``--window`` positions ahead, so the
graph has both depth and parallelism; half the ops carry a random priority so both ready
queues are used), then times :func:`commsched.model.graph.compile_graph` and
:func:`commsched.sim.simulate_compiled` (fifo and random ties; median of ``--repeat``
runs, one run at 1M), validates the schedule with :func:`commsched.sim.check_schedule`,
and writes ``benchmarks/results/sim.json`` with the time per op at each size (constant
when the cost grows linearly) and the peak resident memory of the process.

Run: ``python benchmarks/bench_sim.py`` (about a minute on 2 cores, mostly building the
1M-op networkx graph).
"""

from __future__ import annotations

import argparse
import random
import resource
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import networkx as nx
from benchlib import timed, write_result

from commsched.model.graph import add_op, compile_graph, new_graph
from commsched.sim import check_schedule, simulate_compiled

RESOURCES = {"cpu": 4, "gpu": 2, "net": 1, "pcie": 1}
TARGET_S = 5.0


def random_dag(ops: int, edges: int, window: int, seed: int) -> nx.DiGraph:
    """A seeded random op graph with ``ops`` ops and exactly ``edges`` distinct edges."""
    if edges > ops * window:
        raise ValueError("too many edges for the window")
    rng = random.Random(seed)
    names = list(RESOURCES)
    g = new_graph(RESOURCES)
    for i in range(ops):
        attrs = {"priority": rng.randrange(ops)} if rng.random() < 0.5 else {}
        add_op(g, f"op{i}", "compute", rng.choice(names), rng.uniform(1e-3, 1e-2), **attrs)
    chosen: set[tuple[int, int]] = set()
    while len(chosen) < edges:
        v = rng.randrange(1, ops)
        chosen.add((rng.randrange(max(0, v - window), v), v))
    g.add_edges_from((f"op{u}", f"op{v}") for u, v in sorted(chosen))
    return g


def measure(ops: int, window: int, repeat: int, seed: int) -> dict[str, Any]:
    """Build, compile, simulate and check one random DAG of ``ops`` ops, ``2 * ops`` edges."""
    t = time.perf_counter()
    g = random_dag(ops, 2 * ops, window, seed)
    build_s = time.perf_counter() - t
    compile_times, cg = timed(lambda: compile_graph(g), repeat)
    fifo_times, sched = timed(lambda: simulate_compiled(cg), repeat)
    rand_times, _ = timed(lambda: simulate_compiled(cg, tie="random", seed=1), repeat)
    t = time.perf_counter()
    check_schedule(cg, sched)
    check_s = time.perf_counter() - t
    med = statistics.median
    total = med(compile_times) + med(fifo_times)
    return {
        "ops": g.number_of_nodes(),
        "edges": g.number_of_edges(),
        "prioritized_ops": sum(1 for _, a in g.nodes(data="priority") if a is not None),
        "repeat": repeat,
        "seconds": {
            "compile_graph_median": med(compile_times),
            "simulate_fifo_median": med(fifo_times),
            "simulate_random_median": med(rand_times),
            "compile_plus_simulate_fifo": total,
            "check_schedule": check_s,
            "build_graph": build_s,
        },
        "us_per_op": {"compile_graph": 1e6 * med(compile_times) / ops,
                      "simulate_fifo": 1e6 * med(fifo_times) / ops},
        "makespan": sched.makespan,
        "schedule_valid": True,
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--ops", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    p.add_argument("--window", type=int, default=1000, help="max distance of an edge")
    p.add_argument("--repeat", type=int, default=5, choices=range(1, 101), metavar="1..100",
                   help="runs per size below 1M ops (one at 1M and above)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=str(Path(__file__).parent / "results" / "sim.json"))
    args = p.parse_args(argv)

    runs = []
    for ops in args.ops:
        r = measure(ops, args.window, args.repeat if ops < 1_000_000 else 1, args.seed)
        runs.append(r)
        sec = r["seconds"]
        print(f"{r['ops']} ops, {r['edges']} edges: compile {sec['compile_graph_median']:.3f} s "
              f"+ simulate {sec['simulate_fifo_median']:.3f} s = "
              f"{sec['compile_plus_simulate_fifo']:.3f} s "
              f"({r['us_per_op']['simulate_fifo']:.2f} us/op simulate)", flush=True)
    big = max(runs, key=lambda r: r["ops"])
    total = big["seconds"]["compile_plus_simulate_fifo"]
    result = {
        "benchmark": "priority simulator (commsched.sim.priority)",
        "resources": RESOURCES,
        "seed": args.seed,
        "window": args.window,
        "runs": runs,
        "target": f"<= {TARGET_S:g} s for compile_graph + simulate_compiled at "
                  f"{big['ops']} ops / {big['edges']} edges",
        "target_met": total <= TARGET_S,
    }
    write_result(args.out, result)
    print(f"target {result['target']}: {'met' if result['target_met'] else 'MISSED'} "
          f"({total:.3f} s); wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
