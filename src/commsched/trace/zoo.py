"""The model zoo: every network commsched traces, each a small documented Keras builder.

Three groups of models, named as in the papers that use them:

* TicTac's ten (Hashemi, Jyothi & Campbell, SysML 2019, Table 1): ``alexnet_v2``,
  ``inception_v1``, ``inception_v2``, ``inception_v3``, ``resnet50_v1``, ``resnet50_v2``,
  ``resnet101_v1``, ``resnet101_v2``, ``vgg16``, ``vgg19``. TicTac traced the TF-slim
  definitions; we take ``keras.applications`` where it has the model and build the other
  three (AlexNet v2, Inception v1 and v2) by hand with the layer widths of the TF-slim
  definitions, which cite the original papers.
* PACE's four (Bao, Peng, Chen & Wu, INFOCOM 2020, Sec. VI): ``vgg16``, ``resnet50_v1``,
  ``seq2seq_lstm`` and ``transformer``.
* Small analogs of the three TensorFlow graphs of Laich's thesis (Stuttgart 2017,
  Sec. 6.1, from the TensorFlow-Examples project): ``thesis_cnn``, ``thesis_rnn`` and
  ``thesis_dynamic_rnn``.

Every model is built with ``weights=None`` (nothing is downloaded) and the real number of
classes (1000 for the ImageNet models), so its parameters are the real ones; only the input
size may be smaller than the paper's to keep CPU tracing cheap (:attr:`ModelSpec.size`).
Models whose classifier flattens a spatial map (AlexNet v2, VGG) keep the paper's input size,
because a smaller image would shrink their first fully connected layer.

This module imports nothing heavy: TensorFlow/Keras are imported inside the builders.

Examples
--------
>>> spec = get("vgg16")
>>> spec.size, spec.paper_size, spec.num_classes
(224, 224, 1000)
>>> [s.shape for s in spec.inputs(batch=2, size=spec.size)]
[(2, 224, 224, 3)]
>>> sorted(m for m in names() if m.startswith("thesis"))
['thesis_cnn', 'thesis_dynamic_rnn', 'thesis_rnn']
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from commsched.errors import CommschedError

__all__ = [
    "MISSING_TF",
    "MODELS",
    "InputSpec",
    "ModelSpec",
    "get",
    "load_tensorflow",
    "names",
]

#: The message of the error raised when TensorFlow is needed but not installed.
MISSING_TF = "TensorFlow is not installed: pip install tensorflow-cpu (or make bootstrap)"


def load_tensorflow() -> tuple[ModuleType, ModuleType]:
    """Import and return ``(tensorflow, keras)``; a missing install is a one-line error."""
    try:
        import keras
        import tensorflow as tf
    except ImportError:
        raise CommschedError(MISSING_TF) from None
    return tf, keras


@dataclass(frozen=True)
class InputSpec:
    """One synthetic input (or label) tensor: uniform random values in ``[low, high)``."""

    name: str
    shape: tuple[int, ...]
    dtype: str  # "float32" or "int32"
    low: float = 0.0
    high: float = 1.0


@dataclass(frozen=True)
class ModelSpec:
    """A model of the zoo.

    ``size`` is our default input size (image side in pixels, or sequence length) and
    ``paper_size`` the paper's; ``standard_batch`` is the per-worker batch of our default
    trace. ``build(size)`` returns an uncompiled Keras model whose inputs match
    ``inputs(batch, size)`` and whose output is the logits the loss compares with
    ``labels(batch, size)``.
    """

    name: str
    title: str
    reference: str
    families: tuple[str, ...]
    size: int
    paper_size: int
    min_size: int
    num_classes: int
    standard_batch: int
    build: Callable[[int], Any] = field(repr=False)
    input_kind: str = "image"
    features: int = 3
    note: str = ""

    def inputs(self, batch: int, size: int) -> list[InputSpec]:
        """The model's synthetic inputs for ``batch`` examples of size ``size``."""
        if self.input_kind == "image":
            return [InputSpec("images", (batch, size, size, self.features), "float32")]
        if self.input_kind == "sequence":
            return [InputSpec("sequences", (batch, size, self.features), "float32")]
        if self.input_kind == "sequence_lengths":
            return [
                InputSpec("sequences", (batch, size, self.features), "float32"),
                InputSpec("lengths", (batch,), "int32", 1, size + 1),
            ]
        if self.input_kind == "translation":
            return [
                InputSpec("source", (batch, size), "int32", 0, self.num_classes),
                InputSpec("target_in", (batch, size), "int32", 0, self.num_classes),
            ]
        raise AssertionError(f"unknown input kind {self.input_kind!r}")  # pragma: no cover

    def labels(self, batch: int, size: int) -> InputSpec:
        """The synthetic labels (class ids, or target token ids for translation)."""
        shape = (batch, size) if self.input_kind == "translation" else (batch,)
        return InputSpec("labels", shape, "int32", 0, self.num_classes)

    def check_size(self, size: int) -> None:
        """Raise :class:`CommschedError` if the model cannot take inputs of ``size``."""
        fixed = self.min_size == self.paper_size
        if fixed and size != self.paper_size:
            raise CommschedError(
                f"model {self.name!r} needs input size {self.paper_size} (its classifier "
                f"flattens a fixed-size map), got {size}"
            )
        if size < self.min_size:
            raise CommschedError(
                f"model {self.name!r} needs input size >= {self.min_size}, got {size}"
            )


