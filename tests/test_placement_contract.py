"""Contract of the placement registries: every partitioner x scheduler x semantics on small
graph families, every placement through Sec. 4.1 and every schedule through the validator;
feasibility as a property (hypothesis); optimality gaps against brute force."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from commsched.placement import DEVICE_SCHEDULERS, PARTITIONERS, SEMANTICS, Options, run_all
from commsched.placement.bruteforce import optimum
from commsched.placement.model import (
    Cluster,
    PlacementError,
    Problem,
    check_placement,
    random_devices,
)
from commsched.trace.synthetic import level_dag


def chain(n: int) -> Problem:
    return Problem.build(ops=[10 * (i + 1) for i in range(n)], size=[5] * n,
                         edges=[(i, i + 1) for i in range(n - 1)])


def fork_join(width: int) -> Problem:
    n = width + 2
    edges = [(0, i) for i in range(1, width + 1)] + [(i, n - 1) for i in range(1, width + 1)]
    return Problem.build(ops=[20] * n, size=[30] * n, edges=edges)


def isolated(n: int) -> Problem:
    return Problem.build(ops=list(range(1, n + 1)), size=[1] * n, edges=[])


def random_level(seed: int) -> Problem:
    g = level_dag(levels=8, min_per_level=1, max_per_level=6, edge_prob=0.4,
                  max_level_distance=2, colocation_scale=0.5, cpu_prob=0.1, gpu_prob=0.1,
                  seed=seed)
    return Problem.from_thesis(g)


FAMILIES = {
    "single": Problem.build(ops=[5], size=[1], edges=[]),
    "chain": chain(6),
    "fork_join": fork_join(5),
    "isolated": isolated(7),
    "level": random_level(1),
    "colocated": Problem.build(ops=[10, 20, 30, 40], size=[10, 10, 10, 10],
                               edges=[(0, 1), (1, 2), (0, 3)], colocation=[(0, 2)],
                               constraint=["NO", "NO", "GPU", "NO"]),
}


@pytest.mark.parametrize("semantics", SEMANTICS)
@pytest.mark.parametrize("family", FAMILIES)
def test_every_partitioner_and_scheduler(family, semantics):
    p = FAMILIES[family]
    c = random_devices(4, seed=3)
    c.type[:] = [0, 1, 0, 1]
    results = run_all(p, c, list(PARTITIONERS), list(DEVICE_SCHEDULERS),
                      Options(semantics=semantics, seed=5))  # validates every schedule
    assert len(results) == len(PARTITIONERS) * len(DEVICE_SCHEDULERS)
    total_ops = float(p.ops.sum())
    for r in results:
        check_placement(p, c, r.placement, strict=semantics == "thesis")
        # bounds: at least the critical work on the fastest device, at most all work
        # on the slowest device plus every transfer at the slowest rate after it
        assert r.makespan >= float(p.ops_ranks()[1].max()) / c.speed.max() - 1e-9
        slow = total_ops / c.speed.min() + len(r.exec_graph.device) * (
            10 / c.speed.min() + float(p.size.max()) / c.rate[np.isfinite(c.rate)].min())
        assert r.makespan <= slow
    by_part: dict[str, set[float]] = {}
    for r in results:
        by_part.setdefault(r.partitioner, set()).add(r.traffic)
    assert all(len(t) == 1 for t in by_part.values())  # traffic independent of scheduler


def test_same_seed_same_results():
    p, c = random_level(2), random_devices(5, seed=1)
    for sem in SEMANTICS:
        a = run_all(p, c, list(PARTITIONERS), list(DEVICE_SCHEDULERS), Options(sem, seed=7))
        b = run_all(p, c, list(PARTITIONERS), list(DEVICE_SCHEDULERS), Options(sem, seed=7))
        assert [(r.makespan, r.traffic) for r in a] == [(r.makespan, r.traffic) for r in b]
        assert all((x.placement == y.placement).all() for x, y in zip(a, b, strict=True))


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), ndev=st.integers(1, 6), mem=st.sampled_from([0.3, 1.0]),
       sem=st.sampled_from(SEMANTICS))
def test_partitioners_feasible_or_one_line_error(seed, ndev, mem, sem):
    g = level_dag(levels=6, min_per_level=1, max_per_level=5, edge_prob=0.5,
                  max_level_distance=3, colocation_scale=0.6, cpu_prob=0.15, gpu_prob=0.15,
                  seed=seed)
    p = Problem.from_thesis(g)
    c = random_devices(ndev, seed=seed)
    # memory: a fraction of the total demand per device (0.3: often too little)
    c.memory[:] = mem * float(p.size_est.sum()) + 1
    for name, part in PARTITIONERS.items():
        try:
            placement = part(p, c, Options(sem, seed=seed))
        except PlacementError as e:
            msg = str(e)
            assert "\n" not in msg and ("node" in msg), (name, msg)
            continue
        check_placement(p, c, placement.device, strict=sem == "thesis")
        # every node assigned once, in the order the published simulator enqueues sources
        assert sorted(placement.order) == list(range(p.n))


def test_unplaceable_unit_is_named():
    p = Problem.build(ops=[1, 1], size=[1, 1], edges=[(0, 1)], constraint=["TPU", "NO"])
    c = random_devices(3, seed=0)
    for part in PARTITIONERS.values():
        with pytest.raises(PlacementError, match="node 0 fits on no device"):
            part(p, c, Options())


@pytest.mark.parametrize("seed", range(4))
def test_optimality_gap_against_brute_force(seed):
    # tiny random graphs (5 nodes, 2 devices): every combination's makespan is at least
    # the optimum over all placements and orders; PCT with the best partitioner is close.
    rng = np.random.default_rng(seed)
    n = 5
    edges = [(u, v) for u in range(n) for v in range(u + 1, n) if rng.random() < 0.4]
    p = Problem.build(ops=rng.integers(5, 50, n).tolist(), size=rng.integers(1, 40, n).tolist(),
                      edges=edges)
    r = np.full((2, 2), math.inf)
    r[0, 1] = r[1, 0] = float(rng.integers(10, 60))
    c = Cluster(np.array([float(rng.integers(10, 100)), float(rng.integers(10, 100))]),
                np.array([1e9, 1e9]), np.array([0, 0]), r)
    best = optimum(p, c)
    results = run_all(p, c, list(PARTITIONERS), list(DEVICE_SCHEDULERS))
    spans = [x.makespan for x in results]
    assert min(spans) >= best.makespan - 1e-9
    assert min(spans) <= 2.0 * best.makespan
