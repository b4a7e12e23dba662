"""The compiled thesis schedulers (:mod:`commsched.placement.compiled`) against the Python
ready queues they replace in the suite, the compiled published loop against the Python
loop it replaced (``placement_published_reference.py``), and the vectorised send/receive
insertion and schedule validator against the loops that define them (Laich 2017, Secs.
2.4, 3.2, 5.2-5.4)."""

from __future__ import annotations

import dataclasses
import itertools
import random

import numpy as np
import pytest
from placement_published_reference import published_chooser, simulate_lowest_clock

from commsched.errors import CommschedError
from commsched.placement import PARTITIONERS, Options, Problem
from commsched.placement.compiled import COMPILED, simulate_published, simulate_scheduler
from commsched.placement.model import identity_hashes, random_devices
from commsched.placement.schedulers import DEVICE_SCHEDULERS
from commsched.placement.sendrecv import insert_send_recv
from commsched.sim.devices import (
    COMPUTE,
    RECV,
    SEND,
    DeviceSchedule,
    ExecGraph,
    InvalidSchedule,
    check_device_schedule,
    simulate_devices,
)
from commsched.trace.synthetic import level_dag


def random_problem(rng: random.Random, n: int, ties: bool) -> Problem:
    """A random DAG on ``n`` nodes, some edges doubled, some tensors empty; with ``ties``
    every node has 10 operations and an 8-sized output (equal PCT values and ranks: the
    index decides)."""
    edges = [(i, j) for i in range(n) for j in range(i + 1, n) if rng.random() < 0.25]
    edges += rng.sample(edges, min(2, len(edges)))
    return Problem.build(ops=[10 if ties else rng.randint(1, 60) for _ in range(n)],
                         size=[8.0 if ties else rng.choice([0.0, 1.5, 8.0, 90.0])
                               for _ in range(n)],
                         edges=edges)


def instances() -> list[tuple[Problem, np.ndarray, int]]:
    """Random graphs with random placements, and level-generator graphs placed by the
    partitioners (larger ready sets, colocation)."""
    rng = random.Random(25)
    out = []
    for k in range(60):
        p = random_problem(rng, rng.randint(1, 25), ties=k % 3 == 0)
        nd = rng.randint(1, 5)
        out.append((p, np.array([rng.randrange(nd) for _ in range(p.n)]), nd))
    for seed, nd in ((0, 4), (1, 9)):
        g = level_dag(levels=30, min_per_level=2, max_per_level=20, nodes=300,
                      max_level_distance=4, level_edges=500, long_range_edges=0,
                      colocated_nodes=30, cpu_prob=0.0, gpu_prob=0.0, seed=seed)
        p = Problem.from_thesis(g)
        c = random_devices(nd, seed=seed)
        for name in ("hashing", "mite", "dfs"):
            out.append((p, PARTITIONERS[name](p, c, Options()).device, nd))
    return out


def test_compiled_schedulers_equal_the_python_queues():
    for k, (p, place, nd) in enumerate(instances()):
        c = random_devices(nd, seed=k)
        eg = insert_send_recv(p, c, place, send_ops=float(k % 3) * 5.0)
        for name, contention in itertools.product(COMPILED, (False, True)):
            want = simulate_devices(eg, DEVICE_SCHEDULERS[name](eg, c, Options()),
                                    link_contention=contention, record_memory=True)
            got = simulate_scheduler(eg, c, name, Options(), contention, record_memory=True)
            assert got == want, (k, name, contention)
            assert simulate_scheduler(eg, c, name, Options(), contention).memory == []


def test_compiled_published_loop_equals_the_python_loop():
    """The kernel of the published simulator against ``simulate_lowest_clock`` with the
    Java choosers: hash orders from the seed, sources in a given order or by index."""
    for k, (p, place, nd) in enumerate(instances()):
        c = random_devices(nd, seed=k)
        opts = Options("published-code", k, float(k % 3) * 5.0)
        eg = insert_send_recv(p, c, place, send_ops=opts.send_ops)
        src = np.random.default_rng(k).permutation(p.n).tolist() if k % 2 else None
        for name in COMPILED:
            want = simulate_lowest_clock(eg, published_chooser(name, eg, c, opts),
                                         identity_hashes(eg.n, opts.seed), source_order=src,
                                         record_memory=True)
            got = simulate_published(eg, c, name, opts, src, record_memory=True)
            assert got == want, (k, name)
            assert simulate_published(eg, c, name, opts, src).memory == []


