"""The model zoo: every network commsched traces, each a small documented Keras builder.

Three groups of models, named as in the papers that use them:

* TicTac's ten (Hashemi, Jyothi & Campbell, SysML 2019, Table 1): ``alexnet_v2``,
  ``inception_v1``, ``inception_v2``, ``inception_v3``, ``resnet50_v1``, ``resnet50_v2``,
  ``resnet101_v1``, ``resnet101_v2``, ``vgg16``, ``vgg19``. TicTac traced the TF-slim
  definitions of TensorFlow 1.8, so we build those in Keras, layer by layer: bias-free
  convolutions with beta-only batch norm, TF-slim's widths, the ResNets' 1x1-conv logits,
  Inception v3's auxiliary head and 1001 classes. Their parameter tensors and MiB equal
  Table 1's. VGG-16 and VGG-19 are ``keras.applications`` models, whose tensors equal
  TF-slim's. (The PyPI package ``tf-slim`` 1.1 ships these nets, but its layers need the
  legacy ``tf_keras`` layers that TensorFlow 2.21's ``tf-keras`` no longer has, and its
  ``resnet_arg_scope`` learns a batch-norm gamma that TicTac's ResNets do not have.)
* PACE's four (Bao, Peng, Chen & Wu, INFOCOM 2020, Sec. VI): ``vgg16``,
  ``resnet50_mxnet`` (MXNet's symbolic ResNet-50, the one PACE trained: Table II's 157
  all-reduce tensors, where TF-slim's ResNet-50 v1 has 108), ``seq2seq_lstm`` and
  ``transformer``.
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
from commsched.registry import Registry

__all__ = [
    "MISSING_TF",
    "MODELS",
    "RESNET_UNITS",
    "InputSpec",
    "ModelSpec",
    "get",
    "load_tensorflow",
    "main_logits",
    "names",
    "training_loss",
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
    ``labels(batch, size)``; a model with auxiliary classifiers (TF-slim's Inception v3)
    returns ``[logits, aux_logits, ...]`` and :func:`training_loss` adds the auxiliary
    losses weighted by ``aux_loss_weight``.
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
    aux_loss_weight: float = 0.0

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


def main_logits(outputs: Any) -> Any:
    """The logits of a zoo model's output.

    Parameters
    ----------
    outputs : tensor or list of tensors
        What the model returned: its logits, or ``[logits, aux_logits, ...]`` (TF-slim's
        Inception v3, Szegedy et al., CVPR 2016, Sec. 4; :attr:`ModelSpec.aux_loss_weight`).

    Returns
    -------
    tensor
        The (main) logits.
    """
    return outputs[0] if isinstance(outputs, (list, tuple)) else outputs


def training_loss(tf: ModuleType, spec: ModelSpec, outputs: Any, labels: Any) -> Any:
    """The training loss of a zoo model: mean softmax cross-entropy of its logits, plus
    ``spec.aux_loss_weight`` times that of each auxiliary logits.

    TF-slim's ``train_image_classifier`` adds Inception v3's auxiliary loss with weight 0.4
    (Szegedy et al., CVPR 2016, Sec. 4: the auxiliary classifier acts as a regulariser),
    so its training graph, and TicTac's (SysML 2019, Appendix A, Table 1), has the
    gradients of the auxiliary head.

    Parameters
    ----------
    tf : module
        TensorFlow (:func:`load_tensorflow`).
    spec : ModelSpec
        The model.
    outputs : tensor or list of tensors
        What the model returned for a batch.
    labels : tensor
        The batch's labels (:meth:`ModelSpec.labels`).

    Returns
    -------
    tensor
        The scalar loss.
    """
    outs = list(outputs) if isinstance(outputs, (list, tuple)) else [outputs]

    def xent(logits: Any) -> Any:
        return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=labels, logits=logits))

    loss = xent(outs[0])
    for aux in outs[1:]:
        loss = loss + spec.aux_loss_weight * xent(aux)
    return loss


# --------------------------------------------------------------------------------------
# Hand-built image models (TF-slim widths).


def _conv_bn(
    keras: ModuleType, x: Any, filters: int, kernel: int | tuple[int, int], stride: int,
    name: str, *, padding: str = "same", relu: bool = True, epsilon: float = 1e-3,
) -> Any:
    """TF-slim's ``conv2d`` with ``normalizer_fn=batch_norm``: no bias, batch norm with
    beta only (slim's ``scale=False`` default), then ReLU unless ``relu`` is false."""
    L = keras.layers
    x = L.Conv2D(filters, kernel, strides=stride, padding=padding, use_bias=False, name=name)(x)
    x = L.BatchNormalization(scale=False, epsilon=epsilon, name=f"{name}_bn")(x)
    return L.ReLU(name=f"{name}_relu")(x) if relu else x


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
# TF-slim ResNets (the definitions TicTac traced: SysML 2019, Appendix A, Table 1).

#: Bottleneck units per block of TF-slim's ``resnet_v{1,2}_{50,101,152}``.
RESNET_UNITS: dict[int, tuple[int, int, int, int]] = {
    50: (3, 4, 6, 3), 101: (3, 4, 23, 3), 152: (3, 8, 36, 3),
}
_RESNET_EPS = 1e-5  # TF-slim's resnet_arg_scope: batch_norm_epsilon


def _conv2d_same(
    keras: ModuleType, x: Any, filters: int, kernel: int, stride: int, name: str,
    *, bn: bool = True, relu: bool = True,
) -> Any:
    """TF-slim's ``resnet_utils.conv2d_same``: 'SAME' output size independent of the input
    size, by explicit zero padding and a 'VALID' convolution when ``stride`` > 1. With
    ``bn`` false the convolution has a bias and no normalisation."""
    L = keras.layers
    padding = "same"
    if stride > 1:
        begin = (kernel - 1) // 2
        x = L.ZeroPadding2D(((begin, kernel - 1 - begin),) * 2, name=f"{name}_pad")(x)
        padding = "valid"
    if bn:
        return _conv_bn(keras, x, filters, kernel, stride, name, padding=padding, relu=relu,
                        epsilon=_RESNET_EPS)
    return L.Conv2D(filters, kernel, strides=stride, padding=padding, name=name)(x)


def _subsample(keras: ModuleType, x: Any, stride: int, name: str) -> Any:
    """TF-slim's ``resnet_utils.subsample``: a 1x1 max pool of ``stride`` (identity at 1)."""
    return x if stride == 1 else keras.layers.MaxPooling2D(1, stride, name=name)(x)


def _resnet_blocks(depth: int) -> list[tuple[str, int, int]]:
    """Every bottleneck unit of TF-slim's ResNet-``depth``: (name, base depth, stride).

    Four blocks of base depths 64, 128, 256, 512 (output depth four times that); blocks
    1-3 downsample by 2 in their last unit, block 4 not at all (``resnet_v1_block``).
    """
    if depth not in RESNET_UNITS:
        raise CommschedError(f"no TF-slim ResNet of depth {depth}; known: "
                             f"{', '.join(map(str, RESNET_UNITS))}")
    units = []
    for b, (base, n, stride) in enumerate(zip((64, 128, 256, 512), RESNET_UNITS[depth],
                                              (2, 2, 2, 1), strict=True)):
        units += [(f"block{b + 1}_unit{u + 1}", base, stride if u == n - 1 else 1)
                  for u in range(n)]
    return units


def _resnet_logits(keras: ModuleType, x: Any, num_classes: int) -> Any:
    """TF-slim's ResNet head: global mean (``pool5``), 1x1 conv with bias, squeeze."""
    L = keras.layers
    x = L.GlobalAveragePooling2D(keepdims=True, name="pool5")(x)
    x = L.Conv2D(num_classes, 1, name="logits")(x)
    return L.Flatten(name="squeeze")(x)


def resnet_v1(depth: int, size: int = 224, num_classes: int = 1000) -> Any:
    """TF-slim's ``resnet_v1_<depth>`` (He, Zhang, Ren & Sun, "Deep residual learning for
    image recognition", CVPR 2016, Table 1), the ResNet v1 TicTac traced.

    Root: 7x7/2 convolution to 64 channels and a 3x3/2 max pool. Bottleneck units
    (1x1, 3x3 carrying the unit's stride, 1x1 to four times the base depth; the shortcut is
    a 1x1 convolution where the depth changes, else the identity or a strided 1x1 max
    pool), ReLU after the sum. Every convolution is bias-free and followed by batch norm
    with beta only (TF-slim's ``resnet_arg_scope`` of TensorFlow 1.8 has no
    ``batch_norm_scale``, so ``scale=False``); the logits are a 1x1 convolution with bias
    after a global mean.

    Parameter tensors: the root, 3 per unit and 4 shortcuts are convolutions with a
    kernel and a beta each, plus the logits' kernel and bias. ResNet-50 (16 units):
    2 (1 + 48 + 4) + 2 = 108; ResNet-101 (33 units): 2 (1 + 99 + 4) + 2 = 210, as in
    TicTac's Table 1 (SysML 2019, Appendix A). tf-slim 1.1 (PyPI, 2020) turned
    ``batch_norm_scale`` on, which adds a gamma per convolution (161 for ResNet-50).

    Parameters
    ----------
    depth : int
        50, 101 or 152 (:data:`RESNET_UNITS`).
    size : int
        Input image side in pixels (32 or more; the paper's is 224).
    num_classes : int
        Classes of the logits (TF-slim's ResNets: 1000).

    Returns
    -------
    keras.Model
        The uncompiled model, images to logits.

    Raises
    ------
    CommschedError
        If ``depth`` is not one of TF-slim's, or TensorFlow is missing.
    """
    blocks = _resnet_blocks(depth)
    _, keras = load_tensorflow()
    L = keras.layers
    inp = keras.Input((size, size, 3), name="images")
    x = _conv2d_same(keras, inp, 64, 7, 2, "conv1")
    x = L.MaxPooling2D(3, 2, padding="same", name="pool1")(x)
    depth_in = 64
    for name, base, stride in blocks:
        if base * 4 == depth_in:
            shortcut = _subsample(keras, x, stride, f"{name}_shortcut")
        else:
            shortcut = _conv_bn(keras, x, base * 4, 1, stride, f"{name}_shortcut",
                                relu=False, epsilon=_RESNET_EPS)
        r = _conv_bn(keras, x, base, 1, 1, f"{name}_conv1", epsilon=_RESNET_EPS)
        r = _conv2d_same(keras, r, base, 3, stride, f"{name}_conv2")
        r = _conv_bn(keras, r, base * 4, 1, 1, f"{name}_conv3", relu=False,
                     epsilon=_RESNET_EPS)
        x = L.ReLU(name=f"{name}_relu")(L.Add(name=f"{name}_add")([shortcut, r]))
        depth_in = base * 4
    return keras.Model(inp, _resnet_logits(keras, x, num_classes), name=f"resnet{depth}_v1")


def resnet_v2(depth: int, size: int = 224, num_classes: int = 1000) -> Any:
    """TF-slim's ``resnet_v2_<depth>`` (He, Zhang, Ren & Sun, "Identity mappings in deep
    residual networks", ECCV 2016), the pre-activation ResNet TicTac traced.

    Root: a 7x7/2 convolution with bias and no normalisation, then a 3x3/2 max pool. Each
    bottleneck unit starts with batch norm and ReLU of its input (``preact``); the
    shortcut is a 1x1 convolution of ``preact`` with bias where the depth changes, else the
    identity or a strided 1x1 max pool of the input; the residual is 1x1 and 3x3 (the
    unit's stride) convolutions each followed by batch norm and ReLU, and a last 1x1
    convolution with bias and no normalisation. After the blocks, batch norm and ReLU
    (``postnorm``), a global mean and 1x1 logits with bias. Batch norms have beta only.

    Parameter tensors: root 2 (kernel, bias); per unit 7 (preact beta; conv1 and conv2
    kernel and beta; conv3 kernel and bias); 4 shortcuts of 2; postnorm 1; logits 2.
    ResNet-50 (16 units): 2 + 112 + 8 + 1 + 2 = 125; ResNet-101 (33 units): 2 + 231 + 8 +
    1 + 2 = 244, as in TicTac's Table 1 (SysML 2019, Appendix A); ResNet-152 (50 units):
    363, as in TicTac SysML 2019, Sec. 2.2.

    Parameters, returns and errors are those of :func:`resnet_v1`.
    """
    blocks = _resnet_blocks(depth)
    _, keras = load_tensorflow()
    L = keras.layers

    def bn_relu(x: Any, name: str) -> Any:
        x = L.BatchNormalization(scale=False, epsilon=_RESNET_EPS, name=name)(x)
        return L.ReLU(name=f"{name}_relu")(x)

    inp = keras.Input((size, size, 3), name="images")
    x = _conv2d_same(keras, inp, 64, 7, 2, "conv1", bn=False)
    x = L.MaxPooling2D(3, 2, padding="same", name="pool1")(x)
    depth_in = 64
    for name, base, stride in blocks:
        preact = bn_relu(x, f"{name}_preact")
        if base * 4 == depth_in:
            shortcut = _subsample(keras, x, stride, f"{name}_shortcut")
        else:
            shortcut = L.Conv2D(base * 4, 1, strides=stride, name=f"{name}_shortcut")(preact)
        r = _conv_bn(keras, preact, base, 1, 1, f"{name}_conv1", epsilon=_RESNET_EPS)
        r = _conv2d_same(keras, r, base, 3, stride, f"{name}_conv2")
        r = L.Conv2D(base * 4, 1, name=f"{name}_conv3")(r)
        x = L.Add(name=f"{name}_add")([shortcut, r])
        depth_in = base * 4
    x = bn_relu(x, "postnorm")
    return keras.Model(inp, _resnet_logits(keras, x, num_classes), name=f"resnet{depth}_v2")


def resnet50_v1(size: int = 224, num_classes: int = 1000) -> Any:
    """TF-slim's ResNet-50 v1 (:func:`resnet_v1`, 108 parameter tensors, 97.39 MiB)."""
    return resnet_v1(50, size, num_classes)


def resnet101_v1(size: int = 224, num_classes: int = 1000) -> Any:
    """TF-slim's ResNet-101 v1 (:func:`resnet_v1`, 210 parameter tensors, 169.74 MiB)."""
    return resnet_v1(101, size, num_classes)


def resnet50_v2(size: int = 224, num_classes: int = 1000) -> Any:
    """TF-slim's ResNet-50 v2 (:func:`resnet_v2`, 125 parameter tensors, 97.45 MiB)."""
    return resnet_v2(50, size, num_classes)


def resnet101_v2(size: int = 224, num_classes: int = 1000) -> Any:
    """TF-slim's ResNet-101 v2 (:func:`resnet_v2`, 244 parameter tensors, 169.86 MiB)."""
    return resnet_v2(101, size, num_classes)


def resnet50_mxnet(size: int = 224, num_classes: int = 1000) -> Any:
    """MXNet's symbolic ResNet-50 (``example/image-classification/symbols/resnet.py``, the
    training scripts PACE cites, Bao et al., INFOCOM 2020, Sec. VI and Table II): PACE's
    ResNet-50.

    A pre-activation ResNet (He et al., ECCV 2016) as MXNet's example writes it: batch norm
    of the input image (``bn_data``), a bias-free 7x7/2 convolution with batch norm and
    ReLU, a 3x3/2 max pool; bottleneck units of 3, 4, 6, 3 (batch norm and ReLU before each
    of three bias-free convolutions, 1x1, 3x3 carrying the stride, 1x1 to four times the
    base depth; the first unit of each stage has a bias-free 1x1 shortcut convolution of
    the first ReLU's output, stride 2 from stage 2 on, the other units the identity); a
    final batch norm and ReLU, global average pool and a dense layer. Every batch norm
    learns a gamma and a beta (MXNet fixes ``bn_data``'s gamma at 1 but still holds it as
    a parameter, whose gradient Horovod all-reduces; ours is trainable).

    Parameter tensors: 51 batch norms x 2 + 53 convolutions + the dense weight and bias =
    157 of 25.55 M values, PACE's Table II (157 all-reduce operators, 25.5 M).

    Parameters
    ----------
    size : int
        Input image side in pixels (32 or more; the paper's is 224).
    num_classes : int
        Classes of the dense layer (ImageNet: 1000).

    Returns
    -------
    keras.Model
        The uncompiled model, images to logits.
    """
    _, keras = load_tensorflow()
    L = keras.layers

    def bn_relu(x: Any, name: str) -> Any:
        x = L.BatchNormalization(epsilon=2e-5, momentum=0.9, name=f"{name}_bn")(x)
        return L.ReLU(name=f"{name}_relu")(x)

    def conv(x: Any, filters: int, kernel: int, stride: int, name: str) -> Any:
        return L.Conv2D(filters, kernel, strides=stride, padding="same", use_bias=False,
                        name=name)(x)

    inp = keras.Input((size, size, 3), name="images")
    x = L.BatchNormalization(epsilon=2e-5, momentum=0.9, name="bn_data")(inp)
    x = bn_relu(conv(x, 64, 7, 2, "conv0"), "stage0")
    x = L.MaxPooling2D(3, 2, padding="same", name="pool0")(x)
    for i, (base, units) in enumerate(zip((64, 128, 256, 512), RESNET_UNITS[50], strict=True)):
        for u in range(units):
            name, stride = f"stage{i + 1}_unit{u + 1}", 2 if i and not u else 1
            act1 = bn_relu(x, f"{name}_1")
            shortcut = conv(act1, base * 4, 1, stride, f"{name}_sc") if u == 0 else x
            r = bn_relu(conv(act1, base, 1, 1, f"{name}_conv1"), f"{name}_2")
            r = bn_relu(conv(r, base, 3, stride, f"{name}_conv2"), f"{name}_3")
            x = L.Add(name=f"{name}_add")([conv(r, base * 4, 1, 1, f"{name}_conv3"), shortcut])
    x = L.GlobalAveragePooling2D(name="pool1")(bn_relu(x, "final"))
    return keras.Model(inp, L.Dense(num_classes, name="fc1")(x), name="resnet50_mxnet")


# --------------------------------------------------------------------------------------
# TF-slim Inception v3 (with its auxiliary head, 1001 classes).


def inception_v3(size: int = 299, num_classes: int = 1001) -> Any:
    """TF-slim's ``inception_v3`` (Szegedy, Vanhoucke, Ioffe, Shlens & Wojna, "Rethinking
    the Inception architecture for computer vision", CVPR 2016), the model TicTac traced:
    with the auxiliary classifier and 1001 classes (ImageNet plus a background class).

    Stem: 3x3/2, 3x3, 3x3 (SAME) convolutions, 3x3/2 max pool, 1x1 and 3x3 convolutions,
    3x3/2 max pool (all VALID unless said). Modules Mixed_5b-5d (35x35), 6a (grid
    reduction), 6b-6e (17x17, factorised 1x7/7x1), 7a (reduction), 7b-7c (expanded 1x3/3x1
    filter banks), with TF-slim's widths. Every convolution is bias-free with batch norm
    (beta only, epsilon 0.001) and ReLU. Auxiliary head on Mixed_6e: 5x5/3 average pool,
    1x1 convolution to 128, 5x5 convolution to 768, 1x1 logits with bias. Main head:
    average pool over the whole map, dropout (keep 0.8), 1x1 logits with bias.

    The model returns ``[logits, aux_logits]``; the training loss weights the auxiliary
    one by :attr:`ModelSpec.aux_loss_weight` (TF-slim's ``train_image_classifier``: 0.4).
    TF-slim shrinks the auxiliary 5x5 kernel to the map where an input smaller than 299
    pixels leaves a map under 5x5; we keep 5x5 (with SAME padding there), so the
    parameters are those of the paper's model at any input size.

    Parameter tensors: 94 convolutions in the body and 2 in the auxiliary head, each a
    kernel and a beta, plus two logits layers' kernel and bias: 2 (94 + 2) + 4 = 196, as
    in TicTac's Table 1 (SysML 2019, Appendix A). Input size 107 pixels or more.

    Parameters
    ----------
    size : int
        Input image side in pixels (the paper's is 299).
    num_classes : int
        Classes of both logits layers (TF-slim's: 1001).

    Returns
    -------
    keras.Model
        The uncompiled model, images to ``[logits, aux_logits]``.
    """
    _, keras = load_tensorflow()
    L = keras.layers

    def conv(x: Any, filters: int, kernel: int | tuple[int, int], name: str,
             stride: int = 1, padding: str = "same") -> Any:
        return _conv_bn(keras, x, filters, kernel, stride, name, padding=padding)

    def avg_proj(x: Any, filters: int, name: str) -> Any:
        x = L.AveragePooling2D(3, 1, padding="same", name=f"{name}_b3_pool")(x)
        return conv(x, filters, 1, f"{name}_b3_1x1")

    inp = keras.Input((size, size, 3), name="images")
    x = conv(inp, 32, 3, "conv2d_1a_3x3", stride=2, padding="valid")
    x = conv(x, 32, 3, "conv2d_2a_3x3", padding="valid")
    x = conv(x, 64, 3, "conv2d_2b_3x3")
    x = L.MaxPooling2D(3, 2, name="maxpool_3a_3x3")(x)
    x = conv(x, 80, 1, "conv2d_3b_1x1", padding="valid")
    x = conv(x, 192, 3, "conv2d_4a_3x3", padding="valid")
    x = L.MaxPooling2D(3, 2, name="maxpool_5a_3x3")(x)
    for name, proj in (("mixed_5b", 32), ("mixed_5c", 64), ("mixed_5d", 64)):
        b1 = conv(conv(x, 48, 1, f"{name}_b1_1x1"), 64, 5, f"{name}_b1_5x5")
        b2 = conv(conv(x, 64, 1, f"{name}_b2_1x1"), 96, 3, f"{name}_b2_3x3a")
        b2 = conv(b2, 96, 3, f"{name}_b2_3x3b")
        x = L.Concatenate(name=name)(
            [conv(x, 64, 1, f"{name}_b0_1x1"), b1, b2, avg_proj(x, proj, name)])
    b0 = conv(x, 384, 3, "mixed_6a_b0_3x3", stride=2, padding="valid")
    b1 = conv(conv(x, 64, 1, "mixed_6a_b1_1x1"), 96, 3, "mixed_6a_b1_3x3a")
    b1 = conv(b1, 96, 3, "mixed_6a_b1_3x3b", stride=2, padding="valid")
    b2 = L.MaxPooling2D(3, 2, name="mixed_6a_b2_pool")(x)
    x = L.Concatenate(name="mixed_6a")([b0, b1, b2])
    for name, w in (("mixed_6b", 128), ("mixed_6c", 160), ("mixed_6d", 160),
                    ("mixed_6e", 192)):
        b1 = conv(conv(x, w, 1, f"{name}_b1_1x1"), w, (1, 7), f"{name}_b1_1x7")
        b1 = conv(b1, 192, (7, 1), f"{name}_b1_7x1")
        b2 = conv(x, w, 1, f"{name}_b2_1x1")
        for i, k in enumerate(((7, 1), (1, 7), (7, 1))):
            b2 = conv(b2, w, k, f"{name}_b2_{k[0]}x{k[1]}{'abc'[i]}")
        b2 = conv(b2, 192, (1, 7), f"{name}_b2_1x7d")
        x = L.Concatenate(name=name)(
            [conv(x, 192, 1, f"{name}_b0_1x1"), b1, b2, avg_proj(x, 192, name)])
    aux = L.AveragePooling2D(5, 3, name="aux_pool")(x)
    aux = conv(aux, 128, 1, "aux_1x1")
    aux = conv(aux, 768, 5, "aux_5x5", padding="valid" if aux.shape[1] >= 5 else "same")
    aux = L.Flatten(name="aux_squeeze")(L.Conv2D(num_classes, 1, name="aux_logits")(aux))
    b0 = conv(conv(x, 192, 1, "mixed_7a_b0_1x1"), 320, 3, "mixed_7a_b0_3x3", stride=2,
              padding="valid")
    b1 = conv(conv(x, 192, 1, "mixed_7a_b1_1x1"), 192, (1, 7), "mixed_7a_b1_1x7")
    b1 = conv(b1, 192, (7, 1), "mixed_7a_b1_7x1")
    b1 = conv(b1, 192, 3, "mixed_7a_b1_3x3", stride=2, padding="valid")
    b2 = L.MaxPooling2D(3, 2, name="mixed_7a_b2_pool")(x)
    x = L.Concatenate(name="mixed_7a")([b0, b1, b2])
    for name in ("mixed_7b", "mixed_7c"):
        b1 = conv(x, 384, 1, f"{name}_b1_1x1")
        b1 = L.Concatenate(name=f"{name}_b1")(
            [conv(b1, 384, (1, 3), f"{name}_b1_1x3"), conv(b1, 384, (3, 1), f"{name}_b1_3x1")])
        b2 = conv(conv(x, 448, 1, f"{name}_b2_1x1"), 384, 3, f"{name}_b2_3x3")
        b2 = L.Concatenate(name=f"{name}_b2")(
            [conv(b2, 384, (1, 3), f"{name}_b2_1x3"), conv(b2, 384, (3, 1), f"{name}_b2_3x1")])
        x = L.Concatenate(name=name)(
            [conv(x, 320, 1, f"{name}_b0_1x1"), b1, b2, avg_proj(x, 192, name)])
    return keras.Model(inp, [_logits(keras, x, num_classes, keep=0.8), aux],
                       name="inception_v3")


# --------------------------------------------------------------------------------------
# keras.applications models (VGG: same tensors and sizes as TF-slim's).


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


_SLIM_OPS_NOTE = (
    "built to TF-slim's definition, the one TicTac traced; op counts are Keras 3 / "
    "TensorFlow 2 graph ops, not TensorFlow 1.8's"
)

#: Every model of the zoo (:class:`~commsched.registry.Registry` of the family "model").
MODELS: Registry[ModelSpec] = Registry("model")
for _spec in [
        _image("alexnet_v2", "AlexNet v2", "Krizhevsky, arXiv:1404.5997, 2014", alexnet_v2,
               size=224, paper_size=224, min_size=224, batch=4),
        _image("inception_v1", "Inception v1", "Szegedy et al., CVPR 2015", inception_v1,
               size=112, paper_size=224, min_size=32, batch=4),
        _image("inception_v2", "Inception v2", "Ioffe & Szegedy, ICML 2015", inception_v2,
               size=112, paper_size=224, min_size=32, batch=4),
        ModelSpec(
            name="inception_v3", title="Inception v3", reference="Szegedy et al., CVPR 2016",
            families=("tictac",), size=139, paper_size=299, min_size=107, num_classes=1001,
            standard_batch=4, build=inception_v3, aux_loss_weight=0.4,
            note=_SLIM_OPS_NOTE + "; auxiliary head (loss weight 0.4) and 1001 classes",
        ),
        _image("resnet50_v1", "ResNet-50 v1", "He et al., CVPR 2016", resnet50_v1,
               size=112, paper_size=224, min_size=32, batch=4, note=_SLIM_OPS_NOTE),
        _image("resnet101_v1", "ResNet-101 v1", "He et al., CVPR 2016", resnet101_v1,
               size=112, paper_size=224, min_size=32, batch=4, note=_SLIM_OPS_NOTE),
        _image("resnet50_v2", "ResNet-50 v2", "He et al., ECCV 2016", resnet50_v2,
               size=112, paper_size=224, min_size=32, batch=4, note=_SLIM_OPS_NOTE),
        _image("resnet101_v2", "ResNet-101 v2", "He et al., ECCV 2016", resnet101_v2,
               size=112, paper_size=224, min_size=32, batch=4, note=_SLIM_OPS_NOTE),
        _image("vgg16", "VGG-16", "Simonyan & Zisserman, ICLR 2015",
               _application("VGG16"), size=224, paper_size=224, min_size=224, batch=2,
               families=("tictac", "pace")),
        _image("vgg19", "VGG-19", "Simonyan & Zisserman, ICLR 2015",
               _application("VGG19"), size=224, paper_size=224, min_size=224, batch=2),
        _image("resnet50_mxnet", "ResNet-50 (MXNet)", "He et al., ECCV 2016", resnet50_mxnet,
               size=112, paper_size=224, min_size=32, batch=4, families=("pace",),
               note="MXNet's symbolic ResNet-50, PACE's (Table II: 157 tensors)"),
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
]:
    MODELS.add(_spec.name, _spec)


def names() -> list[str]:
    """The names of every model of the zoo, in registry order."""
    return list(MODELS)


def get(name: str) -> ModelSpec:
    """The model called ``name``; an unknown name is an error that lists the known ones
    (:meth:`~commsched.registry.Registry.canonical`)."""
    return MODELS[name]
