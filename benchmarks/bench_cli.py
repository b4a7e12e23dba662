"""Benchmark of the command line's start-up: ``commsched --help`` and ``validate`` of a
small file in under 0.3 s each.

Each case runs ``python -m commsched ARGS`` in a fresh interpreter (``--repeat`` times,
median; the first run of a case is discarded as a cold-cache run). The cases: the
top-level ``--help``, ``--version``, ``validate`` of an 8-op Par-4 graph, and every
subcommand's ``--help``. With ``--compare-rev REV`` the same cases also run on the ``src/``
of git revision REV (exported to a temporary directory), for a before/after record.
Writes ``benchmarks/results/cli.json``.

Run: ``python benchmarks/bench_cli.py [--compare-rev 494f885]`` (about 30 s).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from io import BytesIO
from pathlib import Path

from benchlib import write_result

from commsched.cli import COMMANDS
from commsched.model.graph import save
from commsched.trace.synthetic import par_n

ROOT = Path(__file__).resolve().parent.parent
TARGET_S = 0.3


def time_command(src: Path, argv: list[str], repeat: int) -> list[float]:
    """Wall times of ``python -m commsched ARGV`` with ``src`` first on the path."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    times = []
    for _ in range(repeat + 1):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-m", "commsched", *argv], env=env, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120)
        times.append(time.perf_counter() - t)
    return times[1:]


def export_src(rev: str, into: Path) -> Path:
    """``src/`` of git revision ``rev``, extracted under ``into``."""
    tar = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "src"], check=True,
                         capture_output=True, timeout=60).stdout
    with tarfile.open(fileobj=BytesIO(tar)) as t:
        t.extractall(into, filter="data")
    return into / "src"


def measure(src: Path, cases: dict[str, list[str]], repeat: int) -> dict[str, dict]:
    out = {}
    for name, argv in cases.items():
        runs = time_command(src, argv, repeat)
        out[name] = {"median_s": statistics.median(runs), "runs_s": runs}
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--repeat", type=int, default=5, choices=range(1, 51), metavar="1..50")
    p.add_argument("--compare-rev", help="git revision to time as 'before'")
    p.add_argument("--out", default=str(Path(__file__).parent / "results" / "cli.json"))
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        graph = Path(tmp) / "par4.json"
        save(par_n(4), graph)
        cases = {"--help": ["--help"], "--version": ["--version"],
                 "validate small file": ["validate", str(graph)],
                 **{f"{c} --help": [c, "--help"] for c in COMMANDS}}
        after = measure(ROOT / "src", cases, args.repeat)
        before = None
        if args.compare_rev:
            old = export_src(args.compare_rev, Path(tmp) / "before")
            before = measure(old, cases, args.repeat)
    key = ("--help", "validate small file")
    met = all(after[k]["median_s"] < TARGET_S for k in key)
    result = {
        "benchmark": "commsched start-up (python -m commsched, fresh interpreter per run)",
        "repeat": args.repeat,
        "target": f"< {TARGET_S:g} s for --help and validate of a small file",
        "target_met": met,
        "seconds": after,
        "before": {"rev": args.compare_rev, "seconds": before} if before else None,
    }
    write_result(args.out, result)
    for k in cases:
        was = f" (before {before[k]['median_s']:.3f} s)" if before else ""
        print(f"{k:24s} {after[k]['median_s']:.3f} s{was}")
    print(f"target < {TARGET_S:g} s: {'met' if met else 'MISSED'}; wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
