"""Readers of the traced-graph format and raw traces, on hand-built graphs (no TensorFlow)."""

from __future__ import annotations

import json

import networkx as nx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from commsched.errors import CommschedError, GraphError
from commsched.model import graph
from commsched.model import traced as F


def _op(g: nx.DiGraph, name: str, op_type: str, samples: list[float], **kw: object) -> None:
    graph.add_op(g, name, "compute", "cpu", min(samples) if samples else 0.0,
                 op_type=op_type, samples=samples, out_bytes=kw.pop("out_bytes", 4),
                 is_gradient=kw.pop("is_gradient", False), **kw)


def tiny_train() -> nx.DiGraph:
    """w -> read -> matmul -> loss -> grad (of w and b) -> apply; b like w.

    The fused gradient op outputs the gradients of both variables, as a fused batch-norm
    gradient does.
    """
    var = {"bytes": 16, "shape": [4], "dtype": "float32", "trainable": True}
    g = graph.new_graph({"cpu": 1}, variables={"w": {**var, "path": "m/w"},
                                               "b": {**var, "path": "m/b"},
                                               "mean": {**var, "trainable": False,
                                                        "path": "m/mean"}},
                        meta={"model": "tiny", "mode": "train", "batch": 2, "iterations": 2})
    _op(g, "w", "VarHandleOp", [0.0, 0.0], out_bytes=0)
    _op(g, "b", "VarHandleOp", [0.0, 0.0], out_bytes=0)
    _op(g, "mean", "VarHandleOp", [0.0, 0.0], out_bytes=0)
    _op(g, "read_w", "ReadVariableOp", [2e-6, 1e-6], reads=["w"])
    _op(g, "read_b", "ReadVariableOp", [1e-6, 1e-6], reads=["b"])
    _op(g, "matmul", "MatMul", [5e-6, 4e-6])
    _op(g, "loss", "Mean", [1e-6, 2e-6])
    _op(g, "grad", "FusedGrad", [3e-6, 3e-6], is_gradient=True, grad_of=["w", "b"])
    _op(g, "apply_w", "ResourceApplyGradientDescent", [1e-6, 1e-6], updates=["w"])
    _op(g, "apply_b", "ResourceApplyGradientDescent", [1e-6, 1e-6], updates=["b"])
    _op(g, "update_mean", "AssignVariableOp", [1e-6, 1e-6], updates=["mean"])
    for u, v in [("w", "read_w"), ("b", "read_b"), ("w", "apply_w"), ("b", "apply_b"),
                 ("mean", "update_mean")]:
        g.add_edge(u, v, control=False, bytes=0)
    for u, v in [("read_w", "matmul"), ("read_b", "matmul"), ("matmul", "loss"),
                 ("loss", "grad"), ("grad", "apply_w"), ("grad", "apply_b"),
                 ("matmul", "update_mean")]:
        g.add_edge(u, v, control=False, bytes=16)
    g.add_edge("apply_w", "apply_b", control=True, bytes=0)
    graph.validate(g)
    return g


def raw_of(g: nx.DiGraph) -> dict[str, object]:
    """The raw trace a tracer would have recorded for ``g`` (one event per op, ns)."""
    k = g.graph["meta"]["iterations"]
    its = []
    for i in range(k):
        events = [[n, a["op_type"], "cpu", 1, 0, 0, 0, round(a["samples"][i] * 1e9)]
                  for n, a in g.nodes(data=True)]
        events.append(["_SOURCE", "NoOp", "cpu", 1, 0, 0, 0, 100])
        its.append({"wall_s": 1e-5, "events": events})
    return {"format": F.RAW_FORMAT, "version": 1, "meta": dict(g.graph["meta"]),
            "fields": list(F.RAW_FIELDS), "iterations": its}


