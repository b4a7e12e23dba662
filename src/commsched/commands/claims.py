"""``commsched claims [compare]``: judge papers/claims/*.yaml against the metrics tables,
or compare a claims table with a reference run's.

``commsched claims`` writes the table; ``commsched claims compare`` lists the rows of our
table that differ from the reference (status changed, or value beyond ``--rel-tol``) and
exits 0 when none does, 1 when some do, 2 on bad input.
"""

from __future__ import annotations

import argparse
import glob
from typing import Any

from commsched.validation import flag, input_file, output_file


def register(sub: Any) -> None:
    p = sub.add_parser("claims", help="write the claims table (paper value vs ours)",
                       description="Without ACTION: write the claims table. With compare: "
                                   "list the rows that differ from a reference run's table.")
    p.add_argument("--claims", nargs="+", type=input_file,
                   help="claims files (default papers/claims/*.yaml)")
    p.add_argument("--metrics", nargs="*", type=input_file,
                   help="metrics tables (default results/metrics/*.csv)")
    p.add_argument("--md", type=output_file, default="results/claims.md", help="Markdown output")
    p.add_argument("--csv", type=output_file, default="results/claims.csv", help="CSV output")
    p.set_defaults(func=run)
    csub = p.add_subparsers(dest="action", metavar="ACTION")
    cmp = csub.add_parser("compare", help="list the rows that differ from a reference run's "
                                          "claims table (exit 1 if any)")
    cmp.add_argument("--reference", type=input_file, default="results/reference/claims.csv",
                     help="the reference run's claims table "
                          "(default results/reference/claims.csv)")
    cmp.add_argument("--csv", type=input_file, default="results/claims.csv",
                     help="our claims table (default results/claims.csv)")
    cmp.add_argument("--rel-tol", type=flag(0), default=1e-9,
                     help="relative tolerance on a value (default 1e-9)")
    # compare writes nothing: the table-writing outputs do not apply
    cmp.set_defaults(func=run_compare, md=None)


def run(args: argparse.Namespace) -> int:
    from commsched.claims import (  # jsonschema: ~1 s
        KINDS,
        evaluate,
        load_claims,
        summary,
        write_claims,
    )

    claims = load_claims(args.claims or sorted(glob.glob("papers/claims/*.yaml")))
    metrics = args.metrics
    if metrics is None:
        metrics = sorted(glob.glob("results/metrics/*.csv"))
    results = evaluate(claims, metrics)
    write_claims(results, args.md, args.csv)
    by_kind = "; ".join(f"{kind}: {summary([r for r in results if r.kind == kind])}"
                        for kind in KINDS)
    print(f"{len(results)} claims: {summary(results)} ({by_kind})")
    return 0


def run_compare(args: argparse.Namespace) -> int:
    from commsched.claims import compare_claims

    differences, compared = compare_claims(args.reference, args.csv, args.rel_tol)
    for d in differences:
        print(d.line)
    if differences:
        print(f"{len(differences)} of {compared} claims differ from the reference "
              f"{args.reference} (rel_tol {args.rel_tol:g})")
        return 1
    print(f"all {compared} claims equal the reference {args.reference} "
          f"(rel_tol {args.rel_tol:g})")
    return 0