# --------------------------------------------------------------------------------------
# Hand-built image models (TF-slim widths).


def _conv_bn(keras: ModuleType, x: Any, filters: int, kernel: int, stride: int, name: str) -> Any:
    """TF-slim's inception conv: no bias, batch norm with beta only (scale=False), ReLU."""
    L = keras.layers
    x = L.Conv2D(filters, kernel, strides=stride, padding="same", use_bias=False, name=name)(x)
    x = L.BatchNormalization(scale=False, epsilon=1e-3, name=f"{name}_bn")(x)
    return L.ReLU(name=f"{name}_relu")(x)


def _logits(keras: ModuleType, x: Any, num_classes: int, keep: float) -> Any:
    """TF-slim's inception head: global average pool, dropout, 1x1 conv with bias."""
    L = keras.layers
    x = L.GlobalAveragePooling2D(keepdims=True, name="avgpool")(x)
    x = L.Dropout(1.0 - keep, name="dropout")(x)
    x = L.Conv2D(num_classes, 1, name="logits")(x)
    return L.Flatten(name="squeeze")(x)


def alexnet_v2(size: int = 224, num_classes: int = 1000) -> Any:
    """AlexNet v2 (Krizhevsky, "One weird trick for parallelizing convolutional neural
    networks", arXiv:1404.5997, 2014), with TF-slim's ``alexnet_v2`` layer widths.

    Five convolutions (64 11x11/4, 192 5x5, 384, 384, 256 3x3) with three 3x3/2 max pools,
    and the fully connected layers as convolutions (4096 5x5 valid, 4096 1x1, classes 1x1)
    with dropout 0.5. All layers have biases and no normalisation. 50.3 M parameters.
    """
    _, keras = load_tensorflow()
    L = keras.layers
    inp = keras.Input((size, size, 3), name="images")
    x = L.Conv2D(64, 11, strides=4, padding="valid", activation="relu", name="conv1")(inp)
    x = L.MaxPooling2D(3, 2, name="pool1")(x)
    x = L.Conv2D(192, 5, padding="same", activation="relu", name="conv2")(x)
    x = L.MaxPooling2D(3, 2, name="pool2")(x)
    x = L.Conv2D(384, 3, padding="same", activation="relu", name="conv3")(x)
    x = L.Conv2D(384, 3, padding="same", activation="relu", name="conv4")(x)
    x = L.Conv2D(256, 3, padding="same", activation="relu", name="conv5")(x)
    x = L.MaxPooling2D(3, 2, name="pool5")(x)
    x = L.Conv2D(4096, 5, padding="valid", activation="relu", name="fc6")(x)
    x = L.Dropout(0.5, name="dropout6")(x)
    x = L.Conv2D(4096, 1, activation="relu", name="fc7")(x)
    x = L.Dropout(0.5, name="dropout7")(x)
    x = L.Conv2D(num_classes, 1, name="fc8")(x)
    out = L.Flatten(name="squeeze")(x)
    return keras.Model(inp, out, name="alexnet_v2")


