"""Multi-worker parameter-server simulation (commsched.tictac.sim).

Hand-derived cases first (every timeline is written out in the comments), then property
tests on random worker graphs. Every simulated schedule is validated with check_schedule
(``iteration(..., validate_schedule=True)`` and ``run(..., validate_every=1)``).
"""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from commsched.cost import LinkModel
from commsched.errors import CommschedError
from commsched.model.graph import add_op, compile_graph, new_graph, validate
from commsched.sim import check_schedule, simulate
from commsched.tictac.sim import (
    CONTENTION_PASSES,
    channel_overlap,
    coarsen,
    compose,
    iteration,
    rank_priorities,
    run,
    timeline_efficiency,
    union_busy,
    worker_id,
    worker_noise_factors,
)
from commsched.views import ps_view


def seq2() -> nx.DiGraph:
    """Two layers on one server: r1 -> c1 -> c2 <- r2; recvs 1 s, c1 2 s, c2 1 s."""
    g = new_graph({"net:ps0": 1, "cpu": 1})
    add_op(g, "r1", "recv", "net:ps0", 1.0, param="w1")
    add_op(g, "r2", "recv", "net:ps0", 1.0, param="w2")
    add_op(g, "c1", "compute", "cpu", 2.0)
    add_op(g, "c2", "compute", "cpu", 1.0)
    g.add_edges_from([("r1", "c1"), ("c1", "c2"), ("r2", "c2")])
    return g


def test_compose_shares_channels_and_copies_compute():
    mw = compose(seq2(), 3)
    g = mw.graph
    assert mw.shared == ("net:ps0",)
    assert g.graph["resources"] == {"net:ps0": 1, "w0/cpu": 1, "w1/cpu": 1, "w2/cpu": 1}
    assert g.number_of_nodes() == 12 and g.number_of_edges() == 9
    assert g.nodes[worker_id(2, "c1")]["resource"] == "w2/cpu"
    assert g.nodes[worker_id(2, "r1")]["resource"] == "net:ps0"
    assert [mw.cg.ids[i] for i in mw.recv_index[1]] == ["w1/r1", "w1/r2"]


def test_two_workers_one_server_good_order():
    # Order r1 < r2 for both workers; worker 0 wins the ties (priorities 0 / 0.25).
    # channel: w0.r1 [0,1] w1.r1 [1,2] w0.r2 [2,3] w1.r2 [3,4]
    # w0: c1 [1,3], c2 needs c1 (3) and r2 (3) -> [3,4]: ends 4
    # w1: c1 [2,4], c2 needs c1 (4) and r2 (4) -> [4,5]: ends 5
    # iteration 5, straggler (5 - 4) / 5 = 0.2
    mw = compose(seq2(), 2)
    res = iteration(mw, np.array([[0.0, 1.0], [0.25, 1.25]]))
    assert res.worker_end.tolist() == [4.0, 5.0]
    assert res.iteration_time == 5.0
    assert res.straggler == pytest.approx(0.2)


def test_two_workers_one_server_bad_order():
    # Order r2 < r1: channel w0.r2 [0,1] w1.r2 [1,2] w0.r1 [2,3] w1.r1 [3,4]
    # w0: c1 [3,5] c2 [5,6]; w1: c1 [4,6] c2 [6,7] -> iteration 7, straggler 1/7.
    mw = compose(seq2(), 2)
    res = iteration(mw, np.array([[1.0, 0.0], [1.25, 0.25]]))
    assert res.worker_end.tolist() == [6.0, 7.0]
    assert res.straggler == pytest.approx(1 / 7)


def test_rank_priorities_ties_and_unnamed_recvs():
    mw = compose(seq2(), 2)
    # TIC-style equal priorities give equal ranks; the tie draw only separates workers.
    p = rank_priorities(mw, {"r1": 5, "r2": 5}, tie=np.array([[0.0, 0.2], [0.4, 0.6]]))
    assert p.tolist() == [[0.0, 0.1], [0.2, 0.3]]
    # An unnamed recv goes last.
    assert rank_priorities(mw, {"r2": 7}).tolist() == [[1.0, 0.0], [1.0, 0.0]]
    with pytest.raises(CommschedError, match="not recvs"):
        rank_priorities(mw, {"c1": 0})


