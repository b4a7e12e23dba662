"""PyTorch definitions of the models the PyTorch tracer and the live DDP runs train.

No torchvision CPU wheel matches torch 2.13 on this machine (the registry's torchvision
0.28.0 is a CUDA build whose C++ ops do not load on the CPU torch), so the four image
models are written out here, layer for layer as torchvision defines them (``torchvision.
models``: ``alexnet``, ``vgg16``, ``resnet50``, ``inception_v3(aux_logits=True)``), with
the same parameter names, shapes and order. Their gradient sizes are those of FACTS.md's
table, checked in ``tests/test_torch_models.py``:

=============  ==========  ========
model          MiB (fp32)  tensors
=============  ==========  ========
alexnet        233.1       16
vgg16          527.8       32
resnet50       97.5        161
inception_v3   103.6       292
transformer    168.4       184
seq2seq_lstm   219.7       20
=============  ==========  ========

``transformer`` is ``torch.nn.Transformer`` base (d_model 512, 8 heads, 6+6 layers, FFN
2048), the model FACTS.md measured: no embeddings, its inputs are random source and target
activations. ``seq2seq_lstm`` follows the TensorFlow zoo's (:func:`commsched.trace.zoo.
seq2seq_lstm`): 2+2 LSTM layers of 512 cells, 32 k vocabulary (PyTorch's LSTM keeps two
bias vectors per layer, so it has 20 tensors). Weights are PyTorch's default random
initialisation from the caller's seed; nothing is downloaded.

Examples
--------
>>> import torch
>>> m = build("alexnet")
>>> sum(p.numel() for p in m.parameters())
61100840
>>> sorted(MODELS)[:3]
['alexnet', 'inception_v3', 'resnet50']
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from commsched.errors import CommschedError
from commsched.registry import Registry

__all__ = ["MODELS", "TorchModelSpec", "build", "get"]


# --------------------------------------------------------------------------------------
# AlexNet and VGG-16 (torchvision.models.alexnet / vgg16).


class AlexNet(nn.Module):
    """torchvision's AlexNet (Krizhevsky 2014 "one weird trick" variant), 1000 classes."""

    def __init__(self, num_classes: int = 1000) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 64, 11, 4, 2), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2),
            nn.Conv2d(64, 192, 5, padding=2), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2),
            nn.Conv2d(192, 384, 3, padding=1), nn.ReLU(inplace=True),
            nn.Conv2d(384, 256, 3, padding=1), nn.ReLU(inplace=True),
            nn.Conv2d(256, 256, 3, padding=1), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2),
        )
        self.avgpool = nn.AdaptiveAvgPool2d((6, 6))
        self.classifier = nn.Sequential(
            nn.Dropout(0.5), nn.Linear(256 * 36, 4096), nn.ReLU(inplace=True),
            nn.Dropout(0.5), nn.Linear(4096, 4096), nn.ReLU(inplace=True),
            nn.Linear(4096, num_classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.avgpool(self.features(x)), 1))


class VGG16(nn.Module):
    """torchvision's VGG-16 (configuration D, no batch norm), 1000 classes."""

    CFG = (64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M",
           512, 512, 512, "M")

    def __init__(self, num_classes: int = 1000) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        c = 3
        for v in self.CFG:
            if v == "M":
                layers.append(nn.MaxPool2d(2, 2))
            else:
                layers += [nn.Conv2d(c, int(v), 3, padding=1), nn.ReLU(inplace=True)]
                c = int(v)
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d((7, 7))
        self.classifier = nn.Sequential(
            nn.Linear(512 * 49, 4096), nn.ReLU(True), nn.Dropout(0.5),
            nn.Linear(4096, 4096), nn.ReLU(True), nn.Dropout(0.5),
            nn.Linear(4096, num_classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.avgpool(self.features(x)), 1))


