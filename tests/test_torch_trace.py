"""The PyTorch tracer: graph contract, gradients, dependencies, coverage, committed traces."""

from __future__ import annotations

from pathlib import Path

import networkx as nx
import pytest
import torch

from commsched.cli import main
from commsched.cost import LinearModel
from commsched.errors import CommschedError
from commsched.model.graph import validate
from commsched.model.traced import check_graph, grads_of, load_trace, reads_of, updates_of
from commsched.trace.torch import trace_file_name, trace_model
from commsched.trace.torch_models import build
from commsched.views.allreduce import allreduce_view

ROOT = Path(__file__).resolve().parent.parent
TORCH_TRACES = sorted((ROOT / "data/traces").glob("*-torch-*.json.gz"))


@pytest.fixture(scope="module")
def tiny() -> nx.DiGraph:
    return trace_model("tiny_cnn", 2, "train", iterations=2, warmup=0)


def test_train_trace_follows_the_contract(tiny: nx.DiGraph) -> None:
    validate(tiny)
    check_graph(tiny)
    meta = tiny.graph["meta"]
    assert meta["framework"] == "torch" and meta["coverage"] == 1.0
    assert meta["iterations"] == 2 and all(len(a["samples"]) == 2 for _, a in tiny.nodes(data=True))
    assert nx.is_directed_acyclic_graph(tiny)


def test_one_gradient_op_per_parameter(tiny: nx.DiGraph) -> None:
    params = [n for n, _ in build("tiny_cnn").named_parameters()]
    grads = grads_of(tiny)
    assert sorted(grads) == sorted(params)
    assert all(grads[p] == f"grad/{p}" for p in params)
    assert sorted(updates_of(tiny)) == sorted(params)
    # every parameter is read by exactly the forward op that consumes it
    reads = reads_of(tiny)
    assert reads["conv1.weight"] == reads["conv1.bias"]
    assert tiny.nodes[reads["conv1.weight"][0]]["op_type"] == "Convolution"
    assert tiny.nodes[reads["fc.weight"][0]]["op_type"] == "T"  # linear: weight.t() first


def test_dependencies_come_from_the_autograd_graph(tiny: nx.DiGraph) -> None:
    conv1 = reads_of(tiny)["conv1.weight"][0]
    fwd = [n for n in nx.topological_sort(tiny) if n.startswith("fwd/")]
    assert fwd[0] == conv1  # the first op of the forward pass
    i = conv1.split("/")[1]
    bwd = f"bwd/{i}/ConvolutionBackward"
    # conv1's backward produces its weight's and bias's gradients, after the whole forward
    assert set(tiny.succ[bwd]) == {"grad/conv1.weight", "grad/conv1.bias"}
    loss = max(fwd, key=lambda n: int(n.split("/")[1]))
    assert nx.has_path(tiny, loss, bwd)
    # edge bytes are the tensors they carry: conv1's output is 2 x 8 x 16 x 16 floats
    assert tiny.edges[conv1, next(iter(tiny.succ[conv1]))]["bytes"] == 2 * 8 * 16 * 16 * 4


def test_the_all_reduce_view_accepts_a_torch_trace(tiny: nx.DiGraph) -> None:
    v = allreduce_view(tiny, LinearModel(1e-4, 1e-9))
    assert len([n for n in v if n.startswith("allreduce:")]) == 7


def test_inference_trace_has_forward_ops_only() -> None:
    g = trace_model("tiny_cnn", 2, "infer", iterations=1, warmup=0)
    check_graph(g)
    assert all(n.startswith("fwd/") for n in g) and not grads_of(g)


def test_bad_arguments_are_one_line_errors() -> None:
    with pytest.raises(CommschedError, match="batch must be >= 1"):
        trace_model("tiny_cnn", 0)
    with pytest.raises(CommschedError, match="mode must be"):
        trace_model("tiny_cnn", 1, "eval")


@pytest.mark.skipif(not torch.cuda.is_available(),
                    reason="no CUDA GPU here: the CUDA path (kernel times through the profiler's "
                           "correlation ids) is unverified")
def test_cuda_trace_times_kernels() -> None:  # pragma: no cover - needs a GPU
    g = trace_model("tiny_cnn", 2, "train", device="cuda", iterations=2, warmup=1)
    check_graph(g)
    assert g.graph["meta"]["device"] == "cuda" and g.graph["meta"]["coverage"] >= 0.95


def test_cuda_without_a_gpu_is_a_clear_error() -> None:
    if torch.cuda.is_available():  # pragma: no cover
        pytest.skip("a GPU is present")
    with pytest.raises(CommschedError, match="PyTorch sees no GPU"):
        trace_model("tiny_cnn", 1, device="cuda")


def test_cli_writes_a_named_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / trace_file_name("tiny_cnn", "cpu", "train", 2)
    assert main(["trace", "--framework", "torch", "--model", "tiny_cnn", "--batch", "2",
                 "--iters", "1", "--warmup", "0", "--out", str(out)]) == 0
    assert "coverage 100.0%" in capsys.readouterr().out
    assert load_trace(out).graph["meta"]["model"] == "tiny_cnn"
    assert main(["trace", "--framework", "torch", "--model", "nope"]) == 2


def test_committed_torch_traces_are_valid_and_named_by_framework_and_device() -> None:
    assert len(TORCH_TRACES) >= 6
    for path in TORCH_TRACES:
        g = load_trace(path)
        meta = g.graph["meta"]
        assert path.name == trace_file_name(meta["model"], meta["device"], meta["mode"],
                                            meta["batch"])
        assert meta["coverage"] >= 0.95, path.name
        if meta["mode"] == "train":
            params = [n for n, _ in build(meta["model"]).named_parameters()]
            assert sorted(grads_of(g)) == sorted(params), path.name