def train_graph(duplex: bool) -> nx.DiGraph:
    """Two recvs a, b (1 s) -> c (1 s) -> gradient send s (1 s), one server."""
    up = "net:ps0:up" if duplex else "net:ps0"
    g = new_graph({"net:ps0": 1, "net:ps0:up": 1, "cpu": 1})
    add_op(g, "a", "recv", "net:ps0", 1.0)
    add_op(g, "b", "recv", "net:ps0", 1.0)
    add_op(g, "c", "compute", "cpu", 1.0)
    add_op(g, "s", "send", up, 1.0)
    g.add_edges_from([("a", "c"), ("b", "c"), ("c", "s")])
    return g


def test_training_half_duplex_send_competes_with_recvs():
    # Worker 0 strictly before worker 1 (priorities 0,1 and 2,3), one shared channel:
    # w0.a [0,1] w0.b [1,2]; w0.c [2,3]; w1.a [2,3]. At 3 the channel has w0.s (ready 3,
    # no priority) and w1.b (ready since 0): fifo takes w1.b [3,4], then w0.s [4,5].
    # w1.c [4,5], w1.s [5,6]. Worker ends 5 and 6: iteration 6, straggler 1/6.
    mw = compose(train_graph(duplex=False), 2)
    assert mw.shared == ("net:ps0",)
    res = iteration(mw, np.array([[0.0, 1.0], [2.0, 3.0]]))
    assert res.worker_end.tolist() == [5.0, 6.0]
    assert res.straggler == pytest.approx(1 / 6)


def test_training_full_duplex_sends_on_their_own_channel():
    # Same, sends on net:ps0:up: w0.s [3,4] at once; w1.b [3,4], w1.c [4,5], w1.s [5,6].
    # Worker ends 4 and 6: iteration 6, straggler 2/6.
    mw = compose(train_graph(duplex=True), 2)
    assert mw.shared == ("net:ps0", "net:ps0:up")
    res = iteration(mw, np.array([[0.0, 1.0], [2.0, 3.0]]))
    assert res.worker_end.tolist() == [4.0, 6.0]
    assert res.straggler == pytest.approx(1 / 3)


def test_two_servers_are_independent_channels():
    # r1 on ps0, r2 on ps1, each 2 s, each feeds its own 1 s op. Two workers, w0 first.
    # ps0: w0.r1 [0,2] w1.r1 [2,4]; ps1: w0.r2 [0,2] w1.r2 [2,4].
    # w0: ops [2,3] [3,4] -> 4; w1: ops [4,5] [5,6] -> 6.
    g = new_graph({"net:ps0": 1, "net:ps1": 1, "cpu": 1})
    add_op(g, "r1", "recv", "net:ps0", 2.0)
    add_op(g, "r2", "recv", "net:ps1", 2.0)
    add_op(g, "o1", "compute", "cpu", 1.0)
    add_op(g, "o2", "compute", "cpu", 1.0)
    g.add_edges_from([("r1", "o1"), ("r2", "o2")])
    res = iteration(compose(g, 2), np.array([[0.0, 0.0], [0.25, 0.25]]))
    assert res.worker_end.tolist() == [4.0, 6.0]


