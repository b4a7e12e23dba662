"""Computation operators of a traced training iteration at MXNet's operator granularity.

PACE's Table II (Bao et al., INFOCOM 2020, Sec. V-A and Table II) counts the computation
operators of MXNet 1.5 training graphs: 80 for VGG-16, 335 for ResNet-50, 293 for Seq2Seq
and 1061 for Transformer. A TensorFlow trace has several ops per MXNet operator (variable
reads, bias reshapes, the element-wise arithmetic of a batch norm, the random mask of a
dropout), so its raw op count is not comparable. :func:`mxnet_operators` groups the traced
forward ops into MXNet operators and derives the backward operators MXNet's gradient pass
would add for them.

**Forward operators.** The candidates are the forward compute ops (not ``is_gradient``,
not the optimizer's ``train/`` ops, not the synthetic input pipeline ``inputs/``) that lie
on the loss's path (ancestors of an op of the ``loss/`` scope, or in it) and whose value
depends on a model input or a trainable parameter (data edges; ``Shape``-like ops cut the
dependency, so zero initial states and shape arithmetic drop out), less variable handles,
variable reads and constants, and less the layout ops (``Reshape``, ``Squeeze``,
``ExpandDims``, ``Cast``, ``Identity``) whose value depends on parameters only (Keras'
bias reshapes). The candidates are grouped, per Keras layer scope (the leading
``<name>_<k>`` components of an op's name), into MXNet operators:

======================================  ===================================================
traced ops                              MXNet operator
======================================  ===================================================
the whole ``loss/`` scope (sparse       ``SoftmaxOutput`` (softmax and cross-entropy in one
softmax cross-entropy, mean)            operator, the loss of MXNet's examples and sockeye)
a layer with a ``moments`` sub-scope    ``BatchNorm`` (the layer updates moving statistics)
or a fused batch norm                   or ``LayerNorm``, one operator for the layer
a layer with a ``dropout`` sub-scope    ``Dropout``
a layer with a ``GatherV2``             ``Embedding`` (index clipping included)
``Conv2D``                              ``Convolution``
``MatMul`` / ``BatchMatMulV2`` /        ``FullyConnected`` (``flatten=False`` on 3-d input)
``Einsum`` reading a parameter
the same between two activations        ``batch_dot`` (``dot`` for ``MatMul``)
``BiasAdd``, or an add of a             merged into the operator producing its other input
parameter-only operand                  (MXNet's ``Convolution`` / ``FullyConnected`` carry
                                        their bias)
``Reshape`` / ``Squeeze`` /             merged into the layer's ``FullyConnected`` where
``ExpandDims`` in a layer with one      the layer has exactly one (Keras' ``Tensordot`` and
parametric contraction                  ``EinsumDense`` reshapes), else ``Reshape`` (MXNet's
                                        ``Flatten`` is one)
``Relu``, ``Sigmoid``, ``Tanh``         ``Activation`` (separate from the convolution or
                                        dense layer it follows, as in MXNet's symbols)
``MaxPool``, ``AvgPool``, ``Mean``      ``Pooling`` (a Keras global average pool is a
                                        ``Mean``: MXNet's ``Pooling(global_pool=True)``)
``AddV2`` / ``Add`` of two activations  ``elemwise_add`` (residual adds, LSTM gate sums)
``Mul``, ``Sub``, ``Softmax``           ``elemwise_mul``, ``elemwise_sub``, ``softmax``
``Split``, ``Unpack``                   ``SliceChannel``
``Pack``, ``ConcatV2``                  ``Concat``
``Transpose``                           ``transpose``
anything else                           one operator, labelled ``tf:<OpType>``
======================================  ===================================================

**Backward operators.** MXNet's gradient pass (nnvm ``Gradient``) gives each forward
operator one backward node (``_backward_Convolution``, ``_backward_Activation``, ...)
unless (a) its gradient is the head gradient itself: ``elemwise_add``'s ``FGradient`` is
``CloneGradient``, which returns the output gradient to both inputs without a node, or
(b) none of its inputs needs a gradient (no trainable parameter upstream of it: MXNet
prunes the backward nodes that lead only to the data's gradient). Where an activation is
read by two operators the pass also inserts a ``_grad_add`` (``AggregateGradient``); we
do not count those: without them MXNet's symbols give Table II's VGG-16 and ResNet-50
counts exactly (below), with them ResNet-50 would have 351.

**MXNet's symbols by hand** (``example/image-classification/symbols/``, the scripts
PACE's Sec. VI cites). ``vgg.py``, VGG-16: 13 ``Convolution``, 15 ``Activation``, 5
``Pooling``, ``Flatten``, 3 ``FullyConnected``, 2 ``Dropout``, ``SoftmaxOutput`` = 40
forward operators, each with a backward node: 80, Table II's count. ``resnet.py``,
ResNet-50: ``identity`` of the data (its float32 path), ``bn_data``, ``conv0``, ``bn0``,
``relu0``, a max pool, 16 bottleneck units of 3 x (``BatchNorm``, ``Activation``,
``Convolution``) and an ``elemwise_add`` (160), 4 projection shortcuts, ``bn1``,
``relu1``, the global pool, ``Flatten``, ``fc1`` and ``SoftmaxOutput``: 176 forward
operators; backward nodes for all but the identity (data needs no gradient) and the 16
adds: 159; 176 + 159 = 335, Table II's count (with the 16 ``_grad_add`` nodes: 351).

**Our models.** The zoo's VGG-16 (``keras.applications``) has no dropout layers, so it
counts 38 + 38 = 76; our ResNet-50 (:func:`commsched.trace.zoo.resnet50_mxnet`) has
neither the identity nor the ``Flatten`` (Keras' global pool outputs a flat tensor), so
it counts 174 + 158 = 332. For Seq2Seq and Transformer the paper trained sockeye's
models: our Keras LSTM cell maps one to one onto MXNet's ``LSTMCell`` (2
``FullyConnected``, ``elemwise_add``, ``SliceChannel``, 4 ``Activation``, 2
``elemwise_mul``, ``elemwise_add``, ``Activation``, ``elemwise_mul`` per step), but our
model is smaller (2 + 2 layers over 16 steps) and Keras' multi-head attention has fewer
operators than sockeye's (which splits and merges heads with explicit reshapes and
transposes). sockeye's own graphs are counted on their MXNet symbols instead (below):
with its defaults, its Transformer has Table II's 164 parameter arrays and 558 + 505 =
1063 operators (Table II: 1061), its convolutional sequence-to-sequence model Table II's
Seq2Seq's 32 arrays and 172 + 143 = 315 operators (Table II: 293).

**MXNet symbols** (:func:`symbol_operators`). Where we have the model's MXNet symbol itself
(``mx.sym.save`` JSON: sockeye's Seq2Seq and Transformer in ``data/models/sockeye``,
exported by ``scripts/sockeye_symbols.py``), no grouping is needed: every non-variable
node is one forward operator, and the backward nodes are derived from the JSON alone,
following MXNet's gradient pass: a forward node gets one backward node if a parameter
precedes it and the loss depends on it (along inputs that carry gradients; ``BlockGrad``
stops them), except ``elemwise_add`` (``CloneGradient``). Gradient sums (``add_n``,
``_grad_add``) are not counted, as above. The parameters are the variables that carry a
``__shape__`` attribute (MXNet's own attribute for a variable's shape; the export sets it
on every parameter and on no data input); each is one all-reduce tensor. This rule gives
exactly the backward nodes MXNet 1.5.1's executor builds for both sockeye graphs
(``tests/test_pace_operators.py`` checks it against the counts the export recorded from
MXNet) and, measured once in the same side environment, for the VGG-16 (40) and ResNet-50
(159) of MXNet's example symbols.
"""

