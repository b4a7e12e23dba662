"""Benchmark of the emulated cluster: start-up, teardown and the shaped links' throughput.

Measured (``benchmarks/results/live.json``), for one parameter server and two workers:

* ``up_s``: :meth:`EmulatedCluster.up` (namespaces, veth, bridge, tbf, three TensorFlow
  servers listening), ``down_s``: teardown, ``leftovers``: namespaces and processes of the
  run still present afterwards (must be 0);
* ``tcp_MBps``: one TCP stream of ``--mbytes`` MB from the PS namespace to a worker's, at
  each rate of ``--rates`` (tc rate units), against the nominal rate: how much of its
  nominal bandwidth a ``tbf`` link delivers (FACTS: 109 MiB/s at 1gbit, burst 64kb).

Run: ``python benchmarks/bench_live.py`` as root (about 1 minute on 2 cores); without
namespace support it records the reason and exits 0.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

from commsched.atomic import atomic_write_text
from commsched.cluster import net
from commsched.cluster.emulated import ClusterConfig, EmulatedCluster
from commsched.cluster.procs import alive

OUT = Path(__file__).resolve().parent / "results" / "live.json"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rates", nargs="+", default=["100mbit", "1gbit", "2gbit"])
    p.add_argument("--mbytes", type=int, default=40)
    p.add_argument("--out", default=str(OUT))
    args = p.parse_args()
    record: dict[str, object] = {"machine": platform.machine(), "python": sys.version.split()[0]}
    reason = net.check_support()
    if reason:
        record["skipped"] = reason
        atomic_write_text(args.out, json.dumps(record, indent=1))
        print(f"skipped: {reason}")
        return 0
    c = EmulatedCluster(ClusterConfig(n_ps=1, n_workers=2, bandwidth=args.rates[0]),
                        run_id="bench")
    t = time.perf_counter()
    try:
        c.up()
        record["up_s"] = round(time.perf_counter() - t, 2)
        ps, w0 = c.links[0], c.links[1]
        rates = {}
        for rate in args.rates:
            c.set_bandwidth(rate)
            _, got = net.tcp_rate(ps.namespace, w0.namespace, w0.address, args.mbytes * 10**6,
                                  timeout=120.0)
            rates[rate] = {"MBps": round(got / 1e6, 1),
                           "fraction_of_nominal": round(got / net.parse_rate(rate), 3)}
            print(rate, rates[rate], flush=True)
        record["tcp_MBps"] = rates
    finally:
        t = time.perf_counter()
        c.down()
        record["down_s"] = round(time.perf_counter() - t, 2)
    record["leftovers"] = len(net.list_namespaces("cs-bench-")) + sum(
        alive(r) for r in c.state.processes)
    atomic_write_text(args.out, json.dumps(record, indent=1))
    print(json.dumps(record, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