def test_ps_view_graph_runs_end_to_end():
    # A tiny trace through the real PS view: read w1 -> mm1 -> mm2 (reads w2) -> grads.
    t = new_graph({"cpu": 1}, meta={"model": "m", "mode": "train", "batch": 1, "iterations": 1},
                  variables={v: {"bytes": b, "shape": [1], "dtype": "float32",
                                 "trainable": True, "path": v}
                             for v, b in (("w1", 100), ("w2", 300))})
    for op, d, extra in (("read1", 0.0, {"reads": ["w1"]}), ("read2", 0.0, {"reads": ["w2"]}),
                         ("mm1", 1.0, {}), ("mm2", 1.0, {}),
                         ("g2", 1.0, {"grad_of": ["w2"], "is_gradient": True}),
                         ("g1", 1.0, {"grad_of": ["w1"], "is_gradient": True})):
        add_op(t, op, "compute", "cpu", d, op_type="X", samples=[d], out_bytes=4,
               **{"is_gradient": False, **extra})
    for u, v in (("read1", "mm1"), ("mm1", "mm2"), ("read2", "mm2"), ("mm2", "g2"), ("g2", "g1")):
        t.add_edge(u, v, control=False, bytes=4)
    v = ps_view(t, n_servers=1, link=LinkModel(0.0, 100.0))
    mw = compose(v, 2)
    r = run(mw, {"recv:w1": 0, "recv:w2": 1}, n_iterations=3, jitter=0.0, seed=1)
    assert r.validated == 3
    # channel: recv:w1 1 s each, recv:w2 3 s each; w1 before w2 for both workers.
    # first worker: w1 [0,1] mm1 [1,2], w2 done at 2+3+... see the ranks: w1,w1,w2,w2
    # -> recv:w2 of the first worker ends 5, second 8; the first worker then runs
    # mm2 [5,6] g2 [6,7] send:w2 (3 s, uplink) [7,10]; g1 [7,8] send:w1 [10,11]
    # (uplink busy until 10). Second: mm2 [8,9] g2 [9,10] send:w2 [11,14] g1 [10,11]
    # send:w1 [14,15] -> iteration 15, first worker 11.
    assert r.iteration_time.tolist() == [15.0, 15.0, 15.0]
    assert sorted(r.worker_end[0].tolist()) == [11.0, 15.0]


# --------------------------------------------------------------------------------------
# Property tests on random worker graphs.


@st.composite
def worker_graphs(draw: st.DrawFn, chain: bool = False, positive: bool = False,
                  duplex: bool = False) -> nx.DiGraph:
    """A random PS worker graph: a compute DAG, recvs feeding it, optional sends.

    ``chain``: the compute ops form one chain and sends use their own uplink channels, so
    the worker has no scheduling freedom left (see test_iteration_not_shorter_...).
    ``positive``: every duration > 0; ``duplex``: sends on their own uplinks.
    """
    n_servers = draw(st.integers(1, 2))
    duplex = chain or duplex or draw(st.booleans())
    n_ops = draw(st.integers(1, 6))
    n_recv = draw(st.integers(1, 5))
    res = {"cpu": 1}
    for k in range(n_servers):
        res[f"net:ps{k}"] = 1
        res[f"net:ps{k}:up"] = 1
    g = new_graph(res)
    dur = st.sampled_from([0.5, 1.0, 2.0, 3.0] if positive else [0.0, 0.5, 1.0, 2.0, 3.0])
    for i in range(n_ops):
        add_op(g, f"c{i}", "compute", "cpu", draw(dur))
        for j in range(i):
            if (chain and j == i - 1) or (not chain and draw(st.booleans())):
                g.add_edge(f"c{j}", f"c{i}")
    for r in range(n_recv):
        k = draw(st.integers(0, n_servers - 1))
        add_op(g, f"r{r}", "recv", f"net:ps{k}", draw(dur))
        for c in draw(st.sets(st.integers(0, n_ops - 1), min_size=1, max_size=2)):
            g.add_edge(f"r{r}", f"c{c}")
    for s, c in enumerate(draw(st.sets(st.integers(0, n_ops - 1), max_size=3))):
        k = draw(st.integers(0, n_servers - 1))
        add_op(g, f"s{s}", "send", f"net:ps{k}:up" if duplex else f"net:ps{k}", draw(dur))
        g.add_edge(f"c{c}", f"s{s}")
    return g


def _loads(mw, durations: np.ndarray) -> tuple[float, np.ndarray, float]:
    """(total time on shared channels, compute time per worker, busiest channel load)."""
    shared = set(mw.shared)
    names = mw.cg.resource_names
    on_shared = np.array([names[r] in shared for r in mw.cg.resource])
    per_res = np.bincount(mw.cg.resource, weights=durations, minlength=len(names))
    busiest = max((per_res[i] for i, n in enumerate(names) if n in shared), default=0.0)
    comp = np.where(on_shared, 0.0, durations).reshape(mw.n_workers, -1).sum(axis=1)
    return float(durations[on_shared].sum()), comp, float(busiest)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(g=worker_graphs(), n=st.integers(1, 4), seed=st.integers(0, 10**6),
       jitter=st.sampled_from([0.0, 0.3]), baseline=st.booleans())
