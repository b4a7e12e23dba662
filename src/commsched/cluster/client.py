"""The command line every live job client shares: read a plan, run it, write the results.

A client (:mod:`commsched.tictac.live.job`, :mod:`commsched.placement.live.job`) runs in a
namespace of the cluster as ``python -m <module> --plan PLAN.json [--task I] --out
RESULT.json``; a bad plan is a one-line error (exit 2), never a traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from commsched.atomic import atomic_write_text
from commsched.errors import CommschedError

__all__ = ["client_main"]


def client_main(prog: str, run: Callable[[Mapping[str, Any], int | None], Mapping[str, Any]],
                argv: Sequence[str] | None = None, task: bool = False) -> int:
    """Parse ``--plan``, ``--out`` (and ``--task``), run the plan, write its results.

    Parameters
    ----------
    prog : str
        The client's ``python -m`` name, for usage lines.
    run : callable
        ``run(plan, task)`` -> the JSON-ready results (``task`` is None without ``--task``).
    argv : sequence of str, optional
        Default ``sys.argv[1:]``.
    task : bool
        Whether the client takes ``--task I`` (one client per worker).

    Returns
    -------
    int
        0, or 2 after a one-line error on stderr.
    """
    p = argparse.ArgumentParser(prog=f"python -m {prog}")
    p.add_argument("--plan", required=True)
    if task:
        p.add_argument("--task", type=int, required=True)
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)
    os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")  # as the tracer: TF's own kernels
    with open(args.plan) as f:
        plan = json.load(f)
    try:
        results = run(plan, args.task if task else None)
    except CommschedError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    atomic_write_text(args.out, json.dumps(results))
    return 0
