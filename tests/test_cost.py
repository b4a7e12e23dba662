"""Communication cost models: links, ring all-reduce, the linear fit (commsched.cost)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from commsched.cost import (
    PRESETS,
    LinearModel,
    LinkModel,
    RingAllReduce,
    fit_linear,
    ring_allreduce_time,
)
from commsched.errors import CommschedError


def test_link_transfer_time_by_hand():
    link = LinkModel(latency_s=1e-3, bandwidth_Bps=1e6)
    # 1 ms + 2_000_000 B / 1e6 B/s = 2.001 s
    assert link.transfer_time(2_000_000) == pytest.approx(2.001)
    assert link.transfer_time(0) == 1e-3


@pytest.mark.parametrize(
    ("name", "bits_per_s"),
    [("1GbE", 1e9), ("10GbE", 10e9), ("25GbE", 25e9), ("100Gb", 100e9)],
)
def test_presets_are_bits_over_eight(name, bits_per_s):
    link = LinkModel.preset(name, latency_s=0.0)
    assert link.bandwidth_Bps == bits_per_s / 8
    # one second's worth of bits moves in one second
    assert link.transfer_time(bits_per_s / 8) == pytest.approx(1.0)
    assert LinkModel.preset(name).latency_s == PRESETS[name][1]


def test_bad_links_and_presets_are_user_errors():
    with pytest.raises(CommschedError, match="unknown link preset"):
        LinkModel.preset("2GbE")
    with pytest.raises(CommschedError, match="bandwidth"):
        LinkModel(0.0, 0.0)
    with pytest.raises(CommschedError, match="latency"):
        LinkModel(-1.0, 1.0)
    with pytest.raises(CommschedError, match="bytes"):
        LinkModel(0.0, 1.0).transfer_time(-5)


def test_ring_allreduce_by_hand():
    link = LinkModel(latency_s=10e-6, bandwidth_Bps=1.25e9)  # 10GbE, 10 us
    # n = 4, 100 MB: 2*3 = 6 steps of 10 us = 60 us; 2*3/4 * 1e8 / 1.25e9 = 0.12 s.
    assert ring_allreduce_time(100_000_000, 4, link) == pytest.approx(0.12006)
    # n = 2: 2 steps (20 us) and 1 * 1e8 / 1.25e9 = 0.08 s.
    assert ring_allreduce_time(100_000_000, 2, link) == pytest.approx(0.08002)
    # one worker communicates nothing
    assert ring_allreduce_time(100_000_000, 1, link) == 0.0
    with pytest.raises(CommschedError):
        ring_allreduce_time(10, 0, link)


@given(
    n=st.integers(1, 64),
    lat=st.floats(0, 1e-2),
    bw=st.floats(1e6, 1e11),
    size=st.integers(0, 10**10),
)
def test_ring_linear_form_agrees(n, lat, bw, size):
    ring = RingAllReduce(n, LinkModel(lat, bw))
    lin = ring.as_linear()
    assert lin.time(size) == pytest.approx(ring.time(size), rel=1e-12, abs=1e-15)
    # the bandwidth term never exceeds twice a plain transfer of the tensor
    assert ring.time(size) - 2 * (n - 1) * lat <= 2 * size / bw * (1 + 1e-12)


def test_fit_exact_line():
    fit = fit_linear([1e3, 1e4, 1e5, 1e6], [0.001 + 2e-9 * s for s in (1e3, 1e4, 1e5, 1e6)])
    assert fit.a == pytest.approx(0.001)
    assert fit.b == pytest.approx(2e-9)
    assert fit.r2 == pytest.approx(1.0)
    assert fit.n_points == 4
    assert fit.time(5e5) == pytest.approx(0.002)


@settings(max_examples=60, deadline=None)
@given(
    a=st.floats(1e-6, 1e-2),
    b=st.floats(1e-11, 1e-7),
    seed=st.integers(0, 2**31 - 1),
    relative=st.booleans(),
)
def test_fit_recovers_known_line(a, b, seed, relative):
    rng = np.random.default_rng(seed)
    sizes = np.repeat(np.geomspace(4096, 64 << 20, 15), 5)
    exact = a + b * sizes
    fit = fit_linear(sizes, exact, relative=relative)
    assert fit.a == pytest.approx(a, rel=1e-6, abs=1e-12)
    assert fit.b == pytest.approx(b, rel=1e-6)
    # With 1% multiplicative noise, and the size term at least the start-up cost at the
    # largest size (else the slope drowns in the noise of a), the slope is within 5%.
    noisy = exact * (1 + 0.01 * rng.standard_normal(len(sizes)))
    fit = fit_linear(sizes, noisy, relative=relative)
    if b * sizes.max() >= a:
        assert fit.b == pytest.approx(b, rel=0.05)
    if b * sizes.max() >= 10 * a:  # the size term dominates: the line explains the data
        assert fit.r2 > 0.95


def test_relative_fit_keeps_the_intercept_of_small_sizes():
    # Times 1 ms + 1 ns/B, plus one large outlier at the top size: OLS is pulled by the
    # big values, the relative fit keeps a close to 1 ms.
    sizes = [1e3, 1e4, 1e5, 1e6, 1e7, 1e8]
    times = [1e-3 + 1e-9 * s for s in sizes]
    times[-1] *= 1.2
    rel = fit_linear(sizes, times, relative=True)
    ols = fit_linear(sizes, times)
    assert abs(rel.a - 1e-3) < abs(ols.a - 1e-3)
    assert rel.a == pytest.approx(1e-3, rel=0.05)


def test_fit_bad_input():
    with pytest.raises(CommschedError, match="two distinct"):
        fit_linear([5, 5], [1, 2])
    with pytest.raises(CommschedError, match="equal-length"):
        fit_linear([1, 2, 3], [1, 2])
    with pytest.raises(CommschedError, match="finite"):
        fit_linear([1, 2], [1, math.nan])
    with pytest.raises(CommschedError, match="> 0"):
        fit_linear([1, 2], [0.0, 1.0], relative=True)


def test_linear_model_time():
    assert LinearModel(0.5, 0.01).time(100) == 1.5
