"""The compiled flow simulator and Coflow schedulers against the simple reference of
``tests/flow_reference.py`` (random instances), and the FB2010 replay against the CCTs the
simulator gave before it was compiled (``tests/data/fb2010_cct.csv``, issue 25)."""

from __future__ import annotations

from pathlib import Path

import flow_reference
import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from commsched.echelon.coflow import COFLOW_SCHEDULERS, replay
from commsched.io.coflow import read_coflow_trace
from commsched.sim.flow import big_switch, simulate, two_tier

ROOT = Path(__file__).resolve().parents[1]


@st.composite
def instances(draw):
    if draw(st.booleans()):
        net = big_switch(draw(st.integers(2, 5)), draw(st.sampled_from([1.0, 3.0, 1.25e8])))
    else:
        net = two_tier(2, draw(st.integers(1, 3)), 1.0, draw(st.sampled_from([1.0, 2.0])))
    n = draw(st.integers(1, 14))
    h = st.integers(0, net.hosts - 1)
    src = draw(st.lists(h, min_size=n, max_size=n))
    dst = draw(st.lists(h, min_size=n, max_size=n))
    size = draw(st.lists(st.floats(0.05, 20.0) | st.sampled_from([1.0, 2.0]),
                         min_size=n, max_size=n))
    release = draw(st.lists(st.sampled_from([0.0, 0.5, 1.0]) | st.floats(0.0, 6.0),
                            min_size=n, max_size=n))
    group = draw(st.lists(st.integers(0, 3), min_size=n, max_size=n))
    return net, src, dst, size, release, group


@pytest.mark.parametrize("name", sorted(COFLOW_SCHEDULERS))
@settings(max_examples=60, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(inst=instances())
def test_compiled_simulator_equals_the_reference(inst, name):
    net, src, dst, size, release, group = inst
    got = simulate(net, src, dst, size, release, policy=COFLOW_SCHEDULERS[name](),
                   group=group).finish
    want = flow_reference.simulate(net.routes.tolist(), net.capacity.tolist(), src, dst,
                                   size, release, group, name)
    # CCT of every Coflow and finish of every flow, 1e-9 relative
    rel = np.asarray(release)
    for g in set(group):
        m = np.asarray(group) == g
        np.testing.assert_allclose(got[m].max() - rel[m].min(),
                                   np.max(np.asarray(want)[m]) - rel[m].min(), rtol=1e-9)
    np.testing.assert_allclose(got, want, rtol=1e-9)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(COFLOW_SCHEDULERS))
def test_fb2010_replay_equals_the_uncompiled_simulator(name):
    want = pd.read_csv(ROOT / "tests/data/fb2010_cct.csv")
    got = replay(read_coflow_trace(ROOT / "data/coflow/FB2010-1Hr-150-0.txt"), name)
    assert got["id"].tolist() == want["id"].tolist()
    np.testing.assert_allclose(got["cct"], want[name], rtol=1e-9)