from __future__ import annotations

import math
import os
import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import networkx as nx

from commsched.errors import CommschedError
from commsched.io.structured import read_json
from commsched.model.traced import trainable_variables

__all__ = ["MxnetOperators", "MxnetSymbol", "has_loss_scope", "mxnet_operators", "read_symbol",
           "symbol_operators"]

#: Ops whose output is a shape, not a value: they cut the value dependency.
SHAPE_OPS = frozenset({"Shape", "ShapeN", "Size", "Rank"})
#: Ops that are never MXNet operators: variable handles and reads, constants.
NOT_OPERATORS = frozenset({"VarHandleOp", "ReadVariableOp", "Const", "NoOp", "Placeholder"})
#: Layout ops: dropped when they touch parameters only, merged into a dense layer's FC.
LAYOUT_OPS = frozenset({"Reshape", "Squeeze", "ExpandDims", "Transpose", "Cast", "Identity"})
CONTRACTIONS = frozenset({"Conv2D", "MatMul", "BatchMatMulV2", "Einsum"})
ADDS = frozenset({"AddV2", "Add"})
LABELS = {
    "Conv2D": "Convolution", "Relu": "Activation", "Sigmoid": "Activation",
    "Tanh": "Activation", "MaxPool": "Pooling", "AvgPool": "Pooling", "Mean": "Pooling",
    "AddV2": "elemwise_add", "Add": "elemwise_add", "Mul": "elemwise_mul",
    "Sub": "elemwise_sub", "Softmax": "softmax", "Split": "SliceChannel",
    "Unpack": "SliceChannel", "Pack": "Concat", "ConcatV2": "Concat",
    "Transpose": "transpose", "SelectV2": "where", "Reshape": "Reshape", "Squeeze": "Reshape",
    "ExpandDims": "Reshape",
}
_LAYER = re.compile(r".+_\d+$")


