"""Coflow schedulers (Varys SEBF + MADD + back-fill, fifo, fair, fair-ports), the
Coflow-Benchmark reader, the replay and its command."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from commsched.cli import main
from commsched.echelon.coflow import (
    COFLOW_SCHEDULERS,
    VARYS_EPOCH_S,
    VARYS_PORT_RATE,
    VARYS_QUANTUM_S,
    CoflowEvents,
    CoflowOrder,
    bottleneck,
    madd,
    replay,
)
from commsched.errors import CommschedError
from commsched.io.coflow import parse_coflow_trace, read_coflow_trace
from commsched.sim.flow import Quantized, RouteShare, big_switch, check_flow_schedule, simulate

ROOT = Path(__file__).resolve().parent.parent


def run(name, src, dst, size, release, group, hosts=5):
    net = big_switch(hosts, 1.0)
    args = [np.asarray(a) for a in (src, dst)] + [np.asarray(size, dtype=float),
                                                  np.asarray(release, dtype=float)]
    r = simulate(net, *args, policy=COFLOW_SCHEDULERS[name](), record=True, group=group)
    check_flow_schedule(net, *args, r)
    return r.finish


def test_sebf_runs_the_smaller_coflow_first():
    # A: 1 byte 0->1, B: 2 bytes 0->2, both on egress 0 (1 B/s). Fair: A at 2, B at 3.
    # SEBF (bottlenecks 1 s < 2 s): A alone first (1 s), then B (3 s).
    args = ([0, 0], [1, 2], [1.0, 2.0], [0.0, 0.0], [0, 1])
    assert run("fair", *args).tolist() == [2.0, 3.0]
    assert run("sebf", *args).tolist() == [1.0, 3.0]


def test_sebf_order_of_three_coflows_on_one_port():
    # sizes 3, 1, 2 on one port: shortest first -> CCTs 1, 1 + 2 = 3, 3 + 3 = 6
    f = run("sebf", [0, 0, 0], [1, 2, 3], [3.0, 1.0, 2.0], [0, 0, 0], [0, 1, 2])
    assert f.tolist() == [6.0, 1.0, 3.0]


def test_fifo_is_non_preemptive_and_sebf_preempts():
    # A (4 bytes) arrives at 0, B (1 byte) at 1, same port. FIFO: A keeps the port until 4,
    # B then runs: 5. SEBF at 1 s: A has 3 left, B 1 -> B first (1..2), A ends at 5.
    args = ([0, 0], [1, 2], [4.0, 1.0], [0.0, 1.0], [0, 1])
    assert run("fifo", *args).tolist() == [4.0, 5.0]
    assert run("sebf", *args).tolist() == [5.0, 2.0]


def test_madd_flows_finish_together_at_the_bottleneck():
    # one Coflow: 0->1 (2 bytes), 2->3 (1 byte), 2->1 (1 byte). Link bytes: egress0 2,
    # egress2 2, ingress1 3, ingress3 1 -> bottleneck 3 s. MADD's rates (2/3, 1/3, 1/3)
    # finish every flow at 3 s; back-fill then gives 2->3 the idle capacity (egress 2 has
    # 1/3 B/s spare), so it ends early at 1.5 s, and the CCT stays the bottleneck, 3 s.
    net = big_switch(5, 1.0)
    links = net.routes[[0, 2, 2], [1, 3, 1]]
    rem = np.array([2.0, 1.0, 1.0])
    r = madd(links, rem, net.capacity)
    np.testing.assert_allclose(rem / r, [3.0, 3.0, 3.0])
    f = run("sebf", [0, 2, 2], [1, 3, 1], rem, [0, 0, 0], [7, 7, 7])
    np.testing.assert_allclose(f, [3.0, 1.5, 3.0])


def test_back_fill_uses_what_madd_leaves():
    # A: 0->1 (2 bytes), 2->3 (1 byte); B: 2->4 (1 byte). SEBF: B (1 s) before A (2 s).
    # B takes egress 2, so MADD gives A nothing; back-fill lets A's 0->1 run at 1 B/s.
    # At 1 s B is done; A has 1 byte left on each flow -> both end at 2 s.
    # Without back-fill A would idle until 1 s and end at 3 s.
    f = run("sebf", [0, 2, 2], [1, 3, 4], [2.0, 1.0, 1.0], [0, 0, 0], [0, 0, 1])
    np.testing.assert_allclose(f, [2.0, 2.0, 1.0])


def test_fair_ports_does_not_redistribute():
    # f0: 0->1; f1: 2->1; f2: 2->3. Egress 2 has two flows (1/2 each), ingress 1 two (1/2).
    # Port share: every flow min(1/2, ...) = 1/2; max-min: also 1/2, 1/2, 1/2.  Now make
    # f0 alone at egress 0 but sharing ingress 1 with f1, f1 sharing egress 2 with f2 and f3:
    # port share gives f0 1/2 (ingress 1 has 2 flows) while max-min gives f0 2/3.
    src, dst = [0, 2, 2, 2], [1, 1, 3, 4]
    size = [1.0, 1.0, 1.0, 1.0]
    fair = run("fair", src, dst, size, [0] * 4, [0, 1, 2, 3])
    ports = run("fair-ports", src, dst, size, [0] * 4, [0, 1, 2, 3])
    assert fair[0] == pytest.approx(1.5)  # 2/3 B/s for 1.5 s... then done
    assert ports[0] == pytest.approx(2.0)  # 1/2 B/s, never more while f1 is active
    assert np.all(ports >= fair - 1e-9)


def test_bottleneck():
    links = np.array([[0, 2], [0, 3]])
    assert bottleneck(links, np.array([1.0, 3.0]), np.ones(4)) == 4.0


@settings(max_examples=30, deadline=None)
@given(data=st.data(), name=st.sampled_from(sorted(COFLOW_SCHEDULERS)))
def test_every_coflow_scheduler_passes_the_validator(data, name):
    n = data.draw(st.integers(1, 10))
    hosts = st.integers(0, 4)
    src = data.draw(st.lists(hosts, min_size=n, max_size=n))
    dst = data.draw(st.lists(hosts, min_size=n, max_size=n))
    size = data.draw(st.lists(st.floats(0.05, 5.0), min_size=n, max_size=n))
    group = data.draw(st.lists(st.integers(0, 3), min_size=n, max_size=n))
    rel = [float(g) * data.draw(st.floats(0.0, 1.0)) for g in group]
    finish = run(name, src, dst, size, rel, group)
    assert np.all(np.isfinite(finish))


@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_a_coflow_alone_finishes_at_its_bottleneck(data):
    # SEBF/MADD on a single Coflow is optimal: CCT = its bottleneck (no schedule can beat
    # the busiest port); the flows on the bottleneck finish exactly then.
    n = data.draw(st.integers(1, 8))
    hosts = st.integers(0, 4)
    src = data.draw(st.lists(hosts, min_size=n, max_size=n))
    dst = data.draw(st.lists(hosts, min_size=n, max_size=n))
    size = np.array(data.draw(st.lists(st.floats(0.1, 5.0), min_size=n, max_size=n)))
    net = big_switch(5, 1.0)
    g = bottleneck(net.routes[src, dst], size, net.capacity)
    f = run("sebf", src, dst, size, [0.0] * n, [0] * n)
    assert f.max() == pytest.approx(g, rel=1e-6)
    assert run("fair", src, dst, size, [0.0] * n, [0] * n).max() >= g * (1 - 1e-9)


TRACE = "3 3\n1 0 2 0 1 1 2:2.0\n2 1000 1 2 2 0:1.0 1:1.0\n3 1000 1 0 1 2:0.5\n"


def test_reader_and_flows():
    t = parse_coflow_trace(TRACE)
    assert len(t) == 3 and t.ports == 3
    f = t.flows(mb=1.0)
    assert f["size"].tolist() == [1.0, 1.0, 1.0, 1.0, 0.5]
    assert f["release"].tolist() == [0.0, 0.0, 1.0, 1.0, 1.0]


@pytest.mark.parametrize("text, msg", [
    ("", ":1: header"),
    ("3 1\n1 0 2 0 1 2:1.0\n", ":2: reducer count"),
    ("3 1\n1 0 3 0 1 1 2:1.0\n", ":2: "),
    ("3 1\n1 0 1 0 1 2-1.0\n", ":2: reducer entry"),
    ("3 1\n1 0 1 5 1 2:1.0\n", ":2: a port is outside"),
    ("3 1\n1 0 1 0 1 2:0\n", ":2: reducer MB must be positive"),
    ("3 2\n1 5 1 0 1 2:1\n2 4 1 0 1 2:1\n", ":3: arrival time"),
    ("3 2\n1 0 1 0 1 2:1\n", "header says 2"),
    ("3 1\n1 x 1 0 1 2:1\n", ":2: arrival time 'x'"),
    ("3 2\n1 0 1 0 1 2:1\n1 0 1 0 1 2:1\n", ":3: Coflow id 1 already on line 2"),
])
def test_malformed_traces_name_the_line(text, msg):
    with pytest.raises(CommschedError, match=msg):
        parse_coflow_trace(text, "t.txt")


def test_replay_ccts_by_hand():
    # 1 B/s ports, MB = 1 byte. Coflow 1 (t=0): 0->2 and 1->2, 1 byte each (ingress 2: 2 s).
    # Coflows 2 and 3 arrive at 1 s: 2 sends 2->0 and 2->1 (1 byte each, egress 2: 2 s);
    # 3 sends 0->2 (0.5 byte). Under SEBF at 1 s: C1 has 1 byte left on ingress 2 (1 s),
    # C3 0.5 s on ingress 2, C2 2 s on egress 2 (disjoint). C3 first on ingress 2 -> ends
    # 1.5; C1 back-fills... C1 then ends at 2.5; C2 runs alone on egress 2: ends at 3.
    df = replay(parse_coflow_trace(TRACE), "sebf", port_rate=1.0, mb=1.0)
    np.testing.assert_allclose(df["finish"], [2.5, 3.0, 1.5])
    np.testing.assert_allclose(df["cct"], [2.5, 2.0, 0.5])
    with pytest.raises(CommschedError, match="unknown Coflow scheduler"):
        replay(parse_coflow_trace(TRACE), "varys")


def test_fb2010_trace_is_intact():
    t = read_coflow_trace("data/coflow/FB2010-1Hr-150-0.txt")
    assert (len(t), t.ports) == (526, 150)
    assert sum(len(m) * len(r) for m, r in zip(t.mappers, t.reducers, strict=True)) == 706397


def test_replay_command(tmp_path, capsys):
    trace = tmp_path / "t.txt"
    trace.write_text(TRACE)
    out = tmp_path / "cct.csv"
    assert main(["echelon", "replay", str(trace), "--scheduler", "fair", "--port-rate",
                 "1048576", "-o", str(out)]) == 0
    df = pd.read_csv(out, comment="#")
    assert list(df.columns[:4]) == ["id", "arrival", "finish", "cct"]
    assert df["id"].tolist() == [1, 2, 3]
    capsys.readouterr()  # the good run's output (a progress line when it takes over ~10 s)
    trace.write_text("3 1\n1 0 2 0 1 2:1.0\n")
    assert main(["echelon", "replay", str(trace), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "t.txt:2" in err
    assert pd.read_csv(out, comment="#")["id"].tolist() == [1, 2, 3]  # not overwritten


def test_replay_claims_name_metrics_the_replay_produces():
    from commsched.claims import load_claims
    from commsched.echelon.experiments.replay import metrics

    df = pd.DataFrame({"id": [1], "cct": [1.0]}).set_index("id")
    names = {"fair", "fair-ports", "fifo", "sebf"}
    produced = metrics({n: df for n in names})
    claims = load_claims("papers/claims/echelon-replay.yaml")
    assert claims and all(c["metric"] in produced for c in claims)
    assert {c["target"] for c in claims} == {"echelon_replay"}


def test_replay_metrics_and_bins(tmp_path):
    from commsched.echelon.experiments.replay import bins_table, main, metrics

    base = {"id": [1, 2], "arrival": [0.0, 0.0], "total_mb": [1.0, 300.0],
            "width": [1, 100], "longest_mb": [1.0, 10.0]}
    sebf = pd.DataFrame({**base, "finish": [1.0, 4.0], "cct": [1.0, 4.0]})
    fair = pd.DataFrame({**base, "finish": [2.0, 8.0], "cct": [2.0, 8.0]})
    m = metrics({"fair": fair.set_index("id"), "sebf": sebf.set_index("id")})
    assert m["echelon.replay.sebf_vs_fair.avg"] == pytest.approx(2.0)
    assert m["echelon.replay.sebf.avg_cct_s"] == pytest.approx(2.5)
    b = bins_table({"fair": fair.set_index("id"), "sebf": sebf.set_index("id")})
    assert b.set_index("bin")["coflows"].to_dict() == {"SN": 1, "LW": 1, "all": 2}
    assert b["ratio_of_avg"].tolist() == [2.0, 2.0, 2.0]
    from commsched.results import write_table
    write_table(sebf, tmp_path / "s.csv")
    write_table(fair.iloc[:1], tmp_path / "f.csv")
    assert main(["metrics", "--tables", f"sebf={tmp_path / 's.csv'}",
                 f"fair={tmp_path / 'f.csv'}", "--metrics", str(tmp_path / "m.csv"),
                 "--bins", str(tmp_path / "b.csv")]) == 2  # other Coflows: an error


def test_sebf_static_keeps_the_arrival_order_of_bottlenecks():
    # A: 4 bytes at 0; B: 3 bytes at 2, same port. At 2 s A has 2 left: sebf re-ranks
    # (A's remaining 2 s < B's 3 s) and A ends at 4, B at 7; sebf-static keeps A's full
    # size (4 s) behind B's (3 s): B runs 2..5, A ends at 7.
    args = ([0, 0], [1, 2], [4.0, 3.0], [0.0, 2.0], [0, 1])
    assert run("sebf", *args).tolist() == [4.0, 7.0]
    assert run("sebf-static", *args).tolist() == [7.0, 5.0]


def test_replay_epoch_admission_like_varys():
    # arrivals 1.5 s and 12 s with 10 s epochs: released at 0 and 10, CCTs from there
    t = parse_coflow_trace("2 2\n1 1500 1 0 1 1:1.0\n2 12000 1 0 1 1:1.0\n")
    df = replay(t, "sebf", port_rate=1.0, mb=1.0, epoch_s=10.0)
    assert df["arrival"].tolist() == [0.0, 10.0]
    assert df["cct"].tolist() == [1.0, 1.0]
    with pytest.raises(CommschedError, match="epoch"):
        replay(t, "sebf", epoch_s=0.0)


def run_policy(policy, src, dst, size, release, hosts=7, **meta):
    """Finish times and the first segment's rates of ``policy``, schedule checked."""
    net = big_switch(hosts, 1.0)
    args = [np.asarray(a) for a in (src, dst)] + [np.asarray(size, dtype=float),
                                                  np.asarray(release, dtype=float)]
    r = simulate(net, *args, policy=policy, record=True, **meta)
    check_flow_schedule(net, *args, r)
    return r.finish, r.segments[0].rates


