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

import itertools
import sys
from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from commsched import driver
from commsched.cost.allreduce import fit_table, summarize
from commsched.results import read_provenance, read_table

__all__ = ["FigureConfig", "main", "metrics"]


def metrics(fits: pd.DataFrame) -> dict[str, float]:
    """Headline numbers of the fits (module docstring for the names).

    Parameters
    ----------
    fits : pandas.DataFrame
        The fit table of :func:`commsched.cost.allreduce.fit_table` (one row per worker
        count).

    Returns
    -------
    dict
        ``comm.allreduce.w<n>.{a_s,b_s_per_byte,r2,busbw_Bps}`` and, for consecutive
        worker counts ``n < m``, the measured and the ring model's slope ratios.

    References
    ----------
    PACE (Bao et al., INFOCOM 2020), Sec. II-C, Eq. (1) and Fig. 3: ``T(s) = a + b * s``.
    """
    out: dict[str, float] = {}
    for r in fits.itertuples():
        for col in ("a_s", "b_s_per_byte", "r2", "busbw_Bps"):
            out[f"comm.allreduce.w{r.workers}.{col}"] = getattr(r, col)
    ws = sorted(int(w) for w in fits["workers"])
    slope = dict(zip(fits["workers"].astype(int), fits["b_s_per_byte"], strict=True))
    for n, m in itertools.pairwise(ws):
        out[f"comm.allreduce.b_ratio_w{m}_w{n}"] = slope[m] / slope[n]
        out[f"comm.allreduce.ring_b_ratio_w{m}_w{n}"] = ((m - 1) / m) / ((n - 1) / n)
    return out


@dataclass(frozen=True)
class FigureConfig(driver.FigureConfig):
    """Parameters of ``notebooks/allreduce_fit.ipynb``, checked before anything is plotted.

    ``figure`` and the checks: see :class:`~commsched.driver.FigureConfig`.

    Parameters
    ----------
    summary, fit : str
        The summary and fit tables of :func:`main`.
    """

    summary: str = ""
    fit: str = ""
    WHAT = "all-reduce"
    HINT = "run `snakemake comm_allreduce_fit`"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the driver (module docstring).

    Parameters
    ----------
    argv : sequence of str, optional
        ``--measurement M.csv --summary ... --fit ... --metrics ...``.

    Returns
    -------
    int
        0, or 2 after a one-line error (an unreadable or malformed measurement).
    """
    p = driver.parser("commsched.pace.experiments.allreduce_fit", __doc__)
    p.add_argument("--measurement", required=True)
    p.add_argument("--summary", required=True)
    p.add_argument("--fit", required=True)
    p.add_argument("--metrics", required=True)
    p.add_argument("--ols", action="store_true", help="ordinary least squares (not relative)")
    args = p.parse_args(argv)

    def body() -> None:
        df = read_table(args.measurement)
        summary = summarize(df)
        fits = fit_table(summary, relative=not args.ols)
        config = {"measurement": args.measurement, "relative": not args.ols,
                  "measurement_provenance": read_provenance(args.measurement)}
        driver.write_outputs({args.summary: summary, args.fit: fits}, metrics(fits),
                             args.metrics, config)
        print(fits.to_string(index=False))

    return driver.run("allreduce_fit", body)


if __name__ == "__main__":
    sys.exit(main())
