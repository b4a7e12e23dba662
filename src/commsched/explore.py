"""What a notebook shows beside its figure: the paper's numbers and ours.

:func:`paper_vs_ours` lists a notebook's rows of the claims table (paper value, ours,
status, reason), from ``results/claims.csv`` when the pipeline has written it (and it holds
every row asked for), else judged now, the same way ``commsched claims`` does, from
``papers/claims/*.yaml`` and whichever metrics tables exist (a partial run: the other rows
say ``pending`` and which target makes them). A claims table older than the claims files
(written before a row was added) is thus not an error: the rows are judged now.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from commsched.claims import evaluate, load_claims
from commsched.errors import CommschedError
from commsched.paths import repo_path, repo_root
from commsched.results import read_table

__all__ = ["COLUMNS", "paper_vs_ours"]

#: Columns of :func:`paper_vs_ours`'s table.
COLUMNS = ["id", "where", "paper_value", "ours", "status", "reason"]


def paper_vs_ours(patterns: Sequence[str], claims: str | os.PathLike[str] = "results/claims.csv",
                  ) -> pd.DataFrame:
    """The claims rows whose id matches one of ``patterns`` (shell patterns, ``pace-sim-*``).

    Parameters
    ----------
    patterns : sequence of str
        Claim ids or ``fnmatch`` patterns of them.
    claims : str or PathLike
        The pipeline's claims table (resolved against the repository root). When it does
        not exist, or lacks a row a pattern asks for (it predates that row), the rows are
        judged now from ``papers/claims/*.yaml`` against the metrics tables under
        ``results/metrics/``.

    Returns
    -------
    DataFrame
        Columns :data:`COLUMNS`, one row per claim, in the claims files' order;
        ``attrs["source"]`` says where the verdicts come from.

    Raises
    ------
    CommschedError
        No claim matches a pattern (a misspelt id), or a table cannot be read.
    """
    path = Path(repo_path(claims))
    if path.is_file():
        df = read_table(path)
        source = f"{path} (written by `snakemake claims`)"
        missing = next((p for p in patterns if not _hits(df, p).any()), None)
        if missing is not None:
            df, source = _judged_now(f"{path} has no row {missing!r}: older than the claims files")
    else:
        df, source = _judged_now(f"{path} does not exist yet")
    keep = pd.Series(False, index=df.index)
    for pattern in patterns:
        hit = _hits(df, pattern)
        if not hit.any():
            raise CommschedError(f"paper vs ours: no claim matches {pattern!r} in {source}")
        keep |= hit
    out = df.loc[keep, COLUMNS].reset_index(drop=True)
    out.attrs["source"] = source
    return out


def _hits(df: pd.DataFrame, pattern: str) -> pd.Series:
    return df["id"].astype(str).map(lambda i: fnmatch.fnmatchcase(i, pattern))


def _judged_now(why: str) -> tuple[pd.DataFrame, str]:
    """Every claims row judged against the metrics tables there are, and a source line."""
    root = repo_root()
    found = load_claims(sorted((root / "papers" / "claims").glob("*.yaml")))
    metrics = sorted((root / "results" / "metrics").glob("*.csv"))
    df = pd.DataFrame([r.__dict__ for r in evaluate(found, metrics)])
    return df, (f"judged now against the {len(metrics)} metrics tables in "
                f"{root / 'results' / 'metrics'} ({why})")