def test_coflow_event_rate_updates_leave_a_finished_flows_capacity_idle():
    # Varys' simulator's candidate (a), issue 25. A: 2 bytes 0->1 and 1 byte 2->3; C: 5
    # bytes 2->3 and 1 byte 0->1; 1 B/s ports, all at 0. SEBF ranks A (2 s) before C
    # (5 s): A's MADD rates 1 and 0.5, C waits for port 0, back-fill gives A's 2->3 flow
    # port 2's other half: it ends at 1. Recomputed then, C's 5-byte flow takes port 2
    # from 1 (4 left at 2) and ends at 6; its 1-byte flow (MADD 1/4 + back-fill 3/4 at 2)
    # at 3. Recomputed only at Coflow events (A departs at 2), the 5-byte flow starts at
    # 2 and ends at 7: C's CCT 7 instead of 6.
    args = ([0, 2, 2, 0], [1, 3, 3, 1], [2.0, 1.0, 5.0, 1.0], [0.0] * 4)
    g = {"group": [0, 0, 1, 1]}
    assert run_policy(CoflowOrder("sebf"), *args, **g)[0].tolist() == [2.0, 1.0, 6.0, 3.0]
    events = CoflowEvents(CoflowOrder("sebf"))
    assert run_policy(events, *args, **g)[0].tolist() == [2.0, 1.0, 7.0, 3.0]
    with pytest.raises(CommschedError, match="group"):
        run_policy(CoflowEvents(CoflowOrder("sebf")), *args)