def test_accessors() -> None:
    g = tiny_train()
    F.check_graph(g)
    assert F.reads_of(g) == {"w": ["read_w"], "b": ["read_b"]}
    assert F.updates_of(g) == {"w": ["apply_w"], "b": ["apply_b"], "mean": ["update_mean"]}
    assert F.grads_of(g) == {"w": "grad", "b": "grad"}
    assert F.gradient_ops(g) == ["grad"]
    assert F.trainable_variables(g) == ["w", "b"]
    s = F.summary(g)
    assert (s["ops"], s["variables"], s["params"], s["param_bytes"]) == (11, 3, 2, 32)
    assert s["compute_s"] == pytest.approx(1e-6 + 1e-6 + 4e-6 + 1e-6 + 3e-6 + 3 * 1e-6)


def test_two_gradient_ops_for_one_variable_is_an_error() -> None:
    g = tiny_train()
    g.nodes["loss"]["grad_of"] = ["w"]
    with pytest.raises(GraphError, match="'w' has 2 gradient ops"):
        F.grads_of(g)


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda g: g.graph.pop("meta"), "'meta' is missing"),
        (lambda g: g.graph["meta"].pop("mode"), "missing field 'mode'"),
        (lambda g: g.graph.pop("variables"), "'variables' is missing"),
        (lambda g: g.graph["variables"]["w"].update(bytes=-1), "variable 'w'"),
        (lambda g: g.nodes["matmul"].pop("op_type"), "op 'matmul': missing field 'op_type'"),
        (lambda g: g.nodes["matmul"].update(duration=5e-6), "op 'matmul': duration"),
        (lambda g: g.nodes["matmul"].update(samples=[-1.0]), "op 'matmul': samples"),
        (lambda g: g.nodes["read_w"].update(reads=["v"]), "op 'read_w': reads names unknown"),
        (lambda g: g.edges["grad", "apply_w"].pop("bytes"), "edge 'grad' -> 'apply_w'"),
    ],
)
def test_check_graph_names_the_problem(mutate: object, message: str) -> None:
    g = tiny_train()
    mutate(g)  # type: ignore[operator]
    with pytest.raises(GraphError, match=message):
        F.check_graph(g)


def test_load_trace_round_trip(tmp_path: object) -> None:
    g = tiny_train()
    p = f"{tmp_path}/t.json"
    graph.save(g, p)
    h = F.load_trace(p)
    assert nx.utils.graphs_equal(g, h)
    assert h.graph["variables"] == g.graph["variables"]
    with open(p) as f:
        data = json.load(f)
    data["graph"].pop("meta")
    with open(p, "w") as f:
        json.dump(data, f)
    with pytest.raises(GraphError, match=r"t\.json: not a traced graph"):
        F.load_trace(p)


def test_attribute() -> None:
    ops = {"rnn/while": "While", "rnn": "Const", "a/b": "Add", "f": "StatefulPartitionedCall"}
    assert F.attribute("a/b", ops) == "a/b"
    assert F.attribute("rnn/while/body/_1/mul", ops) == "rnn/while"
    assert F.attribute("Func/rnn/while/body/_1/input/_3", ops) == "rnn/while"
    assert F.attribute("f/inner/op", ops) == "f"
    assert F.attribute("a/b/c", ops) is None  # a/b is not a functional op
    assert F.attribute("rnn/other", ops) is None  # rnn is not functional
    assert F.attribute("_SOURCE", ops) is None
    assert F.attribute("rnn/while_grad/x", ops) is None  # prefix only at '/'


def test_samples_sum_repeated_and_lowered_events() -> None:
    ops = {"loop": "While", "x": "Add"}
    raw = {"iterations": [
        {"events": [["x", "Add", "cpu", 0, 0, 0, 0, 1000], ["loop/body/_1/a", "", "cpu", 0, 0,
                    0, 0, 300], ["loop/body/_1/a", "", "cpu", 0, 0, 0, 0, 200],
                    ["Func/loop/body/_1/input/_2", "", "cpu", 0, 0, 0, 0, 7],
                    ["_SOURCE", "NoOp", "cpu", 0, 0, 0, 0, 5], ["stray", "Mul", "cpu", 0, 0,
                    0, 0, 9]]},
        {"events": [["x", "Add", "cpu", 0, 0, 0, 0, 2000]]},
    ]}
    samples, unattributed = F.samples_from_raw(raw, ops)
    assert samples == {"x": [1e-6, 2e-6], "loop": [5.07e-7]}
    assert unattributed == {"stray": 1}