@dataclass(frozen=True)
class MxnetOperators:
    """A training iteration's computation operators at MXNet's granularity.

    Parameters
    ----------
    forward : dict
        ``{MXNet operator label: count}`` of the forward pass.
    backward : int
        Backward operators (one per forward operator with a gradient node).
    groups : tuple of tuple of str
        The traced ops of each forward operator, in a deterministic order.
    """

    forward: dict[str, int]
    backward: int
    groups: tuple[tuple[str, ...], ...]

    @property
    def n_forward(self) -> int:
        """Forward operators."""
        return sum(self.forward.values())

    @property
    def total(self) -> int:
        """Forward plus backward operators: Table II's reading."""
        return self.n_forward + self.backward

    def breakdown(self) -> str:
        """``label:count`` of the forward operators, most frequent first."""
        return " ".join(f"{k}:{v}" for k, v in sorted(self.forward.items(),
                                                      key=lambda kv: (-kv[1], kv[0])))


def _layer(name: str) -> str:
    """The Keras layer scope of an op: its leading ``<name>_<k>`` scope components."""
    keep: list[str] = []
    for part in name.split("/")[:-1]:
        if not _LAYER.match(part):
            break
        keep.append(part)
    return "/".join(keep)


def _reach(g: nx.DiGraph, sources: Iterable[str], nodes: set[str]) -> set[str]:
    """Ops of ``nodes`` whose value depends on ``sources`` along data edges."""
    seen: set[str] = set()
    stack = [s for s in sources if s in nodes]
    while stack:
        op = stack.pop()
        if op in seen:
            continue
        seen.add(op)
        if g.nodes[op].get("op_type") in SHAPE_OPS:
            continue
        stack.extend(s for s in g.successors(op)
                     if s in nodes and not g.edges[op, s].get("control"))
    return seen


class _Groups:
    """Union-find over op names (the smaller name represents a group)."""

    def __init__(self, ops: Iterable[str]) -> None:
        self.parent = {op: op for op in ops}

    def find(self, op: str) -> str:
        while self.parent[op] != op:
            self.parent[op] = self.parent[self.parent[op]]
            op = self.parent[op]
        return op

    def union(self, a: str, b: str) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)


