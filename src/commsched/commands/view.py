"""``commsched view ps|allreduce TRACE -o FILE``: derive a communication view of a trace.

``ps`` builds the parameter-server worker partition (TicTac Sec. 2.3-2.4,
:func:`commsched.views.ps_view`); ``allreduce`` builds PACE's all-reduce DAG (Sec. IV-A,
:func:`commsched.views.allreduce_view`). The link is a preset (``--link 10GbE``) or
``--bandwidth`` bytes/s; ``--latency`` overrides the latency. The all-reduce time is the
ring model of ``--workers`` workers over that link, or ``--linear A B`` (seconds, seconds
per byte), e.g. the fit of a measurement.
"""

from __future__ import annotations

import argparse
from typing import Any

from commsched.cost import PRESETS, AllReduceModel, LinearModel, LinkModel, RingAllReduce
from commsched.model import graph
from commsched.model.traced import load_trace
from commsched.validation import MAX_SECONDS, flag, input_file, output_file
from commsched.views import allreduce_view, ps_view


def _link_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--link", choices=sorted(PRESETS), default="10GbE", help="link preset")
    p.add_argument("--bandwidth", type=flag(0, 1e15, lo_open=True),
                   help="bytes/s (overrides the preset's)")
    p.add_argument("--latency", type=flag(0, MAX_SECONDS),
                   help="seconds (overrides the preset's)")


def register(sub: Any) -> None:
    p = sub.add_parser("view", help="derive the parameter-server or all-reduce view of a trace")
    vs = p.add_subparsers(dest="view", metavar="VIEW", required=True)
    ps = vs.add_parser("ps", help="parameter-server worker partition (TicTac Sec. 2.3)")
    ps.add_argument("trace", type=input_file, help="traced graph (data/traces/*.json)")
    ps.add_argument("-o", "--output", required=True, type=output_file, help="op graph to write")
    ps.add_argument("--servers", type=flag(1, 4096, integer=True), default=1,
                    help="number of parameter servers")
    ps.add_argument("--sharding", choices=["round_robin", "greedy", "size"],
                    default="round_robin")
    ps.add_argument("--simplex", action="store_true",
                    help="sends share the recv channel (default: own uplink channel)")
    _link_args(ps)
    ar = vs.add_parser("allreduce", help="all-reduce DAG (PACE Sec. IV-A)")
    ar.add_argument("trace", type=input_file, help="traced graph of a training iteration")
    ar.add_argument("-o", "--output", required=True, type=output_file, help="op graph to write")
    ar.add_argument("--workers", type=flag(1, 2**20, integer=True), default=2,
                    help="ring size of the ring model")
    ar.add_argument("--linear", type=flag(0, MAX_SECONDS), nargs=2, metavar=("A", "B"),
                    help="use T(s) = A + B*s instead of the ring model")
    ar.add_argument("--no-next-forward", action="store_true",
                    help="do not append the next iteration's forward ops")
    _link_args(ar)
    p.set_defaults(func=run)


def _link(args: argparse.Namespace) -> LinkModel:
    base = LinkModel.preset(args.link, args.latency)
    if args.bandwidth is not None:
        return LinkModel(base.latency_s, args.bandwidth)
    return base


def run(args: argparse.Namespace) -> int:
    trace = load_trace(args.trace)  # errors name the file
    link = _link(args)
    if args.view == "ps":
        v = ps_view(trace, n_servers=args.servers, sharding=args.sharding, link=link,
                    duplex=not args.simplex)
        what = f"{len(v.graph['recvs'])} recvs, {len(v.graph['sends'])} sends"
    else:
        model: AllReduceModel = (LinearModel(*args.linear) if args.linear
                                 else RingAllReduce(args.workers, link))
        v = allreduce_view(trace, model, next_forward=not args.no_next_forward)
        what = f"{len(v.graph['allreduces'])} all-reduces"
    graph.save(v, args.output)
    print(f"{args.output}: {v.number_of_nodes()} ops ({what})")
    return 0