def test_greedy_backfill_gives_a_port_to_the_first_flow():
    # Varys' simulator's candidate (b). One Coflow: 4 bytes 0->1 (its bottleneck, 4 s),
    # 1 byte 2->3 and 1 byte 2->4. MADD: rates 1, 1/4, 1/4, half of port 2 left. Max-min
    # back-fill (weights: remaining bytes 1, 1) splits it: 1/2 each, both end at 2.
    # Greedy: the first flow takes all of it (3/4, ends at 4/3); recomputed then, the
    # second gets 2/3 / (8/3) = 1/4 by MADD and 3/4 by back-fill: ends at 2.
    args = ([0, 2, 2], [1, 3, 4], [4.0, 1.0, 1.0], [0.0] * 3)
    finish, rates = run_policy(CoflowOrder("sebf"), *args, group=[0, 0, 0])
    assert finish.tolist() == [4.0, 2.0, 2.0]
    assert rates.tolist() == [1.0, 0.5, 0.5]
    finish, rates = run_policy(CoflowOrder("sebf", "greedy"), *args, group=[0, 0, 0])
    assert finish == pytest.approx([4.0, 4 / 3, 2.0], rel=1e-12)
    assert rates.tolist() == [1.0, 0.75, 0.25]
    with pytest.raises(CommschedError, match="back-fill"):
        CoflowOrder("sebf", "fair")