def test_iteration_time_between_bounds(g, n, seed, jitter, baseline):
    mw = compose(g, n)
    order = None if baseline else {r: i for i, r in enumerate(mw.recvs)}
    r = run(mw, order, n_iterations=2, jitter=jitter, seed=seed, validate_every=1)
    assert r.validated == 2
    rng = np.random.default_rng([seed, 0])  # the jitter stream of run()
    for t in range(2):
        d = mw.base_duration * (rng.uniform(1 - jitter, 1 + jitter, mw.cg.n) if jitter else 1)
        net, comp, busiest = _loads(mw, d)
        tt = r.iteration_time[t]
        eps = 1e-9 * max(1.0, tt)
        # Lower bounds: the busiest shared channel and every worker's own compute.
        assert tt >= busiest - eps and tt >= comp.max() - eps
        # Work-conserving upper bound: while a worker is unfinished, its cpu or some
        # shared channel is busy, so T <= max compute + all channel time.
        assert tt <= comp.max() + net + eps
        assert 0.0 <= r.straggler[t] < 1.0


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(g=worker_graphs(chain=True), n=st.integers(1, 4))
def test_iteration_not_shorter_than_worker_alone(g, n):
    # Same order for everyone, no jitter, and no scheduling freedom inside a worker
    # (compute is one chain, sends have their own FIFO uplinks): sharing the channels can
    # only delay each of a worker's transfers, so no worker finishes earlier than alone.
    mw = compose(g, n)
    order = {r: i for i, r in enumerate(mw.recvs)}
    alone = simulate(g, priorities=order)
    check_schedule(compile_graph(g, order), alone)
    tie = np.linspace(0, 0.9, n)[:, None] * np.ones((1, mw.n_recvs))
    res = iteration(mw, rank_priorities(mw, order, tie=tie))
    assert res.worker_end.min() >= alone.makespan - 1e-9


def test_timeline_efficiency_by_hand():
    # One worker, seq2 without c1 -> c2 replaced: r1 -> c1 (2 s), r2 -> c2 (0.5 s).
    g = new_graph({"net:ps0": 1, "cpu": 1})
    add_op(g, "r1", "recv", "net:ps0", 1.0)
    add_op(g, "r2", "recv", "net:ps0", 1.0)
    add_op(g, "c1", "compute", "cpu", 2.0)
    add_op(g, "c2", "compute", "cpu", 0.5)
    g.add_edges_from([("r1", "c1"), ("r2", "c2")])
    mw = compose(g, 1)
    # r1 first: r1[0,1] c1[1,3] r2[1,2] c2[3,3.5]; comm busy [0,2] = 2, compute 2.5,
    # U = 4.5, L = 2.5, m = 3.5 -> E = (4.5 - 3.5) / 2 = 0.5.
    good = iteration(mw, np.array([[0.0, 1.0]]))
    e, comp, comm = timeline_efficiency(mw, mw.base_duration, np.asarray(good.schedule.end))
    assert (e[0], comp[0], comm[0]) == (0.5, 2.5, 2.0)
    # r2 first: r2[0,1] c2[1,1.5] r1[1,2] c1[2,4]; m = 4 -> E = 0.5 / 2 = 0.25.
    bad = iteration(mw, np.array([[1.0, 0.0]]))
    assert timeline_efficiency(mw, mw.base_duration, np.asarray(bad.schedule.end))[0][0] == 0.25


def test_timeline_efficiency_counts_queueing_behind_other_workers():
    # seq2 with two workers, worker 1's recvs after worker 0's (ranks 0 < 0.25 < 1 < 1.25):
    # channel w0/r1[0,1] w1/r1[1,2] w0/r2[2,3] w1/r2[3,4]; worker 1's comm is outstanding
    # over [0,4] (it waits behind worker 0), its compute c1[2,4] c2[4,5]: U = 4 + 3,
    # L = 4, m = 5 -> E = 2/3. Worker 0: comm [0,3], compute c1[1,3] c2[3,4]: U = 6,
    # L = 3, m = 4 -> E = 2/3 as well.
    mw = compose(seq2(), 2)
    res = iteration(mw, np.array([[0.0, 1.0], [0.25, 1.25]]))
    e, comp, comm = timeline_efficiency(mw, mw.base_duration, np.asarray(res.schedule.end))
    assert comm.tolist() == [3.0, 4.0] and comp.tolist() == [3.0, 3.0]
    assert e.tolist() == pytest.approx([2 / 3, 2 / 3])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(g=worker_graphs(), n=st.integers(1, 4), seed=st.integers(0, 10**6),
       baseline=st.booleans(), noise=st.sampled_from([0.0, 0.3]))
