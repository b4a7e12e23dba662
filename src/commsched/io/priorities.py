"""Priority files: ``{"priorities": {op id: number}}`` (lower runs first).

The format every ordering algorithm writes and the simulator and the live enforcement
read. :func:`write_priorities` can also write the ``name<TAB>priority`` text that TicTac's
tools emit, and :func:`load_priorities` reads both: a file whose first non-blank character
is ``{`` is JSON, any other is TSV.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from commsched.atomic import atomic_write_text
from commsched.errors import CommschedError
from commsched.validation import number, parse_json, read_text, short

__all__ = ["load_priorities", "write_priorities"]


def _tsv(text: str, p: Path) -> dict[str, object]:
    prios: dict[str, object] = {}
    for no, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        name, sep, value = line.rpartition("\t")
        if not sep or not name:
            raise CommschedError(f"{p}:{no}: expected 'name<TAB>priority', got {short(line)}")
        if name in prios:
            raise CommschedError(f"{p}:{no}: op {short(name)} appears twice")
        try:
            prios[name] = float(value)
        except ValueError:
            prios[name] = value
    return prios


def load_priorities(path: str | os.PathLike[str]) -> dict[str, float]:
    """Read a priorities file (JSON or TSV, optionally gzip-compressed).

    Raises
    ------
    CommschedError
        One line naming the file and the op: unreadable or binary file, malformed JSON,
        a missing ``priorities`` object, a TSV line without a tab, a duplicate op, a
        priority that is not a finite number.
    """
    p = Path(path)
    text = read_text(p)
    if text.lstrip().startswith("{"):
        data = parse_json(text, p)
        prios = data.get("priorities") if isinstance(data, dict) else None
        if not isinstance(prios, dict):
            raise CommschedError(f"{p}: missing field 'priorities' (an object op -> number)")
    else:
        prios = _tsv(text, p)
    return {str(op): float(number(v, f"{p}: op {short(op)}: priority"))
            for op, v in prios.items()}


def _tsv_number(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else repr(float(v))


def write_priorities(
    path: str | os.PathLike[str], priorities: dict[str, float], fmt: str = "json"
) -> None:
    """Write ``priorities`` atomically as JSON or as ``name<TAB>priority`` lines (tsv).

    Both forms keep every priority exactly (TSV writes integers as integers, other
    numbers with all their digits), so :func:`load_priorities` reads back the same order.

    Raises
    ------
    CommschedError
        A priority that is not finite, or (tsv) an op name with a tab or a line break or
        starting with ``{`` (which would read as JSON).
    """
    for op, v in priorities.items():
        number(v, f"{path}: op {short(op)}: priority")
    if fmt == "json":
        text = json.dumps({"priorities": priorities}, indent=1, sort_keys=True)
    elif fmt == "tsv":
        bad = next((k for k in priorities
                    if any(c in k for c in "\t\r\n") or k.lstrip().startswith("{")), None)
        if bad is not None:
            raise CommschedError(f"{path}: op {short(bad)} has a tab or line break or "
                                 "starts with '{{'; write JSON instead")
        text = "".join(f"{k}\t{_tsv_number(v)}\n"
                       for k, v in sorted(priorities.items(), key=lambda kv: kv[1]))
    else:
        raise ValueError(f"unknown priorities format {fmt!r}")
    atomic_write_text(path, text)
