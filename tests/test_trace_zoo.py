"""The model zoo: names, inputs, sizes, errors, and real parameter counts."""

from __future__ import annotations

import sys

import pytest

from commsched.cli import main
from commsched.errors import CommschedError
from commsched.trace import zoo


def test_unknown_model_lists_the_known_ones() -> None:
    with pytest.raises(CommschedError) as e:
        zoo.get("resnet9000")
    msg = str(e.value)
    assert "unknown model 'resnet9000'" in msg
    for name in zoo.names():
        assert name in msg


def test_cli_unknown_model_is_one_line_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["trace", "--model", "nope", "--batch", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("commsched trace: error: unknown model 'nope' (known: ")
    assert "\n" not in err
    assert main(["trace", "--count", "vgg16", "nope", "--out", "x.json"]) == 2
    assert "unknown model 'nope'" in capsys.readouterr().err
    assert main(["trace", "--count", "vgg16"]) == 2
    assert "--count needs --out" in capsys.readouterr().err
    assert main(["trace", "--batch", "2"]) == 2
    assert "--model is required" in capsys.readouterr().err
    assert main(["trace", "--model", "vgg16", "--size", "64"]) == 2
    assert "needs input size 224" in capsys.readouterr().err
    assert main(["trace", "--model", "thesis_cnn", "--iters", "0"]) == 2
    assert "argument --iters: must be an integer >= 1" in capsys.readouterr().err


def test_zoo_covers_the_papers() -> None:
    tictac = {"alexnet_v2", "inception_v1", "inception_v2", "inception_v3", "resnet50_v1",
              "resnet50_v2", "resnet101_v1", "resnet101_v2", "vgg16", "vgg19"}
    pace = {"vgg16", "resnet50_mxnet", "seq2seq_lstm", "transformer"}
    thesis = {"thesis_cnn", "thesis_rnn", "thesis_dynamic_rnn"}
    fam = {f: {s.name for s in zoo.MODELS.values() if f in s.families}
           for f in ("tictac", "pace", "thesis")}
    assert fam == {"tictac": tictac, "pace": pace, "thesis": thesis}
    for s in zoo.MODELS.values():
        assert s.reference and s.build.__doc__, s.name
        s.check_size(s.size)


def test_inputs_and_labels() -> None:
    s = zoo.get("transformer")
    assert [(i.shape, i.dtype, i.high) for i in s.inputs(3, 7)] == [
        ((3, 7), "int32", 32000), ((3, 7), "int32", 32000)]
    assert s.labels(3, 7).shape == (3, 7)
    d = zoo.get("thesis_dynamic_rnn")
    seq, lengths = d.inputs(5, 20)
    assert seq.shape == (5, 20, 1) and (lengths.low, lengths.high) == (1, 21)
    assert zoo.get("inception_v3").labels(4, 139) == zoo.InputSpec(
        "labels", (4,), "int32", 0, 1001)  # TF-slim's 1001 classes


def test_sizes_that_would_change_the_parameters_are_rejected() -> None:
    with pytest.raises(CommschedError, match="needs input size 224"):
        zoo.get("vgg16").check_size(112)
    with pytest.raises(CommschedError, match=">= 107"):  # the auxiliary head's 5x5 pool
        zoo.get("inception_v3").check_size(106)
    zoo.get("resnet50_v1").check_size(64)


def test_missing_tensorflow_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "tensorflow", None)
    monkeypatch.setitem(sys.modules, "keras", None)
    with pytest.raises(CommschedError, match="pip install tensorflow-cpu"):
        zoo.load_tensorflow()
    with pytest.raises(CommschedError) as e:
        zoo.alexnet_v2()
    assert str(e.value) == zoo.MISSING_TF


def test_resnet_depth_must_be_tf_slims() -> None:
    with pytest.raises(CommschedError, match="no TF-slim ResNet of depth 34; known: 50, 101"):
        zoo.resnet_v1(34)