def test_greedy_backfill_serves_coflows_in_deadline_order():
    # X: 2 bytes 0->1 and 1 byte 2->3 (bottleneck 2 s); Y: 3 bytes 4->5 and 1 byte 2->6
    # (3 s). MADD: X's 2->3 flow 1/2, Y's 2->6 flow 1/3 of port 2's other half; 1/6 of
    # port 2 is left. Greedy in rank order gives it to X's flow, in deadline order (Y's
    # earlier) to Y's.
    args = ([0, 2, 4, 2], [1, 3, 5, 6], [2.0, 1.0, 3.0, 1.0], [0.0] * 4)
    _, rank = run_policy(CoflowOrder("sebf", "greedy"), *args, group=[0, 0, 1, 1])
    assert rank == pytest.approx([1.0, 0.5 + 1 / 6, 1.0, 1 / 3], rel=1e-12)
    _, edf = run_policy(CoflowOrder("sebf", "greedy"), *args, group=[0, 0, 1, 1],
                        deadline=[9.0, 9.0, 5.0, 5.0])
    assert edf == pytest.approx([1.0, 0.5, 1.0, 1 / 3 + 1 / 6], rel=1e-12)


def test_greedy_backfill_shares_among_waiting_coflows_first():
    # A (1 byte 0->1) saturates port 0; B (4 bytes 0->2, 1 byte 3->4, 1 byte 3->5) waits
    # (MADD skips it); its flows clear of port 0 share port 3 equally (1/2 each) before
    # any greedy pass, as Varys' simulator does (updateRatesFairShare)
    args = ([0, 0, 3, 3], [1, 2, 4, 5], [1.0, 4.0, 1.0, 1.0], [0.0] * 4)
    _, rates = run_policy(CoflowOrder("sebf", "greedy"), *args, group=[0, 1, 1, 1])
    assert rates.tolist() == [1.0, 0.0, 0.5, 0.5]


