"""Computation operators at MXNet's granularity (PACE Table II): rules and hand counts."""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path

import pytest

from commsched.errors import CommschedError
from commsched.model.graph import add_op, new_graph
from commsched.model.traced import load_trace
from commsched.pace.operators import (
    has_loss_scope,
    mxnet_operators,
    read_symbol,
    symbol_operators,
)

#: The backward rule of commsched.pace.operators applied by hand: every forward operator
#: has a backward node but the adds (CloneGradient) and those no parameter precedes.
NO_BACKWARD = ("elemwise_add", "identity")


def _mxnet_total(forward: Counter[str]) -> int:
    backward = sum(n for op, n in forward.items() if op not in NO_BACKWARD)
    return sum(forward.values()) + backward


# MXNet 1.5 example/image-classification/symbols/vgg.py, VGG-16 (num_layers 16, no BN).
VGG16_MXNET = Counter(
    Convolution=2 + 2 + 3 + 3 + 3,  # get_feature: layers [2, 2, 3, 3, 3]
    Activation=13 + 2,               # relu after every convolution, relu6 and relu7
    Pooling=5,                       # one max pool per block
    Flatten=1,                       # get_classifier: flatten
    FullyConnected=3,                # fc6, fc7, fc8
    Dropout=2,                       # drop6, drop7
    SoftmaxOutput=1,
)

# MXNet 1.5 example/image-classification/symbols/resnet.py, ResNet-50 (bottleneck units
# 3, 4, 6, 3; pre-activation: BN, ReLU, conv three times, then the residual add).
_UNITS, _STAGES = 3 + 4 + 6 + 3, 4
RESNET50_MXNET = Counter(
    identity=1,                               # data = identity(data) (float32 path)
    BatchNorm=1 + 1 + 3 * _UNITS + 1,         # bn_data, bn0, 3 per unit, bn1
    Convolution=1 + 3 * _UNITS + _STAGES,     # conv0, 3 per unit, a projection per stage
    Activation=1 + 3 * _UNITS + 1,            # relu0, 3 per unit, relu1
    Pooling=2,                                # the 3x3/2 max pool, the global average pool
    elemwise_add=_UNITS,                      # conv3 + shortcut
    Flatten=1,
    FullyConnected=1,                         # fc1
    SoftmaxOutput=1,
)


def test_mxnet_symbols_by_hand_give_table2():
    # PACE's Table II: 80 and 335 computation operators.
    assert sum(VGG16_MXNET.values()) == 40 and _mxnet_total(VGG16_MXNET) == 80
    assert sum(RESNET50_MXNET.values()) == 176 and _mxnet_total(RESNET50_MXNET) == 335
    # with a _grad_add per activation read twice (act1 of the 4 projection units and x of
    # the 12 identity units) the count would be 351: not Table II's
    assert _mxnet_total(RESNET50_MXNET) + 4 + 12 == 351


def test_vgg16_trace_counts_the_keras_model():
    m = mxnet_operators(load_trace("data/traces/vgg16-train-b2.json.gz"))
    # keras.applications' VGG-16 is MXNet's without the two dropouts; its flatten is a
    # Reshape, MXNet's Flatten
    ours = VGG16_MXNET - Counter(Dropout=2, Flatten=1) + Counter(Reshape=1)
    assert m.forward == dict(ours)
    assert m.n_forward == 38 and m.backward == 38 and m.total == 76


def test_resnet50_mxnet_trace_counts_the_keras_model():
    m = mxnet_operators(load_trace("data/traces/resnet50_mxnet-train-b4.json.gz"))
    # our Keras model has neither MXNet's identity on the data nor a Flatten (Keras' global
    # average pool outputs a flat tensor)
    ours = RESNET50_MXNET - Counter(identity=1, Flatten=1)
    assert m.forward == dict(ours)
    assert m.n_forward == 174
    assert m.backward == 174 - 16  # no node for the adds
    assert m.total == 332
    # every group is one Keras layer: batch norms are single operators
    bn = [grp for grp in m.groups if any("/moments/" in op for op in grp)]
    assert len(bn) == 51 and all(len({op.split("/")[1] for op in grp}) == 1 for grp in bn)


