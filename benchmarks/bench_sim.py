"""Benchmark of the priority simulator: 100,000 ops and 200,000 edges in under 2 s.

Builds a seeded random DAG (ops on four resources of capacities 4, 2, 1, 1; edges from an
op to a later op at most ``--window`` positions ahead, so the graph has both depth and
parallelism; half the ops carry a random priority so both ready queues are used), then
times :func:`commsched.model.graph.compile_graph` and
:func:`commsched.sim.simulate_compiled` (fifo and random ties; median of ``--repeat``
runs), validates one schedule with :func:`commsched.sim.check_schedule`, and writes
``benchmarks/results/sim.json``.

Run: ``python benchmarks/bench_sim.py`` (about 15 s on 2 cores, mostly building the graph).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

import networkx as nx
from benchlib import timed, write_result

from commsched.model.graph import add_op, compile_graph, new_graph
from commsched.sim import check_schedule, simulate_compiled

RESOURCES = {"cpu": 4, "gpu": 2, "net": 1, "pcie": 1}
TARGET_S = 2.0


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


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--ops", type=int, default=100_000)
    p.add_argument("--edges", type=int, default=200_000)
    p.add_argument("--window", type=int, default=1000, help="max distance of an edge")
    p.add_argument("--repeat", type=int, default=5, choices=range(1, 101), metavar="1..100")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=str(Path(__file__).parent / "results" / "sim.json"))
    args = p.parse_args(argv)

    t = time.perf_counter()
    g = random_dag(args.ops, args.edges, args.window, args.seed)
    build_s = time.perf_counter() - t
    compile_times, cg = timed(lambda: compile_graph(g), args.repeat)
    fifo_times, sched = timed(lambda: simulate_compiled(cg), args.repeat)
    rand_times, _ = timed(lambda: simulate_compiled(cg, tie="random", seed=1), args.repeat)
    t = time.perf_counter()
    check_schedule(cg, sched)
    check_s = time.perf_counter() - t

    med = statistics.median
    total = med(compile_times) + med(fifo_times)
    result = {
        "benchmark": "priority simulator (commsched.sim.priority)",
        "ops": g.number_of_nodes(),
        "edges": g.number_of_edges(),
        "resources": RESOURCES,
        "prioritized_ops": sum(1 for _, a in g.nodes(data="priority") if a is not None),
        "seed": args.seed,
        "window": args.window,
        "repeat": args.repeat,
        "seconds": {
            "compile_graph_median": med(compile_times),
            "simulate_fifo_median": med(fifo_times),
            "simulate_random_median": med(rand_times),
            "compile_plus_simulate_fifo": total,
            "check_schedule": check_s,
            "build_graph": build_s,
            "compile_graph_runs": compile_times,
            "simulate_fifo_runs": fifo_times,
            "simulate_random_runs": rand_times,
        },
        "makespan": sched.makespan,
        "schedule_valid": True,
        "target": f"< {TARGET_S:g} s for compile_graph + simulate_compiled",
        "target_met": total < TARGET_S,
    }
    write_result(args.out, result)
    print(f"{result['ops']} ops, {result['edges']} edges: compile {med(compile_times):.3f} s "
          f"+ simulate {med(fifo_times):.3f} s = {total:.3f} s (target < {TARGET_S:g} s: "
          f"{'met' if result['target_met'] else 'MISSED'}); wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
