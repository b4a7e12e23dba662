"""All-reduce view (PACE Sec. IV-A) on hand-built and random traced graphs."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from views_graphs import bn_trace, mlp_trace, random_trace

from commsched.cost import LinearModel, LinkModel, RingAllReduce
from commsched.errors import CommschedError
from commsched.model import graph
from commsched.model.graph import compile_graph
from commsched.sim import check_schedule, simulate
from commsched.views import allreduce_view
from commsched.views.allreduce import NEXT_PREFIX

# Ring of 2 workers over 100 B/s, no latency: 2(n-1)/n * s / B = s / 100 seconds.
RING2 = RingAllReduce(2, LinkModel(0.0, 100.0))


def run(g):
    s = simulate(g)
    check_schedule(compile_graph(g), s)
    return s


def test_fused_gradients_form_one_allreduce():
    v = allreduce_view(bn_trace(), RING2)
    ars = {n: a for n, a in v.nodes(data=True) if a["kind"] == "allreduce"}
    assert sorted(ars) == ["allreduce:g_bn", "allreduce:g_conv"]
    # g_bn yields gamma's and beta's gradients: one all-reduce of 40 + 40 bytes
    assert ars["allreduce:g_bn"]["bytes"] == 80
    assert ars["allreduce:g_bn"]["params"] == ["gamma", "beta"]
    assert "param" not in ars["allreduce:g_bn"]
    assert ars["allreduce:g_conv"]["param"] == "w"
    assert ars["allreduce:g_bn"]["duration"] == pytest.approx(0.8)
    assert ars["allreduce:g_conv"]["duration"] == pytest.approx(4.0)
    assert all(a["resource"] == "net" for a in ars.values())
    assert v.graph["allreduces"] == {"allreduce:g_bn": ["gamma", "beta"],
                                     "allreduce:g_conv": ["w"]}
    # each all-reduce follows its producer and precedes the next iteration's readers
    assert list(v.predecessors("allreduce:g_bn")) == ["g_bn"]
    assert sorted(v.successors("allreduce:g_bn")) == ["next:rd_beta", "next:rd_gamma"]
    assert sorted(v.successors("allreduce:g_conv")) == ["next:rd_w"]
    # 8 iteration-0 ops + 6 forward copies + 2 all-reduces
    assert v.number_of_nodes() == 16
    nxt = sorted(n for n in v if n.startswith(NEXT_PREFIX))
    assert nxt == ["next:bn", "next:conv", "next:loss", "next:rd_beta", "next:rd_gamma",
                   "next:rd_w"]
    assert all(v.nodes[n]["iteration"] == 1 for n in nxt)
    # edges: 8 trace edges + 5 forward copies + 2 producer->AR + 3 AR->next reader
    assert v.number_of_edges() == 8 + 5 + 2 + 3


def test_bn_makespan_by_hand():
    # cpu: conv [0,2], bn [2,3], loss [3,4], g_bn [4,5], g_conv [5,7].
    # net: AR(g_bn) [5,5.8]; AR(g_conv) [7,11].
    # next: rd_gamma/rd_beta ready 5.8, run at 7 (cpu busy, 0 s); rd_w at 11;
    #       conv [11,13], bn [13,14], loss [14,15]. Makespan 15.
    s = run(allreduce_view(bn_trace(), RING2))
    assert s.makespan == pytest.approx(15.0)
    assert s.ops["allreduce:g_conv"] == pytest.approx((7.0, 11.0))
    assert s.ops["next:conv"] == pytest.approx((11.0, 13.0))
    # Without the next forward the last all-reduce ends the iteration: 11.
    s = run(allreduce_view(bn_trace(), RING2, next_forward=False))
    assert s.makespan == pytest.approx(11.0)


def test_mlp_drops_the_optimizer_and_makespan_by_hand():
    v = allreduce_view(mlp_trace(), RING2)
    assert not {"apply_w1", "apply_b1", "apply_w2", "rd_lr", "done"} & set(v)
    assert v.graph["allreduces"] == {"allreduce:g_mm2": ["w2"], "allreduce:g_b1": ["b1"],
                                     "allreduce:g_w1": ["w1"]}
    # 11 kept ops + 7 forward copies (rd_w1, rd_b1, rd_w2, mm1, add1, mm2, loss) + 3 ARs
    assert v.number_of_nodes() == 21
    # cpu: mm1 [0,2], add1 [2,3], mm2 [3,5], loss [5,6], g_mm2 [6,7], g_h [7,8],
    #      g_b1 [8,9], g_w1 [9,10].   net: AR w2 [7,7.8], AR b1 [9,9.4], AR w1 [10,14].
    # next: rd_w1 at 14, mm1 [14,16], add1 [16,17], mm2 [17,19], loss [19,20] -> 20.
    s = run(v)
    assert s.makespan == pytest.approx(20.0)
    assert s.ops["allreduce:g_w1"] == pytest.approx((10.0, 14.0))
    # A fast network (1e6 B/s): ARs end by 10.0004; the next forward then waits only
    # for the cpu: 10 + 6 = 16.
    fast = RingAllReduce(2, LinkModel(0.0, 1e6))
    assert run(allreduce_view(mlp_trace(), fast)).makespan == pytest.approx(16.0004)


def test_linear_model_durations():
    v = allreduce_view(bn_trace(), LinearModel(a=0.5, b=0.01))
    assert v.nodes["allreduce:g_bn"]["duration"] == pytest.approx(0.5 + 0.8)
    assert v.nodes["allreduce:g_conv"]["duration"] == pytest.approx(0.5 + 4.0)


def test_ring_of_one_worker_costs_nothing():
    # n = 1: no communication; makespan = iteration 0 (7 s) + next forward (4 s).
    one = RingAllReduce(1, LinkModel(1.0, 1.0))
    assert run(allreduce_view(bn_trace(), one)).makespan == pytest.approx(11.0)


def test_inference_trace_is_rejected():
    t = bn_trace()
    for n in ("g_bn", "g_conv"):
        del t.nodes[n]["grad_of"]
    with pytest.raises(CommschedError, match="training trace"):
        allreduce_view(t, RING2)


def test_saved_view_round_trips(tmp_path):
    v = allreduce_view(bn_trace(), RING2)
    graph.save(v, tmp_path / "v.json")
    w = graph.load(tmp_path / "v.json")
    assert w.graph["allreduces"] == v.graph["allreduces"]
    assert run(w).makespan == pytest.approx(15.0)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10**6), n_ops=st.integers(2, 25), n_vars=st.integers(1, 8),
       p=st.floats(0.0, 0.4), next_forward=st.booleans())
def test_random_traces(seed, n_ops, n_vars, p, next_forward):
    t = random_trace(seed, n_ops, n_vars, p)
    v = allreduce_view(t, RING2, next_forward=next_forward)
    sizes = {x: a["bytes"] for x, a in t.graph["variables"].items()}
    producers = {o: a["grad_of"] for o, a in t.nodes(data=True) if a.get("grad_of")}
    ars = v.graph["allreduces"]
    # one all-reduce per producing op, carrying exactly its gradients' bytes
    assert ars == {f"allreduce:{o}": names for o, names in producers.items()}
    for o, names in producers.items():
        a = v.nodes[f"allreduce:{o}"]
        assert a["bytes"] == sum(sizes[x] for x in names)
        assert a["duration"] == pytest.approx(a["bytes"] / 100)
        assert list(v.predecessors(f"allreduce:{o}")) == [o]
        succ = sorted(v.successors(f"allreduce:{o}"))
        if next_forward:
            forward_readers = sorted(
                NEXT_PREFIX + r for r, ra in t.nodes(data=True)
                if not ra["is_gradient"] and set(ra.get("reads", [])) & set(names))
            assert succ == forward_readers
        else:
            assert succ == []
    s = run(v)
    comm = sum(a["duration"] for _, a in v.nodes(data=True) if a["kind"] == "allreduce")
    assert s.makespan >= comm - 1e-9
