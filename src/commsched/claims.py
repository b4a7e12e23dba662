"""The claims table: every statement we reproduce, the paper's value beside ours.

``papers/claims/<work>.yaml`` (one file per work: ``tictac.yaml``, ``pace.yaml``, ...)
list claims::

    claims:
      - id: tictac-seq32-one-best-order        # unique, kebab-case
        paper: tictac                           # key of papers/references.bib
        kind: paper                             # paper | ours | check (see below)
        where: Sec. 6, Seq-32                   # figure / table / section
        statement: Only one order in 32! is best for Seq-32.
        metric: toys.seq32.frac_orders_optimal  # a metric name in results/metrics/*.csv
        paper_value: 0.0                        # number, or text for a qualitative claim
        compare: {op: approx, abs_tol: 0.01}    # how ours is judged against the paper
        target: toys                            # the Snakemake target that produces it
        note: ...                               # optional: why ours may differ

Comparison ops (``value`` defaults to ``paper_value``):
``approx`` |ours - value| <= abs_tol + rel_tol * |value|; ``ge`` ours >= value;
``le`` ours <= value; ``between`` lo <= ours <= hi (``value: [lo, hi]``).

Kinds: ``paper``, a statement of that paper in the sense of its words; ``ours``, our own
extension or evaluation (a setting, baseline or target the paper does not have);
``check``, our own sanity bound on our implementation. The per-paper counts of
``results/claims.md`` are over ``paper`` rows only.

Bounds: every row's comparison (``id``, ``kind``, ``metric``, ``paper_value``, ``compare``)
is stored in ``papers/claims/bounds.lock.json`` (:func:`claim_bounds`, written by
``commsched claims bounds``); a test compares the yaml with it (:func:`bound_changes`), so
a changed bound is a changed line in review, never a silent edit.

Status: ``reproduced`` when the comparison holds, ``differs`` when it does not,
``pending`` when no metrics table has the metric yet.
"""

from __future__ import annotations

import json
import math
import os
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import jsonschema
import pandas as pd

from commsched.atomic import atomic_write_text
from commsched.errors import CommschedError
from commsched.io.structured import read_json, read_yaml
from commsched.results import read_metrics, read_table, write_table
from commsched.validation import number

__all__ = [
    "BOUNDS_LOCK",
    "CLAIMS_SCHEMA",
    "KINDS",
    "STATUSES",
    "ClaimDifference",
    "ClaimResult",
    "bound_changes",
    "claim_bounds",
    "compare_claims",
    "evaluate",
    "load_claims",
    "read_bounds",
    "render_markdown",
    "summary",
    "write_bounds",
    "write_claims",
]

#: The stored copy of every row's comparison (:func:`claim_bounds`).
BOUNDS_LOCK = "papers/claims/bounds.lock.json"
#: The fields of a row that make its bound: what is compared, with what, against what.
_BOUND_FIELDS = ("kind", "metric", "paper_value", "compare")

#: The kinds of claims row, in the order ``results/claims.md`` lists them.
KINDS = ("paper", "ours", "check")
#: The statuses of a judged row.
STATUSES = ("reproduced", "differs", "pending")
_NUM = {"type": "number"}
CLAIMS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["claims"],
    "additionalProperties": False,
    "properties": {
        "claims": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["id", "paper", "kind", "where", "statement", "metric", "paper_value",
                             "compare", "target"],
                "additionalProperties": False,
                "properties": {
                    "id": {"type": "string", "pattern": "^[a-z0-9][a-z0-9-]*$"},
                    "paper": {"type": "string"},
                    "kind": {"enum": list(KINDS)},
                    "where": {"type": "string"},
                    "statement": {"type": "string"},
                    "metric": {"type": "string"},
                    "paper_value": {"type": ["number", "string"]},
                    "compare": {
                        "type": "object",
                        "required": ["op"],
                        "additionalProperties": False,
                        "properties": {
                            "op": {"enum": ["approx", "ge", "le", "between"]},
                            "value": {"oneOf": [_NUM, {"type": "array", "items": _NUM,
                                                        "minItems": 2, "maxItems": 2}]},
                            "abs_tol": _NUM,
                            "rel_tol": _NUM,
                        },
                    },
                    "target": {"type": "string"},
                    "note": {"type": "string"},
                },
            },
        }
    },
}