def _toy() -> object:
    """inputs/x -> conv (+ bias) -> relu; inputs/x -> relu; add; loss; one gradient op."""
    g = new_graph({"cpu": 1}, variables={
        v: {"bytes": 4, "shape": [1], "dtype": "float32", "trainable": True, "path": v}
        for v in ("w", "b")})

    def op(name: str, op_type: str, *preds: str, **attrs: object) -> None:
        add_op(g, name, "compute", "cpu", 1e-6, op_type=op_type, is_gradient=False, **attrs)
        for p in preds:
            g.add_edge(p, name, control=False, bytes=4)

    op("inputs/x", "RandomUniform")
    op("inputs/labels", "RandomUniformInt")
    op("w", "VarHandleOp")
    op("b", "VarHandleOp")
    op("m_1/conv_1/w_read", "ReadVariableOp", "w", reads=["w"])
    op("m_1/conv_1/b_read", "ReadVariableOp", "b", reads=["b"])
    op("m_1/conv_1/convolution", "Conv2D", "inputs/x", "m_1/conv_1/w_read")
    op("m_1/conv_1/Reshape", "Reshape", "m_1/conv_1/b_read")  # a bias reshape: dropped
    op("m_1/conv_1/BiasAdd", "BiasAdd", "m_1/conv_1/convolution", "m_1/conv_1/Reshape")
    op("m_1/conv_1/Relu", "Relu", "m_1/conv_1/BiasAdd")
    op("m_1/pre_1/Relu", "Relu", "inputs/x")  # no parameter upstream: no backward node
    op("m_1/pre_1/Shape", "Shape", "m_1/pre_1/Relu")
    op("m_1/pre_1/zeros", "Fill", "m_1/pre_1/Shape")  # shape arithmetic: not an operator
    op("m_1/add_1/Add", "AddV2", "m_1/conv_1/Relu", "m_1/pre_1/Relu", "m_1/pre_1/zeros")
    op("loss/xent", "SparseSoftmaxCrossEntropyWithLogits", "m_1/add_1/Add", "inputs/labels")
    op("loss/Mean", "Mean", "loss/xent")
    add_op(g, "gradients/loss/Mean_grad", "compute", "cpu", 1e-6, op_type="Tile",
           is_gradient=True)
    g.add_edge("loss/Mean", "gradients/loss/Mean_grad", control=False, bytes=4)
    return g


def test_rules_on_a_toy_graph():
    m = mxnet_operators(_toy())
    assert m.forward == {"Convolution": 1, "Activation": 2, "elemwise_add": 1,
                         "SoftmaxOutput": 1}
    assert m.backward == 3  # convolution, its relu, the loss
    assert m.total == 8
    assert ("m_1/conv_1/BiasAdd", "m_1/conv_1/convolution") in m.groups
    assert ("loss/Mean", "loss/xent") in m.groups
    assert m.breakdown() == "Activation:2 Convolution:1 SoftmaxOutput:1 elemwise_add:1"


def test_a_graph_without_loss_scope_is_refused():
    g = _toy()
    g.remove_nodes_from(["loss/xent", "loss/Mean"])
    assert not has_loss_scope(g) and has_loss_scope(_toy())
    with pytest.raises(CommschedError, match="no forward op in a 'loss/' scope"):
        mxnet_operators(g)


