"""The partitioners sped up for the thesis' full-scale experiment (Laich 2017, Ch. 7) against
their earlier loops, kept here as references: same placements and assignment orders, or
the same error, on random instances with colocation groups, device types and tight
memory, under both semantics."""

from __future__ import annotations

import functools
import math
import random

import numpy as np
import pytest

from commsched.placement import PARTITIONERS, Options, Problem
from commsched.placement.model import (
    Cluster,
    Placement,
    PlacementError,
    java_hash_order,
    random_devices,
)
from commsched.placement.partitioners import _java_upward_ranks, _State
from commsched.trace.synthetic import level_dag


def reference_heft_published(p: Problem, c: Cluster, opts: Options) -> Placement:
    """The published code's HEFT as a loop over nodes and devices, every slot list sorted
    afresh (the implementation before the compiled one)."""
    st = _State(p, c, opts)
    assert st.hash is not None
    rank = _java_upward_ranks(p, c, st.hash)
    tie = random.Random(opts.seed + 1).random
    breaker = [tie() for _ in range(p.n)]

    def cmp(a: int, b: int) -> int:
        if abs(rank[a] - rank[b]) < 0.00005:
            return -1 if breaker[a] > breaker[b] else 1
        return 1 if rank[b] > rank[a] else -1

    nodes = sorted(java_hash_order(p.ids), key=functools.cmp_to_key(cmp))
    finish = np.full(p.n, -1.0)
    slots: list[dict[float, float]] = [{} for _ in range(c.n)]

    def slot(v: int, d: int) -> tuple[float, float]:
        est, changed = math.inf, False
        for q in p.pred[v]:
            dq = int(st.place[q])
            if dq < 0 or dq == d:
                continue
            t = finish[q] + float(p.size[q]) / float(c.rate[d, dq])
            if t < est:
                est, changed = t, True
        if not changed:
            est = 0.0
        dur = float(p.ops[v]) / float(c.speed[d])
        last_end = 0.0
        for a in sorted(slots[d]):
            if a > est:
                t = max(last_end, est)
                if a - t >= dur:
                    return t, t + dur
            last_end = slots[d][a]
        t = max(last_end, est)
        return t, t + dur

    def take(v: int, d: int, a: float, b: float) -> None:
        slots[d].setdefault(a, b)
        finish[v] = b

    for v in nodes:
        u = int(p.unit[v])
        if st.unit_dev[u] >= 0:
            d = int(st.unit_dev[u])
            take(v, d, *slot(v, d))
            continue
        mask = st.feasible([u])
        best: tuple[float, float, int] | None = None
        for e in np.nonzero(mask)[0].tolist():
            a, b = slot(v, e)
            if best is None or b < best[1]:
                best = (a, b, e)
        if best is None:
            raise st.fail(u)
        st.assign(u, best[2])
        take(v, best[2], best[0], best[1])
    return st.result()


REFERENCES = {("heft", "published-code"): reference_heft_published}


def random_instance(rng: random.Random, k: int) -> tuple[Problem, Cluster]:
    """A random DAG with colocation pairs, device constraints, RAM and equal weights in
    some instances (ties), on 1-9 random devices whose memory is tight in some (drawn
    again while the colocation groups mix device types)."""
    while True:
        n = rng.randint(1, 40)
        edges = [(i, j) for i in range(n) for j in range(i + 1, n) if rng.random() < 0.15]
        ties = k % 4 == 0
        try:
            p = Problem.build(
                ops=[10 if ties else rng.randint(1, 100) for _ in range(n)],
                size=[8 if ties else rng.randint(0, 100) for _ in range(n)], edges=edges,
                ram=[rng.choice([0, 50, 400]) for _ in range(n)],
                constraint=[rng.choice(["CPU", "GPU"]) if rng.random() < 0.15 else "NO"
                            for _ in range(n)],
                colocation=[(rng.randrange(n), rng.randrange(n))
                            for _ in range(rng.randint(0, n // 3))])
        except PlacementError:
            continue
        scale = rng.choice([2e4, 1e5, 1e9])
        return p, random_devices(rng.randint(1, 9), seed=k, memory_scale=scale)


def outcome(f, p: Problem, c: Cluster, opts: Options) -> tuple[list[int], list[int]] | str:
    try:
        r = f(p, c, opts)
    except PlacementError as e:
        return str(e)
    return [int(x) for x in r.device], [int(x) for x in r.order]


@pytest.mark.parametrize(("name", "semantics"), sorted(REFERENCES))
def test_partitioner_equals_its_reference(name: str, semantics: str):
    rng = random.Random(7)
    cases = [random_instance(rng, k) for k in range(150)]
    for seed, nd in ((0, 5), (1, 30)):
        g = level_dag(levels=25, min_per_level=2, max_per_level=30, nodes=400,
                      max_level_distance=5, level_edges=500, long_range_edges=100,
                      colocated_nodes=60, cpu_prob=0.1, gpu_prob=0.1, seed=seed)
        cases.append((Problem.from_thesis(g), random_devices(nd, seed=seed)))
    errors = 0
    for k, (p, c) in enumerate(cases):
        opts = Options(semantics, k, 10.0)
        want = outcome(REFERENCES[name, semantics], p, c, opts)
        assert outcome(PARTITIONERS[name], p, c, opts) == want, k
        errors += isinstance(want, str)
    assert 0 < errors < len(cases) // 2  # both outcomes are exercised