def test_timeline_bounds_hold(g, n, seed, baseline, noise):
    # L <= m <= U for every worker (module docstring), so E needs no clipping.
    mw = compose(g, n)
    order = None if baseline else {r: i for i, r in enumerate(mw.recvs)}
    r = run(mw, order, n_iterations=2, jitter=0.2, seed=seed, worker_noise=noise)
    m = r.worker_end
    upper = r.compute_busy + r.comm_busy
    lower = np.maximum(r.compute_busy, r.comm_busy)
    eps = 1e-9 * np.maximum(1.0, upper)
    assert np.all(m <= upper + eps) and np.all(m >= lower - eps)
    assert np.all((r.efficiency >= 0) & (r.efficiency <= 1))
    assert np.all(r.best_time <= r.iteration_time + 1e-9)
    assert np.all(r.iteration_time <= r.worst_time + 1e-9)


def test_worker_noise_breaks_lockstep_and_is_common():
    mw = compose(seq2(), 4)
    order = {"r1": 0, "r2": 1}
    still = run(mw, order, 20, jitter=0.0, seed=1)
    noisy = run(mw, order, 20, jitter=0.0, seed=1, worker_noise=0.2)
    # Same order, no jitter: only the channel's interleaving separates the workers.
    assert noisy.straggler.mean() > still.straggler.mean()
    again = run(mw, None, 20, jitter=0.0, seed=1, worker_noise=0.2)
    assert np.array_equal(noisy.compute_busy, again.compute_busy)  # common random numbers
    f = worker_noise_factors(0.2, 4, np.random.default_rng(0))
    assert f.shape == (4,) and len(set(f.tolist())) == 4
    assert np.all(worker_noise_factors(0.0, 3, np.random.default_rng(0)) == 1.0)
    with pytest.raises(CommschedError, match="worker_noise"):
        run(mw, order, 1, worker_noise=-0.1)


def test_list_scheduling_anomaly_worker_faster_when_shared():
    # Without the chain condition the property above fails (Graham's list-scheduling
    # anomalies): a delayed recv can change the compute order for the better.
    # Worker: rX (ps0, 1 s) -> cX (1 s); rY (ps1, 1 s) -> cY (0.5 s) -> sY (uplink, 1 s).
    # Alone: rX [0,1] rY [0,1]; at 1 both computes are ready, fifo takes cX [1,2] (its
    # recv ended first in graph order), cY [2,2.5], sY [2.5,3.5] -> 3.5.
    g = new_graph({"net:ps0": 1, "net:ps1": 1, "net:ps1:up": 1, "cpu": 1})
    add_op(g, "rX", "recv", "net:ps0", 1.0)
    add_op(g, "cX", "compute", "cpu", 1.0)
    add_op(g, "rY", "recv", "net:ps1", 1.0)
    add_op(g, "cY", "compute", "cpu", 0.5)
    add_op(g, "sY", "send", "net:ps1:up", 1.0)
    g.add_edges_from([("rX", "cX"), ("rY", "cY"), ("cY", "sY")])
    assert simulate(g).makespan == 3.5
    # Two workers; worker 1 is served first on ps0, worker 0 first on ps1:
    # ps0: w1.rX [0,1] w0.rX [1,2]; ps1: w0.rY [0,1] w1.rY [1,2].
    # w0: cY [1,1.5] sY [1.5,2.5] cX [2,3] -> 3.0, earlier than alone.
    # w1: cX [1,2] cY [2,2.5] sY [2.5,3.5] -> 3.5.
    mw = compose(g, 2)
    res = iteration(mw, np.array([[0.25, 0.0], [0.0, 0.25]]))
    assert res.worker_end.tolist() == [3.0, 3.5]


