"""Golden tests of the thesis' model, simulator and schedulers (Laich 2017), and HEFT's
canonical example (Topcuoglu et al. 2002)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from commsched.placement.bruteforce import best_order_makespan
from commsched.placement.heft import heft_core, topcuoglu_example
from commsched.placement.model import (
    Cluster,
    Options,
    PlacementError,
    Problem,
    check_placement,
    traffic,
)
from commsched.placement.partitioners import PARTITIONERS
from commsched.placement.schedulers import DEVICE_SCHEDULERS, pct_values
from commsched.placement.sendrecv import insert_send_recv
from commsched.sim.devices import (
    FifoQueue,
    InvalidSchedule,
    check_device_schedule,
    simulate_devices,
)


def cluster(speeds, rates, types=None, memory=1e9):
    n = len(speeds)
    r = np.full((n, n), math.inf)
    for (a, b), v in rates.items():
        r[a, b] = r[b, a] = v
    return Cluster(np.asarray(speeds, dtype=float), np.full(n, memory),
                   np.asarray(types or [0] * n), r)


class OrderQueue:
    """Runs a device's nodes in a fixed order (the order must be executable)."""

    def __init__(self, order):
        self.rank = {x: k for k, x in enumerate(order)}
        self.items = []

    def push(self, node):
        self.items.append(node)

    def pop(self, state):
        x = min(self.items, key=self.rank.__getitem__)
        self.items.remove(x)
        return x

    def __len__(self):
        return len(self.items)


# Sec. 2.5, Fig. 2.3 reconstructed from the text: device speeds 10, 30, 40; rates 25 (0-1)
# and 50 (0-2). Nodes 0 (30 ops) -> 1 (50 ops) on device 0; node 1's 50-sized tensor goes
# to node 2 (60 ops) -> 3 (30 ops) on device 1 and to node 4 (40 ops) -> 5 (80 ops) on
# device 2. Insertion numbers the pairs 6/7 (to device 1) and 8/9 (to device 2), as the
# thesis does; the send nodes have 10 ops (1 EU on device 0), receives take no time.
# Order 0, 1, 6, 8 on device 0: 0 ends 3, 1 ends 8, 6 ends 9, 8 ends 10; node 1's tensor
# reaches device 1 at 9 + 50/25 = 11, device 2 at 10 + 50/50 = 11; device 1 then needs
# 60/30 + 30/30 = 3 EU, device 2 40/40 + 80/40 = 3 EU: makespan 14. The other order
# (8 before 6): device 2 ends 9 + 1 + 3 = 13, device 1 at 10 + 2 + 3 = 15.
SEC25 = Problem.build(ops=[30, 50, 60, 30, 40, 80], size=[1, 50, 1, 1, 1, 1],
                      edges=[(0, 1), (1, 2), (2, 3), (1, 4), (4, 5)])
SEC25_DEV = cluster([10, 30, 40], {(0, 1): 25, (0, 2): 50, (1, 2): 10})
SEC25_PLACE = np.array([0, 0, 1, 1, 2, 2])


def test_sec25_makespan_traffic_and_pct_order():
    eg = insert_send_recv(SEC25, SEC25_DEV, SEC25_PLACE)
    assert eg.n == 10 and [eg.kind[i] for i in range(6, 10)] == [1, 2, 1, 2]
    assert eg.traffic == 100 == traffic(SEC25, SEC25_PLACE)
    s = simulate_devices(eg, DEVICE_SCHEDULERS["pct"](eg, SEC25_DEV, Options()))
    check_device_schedule(eg, s)
    assert s.makespan == pytest.approx(14.0)
    table21 = {0: [0, 1, 6, 8], 1: [7, 2, 3], 2: [9, 4, 5]}
    for d, order in table21.items():
        ran = sorted((i for i in range(eg.n) if eg.device[i] == d),
                     key=lambda i: (s.start[i], s.end[i]))
        assert ran == order
    assert best_order_makespan(eg)[0] == pytest.approx(14.0)