def test_sequence_models_count_their_architectures():
    # seq2seq_lstm: 2 + 2 LSTM layers of 16 steps; each step is MXNet's LSTMCell: i2h and
    # h2h FullyConnected, their sum, SliceChannel, 4 gate Activations, c = f*c + i*g
    # (2 mul, 1 add), h = o * tanh(c) (Activation, mul)
    s2s = mxnet_operators(load_trace("data/traces/seq2seq_lstm-train-b4.json.gz"))
    steps = 4 * 16
    assert s2s.forward["FullyConnected"] == 2 * steps + 1  # + the projection
    assert s2s.forward["Activation"] == 5 * steps
    assert s2s.forward["elemwise_mul"] == 3 * steps
    assert s2s.forward["elemwise_add"] == 2 * steps
    assert s2s.forward["Embedding"] == 2 and s2s.forward["SoftmaxOutput"] == 1
    # transformer: 6 encoder layers (self-attention: q, k, v, output FC; 2 feed-forward FC)
    # and 6 decoder layers (self- and cross-attention, feed-forward), tied output logits
    tr = mxnet_operators(load_trace("data/traces/transformer-train-b4.json.gz"))
    attentions = 6 + 2 * 6
    assert tr.forward["FullyConnected"] == 4 * attentions + 2 * 12 + 1
    assert tr.forward["batch_dot"] == 2 * attentions and tr.forward["softmax"] == attentions
    assert tr.forward["LayerNorm"] == 2 * 6 + 3 * 6
    assert tr.forward["Dropout"] == 1 + 2 * 6 + 1 + 3 * 6  # inputs and every sublayer
    assert tr.backward == tr.n_forward - tr.forward["elemwise_add"]


def _node(op, name, *inputs, shape=None):
    node = {"op": op, "name": name, "inputs": [[i, 0, 0] for i in inputs]}
    if shape is not None:
        node["attrs"] = {"__shape__": str(shape)}
    return node


#: A small MXNet training symbol (mx.sym.save of: identity of the data, a FullyConnected
#: with weight and bias, a relu, a residual elemwise_add, a BlockGrad of it multiplied in,
#: an _arange broadcast-added, SoftmaxOutput). MXNet 1.5.1 binds it for training with 9
#: forward nodes and 5 backward nodes (SoftmaxOutput, broadcast_add, elemwise_mul,
#: Activation, FullyConnected) and one add_n: none for the identity (no parameter before
#: it), the add (CloneGradient), the BlockGrad (no gradient) or the _arange.
TINY = {
    "nodes": [
        _node("null", "data"),
        _node("_copy", "id", 0),
        _node("null", "fc_weight", shape=(4, 3)),
        _node("null", "fc_bias", shape=(4,)),
        _node("FullyConnected", "fc", 1, 2, 3),
        _node("Activation", "relu", 4),
        _node("elemwise_add", "add", 4, 5),
        _node("BlockGrad", "stop", 6),
        _node("elemwise_mul", "mul", 6, 7),
        _node("_arange", "pos"),
        _node("broadcast_add", "shift", 8, 9),
        _node("null", "label"),
        _node("SoftmaxOutput", "softmax", 10, 11),
    ],
    "arg_nodes": [0, 2, 3, 11],
    "heads": [[12, 0, 0]],
}


def _write(path: Path, doc: object) -> Path:
    path.write_text(json.dumps(doc))
    return path


def test_symbol_operators_follow_mxnets_gradient_pass(tmp_path):
    sym = read_symbol(_write(tmp_path / "tiny.json", TINY))
    assert sym.params == {"fc_weight": (4, 3), "fc_bias": (4,)} and sym.n_params == 16
    ops = symbol_operators(sym)
    assert ops.n_forward == 9 and ops.forward["elemwise_add"] == 1
    assert ops.backward == 5 and ops.total == 14
    # with no parameter before any node (fc's weight and bias made data inputs, the only
    # parameter read by nothing) there is no backward node at all
    no_param = json.loads(json.dumps(TINY))
    no_param["nodes"][2]["attrs"] = no_param["nodes"][3]["attrs"] = {}
    no_param["nodes"].append(_node("null", "w", shape=(1,)))  # a parameter nothing reads
    assert symbol_operators(read_symbol(_write(tmp_path / "np.json", no_param))).backward == 0


