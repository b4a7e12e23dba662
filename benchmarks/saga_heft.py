"""SAGA's HEFT on an instance given as JSON on stdin (run with a Python that has anrg-saga).

Input: {"ops": [...], "size": [...], "edges": [[u, v], ...], "speed": [...],
"rate": [[...], ...]} (task i costs ops[i], edge (u, v) carries size[u], device j has
speed[j], rate[a][b] is the bandwidth). Prints {"build_s", "schedule_s", "makespan",
"anrg_saga_version", "device_order", "order", "device"}: ``device_order`` lists the device indices
in the order SAGA's HEFT tries them (the iteration order of its frozenset of devices, which
follows the string hashes of the names, so ``PYTHONHASHSEED``); the first device with the
strictly smallest finish time wins, so this order is SAGA's device tie-break. ``order``
lists the tasks in SAGA's scheduling order (upward rank, ties by a networkx topological
order, which follows the same hashes). ``device[i]`` is the device SAGA gave task i.
Called by bench_placement.py; kept apart because SAGA is not a project dependency.
"""

from __future__ import annotations

import json
import sys
import time
from importlib.metadata import version

from saga import Network, TaskGraph
from saga.schedulers.heft import HeftScheduler, heft_rank_sort


def main() -> int:
    spec = json.load(sys.stdin)
    t = time.perf_counter()
    n_dev = len(spec["speed"])
    network = Network.create(
        nodes=[(f"d{j}", float(s)) for j, s in enumerate(spec["speed"])],
        edges=[(f"d{a}", f"d{b}", float(spec["rate"][a][b]))
               for a in range(n_dev) for b in range(a + 1, n_dev)])
    task_graph = TaskGraph.create(
        tasks=[(f"t{i}", float(c)) for i, c in enumerate(spec["ops"])],
        dependencies=[(f"t{u}", f"t{v}", float(spec["size"][u])) for u, v in spec["edges"]])
    build = time.perf_counter() - t
    t = time.perf_counter()
    schedule = HeftScheduler().schedule(network, task_graph)
    run = time.perf_counter() - t
    device = [0] * len(spec["ops"])
    for tasks in schedule.mapping.values():
        for task in tasks:
            if task.name.startswith("t"):  # not SAGA's zero-cost super source / sink
                device[int(task.name[1:])] = int(task.node[1:])
    print(json.dumps({"build_s": build, "schedule_s": run, "makespan": schedule.makespan,
                      "anrg_saga_version": version("anrg-saga"),
                      "device_order": [int(node.name[1:]) for node in network.nodes],
                      "order": [int(name[1:]) for name in heft_rank_sort(network, task_graph)
                                if name.startswith("t")],
                      "device": device}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