def test_sec25_other_order_gives_15():
    eg = insert_send_recv(SEC25, SEC25_DEV, SEC25_PLACE)
    qs = [OrderQueue([0, 1, 8, 6]), OrderQueue([7, 2, 3]), OrderQueue([9, 4, 5])]
    s = simulate_devices(eg, qs)
    check_device_schedule(eg, s)
    assert s.makespan == pytest.approx(15.0)


def test_fig32_lowest_local_timestamp():
    # Fig. 3.2: speeds and rates 1, no send cost. Device 0 runs 1 (10 ops) -> 2 (30 ops),
    # whose 10-sized tensor reaches node 3 on device 1 at 40 + 10 = 50; device 2 runs node 7
    # (50 ops), whose 30-sized tensor reaches node 5 on device 1 at 80. Device 1 must start
    # node 3 at 50 (a naive per-device clock would run 5 first, 80-110, and 3 only at 110).
    p = Problem.build(ops=[10, 30, 20, 30, 50], size=[1, 10, 1, 1, 30],
                      edges=[(0, 1), (1, 2), (4, 3)], ids=[1, 2, 3, 5, 7])
    c = cluster([1, 1, 1], {(0, 1): 1, (0, 2): 1, (1, 2): 1})
    eg = insert_send_recv(p, c, np.array([0, 0, 1, 1, 2]), send_ops=0.0)
    for name, make in DEVICE_SCHEDULERS.items():
        s = simulate_devices(eg, make(eg, c, Options(send_ops=0.0)))
        check_device_schedule(eg, s)
        assert (s.start[2], s.start[3], s.makespan) == (50.0, 80.0, 110.0), name


def test_msr_beats_pct_fig51():
    # Fig. 5.1's point: speed 50, rate 10. Device 0 holds A (100 ops) -> A2 (500 ops) and
    # B (50 ops), whose 10-sized tensor feeds C (400 ops) on the idle device 1.
    # PCT(A) = 2 + 10 = 12 > PCT(B) = 1 + 0.2 (send) + 1 (transfer) + 8 = 10.2, so PCT
    # runs A, then B (10.2 > PCT(A2) = 10), then A2, and only then B's send: C ends at
    # 13 + 0.2 + 1 + 8 = 22.2. MSR ranks B's successor C (other device, becomes
    # executable, idle device) 1 + 1 + 1 + 5 = 8 over A's 1 + 1 = 2: B, its send, then A;
    # device 1 runs C at 2.2-10.2 while device 0 ends A2 at 13.2.
    p = Problem.build(ops=[100, 500, 50, 400], size=[1, 1, 10, 1], edges=[(0, 1), (2, 3)])
    c = cluster([50, 50], {(0, 1): 10})
    eg = insert_send_recv(p, c, np.array([0, 0, 0, 1]))
    span = {}
    for name in ("pct", "msr"):
        s = simulate_devices(eg, DEVICE_SCHEDULERS[name](eg, c, Options()))
        check_device_schedule(eg, s)
        span[name] = s.makespan
    assert span["pct"] == pytest.approx(22.2)
    assert span["msr"] == pytest.approx(13.2)


def test_heft_canonical_example():
    # Topcuoglu et al. 2002, Fig. 2: upward ranks 108, 77, 80, 80, 69, 63.33, 42.67, 35.67,
    # 44.33, 14.67 (rank order 1, 3, 4, 2, 5, 6, 9, 7, 8, 10) and makespan 80.
    w, edges = topcuoglu_example()
    succ = [[v for (u, v) in edges if u == i] for i in range(10)]
    rate = np.where(np.eye(3, dtype=bool), np.inf, 1.0)
    r = heft_core(w, w.mean(axis=1), succ, lambda u, v: edges[(u, v)], rate)
    assert r.rank == pytest.approx([108, 77, 80, 80, 69, 63 + 1 / 3, 42 + 2 / 3, 35 + 2 / 3,
                                    44 + 1 / 3, 14 + 2 / 3])
    assert r.makespan == 80.0
    assert r.device.tolist() == [2, 0, 2, 1, 2, 1, 2, 0, 1, 1]


