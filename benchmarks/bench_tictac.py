"""Benchmark of TIC and TAC (TicTac Alg. 2, 3) on a large training graph: under 1 s each.

The authors report about 10 s for their ordering wizard on their models (TicTac, SysML
2019). The graph is the parameter-server view (:func:`commsched.views.ps.ps_view`, one
server, default link) of the largest traced training graph in ``data/traces``
(``*-train-*.json.gz``, largest file); when there is none, a seeded synthetic DNN-like
training graph of similar size: ``--layers`` layers, each with a forward chain, a backward
chain twice as long that needs the forward activations, ``--params`` parameters per layer
(a recv each, read by one forward and one backward op) and a send per parameter.

Times :func:`commsched.tictac.order.tic` and :func:`~commsched.tictac.order.tac` (median
of ``--repeat`` runs, each from the op graph, including the dependency analysis), checks
that the priorities cover the recvs and that the TAC order simulates to a valid schedule,
and writes ``benchmarks/results/tictac.json``.

Run: ``python benchmarks/bench_tictac.py`` (about 10 s on 2 cores).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
from pathlib import Path

import networkx as nx
from benchlib import report, timed

from commsched.model.graph import add_op, compile_graph, new_graph
from commsched.sim import check_schedule, simulate_compiled
from commsched.tictac.order import tac, tic

TARGET_S = 1.0
ROOT = Path(__file__).resolve().parent.parent


def synthetic_training_graph(layers: int, params: int, fwd: int, seed: int) -> nx.DiGraph:
    """A seeded DNN-like PS worker graph: recvs, forward, backward, sends.

    Layer ``l`` has a forward chain of ``fwd`` ops (its first op follows the previous
    layer's last) and a backward chain of ``2 fwd`` ops (its first op follows the next
    layer's backward chain; backward op ``2k`` also needs forward op ``k``). Each of the
    layer's ``params`` parameters has a recv on ``net:ps0`` read by a random forward op
    and a random backward op, and a send on ``net:ps0:up`` after the last backward op.
    """
    rng = random.Random(seed)
    g = new_graph({"cpu": 1, "net:ps0": 1, "net:ps0:up": 1}, view="synthetic")
    for l_ in range(layers):
        for k in range(fwd):
            add_op(g, f"f{l_}.{k}", "compute", "cpu", rng.uniform(1e-5, 1e-3))
            if k:
                g.add_edge(f"f{l_}.{k - 1}", f"f{l_}.{k}")
        if l_:
            g.add_edge(f"f{l_ - 1}.{fwd - 1}", f"f{l_}.0")
    for l_ in reversed(range(layers)):
        for k in range(2 * fwd):
            add_op(g, f"b{l_}.{k}", "compute", "cpu", rng.uniform(1e-5, 2e-3))
            g.add_edge(f"b{l_}.{k - 1}" if k else
                       (f"b{l_ + 1}.{2 * fwd - 1}" if l_ + 1 < layers else f"f{layers - 1}."
                        f"{fwd - 1}"), f"b{l_}.{k}")
            if k % 2 == 0:
                g.add_edge(f"f{l_}.{k // 2}", f"b{l_}.{k}")
        for j in range(params):
            v = f"w{l_}.{j}"
            add_op(g, f"recv:{v}", "recv", "net:ps0", rng.uniform(1e-5, 3e-3), param=v)
            add_op(g, f"send:{v}", "send", "net:ps0:up", rng.uniform(1e-5, 3e-3), param=v)
            g.add_edge(f"recv:{v}", f"f{l_}.{rng.randrange(fwd)}")
            g.add_edge(f"recv:{v}", f"b{l_}.{rng.randrange(2 * fwd)}")
            g.add_edge(f"b{l_}.{2 * fwd - 1}", f"send:{v}")
    return g


def largest_training_trace() -> Path | None:
    files = sorted((ROOT / "data" / "traces").glob("*-train-*.json.gz"),
                   key=lambda p: (p.stat().st_size, p.name))
    return files[-1] if files else None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--layers", type=int, default=100)
    p.add_argument("--params", type=int, default=3)
    p.add_argument("--fwd", type=int, default=14, help="forward ops per layer")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--synthetic", action="store_true", help="ignore data/traces")
    p.add_argument("--repeat", type=int, default=3, choices=range(1, 101), metavar="1..100")
    p.add_argument("--out", default=str(Path(__file__).parent / "results" / "tictac.json"))
    args = p.parse_args(argv)

    trace = None if args.synthetic else largest_training_trace()
    if trace is not None:
        from commsched.model.traced import load_trace
        from commsched.views.ps import ps_view

        g = ps_view(load_trace(trace))
        source = {"kind": "trace", "path": str(trace.relative_to(ROOT)),
                  "view": "commsched.views.ps.ps_view(n_servers=1, default link)"}
    else:
        g = synthetic_training_graph(args.layers, args.params, args.fwd, args.seed)
        source = {"kind": "synthetic", "layers": args.layers, "params_per_layer": args.params,
                  "forward_ops_per_layer": args.fwd, "seed": args.seed,
                  "why": "no traced training graph in data/traces" if not args.synthetic
                  else "--synthetic"}
    recvs = {n for n, a in g.nodes(data=True) if a["kind"] == "recv"}
    tic_times, tic_p = timed(lambda: tic(g), args.repeat)
    tac_times, tac_p = timed(lambda: tac(g), args.repeat)
    if set(tic_p) != recvs or set(tac_p) != recvs:
        raise SystemExit("priorities do not cover exactly the recv ops")
    cg = compile_graph(g, {k: float(v) for k, v in tac_p.items()})
    sched = simulate_compiled(cg)
    check_schedule(cg, sched)

    med = statistics.median
    result = {
        "benchmark": "TicTac TIC and TAC orders (commsched.tictac.order)",
        "graph": source,
        "ops": g.number_of_nodes(),
        "edges": g.number_of_edges(),
        "recvs": len(recvs),
        "repeat": args.repeat,
        "seconds": {
            "tic_median": med(tic_times),
            "tac_median": med(tac_times),
            "tic_runs": tic_times,
            "tac_runs": tac_times,
        },
        "tic_distinct_priorities": len(set(tic_p.values())),
        "tac_makespan": sched.makespan,
        "schedule_valid": True,
        "target": f"< {TARGET_S:g} s each (authors: about 10 s)",
        "target_met": med(tic_times) < TARGET_S and med(tac_times) < TARGET_S,
    }
    return report(args.out, result,
                  f"{source['kind']} graph, {result['ops']} ops, {result['recvs']} recvs: "
                  f"TIC {med(tic_times):.3f} s, TAC {med(tac_times):.3f} s",
                  f"< {TARGET_S:g} s each")


if __name__ == "__main__":
    sys.exit(main())
