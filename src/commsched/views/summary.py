"""Summarise communication views of real traces: size, traffic and simulated makespan.

For every view file (written by ``commsched view ps|allreduce``) the driver counts ops and
bytes, simulates the view with the priority executor (no priorities, FIFO ties: the
runtime's default order), validates the schedule with
:func:`commsched.sim.check_schedule` and writes one row per view: ``trace, view, model,
ops, compute_ops, comm_ops, comm_bytes, compute_s`` (sum of compute durations),
``comm_s`` (sum of transfer / all-reduce durations), ``makespan_s``, and
``overlap = (compute_s + comm_s - makespan_s) / min(compute_s, comm_s)`` -- the share of
the smaller of the two that the schedule hides behind the other (1 = fully hidden; for a
parameter-server view with several channels it can exceed 1).

Run: ``python -m commsched.views.summary --views V1.json V2.json --table T.csv``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from commsched.errors import CommschedError
from commsched.model import graph
from commsched.results import write_table
from commsched.sim import check_schedule, simulate_compiled

__all__ = ["main", "summarize_view"]

COMM_KINDS = ("recv", "send", "allreduce")


def summarize_view(path: str) -> dict[str, object]:
    """The summary row of one view file (the schedule is validated)."""
    g = graph.load(path)
    view = g.graph.get("view")
    if view not in ("ps", "allreduce"):
        raise CommschedError(f"{path}: not a communication view (graph attribute 'view')")
    cg = graph.compile_graph(g)
    s = simulate_compiled(cg)
    check_schedule(cg, s)
    nodes = g.nodes(data=True)
    comm = [a for _, a in nodes if a["kind"] in COMM_KINDS]
    compute_s = sum(a["duration"] for _, a in nodes if a["kind"] == "compute")
    comm_s = sum(a["duration"] for a in comm)
    smaller = min(compute_s, comm_s)
    return {
        "trace": Path(path).name.rsplit("-", 1)[0], "view": view,
        "model": g.graph.get("meta", {}).get("model"),
        "ops": g.number_of_nodes(), "compute_ops": g.number_of_nodes() - len(comm),
        "comm_ops": len(comm), "comm_bytes": sum(int(a.get("bytes", 0)) for a in comm),
        "compute_s": compute_s, "comm_s": comm_s, "makespan_s": s.makespan,
        "overlap": (compute_s + comm_s - s.makespan) / smaller if smaller > 0 else float("nan"),
    }


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m commsched.views.summary",
                                description=__doc__.split("\n")[0])
    p.add_argument("--views", nargs="+", required=True)
    p.add_argument("--table", required=True)
    args = p.parse_args(argv)
    try:
        df = pd.DataFrame([summarize_view(v) for v in sorted(args.views)])
        write_table(df, args.table, {"views": sorted(args.views)})
    except CommschedError as e:
        print(f"view_summary: error: {e}", file=sys.stderr)
        return 2
    print(df.to_string(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