def test_quantized_rates_change_only_on_the_grid():
    # two flows on egress 0 (1 B/s): 0.25 and 2 bytes. Unquantized the short one ends at
    # 0.5 and the long one at 0.5 + 1.75 = 2.25; with 1 s steps the long one keeps 1/2
    # until 1 (1.5 left) and ends at 2.5. A flow released at 0.2 waits for the grid.
    args = ([0, 0], [1, 2], [0.25, 2.0], [0.0, 0.0])
    assert run_policy(RouteShare("max-min"), *args)[0].tolist() == [0.5, 2.25]
    assert run_policy(Quantized(RouteShare("max-min"), 1.0), *args)[0].tolist() == [0.5, 2.5]
    late = run_policy(Quantized(RouteShare("max-min"), 1.0), [0], [1], [1.0], [0.2])[0]
    assert late.tolist() == [2.0]
    with pytest.raises(CommschedError, match="quantum"):
        Quantized(RouteShare("max-min"), 0.0)


def test_replay_varys_switches():
    # one Coflow of 1 MB at 0 on 3 MB/s ports: CCT 1/3 s; 0.25 s steps round it to 0.5
    t = parse_coflow_trace("2 1\n1 0 1 0 1 1:1.0\n")
    assert replay(t, "sebf", port_rate=3.0, mb=1.0)["cct"].tolist() == [pytest.approx(1 / 3)]
    assert replay(t, "sebf", port_rate=3.0, mb=1.0, quantum_s=0.25)["cct"].tolist() == [0.5]
    for kw in ({"rate_updates": "coflow"}, {"backfill": "greedy"},
               {"rate_updates": "coflow", "backfill": "greedy"}):
        assert replay(t, "sebf", port_rate=3.0, mb=1.0, **kw)["cct"].tolist() == \
            [pytest.approx(1 / 3)]
    with pytest.raises(CommschedError, match="apply to sebf"):
        replay(t, "fair", rate_updates="coflow")
    with pytest.raises(CommschedError, match="rate updates"):
        replay(t, "sebf", rate_updates="never")
    with pytest.raises(CommschedError, match="quantum"):
        replay(t, "sebf", quantum_s=-1.0)


