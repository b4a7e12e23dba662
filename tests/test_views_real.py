"""Both views on a small real traced model: the thesis CNN (data/traces, committed).

The CNN (Laich's thesis analog, :func:`commsched.trace.zoo.thesis_cnn`): conv 5x5x1x32,
conv 5x5x32x64, dense 3136x1024 (with dropout), dense 1024x10, all with biases, float32,
trained by plain SGD. Expected sizes are 4 bytes times the shapes.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from commsched.cost import LinkModel, RingAllReduce
from commsched.model.graph import compile_graph
from commsched.model.traced import load_trace
from commsched.sim import check_schedule, simulate
from commsched.views import allreduce_view, ps_view, recv_params
from commsched.views.allreduce import NEXT_PREFIX
from commsched.views.common import optimizer_ops

TRACE = Path(__file__).parent.parent / "data" / "traces" / "thesis_cnn-train-b8.json.gz"
PARAMS = {
    "conv1/kernel": 5 * 5 * 1 * 32 * 4, "conv1/bias": 32 * 4,
    "conv2/kernel": 5 * 5 * 32 * 64 * 4, "conv2/bias": 64 * 4,
    "fc1/kernel": 3136 * 1024 * 4, "fc1/bias": 1024 * 4,
    "out/kernel": 1024 * 10 * 4, "out/bias": 10 * 4,
}
LINK = LinkModel(latency_s=0.0, bandwidth_Bps=1.25e9)  # 10 Gb/s


@pytest.fixture(scope="module")
def trace():
    return load_trace(TRACE)


def test_optimizer_is_left_out(trace):
    dropped = optimizer_ops(trace)
    applies = {n for n, a in trace.nodes(data=True)
               if a["op_type"] == "ResourceApplyGradientDescent"}
    assert len(applies) == 8 and applies <= dropped
    # no forward or backward op is dropped: everything dropped is an update, or feeds or
    # waits for updates only
    assert not any(trace.nodes[n].get("grad_of") for n in dropped)
    assert not any(trace.nodes[n]["is_gradient"] for n in dropped)


def test_ps_view_of_the_cnn(trace):
    v = ps_view(trace, n_servers=2, sharding="size", link=LINK)
    recvs = recv_params(v)
    sends = v.graph["sends"]
    # every trainable parameter is pulled and pushed with its exact size
    assert {var: v.nodes[s]["bytes"] for s, var in sends.items()} == PARAMS
    pulled = {var: v.nodes[r]["bytes"] for r, var in recvs.items()}
    assert {k: pulled[k] for k in PARAMS} == PARAMS
    # the only other pull: the dropout's seed-generator state, which the forward reads
    assert set(pulled) - set(PARAMS) == {"seed_generator/seed_generator_state"}
    # size sharding: fc1/kernel (12.8 MB) alone on one server, the rest on the other
    shards = v.graph["shards"]
    assert {k for k, s in shards.items() if s == shards["fc1/kernel"]} == {"fc1/kernel"}
    for rid, var in recvs.items():
        readers = {n for n, a in trace.nodes(data=True) if var in a.get("reads", [])}
        assert set(v.successors(rid)) == readers - optimizer_ops(trace)
        assert v.nodes[rid]["duration"] == pytest.approx(pulled[var] / 1.25e9)
    s = simulate(v)
    check_schedule(compile_graph(v), s)
    compute = sum(a["duration"] for _, a in v.nodes(data=True) if a["kind"] == "compute")
    # fc1/kernel's pull (10.3 ms at 10 Gb/s) and push both lie on the critical path
    assert s.makespan >= compute
    assert s.makespan >= 2 * PARAMS["fc1/kernel"] / 1.25e9


def test_allreduce_view_of_the_cnn(trace):
    v = allreduce_view(trace, RingAllReduce(2, LINK))
    ars = v.graph["allreduces"]
    assert sorted(var for names in ars.values() for var in names) == sorted(PARAMS)
    for aid, names in ars.items():
        assert v.nodes[aid]["bytes"] == sum(PARAMS[x] for x in names)
        # ring of 2: 2(n-1)/n = 1 -> bytes / bandwidth
        assert v.nodes[aid]["duration"] == pytest.approx(v.nodes[aid]["bytes"] / 1.25e9)
        for succ in v.successors(aid):
            assert succ.startswith(NEXT_PREFIX)
            assert set(names) & set(v.nodes[succ].get("reads", []))
    # every forward op is copied once into the next iteration
    forward = [n for n, a in trace.nodes(data=True)
               if not a["is_gradient"] and n not in optimizer_ops(trace)]
    assert sorted(n for n in v if n.startswith(NEXT_PREFIX)) == sorted(
        NEXT_PREFIX + n for n in forward)
    s = simulate(v)
    check_schedule(compile_graph(v), s)
    assert s.makespan >= sum(a["duration"] for _, a in v.nodes(data=True)
                             if a["kind"] == "allreduce")
