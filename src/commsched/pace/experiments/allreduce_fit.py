"""Fit PACE's linear all-reduce model to a measurement (the analog of PACE Fig. 3).

Input: the table written by :mod:`commsched.pace.experiments.allreduce_bench` (one row per
worker count, rank, size and repetition). Reduction:

1. the time of one all-reduce repetition is the **maximum over ranks** (the collective
   has finished on every worker);
2. per worker count and size, the **median** over repetitions (quartiles kept for the
   figure's error bars);
3. :func:`commsched.cost.fit_linear` of the medians, ``T(s) = a + b * s`` (PACE's model);
   with ``relative`` true (our default) it minimises relative residuals, because the
   sizes span four decades and ordinary least squares would fit only the largest ones.

Outputs: the per-size summary table, the fit table (``a``, ``b``, ``R^2``, the bus
bandwidth ``2(n-1)/n / b`` that a ring of ``n`` workers with this slope implies) and
metrics ``comm.allreduce.w<n>.{a_s,b_s_per_byte,r2,busbw_Bps}``; with two or more worker
counts also ``comm.allreduce.b_ratio_w<m>_w<n>`` (slope ratio; the ring model predicts
``(m-1)/m * n/(n-1)``, e.g. 1.5 for 4 versus 2 workers, given the same per-link
bandwidth) and ``comm.allreduce.ring_b_ratio_w<m>_w<n>`` (that prediction).

Run: ``python -m commsched.pace.experiments.allreduce_fit --measurement M.csv
--summary S.csv --fit F.csv --metrics comm_allreduce.csv``.
"""

from __future__ import annotations

import argparse
import itertools
import sys
from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from commsched.cost.allreduce import fit_table, summarize
from commsched.errors import CommschedError
from commsched.plotting import check_figure_inputs
from commsched.results import read_provenance, read_table, write_metrics, write_table

__all__ = ["FigureConfig", "main", "metrics"]

def metrics(fits: pd.DataFrame) -> dict[str, float]:
    """Headline numbers of the fits (see the module docstring for the names)."""
    out: dict[str, float] = {}
    for r in fits.itertuples():
        key = f"comm.allreduce.w{r.workers}"
        out[f"{key}.a_s"] = r.a_s
        out[f"{key}.b_s_per_byte"] = r.b_s_per_byte
        out[f"{key}.r2"] = r.r2
        out[f"{key}.busbw_Bps"] = r.busbw_Bps
    ws = sorted(int(w) for w in fits["workers"])
    slope = dict(zip(fits["workers"].astype(int), fits["b_s_per_byte"], strict=True))
    for n, m in itertools.pairwise(ws):
        out[f"comm.allreduce.b_ratio_w{m}_w{n}"] = slope[m] / slope[n]
        out[f"comm.allreduce.ring_b_ratio_w{m}_w{n}"] = ((m - 1) / m) / ((n - 1) / n)
    return out


@dataclass(frozen=True)
class FigureConfig:
    """Parameters of ``notebooks/allreduce_fit.ipynb``, checked before anything is plotted."""

    summary: str
    fit: str
    figure: str  # the PDF; the PNG is written beside it

    def __post_init__(self) -> None:
        check_figure_inputs("all-reduce", {"summary": self.summary, "fit": self.fit},
                            self.figure, "run `snakemake comm_allreduce_fit`")


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m commsched.pace.experiments.allreduce_fit",
                                description=__doc__.split("\n")[0])
    p.add_argument("--measurement", required=True)
    p.add_argument("--summary", required=True)
    p.add_argument("--fit", required=True)
    p.add_argument("--metrics", required=True)
    p.add_argument("--ols", action="store_true", help="ordinary least squares (not relative)")
    args = p.parse_args(argv)
    try:
        df = read_table(args.measurement)
        summary = summarize(df)
        fits = fit_table(summary, relative=not args.ols)
        config = {"measurement": args.measurement, "relative": not args.ols,
                  "measurement_provenance": read_provenance(args.measurement)}
        write_table(summary, args.summary, config)
        write_table(fits, args.fit, config)
        write_metrics(metrics(fits), args.metrics, config)
    except CommschedError as e:
        print(f"allreduce_fit: error: {e}", file=sys.stderr)
        return 2
    print(fits.to_string(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
