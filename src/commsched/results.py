"""Result tables with provenance.

Every table an experiment writes is a CSV whose first lines are ``# key: value`` comments
recording where it came from: the commsched version, the git revision of the checkout,
the UTC time and the experiment's configuration (as JSON). :func:`read_table` skips them;
:func:`read_provenance` returns them.

Headline numbers that claims compare against go into *metrics tables*
(``results/metrics/<experiment>.csv``, columns ``metric,value``) written with
:func:`write_metrics`; :mod:`commsched.claims` looks metrics up by name across all of them.

Examples
--------
>>> import pandas as pd, tempfile, os
>>> d = tempfile.mkdtemp()
>>> write_table(pd.DataFrame({"x": [1, 2]}), os.path.join(d, "t.csv"), {"seed": 1})
>>> read_table(os.path.join(d, "t.csv"))["x"].tolist()
[1, 2]
>>> read_provenance(os.path.join(d, "t.csv"))["config"]
{'seed': 1}
"""

from __future__ import annotations

import datetime as _dt
import io
import json
import os
import subprocess
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from commsched import __version__
from commsched.atomic import atomic_write_text
from commsched.errors import CommschedError
from commsched.validation import parse_json, read_text, short

__all__ = [
    "git_revision",
    "provenance",
    "read_metrics",
    "read_provenance",
    "read_table",
    "write_metrics",
    "write_table",
]


@cache
def git_revision() -> str:
    """The checkout's commit (with ``-dirty`` if it has changes), or ``unknown``."""
    here = Path(__file__).resolve().parent
    try:
        rev = subprocess.run(
            ["git", "describe", "--always", "--dirty", "--abbrev=12"],
            cwd=here, capture_output=True, text=True, timeout=10, check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return rev or "unknown"


def provenance(config: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The provenance record of a result made now with ``config``."""
    return {
        "commsched_version": __version__,
        "git_revision": git_revision(),
        "created_utc": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "config": dict(config or {}),
    }


def write_table(
    df: pd.DataFrame, path: str | os.PathLike[str], config: Mapping[str, Any] | None = None
) -> None:
    """Write ``df`` as CSV with a provenance header, atomically."""
    head = "".join(
        f"# {k}: {json.dumps(v, sort_keys=True, default=str)}\n"
        for k, v in provenance(config).items()
    )
    atomic_write_text(path, head + df.to_csv(index=False))


def read_table(
    path: str | os.PathLike[str],
    columns: Mapping[str, tuple[float | None, float | None]] | None = None,
) -> pd.DataFrame:
    """Read a table written by :func:`write_table` (gzip-compressed or not).

    Parameters
    ----------
    path
        The CSV file.
    columns
        ``{column: (lo, hi)}``: columns that must be present and hold finite numbers in
        ``[lo, hi]`` (None: unbounded), e.g. a measurement's times.

    Raises
    ------
    CommschedError
        One line naming the file (and the column and row): unreadable, binary or malformed
        CSV, a missing column, a value that is not a finite number in range.
    """
    text = read_text(path)
    try:
        df = pd.read_csv(io.StringIO(text), comment="#")
    except (pd.errors.ParserError, pd.errors.EmptyDataError, ValueError) as e:
        raise CommschedError(f"{path}: cannot read table: {str(e).splitlines()[0]}") from None
    for col, (lo, hi) in (columns or {}).items():
        if col not in df.columns:
            raise CommschedError(f"{path}: missing column {col!r}")
        values = pd.to_numeric(df[col], errors="coerce").to_numpy(dtype=float)
        ok = np.isfinite(values)
        with np.errstate(invalid="ignore"):
            if lo is not None:
                ok &= values >= lo
            if hi is not None:
                ok &= values <= hi
        if not ok.all():
            row = int(np.argmin(ok))
            raise CommschedError(f"{path}: column {col!r}, row {row + 1}: "
                                 f"{short(df[col].iloc[row])} is not a finite number in "
                                 f"[{lo if lo is not None else '-inf'}, "
                                 f"{hi if hi is not None else 'inf'}]")
    return df


def read_provenance(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The provenance header of a table written by :func:`write_table`."""
    out: dict[str, Any] = {}
    for line in read_text(path).splitlines():
        if not line.startswith("# "):
            break
        key, _, value = line[2:].partition(": ")
        out[key] = parse_json(value, f"{path}: provenance {key!r}")
    return out


def write_metrics(
    metrics: Mapping[str, float],
    path: str | os.PathLike[str],
    config: Mapping[str, Any] | None = None,
) -> None:
    """Write headline numbers ``{metric name: value}`` as a metrics table."""
    df = pd.DataFrame({"metric": list(metrics), "value": [float(v) for v in metrics.values()]})
    write_table(df, path, config)


def read_metrics(paths: list[str | os.PathLike[str]]) -> dict[str, tuple[float, str]]:
    """All metrics in ``paths`` as ``{name: (value, path)}``; a duplicate name is an error."""
    out: dict[str, tuple[float, str]] = {}
    for p in paths:
        df = read_table(p)
        if list(df.columns[:2]) != ["metric", "value"]:
            raise CommschedError(f"{p}: a metrics table needs columns metric,value")
        for name, value in zip(df["metric"], df["value"], strict=True):
            if name in out:
                raise CommschedError(f"{p}: metric {name!r} is also in {out[name][1]}")
            try:
                out[str(name)] = (float(value), str(p))
            except ValueError:
                raise CommschedError(f"{p}: metric {short(name)}: value {short(value)} is not "
                                     "a number") from None
    return out