@settings(max_examples=40, deadline=None)
@given(g=worker_graphs())
def test_one_worker_equals_single_worker_simulation(g):
    mw = compose(g, 1)
    order = {r: (i * 7) % 5 for i, r in enumerate(mw.recvs)}
    s = simulate(g, priorities=order)
    r = run(mw, order, n_iterations=1)
    assert r.iteration_time[0] == pytest.approx(s.makespan)
    assert r.straggler[0] == 0.0


def test_seeded_determinism_and_common_jitter():
    g = seq2()
    mw = compose(g, 4)
    a = run(mw, None, 5, jitter=0.2, seed=3)
    b = run(mw, None, 5, jitter=0.2, seed=3)
    c = run(mw, None, 5, jitter=0.2, seed=4)
    assert np.array_equal(a.worker_end, b.worker_end) and np.array_equal(a.ranks, b.ranks)
    assert not np.array_equal(a.worker_end, c.worker_end)
    # Every baseline iteration draws a permutation per worker.
    assert all(sorted(row) == [0, 1] for row in a.ranks.reshape(-1, 2).tolist())
    # Ordered runs with the same seed see the same jitter as the baseline: with one
    # recv there is no order to choose, so both runs coincide.
    one = new_graph({"net:ps0": 1, "cpu": 1})
    add_op(one, "r", "recv", "net:ps0", 1.0)
    add_op(one, "c", "compute", "cpu", 1.0)
    one.add_edge("r", "c")
    m1 = compose(one, 3)
    assert np.array_equal(run(m1, None, 4, 0.3, seed=9).worker_end,
                          run(m1, {"r": 0}, 4, 0.3, seed=9).worker_end)


def test_compute_scale_scales_compute_only():
    # One worker: r (1 s) -> c1 (2 s) -> c2 (1 s) <- r2 (1 s), order r1, r2.
    # Scale 2: c1 4 s, c2 2 s: r1 [0,1] c1 [1,5] c2 [5,7] -> 7 (recvs unchanged).
    mw = compose(seq2(), 1)
    r = run(mw, {"r1": 0, "r2": 1}, 1, compute_scale=2.0)
    assert r.iteration_time[0] == 7.0


def test_bad_input_one_line_errors():
    with pytest.raises(CommschedError, match="n_workers"):
        compose(seq2(), 0)
    g = new_graph({"cpu": 1})
    add_op(g, "c", "compute", "cpu", 1.0)
    with pytest.raises(CommschedError, match="no recv"):
        compose(g, 2)
    with pytest.raises(CommschedError, match="not in the worker graph"):
        compose(seq2(), 2, shared=["nic"])
    mw = compose(seq2(), 2)
    with pytest.raises(CommschedError, match="shape"):
        iteration(mw, np.zeros((1, 2)))
    for kw in ({"jitter": 1.0}, {"n_iterations": 0}, {"compute_scale": 0.0},
               {"validate_every": -1}):
        args = {"n_iterations": 1, **kw}
        with pytest.raises(CommschedError):
            run(mw, None, **args)


# --------------------------------------------------------------------------------------
# coarsen: segments of compute ops that keep the communication structure.


def _net_deps(g: nx.DiGraph) -> dict[str, frozenset[str]]:
    """For every send: the recvs it depends on (transitively)."""
    return {n: frozenset(a for a in nx.ancestors(g, n) if g.nodes[a]["kind"] == "recv")
            for n, d in g.nodes(data=True) if d["kind"] == "send"}