# Inception v1 modules: (1x1, 3x3 reduce, 3x3, "5x5" reduce, "5x5" (3x3 in TF-slim), pool proj)
_V1_MODULES: dict[str, tuple[int, int, int, int, int, int]] = {
    "mixed_3b": (64, 96, 128, 16, 32, 32),
    "mixed_3c": (128, 128, 192, 32, 96, 64),
    "mixed_4b": (192, 96, 208, 16, 48, 64),
    "mixed_4c": (160, 112, 224, 24, 64, 64),
    "mixed_4d": (128, 128, 256, 24, 64, 64),
    "mixed_4e": (112, 144, 288, 32, 64, 64),
    "mixed_4f": (256, 160, 320, 32, 128, 128),
    "mixed_5b": (256, 160, 320, 32, 128, 128),
    "mixed_5c": (384, 192, 384, 48, 128, 128),
}


def inception_v1(size: int = 224, num_classes: int = 1000) -> Any:
    """Inception v1 / GoogLeNet (Szegedy et al., "Going deeper with convolutions", CVPR
    2015, Table 1), as TF-slim's ``inception_v1`` defines it.

    The module widths are the paper's Table 1; like TF-slim (which TicTac traced) every
    convolution is followed by batch normalisation (beta only) instead of the paper's local
    response normalisation, the "5x5" branch uses a 3x3 kernel, the final max pool is 2x2,
    and the auxiliary classifiers are omitted. 57 convolutions, 116 trainable variables.
    """
    _, keras = load_tensorflow()
    L = keras.layers
    inp = keras.Input((size, size, 3), name="images")
    x = _conv_bn(keras, inp, 64, 7, 2, "conv2d_1a_7x7")
    x = L.MaxPooling2D(3, 2, padding="same", name="maxpool_2a_3x3")(x)
    x = _conv_bn(keras, x, 64, 1, 1, "conv2d_2b_1x1")
    x = _conv_bn(keras, x, 192, 3, 1, "conv2d_2c_3x3")
    x = L.MaxPooling2D(3, 2, padding="same", name="maxpool_3a_3x3")(x)
    for name, (b0, b1r, b1, b2r, b2, b3) in _V1_MODULES.items():
        if name == "mixed_4b":
            x = L.MaxPooling2D(3, 2, padding="same", name="maxpool_4a_3x3")(x)
        if name == "mixed_5b":
            x = L.MaxPooling2D(2, 2, padding="same", name="maxpool_5a_2x2")(x)
        br0 = _conv_bn(keras, x, b0, 1, 1, f"{name}_b0_1x1")
        br1 = _conv_bn(keras, x, b1r, 1, 1, f"{name}_b1_1x1")
        br1 = _conv_bn(keras, br1, b1, 3, 1, f"{name}_b1_3x3")
        br2 = _conv_bn(keras, x, b2r, 1, 1, f"{name}_b2_1x1")
        br2 = _conv_bn(keras, br2, b2, 3, 1, f"{name}_b2_3x3")
        br3 = L.MaxPooling2D(3, 1, padding="same", name=f"{name}_b3_pool")(x)
        br3 = _conv_bn(keras, br3, b3, 1, 1, f"{name}_b3_1x1")
        x = L.Concatenate(name=name)([br0, br1, br2, br3])
    out = _logits(keras, x, num_classes, keep=0.8)
    return keras.Model(inp, out, name="inception_v1")


# Inception v2 modules: (1x1, 3x3 reduce, 3x3, double-3x3 reduce, double 3x3, pool, proj);
# a module with stride 2 has 1x1 = 0 and a max-pool pass-through instead of a projection.
_V2_MODULES: dict[str, tuple[int, int, int, int, int, str, int]] = {
    "mixed_3b": (64, 64, 64, 64, 96, "avg", 32),
    "mixed_3c": (64, 64, 96, 64, 96, "avg", 64),
    "mixed_4a": (0, 128, 160, 64, 96, "max", 0),
    "mixed_4b": (224, 64, 96, 96, 128, "avg", 128),
    "mixed_4c": (192, 96, 128, 96, 128, "avg", 128),
    "mixed_4d": (160, 128, 160, 128, 160, "avg", 96),
    "mixed_4e": (96, 128, 192, 160, 192, "avg", 96),
    "mixed_5a": (0, 128, 192, 192, 256, "max", 0),
    "mixed_5b": (352, 192, 320, 160, 224, "avg", 128),
    "mixed_5c": (352, 192, 320, 192, 224, "max", 128),
}


