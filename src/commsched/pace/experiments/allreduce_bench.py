"""Measure all-reduce time versus tensor size between local TensorFlow processes.

The analog of PACE's measurement behind its Fig. 3 (Bao et al., INFOCOM 2020: all-reduce
time of one tensor grows linearly with its size, ``a + b * s``). We start ``n`` TensorFlow
worker processes, each a :class:`tf.distribute.MultiWorkerMirroredStrategy` member with
the ring collective implementation over gRPC, and time ``ReplicaContext.all_reduce`` (SUM)
of float32 tensors of log-spaced sizes.

Procedure (per worker count ``n``):

1. Create a private network namespace ``csar-<pid>-<n>`` with only ``lo`` up (when
   ``--netns`` is ``on``, or ``auto`` and we are root with ``ip netns`` working), so the
   gRPC servers -- which listen on all interfaces -- are reachable only inside it.
   Otherwise run on 127.0.0.1 with ports the OS reports free.
2. Launch the ``n`` workers (this module, ``worker`` subcommand). Each one warms up every
   size twice, then for every repetition runs a one-float all-reduce as a barrier and
   times the all-reduce of the tensor (``time.perf_counter`` around the call and the
   copy of the result to host).
3. Wait at most ``--timeout`` seconds in total; on expiry kill exactly the worker PIDs we
   started and fail. The collectives themselves time out after ``--op-timeout`` seconds.
   Remove the namespace.

Every rank's time of every repetition is one row (``workers, rank, size_bytes, rep,
seconds``); :mod:`commsched.pace.experiments.allreduce_fit` reduces them (max over ranks, the
time at which the collective finished everywhere).

Run: ``python -m commsched.pace.experiments.allreduce_bench measure --workers 2 4
--min-bytes 4096 --max-bytes 67108864 --points 15 --reps 10 -o allreduce.csv``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from commsched import driver
from commsched.errors import CommschedError
from commsched.results import write_table

__all__ = ["log_sizes", "main", "measure"]

#: Ports used inside a private namespace (it is empty, so they are free).
NETNS_BASE_PORT = 24000


def log_sizes(min_bytes: int, max_bytes: int, points: int) -> list[int]:
    """``points`` log-spaced sizes from ``min_bytes`` to ``max_bytes``, multiples of 4.

    Parameters
    ----------
    min_bytes, max_bytes : int
        The smallest and largest size (``4 <= min_bytes <= max_bytes``).
    points : int
        How many sizes (>= 1; sizes that round to the same multiple of 4 count once).

    Returns
    -------
    list of int
        The sizes, ascending.

    Raises
    ------
    CommschedError
        If the bounds or ``points`` are out of range.

    Examples
    --------
    >>> log_sizes(4096, 65536, 5)
    [4096, 8192, 16384, 32768, 65536]
    """
    if min_bytes < 4 or max_bytes < min_bytes or points < 1:
        raise CommschedError(
            "need 4 <= min_bytes <= max_bytes and points >= 1, "
            f"got {min_bytes}, {max_bytes}, {points}"
        )
    raw = np.geomspace(min_bytes, max_bytes, points) if points > 1 else np.array([min_bytes])
    return sorted({round(float(x) / 4) * 4 for x in raw})


def _free_ports(n: int) -> list[int]:
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _run(cmd: list[str]) -> None:
    subprocess.run(cmd, check=True, capture_output=True, timeout=30)


def _netns_usable() -> bool:
    if shutil.which("ip") is None or os.geteuid() != 0:
        return False
    probe = f"csar-probe-{os.getpid()}"
    try:
        _run(["ip", "netns", "add", probe])
    except (OSError, subprocess.SubprocessError):
        return False
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        _run(["ip", "netns", "del", probe])
    return True


def _measure_once(
    n: int, sizes: list[int], reps: int, deadline: float, op_timeout: float, netns: str | None,
    workdir: Path, setup: dict[str, Any],
) -> list[dict[str, Any]]:
    ports = [NETNS_BASE_PORT + i for i in range(n)] if netns else _free_ports(n)
    prefix = ["ip", "netns", "exec", netns] if netns else []
    procs: list[subprocess.Popen[bytes]] = []
    outs = [workdir / f"w{n}-r{rank}.json" for rank in range(n)]
    logs = [open(workdir / f"w{n}-r{rank}.log", "wb") for rank in range(n)]  # noqa: SIM115
    try:
        for rank in range(n):
            cmd = [
                *prefix, sys.executable, "-m", "commsched.pace.experiments.allreduce_bench",
                "worker",
                "--rank", str(rank), "--ports", ",".join(map(str, ports)),
                "--sizes", ",".join(map(str, sizes)), "--reps", str(reps),
                "--op-timeout", str(op_timeout), "--out", str(outs[rank]),
            ]
            procs.append(subprocess.Popen(cmd, stdout=logs[rank], stderr=subprocess.STDOUT))
        for rank, p in enumerate(procs):
            left = deadline - time.monotonic()
            try:
                rc = p.wait(timeout=max(left, 0.1))
            except subprocess.TimeoutExpired:
                raise CommschedError(
                    f"all-reduce measurement with {n} workers did not finish in time "
                    f"(see {workdir}/w{n}-r{rank}.log)"
                ) from None
            if rc != 0:
                tail = (workdir / f"w{n}-r{rank}.log").read_text(errors="replace")[-400:]
                raise CommschedError(f"worker {rank} of {n} failed (exit {rc}): {tail.strip()}")
    finally:
        for p in procs:  # only the PIDs we started
            if p.poll() is None:
                p.kill()
                p.wait(timeout=10)
        for f in logs:
            f.close()
    rows: list[dict[str, Any]] = []
    for rank, path in enumerate(outs):
        data = json.loads(path.read_text())
        setup["tf_version"] = data["tf_version"]
        for size, times in zip(data["sizes"], data["times"], strict=True):
            for rep, t in enumerate(times):
                rows.append({"workers": n, "rank": rank, "size_bytes": size, "rep": rep,
                             "seconds": t})
    return rows


def measure(
    workers: Sequence[int],
    sizes: Sequence[int],
    reps: int,
    timeout_s: float = 600.0,
    op_timeout_s: float = 60.0,
    netns: str = "auto",
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Run the measurement for every worker count (module docstring).

    Parameters
    ----------
    workers : sequence of int
        Worker counts (each >= 2).
    sizes : sequence of int
        Tensor sizes in bytes (:func:`log_sizes`).
    reps : int
        Timed repetitions per size (>= 1).
    timeout_s : float
        Bound on the whole measurement; the workers still running then are killed.
    op_timeout_s : float
        Bound on one collective.
    netns : {"auto", "on", "off"}
        Whether to run in a private network namespace.

    Returns
    -------
    pandas.DataFrame
        One row per worker count, rank, size and repetition (``seconds``).
    dict
        How it was run (network, strategy, host, load before and after).

    Raises
    ------
    CommschedError
        On bad arguments, a namespace that cannot be created, or a worker that failed or
        did not finish in time.

    References
    ----------
    PACE (Bao et al., INFOCOM 2020), Sec. II-C and Fig. 3 (all-reduce time vs size).
    """
    if reps < 1 or not sizes or not workers or min(workers) < 2:
        raise CommschedError("need reps >= 1, at least one size and worker counts >= 2")
    if netns not in ("auto", "on", "off"):
        raise CommschedError(f"--netns must be auto, on or off, got {netns!r}")
    use_ns = netns == "on" or (netns == "auto" and _netns_usable())
    deadline = time.monotonic() + timeout_s
    rows: list[dict[str, Any]] = []
    setup: dict[str, Any] = {
        "workers": list(workers), "sizes": list(sizes), "reps": reps,
        "network": "private netns, lo" if use_ns else "host loopback 127.0.0.1",
        "strategy": "MultiWorkerMirroredStrategy, RING, gRPC", "dtype": "float32",
        "host": platform.node(), "cpus": os.cpu_count(), "python": platform.python_version(),
        "loadavg_1min_before": round(os.getloadavg()[0], 2),
    }
    with tempfile.TemporaryDirectory(prefix="commsched-allreduce-") as tmp:
        for n in workers:
            ns = f"csar-{os.getpid()}-{n}" if use_ns else None
            if ns:
                try:
                    _run(["ip", "netns", "add", ns])
                    _run(["ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up"])
                except (OSError, subprocess.SubprocessError) as e:
                    raise CommschedError(f"cannot create network namespace {ns}: {e}") from None
            try:
                rows += _measure_once(
                    n, list(sizes), reps, deadline, op_timeout_s, ns, Path(tmp), setup
                )
            finally:
                if ns:
                    subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=30)
    setup["loadavg_1min_after"] = round(os.getloadavg()[0], 2)
    return pd.DataFrame(rows), setup


