"""The claims table: every statement we reproduce, the paper's value beside ours.

``papers/claims/<work>.yaml`` (one file per work: ``tictac.yaml``, ``pace.yaml``, ...)
list claims::

    claims:
      - id: tictac-seq32-one-best-order        # unique, kebab-case
        paper: tictac                           # key of papers/references.bib
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

Status: ``reproduced`` when the comparison holds, ``differs`` when it does not,
``pending`` when no metrics table has the metric yet.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import jsonschema
import pandas as pd

from commsched.atomic import atomic_write_text
from commsched.errors import CommschedError
from commsched.io.structured import read_yaml
from commsched.results import read_metrics, write_table
from commsched.validation import number

__all__ = [
    "CLAIMS_SCHEMA",
    "ClaimResult",
    "evaluate",
    "load_claims",
    "render_markdown",
    "write_claims",
]

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
                "required": ["id", "paper", "where", "statement", "metric", "paper_value",
                             "compare", "target"],
                "additionalProperties": False,
                "properties": {
                    "id": {"type": "string", "pattern": "^[a-z0-9][a-z0-9-]*$"},
                    "paper": {"type": "string"},
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


@dataclass(frozen=True)
class ClaimResult:
    id: str
    paper: str
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
        out.append(ClaimResult(c["id"], c["paper"], c["where"], c["statement"],
                               c["paper_value"], ours, status, reason, c["target"]))
    return out


def _cell(x: object) -> str:
    if x is None:
        return "–"
    if isinstance(x, float):
        return _fmt(x)
    return str(x).replace("|", "\\|")


def render_markdown(results: Sequence[ClaimResult]) -> str:
    """The claims table as Markdown, with a count per status."""
    counts = pd.Series([r.status for r in results]).value_counts()
    summary = ", ".join(f"{counts.get(s, 0)} {s}" for s in ("reproduced", "differs", "pending"))
    lines = [
        "# Claims",
        "",
        f"{len(results)} claims: {summary}. Generated by `commsched claims`; do not edit.",
        "",
        "| id | paper | where | statement | paper | ours | status | reason |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        lines.append(
            "| " + " | ".join(_cell(x) for x in (r.id, r.paper, r.where, r.statement,
                                                  r.paper_value, r.ours, r.status, r.reason))
            + " |"
        )
    return "\n".join(lines) + "\n"


def write_claims(results: Sequence[ClaimResult], md_path: str, csv_path: str) -> None:
    """Write the claims table as Markdown and as a provenance-carrying CSV."""
    df = pd.DataFrame([r.__dict__ for r in results])
    write_table(df, csv_path)
    atomic_write_text(md_path, render_markdown(results))
