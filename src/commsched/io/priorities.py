"""Priority files: ``{"priorities": {op id: number}}`` (lower runs first).

The format every ordering algorithm writes and the simulator and the live enforcement
read; :func:`write_priorities` can also write the ``name<TAB>priority`` text that TicTac's
tools emit.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

from commsched.atomic import atomic_write_text
from commsched.errors import CommschedError
from commsched.io.structured import read_json

__all__ = ["load_priorities", "write_priorities"]


def load_priorities(path: str | os.PathLike[str]) -> dict[str, float]:
    """Read a priorities JSON file; one-line errors name the file and the op."""
    p = Path(path)
    data = read_json(p)
    prios = data.get("priorities") if isinstance(data, dict) else None
    if not isinstance(prios, dict):
        raise CommschedError(f"{p}: missing field 'priorities' (an object op -> number)")
    for op, v in prios.items():
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise CommschedError(f"{p}: op {op!r}: priority must be a finite number")
    return {str(k): float(v) for k, v in prios.items()}


def write_priorities(
    path: str | os.PathLike[str], priorities: dict[str, float], fmt: str = "json"
) -> None:
    """Write ``priorities`` atomically as JSON or as ``name<TAB>priority`` lines (tsv)."""
    if fmt == "json":
        text = json.dumps({"priorities": priorities}, indent=1, sort_keys=True)
    elif fmt == "tsv":
        text = "".join(f"{k}\t{v:g}\n" for k, v in sorted(priorities.items(), key=lambda kv: kv[1]))
    else:
        raise ValueError(f"unknown priorities format {fmt!r}")
    atomic_write_text(path, text)