def _scope_kind(layer: str, ops: list[str], types: dict[str, str]) -> str | None:
    """The MXNet operator a whole Keras layer scope is, or None for op-by-op layers.

    ``ops`` are every forward op of the scope ``layer``; only their sub-scopes below the
    layer (``moments``, ``stateless_dropout``) are looked at, not the layer's own name.
    Ops outside any layer scope (``layer`` empty) are counted op by op.
    """
    if not layer:
        return None
    depth = layer.count("/") + 1
    parts = {p for op in ops for p in op.split("/")[depth:-1]}
    kinds = {types[op] for op in ops}
    if "moments" in parts or kinds & {"FusedBatchNormV3", "FusedBatchNorm"}:
        return "BatchNorm" if kinds & {"AssignVariableOp", "FusedBatchNormV3",
                                       "FusedBatchNorm"} else "LayerNorm"
    if any("dropout" in p for p in parts):
        return "Dropout"
    if kinds & {"GatherV2", "ResourceGather"}:
        return "Embedding"
    return None


def _forward_ops(g: nx.DiGraph) -> set[str]:
    """Forward compute ops: not the backward pass, not the optimizer's ``train/`` ops."""
    return {n for n, a in g.nodes(data=True)
            if a.get("kind") == "compute" and not a.get("is_gradient") and not a.get("grad_of")
            and not n.startswith(("train/", "gradients/"))}


def has_loss_scope(g: nx.DiGraph) -> bool:
    """Whether a traced graph has forward ops in a ``loss/`` scope (our TensorFlow traces).

    Parameters
    ----------
    g : networkx.DiGraph
        An op graph.

    Returns
    -------
    bool
        True if :func:`mxnet_operators` can count it.
    """
    return any(n.startswith("loss/") for n in _forward_ops(g))


def mxnet_operators(g: nx.DiGraph) -> MxnetOperators:
    """Count a traced training iteration's computation operators at MXNet's granularity.

    Parameters
    ----------
    g : networkx.DiGraph
        A traced training iteration (:mod:`commsched.model.traced`) with a ``loss/`` scope.

    Returns
    -------
    MxnetOperators
        The forward operators by MXNet label, the backward operators and the groups of
        traced ops (the module docstring gives the mapping and the backward rule).

    Raises
    ------
    CommschedError
        If the trace has no forward op in a ``loss/`` scope (:func:`has_loss_scope`).

    References
    ----------
    PACE (Bao et al., INFOCOM 2020), Table II and Sec. VI (MXNet 1.5, the
    image-classification examples and sockeye); MXNet 1.5's nnvm ``Gradient`` pass and
    ``CloneGradient`` (``src/operator/elemwise_op_common.h``).
    """
    types = {n: str(a.get("op_type", "")) for n, a in g.nodes(data=True)}
    fwd = _forward_ops(g)
    loss = {n for n in fwd if n.startswith("loss/")}
    if not loss:
        raise CommschedError("trace has no forward op in a 'loss/' scope: cannot count its "
                             "operators at MXNet's granularity")
    data = g.subgraph(fwd)
    on_path = set(loss).union(*(nx.ancestors(data, n) for n in loss))
    from_input = _reach(g, [n for n in fwd if n.startswith("inputs/")], fwd)
    params = [v for v in trainable_variables(g) if v in fwd]
    from_param = _reach(g, params, fwd)
    ops = sorted(
        n for n in on_path & (from_input | from_param)
        if not n.startswith("inputs/") and types[n] not in NOT_OPERATORS | SHAPE_OPS
        and not (types[n] in LAYOUT_OPS and n not in from_input))
    keep = set(ops)
    groups = _Groups(ops)

    def data_preds(op: str) -> list[str]:
        return [p for p in g.predecessors(op)
                if p in keep and not g.edges[p, op].get("control")]

    def reads_param(op: str) -> bool:
        """The op has an operand that is a parameter (read, maybe reshaped), not an operator."""
        return any(p not in keep and p in from_param and not g.edges[p, op].get("control")
                   for p in g.predecessors(op))

    scope_ops: dict[str, list[str]] = {}
    for n in sorted(fwd - loss):
        scope_ops.setdefault(_layer(n), []).append(n)
    layer_of = {op: "loss/" if op in loss else _layer(op) for op in ops}
    by_layer: dict[str, list[str]] = {}
    for op in ops:
        by_layer.setdefault(layer_of[op], []).append(op)
    layer_kind: dict[str, str] = {}
    for layer, members in by_layer.items():
        kind = ("SoftmaxOutput" if layer == "loss/"
                else _scope_kind(layer, scope_ops[layer], types))
        if kind is not None:
            for op in members:
                groups.union(members[0], op)
            layer_kind[layer] = kind
            continue
        contractions = [op for op in members if types[op] in CONTRACTIONS and reads_param(op)]
        for op in members:
            t = types[op]
            if t == "BiasAdd" or (t in ADDS and reads_param(op)):
                for p in data_preds(op):
                    groups.union(p, op)
            elif t in LAYOUT_OPS and len(contractions) == 1:
                groups.union(contractions[0], op)
    members_of: dict[str, list[str]] = {}
    for op in ops:
        members_of.setdefault(groups.find(op), []).append(op)
    forward: Counter[str] = Counter()
    backward = 0
    for members in members_of.values():
        kinds = sorted({layer_kind[layer_of[op]] for op in members if layer_of[op] in layer_kind})
        label = kinds[0] if kinds else _label(members, types, reads_param)
        forward[label] += 1
        if label != "elemwise_add" and any(op in from_param for op in members):
            backward += 1
    return MxnetOperators(dict(forward), backward,
                          tuple(tuple(m) for _, m in sorted(members_of.items())))


