"""The PyTorch model definitions have torchvision's (and FACTS.md's) parameter counts."""

from __future__ import annotations

import pytest
import torch

from commsched.errors import CommschedError
from commsched.trace import torch_models

#: FACTS.md, "GPU step times" table: gradients MiB (tensors), measured with torchvision.
FACTS = {
    "alexnet": (233.1, 16),
    "vgg16": (527.8, 32),
    "resnet50": (97.5, 161),
    "inception_v3": (103.6, 292),
    "transformer": (168.4, 184),
}


@pytest.mark.parametrize("name", sorted(FACTS))
def test_gradient_sizes_match_facts(name: str) -> None:
    m = torch_models.build(name)
    ps = list(m.parameters())
    mib = sum(p.numel() * p.element_size() for p in ps) / 2**20
    assert (round(mib, 1), len(ps)) == FACTS[name]
    assert all(p.dtype == torch.float32 for p in ps)


def test_seq2seq_matches_the_tensorflow_zoo_structure() -> None:
    m = torch_models.build("seq2seq_lstm")
    names = [n for n, _ in m.named_parameters()]
    assert len(names) == 20 and names[0] == "src_embedding.weight"
    assert names[-1] == "projection.bias"


def test_resnet50_names_follow_torchvision() -> None:
    names = [n for n, _ in torch_models.build("resnet50").named_parameters()]
    assert names[:3] == ["conv1.weight", "bn1.weight", "bn1.bias"]
    assert "layer1.0.downsample.0.weight" in names and names[-1] == "fc.bias"


@pytest.mark.parametrize("name", ["alexnet", "resnet50", "transformer", "seq2seq_lstm"])
def test_one_forward_pass_has_the_label_shape(name: str) -> None:
    spec = torch_models.get(name)
    size = {"alexnet": 64, "resnet50": 32}.get(name, 4)
    (inputs, labels) = spec.batch(2, size, torch.Generator().manual_seed(0))
    out = torch_models.build(name)(*inputs)
    assert out.shape[0] == labels.shape[0]


def test_inception_aux_head_only_in_training() -> None:
    m = torch_models.build("inception_v3")
    assert any(n.startswith("AuxLogits.") for n, _ in m.named_parameters())


def test_unknown_model_and_small_input_are_one_line_errors() -> None:
    with pytest.raises(CommschedError, match=r"unknown PyTorch model 'nope' \(known: alexnet"):
        torch_models.get("nope")
    with pytest.raises(CommschedError, match="needs input size >= 299"):
        torch_models.get("inception_v3").batch(1, 100, torch.Generator())
