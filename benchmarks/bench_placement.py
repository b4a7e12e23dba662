"""Benchmark of the placement suite (thesis deliverable 9): partitioners, schedulers, HEFT.

Parts (``--parts``, all by default):

``graph1``  Table 7.1's synthetic graph 1 (36,319 nodes) on 100 devices generated as Sec. 6.2
            describes: every partitioner x scheduler, each placement validated and each
            schedule through the validator. Target: within minutes.
``java``    the work the published Java simulator times (Mayer, Mayer & Laich, DIDL 2017):
            all combinations on 7 and on 50 devices for the CNN graph (1.7 s in Java), a
            3k-node RNN graph (11.4 s) and a 5k-node dynamic RNN graph (23.9 s). The CNN is
            the thesis-format graph of the published simulator when ``--thesis-data`` has it
            (its devices7/devices50 files too); the RNN graphs of the thesis are not
            available, so level-generator graphs with their Table 7.2 node, edge and
            colocated-node counts stand in (same size of work, not the same graphs).
``heft``    HEFT alone on a 10,000-task level-generator graph and 8 devices (insertion-based,
            Eqs. 4.1-4.2 ranks). With ``--saga-python`` (a Python that has ``anrg-saga``,
            installed apart from the project's environment), SAGA's HEFT runs on the same
            instance in that interpreter, timed for building its graphs and for scheduling,
            and both makespans are recorded (SAGA's published numbers here: 120 s to build
            plus 21.8 s to schedule). End to end = building the model from the generated
            graph plus scheduling, on both sides. Without SAGA the part records why it
            skipped the comparison (``saga_skipped``).

Writes ``benchmarks/results/placement.json``. Run:
``python benchmarks/bench_placement.py [--thesis-data ../shared/thesis-data]
[--saga-python /tmp/saga-venv/bin/python]`` (about 2 minutes on 2 cores without SAGA).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from benchlib import write_result

from commsched.experiments.placement import TABLE71, synthetic_graph
from commsched.io.thesis import read_devices, read_graph
from commsched.placement import PARTITIONERS, SCHEDULERS, Cluster, Options, Problem
from commsched.placement.heft import heft_core
from commsched.placement.model import random_devices
from commsched.placement.run import partition, schedule
from commsched.trace.synthetic import level_dag

JAVA_S = {"cnn": 1.7, "rnn": 11.4, "dynamic_rnn": 23.9}
SAGA_S = {"build": 120.0, "schedule": 21.8}
TABLE72 = {"rnn": (3069, 5533, 533), "dynamic_rnn": (5271, 9214, 1356)}


def all_combinations(p: Problem, c: Cluster) -> dict[str, Any]:
    """Every partitioner x scheduler; per-step times and the results."""
    out: dict[str, Any] = {"partition_s": {}, "schedule_s": {}, "makespan": {}, "traffic": {}}
    t0 = time.perf_counter()
    for pn in PARTITIONERS:
        placement, pt = partition(p, c, pn, Options())
        out["partition_s"][pn] = pt
        for sn in SCHEDULERS:
            _, s, st = schedule(p, c, placement, sn, Options())
            key = f"{pn}+{sn}"
            out["schedule_s"][key] = st
            out["makespan"][key] = s.makespan
            out["traffic"][key] = s.traffic
    out["total_s"] = time.perf_counter() - t0
    return out


def part_graph1() -> dict[str, Any]:
    t = time.perf_counter()
    p = Problem.from_thesis(synthetic_graph(1, 1.0, 0))
    build = time.perf_counter() - t
    res = all_combinations(p, random_devices(100, seed=0))
    return {"nodes": p.n, "edges": p.n_edges, "devices": 100, "build_s": build, **res}


def _rnn_like(name: str, seed: int) -> Problem:
    nodes, edges, coloc = TABLE72[name]
    levels = 300
    g = level_dag(levels=levels, min_per_level=1, max_per_level=2 * nodes // levels,
                  nodes=nodes, max_level_distance=5, level_edges=edges, long_range_edges=0,
                  colocated_nodes=coloc, cpu_prob=0.0, gpu_prob=0.0, seed=seed)
    return Problem.from_thesis(g)


def part_java(thesis_data: Path | None) -> dict[str, Any]:
    graphs: dict[str, tuple[Problem, str]] = {}
    dev7, dev50 = random_devices(7, seed=7), random_devices(50, seed=50)
    if thesis_data and (thesis_data / "convolutional_network_graph.csv").is_file():
        graphs["cnn"] = (Problem.from_thesis(read_graph(
            thesis_data / "convolutional_network_graph.csv")), "published thesis-format graph")
        dev7 = Cluster.from_devices(read_devices(thesis_data / "devices7.csv"))
        dev50 = Cluster.from_devices(read_devices(thesis_data / "devices50.csv"))
    for name in TABLE72:
        graphs[name] = (_rnn_like(name, 0), "level generator with Table 7.2's counts")
    out: dict[str, Any] = {}
    for name, (p, source) in graphs.items():
        t = time.perf_counter()
        r7 = all_combinations(p, dev7)
        r50 = all_combinations(p, dev50)
        total = time.perf_counter() - t
        out[name] = {"nodes": p.n, "edges": p.n_edges, "source": source,
                     "seconds_7_devices": r7["total_s"], "seconds_50_devices": r50["total_s"],
                     "combinations": 2 * len(PARTITIONERS) * len(SCHEDULERS),
                     "seconds": total, "java_seconds": JAVA_S[name],
                     "speedup_vs_java": JAVA_S[name] / total}
    return out


def heft_instance(seed: int) -> tuple[Problem, Cluster, float]:
    """The 10k-task instance, with the seconds it takes to build our model of it."""
    g = level_dag(levels=200, min_per_level=25, max_per_level=75, nodes=10_000,
                  max_level_distance=5, level_edges=20_000, long_range_edges=0,
                  colocation_scale=0.0, cpu_prob=0.0, gpu_prob=0.0, seed=seed)
    t = time.perf_counter()
    p = Problem.from_thesis(g)
    return p, random_devices(8, seed=seed), time.perf_counter() - t


def part_heft(saga_python: str | None) -> dict[str, Any]:
    p, c, build = heft_instance(0)
    t = time.perf_counter()
    w = p.ops[:, None] / c.speed[None, :]
    size = p.size
    # SAGA's model: rank costs are means of cost / speed and of size / bandwidth over all
    # device pairs, a device with itself included (cost 0); ties rarely matter
    inv = 1.0 / c.rate
    iu = np.triu_indices(c.n)
    r = heft_core(w, w.mean(axis=1), p.succ, lambda u, _v: float(size[u]), c.rate,
                  comm_factor=float(inv[iu].mean()))
    ours = time.perf_counter() - t
    out: dict[str, Any] = {"tasks": p.n, "edges": p.n_edges, "devices": c.n,
                           "ours_build_s": build, "ours_s": ours,
                           "ours_makespan": r.makespan, "saga_published_s": SAGA_S}
    if not saga_python:
        out["saga_skipped"] = ("no --saga-python given: anrg-saga is not a project dependency; "
                               "install it in a separate virtualenv to compare")
    else:
        spec = {"ops": p.ops.tolist(), "size": p.size.tolist(),
                "edges": [(u, v) for u in range(p.n) for v in p.succ[u]],
                "speed": c.speed.tolist(),
                "rate": [[0.0 if i == j else float(c.rate[i, j]) for j in range(c.n)]
                         for i in range(c.n)]}
        script = Path(__file__).with_name("saga_heft.py")
        proc = subprocess.run([saga_python, str(script)], input=json.dumps(spec), text=True,
                              capture_output=True, timeout=1800, check=False)
        if proc.returncode != 0:
            out["saga_skipped"] = "SAGA failed: " + " ".join(proc.stderr.strip().splitlines()[-1:])
        else:
            saga = json.loads(proc.stdout)
            out["saga"] = saga
            out["speedup_end_to_end"] = (saga["build_s"] + saga["schedule_s"]) / (build + ours)
            out["same_makespan"] = bool(np.isclose(saga["makespan"], r.makespan, rtol=1e-9))
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--parts", nargs="+", default=["graph1", "java", "heft"],
                   choices=["graph1", "java", "heft"])
    p.add_argument("--thesis-data", type=Path, default=None,
                   help="directory with the published thesis-format CNN graph and devices")
    p.add_argument("--saga-python", default=None, help="a Python with anrg-saga installed")
    p.add_argument("--out", default=str(Path(__file__).parent / "results" / "placement.json"))
    args = p.parse_args(argv)
    result: dict[str, Any] = {"benchmark": "placement suite (commsched.placement, sim.devices)",
                              "table71_graph1": TABLE71[1]}
    if "graph1" in args.parts:
        result["graph1"] = part_graph1()
        print(f"graph 1: {result['graph1']['total_s']:.1f} s for 21 combinations", flush=True)
    if "java" in args.parts:
        result["java"] = part_java(args.thesis_data)
        for k, v in result["java"].items():
            print(f"{k}: {v['seconds']:.2f} s (Java {v['java_seconds']} s)", flush=True)
    if "heft" in args.parts:
        result["heft"] = part_heft(args.saga_python)
        h = result["heft"]
        print(f"HEFT 10k x 8: {h['ours_build_s'] + h['ours_s']:.2f} s end to end; SAGA: "
              f"{h.get('speedup_end_to_end', h.get('saga_skipped'))}", flush=True)
    write_result(args.out, result)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