def _label(members: list[str], types: dict[str, str],
           reads_param: Callable[[str], bool]) -> str:
    """The MXNet label of an op-by-op group: its contraction's, else its first op's."""
    for op in members:
        t = types[op]
        if t in CONTRACTIONS:
            if reads_param(op):
                return "FullyConnected" if t != "Conv2D" else "Convolution"
            return "Convolution" if t == "Conv2D" else "dot" if t == "MatMul" else "batch_dot"
    t = types[members[0]]
    if t == "BiasAdd" and len(members) == 1:
        return "elemwise_add"
    return LABELS.get(t, f"tf:{t}")


#: MXNet operators whose gradient is the head gradient itself (``CloneGradient``): no node.
CLONE_GRADIENT = frozenset({"elemwise_add"})
#: MXNet operators through which no gradient flows (their gradient is zero).
STOP_GRADIENT = frozenset({"BlockGrad", "stop_gradient"})
_NODE_FIELDS: dict[str, type] = {"op": str, "name": str, "inputs": list}


@dataclass(frozen=True)
class MxnetSymbol:
    """An MXNet symbol (``mx.sym.save`` JSON) with the shapes of its parameters.

    Parameters
    ----------
    nodes : tuple of dict
        The JSON's nodes in order (``op``, ``name``, ``inputs`` as ``[node, output, ...]``).
    heads : tuple of int
        The nodes whose outputs are the symbol's outputs (the loss).
    params : dict
        ``{parameter name: shape}``: the variables with a ``__shape__`` attribute.
    """

    nodes: tuple[dict[str, Any], ...]
    heads: tuple[int, ...]
    params: dict[str, tuple[int, ...]]

    @property
    def n_params(self) -> int:
        """Parameter values (the product of every parameter's shape)."""
        return sum(math.prod(s) for s in self.params.values())


def _shape(text: object, where: str) -> tuple[int, ...]:
    dims = str(text).strip("()[] ").split(",")
    try:
        shape = tuple(int(d) for d in dims if d.strip())
    except ValueError:
        raise CommschedError(f"{where}: __shape__ {text!r} is not a tuple of integers") from None
    if not shape or min(shape) < 1:
        raise CommschedError(f"{where}: __shape__ {text!r} is not a tuple of positive integers")
    return shape