# --------------------------------------------------------------------------------------
# ResNet-50 (torchvision.models.resnet50: v1.5, stride in the 3x3 convolution).


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, inplanes: int, planes: int, stride: int = 1,
                 downsample: nn.Module | None = None) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = nn.Conv2d(planes, planes * 4, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(planes * 4)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        idt = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        return self.relu(self.bn3(self.conv3(out)) + idt)


class ResNet50(nn.Module):
    """torchvision's ResNet-50 (blocks 3, 4, 6, 3), 1000 classes."""

    def __init__(self, num_classes: int = 1000) -> None:
        super().__init__()
        self.inplanes = 64
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        self.layer1 = self._layer(64, 3)
        self.layer2 = self._layer(128, 4, 2)
        self.layer3 = self._layer(256, 6, 2)
        self.layer4 = self._layer(512, 3, 2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(2048, num_classes)

    def _layer(self, planes: int, blocks: int, stride: int = 1) -> nn.Sequential:
        down = None
        if stride != 1 or self.inplanes != planes * 4:
            down = nn.Sequential(nn.Conv2d(self.inplanes, planes * 4, 1, stride, bias=False),
                                 nn.BatchNorm2d(planes * 4))
        layers = [Bottleneck(self.inplanes, planes, stride, down)]
        self.inplanes = planes * 4
        layers += [Bottleneck(self.inplanes, planes) for _ in range(1, blocks)]
        return nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


# --------------------------------------------------------------------------------------
# Inception v3 (torchvision.models.inception_v3(aux_logits=True)).


class BasicConv2d(nn.Module):
    def __init__(self, cin: int, cout: int, **kw: object) -> None:
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, bias=False, **kw)  # type: ignore[arg-type]
        self.bn = nn.BatchNorm2d(cout, eps=0.001)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(self.bn(self.conv(x)), inplace=True)


class InceptionA(nn.Module):
    def __init__(self, cin: int, pool_features: int) -> None:
        super().__init__()
        self.branch1x1 = BasicConv2d(cin, 64, kernel_size=1)
        self.branch5x5_1 = BasicConv2d(cin, 48, kernel_size=1)
        self.branch5x5_2 = BasicConv2d(48, 64, kernel_size=5, padding=2)
        self.branch3x3dbl_1 = BasicConv2d(cin, 64, kernel_size=1)
        self.branch3x3dbl_2 = BasicConv2d(64, 96, kernel_size=3, padding=1)
        self.branch3x3dbl_3 = BasicConv2d(96, 96, kernel_size=3, padding=1)
        self.branch_pool = BasicConv2d(cin, pool_features, kernel_size=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b1 = self.branch1x1(x)
        b5 = self.branch5x5_2(self.branch5x5_1(x))
        b3 = self.branch3x3dbl_3(self.branch3x3dbl_2(self.branch3x3dbl_1(x)))
        bp = self.branch_pool(F.avg_pool2d(x, 3, 1, 1))
        return torch.cat([b1, b5, b3, bp], 1)


class InceptionB(nn.Module):
    def __init__(self, cin: int) -> None:
        super().__init__()
        self.branch3x3 = BasicConv2d(cin, 384, kernel_size=3, stride=2)
        self.branch3x3dbl_1 = BasicConv2d(cin, 64, kernel_size=1)
        self.branch3x3dbl_2 = BasicConv2d(64, 96, kernel_size=3, padding=1)
        self.branch3x3dbl_3 = BasicConv2d(96, 96, kernel_size=3, stride=2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b3 = self.branch3x3(x)
        bd = self.branch3x3dbl_3(self.branch3x3dbl_2(self.branch3x3dbl_1(x)))
        return torch.cat([b3, bd, F.max_pool2d(x, 3, 2)], 1)


class InceptionC(nn.Module):
    def __init__(self, cin: int, c7: int) -> None:
        super().__init__()
        self.branch1x1 = BasicConv2d(cin, 192, kernel_size=1)
        self.branch7x7_1 = BasicConv2d(cin, c7, kernel_size=1)
        self.branch7x7_2 = BasicConv2d(c7, c7, kernel_size=(1, 7), padding=(0, 3))
        self.branch7x7_3 = BasicConv2d(c7, 192, kernel_size=(7, 1), padding=(3, 0))
        self.branch7x7dbl_1 = BasicConv2d(cin, c7, kernel_size=1)
        self.branch7x7dbl_2 = BasicConv2d(c7, c7, kernel_size=(7, 1), padding=(3, 0))
        self.branch7x7dbl_3 = BasicConv2d(c7, c7, kernel_size=(1, 7), padding=(0, 3))
        self.branch7x7dbl_4 = BasicConv2d(c7, c7, kernel_size=(7, 1), padding=(3, 0))
        self.branch7x7dbl_5 = BasicConv2d(c7, 192, kernel_size=(1, 7), padding=(0, 3))
        self.branch_pool = BasicConv2d(cin, 192, kernel_size=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b1 = self.branch1x1(x)
        b7 = self.branch7x7_3(self.branch7x7_2(self.branch7x7_1(x)))
        bd = x
        for m in (self.branch7x7dbl_1, self.branch7x7dbl_2, self.branch7x7dbl_3,
                  self.branch7x7dbl_4, self.branch7x7dbl_5):
            bd = m(bd)
        bp = self.branch_pool(F.avg_pool2d(x, 3, 1, 1))
        return torch.cat([b1, b7, bd, bp], 1)


class InceptionD(nn.Module):
    def __init__(self, cin: int) -> None:
        super().__init__()
        self.branch3x3_1 = BasicConv2d(cin, 192, kernel_size=1)
        self.branch3x3_2 = BasicConv2d(192, 320, kernel_size=3, stride=2)
        self.branch7x7x3_1 = BasicConv2d(cin, 192, kernel_size=1)
        self.branch7x7x3_2 = BasicConv2d(192, 192, kernel_size=(1, 7), padding=(0, 3))
        self.branch7x7x3_3 = BasicConv2d(192, 192, kernel_size=(7, 1), padding=(3, 0))
        self.branch7x7x3_4 = BasicConv2d(192, 192, kernel_size=3, stride=2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b3 = self.branch3x3_2(self.branch3x3_1(x))
        b7 = x
        for m in (self.branch7x7x3_1, self.branch7x7x3_2, self.branch7x7x3_3,
                  self.branch7x7x3_4):
            b7 = m(b7)
        return torch.cat([b3, b7, F.max_pool2d(x, 3, 2)], 1)


class InceptionE(nn.Module):
    def __init__(self, cin: int) -> None:
        super().__init__()
        self.branch1x1 = BasicConv2d(cin, 320, kernel_size=1)
        self.branch3x3_1 = BasicConv2d(cin, 384, kernel_size=1)
        self.branch3x3_2a = BasicConv2d(384, 384, kernel_size=(1, 3), padding=(0, 1))
        self.branch3x3_2b = BasicConv2d(384, 384, kernel_size=(3, 1), padding=(1, 0))
        self.branch3x3dbl_1 = BasicConv2d(cin, 448, kernel_size=1)
        self.branch3x3dbl_2 = BasicConv2d(448, 384, kernel_size=3, padding=1)
        self.branch3x3dbl_3a = BasicConv2d(384, 384, kernel_size=(1, 3), padding=(0, 1))
        self.branch3x3dbl_3b = BasicConv2d(384, 384, kernel_size=(3, 1), padding=(1, 0))
        self.branch_pool = BasicConv2d(cin, 192, kernel_size=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b1 = self.branch1x1(x)
        b3 = self.branch3x3_1(x)
        b3 = torch.cat([self.branch3x3_2a(b3), self.branch3x3_2b(b3)], 1)
        bd = self.branch3x3dbl_2(self.branch3x3dbl_1(x))
        bd = torch.cat([self.branch3x3dbl_3a(bd), self.branch3x3dbl_3b(bd)], 1)
        bp = self.branch_pool(F.avg_pool2d(x, 3, 1, 1))
        return torch.cat([b1, b3, bd, bp], 1)


class InceptionAux(nn.Module):
    def __init__(self, cin: int, num_classes: int) -> None:
        super().__init__()
        self.conv0 = BasicConv2d(cin, 128, kernel_size=1)
        self.conv1 = BasicConv2d(128, 768, kernel_size=5)
        self.fc = nn.Linear(768, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv1(self.conv0(F.avg_pool2d(x, 5, 3)))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, (1, 1)), 1))


class InceptionV3(nn.Module):
    """torchvision's Inception v3 with the auxiliary head; in training mode the output is
    the main logits plus 0.4 x the auxiliary logits (the weighting of the paper's
    training recipe), so that one loss reaches every parameter."""

    def __init__(self, num_classes: int = 1000) -> None:
        super().__init__()
        self.Conv2d_1a_3x3 = BasicConv2d(3, 32, kernel_size=3, stride=2)
        self.Conv2d_2a_3x3 = BasicConv2d(32, 32, kernel_size=3)
        self.Conv2d_2b_3x3 = BasicConv2d(32, 64, kernel_size=3, padding=1)
        self.Conv2d_3b_1x1 = BasicConv2d(64, 80, kernel_size=1)
        self.Conv2d_4a_3x3 = BasicConv2d(80, 192, kernel_size=3)
        self.Mixed_5b = InceptionA(192, 32)
        self.Mixed_5c = InceptionA(256, 64)
        self.Mixed_5d = InceptionA(288, 64)
        self.Mixed_6a = InceptionB(288)
        self.Mixed_6b = InceptionC(768, 128)
        self.Mixed_6c = InceptionC(768, 160)
        self.Mixed_6d = InceptionC(768, 160)
        self.Mixed_6e = InceptionC(768, 192)
        self.AuxLogits = InceptionAux(768, num_classes)
        self.Mixed_7a = InceptionD(768)
        self.Mixed_7b = InceptionE(1280)
        self.Mixed_7c = InceptionE(2048)
        self.fc = nn.Linear(2048, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.Conv2d_2b_3x3(self.Conv2d_2a_3x3(self.Conv2d_1a_3x3(x)))
        x = F.max_pool2d(x, 3, 2)
        x = self.Conv2d_4a_3x3(self.Conv2d_3b_1x1(x))
        x = F.max_pool2d(x, 3, 2)
        x = self.Mixed_5d(self.Mixed_5c(self.Mixed_5b(x)))
        x = self.Mixed_6e(self.Mixed_6d(self.Mixed_6c(self.Mixed_6b(self.Mixed_6a(x)))))
        aux = self.AuxLogits(x) if self.training else None
        x = self.Mixed_7c(self.Mixed_7b(self.Mixed_7a(x)))
        out = self.fc(torch.flatten(F.adaptive_avg_pool2d(x, (1, 1)), 1))
        return out if aux is None else out + 0.4 * aux


# --------------------------------------------------------------------------------------
# Sequence models.


class Transformer(nn.Module):
    """``nn.Transformer`` base on random source/target activations (no embeddings); the
    loss target is a class per position of a 512-way output (the model's own width)."""

    def __init__(self) -> None:
        super().__init__()
        self.transformer = nn.Transformer(d_model=512, nhead=8, num_encoder_layers=6,
                                          num_decoder_layers=6, dim_feedforward=2048)

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        return self.transformer(src, tgt).reshape(-1, 512)


class Seq2SeqLSTM(nn.Module):
    """Encoder-decoder LSTM: embeddings, 2 encoder and 2 decoder layers of 512 cells, a
    projection to a 32 k vocabulary (the TensorFlow zoo's ``seq2seq_lstm``)."""

    def __init__(self, vocab: int = 32000, units: int = 512, layers: int = 2) -> None:
        super().__init__()
        self.src_embedding = nn.Embedding(vocab, units)
        self.tgt_embedding = nn.Embedding(vocab, units)
        self.encoder = nn.LSTM(units, units, layers)
        self.decoder = nn.LSTM(units, units, layers)
        self.projection = nn.Linear(units, vocab)

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        _, state = self.encoder(self.src_embedding(src))
        y, _ = self.decoder(self.tgt_embedding(tgt), state)
        return self.projection(y).reshape(-1, self.projection.out_features)


class TinyCNN(nn.Module):
    """A 6-tensor CNN (two convolutions, batch norm, a classifier) for the fast tests and
    the bounded live CI test; not a paper's model."""

    def __init__(self, num_classes: int = 10) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1, bias=False)
        self.fc = nn.Linear(16, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.adaptive_avg_pool2d(F.relu(self.conv2(x)), 1)
        return self.fc(torch.flatten(x, 1))


# --------------------------------------------------------------------------------------
# Registry.


@dataclass(frozen=True)
class TorchModelSpec:
    """A model: its builder, default input size, and how to make a batch and its labels.

    ``size`` is the image side (image models) or the sequence length; image models with a
    fixed classifier input (AlexNet, VGG) still take any size >= ``min_size`` because
    torchvision puts an adaptive pooling before the classifier.
    """

    name: str
    build: Callable[[], nn.Module]
    kind: str  # "image" | "transformer" | "tokens"
    size: int
    min_size: int
    classes: int
    reference: str

    def batch(self, batch: int, size: int, gen: torch.Generator) -> tuple[tuple[torch.Tensor, ...],
                                                                          torch.Tensor]:
        """Random inputs and labels for ``batch`` examples of size ``size``."""
        if size < self.min_size:
            raise CommschedError(f"model {self.name!r} needs input size >= {self.min_size}, "
                                 f"got {size}")
        if self.kind == "image":
            x = torch.rand(batch, 3, size, size, generator=gen)
            return (x,), torch.randint(0, self.classes, (batch,), generator=gen)
        if self.kind == "transformer":
            src = torch.rand(size, batch, 512, generator=gen)
            tgt = torch.rand(size, batch, 512, generator=gen)
            return (src, tgt), torch.randint(0, self.classes, (size * batch,), generator=gen)
        src = torch.randint(0, self.classes, (size, batch), generator=gen)
        tgt = torch.randint(0, self.classes, (size, batch), generator=gen)
        return (src, tgt), torch.randint(0, self.classes, (size * batch,), generator=gen)


#: Every PyTorch model (:class:`~commsched.registry.Registry` of the family "PyTorch model").
MODELS: Registry[TorchModelSpec] = Registry("PyTorch model")
for _spec in (
    TorchModelSpec("alexnet", AlexNet, "image", 224, 63, 1000,
                   "Krizhevsky, arXiv:1404.5997 (torchvision alexnet)"),
    TorchModelSpec("vgg16", VGG16, "image", 224, 32, 1000,
                   "Simonyan & Zisserman, ICLR 2015 (torchvision vgg16)"),
    TorchModelSpec("resnet50", ResNet50, "image", 224, 32, 1000,
                   "He et al., CVPR 2016 (torchvision resnet50)"),
    TorchModelSpec("inception_v3", InceptionV3, "image", 299, 299, 1000,
                   "Szegedy et al., CVPR 2016 (torchvision inception_v3, aux head)"),
    TorchModelSpec("transformer", Transformer, "transformer", 32, 1, 512,
                   "Vaswani et al., NeurIPS 2017 (torch.nn.Transformer base)"),
    TorchModelSpec("seq2seq_lstm", Seq2SeqLSTM, "tokens", 16, 1, 32000,
                   "Sutskever et al., NeurIPS 2014 (2+2 layers of 512, 32k vocabulary)"),
    TorchModelSpec("tiny_cnn", TinyCNN, "image", 16, 4, 10, "commsched test model"),
):
    MODELS.add(_spec.name, _spec)


def get(name: str) -> TorchModelSpec:
    """The model called ``name``; an unknown name is a one-line error listing the known
    (:meth:`~commsched.registry.Registry.canonical`)."""
    return MODELS[name]


def build(name: str, seed: int = 0) -> nn.Module:
    """The model ``name`` with random weights drawn from ``seed``."""
    spec = get(name)
    torch.manual_seed(seed)
    with warnings.catch_warnings():  # nn.Transformer's note on nested tensors (inference)
        warnings.filterwarnings("ignore", message="enable_nested_tensor is True")
        return spec.build()
