"""One TensorFlow gRPC server (``tf.distribute.Server``) of a parameter-server cluster.

Run as ``python -m commsched.cluster.server --cluster JSON --job ps --task 0``. The
emulated cluster starts one per namespace; on a real cluster ``commsched cluster serve``
starts one per host. The server uses one intra-op and one inter-op thread by default
(the issue's pinning; ``--threads``), writes ``--ready FILE`` once it listens, and exits
on SIGTERM, when ``--owner PID:START`` (a process identified as in
:mod:`commsched.cluster.procs`) is gone, or after ``--ttl`` seconds: a server never
outlives the run that started it by more than a second.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from commsched.cluster.procs import owner_alive

__all__ = ["main", "session_config"]


def session_config(threads: int = 1) -> object:
    """The ``ConfigProto`` every server and client of a run uses: ``threads`` intra-op and
    inter-op threads, no Grappler rewrites that would rename the graph's nodes."""
    import tensorflow as tf

    cfg = tf.compat.v1.ConfigProto(
        intra_op_parallelism_threads=threads,
        inter_op_parallelism_threads=threads,
        allow_soft_placement=False,
    )
    rw = cfg.graph_options.rewrite_options
    rw.disable_meta_optimizer = True
    return cfg


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m commsched.cluster.server")
    p.add_argument("--cluster", required=True, help='JSON {"ps": [host:port..], "worker": [..]}')
    p.add_argument("--job", required=True, choices=["ps", "worker"])
    p.add_argument("--task", type=int, required=True)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--ready", help="file to create once the server listens")
    p.add_argument("--owner", help="PID:START of the process whose exit ends this server")
    p.add_argument("--ttl", type=float, default=0.0, help="exit after this many s (0: never)")
    args = p.parse_args(argv)

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    # TensorFlow's own kernels, as the tracer uses (oneDNN fusions rename and retime ops).
    os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
    import tensorflow as tf

    cluster = tf.train.ClusterSpec(json.loads(args.cluster))
    server = tf.distribute.Server(
        cluster, job_name=args.job, task_index=args.task, protocol="grpc",
        config=session_config(args.threads), start=True,
    )
    print(f"server {args.job}:{args.task} listening, target {server.target}", flush=True)
    if args.ready:
        Path(args.ready).parent.mkdir(parents=True, exist_ok=True)
        Path(args.ready).write_text(f"{os.getpid()}\n")
    t0 = time.monotonic()
    while owner_alive(args.owner) and (args.ttl <= 0 or time.monotonic() - t0 < args.ttl):
        time.sleep(0.5)
    print(f"server {args.job}:{args.task} exiting (owner gone or ttl reached)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
