"""``commsched validate FILE``: check an op graph file, report the first problem."""

from __future__ import annotations

import argparse
from typing import Any

from commsched.model import graph
from commsched.validation import input_file


def register(sub: Any) -> None:
    p = sub.add_parser("validate", help="check an op graph file")
    p.add_argument("file", type=input_file, help="op graph (node-link JSON)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    g = graph.load(args.file)
    print(f"{args.file}: ok ({g.number_of_nodes()} ops, {g.number_of_edges()} edges)")
    return 0