def _worker(args: argparse.Namespace) -> int:
    """One all-reduce worker (runs in its own process)."""
    ports = [int(p) for p in args.ports.split(",")]
    sizes = [int(s) for s in args.sizes.split(",")]
    os.environ["TF_CONFIG"] = json.dumps({
        "cluster": {"worker": [f"127.0.0.1:{p}" for p in ports]},
        "task": {"type": "worker", "index": args.rank},
    })
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    impl = tf.distribute.experimental.CommunicationImplementation.RING
    opts = tf.distribute.experimental.CommunicationOptions(
        implementation=impl, timeout_seconds=args.op_timeout
    )
    strategy = tf.distribute.MultiWorkerMirroredStrategy(communication_options=opts)
    device = strategy.extended.worker_devices[0]

    def make_allreduce() -> Any:
        @tf.function
        def run(x: Any) -> Any:
            def step(v: Any) -> Any:
                # Without an explicit device the replica value has none, and all_reduce
                # fails with "destinations can not be empty" (TF 2.21).
                with tf.device(device):
                    v = tf.identity(v)
                ctx = tf.distribute.get_replica_context()
                return ctx.all_reduce(tf.distribute.ReduceOp.SUM, v)

            return strategy.run(step, args=(x,))

        return run

    def value(n_floats: int) -> Any:
        return strategy.experimental_distribute_values_from_function(
            lambda ctx: tf.ones([n_floats], tf.float32)
        )

    def done(y: Any) -> np.ndarray:
        out: np.ndarray = strategy.experimental_local_results(y)[0].numpy()
        return out

    barrier, one = make_allreduce(), value(1)
    times: list[list[float]] = []
    for size in sizes:
        f, x = make_allreduce(), value(size // 4)
        for _ in range(2):
            done(barrier(one))
            y = done(f(x))
        if y[0] != len(ports):
            raise RuntimeError(f"all-reduce of ones gave {y[0]}, expected {len(ports)}")
        ts = []
        for _ in range(args.reps):
            done(barrier(one))
            t0 = time.perf_counter()
            done(f(x))
            ts.append(time.perf_counter() - t0)
        times.append(ts)
    Path(args.out).write_text(json.dumps({"rank": args.rank, "sizes": sizes, "times": times,
                                          "tf_version": tf.__version__}))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the driver: ``measure`` (module docstring) or one ``worker`` (internal).

    Parameters
    ----------
    argv : sequence of str, optional
        ``measure ...`` or ``worker ...`` (default: ``sys.argv[1:]``).

    Returns
    -------
    int
        0, or 2 after a one-line error (bad sizes or worker counts, a worker that failed
        or did not finish in time).
    """
    p = driver.parser("commsched.pace.experiments.allreduce_bench", __doc__)
    sub = p.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("measure", help="run the measurement, write a CSV")
    m.add_argument("--workers", type=int, nargs="+", default=[2])
    m.add_argument("--min-bytes", type=int, default=4096)
    m.add_argument("--max-bytes", type=int, default=64 << 20)
    m.add_argument("--points", type=int, default=15)
    m.add_argument("--reps", type=int, default=10)
    m.add_argument("--timeout", type=float, default=600.0, help="whole run, seconds")
    m.add_argument("--op-timeout", type=float, default=60.0, help="one collective, seconds")
    m.add_argument("--netns", choices=["auto", "on", "off"], default="auto")
    m.add_argument("-o", "--output", required=True)
    w = sub.add_parser("worker", help="(internal) one worker process")
    w.add_argument("--rank", type=int, required=True)
    w.add_argument("--ports", required=True)
    w.add_argument("--sizes", required=True)
    w.add_argument("--reps", type=int, required=True)
    w.add_argument("--op-timeout", type=float, required=True)
    w.add_argument("--out", required=True)
    args = p.parse_args(argv)
    if args.cmd == "worker":
        return _worker(args)

    def body() -> None:
        sizes = log_sizes(args.min_bytes, args.max_bytes, args.points)
        t0 = time.monotonic()
        df, setup = measure(args.workers, sizes, args.reps, args.timeout, args.op_timeout,
                            args.netns)
        setup["wall_seconds"] = round(time.monotonic() - t0, 1)
        write_table(df, args.output, setup)
        print(f"wrote {len(df)} rows to {args.output} in {setup['wall_seconds']} s")

    return driver.run("allreduce_bench", body)


if __name__ == "__main__":
    sys.exit(main())
