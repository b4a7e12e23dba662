"""``commsched echelon``: EchelonFlow and Coflow scheduling on the flow-level simulator.

``commsched echelon replay TRACE --scheduler S [--port-rate R] -o CCT.csv`` replays a
Coflow-Benchmark trace (e.g. ``data/coflow/FB2010-1Hr-150-0.txt``) on a big switch with one
port per trace port and writes one row per Coflow (id, arrival, finish, completion time in
seconds; total MB and width), atomically, with provenance. ``--epoch S`` admits Coflows in
S-second epochs as Varys' simulator does; ``--rate-updates coflow``, ``--backfill greedy``
and ``--quantum S`` emulate its other modelling choices (``echelon.coflow.replay``).
"""

from __future__ import annotations

import argparse
from typing import Any

from commsched.validation import flag, input_file, output_file


def register(sub: Any) -> None:
    from commsched.echelon.coflow import (
        BACKFILLS,
        COFLOW_SCHEDULERS,
        GBPS,
        RATE_UPDATES,
        VARYS_EPOCH_S,
        VARYS_PORT_RATE,
        VARYS_QUANTUM_S,
    )
    from commsched.echelon.schedulers import FLOW_SCHEDULERS

    # the Coflow members of the flow-scheduler registry, with their paper names (varys)
    coflow = [n for n in FLOW_SCHEDULERS.choices()
              if FLOW_SCHEDULERS.canonical(n) in COFLOW_SCHEDULERS]

    p = sub.add_parser("echelon", help="EchelonFlow / Coflow scheduling (trace replay)")
    s = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    r = s.add_parser("replay", help="replay a Coflow-Benchmark trace, write Coflow CCTs")
    r.add_argument("trace", type=input_file, help="Coflow-Benchmark trace file")
    r.add_argument("--scheduler", choices=coflow, default="sebf",
                   help="Coflow scheduler (default: sebf = varys, SEBF + MADD + back-fill)")
    r.add_argument("--port-rate", type=flag(1, 1e15), default=GBPS,
                   help=f"port rate in bytes/s, 1..1e15 (default {GBPS:.0f} = 1 Gbit/s)")
    r.add_argument("--epoch", type=flag(0, 1e9, lo_open=True), default=None, metavar="S",
                   help="admit Coflows at the start of their S-second epoch, as Varys' "
                        "simulator does, > 0 and <= 1e9 (default: at their arrival; "
                        f"Varys' simulator: {VARYS_EPOCH_S})")
    r.add_argument("--rate-updates", choices=RATE_UPDATES, default="flow",
                   help="recompute rates at every flow arrival and completion (flow, "
                        "default) or only when a Coflow arrives or departs (coflow, Varys' "
                        "simulator); coflow: sebf, sebf-static, fifo only")
    r.add_argument("--backfill", choices=BACKFILLS, default="max-min",
                   help="back-fill by weighted max-min in rank order (default) or flow by "
                        "flow in Varys' simulator's deadline order (greedy); greedy: sebf, "
                        "sebf-static, fifo only")
    r.add_argument("--quantum", type=flag(0, 1e9, lo_open=True), default=None, metavar="S",
                   help="change rates only every S seconds and round finishes up to them "
                        f"(default: fluid; Varys' simulator: {VARYS_QUANTUM_S}); Varys' "
                        f"simulator's port rate is --port-rate {VARYS_PORT_RATE:.0f}")
    r.add_argument("-o", "--output", required=True, type=output_file,
                   help="CSV of Coflow completion times")
    r.set_defaults(func=run_replay)


def run_replay(args: argparse.Namespace) -> int:
    from commsched.echelon.coflow import replay
    from commsched.echelon.schedulers import FLOW_SCHEDULERS
    from commsched.io.coflow import read_coflow_trace
    from commsched.results import write_table

    scheduler = FLOW_SCHEDULERS.canonical(args.scheduler)
    df = replay(read_coflow_trace(args.trace), scheduler, args.port_rate, epoch_s=args.epoch,
                rate_updates=args.rate_updates, backfill=args.backfill, quantum_s=args.quantum)
    write_table(df, args.output, {"trace": args.trace, "scheduler": scheduler,
                                  "port_rate": args.port_rate, "epoch_s": args.epoch,
                                  "rate_updates": args.rate_updates,
                                  "backfill": args.backfill, "quantum_s": args.quantum})
    print(f"{len(df)} Coflows, average CCT {df['cct'].mean():.4g} s -> {args.output}")
    return 0
