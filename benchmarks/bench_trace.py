"""Tracing cost per model on this machine: wall time and peak memory of ``commsched trace``.

Each trace runs in its own process (``python -m commsched trace ...``); the benchmark
waits for it with ``os.wait4``, which returns that child's resource usage, so the peak RSS
is the trace's own (TensorFlow import, model build, warm-up and traced iterations, writing
the graph). The load average before and after each run is recorded: the machine's cores
may be shared with other work, which inflates wall times.

Run it with ``--out-dir data/traces`` to also refresh the committed traces (the default
profile's settings: each model's standard batch and default input size, 2 warm-up and 3
traced iterations, 2 intra-op / 1 inter-op threads)::

    .venv/bin/python benchmarks/bench_trace.py --out-dir data/traces

Writes ``benchmarks/results/trace.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from commsched.atomic import atomic_write_text
from commsched.trace import zoo

#: (model, mode) pairs of the committed traces: TicTac's experiments use four models in
#: both modes, PACE's the training graphs of its four, the thesis' three small graphs.
RUNS: list[tuple[str, str]] = [
    *[(m, mode) for m in ("alexnet_v2", "inception_v1", "resnet50_v1", "vgg16")
      for mode in ("infer", "train")],
    ("seq2seq_lstm", "train"),
    ("transformer", "train"),
    *[(m, mode) for m in ("thesis_cnn", "thesis_rnn", "thesis_dynamic_rnn")
      for mode in ("infer", "train")],
]
TIMEOUT_S = 1800.0


def _wait(proc: subprocess.Popen[bytes], timeout: float) -> tuple[int, Any]:
    """Wait for ``proc`` (killing it after ``timeout`` s); return (status, its rusage)."""
    deadline = time.monotonic() + timeout
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid == proc.pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            return proc.returncode, usage
        if time.monotonic() > deadline:
            os.kill(proc.pid, signal.SIGKILL)
        time.sleep(0.2)


def bench_one(model: str, mode: str, out_dir: Path, raw_dir: Path, log_dir: Path) -> dict[str, Any]:
    spec = zoo.get(model)
    batch = spec.standard_batch
    name = f"{model}-{mode}-b{batch}"
    out = out_dir / f"{name}.json.gz"
    cmd = [sys.executable, "-m", "commsched", "trace", "--model", model, "--mode", mode,
           "--batch", str(batch), "--out", str(out), "--raw-out", str(raw_dir)]
    load_before = os.getloadavg()
    t = time.perf_counter()
    with open(log_dir / f"{name}.log", "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        code, usage = _wait(proc, TIMEOUT_S)
    wall = time.perf_counter() - t
    row: dict[str, Any] = {
        "model": model, "mode": mode, "batch": batch, "size": spec.size,
        "exit_code": code, "wall_s": round(wall, 2),
        "peak_rss_mib": round(usage.ru_maxrss / 1024, 1),
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 2),
        "load_before": [round(x, 2) for x in load_before],
        "load_after": [round(x, 2) for x in os.getloadavg()],
    }
    if code == 0:
        data = json.loads(out.read_text())
        meta = data["graph"]["meta"]
        row.update(
            ops=len(data["nodes"]), file_bytes=out.stat().st_size,
            coverage=meta["coverage"],
            step_median_s=round(statistics.median(meta["step_wall_s"]), 4),
        )
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out-dir", help="where the traced graphs go (default: a temp dir)")
    ap.add_argument("--raw-dir", default="results/traces/raw", help="raw traces")
    ap.add_argument("--only", nargs="*", help="models to run (default: all of RUNS)")
    ap.add_argument("--result", default="benchmarks/results/trace.json")
    args = ap.parse_args(argv)
    runs = [r for r in RUNS if not args.only or r[0] in args.only]
    with tempfile.TemporaryDirectory() as tmp:
        out_dir = Path(args.out_dir or tmp)
        raw_dir, log_dir = Path(args.raw_dir), Path(tmp)
        for d in (out_dir, raw_dir):
            d.mkdir(parents=True, exist_ok=True)
        rows = []
        for model, mode in runs:
            row = bench_one(model, mode, out_dir, raw_dir, log_dir)
            print(json.dumps(row), flush=True)
            rows.append(row)
    old = {}
    if Path(args.result).exists():  # keep the rows of models not re-run
        previous = json.loads(Path(args.result).read_text())["runs"]
        old = {(r["model"], r["mode"]): r for r in previous}
    old.update({(r["model"], r["mode"]): r for r in rows})
    result = {
        "what": "commsched trace per model: wall time, peak RSS (os.wait4), CPU time",
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                    "python": platform.python_version()},
        "note": "the 2 cores were shared with other jobs while this ran; see load_before/after",
        "runs": list(old.values()),
    }
    atomic_write_text(args.result, json.dumps(result, indent=1) + "\n")
    return 0 if all(r["exit_code"] == 0 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
