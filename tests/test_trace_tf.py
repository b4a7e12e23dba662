"""End to end: real TensorFlow traces of the thesis' small models (slow: ~40 s on 2 cores).

Every trace runs ``commsched trace`` in its own process, as the pipeline does (the tracer
switches TensorFlow to graph mode for the whole process).
"""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

from commsched.model import traced as F

pytestmark = pytest.mark.slow

K = 3


def _trace(tmp: Path, model: str, mode: str, batch: int = 4) -> Path:
    out = tmp / f"{model}-{mode}-b{batch}.json"
    subprocess.run(
        [sys.executable, "-m", "commsched", "trace", "--model", model, "--mode", mode,
         "--batch", str(batch), "--warmup", "1", "--iters", str(K), "--out", str(out)],
        check=True, timeout=300, capture_output=True,
    )
    return out


@pytest.fixture(scope="module")
def traced(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("traces")
    counts = tmp / "counts.json"
    subprocess.run(
        [sys.executable, "-m", "commsched", "trace", "--count", "thesis_cnn", "--batch", "4",
         "--out", str(counts)], check=True, timeout=300, capture_output=True,
    )
    return {"train": _trace(tmp, "thesis_cnn", "train"),
            "infer": _trace(tmp, "thesis_cnn", "infer"),
            "dynamic": _trace(tmp, "thesis_dynamic_rnn", "train"),
            "counts": counts}


def test_train_trace(traced: dict[str, Path]) -> None:
    g = F.load_trace(traced["train"])
    meta = g.graph["meta"]
    assert meta["coverage"] >= 0.95
    assert (meta["model"], meta["mode"], meta["batch"], meta["iterations"]) == (
        "thesis_cnn", "train", 4, K)
    assert meta["intra_threads"] == 2 and meta["inter_threads"] == 1
    assert meta["tf_version"] and meta["device"] == "cpu"
    for n, a in g.nodes(data=True):
        assert a["duration"] >= 0, n
        if a["samples"]:
            assert len(a["samples"]) == K, n
            assert a["duration"] == min(a["samples"]), n
    # Variables mapped: every trainable one is read, has one gradient op, one SGD update.
    train = F.trainable_variables(g)
    assert len(train) == 8  # conv1, conv2, fc1, out: kernel and bias each
    reads, updates, grads = F.reads_of(g), F.updates_of(g), F.grads_of(g)
    for v in train:
        assert reads[v], v
        assert [g.nodes[u]["op_type"] for u in updates[v]] == ["ResourceApplyGradientDescent"]
        assert g.nodes[grads[v]]["is_gradient"]
        assert nx_has_path(g, grads[v], updates[v][0])
    # Gradient ops are the backward pass: none is an ancestor of the loss.
    loss = next(n for n in g if n.startswith("loss/"))
    assert not any(g.nodes[u]["is_gradient"] for u in ancestors(g, loss))
    assert len(F.gradient_ops(g)) > 20
    # Bytes: the kernel of fc1 is 3136 x 1024 floats.
    fc1 = next(v for v in train if v.endswith("fc1/kernel"))
    assert g.graph["variables"][fc1]["bytes"] == 3136 * 1024 * 4
    read = reads[fc1][0]
    assert g.nodes[read]["out_bytes"] == 3136 * 1024 * 4


def nx_has_path(g: object, a: str, b: str) -> bool:
    import networkx as nx

    return bool(nx.has_path(g, a, b))


def ancestors(g: object, n: str) -> set[str]:
    import networkx as nx

    return set(nx.ancestors(g, n))


def test_infer_trace_and_counts(traced: dict[str, Path]) -> None:
    gi = F.load_trace(traced["infer"])
    gt = F.load_trace(traced["train"])
    assert gi.graph["meta"]["coverage"] >= 0.95
    assert not F.gradient_ops(gi) and not F.updates_of(gi)
    counts = json.loads(traced["counts"].read_text())["thesis_cnn"]
    assert counts["ops_infer"] == gi.number_of_nodes()
    assert counts["ops_train"] == gt.number_of_nodes()
    assert counts["params"] == 8
    assert counts["param_bytes"] == sum(
        gt.graph["variables"][v]["bytes"] for v in F.trainable_variables(gt))


def test_raw_trace_checks(traced: dict[str, Path], tmp_path: Path) -> None:
    graph_path = traced["train"]
    raw_path = graph_path.with_name(graph_path.name[:-5] + ".raw.json.gz")
    F.check_trace(F.load_trace(graph_path), F.load_raw(raw_path))
    raw = json.loads(gzip.decompress(raw_path.read_bytes()))
    victim = next(e for e in raw["iterations"][1]["events"] if e[1] == "MatMul")
    victim[7] += 12345
    bad = tmp_path / "bad.raw.json.gz"
    bad.write_bytes(gzip.compress(json.dumps(raw).encode()))
    r = subprocess.run([sys.executable, "-m", "commsched", "trace", "--check",
                        str(graph_path), str(bad)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2
    assert f"op {victim[0]!r}" in r.stderr and "Traceback" not in r.stderr


def test_dynamic_rnn_loop_is_charged_to_its_while_ops(traced: dict[str, Path]) -> None:
    g = F.load_trace(traced["dynamic"])
    meta = g.graph["meta"]
    assert meta["coverage"] >= 0.95 and meta["unattributed_events"] == 0
    loops = [n for n, a in g.nodes(data=True) if a["op_type"] in ("While", "StatelessWhile")]
    assert len(loops) == 2  # the forward loop and its gradient
    for n in loops:
        assert len(g.nodes[n]["samples"]) == K and g.nodes[n]["duration"] > 0
    lstm = [v for v in F.trainable_variables(g) if "lstm" in v]
    assert len(lstm) == 3
    reads = F.reads_of(g)
    assert all(any(r in loops for r in reads[v]) for v in lstm)
