"""``commsched place GRAPH DEVICES``: partition and schedule a thesis graph (Laich 2017).

GRAPH and DEVICES are in the thesis' CSV formats (:mod:`commsched.io.thesis`).
``--partitioner`` and ``--scheduler`` name members of the registries
(:data:`commsched.placement.PARTITIONERS`, :data:`commsched.placement.DEVICE_SCHEDULERS`;
the thesis' full names are aliases) or ``all``: every combination runs in one process (each
partitioner once). Every placement is checked against the constraints and every schedule
against the validator. ``--json`` prints makespan, traffic and partitioning time (one
object, or a list for several runs); ``--chrome-trace FILE`` writes the schedule of a single
run for ui.perfetto.dev.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from commsched.errors import CommschedError
from commsched.io.chrome import write_chrome_trace
from commsched.io.thesis import read_devices, read_graph
from commsched.placement import (
    DEVICE_SCHEDULERS,
    PARTITIONERS,
    SEMANTICS,
    Cluster,
    Options,
    PlacementError,
    Problem,
)
from commsched.placement.run import run_all
from commsched.placement.sendrecv import DEFAULT_SEND_OPS, exec_names
from commsched.validation import MAX_BYTES, SEED, flag, input_file, output_file


def register(sub: Any) -> None:
    p = sub.add_parser("place", help="partition and schedule a thesis graph on devices")
    p.add_argument("graph", type=input_file, help="graph CSV (thesis format, 6 or 9 columns)")
    p.add_argument("devices", type=input_file, help="device CSV (thesis format)")
    p.add_argument("--partitioner", required=True, choices=[*PARTITIONERS.choices(), "all"],
                   help="partitioner (thesis Ch. 4) or all")
    p.add_argument("--scheduler", required=True, choices=[*DEVICE_SCHEDULERS.choices(), "all"],
                   help="per-device scheduler (thesis Ch. 5) or all")
    p.add_argument("--semantics", choices=SEMANTICS, default="thesis",
                   help="the thesis text (default) or the published Java code's deviations")
    p.add_argument("--seed", type=SEED, default=0, help="seed of every random choice (0)")
    p.add_argument("--send-ops", type=flag(0, MAX_BYTES), default=DEFAULT_SEND_OPS,
                   help=f"operations of a send node ({DEFAULT_SEND_OPS:g})")
    p.add_argument("--link-contention", action="store_true",
                   help="serialise transfers per device pair (our extension)")
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    p.add_argument("--chrome-trace", metavar="FILE", type=output_file,
                   help="write the schedule (one run only)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    parts = list(PARTITIONERS) if args.partitioner == "all" else [args.partitioner]
    scheds = list(DEVICE_SCHEDULERS) if args.scheduler == "all" else [args.scheduler]
    if args.chrome_trace and len(parts) * len(scheds) > 1:
        raise CommschedError("--chrome-trace needs one partitioner and one scheduler")
    problem = Problem.from_thesis(read_graph(args.graph))
    cluster = Cluster.from_devices(read_devices(args.devices))
    opts = Options(args.semantics, args.seed, args.send_ops)
    try:
        results = run_all(problem, cluster, parts, scheds, opts, args.link_contention)
    except PlacementError as e:
        raise CommschedError(f"{args.graph} on {args.devices}: {e}") from None
    if args.chrome_trace:
        r = results[0]
        names = exec_names(problem, r.exec_graph)
        write_chrome_trace(args.chrome_trace, r.exec_graph.compiled(names),
                           r.schedule.as_schedule(names))
    if args.json:
        out = [r.summary() for r in results]
        print(json.dumps(out[0] if len(out) == 1 else out))
    else:
        for r in results:
            print(f"{r.partitioner:12s} {r.scheduler:5s} makespan {r.makespan:.6g} "
                  f"traffic {r.traffic:.6g} partitioning {r.partition_s * 1e3:.1f} ms")
    return 0