VARYS_SIM = pd.read_csv(ROOT / "tests/data/coflowsim_fb2010_120.csv", comment="#")


def fb2010_head(n):
    lines = (ROOT / "data/coflow/FB2010-1Hr-150-0.txt").read_text().splitlines()
    return parse_coflow_trace("\n".join([f"150 {n}", *lines[1:n + 1]]))


@pytest.mark.slow
def test_varys_switches_reproduce_varys_simulator_on_fb2010_head():
    # Varys' own simulator (coflow/coflowsim, run on the first 120 FB2010 Coflows:
    # tests/data/coflowsim_fb2010_120.csv) is reproduced Coflow by Coflow by sebf-static
    # with all five switches and by fair-ports with quanta, port rate and epochs; leaving
    # out the Coflow-event rate updates or the greedy back-fill breaks the match
    t = fb2010_head(120)
    varys = {"quantum_s": VARYS_QUANTUM_S, "port_rate": VARYS_PORT_RATE,
             "epoch_s": VARYS_EPOCH_S}
    coflow = {"rate_updates": "coflow", "backfill": "greedy"}
    sebf = replay(t, "sebf-static", **varys, **coflow)
    assert sebf["id"].tolist() == VARYS_SIM["id"].tolist()
    np.testing.assert_allclose(sebf["cct"] * 1000, VARYS_SIM["sebf"], rtol=0, atol=1e-6)
    fair = replay(t, "fair-ports", **varys)
    np.testing.assert_allclose(fair["cct"] * 1000, VARYS_SIM["fair"], rtol=0, atol=1e-6)
    for left_out in coflow:
        partial = replay(t, "sebf-static", **varys,
                         **{k: v for k, v in coflow.items() if k != left_out})
        assert not np.allclose(partial["cct"] * 1000, VARYS_SIM["sebf"], rtol=0, atol=1.0)


