"""Benchmark of the communication views on every committed training trace.

Times :func:`commsched.views.ps_view` (1 server; 4 servers with size sharding) and
:func:`commsched.views.allreduce_view` (ring of 2 over 10 GbE) on each
``data/traces/*-train-*.json.gz`` (median of ``--repeat`` runs, the trace already loaded),
and writes ``benchmarks/results/views.json``. Target: every view of the largest trace in
under 2 s (the TicTac experiments build views per setting).

Run: ``python benchmarks/bench_views.py`` (about 30 s on 2 cores).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from typing import Any

from benchlib import report, timed

from commsched.cost import LinkModel, RingAllReduce
from commsched.model.traced import load_trace
from commsched.views import allreduce_view, ps_view

TARGET_S = 2.0
ROOT = Path(__file__).resolve().parent.parent


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--repeat", type=int, default=3, choices=range(1, 21), metavar="1..20")
    p.add_argument("--out", default=str(Path(__file__).parent / "results" / "views.json"))
    args = p.parse_args(argv)
    link = LinkModel.preset("10GbE")
    ring = RingAllReduce(2, link)
    rows: list[dict[str, Any]] = []
    for path in sorted((ROOT / "data" / "traces").glob("*-train-*.json.gz")):
        trace = load_trace(path)
        cases = {
            "ps_1_server": lambda t=trace: ps_view(t, 1, link=link),
            "ps_4_servers_size": lambda t=trace: ps_view(t, 4, "size", link=link),
            "allreduce_ring2": lambda t=trace: allreduce_view(t, ring),
        }
        row: dict[str, Any] = {"trace": path.name, "trace_ops": trace.number_of_nodes(),
                                  "trace_edges": trace.number_of_edges()}
        for name, fn in cases.items():
            times, view = timed(fn, args.repeat)
            row[f"{name}_s"] = statistics.median(times)
            row[f"{name}_ops"] = view.number_of_nodes()
        rows.append(row)
        print(f"{path.name}: " + ", ".join(
            f"{k} {v:.3f} s" for k, v in row.items() if k.endswith("_s")))
    largest = max(rows, key=lambda r: int(r["trace_ops"]))
    worst = max(float(v) for k, v in largest.items() if k.endswith("_s"))
    result = {
        "benchmark": "communication views (commsched.views)",
        "repeat": args.repeat,
        "traces": rows,
        "largest_trace": largest["trace"],
        "largest_trace_slowest_view_s": worst,
        "target": f"< {TARGET_S:g} s per view of the largest trace",
        "target_met": worst < TARGET_S,
    }
    return report(args.out, result, f"largest trace {largest['trace']}: slowest view {worst:.3f} s",
                  f"< {TARGET_S:g} s")


if __name__ == "__main__":
    sys.exit(main())
