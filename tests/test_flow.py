"""The flow-level simulator (commsched.sim.flow): closed-form cases, the validator, errors."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from commsched.errors import CommschedError
from commsched.sim.flow import (
    FlowSim,
    InvalidFlowSchedule,
    Network,
    View,
    big_switch,
    check_flow_schedule,
    max_min,
    port_share,
    priority_max_min,
    simulate,
    two_tier,
)


def run(net, src, dst, size, release, policy=None, **meta):
    r = simulate(net, src, dst, size, release, policy=policy, record=True, **meta)
    check_flow_schedule(net, np.asarray(src), np.asarray(dst), np.asarray(size, dtype=float),
                        np.asarray(release, dtype=float), r)
    return r


def test_single_flow_size_over_rate():
    r = run(big_switch(2, 4.0), [0], [1], [10.0], [1.5])
    assert r.finish.tolist() == [1.5 + 10.0 / 4.0]


def test_fair_sharing_on_one_port():
    # three flows leave host 0: each gets 1/3 until the 1-byte one ends at 3 s; the other two
    # then share 1/2 each: the 2-byte one has 1 byte left -> ends at 5; the last has 2 left
    # at 5 ... (3 - 1 - 1 = 1 byte left at 5 s, alone) -> 6.
    r = run(big_switch(4, 1.0), [0, 0, 0], [1, 2, 3], [1.0, 2.0, 3.0], [0, 0, 0])
    np.testing.assert_allclose(r.finish, [3.0, 5.0, 6.0])


def test_max_min_several_bottlenecks():
    # link capacities: a=1 shared by f0, f1; b=3 shared by f1, f2. Water-filling: a saturates
    # at level 1/2 (f0 = f1 = 1/2), then f2 takes what is left of b: 3 - 1/2 = 5/2.
    links = np.array([[0, -1], [0, 1], [1, -1]])
    np.testing.assert_allclose(max_min(links, np.array([1.0, 3.0])), [0.5, 0.5, 2.5])


def test_weighted_max_min():
    # weights 1 and 3 on one unit link: rates 1/4, 3/4
    links = np.array([[0], [0]])
    np.testing.assert_allclose(max_min(links, np.array([1.0]), np.array([1.0, 3.0])),
                               [0.25, 0.75])


def test_priority_classes_then_fair():
    # class 0 (f1) takes the whole shared link; f0 (class 1) gets only what f1 leaves on
    # link 0: nothing. f2 (class 1) is alone on link 2.
    links = np.array([[0, 1], [0, 2], [3, -1]])
    r = priority_max_min(links, np.ones(4), np.array([1, 0, 1]))
    np.testing.assert_allclose(r, [0.0, 1.0, 1.0])


def test_priority_policy_in_simulation():
    # high priority flow (class 0) of 2 bytes first, then the low one: finishes 2, 2+1=3
    net = big_switch(2, 1.0)

    def prio(v: View) -> np.ndarray:
        return priority_max_min(v.links, v.net.capacity, v.sim.meta["klass"][v.active])

    r = run(net, [0, 0], [1, 1], [1.0, 2.0], [0, 0], policy=prio, klass=[1, 0])
    np.testing.assert_allclose(r.finish, [3.0, 2.0])


def test_port_share_does_not_redistribute():
    # host 0 egress (cap 1) has 2 flows -> 1/2 each; f1 alone on ingress 2 could take more
    # but port_share keeps it at min(1/2, 1) = 1/2; f2 shares ingress 2 ... see numbers:
    links = np.array([[0, 3], [0, 4], [1, 4]])
    cap = np.array([1.0, 1.0, 1.0, 1.0, 1.0])
    np.testing.assert_allclose(port_share(links, cap), [0.5, 0.5, 0.5])
    # max-min would give f2 the leftover 1/2 of ingress 4
    np.testing.assert_allclose(max_min(links, cap), [0.5, 0.5, 0.5])
    links = np.array([[0, 2], [1, 2], [1, 3]])  # f0 alone at egress 0 but shares ingress 2
    cap = np.array([1.0, 3.0, 1.0, 9.0])
    np.testing.assert_allclose(port_share(links, cap), [0.5, 0.5, 1.5])
    np.testing.assert_allclose(max_min(links, cap), [0.5, 0.5, 2.5])


def test_two_tier_oversubscription():
    # 2 racks x 2 hosts, 1 B/s hosts, oversubscription 4 -> core links 2*1/4 = 0.5 B/s.
    net = two_tier(2, 2, 1.0, 4.0)
    assert net.hosts == 4
    # two inter-rack flows from rack 0 share the 0.5 uplink: 0.25 each -> 1 byte in 4 s;
    # an intra-rack flow (host 2 -> 3) shares ingress 3 with the 0.25 B/s flow 1 -> 3 and
    # takes the other 0.75 B/s (max-min): 4/3 s.
    r = run(net, [0, 1, 2], [2, 3, 3], [1.0, 1.0, 1.0], [0, 0, 0])
    np.testing.assert_allclose(r.finish, [4.0, 4.0, 4.0 / 3.0])
    with pytest.raises(CommschedError):
        two_tier(2, 2, 1.0, 0.5)


def test_release_times():
    # f1 arrives at 1 s and halves f0's rate: f0 sends 1 byte alone, then 1/2 B/s with f1;
    # f1 (1 byte) ends at 1 + 1 / 0.5 = 3 s, when f0 has 1 byte left, sent alone: 4 s.
    r = run(big_switch(3, 1.0), [0, 0], [1, 2], [3.0, 1.0], [0.0, 1.0])
    np.testing.assert_allclose(r.finish, [4.0, 3.0])


def test_idle_gap_between_releases():
    r = run(big_switch(2, 1.0), [0, 0], [1, 1], [1.0, 1.0], [0.0, 5.0])
    np.testing.assert_allclose(r.finish, [1.0, 6.0])


def test_simultaneous_completions_batch_into_one_event():
    net = big_switch(4, 1.0)
    calls = []

    def fair(v: View) -> np.ndarray:
        calls.append(len(v.active))
        return max_min(v.links, v.net.capacity)

    r = run(net, [0, 1, 2], [1, 2, 3], [1.0, 1.0, 1.0], [0, 0, 0], policy=fair)
    np.testing.assert_allclose(r.finish, [1.0, 1.0, 1.0])
    assert calls == [3]


def test_advance_until_and_add_later():
    sim = FlowSim(big_switch(2, 1.0), lambda v: max_min(v.links, v.net.capacity), record=True)
    sim.add([0], [1], [4.0], [0.0])
    assert sim.advance(until=1.0).size == 0 and sim.now == 1.0
    sim.add([0], [1], [1.0], [1.0])  # now two flows share the port
    done = sim.advance()
    assert done.tolist() == [1] and sim.now == pytest.approx(3.0)
    sim.run()
    res = sim.result()
    np.testing.assert_allclose(res.finish, [5.0, 3.0])
    check_flow_schedule(sim.net, sim.src[:2], sim.dst[:2], sim.size[:2], sim.release[:2], res)
    with pytest.raises(CommschedError, match="before the current time"):
        sim.add([0], [1], [1.0], [0.0])


def test_wake_at_calls_the_policy():
    sim = FlowSim(big_switch(2, 1.0), lambda v: np.full(len(v.active), 0.5 if v.now < 1 else 1))
    sim.add([0], [1], [2.0], [0.0])
    sim.wake_at(1.0)
    sim.run()
    assert sim.finish[0] == pytest.approx(2.5)  # 0.5 byte by 1 s, 1.5 bytes at 1 B/s


def test_stall_is_an_error():
    with pytest.raises(CommschedError, match="stalled"):
        simulate(big_switch(2, 1.0), [0], [1], [1.0], [0.0], policy=lambda v: np.zeros(1))


@pytest.mark.parametrize("kw, msg", [
    (dict(src=[0], dst=[5], size=[1.0], release=[0.0]), "outside"),
    (dict(src=[0], dst=[1], size=[0.0], release=[0.0]), "positive"),
    (dict(src=[0], dst=[1], size=[1.0], release=[math.nan]), "release"),
    (dict(src=[0, 1], dst=[1], size=[1.0], release=[0.0]), "differ in length"),
])
def test_bad_flows(kw, msg):
    with pytest.raises(CommschedError, match=msg):
        simulate(big_switch(2, 1.0), **kw)


def test_bad_policy_and_network():
    with pytest.raises(CommschedError, match="policy returned"):
        simulate(big_switch(2, 1.0), [0], [1], [1.0], [0.0], policy=lambda v: -np.ones(1))
    with pytest.raises(CommschedError, match="capacities"):
        Network(np.array([0.0]), np.zeros((1, 1, 1), dtype=np.int64), ("l",))
    with pytest.raises(CommschedError, match="does not exist"):
        Network(np.array([1.0]), np.ones((1, 1, 1), dtype=np.int64), ("l",))


def test_validator_catches_bad_schedules():
    net = big_switch(2, 1.0)
    src, dst, size, rel = np.array([0]), np.array([1]), np.array([2.0]), np.array([0.0])
    good = simulate(net, src, dst, size, rel, record=True)
    check_flow_schedule(net, src, dst, size, rel, good)
    over = simulate(net, src, dst, size, rel, record=True,
                    policy=lambda v: np.full(len(v.active), 2.0))  # beyond capacity
    with pytest.raises(InvalidFlowSchedule, match="capacity"):
        check_flow_schedule(net, src, dst, size, rel, over)
    with pytest.raises(InvalidFlowSchedule, match="before its release"):
        check_flow_schedule(net, src, dst, size, np.array([1.0]), good)
    with pytest.raises(InvalidFlowSchedule, match="delivered"):
        check_flow_schedule(net, src, dst, np.array([3.0]), rel, good)


POLICIES = {
    "max_min": lambda v: max_min(v.links, v.net.capacity),
    "weighted": lambda v: max_min(v.links, v.net.capacity, 1.0 + v.sim.meta["k"][v.active]),
    "priority": lambda v: priority_max_min(v.links, v.net.capacity, v.sim.meta["k"][v.active]),
    "port_share": lambda v: port_share(v.links, v.net.capacity),
}


@settings(max_examples=40, deadline=None)
@given(data=st.data(), policy=st.sampled_from(sorted(POLICIES)), tier=st.booleans())
def test_every_policy_passes_the_validator(data, policy, tier):
    net = two_tier(2, 2, 1.0, 2.0) if tier else big_switch(4, 1.0)
    n = data.draw(st.integers(1, 12))
    ints = st.integers(0, net.hosts - 1)
    src = data.draw(st.lists(ints, min_size=n, max_size=n))
    dst = data.draw(st.lists(ints, min_size=n, max_size=n))
    size = data.draw(st.lists(st.floats(0.01, 10.0), min_size=n, max_size=n))
    rel = data.draw(st.lists(st.floats(0.0, 5.0), min_size=n, max_size=n))
    k = data.draw(st.lists(st.integers(0, 2), min_size=n, max_size=n))
    r = run(net, src, dst, size, rel, policy=POLICIES[policy], k=k)
    assert np.all(r.finish >= np.asarray(rel) + np.asarray(size) - 1e-9)  # rate <= 1
    assert np.all(np.isfinite(r.finish))