def test_replay_command_varys_switches(tmp_path, capsys):
    trace = tmp_path / "t.txt"
    trace.write_text(TRACE)
    out = tmp_path / "cct.csv"
    assert main(["echelon", "replay", str(trace), "--scheduler", "sebf-static",
                 "--rate-updates", "coflow", "--backfill", "greedy", "--quantum", "0.008",
                 "--epoch", "10.24", "--port-rate", "131072000", "-o", str(out)]) == 0
    df = pd.read_csv(out, comment="#")
    want = replay(parse_coflow_trace(TRACE), "sebf-static", port_rate=VARYS_PORT_RATE,
                  epoch_s=VARYS_EPOCH_S, rate_updates="coflow", backfill="greedy",
                  quantum_s=VARYS_QUANTUM_S)
    np.testing.assert_allclose(df["cct"], want["cct"], rtol=1e-12)
    assert '"rate_updates": "coflow"' in out.read_text()  # provenance names the switches
    capsys.readouterr()
    assert main(["echelon", "replay", str(trace), "--scheduler", "fair", "--backfill",
                 "greedy", "-o", str(tmp_path / "x.csv")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "apply to sebf" in err
    assert not (tmp_path / "x.csv").exists()


@pytest.mark.parametrize("make", [
    lambda: CoflowEvents(CoflowOrder("sebf")),
    lambda: CoflowEvents(CoflowOrder("sebf-static", "greedy")),
    lambda: Quantized(CoflowOrder("sebf", "greedy"), 0.5),
    lambda: Quantized(CoflowEvents(CoflowOrder("fifo")), 0.5),
    lambda: Quantized(RouteShare("port-share"), 0.25),
])
def test_held_rates_run_through_completions_as_event_by_event(make):
    # a policy's hold() lets FlowSim skip the completions it would not react to; the
    # same policy with its hold hidden is called at every completion and must agree
    rng = np.random.default_rng(7)
    n = 60
    src, dst = rng.integers(0, 6, n), rng.integers(0, 6, n)
    size = rng.uniform(0.5, 4.0, n)
    group = rng.integers(0, 8, n)
    release = (group * 0.7).astype(float)
    fast, plain = make(), make()
    net = big_switch(6, 1.0)
    a = simulate(net, src, dst, size, release, policy=fast, group=group, record=True)
    b = simulate(net, src, dst, size, release, policy=lambda v: plain(v), group=group)
    check_flow_schedule(net, src, dst, size, release, a)
    np.testing.assert_allclose(a.finish, b.finish, rtol=1e-12)
    assert a.events < b.events


def test_fb2010_needs_no_varys_rounding_or_port_merging():
    # Varys' simulator rounds each reducer's bytes up to whole MB per mapper
    # (ReduceTask.roundToNearestNMB) and merges a Coflow's mappers (reducers) on one
    # port (Job.coalesceMappers/Reducers): on FB2010 both are no-ops, so the replay
    # needs no switch for them
    t = read_coflow_trace("data/coflow/FB2010-1Hr-150-0.txt")
    for m, r, mb in zip(t.mappers, t.reducers, t.reducer_mb, strict=True):
        assert len(set(m.tolist())) == len(m) and len(set(r.tolist())) == len(r)
        assert np.all(mb % len(m) == 0)


@pytest.mark.slow
def test_varys_switches_against_varys_simulator_on_all_of_fb2010():
    # Varys' simulator on all of FB2010 (tests/data/coflowsim_fb2010_sebf.csv, average
    # 28.53 s): the emulation gives 503 of the 526 CCTs to 1 ms and 27.64 s on average;
    # the other 23 diverge from Coflow 219 on (it ends one 8 ms step later here), cause
    # not found (issue 25)
    varys = pd.read_csv(ROOT / "tests/data/coflowsim_fb2010_sebf.csv", comment="#")
    df = replay(read_coflow_trace("data/coflow/FB2010-1Hr-150-0.txt"), "sebf-static",
                quantum_s=VARYS_QUANTUM_S, port_rate=VARYS_PORT_RATE, epoch_s=VARYS_EPOCH_S,
                rate_updates="coflow", backfill="greedy")
    assert df["id"].tolist() == varys["id"].tolist()
    close = np.abs(df["cct"] * 1000 - varys["sebf"]) < 1.0
    assert close.sum() >= 503
    assert varys["sebf"].mean() / 1000 == pytest.approx(28.528, abs=1e-3)
    assert df["cct"].mean() == pytest.approx(27.635, abs=1e-3)