def test_compiled_rejects_an_unknown_scheduler():
    p = Problem.build(ops=[1], size=[1], edges=[])
    c = random_devices(1, seed=0)
    eg = insert_send_recv(p, c, np.array([0]))
    with pytest.raises(CommschedError):
        simulate_scheduler(eg, c, "nope", Options())
    with pytest.raises(CommschedError):
        simulate_published(eg, c, "nope", Options("published-code"))


def reference_insert(p: Problem, c, place: np.ndarray, send_ops: float) -> ExecGraph:
    """Sec. 2.4 as a loop: per producer its local edges, then per destination device (by
    id) a send node, a receive node and the receive node's edges to the consumers."""
    n = p.n
    dev = [int(x) for x in place]
    device, kind, origin = list(dev), [COMPUTE] * n, list(range(n))
    duration = [float(p.ops[v]) / float(c.speed[dev[v]]) for v in range(n)]
    tensor = [float(x) for x in p.size]
    edges: list[tuple[int, int, float]] = []
    traffic = 0.0
    for v in range(n):
        remote: dict[int, list[int]] = {}
        for s in p.succ[v]:
            if dev[s] == dev[v]:
                edges.append((v, s, 0.0))
            else:
                remote.setdefault(dev[s], []).append(s)
        for e in sorted(remote):
            snd, rcv = len(device), len(device) + 1
            device += [dev[v], e]
            duration += [send_ops / float(c.speed[dev[v]]), 0.0]
            kind += [SEND, RECV]
            origin += [v, v]
            tensor += [0.0, float(p.size[v])]
            edges += [(v, snd, 0.0), (snd, rcv, float(p.size[v]) / float(c.rate[dev[v], e]))]
            edges += [(rcv, s, 0.0) for s in remote[e]]
            traffic += float(p.size[v])
    return ExecGraph.build(c.n, device, duration, kind, origin, tensor, edges, traffic)


def reference_check(eg: ExecGraph, s: DeviceSchedule, tol: float = 1e-9) -> None:
    """The validator's rules as loops, in its order (the first broken rule is named)."""
    eps = tol * max(1.0, s.makespan)
    for i in range(eg.n):
        if s.start[i] < -eps:
            raise InvalidSchedule(f"node {i} starts before time 0 (or never ran)")
        if abs(s.end[i] - s.start[i] - eg.duration[i]) > eps:
            raise InvalidSchedule(f"node {i} runs {s.end[i] - s.start[i]!r}, its duration "
                                  f"is {eg.duration[i]!r}")
        for k in range(eg.succ_ptr[i], eg.succ_ptr[i + 1]):
            j = eg.succ_idx[k]
            if s.start[j] < s.end[i] + eg.succ_delay[k] - eps:
                raise InvalidSchedule(f"node {j} starts at {s.start[j]!r} before the input of "
                                      f"node {i} arrives at {s.end[i] + eg.succ_delay[k]!r}")
    for d in range(eg.n_devices):
        iv = sorted((s.start[i], s.end[i], i) for i in range(eg.n)
                    if eg.duration[i] > 0 and eg.device[i] == d)
        for (_, e0, a), (s1, _, b) in itertools.pairwise(iv):
            if s1 < e0 - eps:
                raise InvalidSchedule(f"device {d} runs nodes {a} and {b} at once")
    last = max(s.end, default=0.0)
    if abs(last - s.makespan) > eps:
        raise InvalidSchedule(f"makespan {s.makespan!r} is not the last end {last!r}")


def message(check, eg: ExecGraph, s: DeviceSchedule) -> str | None:
    try:
        check(eg, s)
    except InvalidSchedule as e:
        return str(e)
    return None


def test_insertion_and_validator_equal_their_loops():
    rng = random.Random(4)
    broken = 0
    for k, (p, place, nd) in enumerate(instances()):
        c = random_devices(nd, seed=k)
        eg = insert_send_recv(p, c, place, 3.0)
        assert eg == reference_insert(p, c, place, 3.0), k
        s = simulate_scheduler(eg, c, "pct", Options())
        for trial in range(5):  # the schedule, then nodes moved or stretched
            start, end = list(s.start), list(s.end)
            if trial:
                i, shift = rng.randrange(eg.n), rng.choice([-1.0, -0.25, 0.5, 3.0])
                start[i] += shift
                end[i] += shift if trial % 2 else 0.0
            bad = dataclasses.replace(s, start=start, end=end, makespan=max(end))
            want = message(reference_check, eg, bad)
            assert message(check_device_schedule, eg, bad) == want, (k, trial)
            broken += want is not None
    assert broken > 100  # every rule gets exercised, not only the clean schedules
