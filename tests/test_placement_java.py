"""Published-code semantics against the published Java simulator (issue 24, item 1).

``../shared/thesis-data/java_reference.csv`` holds what the Java simulator (repository
``mayerrn/tensorflowPartitioningAndScheduling``, commit 5a11e65) printed for the CNN graph
on 7 and 50 devices. Where Java is deterministic we must give the same makespan (1e-9
relative) and traffic (exactly), whatever our seed; Batch Split x FIFO, where Java's
hash-set orders spread the makespan, must spread over Java's runs too. The data is not in
the repository: without ``../shared`` these tests skip.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from commsched.io.thesis import read_devices, read_graph
from commsched.placement import Cluster, Options, Problem, run_all

DATA = (Path(__file__).resolve().parents[1] / ".." / "shared" / "thesis-data").resolve()
REFERENCE = DATA / "java_reference.csv"
pytestmark = pytest.mark.skipif(
    not REFERENCE.is_file(), reason=f"Java reference not found at {REFERENCE} (../shared)")

PARTITIONER = {"Hashing": "hashing", "HEFT": "heft", "BatchSplit": "batch_split",
               "ICP": "icp", "CP": "cp", "MITE": "mite", "DFS": "dfs"}
SCHEDULER = {"FIFO": "fifo", "PCT": "pct", "MSR": "msr"}


def reference_rows(deterministic: str) -> list[dict[str, str]]:
    if not REFERENCE.is_file():
        return []
    with REFERENCE.open() as f:
        return [r for r in csv.DictReader(f) if r["deterministic"] == deterministic
                and r["graph"] == "convolutional_network_graph.csv"]


def runs(devices: str, partitioner: str, scheduler: str, seeds: range) -> list[tuple[float,
                                                                                     float]]:
    p = Problem.from_thesis(read_graph(DATA / "convolutional_network_graph.csv"))
    c = Cluster.from_devices(read_devices(DATA / f"devices{devices}.csv"))
    out = []
    for seed in seeds:
        (r,) = run_all(p, c, [PARTITIONER[partitioner]], [SCHEDULER[scheduler]],
                       Options("published-code", seed))
        out.append((r.makespan, r.traffic))
    return out


@pytest.mark.parametrize("row", reference_rows("yes"),
                         ids=lambda r: f"{r['partitioner']}-{r['scheduler']}-{r['devices']}")
def test_deterministic_rows_exact(row):
    for makespan, traffic in runs(row["devices"], row["partitioner"], row["scheduler"],
                                  range(3)):
        assert makespan == pytest.approx(float(row["makespan"]), rel=1e-9, abs=0)
        assert traffic == float(row["traffic"])


def test_every_deterministic_row_is_covered():
    # the four Batch Split x {PCT, MSR} x {7, 50} rows of commit 5a11e65's reference
    rows = reference_rows("yes")
    assert {(r["partitioner"], r["scheduler"], r["devices"]) for r in rows} == {
        ("BatchSplit", s, d) for s in ("PCT", "MSR") for d in ("7", "50")}


@pytest.mark.parametrize("devices", ["7", "50"])
def test_batch_split_fifo_spreads_like_java(devices):
    # Java's FIFO makespan varies with its hash-set orders (3 runs); over 10 seeds ours
    # varies over a range that holds Java's mean and puts several runs inside Java's range.
    (row,) = [r for r in reference_rows("no")
              if (r["partitioner"], r["scheduler"], r["devices"]) == ("BatchSplit", "FIFO",
                                                                       devices)]
    got = runs(devices, "BatchSplit", "FIFO", range(10))
    spans = [m for m, _ in got]
    lo, hi = float(row["makespan_min"]), float(row["makespan_max"])
    assert min(spans) <= float(row["makespan"]) <= max(spans)
    assert sum(lo <= m <= hi for m in spans) >= 3
    assert all(t == float(row["traffic"]) for _, t in got)
