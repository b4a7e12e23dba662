"""Parameter-server view (TicTac Sec. 2.3-2.4) on hand-built and random traced graphs."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from views_graphs import edge, meta, mlp_trace, op, random_trace

from commsched.cost import LinkModel
from commsched.errors import CommschedError
from commsched.model import graph
from commsched.model.graph import compile_graph, new_graph
from commsched.sim import check_schedule, simulate
from commsched.views import ps_view, recv_params, shard_parameters
from commsched.views.common import optimizer_ops

LINK = LinkModel(latency_s=0.0, bandwidth_Bps=100.0)  # 100 B/s: 400 B take 4 s


def makespan(g, priorities=None) -> float:
    s = simulate(g, priorities=priorities)
    check_schedule(compile_graph(g, priorities), s)
    return s.makespan


def test_optimizer_ops_of_mlp():
    # apply_* update; rd_lr feeds only updates; done waits only for updates.
    assert optimizer_ops(mlp_trace()) == {"apply_w1", "apply_b1", "apply_w2", "rd_lr", "done"}


def test_mlp_one_server_structure():
    v = ps_view(mlp_trace(), link=LINK)
    kinds = {k: sorted(n for n, a in v.nodes(data=True) if a["kind"] == k)
             for k in ("compute", "recv", "send")}
    # 11 compute ops (3 reads, 4 forward, 4 backward), 3 recvs, 3 sends; no learning_rate
    # recv (only the optimizer reads it), no optimizer op.
    assert len(kinds["compute"]) == 11
    assert kinds["recv"] == ["recv:b1", "recv:w1", "recv:w2"]
    assert kinds["send"] == ["send:b1", "send:w1", "send:w2"]
    assert v.number_of_nodes() == 17
    assert recv_params(v) == {"recv:w1": "w1", "recv:b1": "b1", "recv:w2": "w2"}
    assert v.graph["sends"] == {"send:w2": "w2", "send:b1": "b1", "send:w1": "w1"}
    assert v.graph["resources"] == {"cpu": 1, "net:ps0": 1, "net:ps0:up": 1}
    # bytes, durations (bytes / 100 B/s), resources
    for var, nbytes in (("w1", 400), ("b1", 40), ("w2", 80)):
        r, s = v.nodes[f"recv:{var}"], v.nodes[f"send:{var}"]
        assert (r["bytes"], r["param"], r["resource"]) == (nbytes, var, "net:ps0")
        assert (s["bytes"], s["param"], s["resource"]) == (nbytes, var, "net:ps0:up")
        assert r["duration"] == pytest.approx(nbytes / 100)
        assert s["duration"] == pytest.approx(nbytes / 100)
    # each recv precedes exactly the readers of its variable; each send follows exactly
    # the producer of its gradient
    assert {u: sorted(v.successors(u)) for u in kinds["recv"]} == {
        "recv:w1": ["rd_w1"], "recv:b1": ["rd_b1"], "recv:w2": ["rd_w2"]}
    assert {u: sorted(v.predecessors(u)) for u in kinds["send"]} == {
        "send:w1": ["g_w1"], "send:b1": ["g_b1"], "send:w2": ["g_mm2"]}
    # the 12 trace edges among non-optimizer ops are kept (mlp_trace has 21 edges: 12
    # forward/backward, 3 grad -> apply, 3 rd_lr -> apply, 3 apply -> done)
    compute_edges = [(a, b) for a, b in v.edges if v.nodes[a]["kind"] == "compute"
                     and v.nodes[b]["kind"] == "compute"]
    assert len(compute_edges) == 12
    assert v.number_of_edges() == 12 + 3 + 3
    assert all(v.nodes[n]["resource"] == "cpu" for n in kinds["compute"])
    assert v.nodes["mm1"]["duration"] == 2.0 and v.nodes["mm1"]["op_type"] == "Op"


def test_mlp_one_server_makespan_by_hand():
    # net:ps0: recv w1 [0,4], b1 [4,4.4], w2 [4.4,5.2] (FIFO = variable order).
    # cpu: mm1 [4,6]; rd_b1, rd_w2 at 6 (0 s); add1 [6,7]; mm2 [7,9]; loss [9,10];
    #      g_mm2 [10,11]; g_h [11,12]; g_b1 [12,13]; g_w1 [13,14].
    # net:ps0:up: send w2 [11,11.8], b1 [13,13.4], w1 [14,18]. Makespan 18.
    v = ps_view(mlp_trace(), link=LINK)
    s = simulate(v)
    check_schedule(compile_graph(v), s)
    assert s.makespan == pytest.approx(18.0)
    assert s.ops["recv:w2"] == pytest.approx((4.4, 5.2))
    assert s.ops["send:w1"] == pytest.approx((14.0, 18.0))
    # Reversing the recv order (TicTac's point): w2 [0,0.8], b1 [0.8,1.2], w1 [1.2,5.2];
    # mm1 [5.2,7.2] ... everything 1.2 s later: send w1 ends at 19.2.
    assert makespan(v, {"recv:w2": 0, "recv:b1": 1, "recv:w1": 2}) == pytest.approx(19.2)


def test_mlp_simplex_shares_the_channel():
    v = ps_view(mlp_trace(), link=LINK, duplex=False)
    assert v.graph["resources"] == {"cpu": 1, "net:ps0": 1}
    assert {v.nodes[f"send:{x}"]["resource"] for x in ("w1", "b1", "w2")} == {"net:ps0"}
    # recvs are done at 5.2, before the first send at 11: same makespan as duplex.
    assert makespan(v) == pytest.approx(18.0)


def test_simplex_channel_delays_a_send():
    # A gradient ready while a recv still runs: a (1 s) reads x; its gradient ga (grad of
    # x, 0 s) follows a; b reads y (1000 B = 10 s). Duplex: recv x [0,1], recv y [1,11],
    # a [1,2], ga [2,2], send x on the uplink [2,3]; b [11,12]: makespan 12.
    # Simplex: send x waits for recv y to free the channel: [11,12]; makespan 12, but the
    # send ends at 12 instead of 3.
    t = new_graph({"cpu": 1}, variables={"x": {"bytes": 100}, "y": {"bytes": 1000}},
                  meta=meta("two"))
    op(t, "a", 1.0, reads=["x"])
    op(t, "ga", 0.0, grad_of=["x"], is_gradient=True)
    op(t, "b", 1.0, reads=["y"])
    edge(t, "a", "ga")
    for duplex, send_end in ((True, 3.0), (False, 12.0)):
        v = ps_view(t, link=LINK, duplex=duplex)
        s = simulate(v)
        check_schedule(compile_graph(v), s)
        assert s.ops["send:x"][1] == pytest.approx(send_end)
        assert s.makespan == pytest.approx(12.0)


def test_two_servers_sharding_by_hand():
    t = mlp_trace()
    rr = ps_view(t, n_servers=2, sharding="round_robin", link=LINK)
    # variable order w1, b1, w2 (learning_rate is not a parameter of the worker)
    assert rr.graph["shards"] == {"w1": 0, "b1": 1, "w2": 0}
    assert rr.nodes["recv:b1"]["resource"] == "net:ps1"
    assert rr.nodes["send:b1"]["resource"] == "net:ps1:up"
    size = ps_view(t, n_servers=2, sharding="size", link=LINK)
    # LPT: w1 (400) -> 0; w2 (80) -> 1; b1 (40) -> 1 (load 80 < 400)
    assert size.graph["shards"] == {"w1": 0, "w2": 1, "b1": 1}
    # TensorFlow's greedy strategy, creation order: w1 -> 0; b1 -> 1; w2 -> 1 (40 < 400).
    greedy = ps_view(t, n_servers=2, sharding="greedy", link=LINK)
    assert greedy.graph["shards"] == {"w1": 0, "b1": 1, "w2": 1}
    assert set(size.graph["resources"]) == {"cpu", "net:ps0", "net:ps0:up", "net:ps1",
                                            "net:ps1:up"}
    # Compute-bound here: both still end at 18 (w1's recv [0,4] and send [14,18] decide).
    assert makespan(rr) == pytest.approx(18.0)
    assert makespan(size) == pytest.approx(18.0)


def test_more_servers_overlap_recvs():
    # Two readers of 100 B each (1 s at 100 B/s), 0.1 s compute each.
    # One server: recvs [0,1], [1,2]; a [1,1.1], b [2,2.1] -> 2.1.
    # Two servers: recvs both [0,1]; a [1,1.1], b [1.1,1.2] -> 1.2.
    t = new_graph({"cpu": 1}, variables={"x": {"bytes": 100}, "y": {"bytes": 100}},
                  meta=meta("two"))
    op(t, "a", 0.1, reads=["x"])
    op(t, "b", 0.1, reads=["y"])
    assert makespan(ps_view(t, 1, link=LINK)) == pytest.approx(2.1)
    assert makespan(ps_view(t, 2, link=LINK)) == pytest.approx(1.2)
    # an inference trace has no sends
    assert ps_view(t, 2, link=LINK).graph["sends"] == {}


def test_latency_and_uplink_models():
    t = mlp_trace()
    v = ps_view(t, link=LinkModel(0.5, 100.0), uplink=LinkModel(0.0, 50.0))
    assert v.nodes["recv:w1"]["duration"] == pytest.approx(4.5)
    assert v.nodes["send:w1"]["duration"] == pytest.approx(8.0)


def test_saved_view_keeps_the_mapping(tmp_path):
    v = ps_view(mlp_trace(), n_servers=2, link=LINK)
    graph.save(v, tmp_path / "v.json")
    w = graph.load(tmp_path / "v.json")
    assert recv_params(w) == recv_params(v)
    assert w.graph["shards"] == v.graph["shards"]
    assert makespan(w) == pytest.approx(makespan(v))


def test_errors_name_the_problem():
    t = mlp_trace()
    t.nodes["mm1"]["reads"] = ["nope"]
    with pytest.raises(CommschedError, match=r"'mm1'.*unknown variable 'nope'"):
        ps_view(t)
    t = mlp_trace()
    del t.graph["variables"]
    with pytest.raises(CommschedError, match="variables"):
        ps_view(t)
    with pytest.raises(CommschedError, match="n_servers"):
        ps_view(mlp_trace(), n_servers=0)
    with pytest.raises(CommschedError, match="sharding"):
        ps_view(mlp_trace(), sharding="hash")  # type: ignore[arg-type]
    with pytest.raises(CommschedError, match="not a parameter-server view"):
        recv_params(mlp_trace())


params_st = st.dictionaries(st.text("abcdef", min_size=1, max_size=4),
                            st.integers(0, 10**9), min_size=1, max_size=40)


@given(params=params_st, n=st.integers(1, 8),
       method=st.sampled_from(["round_robin", "greedy", "size"]))
def test_sharding_invariants(params, n, method):
    shards = shard_parameters(params, n, method)
    assert set(shards) == set(params)  # every parameter on exactly one server
    assert all(0 <= k < n for k in shards.values())
    loads = [sum(b for v, b in params.items() if shards[v] == k) for k in range(n)]
    counts = [sum(1 for k2 in shards.values() if k2 == k) for k in range(n)]
    if method == "round_robin":
        assert max(counts) - min(counts) <= 1
    else:  # list scheduling onto the least loaded: loads differ by at most the largest one
        assert max(loads) - min(loads) <= max(params.values())
    assert shard_parameters(params, n, method) == shards  # deterministic


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10**6), n_ops=st.integers(1, 25), n_vars=st.integers(1, 8),
       p=st.floats(0.0, 0.4), servers=st.integers(1, 4), duplex=st.booleans(),
       method=st.sampled_from(["round_robin", "greedy", "size"]))
def test_random_traces(seed, n_ops, n_vars, p, servers, duplex, method):
    t = random_trace(seed, n_ops, n_vars, p)
    v = ps_view(t, servers, method, link=LINK, duplex=duplex)
    graph.validate(v)
    recvs = recv_params(v)
    for rid, var in recvs.items():
        readers = sorted(o for o, a in t.nodes(data=True) if var in a.get("reads", []))
        assert sorted(v.successors(rid)) == readers
        assert v.in_degree(rid) == 0
        assert v.nodes[rid]["resource"] == f"net:ps{v.graph['shards'][var]}"
    for sid, var in v.graph["sends"].items():
        producers = sorted(o for o, a in t.nodes(data=True) if var in a.get("grad_of", []))
        assert sorted(v.predecessors(sid)) == producers and v.out_degree(sid) == 0
    # no updates in random traces: every trace op and edge is kept
    assert set(t.nodes) <= set(v.nodes)
    assert set(t.edges) <= set(v.edges)
    s = simulate(v)
    check_schedule(compile_graph(v), s)
    # the makespan is at least the compute work and at least each channel's load
    assert s.makespan >= sum(a["duration"] for _, a in t.nodes(data=True)) - 1e-9
    for k in range(servers):
        load = sum(a["duration"] for _, a in v.nodes(data=True) if a["resource"] == f"net:ps{k}")
        assert s.makespan >= load - 1e-9
