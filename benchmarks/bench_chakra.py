"""Benchmark of the Chakra import: a trace of a few thousand nodes and ~200k dependencies.

Writes a seeded synthetic Chakra ET (one rank, no commsched attributes, like a foreign
trace): ``--nodes`` nodes, every node depending on up to ``--deps`` random earlier nodes
(data dependencies, a quarter as control dependencies), every 50th node an ALL_REDUCE
with a size; then times :func:`commsched.io.chakra.import_chakra` on it and
:func:`commsched.io.chakra.export_chakra` of the imported graph (median of ``--repeat``
runs) and writes ``benchmarks/results/chakra.json``. Target: import in under 5 s.

Run: ``python benchmarks/bench_chakra.py`` (about 1 min on 2 shared cores).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

import numpy as np
from benchlib import report, timed
from chakra.schema.protobuf import et_def_pb2 as pb

from commsched.io.chakra import export_chakra, import_chakra, write_et

TARGET_S = 5.0


def synthetic_et(path: Path, n: int, deps: int, seed: int) -> int:
    """Write the synthetic ET; returns its number of dependencies."""
    rng = np.random.default_rng(seed)
    nodes = []
    total = 0
    for i in range(n):
        node = pb.Node(id=i, name=f"op{i}", duration_micros=int(rng.integers(1, 1000)))
        if i % 50 == 49:
            node.type = pb.COMM_COLL_NODE
            node.attr.append(pb.AttributeProto(name="comm_type", int64_val=pb.ALL_REDUCE))
            node.attr.append(pb.AttributeProto(name="comm_size",
                                               int64_val=int(rng.integers(1, 1 << 24))))
        else:
            node.type = pb.COMP_NODE
        if i:
            src = np.unique(rng.integers(0, i, size=min(deps, i)))
            cut = len(src) // 4
            node.ctrl_deps.extend(int(x) for x in src[:cut])
            node.data_deps.extend(int(x) for x in src[cut:])
            total += len(src)
        nodes.append(node)
    write_et(path, pb.GlobalMetadata(version="0.0.4"), nodes)
    return total


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--nodes", type=int, default=4000)
    p.add_argument("--deps", type=int, default=52, help="dependencies drawn per node")
    p.add_argument("--repeat", type=int, default=3, choices=range(1, 21), metavar="1..20")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=str(Path(__file__).parent / "results" / "chakra.json"))
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        et = Path(tmp) / "bench.0.et"
        n_deps = synthetic_et(et, args.nodes, args.deps, args.seed)
        times, imported = timed(lambda: import_chakra([et]), args.repeat)
        g = imported.graph
        out_times, _ = timed(lambda: export_chakra(g, Path(tmp) / "out"), args.repeat)
        size = et.stat().st_size
    result = {
        "benchmark": "Chakra ET import and export (commsched.io.chakra)",
        "nodes": args.nodes, "dependencies": n_deps, "file_bytes": size, "seed": args.seed,
        "repeat": args.repeat, "ops": g.number_of_nodes(), "edges": g.number_of_edges(),
        "unmapped": dict(imported.unmapped),
        "import_s": statistics.median(times), "import_all_s": times,
        "export_s": statistics.median(out_times), "export_all_s": out_times,
        "target": f"import < {TARGET_S:g} s",
        "target_met": statistics.median(times) < TARGET_S,
    }
    return report(args.out, result,
                  f"{args.nodes} nodes, {n_deps} dependencies: import "
                  f"{result['import_s']:.2f} s, export {result['export_s']:.2f} s",
                  f"import < {TARGET_S:g} s")


if __name__ == "__main__":
    sys.exit(main())
