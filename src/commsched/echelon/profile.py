"""Per-block layer profiles of a traced training iteration (EchelonFlow's jobs' compute
times and sizes).

:func:`layer_profile` cuts a traced training iteration (:mod:`commsched.trace`) into
``blocks`` consecutive blocks of equal forward time and gives each block its forward
and backward time, parameter bytes and the bytes of the activations that leave it. Op
times are the traced durations (a CPU: multiply by ``compute_scale`` for faster
devices); the micro-batch is the traced batch. How ops are assigned to blocks: see
:func:`layer_profile` (an approximation on branched models).

Examples
--------
Four equal blocks merged into two stages:

>>> p = LayerProfile("toy", fwd=(1.0,) * 4, bwd=(2.0,) * 4, params=(1, 2, 3, 4),
...                  act=(5, 6, 7, 0))
>>> p.merged(2).fwd, p.merged(2).params, p.merged(2).act
((2.0, 2.0), (3, 7), (6, 0))
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import networkx as nx
import numpy as np

from commsched.errors import CommschedError
from commsched.model.traced import reads_of
from commsched.views.common import check_trace, grad_producers, optimizer_ops

__all__ = ["LayerProfile", "layer_profile"]


@dataclass(frozen=True)
class LayerProfile:
    """Per-block profile of one training iteration on one device (seconds, bytes).

    Parameters
    ----------
    model : str
        The profile's name (``<model>-<mode>-b<batch>`` for a traced one).
    fwd, bwd : tuple of float
        Forward and backward time of each block (s).
    params : tuple of int
        Trainable parameter bytes of each block (a DP bucket, an FSDP all-gather).
    act : tuple of int
        ``act[k]`` is what block ``k`` sends to block ``k + 1`` in the forward pass (the
        gradient going back has the same size); ``act[-1]`` is unused.

    Raises
    ------
    CommschedError
        If the four tuples differ in length, are empty, or hold a negative value.

    References
    ----------
    EchelonFlow (Pan et al., HotNets 2022), Sec. 4: the per-layer compute times ``T``
    that space the ideal finish times of Eqs. 6-7.
    """

    model: str
    fwd: tuple[float, ...]
    bwd: tuple[float, ...]
    params: tuple[int, ...]
    act: tuple[int, ...]

    def __post_init__(self) -> None:
        n = len(self.fwd)
        if n < 1 or not (len(self.bwd) == len(self.params) == len(self.act) == n):
            raise CommschedError(f"profile {self.model}: fwd, bwd, params, act differ in length")
        if min(self.fwd + self.bwd) < 0 or min(self.params + self.act) < 0:
            raise CommschedError(f"profile {self.model}: negative time or size")

    @property
    def blocks(self) -> int:
        """The number of blocks."""
        return len(self.fwd)

    def scaled(self, compute_scale: float) -> LayerProfile:
        """The same profile with every compute time multiplied by ``compute_scale``.

        Parameters
        ----------
        compute_scale : float
            How much longer (< 1: shorter) a device takes than the traced one.

        Returns
        -------
        LayerProfile

        Raises
        ------
        CommschedError
            If ``compute_scale`` is not positive.
        """
        if not compute_scale > 0:
            raise CommschedError("compute_scale must be > 0")
        return LayerProfile(self.model, tuple(t * compute_scale for t in self.fwd),
                            tuple(t * compute_scale for t in self.bwd), self.params, self.act)

    def merged(self, parts: int) -> LayerProfile:
        """``parts`` consecutive groups of blocks of about equal forward + backward time.

        Parameters
        ----------
        parts : int
            The number of merged blocks (pipeline stages, buckets, layers).

        Returns
        -------
        LayerProfile
            Times and parameter bytes summed per group; a group's activation is its last
            block's.

        Raises
        ------
        CommschedError
            If ``parts`` is not in ``1..blocks``.
        """
        if not 1 <= parts <= self.blocks:
            raise CommschedError(f"profile {self.model}: cannot merge {self.blocks} blocks "
                                 f"into {parts}")
        w = np.asarray(self.fwd) + np.asarray(self.bwd)
        cuts = _balanced_cuts(w, parts)
        bounds = [0, *cuts, self.blocks]
        sl = [slice(a, b) for a, b in itertools.pairwise(bounds)]
        return LayerProfile(self.model, tuple(float(sum(self.fwd[s])) for s in sl),
                            tuple(float(sum(self.bwd[s])) for s in sl),
                            tuple(int(sum(self.params[s])) for s in sl),
                            tuple(int(self.act[s.stop - 1]) for s in sl))


def _balanced_cuts(weight: np.ndarray, parts: int) -> list[int]:
    """``parts - 1`` strictly increasing cut positions in ``1..len-1`` splitting ``weight``
    where its running sum crosses ``k / parts`` of the total (each part non-empty)."""
    n = len(weight)
    c = np.cumsum(weight)
    total = c[-1] if n else 0.0
    cuts: list[int] = []
    for k in range(1, parts):
        pos = int(np.searchsorted(c, total * k / parts, side="left")) + 1 if total > 0 else k
        lo = (cuts[-1] + 1) if cuts else 1
        hi = n - (parts - k)
        cuts.append(min(max(pos, lo), hi))
    return cuts


#: Name scope of a traced model's synthetic inputs (:mod:`commsched.trace.tf`).
_INPUTS = "inputs/"


def _differentiated(op: str) -> str | None:
    """The forward op a ``tf.gradients`` op differentiates, by its name, or None.

    >>> _differentiated("gradients/net/conv1/Conv2D_grad/Conv2DBackpropFilter")
    'net/conv1/Conv2D'
    """
    parts = op.split("/")
    if parts[0] != "gradients":
        return None
    for i, part in enumerate(parts[1:], 1):
        if part.endswith("_grad"):
            return "/".join([*parts[1:i], part.removesuffix("_grad")])
    return None


def _asap(g: nx.DiGraph) -> dict[str, float]:
    """Earliest start of every op with unlimited parallelism (traced durations)."""
    start: dict[str, float] = {}
    for n in nx.topological_sort(g):
        start[n] = max((start[p] + g.nodes[p]["duration"] for p in g.pred[n]), default=0.0)
    return start


def layer_profile(trace: nx.DiGraph, blocks: int) -> LayerProfile:
    """Cut a traced training iteration into ``blocks`` blocks (see the module docstring).

    Optimizer ops are dropped (:func:`commsched.views.common.optimizer_ops`). Forward ops
    (not ``is_gradient``) are ordered by their earliest start with unlimited parallelism
    (ASAP; an op that depends on parameters and constants alone, such as a transposed
    embedding matrix, takes the place of its first consumer) and cut into ``blocks`` runs
    of equal summed duration. A trainable variable belongs to the block of the first
    forward op that consumes it (a read op's successor); a block's activation bytes are
    the bytes of the data edges from its forward ops that depend on the inputs to later
    blocks' (what depends on parameters and constants alone is not an activation). A
    gradient op belongs to the block of the forward op it differentiates, by the names
    ``tf.gradients`` gives (``gradients/<forward op>_grad/...``: 91% of the backward time
    of the Transformer trace, 96-100% of the others); the rest (gradient sums, the loss'
    seed) to the lowest block among its gradient predecessors, or to the last block.

    Parameters
    ----------
    trace : networkx.DiGraph
        A traced training iteration (:func:`commsched.model.traced.load_trace`).
    blocks : int
        The number of blocks to cut.

    Returns
    -------
    LayerProfile
        Named ``<model>-<mode>-b<batch>``.

    Raises
    ------
    CommschedError
        If the trace is invalid, has no gradient ops, no input ops, or fewer forward ops
        than ``blocks``; or if ``blocks < 1``.

    References
    ----------
    EchelonFlow (Pan et al., HotNets 2022), Sec. 4 and Table 1: per-layer compute times
    and sizes of the paradigms' flows.
    """
    check_trace(trace)
    if blocks < 1:
        raise CommschedError("a profile needs at least one block")
    meta = trace.graph["meta"]
    name = f"{meta['model']}-{meta['mode']}-b{meta['batch']}"
    grads = grad_producers(trace)
    if not grads:
        raise CommschedError(f"{name}: the trace has no gradient ops; profiles need training")
    dropped = optimizer_ops(trace)
    g = trace.subgraph([n for n in trace.nodes if n not in dropped])
    start = _asap(g)
    is_grad = {n: bool(g.nodes[n]["is_gradient"]) or n in grads for n in g.nodes}
    # activations: the data computed from the synthetic inputs (the tracer builds them in
    # the name scope "inputs/"); what is computed from parameters and constants alone (a
    # transposed embedding matrix, a shape, a dropout mask) is not sent between blocks
    activation = set()
    for n in nx.topological_sort(g):
        if n.startswith(_INPUTS) or any(p in activation and not g.edges[p, n].get("control")
                                        for p in g.pred[n]):
            activation.add(n)
    if not activation:
        raise CommschedError(f"{name}: no op under {_INPUTS!r}; cannot tell activations")
    # an op computed from parameters alone (no activation) runs where it is first needed
    key: dict[str, float] = {}
    for n in reversed(list(nx.topological_sort(g))):
        if is_grad[n]:
            continue
        later = [key[v] for v in g.succ[n] if v in key]
        key[n] = start[n] if n in activation or not later else min(later)
    fwd_ops = sorted(key, key=lambda n: (key[n], start[n], n))
    if len(fwd_ops) < blocks:
        raise CommschedError(f"{name}: {len(fwd_ops)} forward ops cannot make {blocks} blocks")
    dur = np.array([g.nodes[n]["duration"] for n in fwd_ops])
    cuts = _balanced_cuts(dur, blocks)
    block_of = dict(zip(fwd_ops, np.searchsorted(cuts, np.arange(len(fwd_ops)), side="right"),
                        strict=True))
    fwd = np.bincount([block_of[n] for n in fwd_ops], weights=dur, minlength=blocks)
    act = np.zeros(blocks, dtype=np.int64)
    for u, v, a in g.edges(data=True):
        if (u in activation and u in block_of and v in block_of and not a.get("control")
                and block_of[u] < block_of[v]):
            act[block_of[u]] += int(a.get("bytes", 0))
    params = np.zeros(blocks, dtype=np.int64)
    variables = trace.graph["variables"]
    for var, ops in reads_of(g).items():
        if not variables.get(var, {}).get("trainable", True):
            continue
        cons = [s for op in ops for s in g.succ[op] if s in block_of] or \
            [op for op in ops if op in block_of]
        if cons:
            params[min(block_of[c] for c in cons)] += int(variables[var]["bytes"])
    # backward: a gradient op belongs to the block of the forward op it differentiates
    # (tf.gradients names it gradients/<forward op>_grad/...); the others (gradient
    # sums, the loss' seed) to the lowest block among their gradient predecessors, else
    # to the last block, where the backward pass starts
    bwd = np.zeros(blocks)
    bblock: dict[str, int] = {}
    for n in nx.topological_sort(g):
        if not is_grad[n]:
            continue
        f = _differentiated(n)
        ins = [bblock[p] for p in g.pred[n] if p in bblock]
        bblock[n] = block_of[f] if f in block_of else min(ins, default=blocks - 1)
        bwd[bblock[n]] += g.nodes[n]["duration"]
    return LayerProfile(name, tuple(float(x) for x in fwd), tuple(float(x) for x in bwd),
                        tuple(int(x) for x in params), tuple(int(x) for x in act))