def test_coarsen_hand_example():
    # r0 -> a -> b -> c ; r1 -> c ; b -> s (send). dep(a) = dep(b) = {r0}, dep(c) = {r0, r1}.
    # Group {r0}: a, b in reference order; b feeds a send, so the segment closes after b:
    # seg0 = a+b (3 s). Group {r0, r1}: seg1 = c (4 s). Edges r0->seg0, seg0->seg1,
    # r1->seg1, seg0->s.
    g = new_graph({"net:ps0": 1, "net:ps0:up": 1, "cpu": 1})
    add_op(g, "r0", "recv", "net:ps0", 1.0)
    add_op(g, "r1", "recv", "net:ps0", 1.0)
    add_op(g, "a", "compute", "cpu", 1.0)
    add_op(g, "b", "compute", "cpu", 2.0)
    add_op(g, "c", "compute", "cpu", 4.0)
    add_op(g, "s", "send", "net:ps0:up", 1.0)
    g.add_edges_from([("r0", "a"), ("a", "b"), ("b", "c"), ("r1", "c"), ("b", "s")])
    c = coarsen(g)
    assert sorted(c.nodes) == ["r0", "r1", "s", "seg0", "seg1"]
    assert c.nodes["seg0"]["duration"] == 3.0 and c.nodes["seg0"]["members"] == 2
    assert c.nodes["seg1"]["duration"] == 4.0 and c.nodes["seg1"]["first"] == "c"
    assert sorted(c.edges) == [("r0", "seg0"), ("r1", "seg1"), ("seg0", "s"), ("seg0", "seg1")]
    assert c.graph["coarsened"] == {"ops": 3, "segments": 2}


def test_coarsen_cuts_after_every_send_producer():
    # One group (all ops need r): x -> y -> z, x and z feed sends: segments [x], [y, z].
    g = new_graph({"net:ps0": 1, "net:ps0:up": 1, "cpu": 1})
    add_op(g, "r", "recv", "net:ps0", 1.0)
    for op in "xyz":
        add_op(g, op, "compute", "cpu", 1.0)
    add_op(g, "sx", "send", "net:ps0:up", 1.0)
    add_op(g, "sz", "send", "net:ps0:up", 1.0)
    g.add_edges_from([("r", "x"), ("x", "y"), ("y", "z"), ("x", "sx"), ("z", "sz")])
    c = coarsen(g)
    assert sorted((c.nodes[n]["first"], c.nodes[n]["members"]) for n in c
                  if n.startswith("seg")) == [("x", 1), ("y", 2)]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(g=worker_graphs())
def test_coarsen_keeps_transfers_compute_and_dependencies(g):
    c = coarsen(g)
    validate(c)
    net = {n for n, a in g.nodes(data=True) if a["kind"] in ("recv", "send")}
    assert net <= set(c.nodes)
    assert all(c.nodes[n] == g.nodes[n] for n in net)
    comp = [a["duration"] for n, a in g.nodes(data=True) if n not in net]
    coarse = [a["duration"] for n, a in c.nodes(data=True) if n not in net]
    assert sum(coarse) == pytest.approx(sum(comp))
    assert len(coarse) <= len(comp)
    assert _net_deps(c) == _net_deps(g)
    # Every recv still precedes the same compute work: the recvs a coarse op depends on
    # are those of its members (checked through the sends above and the sim below).
    order = {r: i for i, r in enumerate(n for n in g if g.nodes[n]["kind"] == "recv")}
    s = simulate(c, priorities=order)
    check_schedule(compile_graph(c, order), s)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(g=worker_graphs(chain=True), n=st.integers(1, 3), seed=st.integers(0, 1000))
def test_coarsen_is_exact_for_compute_chains(g, n, seed):
    # A compute chain leaves the executor no choice, so merged segments run exactly when
    # their members would: the same iteration times under any orders, no jitter.
    fine, coarse = compose(g, n), compose(coarsen(g), n)
    assert fine.recvs == coarse.recvs
    a = run(fine, None, 3, seed=seed)
    b = run(coarse, None, 3, seed=seed)
    assert np.allclose(a.worker_end, b.worker_end)


def test_random_interleave_baseline():
    # Every (worker, recv) request gets its own random priority: a worker's own order is
    # still a permutation, runs are seeded, and every schedule passes check_schedule.
    mw = compose(seq2(), 3)
    a = run(mw, None, 6, jitter=0.1, seed=5, interleave="random")
    b = run(mw, None, 6, jitter=0.1, seed=5, interleave="random")
    assert a.validated == 6
    assert np.array_equal(a.worker_end, b.worker_end)
    assert all(sorted(row) == [0, 1] for row in a.ranks.reshape(-1, 2).tolist())
    # With a fixed order the interleave setting does not matter.
    fixed = {"r1": 0, "r2": 1}
    assert np.array_equal(run(mw, fixed, 3, 0.1, seed=2, interleave="random").worker_end,
                          run(mw, fixed, 3, 0.1, seed=2).worker_end)
    with pytest.raises(CommschedError, match="interleave"):
        run(mw, None, 1, interleave="fifo")  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------
