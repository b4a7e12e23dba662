"""``commsched claims``: judge papers/claims/*.yaml against the metrics tables."""

from __future__ import annotations

import argparse
import glob
from typing import Any

from commsched.validation import input_file, output_file


def register(sub: Any) -> None:
    p = sub.add_parser("claims", help="write the claims table (paper value vs ours)")
    p.add_argument("--claims", nargs="+", type=input_file,
                   help="claims files (default papers/claims/*.yaml)")
    p.add_argument("--metrics", nargs="*", type=input_file,
                   help="metrics tables (default results/metrics/*.csv)")
    p.add_argument("--md", type=output_file, default="results/claims.md", help="Markdown output")
    p.add_argument("--csv", type=output_file, default="results/claims.csv", help="CSV output")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from commsched.claims import evaluate, load_claims, write_claims  # jsonschema: ~1 s

    claims = load_claims(args.claims or sorted(glob.glob("papers/claims/*.yaml")))
    metrics = args.metrics
    if metrics is None:
        metrics = sorted(glob.glob("results/metrics/*.csv"))
    results = evaluate(claims, metrics)
    write_claims(results, args.md, args.csv)
    counts = {s: sum(r.status == s for r in results) for s in ("reproduced", "differs", "pending")}
    print(f"{len(results)} claims: " + ", ".join(f"{v} {k}" for k, v in counts.items()))
    return 0