def inception_v2(size: int = 224, num_classes: int = 1000) -> Any:
    """Inception v2 / BN-Inception (Ioffe & Szegedy, "Batch normalization", ICML 2015,
    Sec. 4.1 and Fig. 5), as TF-slim's ``inception_v2`` defines it.

    Batch-normalised inception modules whose 5x5 convolutions are replaced by two 3x3
    ones; modules 4a and 5a reduce the grid with stride 2. Like TF-slim, the first
    convolution is separable (7x7 depthwise, multiplier 8, then 1x1 to 64 channels) and the
    pool projections of modules 4d and 4e have 96 channels.
    """
    _, keras = load_tensorflow()
    L = keras.layers
    inp = keras.Input((size, size, 3), name="images")
    x = L.SeparableConv2D(
        64, 7, strides=2, padding="same", depth_multiplier=8, use_bias=False,
        name="conv2d_1a_7x7",
    )(inp)
    x = L.BatchNormalization(scale=False, epsilon=1e-3, name="conv2d_1a_7x7_bn")(x)
    x = L.ReLU(name="conv2d_1a_7x7_relu")(x)
    x = L.MaxPooling2D(3, 2, padding="same", name="maxpool_2a_3x3")(x)
    x = _conv_bn(keras, x, 64, 1, 1, "conv2d_2b_1x1")
    x = _conv_bn(keras, x, 192, 3, 1, "conv2d_2c_3x3")
    x = L.MaxPooling2D(3, 2, padding="same", name="maxpool_3a_3x3")(x)
    for name, (b0, b1r, b1, b2r, b2, pool, proj) in _V2_MODULES.items():
        stride = 1 if b0 else 2
        branches = []
        if b0:
            branches.append(_conv_bn(keras, x, b0, 1, 1, f"{name}_b0_1x1"))
        br1 = _conv_bn(keras, x, b1r, 1, 1, f"{name}_b1_1x1")
        branches.append(_conv_bn(keras, br1, b1, 3, stride, f"{name}_b1_3x3"))
        br2 = _conv_bn(keras, x, b2r, 1, 1, f"{name}_b2_1x1")
        br2 = _conv_bn(keras, br2, b2, 3, 1, f"{name}_b2_3x3a")
        branches.append(_conv_bn(keras, br2, b2, 3, stride, f"{name}_b2_3x3b"))
        Pool = L.AveragePooling2D if pool == "avg" else L.MaxPooling2D
        br3 = Pool(3, stride, padding="same", name=f"{name}_b3_pool")(x)
        if proj:
            br3 = _conv_bn(keras, br3, proj, 1, 1, f"{name}_b3_1x1")
        branches.append(br3)
        x = L.Concatenate(name=name)(branches)
    out = _logits(keras, x, num_classes, keep=0.8)
    return keras.Model(inp, out, name="inception_v2")


# --------------------------------------------------------------------------------------
# keras.applications models.


def _application(factory: str) -> Callable[[int], Any]:
    """A builder of ``keras.applications.<factory>`` (random weights, logits output)."""

    def build(size: int, num_classes: int = 1000) -> Any:
        _, keras = load_tensorflow()
        make = getattr(keras.applications, factory)
        return make(
            include_top=True, weights=None, input_shape=(size, size, 3),
            classes=num_classes, classifier_activation=None,
        )

    build.__name__ = factory
    build.__doc__ = f"``keras.applications.{factory}`` with random weights and logits output."
    return build


# --------------------------------------------------------------------------------------
# Sequence models (PACE).


def seq2seq_lstm(size: int = 16, vocab: int = 32000, units: int = 512, layers: int = 2) -> Any:
    """Sequence-to-sequence LSTM (Sutskever, Vinyals & Le, "Sequence to sequence learning
    with neural networks", NeurIPS 2014), one of PACE's four models (Sec. VI).

    An encoder of ``layers`` stacked LSTMs reads the source; a decoder of as many LSTMs,
    started from the encoder's final states, reads the shifted target (teacher forcing);
    a dense layer maps to the target vocabulary. The paper's model is larger (4 layers of
    1000 cells, vocabularies of 160 k and 80 k words); ours keeps the structure with
    ``layers`` = 2, 512 cells and a 32 k vocabulary (57.7 M parameters). The recurrences
    are unrolled (``unroll=True``), so every time step's ops are explicit graph ops, as in
    the static graphs TicTac and PACE scheduled.
    """
    _, keras = load_tensorflow()
    L = keras.layers
    src = keras.Input((size,), dtype="int32", name="source")
    tgt = keras.Input((size,), dtype="int32", name="target_in")
    x = L.Embedding(vocab, units, name="src_embedding")(src)
    states = []
    for i in range(layers):
        x, h, c = L.LSTM(
            units, return_sequences=True, return_state=True, unroll=True, name=f"encoder_{i}"
        )(x)
        states.append([h, c])
    y = L.Embedding(vocab, units, name="tgt_embedding")(tgt)
    for i in range(layers):
        y = L.LSTM(units, return_sequences=True, unroll=True, name=f"decoder_{i}")(
            y, initial_state=states[i]
        )
    out = L.Dense(vocab, name="projection")(y)
    return keras.Model([src, tgt], out, name="seq2seq_lstm")


