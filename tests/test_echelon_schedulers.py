"""EchelonFlow schedulers (Property 4, EIFF) on the flow simulator: Fig. 2, Property 2, and
a contract every policy meets on random instances (valid schedules, tardiness bounds)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from commsched.echelon import arrangement as arr
from commsched.echelon.coflow import COFLOW_SCHEDULERS
from commsched.echelon.exact import POLICIES, random_instance, solve_exact
from commsched.echelon.model import EchelonFlow, flow_table, simulate_echelonflows
from commsched.echelon.schedulers import FLOW_SCHEDULERS, EchelonScheduler
from commsched.errors import CommschedError
from commsched.sim.flow import big_switch, check_flow_schedule, two_tier

# --- Fig. 2 --------------------------------------------------------------------------------
# The instance, from the caption and Sec. 1: the predecessor worker runs the forward of
# micro-batches 0, 1, 2 back to back, T = 1 s each, and sends each activation (2B bytes,
# B = 1) over a B = 1 byte/s link to the successor, which runs the forward of micro-batch
# j (T = 1 s) once activation j has arrived and micro-batch j-1 is done.
# Activation j is released at (j+1) T = 1, 2, 3 s; the EchelonFlow's reference is r = 1
# and Eq. 6 gives ideal finish times d = 1, 2, 3.
#
# Lower bound: the link sends nothing before 1 s and 6 bytes in all, so the last
# activation arrives at >= 7 s: t_H >= 7 - 3 = 4 and the successor ends at >= 7 + 1 = 8 s.
# Earliest ideal finish first: 0 on [1,3], 1 on [3,5], 2 on [5,7] -> finish 3, 5, 7,
#   t_H = max(2, 3, 4) = 4 (optimal), successor [3,4], [5,6], [7,8]: ends at 8.
# Fair sharing: [1,2] flow 0 alone (1 byte left); [2,3] flows 0, 1 at 1/2 (0.5, 1.5
#   left); from 3 three flows at 1/3: flow 0 ends at 4.5 (1, 1.5 left); then two at 1/2:
#   flow 1 ends at 6.5, flow 2 at 7 -> t_H = max(3.5, 4.5, 4) = 4.5, successor ends at
#   max(4.5+3, 6.5+2, 7+1) = 8.5.
# Coflow (Eq. 5: one ideal time; Varys' MADD, or EchelonFlow's constant-rate scheduling on
#   the Coflow arrangement, paces all flows to finish together): all end at 7
#   (the link is never idle after 1 s), t_H as an EchelonFlow = 7 - 1 = 6, successor
#   ends at 7 + 3 = 10 > 8.5: Coflow is worse than fair sharing.

FIG2_RELEASE = [1.0, 2.0, 3.0]


def fig2(offset: np.ndarray) -> EchelonFlow:
    return EchelonFlow([0, 0, 0], [1, 1, 1], [2.0] * 3, FIG2_RELEASE, offset)


def successor_end(finish: np.ndarray, t: float = 1.0) -> float:
    end = -math.inf
    for e in finish:
        end = max(end, e) + t
    return end


def test_fig2_echelonflow_optimal_coflow_worse_than_fair() -> None:
    net = big_switch(2, rate=1.0)
    h = fig2(arr.gpipe(3, 1.0))
    ech = simulate_echelonflows(net, [h], FLOW_SCHEDULERS["echelon-edf-total"](), record=True)
    fr = simulate_echelonflows(net, [h], COFLOW_SCHEDULERS["fair"]())
    # Coflow: the same flows as one Coflow under Varys (SEBF + MADD), and as a Coflow
    # arrangement (Eq. 5) under EchelonFlow scheduling (Property 2: the same schedule)
    co = simulate_echelonflows(net, [h], COFLOW_SCHEDULERS["sebf"]())
    co5 = simulate_echelonflows(net, [fig2(arr.coflow(3))], FLOW_SCHEDULERS["echelon-madd-total"]())
    assert ech.finish.tolist() == [3.0, 5.0, 7.0] and ech.tardiness[0] == 4.0
    assert fr.finish.tolist() == [4.5, 6.5, 7.0] and fr.tardiness[0] == 4.5
    assert co.finish.tolist() == pytest.approx([7.0, 7.0, 7.0], rel=1e-12)
    assert co5.finish.tolist() == pytest.approx([7.0, 7.0, 7.0], rel=1e-12)
    assert float(np.max(co.finish - h.ideal)) == pytest.approx(6.0, rel=1e-12)
    ends = {k: successor_end(r.finish) for k, r in (("ech", ech), ("fair", fr), ("co", co))}
    assert ends == pytest.approx({"ech": 8.0, "fair": 8.5, "co": 10.0}, rel=1e-12)
    # EchelonFlow scheduling is optimal: the exact optimum is the lower bound 4
    assert solve_exact(net, [h]).objective == pytest.approx(4.0)
    # Property 1: the successor's phase ends at r + |H| T + t_H for every schedule
    for fin in (ech.finish, fr.finish, co.finish):
        assert successor_end(fin) == pytest.approx(1.0 + 3 * 1.0 + np.max(fin - h.ideal))
    tab = ech.table
    check_flow_schedule(net, tab.src, tab.dst, tab.size, tab.release, ech.result)


def test_fig2_constant_rates_reading_is_not_optimal() -> None:
    # The MADD reading of Property 4 (constant rates, all flows equally tardy) on Fig. 2:
    # at 1 s flow 0 alone runs at 1. At 2 s, flows 0 (1 byte, d = 1) and 1 (2 bytes, d = 2)
    # paced to t with 1/(t-1) + 2/t = 1: t = 2 + sqrt 2, rates sqrt2 - 1 and 2 - sqrt 2.
    # At 3 s flow 2 (2 bytes, d = 3) arrives; flows 0, 1 have 2 - sqrt2 and sqrt2 left;
    # the pace t solves (2-sqrt2)/(t-2) + sqrt2/(t-1) + 2/t = 1, and flow 0 keeps that
    # rate until it ends at 1 + t (nothing else ends first), so t_H >= t ~ 4.79 > 4.5
    # (fair sharing) > 4 (optimum).
    s2 = math.sqrt(2.0)
    p = np.polynomial.Polynomial
    t_ = p([0, 1])
    poly = (2 - s2) * t_ * (t_ - 1) + s2 * t_ * (t_ - 2) + 2 * (t_ - 1) * (t_ - 2) \
        - t_ * (t_ - 1) * (t_ - 2)
    pace = max(r.real for r in poly.roots() if abs(r.imag) < 1e-12 and r.real > 2)
    run = simulate_echelonflows(big_switch(2, 1.0), [fig2(arr.gpipe(3, 1.0))],
                                FLOW_SCHEDULERS["echelon-madd-total"]())
    assert run.finish[0] == pytest.approx(1.0 + pace, rel=1e-9)
    assert run.tardiness[0] == pytest.approx(pace, rel=1e-9) and pace > 4.5


# --- Property 2: a Coflow's minimum tardiness is its completion time --------------------


@settings(max_examples=25, deadline=None)
@given(st.integers(2, 4), st.lists(st.tuples(st.integers(0, 3), st.integers(1, 3),
                                             st.integers(1, 5)), min_size=1, max_size=5),
       st.floats(0.0, 3.0))
def test_property2_coflow_tardiness_is_cct(hosts: int, flows: list, r: float) -> None:
    src = [s % hosts for s, _, _ in flows]
    dst = [(s + d) % hosts if (s + d) % hosts != s % hosts else (s + 1) % hosts
           for s, d, _ in flows]
    size = [float(z) for _, _, z in flows]
    h = EchelonFlow(src, dst, size, [r] * len(flows), arr.coflow(len(flows)))
    net = big_switch(hosts, 1.0)
    # every flow has ideal time r, so t_H = last finish - r = the Coflow completion time,
    # whose minimum is the most loaded port's bytes (Varys' bottleneck bound, attained):
    # EchelonFlow's constant-rate scheduling, Varys (SEBF + MADD) and the exact optimum
    # all give it
    load = np.zeros(2 * hosts)
    np.add.at(load, np.array(src), size)
    np.add.at(load, hosts + np.array(dst), size)
    gamma = float(load.max())
    madd = simulate_echelonflows(net, [h], FLOW_SCHEDULERS["echelon-madd-total"]())
    assert madd.tardiness[0] == pytest.approx(gamma, rel=1e-9)
    assert float(madd.finish.max()) - r == pytest.approx(gamma, rel=1e-9)
    varys = simulate_echelonflows(net, [h], COFLOW_SCHEDULERS["sebf"]())
    assert np.allclose(varys.finish, madd.finish, rtol=1e-9)
    assert solve_exact(net, [h]).objective == pytest.approx(gamma, rel=1e-6)


# --- contract: every policy, random instances ----------------------------------------------


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**31 - 1), st.integers(2, 5), st.integers(1, 4), st.integers(1, 4),
       st.booleans())
def test_every_policy_gives_a_valid_schedule(seed: int, hosts: int, groups: int, k: int,
                                             tiered: bool) -> None:
    rng = np.random.default_rng(seed)
    hs = random_instance(rng, hosts, groups, k)
    net = two_tier(2, (hosts + 1) // 2, 1.0, 2.0) if tiered else big_switch(hosts, 1.0)
    tab = flow_table(hs)
    links = net.routes[tab.src, tab.dst]
    cap = np.where(links >= 0, net.capacity[np.where(links >= 0, links, 0)], np.inf).min(1)
    bound = np.full(tab.groups, -np.inf)
    np.maximum.at(bound, tab.group, tab.release + tab.size / cap - tab.ideal)
    for name, make in POLICIES.items():
        run = simulate_echelonflows(net, tab, make(), record=True)
        check_flow_schedule(net, tab.src, tab.dst, tab.size, tab.release, run.result)
        assert np.all(run.tardiness >= bound - 1e-9), name
        assert run.objective == pytest.approx(float(np.sum(run.tardiness))), name


@settings(max_examples=15, deadline=None)
@given(st.integers(0, 2**31 - 1), st.floats(0.5, 100.0))
@example(seed=361, shift=1.0)  # sebf's tie between two Coflows once broken by float noise
def test_time_shift_leaves_tardiness_unchanged(seed: int, shift: float) -> None:
    rng = np.random.default_rng(seed)
    hs = random_instance(rng, 3, 3, 2)
    moved = [EchelonFlow(h.src, h.dst, h.size, h.release + shift, h.offset) for h in hs]
    net = big_switch(3, 1.0)
    for name, make in POLICIES.items():
        a = simulate_echelonflows(net, hs, make())
        b = simulate_echelonflows(net, moved, make())
        assert np.allclose(b.finish, a.finish + shift, rtol=1e-9, atol=1e-9), name
        assert np.allclose(a.tardiness, b.tardiness, atol=1e-7), name


def test_policies_need_the_meta_columns_and_valid_variants() -> None:
    from commsched.sim.flow import simulate
    with pytest.raises(CommschedError, match="meta column 'group'"):
        simulate(big_switch(2, 1.0), [0], [1], [1.0], [0.0], FLOW_SCHEDULERS["echelon-edf-total"]())
    with pytest.raises(CommschedError, match="intra in"):
        EchelonScheduler("sjf", "total")


def test_ranking_total_vs_remaining() -> None:
    # Two EchelonFlows from host 0 to host 1 (1 byte/s). A: a 3-byte flow released at 0
    # (d = 0, ends at 3: A is already 3 late) and a 1-byte flow released at 4 (d = 4);
    # B: one 2-byte flow released at 4 (d = 4). At 4 the remaining bounds are A 1, B 2.
    # "remaining" sends A's flow first: it ends at 5, B at 7: t = (max(3, 1), 3), sum 6.
    # "total" ranks A by max(1, 3) = 3 > 2: B first, ends at 6, A's flow at 7:
    # t = (3, 2), sum 5.
    net = big_switch(2, 1.0)
    a = EchelonFlow([0, 0], [1, 1], [3.0, 1.0], [0.0, 4.0], [0.0, 4.0])
    b = EchelonFlow([0], [1], [2.0], [4.0], [0.0])
    tot = simulate_echelonflows(net, [a, b], FLOW_SCHEDULERS["echelon-edf-total"]())
    rem = simulate_echelonflows(net, [a, b], FLOW_SCHEDULERS["echelon-edf-remaining"]())
    assert tot.tardiness.tolist() == [3.0, 2.0] and tot.objective == 5.0
    assert rem.tardiness.tolist() == [3.0, 3.0] and rem.objective == 6.0


def test_bottleneck_ranking_serves_the_older_shorter_one_first() -> None:
    # One 1 byte/s link. Coflow B: 3 bytes released at 0 (d = 0); Coflow A: 2.5 bytes
    # released at 1 (d = 1). At 1, B has 2 bytes left. Tardiness ranking ("remaining" and
    # "total" alike): B's key 1 + 2 - 0 = 3 > A's 1 + 2.5 - 1 = 2.5, so A first: A ends
    # at 3.5 (t = 2.5), B at 5.5 (t = 5.5): sum 8. Bottleneck ranking: B's 2 s < A's 2.5 s,
    # B first: B ends at 3 (t = 3), A at 5.5 (t = 4.5): sum 7.5, the optimum (shortest
    # remaining first; any sharing only delays the first to finish).
    net = big_switch(2, 1.0)
    b = EchelonFlow([0], [1], [3.0], [0.0], [0.0])
    a = EchelonFlow([0], [1], [2.5], [1.0], [0.0])
    for rank, want in (("remaining", 8.0), ("total", 8.0), ("bottleneck", 7.5)):
        for intra in ("edf", "madd"):
            run = simulate_echelonflows(net, [b, a], FLOW_SCHEDULERS[f"echelon-{intra}-{rank}"]())
            assert run.objective == pytest.approx(want), (intra, rank)
    assert solve_exact(net, [b, a]).objective == pytest.approx(7.5)
