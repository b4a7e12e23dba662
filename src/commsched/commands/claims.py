"""``commsched claims [compare|bounds]``: judge papers/claims/*.yaml against the metrics
tables, compare a claims table with a reference run's, or store the rows' bounds.

``commsched claims`` writes the table; ``commsched claims compare`` lists the rows of our
table that differ from the reference (status changed, or value beyond ``--rel-tol``) and
exits 0 when none does, 1 when some do, 2 on bad input; ``commsched claims bounds`` writes
the stored copy of every row's comparison (``papers/claims/bounds.lock.json``) and lists
the rows whose bound it changes.
"""

from __future__ import annotations

import argparse
import glob
import os
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
    bnd = csub.add_parser("bounds", help="store every row's comparison (the bounds lock) "
                                         "and list the rows whose bound changed")
    bnd.add_argument("--claims", nargs="+", type=input_file,
                     help="claims files (default papers/claims/*.yaml)")
    bnd.add_argument("--lock", type=output_file, default="papers/claims/bounds.lock.json",
                     help="the stored copy (default papers/claims/bounds.lock.json)")
    bnd.set_defaults(func=run_bounds, md=None, csv=None)


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


def run_bounds(args: argparse.Namespace) -> int:
    from commsched.claims import bound_changes, load_claims, read_bounds, write_bounds

    claims = load_claims(args.claims or sorted(glob.glob("papers/claims/*.yaml")))
    changes = bound_changes(claims, read_bounds(args.lock)) if os.path.exists(args.lock) \
        else None
    write_bounds(claims, args.lock)
    for line in changes or []:
        print(line)
    what = "new file" if changes is None else f"{len(changes)} changed"
    print(f"{args.lock}: bounds of {len(claims)} rows stored ({what})")
    return 0