def transformer(
    size: int = 16, vocab: int = 32000, d_model: int = 512, layers: int = 6, heads: int = 8,
    d_ff: int = 2048, dropout: float = 0.1,
) -> Any:
    """The Transformer "base" model (Vaswani et al., "Attention is all you need", NeurIPS
    2017, Sec. 3 and Table 3), one of PACE's four models (Sec. VI).

    Six encoder and six decoder layers, d_model 512, 8 heads, feed-forward 2048, dropout
    0.1, post-layer normalisation, sinusoidal positions, and one embedding matrix shared by
    the encoder and decoder inputs and the pre-softmax projection (Sec. 3.4). The
    vocabulary is 32 k (the paper's English-French word-piece size); 60.5 M parameters.
    """
    _, keras = load_tensorflow()
    import numpy as np

    L = keras.layers
    ops = keras.ops

    pos = np.arange(size)[:, None] / np.power(10000.0, (2 * (np.arange(d_model) // 2)) / d_model)
    pos[:, 0::2] = np.sin(pos[:, 0::2])
    pos[:, 1::2] = np.cos(pos[:, 1::2])
    positions = pos.astype("float32")[None]

    class TiedLogits(L.Layer):  # type: ignore[name-defined]
        """Logits through the transposed shared embedding matrix (Sec. 3.4)."""

        def __init__(self, embedding: Any, **kw: Any) -> None:
            super().__init__(**kw)
            self.embedding = embedding

        def call(self, x: Any) -> Any:
            return ops.matmul(x, ops.transpose(self.embedding.embeddings))

    class Embed(L.Layer):  # type: ignore[name-defined]
        """Scaled shared embedding plus sinusoidal positions (Sec. 3.4-3.5)."""

        def __init__(self, embedding: Any, **kw: Any) -> None:
            super().__init__(**kw)
            self.embedding = embedding

        def call(self, tokens: Any) -> Any:
            return self.embedding(tokens) * float(np.sqrt(d_model)) + positions

    shared = L.Embedding(vocab, d_model, name="shared_embedding")
    src = keras.Input((size,), dtype="int32", name="source")
    tgt = keras.Input((size,), dtype="int32", name="target_in")

    def sublayer(x: Any, y: Any, name: str) -> Any:
        y = L.Dropout(dropout, name=f"{name}_dropout")(y)
        return L.LayerNormalization(epsilon=1e-6, name=f"{name}_norm")(L.Add()([x, y]))

    def feed_forward(x: Any, name: str) -> Any:
        h = L.Dense(d_ff, activation="relu", name=f"{name}_ff1")(x)
        return sublayer(x, L.Dense(d_model, name=f"{name}_ff2")(h), f"{name}_ff")

    x = L.Dropout(dropout, name="enc_in_dropout")(Embed(shared, name="enc_embed")(src))
    for i in range(layers):
        att = L.MultiHeadAttention(heads, d_model // heads, name=f"enc{i}_self_att")(x, x)
        x = feed_forward(sublayer(x, att, f"enc{i}_self"), f"enc{i}")
    y = L.Dropout(dropout, name="dec_in_dropout")(Embed(shared, name="dec_embed")(tgt))
    for i in range(layers):
        att = L.MultiHeadAttention(heads, d_model // heads, name=f"dec{i}_self_att")(
            y, y, use_causal_mask=True
        )
        y = sublayer(y, att, f"dec{i}_self")
        att = L.MultiHeadAttention(heads, d_model // heads, name=f"dec{i}_cross_att")(y, x)
        y = feed_forward(sublayer(y, att, f"dec{i}_cross"), f"dec{i}")
    out = TiedLogits(shared, name="logits")(y)
    return keras.Model([src, tgt], out, name="transformer")


# --------------------------------------------------------------------------------------
# Thesis analogs (TensorFlow-Examples, the graphs of Laich's thesis Sec. 6.1).


def thesis_cnn(size: int = 28, num_classes: int = 10) -> Any:
    """The thesis' convolutional network (Laich 2017, Sec. 6.1; TensorFlow-Examples
    ``convolutional_network``): MNIST 28x28x1, conv 5x5x32 and 5x5x64 each with 2x2 max
    pooling, a 1024-unit dense layer, dropout 0.25, 10 classes (3.27 M parameters)."""
    _, keras = load_tensorflow()
    L = keras.layers
    inp = keras.Input((size, size, 1), name="images")
    x = L.Conv2D(32, 5, padding="same", activation="relu", name="conv1")(inp)
    x = L.MaxPooling2D(2, name="pool1")(x)
    x = L.Conv2D(64, 5, padding="same", activation="relu", name="conv2")(x)
    x = L.MaxPooling2D(2, name="pool2")(x)
    x = L.Flatten(name="flatten")(x)
    x = L.Dense(1024, activation="relu", name="fc1")(x)
    x = L.Dropout(0.25, name="dropout")(x)
    out = L.Dense(num_classes, name="out")(x)
    return keras.Model(inp, out, name="thesis_cnn")


def thesis_rnn(size: int = 28, num_classes: int = 10, units: int = 128) -> Any:
    """The thesis' recurrent network (Laich 2017, Sec. 6.1; TensorFlow-Examples
    ``recurrent_network``): an MNIST image read row by row (28 steps of 28 pixels) by a
    128-cell LSTM, statically unrolled, then a dense layer to 10 classes."""
    _, keras = load_tensorflow()
    L = keras.layers
    inp = keras.Input((size, 28), name="sequences")
    x = L.LSTM(units, unroll=True, name="lstm")(inp)
    out = L.Dense(num_classes, name="out")(x)
    return keras.Model(inp, out, name="thesis_rnn")


def thesis_dynamic_rnn(size: int = 20, num_classes: int = 2, units: int = 64) -> Any:
    """The thesis' dynamic RNN (Laich 2017, Sec. 6.1; TensorFlow-Examples ``dynamic_rnn``):
    sequences of up to 20 one-dimensional steps with per-example lengths, a 64-cell LSTM
    run as a loop that masks steps past each length, and a dense layer to 2 classes.

    The loop is TensorFlow 2's functional ``While`` op (TensorFlow 1's ``dynamic_rnn``
    expanded it into Enter/Merge/Switch/NextIteration ops), so the traced graph has one
    node for the forward loop and one for its gradient; each carries the summed time of the
    ops its loop body ran (see :mod:`commsched.model.traced`).
    """
    _, keras = load_tensorflow()
    L = keras.layers
    ops = keras.ops
    seq = keras.Input((size, 1), name="sequences")
    lengths = keras.Input((), dtype="int32", name="lengths")

    class LengthMask(L.Layer):  # type: ignore[name-defined]
        """Boolean [batch, time] mask: step t of example b is valid if t < lengths[b]."""

        def call(self, lens: Any) -> Any:
            return ops.arange(size)[None, :] < ops.expand_dims(lens, 1)

    mask = LengthMask(name="mask")(lengths)
    x = L.LSTM(units, name="lstm")(seq, mask=mask)
    out = L.Dense(num_classes, name="out")(x)
    return keras.Model([seq, lengths], out, name="thesis_dynamic_rnn")


# --------------------------------------------------------------------------------------
# The registry.

_TICTAC = "Hashemi, Jyothi & Campbell, TicTac, SysML 2019, Table 1"
_PACE = "Bao, Peng, Chen & Wu, PACE, INFOCOM 2020, Sec. VI"
_THESIS = "Laich, B.Sc. thesis, Stuttgart 2017, Sec. 6.1"


def _image(
    name: str, title: str, reference: str, build: Callable[[int], Any], *, size: int,
    paper_size: int, min_size: int, batch: int, families: tuple[str, ...] = ("tictac",),
    note: str = "",
) -> ModelSpec:
    return ModelSpec(
        name=name, title=title, reference=reference, families=families, size=size,
        paper_size=paper_size, min_size=min_size, num_classes=1000, standard_batch=batch,
        build=build, note=note,
    )


_KERAS_NOTE = (
    "keras.applications differs from the TF-slim model TicTac traced: convolutions carry "
    "biases and batch norm learns gamma and beta (slim: no conv bias, beta only)"
)

MODELS: dict[str, ModelSpec] = {
    s.name: s
    for s in [
        _image("alexnet_v2", "AlexNet v2", "Krizhevsky, arXiv:1404.5997, 2014", alexnet_v2,
               size=224, paper_size=224, min_size=224, batch=4),
        _image("inception_v1", "Inception v1", "Szegedy et al., CVPR 2015", inception_v1,
               size=112, paper_size=224, min_size=32, batch=4),
        _image("inception_v2", "Inception v2", "Ioffe & Szegedy, ICML 2015", inception_v2,
               size=112, paper_size=224, min_size=32, batch=4),
        _image("inception_v3", "Inception v3", "Szegedy et al., CVPR 2016",
               _application("InceptionV3"), size=139, paper_size=299, min_size=75, batch=4,
               note="keras.applications InceptionV3 has no auxiliary classifier and 1000 "
               "classes; TF-slim's (TicTac) has the auxiliary head and 1001 classes"),
        _image("resnet50_v1", "ResNet-50 v1", "He et al., CVPR 2016",
               _application("ResNet50"), size=112, paper_size=224, min_size=32, batch=4,
               families=("tictac", "pace"), note=_KERAS_NOTE),
        _image("resnet101_v1", "ResNet-101 v1", "He et al., CVPR 2016",
               _application("ResNet101"), size=112, paper_size=224, min_size=32, batch=4,
               note=_KERAS_NOTE),
        _image("resnet50_v2", "ResNet-50 v2", "He et al., ECCV 2016",
               _application("ResNet50V2"), size=112, paper_size=224, min_size=32, batch=4,
               note=_KERAS_NOTE),
        _image("resnet101_v2", "ResNet-101 v2", "He et al., ECCV 2016",
               _application("ResNet101V2"), size=112, paper_size=224, min_size=32, batch=4,
               note=_KERAS_NOTE),
        _image("vgg16", "VGG-16", "Simonyan & Zisserman, ICLR 2015",
               _application("VGG16"), size=224, paper_size=224, min_size=224, batch=2,
               families=("tictac", "pace")),
        _image("vgg19", "VGG-19", "Simonyan & Zisserman, ICLR 2015",
               _application("VGG19"), size=224, paper_size=224, min_size=224, batch=2),
        ModelSpec(
            name="seq2seq_lstm", title="Seq2Seq LSTM", reference="Sutskever et al., NeurIPS 2014",
            families=("pace",), size=16, paper_size=16, min_size=1, num_classes=32000,
            standard_batch=4, build=seq2seq_lstm, input_kind="translation",
            note="2+2 layers of 512 cells, 32k vocabulary (the paper: 4+4 layers of 1000)",
        ),
        ModelSpec(
            name="transformer", title="Transformer (base)",
            reference="Vaswani et al., NeurIPS 2017",
            families=("pace",), size=16, paper_size=16, min_size=1, num_classes=32000,
            standard_batch=4, build=transformer, input_kind="translation",
        ),
        ModelSpec(
            name="thesis_cnn", title="CNN (thesis)", reference=_THESIS, families=("thesis",),
            size=28, paper_size=28, min_size=28, num_classes=10, standard_batch=8,
            build=thesis_cnn, features=1,
        ),
        ModelSpec(
            name="thesis_rnn", title="RNN (thesis)", reference=_THESIS, families=("thesis",),
            size=28, paper_size=28, min_size=28, num_classes=10, standard_batch=8,
            build=thesis_rnn, input_kind="sequence", features=28,
        ),
        ModelSpec(
            name="thesis_dynamic_rnn", title="Dynamic RNN (thesis)", reference=_THESIS,
            families=("thesis",), size=20, paper_size=20, min_size=1, num_classes=2,
            standard_batch=8, build=thesis_dynamic_rnn, input_kind="sequence_lengths",
            features=1,
        ),
    ]
}


def names() -> list[str]:
    """The names of every model of the zoo, in registry order."""
    return list(MODELS)


def get(name: str) -> ModelSpec:
    """The model called ``name``; an unknown name is an error that lists the known ones."""
    try:
        return MODELS[name]
    except KeyError:
        raise CommschedError(
            f"unknown model {name!r}; known models: {', '.join(MODELS)}"
        ) from None