# The decomposed simulation (method="auto") equals the reference event loop.


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(g=worker_graphs(positive=True, duplex=True), n=st.integers(1, 4),
       seed=st.integers(0, 10**6), jitter=st.sampled_from([0.0, 0.3]),
       baseline=st.booleans())
def test_decomposed_equals_reference(g, n, seed, jitter, baseline):
    # Unit-like durations make many ties, so the fifo tie-breaking is exercised too.
    mw = compose(g, n)
    assert mw.plan is not None
    order = None if baseline else {r: (i * 3) % 4 for i, r in enumerate(mw.recvs)}
    fast = run(mw, order, 3, jitter=jitter, seed=seed, validate_every=1)
    ref = run(mw, order, 3, jitter=jitter, seed=seed, validate_every=1, method="reference")
    assert np.array_equal(fast.worker_end, ref.worker_end)
    tie = np.random.default_rng(seed).random((n, mw.n_recvs))
    p = rank_priorities(mw, order or {}, tie=tie)
    a = iteration(mw, p)
    b = iteration(mw, p, method="reference")
    assert a.schedule.start == b.schedule.start and a.schedule.end == b.schedule.end


def test_decomposition_applies_only_where_exact():
    assert compose(seq2(), 2).plan is not None
    assert compose(train_graph(duplex=True), 2).plan is not None
    # Sends sharing the recvs' channel interact with the compute: reference only.
    assert compose(train_graph(duplex=False), 2).plan is None
    # Zero-time ops take the reference path even with a plan (and agree with it).
    g = seq2()
    g.nodes["c2"]["duration"] = 0.0
    mw = compose(g, 2)
    p = np.array([[0.0, 1.0], [0.25, 1.25]])
    assert iteration(mw, p).schedule.end == iteration(mw, p, method="reference").schedule.end
    with pytest.raises(CommschedError, match="method"):
        iteration(mw, p, method="fast")  # type: ignore[arg-type]


def test_contention_slows_compute_while_a_transfer_is_on_the_channel():
    # r (1 s on the channel) and c (2 s of compute) run side by side from 0. With
    # contention 1 the fixed point of d = 2 (1 + 1 / d) is 1 + sqrt(3): c overlaps the
    # transfer for 1 s of its d
    g = new_graph({"ps0": 1, "cpu": 1})
    add_op(g, "r", "recv", "ps0", 1.0)
    add_op(g, "c", "compute", "cpu", 2.0)
    mw = compose(g, 1)
    prio = np.zeros((1, 1))
    assert iteration(mw, prio).iteration_time == 2.0
    res = iteration(mw, prio, contention=1.0)
    assert CONTENTION_PASSES >= 3
    assert res.iteration_time == pytest.approx(1 + np.sqrt(3), rel=0.01)
    assert res.durations is not None and res.durations[0] == 1.0  # transfers unchanged
    assert channel_overlap(mw, res.schedule).tolist() == pytest.approx(
        [1.0, 1.0 / res.durations[1]])
    # with two workers each one's c shares the channel's busy time with both transfers
    two = run(compose(g, 2), {"r": 0}, 2, contention=1.0)
    assert (two.iteration_time > 2.0).all()
    with pytest.raises(CommschedError, match="contention"):
        iteration(mw, prio, contention=-1.0)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 20), st.integers(0, 6)), max_size=8),
       st.lists(st.tuples(st.integers(0, 24), st.integers(0, 6)), min_size=1, max_size=6))
def test_union_busy_counts_each_instant_once(flights, ops):
    """Per op, the busy time equals a count over unit steps of the instants some flight
    covers (integer endpoints, so the count is exact), however the flights overlap."""
    fs = np.array([a for a, _ in flights], dtype=float)
    fe = np.array([a + d for a, d in flights], dtype=float)
    os_ = np.array([a for a, _ in ops], dtype=float)
    oe = np.array([a + d for a, d in ops], dtype=float)
    want = [sum(any(a <= t < b for a, b in zip(fs, fe, strict=True))
                for t in range(int(s), int(e))) for s, e in zip(os_, oe, strict=True)]
    assert union_busy(fs, fe, os_, oe).tolist() == want
