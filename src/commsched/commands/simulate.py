"""``commsched simulate GRAPH``: run the priority executor (TicTac Sec. 3 semantics)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from commsched.io.chrome import write_chrome_trace
from commsched.io.priorities import load_priorities
from commsched.model import graph
from commsched.sim import check_schedule, simulate_compiled
from commsched.validation import SEED, input_file, output_file


def register(sub: Any) -> None:
    p = sub.add_parser("simulate", help="simulate an op graph with the priority executor")
    p.add_argument("graph", type=input_file, help="op graph (node-link JSON)")
    p.add_argument("--priorities", type=input_file,
                   help='JSON {"priorities": {op: number}} or name<TAB>priority lines, '
                   "overriding the graph")
    p.add_argument("--tie", choices=["fifo", "random"], default="fifo", help="tie policy")
    p.add_argument("--seed", type=SEED, default=0, help="seed of the random tie policy")
    p.add_argument("--json", action="store_true", help="print makespan and every op's times")
    p.add_argument("--chrome-trace", metavar="FILE", type=output_file,
                   help="write a Chrome/Perfetto trace")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    g = graph.load(args.graph)
    prios = load_priorities(args.priorities) if args.priorities else None
    cg = graph.compile_graph(g, prios, args.priorities)
    s = simulate_compiled(cg, tie=args.tie, seed=args.seed)
    check_schedule(cg, s)
    if args.chrome_trace:
        write_chrome_trace(args.chrome_trace, cg, s)
    if args.json:
        print(json.dumps(s.to_json()))
    else:
        print(f"makespan {s.makespan:.6g} s ({cg.n} ops)")
    return 0