def test_colocation_conflict_names_both_nodes():
    with pytest.raises(PlacementError, match=r"colocated nodes 1 \(CPU\) and 4 \(GPU\)"):
        Problem.build(ops=[1] * 5, size=[1] * 5, edges=[],
                      constraint=["NO", "CPU", "NO", "NO", "GPU"],
                      colocation=[(0, 1), (2, 3), (3, 4), (1, 2)])


def test_colocation_groups_transitive():
    p = Problem.build(ops=[1] * 6, size=[1] * 6, edges=[(0, 1)],
                      constraint=["NO", "GPU", "NO", "NO", "NO", "NO"],
                      colocation=[(0, 2), (2, 4), (5, 3)])
    assert sorted(map(sorted, p.unit_members)) == [[0, 2, 4], [1], [3, 5]]
    assert p.unit_constraint[p.unit[1]] == 1


def test_size_est_and_cycle():
    p = Problem.build(ops=[1, 1, 1], size=[5, 7, 9], ram=[1, 2, 3], edges=[(0, 2), (1, 2)])
    assert p.size_est.tolist() == [6, 9, 3 + 9 + 5 + 7]
    with pytest.raises(PlacementError, match="cycle"):
        Problem.build(ops=[1, 1], size=[1, 1], edges=[(0, 1), (1, 0)])
    # node 0 hangs below the cycle 1 -> 2 -> 1: the error names a node on the cycle
    with pytest.raises(PlacementError, match=r"cycle through node [12]$"):
        Problem.build(ops=[1, 1, 1], size=[1, 1, 1], edges=[(1, 2), (2, 1), (2, 0)])


def test_link_contention_serialises_transfers():
    # two sends from device 0 to device 1 that end together: without contention both
    # arrive after one transfer time, with it the second waits for the first.
    p = Problem.build(ops=[0, 0, 1, 1], size=[10, 10, 1, 1], edges=[(0, 2), (1, 3)])
    c = cluster([1, 1], {(0, 1): 1})
    eg = insert_send_recv(p, c, np.array([0, 0, 1, 1]), send_ops=0.0)
    free = simulate_devices(eg, [FifoQueue(), FifoQueue()])
    busy = simulate_devices(eg, [FifoQueue(), FifoQueue()], link_contention=True)
    assert free.makespan == 12.0 and busy.makespan == 21.0
    check_device_schedule(eg, busy)


def test_validator_catches_overlap_and_precedence():
    eg = insert_send_recv(SEC25, SEC25_DEV, SEC25_PLACE)
    s = simulate_devices(eg, DEVICE_SCHEDULERS["fifo"](eg, SEC25_DEV, Options()))
    s.start[1] -= 1.0
    s.end[1] -= 1.0
    with pytest.raises(InvalidSchedule):
        check_device_schedule(eg, s)
    s = simulate_devices(eg, DEVICE_SCHEDULERS["fifo"](eg, SEC25_DEV, Options()))
    s.start[7] = s.end[7] = 10.0  # the receive before its transfer arrives (11)
    with pytest.raises(InvalidSchedule, match="before the input"):
        check_device_schedule(eg, s)


def test_memory_held_until_last_consumer_starts():
    eg = insert_send_recv(SEC25, SEC25_DEV, SEC25_PLACE)
    s = simulate_devices(eg, DEVICE_SCHEDULERS["pct"](eg, SEC25_DEV, Options()), record_memory=True)
    # device 0 holds node 0's output (1) until node 1 starts, then node 1's (50) until
    # both sends started: peak 50; devices 1 and 2 hold the received 50.
    assert s.peak_memory == [50.0, 50.0, 50.0]
    assert s.memory[-1][2] == 0.0