def test_samples_prefer_gpu_stream_events() -> None:
    ev = [["k", "Conv2D", "/device:GPU:0", 0, 0, 0, 0, 50],
          ["k", "Conv2D", "/device:GPU:0/stream:all", 0, 0, 0, 0, 900],
          ["k", "Conv2D", "/device:GPU:0/stream:7", 0, 0, 0, 0, 900],
          ["c", "Const", "/device:CPU:0", 0, 0, 0, 0, 40]]
    samples, _ = F.samples_from_raw({"iterations": [{"events": ev}]}, {"k": "Conv2D", "c": "Const"})
    assert samples == {"k": [9e-7], "c": [4e-8]}


def test_check_trace_accepts_the_matching_raw_trace(tmp_path: object) -> None:
    g = tiny_train()
    raw = raw_of(g)
    F.check_trace(g, raw)
    p = f"{tmp_path}/t.raw.json.gz"
    F.save_raw(raw, p)
    assert F.load_raw(p) == raw
    F.check_trace(g, F.load_raw(p))


def _event(raw: dict, it: int, name: str) -> list:  # type: ignore[type-arg]
    return next(e for e in raw["iterations"][it]["events"] if e[0] == name)


@pytest.mark.parametrize(
    ("tamper", "message"),
    [
        (lambda r: _event(r, 1, "matmul").__setitem__(7, 4001), "op 'matmul': graph samples"),
        (lambda r: _event(r, 0, "loss").__setitem__(1, "Sum"), "op 'loss': raw trace says type"),
        (lambda r: _event(r, 0, "loss").__setitem__(0, "loss2"), "op 'loss2' of the raw trace"),
        (lambda r: r["iterations"].pop(), "raw trace has 1 iterations"),
        (lambda r: r["meta"].update(mode="infer"), "raw trace has mode 'infer'"),
        (lambda r: r["iterations"][0]["events"].remove(_event(r, 0, "grad")),
         "op 'grad': graph samples"),
    ],
)
def test_check_trace_rejects_a_mismatch_naming_the_op(tamper: object, message: str) -> None:
    g = tiny_train()
    raw = raw_of(g)
    tamper(raw)  # type: ignore[operator]
    with pytest.raises(CommschedError, match=message):
        F.check_trace(g, raw)


def test_load_raw_errors(tmp_path: object) -> None:
    p = f"{tmp_path}/x.raw.json.gz"
    with pytest.raises(CommschedError, match="cannot read"):
        F.load_raw(p)
    with open(p, "w") as f:
        f.write("{not json")
    with pytest.raises(CommschedError, match="invalid JSON at line 1"):
        F.load_raw(p)
    F.save_raw({"format": "other"}, p)
    with pytest.raises(CommschedError, match="format is not"):
        F.load_raw(p)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["a", "b", "c", "_X", "zz"]),
                          st.integers(0, 10**6)), max_size=30),
       st.integers(1, 3))
def test_samples_are_per_iteration_sums(events: list[tuple[str, int]], k: int) -> None:
    ops = {"a": "Add", "b": "Mul", "c": "Const"}
    raw = {"iterations": [{"events": [[n, "", "cpu", 0, 0, 0, 0, ns] for n, ns in events]}
                          for _ in range(k)]}
    samples, unattributed = F.samples_from_raw(raw, ops)
    for op in ops:
        ns = [t for n, t in events if n == op]
        assert samples.get(op) == ([round(sum(ns) * 1e-9, 9)] * k if ns else None)
    assert unattributed == ({"zz": k * sum(n == "zz" for n, _ in events)}
                            if any(n == "zz" for n, _ in events) else {})