def load_claims(paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]]
                ) -> list[dict[str, Any]]:
    """Read and validate one or more claims files; ids must be unique across all of them.

    One-line errors name the file and the claim.
    """
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    claims: list[dict[str, Any]] = []
    first_seen: dict[str, str] = {}
    for path in paths:
        for c in _load_claims_file(path):
            if c["id"] in first_seen:
                raise CommschedError(
                    f"{path}: claim {c['id']!r} appears twice (also in {first_seen[c['id']]})"
                )
            first_seen[c["id"]] = str(path)
            claims.append(c)
    return claims


def _load_claims_file(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    data = read_yaml(path)
    try:
        jsonschema.validate(data, CLAIMS_SCHEMA)
    except jsonschema.ValidationError as e:
        loc = "/".join(str(x) for x in e.absolute_path) or "top level"
        raise CommschedError(f"{path}: {loc}: {e.message}") from None
    claims: list[dict[str, Any]] = data["claims"]
    for c in claims:
        cmp = c["compare"]
        value = cmp.get("value", c["paper_value"])
        if cmp["op"] == "between" and not isinstance(value, list):
            raise CommschedError(f"{path}: claim {c['id']!r}: 'between' needs value: [lo, hi]")
        if cmp["op"] != "between" and not isinstance(value, (int, float)):
            raise CommschedError(
                f"{path}: claim {c['id']!r}: op {cmp['op']!r} needs a numeric value "
                "(compare.value or paper_value)"
            )
        for v in value if isinstance(value, list) else [value]:
            number(v, f"{path}: claim {c['id']!r}: compare value")
    return claims


def claim_bounds(claims: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Every row's bound: its kind, metric, paper value and comparison, keyed by id.

    Parameters
    ----------
    claims : sequence of mapping
        Rows as :func:`load_claims` returns them.

    Returns
    -------
    dict
        ``{id: {"kind", "metric", "paper_value", "compare"}}`` in the rows' order; the
        comparison as written (``op``, and ``value``, ``abs_tol``, ``rel_tol`` where given).
    """
    return {c["id"]: {k: c[k] for k in _BOUND_FIELDS} for c in claims}


def write_bounds(claims: Sequence[Mapping[str, Any]], path: str | os.PathLike[str]) -> None:
    """Store :func:`claim_bounds` of the rows as JSON, one row per line (a diff per row)."""
    rows = claim_bounds(claims)
    lines = [f"  {json.dumps(cid)}: {json.dumps(b, sort_keys=True)}" for cid, b in rows.items()]
    atomic_write_text(path, "{\n" + ",\n".join(lines) + "\n}\n")


def read_bounds(path: str | os.PathLike[str]) -> dict[str, dict[str, Any]]:
    """The stored bounds (:func:`write_bounds`); a one-line error if not such a file."""
    data = read_json(path)
    if not isinstance(data, dict) or not all(
            isinstance(b, dict) and set(b) == set(_BOUND_FIELDS) for b in data.values()):
        raise CommschedError(f"{path}: not a bounds file (each id maps to "
                             f"{', '.join(_BOUND_FIELDS)})")
    return data


def bound_changes(claims: Sequence[Mapping[str, Any]],
                  stored: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The rows whose bound differs from the stored copy, one line each.

    Parameters
    ----------
    claims : sequence of mapping
        Rows as :func:`load_claims` returns them.
    stored : mapping
        The stored copy (:func:`read_bounds`).

    Returns
    -------
    list of str
        ``"<id>: <field> <stored> -> <now>"`` per changed row (every changed field), then
        ``"<id>: new row"`` and ``"<id>: removed"``; empty when every bound is as stored.
    """
    now = claim_bounds(claims)
    out = []
    for cid, b in now.items():
        if cid not in stored:
            out.append(f"{cid}: new row")
            continue
        diffs = [f"{k} {json.dumps(stored[cid][k], sort_keys=True)} -> "
                 f"{json.dumps(b[k], sort_keys=True)}"
                 for k in _BOUND_FIELDS if stored[cid][k] != b[k]]
        if diffs:
            out.append(f"{cid}: " + "; ".join(diffs))
    out += [f"{cid}: removed" for cid in stored if cid not in now]
    return out


@dataclass(frozen=True)
class ClaimResult:
    id: str
    paper: str
    kind: str
    where: str
    statement: str
    paper_value: float | str
    ours: float | None
    status: str
    reason: str
    target: str


def _fmt(x: float) -> str:
    return f"{x:.4g}"


def _judge(c: Mapping[str, Any], ours: float) -> tuple[bool, str]:
    cmp = c["compare"]
    op = cmp["op"]
    value = cmp.get("value", c["paper_value"])
    if math.isnan(ours):
        return False, "our value is NaN"
    if op == "approx":
        tol = cmp.get("abs_tol", 0.0) + cmp.get("rel_tol", 0.0) * abs(value)
        ok = abs(ours - value) <= tol
        return ok, f"|{_fmt(ours)} - {_fmt(value)}| {'<=' if ok else '>'} {_fmt(tol)}"
    if op == "ge":
        ok = ours >= value
        return ok, f"{_fmt(ours)} {'>=' if ok else '<'} {_fmt(value)}"
    if op == "le":
        ok = ours <= value
        return ok, f"{_fmt(ours)} {'<=' if ok else '>'} {_fmt(value)}"
    lo, hi = value
    ok = lo <= ours <= hi
    return ok, f"{_fmt(ours)} {'in' if ok else 'outside'} [{_fmt(lo)}, {_fmt(hi)}]"


def evaluate(
    claims: Sequence[Mapping[str, Any]], metrics_paths: Sequence[str | os.PathLike[str]]
) -> list[ClaimResult]:
    """Judge every claim against the metrics tables."""
    metrics = read_metrics(list(metrics_paths))
    out = []
    for c in claims:
        found = metrics.get(c["metric"])
        note = f"; {c['note']}" if c.get("note") else ""
        if found is None:
            ours, status = None, "pending"
            reason = f"metric {c['metric']} not produced yet (target {c['target']})"
        else:
            ours = found[0]
            ok, why = _judge(c, ours)
            status = "reproduced" if ok else "differs"
            reason = why + note
        out.append(ClaimResult(c["id"], c["paper"], c["kind"], c["where"], c["statement"],
                               c["paper_value"], ours, status, reason, c["target"]))
    return out


def _cell(x: object) -> str:
    if x is None:
        return "–"
    if isinstance(x, float):
        return _fmt(x)
    return str(x).replace("|", "\\|")


def summary(results: Sequence[ClaimResult]) -> str:
    """Counts per status, ``"3 reproduced, 1 differs, 0 pending"``."""
    counts = Counter(r.status for r in results)
    return ", ".join(f"{counts[s]} {s}" for s in STATUSES)


def _rows(results: Sequence[ClaimResult]) -> list[str]:
    lines = [
        "| id | paper | where | statement | paper | ours | status | reason |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        lines.append(
            "| " + " | ".join(_cell(x) for x in (r.id, r.paper, r.where, r.statement,
                                                  r.paper_value, r.ours, r.status, r.reason))
            + " |"
        )
    return lines


#: The section of ``claims.md`` for each kind: its title and what its rows are.
_SECTIONS = {
    "paper": ("The papers' claims", "statements of the papers, in the sense of their words"),
    "ours": ("Our claims", "our own extensions and evaluations: settings, baselines or "
                           "targets the papers do not have; not counted as the papers'"),
    "check": ("Checks", "our own sanity bounds on our implementation; not counted as the "
                        "papers'"),
}


def render_markdown(results: Sequence[ClaimResult]) -> str:
    """The claims table as Markdown: one section per kind, counts per paper over paper rows.

    Parameters
    ----------
    results : sequence of ClaimResult
        The judged rows (:func:`evaluate`).

    Returns
    -------
    str
        ``# Claims``, a summary table of the ``paper`` rows per paper (reproduced /
        differs / pending), then one section per kind (:data:`KINDS`) with its own counts
        and its rows.
    """
    by_kind = {k: [r for r in results if r.kind == k] for k in KINDS}
    papers = list(dict.fromkeys(r.paper for r in by_kind["paper"]))
    lines = [
        "# Claims",
        "",
        f"{len(results)} claims: " + ", ".join(f"{len(by_kind[k])} {k}" for k in KINDS)
        + ". Generated by `commsched claims`; do not edit.",
        "",
        "Per paper, over its `paper` rows only:",
        "",
        "| paper | claims | " + " | ".join(STATUSES) + " |",
        "|---|---|" + "---|" * len(STATUSES),
    ]
    for paper in [*papers, None]:
        rows = [r for r in by_kind["paper"] if paper is None or r.paper == paper]
        counts = Counter(r.status for r in rows)
        lines.append(f"| {paper or 'all'} | {len(rows)} | "
                     + " | ".join(str(counts[s]) for s in STATUSES) + " |")
    for kind in KINDS:
        title, what = _SECTIONS[kind]
        rows = by_kind[kind]
        lines += ["", f"## {title}", "", f"{len(rows)} claims ({what}): {summary(rows)}."]
        if rows:
            lines += ["", *_rows(rows)]
    return "\n".join(lines) + "\n"


def write_claims(results: Sequence[ClaimResult], md_path: str, csv_path: str) -> None:
    """Write the claims table as Markdown and as a provenance-carrying CSV."""
    df = pd.DataFrame([r.__dict__ for r in results])
    write_table(df, csv_path)
    atomic_write_text(md_path, render_markdown(results))


@dataclass(frozen=True)
class ClaimDifference:
    """One row whose verdict differs between a reference run's claims table and ours.

    ``line`` says how, in one line, starting with the id.
    """

    id: str
    line: str


def _read_verdicts(path: str | os.PathLike[str]) -> pd.DataFrame:
    """The ``id``, ``status`` and ``ours`` columns of a claims CSV, indexed by id."""
    df = read_table(path)
    for col in ("id", "status", "ours"):
        if col not in df.columns:
            raise CommschedError(f"{path}: missing column {col!r} (not a claims table)")
    ids = df["id"].astype(str)
    dup = ids[ids.duplicated()]
    if len(dup):
        raise CommschedError(f"{path}: claim {dup.iloc[0]!r} appears twice")
    bad = ~df["status"].isin(STATUSES)
    if bad.any():
        row = int(bad.to_numpy().argmax())
        raise CommschedError(f"{path}: column 'status', row {row + 1}: "
                             f"{df['status'].iloc[row]!r} is not one of {', '.join(STATUSES)}")
    ours = pd.to_numeric(df["ours"], errors="coerce")
    bad = ours.isna() & df["ours"].notna()
    if bad.any():
        row = int(bad.to_numpy().argmax())
        raise CommschedError(f"{path}: column 'ours', row {row + 1}: "
                             f"{str(df['ours'].iloc[row])!r} is not a number")
    return pd.DataFrame({"status": df["status"].to_numpy(), "ours": ours.to_numpy(float)},
                        index=ids.to_numpy())


def _value_change(ref: float, ours: float, rel_tol: float) -> str | None:
    """How ``ours`` moved from ``ref``, or None when within ``rel_tol`` (NaN equals NaN)."""
    if math.isnan(ref) and math.isnan(ours):
        return None
    if math.isnan(ref) or math.isnan(ours):
        shown = [_cell(None if math.isnan(x) else x) for x in (ref, ours)]
        return f"value {shown[0]} -> {shown[1]}"
    scale = max(abs(ref), abs(ours))
    rel = 0.0 if ref == ours else abs(ours - ref) / scale
    if rel <= rel_tol:
        return None
    return f"value {_fmt(ref)} -> {_fmt(ours)} (relative change {rel:.2g} > {rel_tol:g})"


def compare_claims(reference: str | os.PathLike[str], ours: str | os.PathLike[str],
                   rel_tol: float = 1e-9) -> tuple[list[ClaimDifference], int]:
    """The rows of our claims table that differ from a reference run's.

    A row differs when its status changed, when our value changed by more than
    ``rel_tol`` relative to the larger of the two values (a value that appears or
    disappears, e.g. a pending row, is a change), or when it is in one table only.

    Parameters
    ----------
    reference : str or PathLike
        The reference run's ``claims.csv`` (written by :func:`write_claims`).
    ours : str or PathLike
        Our run's ``claims.csv``.
    rel_tol : float
        Relative tolerance on our value, ``|ours - ref| / max(|ours|, |ref|)``; >= 0.

    Returns
    -------
    differences : list of ClaimDifference
        One per differing row: our rows in our table's order, then rows of the reference
        that our table lacks.
    compared : int
        The number of distinct ids in the two tables together.

    Raises
    ------
    CommschedError
        One line naming the file: unreadable, not a claims table (no ``id``, ``status``
        or ``ours`` column), a duplicate id, an unknown status or a non-numeric value;
        or a negative or non-finite ``rel_tol``.
    """
    number(rel_tol, "rel_tol", 0)
    ref, new = _read_verdicts(reference), _read_verdicts(ours)
    out = []
    for cid, row in new.iterrows():
        if cid not in ref.index:
            out.append(ClaimDifference(str(cid), f"{cid}: not in the reference ({row.status})"))
            continue
        old = ref.loc[cid]
        parts = []
        if old.status != row.status:
            parts.append(f"status {old.status} -> {row.status}")
        change = _value_change(float(old.ours), float(row.ours), rel_tol)
        if change:
            parts.append(change)
        if parts:
            out.append(ClaimDifference(str(cid), f"{cid}: " + "; ".join(parts)))
    for cid in ref.index.difference(new.index, sort=False):
        out.append(ClaimDifference(str(cid),
                                   f"{cid}: only in the reference ({ref.loc[cid, 'status']})"))
    return out, len(ref.index.union(new.index))