# The published Java code's deviations (issue item 5), each on a hand instance.
def test_published_heft_earliest_start_is_a_minimum_over_remote_predecessors():
    # Three equal devices (speed 10, rates 1). A (1000 ops) goes to device 0 (0-100), B (10
    # ops) to device 1 (0-1); C (10 ops) consumes both (tensors of size 1). Thesis: C's
    # earliest start is the latest input, 100 on device 0 (ends 101) and 101 elsewhere, so
    # device 0. Java: the minimum over predecessors on *other* devices (one on the same
    # device divides by the rate 0 of a device to itself, an infinite time): 2 on device 2
    # (B's tensor), ending 3, so device 2.
    p = Problem.build(ops=[1000, 10, 10], size=[1, 1, 1], edges=[(0, 2), (1, 2)])
    c = cluster([10, 10, 10], {(0, 1): 1, (0, 2): 1, (1, 2): 1})
    assert PARTITIONERS["heft"](p, c, Options()).device.tolist() == [0, 1, 0]
    for seed in range(3):
        got = PARTITIONERS["heft"](p, c, Options("published-code", seed)).device.tolist()
        assert got == [0, 1, 2]


def test_published_batch_split_assigns_ranges_by_device_id():
    # Four independent nodes, operations ranks 40, 30, 20, 10, two devices (speeds 10, 100):
    # ranges of ceil(4 / 2) = 2 nodes. Thesis: the first range on the fastest device (1);
    # published code: on device 0.
    p = Problem.build(ops=[40, 30, 20, 10], size=[1, 1, 1, 1], edges=[])
    c = cluster([10, 100], {(0, 1): 10})
    thesis = PARTITIONERS["batch_split"](p, c, Options())
    published = PARTITIONERS["batch_split"](p, c, Options("published-code"))
    assert thesis.device.tolist() == [1, 1, 0, 0]
    assert published.device.tolist() == [0, 0, 1, 1]


def test_published_batch_split_ranges_in_single_precision():
    # Seven independent nodes (ranks 70 .. 10) on three equal devices. Thesis: ranges of
    # ceil(7 / 3) = 3 nodes. Published code: node i starts at device int(i / (7 / 3)).
    p = Problem.build(ops=[70, 60, 50, 40, 30, 20, 10], size=[1] * 7, edges=[])
    c = cluster([10, 10, 10], {(0, 1): 10, (0, 2): 10, (1, 2): 10})
    thesis = PARTITIONERS["batch_split"](p, c, Options())
    published = PARTITIONERS["batch_split"](p, c, Options("published-code"))
    assert thesis.device.tolist() == [0, 0, 0, 1, 1, 1, 2]
    assert published.device.tolist() == [0, 0, 0, 1, 1, 2, 2]


def test_published_memory_may_reach_capacity():
    # One node of size_est 10 on a device of memory 10: the thesis (Sec. 4.1: below the
    # memory) rejects it, the Java code (free memory >= demand) places it.
    p = Problem.build(ops=[1], size=[4], ram=[6], edges=[])
    c = cluster([10, 10], {(0, 1): 10}, memory=10.0)
    with pytest.raises(PlacementError, match="fits on no device"):
        PARTITIONERS["hashing"](p, c, Options())
    assert PARTITIONERS["hashing"](p, c, Options("published-code")).device.tolist() == [0]
    with pytest.raises(PlacementError, match="holds 10 of memory"):
        check_placement(p, c, np.array([0]))
    check_placement(p, c, np.array([0]), strict=False)


def test_published_pct_charges_receive_nodes():
    # Sec. 2.5's instance: a receive takes no time, but the published PCT charges it the
    # send's 10 operations on its device (speed 30 for 7, 40 for 9).
    eg = insert_send_recv(SEC25, SEC25_DEV, SEC25_PLACE)
    thesis = pct_values(eg, SEC25_DEV, Options())
    published = pct_values(eg, SEC25_DEV, Options("published-code"))
    assert thesis[7] == pytest.approx(60 / 30 + 30 / 30)
    assert published[7] - thesis[7] == pytest.approx(10 / 30)
    assert published[9] - thesis[9] == pytest.approx(10 / 40)
    assert published[3] == thesis[3]