def test_symbol_reads_gzip_and_rejects_bad_fields(tmp_path):
    gz = tmp_path / "tiny.json.gz"
    gz.write_bytes(gzip.compress(json.dumps(TINY).encode()))
    assert symbol_operators(read_symbol(gz)).total == 14
    bad_shape = json.loads(json.dumps(TINY))
    bad_shape["nodes"][2]["attrs"]["__shape__"] = "(4, x)"
    with pytest.raises(CommschedError, match=r"bad.json: nodes\[2\] \(fc_weight\): __shape__"):
        read_symbol(_write(tmp_path / "bad.json", bad_shape))
    forward_ref = json.loads(json.dumps(TINY))
    forward_ref["nodes"][1]["inputs"] = [[5, 0, 0]]
    with pytest.raises(CommschedError, match=r"fwd.json: nodes\[1\].inputs"):
        read_symbol(_write(tmp_path / "fwd.json", forward_ref))
    with pytest.raises(CommschedError, match="needs lists 'nodes' and 'heads'"):
        read_symbol(_write(tmp_path / "no.json", {"nodes": []}))
    shapeless = json.loads(json.dumps(TINY))
    for node in shapeless["nodes"]:
        node.pop("attrs", None)
    with pytest.raises(CommschedError, match="no parameter"):
        read_symbol(_write(tmp_path / "shapeless.json", shapeless))


@pytest.mark.parametrize("model", ["seq2seq_sockeye", "transformer_sockeye"])
def test_sockeye_symbols_count_as_mxnet_does(model):
    # scripts/sockeye_symbols.py recorded what MXNet 1.5.1 itself counts when it binds
    # sockeye 1.18.93's training symbol: the JSON-only rule must give the same numbers
    base = Path("data/models/sockeye") / model
    mxnet = json.loads(Path(f"{base}.mxnet.json").read_text())
    sym = read_symbol(f"{base}.json.gz")
    ops = symbol_operators(sym)
    assert len(sym.params) == mxnet["parameter_arrays"]
    assert sym.n_params == mxnet["parameters"]
    assert ops.n_forward == mxnet["forward_nodes"]
    assert ops.backward == mxnet["backward_nodes"]
    assert ops.total == mxnet["table2_operators"]


def test_sockeye_convolutional_model_is_table2s_seq2seq():
    # Table II's Seq2Seq: 32 all-reduce operators, 67.2 M parameters, 293 operators.
    # sockeye's convolutional model has the 32 arrays: per encoder and decoder 6
    # convolutions with a weight and a bias, the word and positional embeddings, the input
    # projection (i2h, no bias); and the output layer's weight and bias
    sym = read_symbol("data/models/sockeye/seq2seq_sockeye.json.gz")
    assert len(sym.params) == 2 * (6 * 2 + 2 + 1) + 2 == 32
    ops = symbol_operators(sym)
    assert (ops.n_forward, ops.backward) == (172, 143)
    # its parameters besides the vocabularies are 19,513,344 and the vocabularies enter as
    # 512 s + 1025 t, as in the Transformer: Table II's 67.2 M and 91.8 M both hold for
    # 512 s + 1025 t in [47,646,320, 47,736,656), e.g. s = t = 31,000..31,058
    vocab = 32000
    assert sym.n_params - vocab * 512 - vocab * 1025 == 19_513_344
    both = [v for v in range(30_000, 33_000)
            if round((19_513_344 + 1537 * v) / 1e6, 1) == 67.2
            and round((44_103_680 + 1537 * v) / 1e6, 1) == 91.8]
    assert (both[0], both[-1]) == (31_000, 31_058)


def test_sockeye_transformer_is_table2s_model():
    # Table II: 164 all-reduce operators (sockeye's default Transformer: exactly its
    # parameter arrays) and 1061 computation operators (sockeye 1.18.93's graph: 1063)
    sym = read_symbol("data/models/sockeye/transformer_sockeye.json.gz")
    ops = symbol_operators(sym)
    assert len(sym.params) == 164
    assert (ops.n_forward, ops.backward) == (558, 505)
    # 44,103,680 parameters besides the two embeddings (512 each) and the output layer
    # (512 + a bias): 91.8 M puts 512 s + 1025 t near 47.70 M, e.g. s = t = 31,000-31,064
    vocab = 32000
    assert sym.n_params - vocab * 512 - vocab * 1025 == 44_103_680
