"""The Coflow sanity check of EchelonFlow: Varys' trace-driven comparison on FB2010.

Varys (Chowdhury, Zhong, Stoica, SIGCOMM 2014) replays the Facebook 2010 Coflow trace
(``data/coflow/FB2010-1Hr-150-0.txt``, 526 Coflows on 150 ports) on a non-blocking switch
and reports how much faster Coflows complete under SEBF + MADD than under per-flow fairness
and under non-preemptive (FIFO) Coflow scheduling. ``commsched echelon replay`` replays the
trace under each scheduler of :data:`commsched.echelon.coflow.COFLOW_SCHEDULERS` (one CCT
table each); this module turns those tables into

* the metrics (``echelon.replay.*``): average and 95th-percentile CCT per scheduler and the
  improvement factors of ``sebf`` over each baseline (baseline's average CCT / sebf's, and
  the same for the 95th percentile), for the claims table;
* the bins table: Varys' four Coflow categories (Sec. 7.1: *short* if the longest flow is
  under 5 MB, *narrow* if at most 50 flows) with, per category and baseline, the factor of
  improvement of ``sebf`` (average and 95th percentile of the per-Coflow CCT ratio
  baseline / sebf, and ratio of averages), the data of the notebook's Varys Fig. 9-like
  panel.

Usage: ``python -m commsched.echelon.experiments.replay metrics --tables fair=F sebf=S ...
--metrics M.csv --bins B.csv``.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from commsched import driver
from commsched.echelon.schedulers import FLOW_SCHEDULERS
from commsched.errors import CommschedError
from commsched.plotting import check_figure_inputs
from commsched.results import read_table

__all__ = ["BINS", "FigureConfig", "bins_table", "main", "metrics"]

#: Varys' Coflow categories: (name, short?, narrow?); short = longest flow < 5 MB,
#: narrow = at most 50 flows.
BINS = (("SN", True, True), ("LN", False, True), ("SW", True, False), ("LW", False, False))
SHORT_MB = 5.0
NARROW_FLOWS = 50


def _load(tables: Mapping[str, str]) -> dict[str, pd.DataFrame]:
    out = {name: read_table(path).set_index("id") for name, path in tables.items()}
    if "sebf" not in out:
        raise CommschedError("echelon replay metrics: needs the sebf table")
    ids = out["sebf"].index
    for name, df in out.items():
        if not df.index.equals(ids):
            raise CommschedError(f"echelon replay metrics: table {name} has other Coflows "
                                 "than the sebf table")
    return out


def metrics(tables: Mapping[str, pd.DataFrame]) -> dict[str, float]:
    """Average / p95 CCT per scheduler and sebf's improvement factors (module docstring).

    Parameters
    ----------
    tables : mapping of str to pandas.DataFrame
        ``{scheduler: CCT table}``, each with a ``cct`` column in seconds; one must be
        ``sebf``.

    Returns
    -------
    dict of str to float
        ``echelon.replay.<scheduler>.{avg,p95}_cct_s`` and
        ``echelon.replay.sebf_vs_<baseline>.{avg,p95}`` (baseline's CCT over sebf's).

    Raises
    ------
    KeyError
        No ``sebf`` table.

    References
    ----------
    .. [1] Chowdhury, Zhong & Stoica, "Varys", SIGCOMM 2014, Sec. 7 (not in
       ``papers/``).
    """
    m: dict[str, float] = {}
    for name, df in tables.items():
        key = name.replace("-", "_")
        m[f"echelon.replay.{key}.avg_cct_s"] = float(df["cct"].mean())
        m[f"echelon.replay.{key}.p95_cct_s"] = float(df["cct"].quantile(0.95))
    s = tables["sebf"]["cct"]
    for name, df in tables.items():
        if name == "sebf":
            continue
        key = name.replace("-", "_")
        m[f"echelon.replay.sebf_vs_{key}.avg"] = float(df["cct"].mean() / s.mean())
        m[f"echelon.replay.sebf_vs_{key}.p95"] = float(df["cct"].quantile(0.95)
                                                       / s.quantile(0.95))
    return m


def bins_table(tables: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """Per Varys category and baseline: Coflow count, share of bytes, and sebf's factor of
    improvement (ratio of average CCTs; average and p95 of per-Coflow ratios).

    Parameters
    ----------
    tables : mapping of str to pandas.DataFrame
        As for :func:`metrics`, indexed alike by Coflow; the ``sebf`` table also gives each
        Coflow's ``longest_mb``, ``width`` (flows) and ``total_mb`` (MB).

    Returns
    -------
    pandas.DataFrame
        ``baseline, bin`` (:data:`BINS` and ``all``; empty bins left out), ``coflows``,
        ``bytes_share``, ``ratio_of_avg``, ``avg_ratio``, ``p95_ratio``.

    References
    ----------
    .. [1] Chowdhury, Zhong & Stoica, "Varys", SIGCOMM 2014, Sec. 7.1 (the four bins).
    """
    s = tables["sebf"]
    short = s["longest_mb"] < SHORT_MB
    narrow = s["width"] <= NARROW_FLOWS
    rows = []
    for name, df in tables.items():
        if name == "sebf":
            continue
        for b, sh, na in (*BINS, ("all", None, None)):
            sel = np.ones(len(s), dtype=bool) if sh is None else (short == sh) & (narrow == na)
            if not sel.any():
                continue
            ratio = df["cct"][sel] / s["cct"][sel]
            rows.append({"baseline": name, "bin": b, "coflows": int(sel.sum()),
                         "bytes_share": float(s["total_mb"][sel].sum() / s["total_mb"].sum()),
                         "ratio_of_avg": float(df["cct"][sel].mean() / s["cct"][sel].mean()),
                         "avg_ratio": float(ratio.mean()),
                         "p95_ratio": float(ratio.quantile(0.95))})
    return pd.DataFrame(rows)


@dataclass(frozen=True)
class FigureConfig:
    """Parameters of ``notebooks/echelon_replay.ipynb``, checked before plotting.

    Not a :class:`commsched.driver.FigureConfig`: the notebook's ``tables`` parameter (a
    comma-separated list) would shadow that class' ``tables()``.

    Parameters
    ----------
    tables : str
        Comma-separated ``scheduler=path`` CCT tables (one per replay).
    bins : str
        The bins table (:func:`bins_table`).
    figure : str
        The PDF to write (the PNG is written beside it).

    Raises
    ------
    CommschedError
        If ``tables`` is not a list of ``scheduler=path``, a table does not exist or
        ``figure`` is not a PDF path.
    """

    tables: str
    bins: str
    figure: str

    def parsed(self) -> dict[str, str]:
        """``{scheduler: path}`` of :attr:`tables`."""
        return _pairs(self.tables.split(","), "tables")

    def __post_init__(self) -> None:
        check_figure_inputs("echelon replay", {**self.parsed(), "bins": self.bins},
                            self.figure, "run the echelon_replay rules first")


def _pairs(items: Sequence[str] | None, flag: str = "--tables") -> dict[str, str]:
    return driver.named_paths(list(items) if items else None, tuple(FLOW_SCHEDULERS), flag)


def main(argv: Sequence[str] | None = None) -> int:
    """Write the replay's metrics and its Varys-bins table from the per-scheduler CCT tables.

    Parameters
    ----------
    argv : sequence of str, optional
        ``metrics --tables SCHEDULER=CSV ... --metrics M.csv --bins B.csv``.

    Returns
    -------
    int
        0, or 2 after a one-line error (a malformed pair, a missing table, no ``sebf``
        table, tables of different Coflows).
    """
    p = driver.parser(__name__, __doc__)
    sub = p.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("metrics", help="metrics and bins tables from the CCT tables")
    m.add_argument("--tables", nargs="+", required=True, help="scheduler=path ...")
    m.add_argument("--metrics", required=True)
    m.add_argument("--bins", required=True)
    args = p.parse_args(argv)

    def body() -> None:
        tables = _load(_pairs(args.tables))
        driver.write_outputs({args.bins: bins_table(tables)}, metrics(tables), args.metrics,
                             {"tables": args.tables})

    return driver.run("echelon_replay", body)

if __name__ == "__main__":
    sys.exit(main())
