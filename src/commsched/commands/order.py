"""``commsched order --algo tic|tac GRAPH -o FILE``: TicTac's priority order of the recvs.

Reads any op graph whose parameter transfers are ``recv`` ops and writes the priorities
of TIC (TicTac Alg. 2) or TAC (Alg. 3), :mod:`commsched.tictac.order`, as
``{"priorities": {op id: number}}`` (lower is sent first) or, with ``--format tsv``, as the
``name<TAB>priority`` lines that the authors' tools emit.
"""

from __future__ import annotations

import argparse
from typing import Any

from commsched.errors import CommschedError
from commsched.io.priorities import write_priorities
from commsched.model import graph
from commsched.tictac.order import ORDERINGS
from commsched.validation import input_file, output_file

__all__ = ["register", "run"]


def register(sub: Any) -> None:
    p = sub.add_parser("order", help="priority order of the recv ops (TicTac TIC / TAC)")
    p.add_argument("graph", type=input_file, help="op graph (node-link JSON) with recv ops")
    p.add_argument("--algo", choices=ORDERINGS.choices(), required=True,
                   help="tic: timing-independent (Alg. 2); tac: timing-aware (Alg. 3)")
    p.add_argument("-o", "--output", required=True, type=output_file,
                   help="priorities file to write")
    p.add_argument("--format", choices=["json", "tsv"], default="json",
                   help='json: {"priorities": {op: n}} (default); tsv: name<TAB>priority')
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    g = graph.load(args.graph)
    if not any(a["kind"] == "recv" for _, a in g.nodes(data=True)):
        raise CommschedError(f"{args.graph}: the graph has no recv ops to order")
    prios = ORDERINGS[args.algo](g)
    write_priorities(args.output, {op: float(p) for op, p in prios.items()}, args.format)
    print(f"{args.algo}: {len(prios)} recv priorities ({len(set(prios.values()))} distinct) "
          f"-> {args.output}")
    return 0
