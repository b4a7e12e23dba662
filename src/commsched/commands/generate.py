"""``commsched generate``: write a synthetic op graph (TicTac toys, thesis random DAGs).

``commsched generate par|seq --n N -o FILE`` writes TicTac's Par-N / Seq-N toy
(:func:`commsched.trace.synthetic.par_n` / :func:`~commsched.trace.synthetic.seq_n`).

``commsched generate random --levels L ... --seed S -o FILE`` writes the thesis' level-based
random DAG (:func:`commsched.trace.synthetic.level_dag`) as an op graph
(:func:`commsched.io.thesis.to_op_graph`): one ``compute`` op per node on resource ``cpu``
(capacity 1) with ``duration = #operations / --speed`` (unit speed by default), ``bytes``
= tensor size, and the thesis attributes (``tensor_size``, ``operations``, ``ram``,
``constraint``, ``name``, ``colocation``) kept on the op; ``--csv FILE`` also writes the
graph in the thesis' 9-column CSV format.
"""

from __future__ import annotations

import argparse
from typing import Any

from commsched.errors import CommschedError
from commsched.io.thesis import to_op_graph, write_graph
from commsched.model import graph
from commsched.trace.synthetic import level_dag, par_n, seq_n
from commsched.validation import MAX_BYTES, MAX_SECONDS, SEED, flag, output_file, within

#: Largest random DAG (nodes) that ``generate random`` builds.
MAX_NODES = 10**6
COUNT = flag(1, MAX_NODES, integer=True)
PROB = flag(0, 1)
TIME = flag(0, MAX_SECONDS)


def register(sub: Any) -> None:
    p = sub.add_parser("generate", help="write a synthetic op graph (toys, random DAGs)")
    kinds = p.add_subparsers(dest="model", metavar="MODEL", required=True)
    for name, what in (("par", "TicTac Par-N: N concurrent layers"),
                       ("seq", "TicTac Seq-N: N sequential layers")):
        t = kinds.add_parser(name, help=what)
        t.add_argument("--n", type=flag(1, 10**6, integer=True), required=True,
                       help="number of layers (1..1e6)")
        t.add_argument("--recv-time", type=TIME, default=1.0, help="seconds per recv (1)")
        t.add_argument("--compute-time", type=TIME, default=1.0,
                       help="seconds per compute op (1)")
        t.add_argument("-o", "--output", required=True, type=output_file,
                       help="op graph JSON to write")
        t.set_defaults(func=run)
    r = kinds.add_parser("random", help="thesis Sec. 6.2 level-based random DAG")
    r.add_argument("--levels", type=COUNT, default=100, help="number of levels (100)")
    r.add_argument("--min-per-level", type=COUNT, default=1, help="min nodes per level (1)")
    r.add_argument("--max-per-level", type=COUNT, default=80, help="max nodes per level (80)")
    r.add_argument("--edge-prob", type=PROB, default=0.006,
                   help="probability of an edge between nodes of nearby levels (0.006)")
    r.add_argument("--max-level-distance", type=flag(0, 10**6, integer=True), default=4,
                   help="max level distance of an edge, 0 = unlimited (4)")
    r.add_argument("--long-range", type=flag(0, 1e3), default=0.1,
                   help="long-range edge attempts as a fraction of the level edges (0.1)")
    for name, default in (("tensor-size", (1, 100)), ("operations", (1, 100)),
                          ("ram", (1, 100))):
        r.add_argument(f"--{name}", type=flag(0, MAX_BYTES, integer=True), nargs=2, metavar=("LO",
                       "HI"), default=default,
                       help=f"inclusive range of a node's {name} ({default[0]} {default[1]})")
    r.add_argument("--cpu-prob", type=PROB, default=0.01, help="P(constraint CPU) (0.01)")
    r.add_argument("--gpu-prob", type=PROB, default=0.01, help="P(constraint GPU) (0.01)")
    r.add_argument("--tpu-prob", type=PROB, default=0.0, help="P(constraint TPU) (0)")
    r.add_argument("--colocation-scale", type=flag(0, 1e3), default=0.2,
                   help="groups of size k: floor(scale * n * U * 2^-k) (0.2)")
    r.add_argument("--max-colocation-size", type=COUNT, default=None,
                   help="largest colocation group (unbounded)")
    r.add_argument("--speed", type=flag(0, 1e15, lo_open=True), default=1.0,
                   help="operations per second of the one device (1)")
    r.add_argument("--seed", type=SEED, default=0, help="random seed (0)")
    r.add_argument("--csv", metavar="FILE", type=output_file,
                   help="also write the thesis CSV graph")
    r.add_argument("-o", "--output", required=True, type=output_file, help="op graph JSON to write")
    r.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        if args.model == "random":
            within(args.levels * args.max_per_level,
                   "--levels x --max-per-level: nodes of the DAG", MAX_NODES)
            tg = level_dag(
                levels=args.levels, min_per_level=args.min_per_level,
                max_per_level=args.max_per_level, edge_prob=args.edge_prob,
                max_level_distance=args.max_level_distance or None,
                long_range_fraction=args.long_range, tensor_size=tuple(args.tensor_size),
                operations=tuple(args.operations), ram=tuple(args.ram),
                cpu_prob=args.cpu_prob, gpu_prob=args.gpu_prob, tpu_prob=args.tpu_prob,
                colocation_scale=args.colocation_scale,
                max_colocation_size=args.max_colocation_size, seed=args.seed,
            )
            g = to_op_graph(tg, speed=args.speed)
            g.graph["generator"] = tg.graph["generator"]
            if args.csv:
                write_graph(tg, args.csv)
        else:
            make = par_n if args.model == "par" else seq_n
            g = make(args.n, recv_time=args.recv_time, compute_time=args.compute_time)
    except ValueError as e:
        raise CommschedError(str(e)) from None
    graph.save(g, args.output)
    print(f"{args.output}: {g.number_of_nodes()} ops, {g.number_of_edges()} edges")
    return 0
