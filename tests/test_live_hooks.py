"""The enforcement hooks' graph rewrites on a real TensorFlow graph (no cluster, no root):
which reads get which control inputs, on which device, in which order."""

from __future__ import annotations

import pytest

pytest.importorskip("tensorflow")

from commsched.errors import CommschedError
from commsched.tictac.live.job import build_config

pytestmark = pytest.mark.slow

CLUSTER = {"ps": ["localhost:1"], "worker": ["localhost:2", "localhost:3"]}
LAYERS = ["conv1", "conv2", "fc1", "out"]
PRIOS = {f"{name}/{v}": float(i // 2) for i, name in enumerate(LAYERS) for v in ("kernel", "bias")}
# two groups: conv1+conv2 (0), fc1+out (1)


def _build(enforce: str, prios: dict[str, float] | None = None, mode: str = "infer"):
    group = {"id": "g", "model": "thesis_cnn", "mode": mode, "batch": 2}
    config = {"name": enforce, "enforce": enforce, "priorities": PRIOS if prios is None
              else prios}
    return build_config(group, config, CLUSTER, task=1)


def _ctrl(op) -> set[str]:
    return {c.name for c in op.control_inputs}


def test_reads_live_on_the_ps_and_none_adds_nothing():
    b = _build("none")
    assert sorted(b.reads) == sorted(PRIOS)  # inference reads every parameter once
    for var, ops in b.reads.items():
        assert len(ops) == 1 and ops[0].inputs[0].op.device == "/job:ps/task:0"
        assert b.variables[var]["bytes"] > 0
    assert b.edges == [] and b.var_priorities == PRIOS


def test_sender_chains_ps_reads_in_reverse_priority_order_after_a_worker_start():
    b = _build("sender")
    g = b.graph
    start = g.get_operation_by_name("enforce_sender/start")
    assert start.device == "/job:worker/task:1"
    # one chain, ties (same priority) in creation order, the whole chain reversed because
    # the PS dispatches a pass's responses last-in first-out
    created = list(b.variables)
    chain = sorted(PRIOS, key=lambda v: (PRIOS[v], created.index(v)))[::-1]
    assert _ctrl(b.reads[chain[0]][0]) == {start.name}
    for k in range(1, len(chain)):
        gate = g.get_operation_by_name(f"enforce_sender/gate_{k - 1}")
        assert gate.device == "/job:ps/task:0"
        assert _ctrl(gate) == {b.reads[chain[k - 1]][0].name}
        assert _ctrl(b.reads[chain[k]][0]) == {gate.name}
    assert len(b.edges) == len(PRIOS)


def test_dag_gates_the_next_group_on_worker_side_arrival():
    b = _build("dag")
    g = b.graph
    gate = g.get_operation_by_name("enforce_dag/gate_0")
    assert gate.device == "/job:worker/task:1"
    arrived = [g.get_operation_by_name(c.name) for c in gate.control_inputs]
    assert all(a.type == "Identity" and a.device == "/job:worker/task:1" for a in arrived)
    assert {a.inputs[0].op.name for a in arrived} == {
        b.reads[v][0].name for v, p in PRIOS.items() if p == 0}
    for v, p in PRIOS.items():
        assert _ctrl(b.reads[v][0]) == (set() if p == 0 else {gate.name})


def test_training_reads_match_the_trace_names_and_unknown_names_fail():
    b = _build("sender", mode="train")
    assert set(PRIOS) <= set(b.reads)  # plus the dropout seed state, read and updated
    assert set(b.grad_src.values()) == set(PRIOS)  # one gradient per trainable variable
    with pytest.raises(CommschedError, match=r"no counterpart|unknown variable"):
        _build("sender", {"conv9/kernel": 0.0})