def read_symbol(path: str | os.PathLike[str]) -> MxnetSymbol:
    """Read an MXNet symbol JSON (``.json`` or ``.json.gz``) with its parameters' shapes.

    Parameters
    ----------
    path : str or os.PathLike
        An ``mx.sym.save`` file whose parameter variables carry ``attrs.__shape__``.

    Returns
    -------
    MxnetSymbol
        Its nodes, heads and parameter shapes.

    Raises
    ------
    CommschedError
        If the file is missing or not JSON, or a field is missing or malformed (a node
        without ``op`` / ``name`` / ``inputs``, an input or head naming no earlier node, a
        ``__shape__`` that is not a tuple of positive integers, no parameter at all); the
        message names the file and the field.
    """
    doc = read_json(path)
    if not isinstance(doc, dict) or not isinstance(doc.get("nodes"), list) \
            or not isinstance(doc.get("heads"), list):
        raise CommschedError(f"{path}: not an MXNet symbol (needs lists 'nodes' and 'heads')")
    nodes: list[dict[str, Any]] = doc["nodes"]
    params: dict[str, tuple[int, ...]] = {}
    for i, node in enumerate(nodes):
        where = f"{path}: nodes[{i}]"
        if not isinstance(node, dict) or not all(isinstance(node.get(k), t)
                                                 for k, t in _NODE_FIELDS.items()):
            raise CommschedError(f"{where}: needs 'op', 'name' and a list 'inputs'")
        if any(not isinstance(e, list) or not e or not isinstance(e[0], int)
               or not 0 <= e[0] < i for e in node["inputs"]):
            raise CommschedError(f"{where}.inputs: every input must be [earlier node, ...]")
        attrs = node.get("attrs") or {}
        if node["op"] == "null" and "__shape__" in attrs:
            params[node["name"]] = _shape(attrs["__shape__"], f"{where} ({node['name']})")
    heads = []
    for h in doc["heads"]:
        if not isinstance(h, list) or not h or not isinstance(h[0], int) \
                or not 0 <= h[0] < len(nodes):
            raise CommschedError(f"{path}: heads: every head must be [node, ...]")
        heads.append(h[0])
    if not params:
        raise CommschedError(f"{path}: no parameter (no variable node has attrs.__shape__)")
    return MxnetSymbol(tuple(nodes), tuple(heads), params)


def symbol_operators(sym: MxnetSymbol) -> MxnetOperators:
    """Count an MXNet training symbol's computation operators with Table II's rule.

    Parameters
    ----------
    sym : MxnetSymbol
        The symbol (:func:`read_symbol`).

    Returns
    -------
    MxnetOperators
        Forward operators by MXNet operator name (every non-variable node), backward
        operators (one per forward node that a parameter precedes and the loss depends on,
        along inputs that carry gradients, except ``elemwise_add``: the module docstring),
        and one group per forward node (its name).

    References
    ----------
    PACE (Bao et al., INFOCOM 2020), Table II and Sec. VI (MXNet 1.5, sockeye); MXNet
    1.5's nnvm ``Gradient`` pass, ``CloneGradient`` and ``BlockGrad``.
    """
    nodes = sym.nodes
    n = len(nodes)

    def grad_inputs(i: int) -> list[int]:
        return [] if nodes[i]["op"] in STOP_GRADIENT else [e[0] for e in nodes[i]["inputs"]]

    from_param = [False] * n
    for i, node in enumerate(nodes):
        from_param[i] = (node["name"] in sym.params if node["op"] == "null"
                         else any(from_param[j] for j in grad_inputs(i)))
    to_loss = [False] * n
    for h in sym.heads:
        to_loss[h] = True
    for i in range(n - 1, -1, -1):  # inputs precede their nodes in MXNet's JSON
        if to_loss[i]:
            for j in grad_inputs(i):
                to_loss[j] = True
    ops = [i for i in range(n) if nodes[i]["op"] != "null"]
    backward = sum(1 for i in ops if from_param[i] and to_loss[i]
                   and nodes[i]["op"] not in CLONE_GRADIENT | STOP_GRADIENT)
    forward = Counter(str(nodes[i]["op"]) for i in ops)
    return MxnetOperators(dict(forward), backward, tuple((str(nodes[i]["name"]),) for i in ops))
