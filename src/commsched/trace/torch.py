"""The PyTorch tracer: a model's iteration as an op graph with measured op times.

:func:`trace_model` builds a model of :mod:`commsched.trace.torch_models` (random weights)
on random inputs, runs ``warmup`` unprofiled steps and ``iterations`` steps under
``torch.profiler``, and returns the op graph of one step in the traced-graph format of
:mod:`commsched.model.traced` (validated by :func:`commsched.model.traced.check_graph`, the
same contract as the TensorFlow traces).

Ops and dependencies come from the autograd graph
    Every autograd node ``G`` of the step (a ``grad_fn``: one per differentiable forward
    op) gives two ops: the forward op ``fwd/<i>/<Type>`` (``i`` = rank of ``G``'s
    sequence number, i.e. forward order) and the backward op ``bwd/<i>/<Type>Backward``
    (``is_gradient``). Every parameter ``p`` has its ``AccumulateGrad`` node, the op
    ``grad/<p>`` that produces ``p``'s gradient tensor (``grad_of = [p]``, ``is_gradient``:
    where a DDP hook fires), and in training mode its SGD update ``sgd/<p>``
    (``updates = [p]``). Edges: ``fwd/H -> fwd/G`` when ``G`` consumes ``H``'s output (``H``
    in ``G.next_functions``), ``bwd/G -> bwd/H`` and ``bwd/G -> grad/p`` the other way
    round, the loss's forward op before its backward op, ``grad/p -> sgd/p``. A forward op
    ``reads`` the parameters whose ``AccumulateGrad`` is among its node's next functions.
    Edge bytes are those of the tensor the edge carries (the forward output, or its
    gradient, of the same shape), taken from a backward hook in an unprofiled pass.
    Inference traces keep the forward ops only (the autograd graph is still recorded).

Per-op times, CPU
    ``torch.profiler`` records every ATen call with the autograd *sequence number* of the
    forward op it belongs to, and every backward node as an ``autograd::engine::
    evaluate_function: <Node>`` event with the same number. A backward op's sample is its
    evaluate_function event's CPU time; ``AccumulateGrad`` events carry no sequence number,
    and are matched, in order, to the parameters a post-accumulate-grad hook saw in the
    same step; the SGD update (``foreach=False``) runs one ``aten::add_`` per parameter in
    parameter order. A forward op's sample is the *self* time of every ATen event whose
    sequence number is its node's, plus that of their descendants without a number of
    their own (so nested calls, e.g. ``aten::linear`` -> ``aten::t`` + ``aten::addmm``, are
    split between the two autograd nodes they create). Time not charged to any op
    (``zero_grad``, the seed gradient of ``backward()``) is recorded in
    ``meta["unattributed_s"]``. ``duration = min(samples)`` (the time oracle of TicTac
    Sec. 5); *coverage* (ops with a sample in every profiled step) is recorded in ``meta``
    and a trace below ``min_coverage`` is refused.

Per-op times, CUDA (not verified here: no GPU was available when this was written)
    With ``device="cuda"`` the profiler also records kernels and links each to the CPU op
    that launched it through its correlation id; an op's sample is the *kernel* time
    (``device_time_total`` of its backward/update event, ``self_device_time_total`` summed
    over its forward events), and ``meta["device_model"]`` is the GPU's name.

Threads: ``torch.set_num_threads(threads)`` (1 by default, as each live DDP worker runs).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import networkx as nx
import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile

from commsched.errors import CommschedError
from commsched.model import graph
from commsched.trace import torch_models
from commsched.trace.common import check_args, check_coverage, cpu_model, op_time_sums, run_meta

__all__ = ["ROUTE", "trace_file_name", "trace_model"]

ROUTE = "torch.profiler (autograd sequence numbers), autograd graph"
_EVAL = "autograd::engine::evaluate_function: "


def trace_file_name(model: str, device: str, mode: str, batch: int) -> str:
    """The committed name of a PyTorch trace, e.g. ``resnet50-torch-cpu-train-b8.json.gz``.

    >>> trace_file_name("resnet50", "cpu", "train", 8)
    'resnet50-torch-cpu-train-b8.json.gz'
    """
    return f"{model}-torch-{device}-{mode}-b{batch}.json.gz"


def _base(node_name: str) -> str:
    """``ConvolutionBackward0`` -> ``Convolution``; ``torch::autograd::X`` -> ``X``."""
    name = node_name.rsplit("::", 1)[-1]
    cut = name.rfind("Backward")
    return name[:cut] if cut > 0 else name


@dataclass
class _Node:
    fn: Any
    seq: int
    name: str


def _walk(root: Any) -> tuple[list[_Node], list[Any]]:
    """The step's autograd nodes sorted by sequence number, and its AccumulateGrad nodes."""
    fns: dict[int, Any] = {}
    accs: dict[int, Any] = {}
    stack = [root]
    while stack:
        f = stack.pop()
        if f is None or id(f) in fns or id(f) in accs:
            continue
        if hasattr(f, "variable"):
            accs[id(f)] = f
            continue
        fns[id(f)] = f
        stack.extend(n for n, _ in f.next_functions)
    nodes = sorted((_Node(f, int(f._sequence_nr()), f.name()) for f in fns.values()),
                   key=lambda n: n.seq)
    return nodes, list(accs.values())


def _nbytes(t: torch.Tensor | None) -> int:
    return 0 if t is None else t.numel() * t.element_size()


def _device_model(device: str) -> str:
    if device == "cuda":
        return str(torch.cuda.get_device_name(0))
    return cpu_model()


def _check_args(batch: int, mode: str, warmup: int, iterations: int, threads: int,
                device: str, min_coverage: float) -> None:
    check_args(batch, mode, warmup, iterations, min_coverage)
    if threads < 1:
        raise CommschedError(f"threads must be >= 1, got {threads}")
    if device not in ("cpu", "cuda"):
        raise CommschedError(f"device must be 'cpu' or 'cuda', got {device!r}")
    if device == "cuda" and not torch.cuda.is_available():
        raise CommschedError("trace device 'cuda' asked for, but PyTorch sees no GPU")


def _events_tree(events: Iterator[Any]) -> list[Any]:
    return [e for e in events if e.cpu_parent is None]


class _Step:
    """Runs one training (or inference) step and keeps its autograd graph."""

    def __init__(self, net: nn.Module, inputs: tuple[torch.Tensor, ...], labels: torch.Tensor,
                 mode: str, opt: torch.optim.Optimizer | None, sync: Callable[[], None]) -> None:
        self.net, self.inputs, self.labels, self.mode, self.opt = net, inputs, labels, mode, opt
        self.sync = sync
        self.acc_order: list[str] = []

    def __call__(
        self, grad_hooks: bool = False
    ) -> tuple[list[_Node], list[Any], dict[int, list[int]]]:
        """One step; returns (nodes, AccumulateGrad nodes, {node index: [bytes per output]})."""
        self.acc_order.clear()
        if self.opt is not None:
            self.opt.zero_grad(set_to_none=True)
        loss = nn.functional.cross_entropy(self.net(*self.inputs), self.labels)
        nodes, accs = _walk(loss.grad_fn)
        out_bytes: dict[int, list[int]] = {}
        if grad_hooks:
            for i, n in enumerate(nodes):
                def hook(gin: Any, gout: Any, i: int = i) -> None:
                    out_bytes[i] = [_nbytes(g) for g in gout]
                n.fn.register_hook(hook)
        if self.mode == "train" or grad_hooks:
            loss.backward()
            if self.opt is not None:
                self.opt.step()
        self.sync()
        return nodes, accs, out_bytes


def trace_model(
    model: str,
    batch: int,
    mode: str = "train",
    *,
    size: int | None = None,
    warmup: int = 1,
    iterations: int = 3,
    threads: int = 1,
    device: str = "cpu",
    seed: int = 0,
    lr: float = 0.01,
    min_coverage: float = 0.95,
) -> nx.DiGraph:
    """Trace one step of ``model``; return the traced graph (see the module docstring).

    ``model`` is a name of :mod:`commsched.trace.torch_models`, ``mode`` ``"train"``
    (forward, backward, SGD update with learning rate ``lr``) or ``"infer"`` (forward, eval
    mode). ``seed`` seeds the weights and the random batch.
    """
    spec = torch_models.get(model)
    size = spec.size if size is None else size
    _check_args(batch, mode, warmup, iterations, threads, device, min_coverage)
    torch.set_num_threads(threads)
    net = torch_models.build(model, seed).to(device)
    net.train(mode == "train")
    gen = torch.Generator().manual_seed(seed)
    inputs, labels = spec.batch(batch, size, gen)
    inputs = tuple(t.to(device) for t in inputs)
    labels = labels.to(device)
    names = {id(p): n for n, p in net.named_parameters()}
    params = dict(net.named_parameters())
    opt = torch.optim.SGD(net.parameters(), lr=lr, foreach=False) if mode == "train" else None

    def sync() -> None:
        if device == "cuda":
            torch.cuda.synchronize()

    step = _Step(net, inputs, labels, mode, opt, sync)
    for pname, p in params.items():
        p.register_post_accumulate_grad_hook(lambda _p, pname=pname: step.acc_order.append(pname))
    nodes, accs, out_bytes = step(grad_hooks=True)  # structure and tensor sizes, untimed
    kinds = [n.name for n in nodes]
    warm_wall = []
    for _ in range(warmup):
        t = time.perf_counter()
        step()
        warm_wall.append(round(time.perf_counter() - t, 9))

    fwd_ids = [f"fwd/{i:04d}/{_base(n.name)}" for i, n in enumerate(nodes)]
    bwd_ids = [f"bwd/{i:04d}/{_base(n.name)}Backward" for i, n in enumerate(nodes)]
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    samples: dict[str, list[float]] = {}
    unattributed: list[float] = []
    walls: list[float] = []
    for k in range(iterations):
        with profile(activities=activities) as prof:
            t = time.perf_counter()
            step_nodes, _, _ = step()
            walls.append(round(time.perf_counter() - t, 9))
        if [n.name for n in step_nodes] != kinds:
            raise CommschedError(f"{model}: the autograd graph changed between steps")
        seq_index = {n.seq: i for i, n in enumerate(step_nodes)}
        times: dict[str, float] = {}
        lost = _attribute(prof.events(), device, seq_index, fwd_ids, bwd_ids,
                          list(step.acc_order), list(params) if opt else [], times)
        unattributed.append(round(lost, 9))
        for op, s in times.items():
            samples.setdefault(op, [])
            if len(samples[op]) == k:
                samples[op].append(round(s, 9))

    variables: dict[str, dict[str, Any]] = {
        n: {"bytes": _nbytes(p), "shape": list(p.shape), "dtype": str(p.dtype).removeprefix(
            "torch."), "trainable": True, "path": n}
        for n, p in params.items()
    }
    meta: dict[str, Any] = {
        "model": model, "mode": mode, "batch": batch, "size": size, "device": device,
        "device_model": _device_model(device), "framework": "torch",
        "torch_version": torch.__version__, "threads": threads, "warmup": warmup,
        "iterations": iterations, "route": ROUTE,
        "time": ("kernel time (profiler correlation), min over iterations" if device == "cuda"
                 else "CPU time of the op's profiler events, min over iterations"),
        **run_meta(mode, lr, seed),
    }
    res = "cuda" if device == "cuda" else "cpu"
    g = graph.new_graph({res: 1}, variables=variables, meta=meta)

    def add(op: str, op_type: str, out: int, grad: bool, **extra: Any) -> None:
        s = samples.get(op, [])
        graph.add_op(g, op, "compute", res, min(s) if s else 0.0, op_type=op_type, samples=s,
                     out_bytes=out, is_gradient=grad, **extra)

    def slot_bytes(j: int, slot: int) -> int:
        """Bytes of output ``slot`` of forward op ``j`` (its gradient has the same shape)."""
        sizes = out_bytes.get(j, [])
        return sizes[slot] if slot < len(sizes) else 0

    acc_name = {id(a): names[id(a.variable)] for a in accs}
    for i, n in enumerate(nodes):
        reads = [acc_name[id(f)] for f, _ in n.fn.next_functions if f is not None
                 and id(f) in acc_name]
        add(fwd_ids[i], _base(n.name), sum(out_bytes.get(i, [])), False,
            **({"reads": reads} if reads else {}))
    index = {id(n.fn): i for i, n in enumerate(nodes)}
    for i, n in enumerate(nodes):
        for f, slot in n.fn.next_functions:
            if f is not None and id(f) in index:
                j = index[id(f)]
                nb = slot_bytes(j, slot)
                g.add_edge(fwd_ids[j], fwd_ids[i], control=False, bytes=nb)
    if mode == "train":
        for i, n in enumerate(nodes):
            add(bwd_ids[i], f"{_base(n.name)}Backward", sum(out_bytes.get(i, [])), True)
        for name in params:
            add(f"grad/{name}", "AccumulateGrad", variables[name]["bytes"], True, grad_of=[name])
            add(f"sgd/{name}", "SGDUpdate", variables[name]["bytes"], False, updates=[name])
            g.add_edge(f"grad/{name}", f"sgd/{name}", control=False,
                       bytes=variables[name]["bytes"])
        root = index[id(nodes[-1].fn)]
        g.add_edge(fwd_ids[root], bwd_ids[root], control=False, bytes=sum(out_bytes.get(root, [])))
        for i, n in enumerate(nodes):
            for f, slot in n.fn.next_functions:
                if f is None:
                    continue
                if id(f) in index:
                    j = index[id(f)]
                    g.add_edge(bwd_ids[i], bwd_ids[j], control=False,
                               bytes=slot_bytes(j, slot))
                elif id(f) in acc_name:
                    name = acc_name[id(f)]
                    g.add_edge(bwd_ids[i], f"grad/{name}", control=False,
                               bytes=variables[name]["bytes"])
    if not nx.is_directed_acyclic_graph(g):
        raise CommschedError(f"{model}: the traced graph has a cycle")  # pragma: no cover

    complete = sum(1 for op in g.nodes if len(samples.get(op, [])) == iterations)
    meta["coverage"] = round(complete / g.number_of_nodes(), 6)
    meta["untimed_ops"] = [op for op in g.nodes
                           if len(samples.get(op, [])) != iterations][:50]
    meta["unattributed_s"] = unattributed
    meta["step_wall_s"] = walls
    meta["warmup_wall_s"] = warm_wall
    meta["sum_op_s"] = op_time_sums(samples, iterations)
    check_coverage(meta, model, mode, g.number_of_nodes(), min_coverage)
    return g


def _attribute(events: Any, device: str, seq_index: dict[int, int], fwd_ids: list[str],
               bwd_ids: list[str], acc_order: list[str], opt_params: list[str],
               times: dict[str, float]) -> float:
    """Charge the profiler events of one step to ops (seconds, into ``times``).

    Returns the time charged to no op. See the module docstring for the rules.
    """
    cuda = device == "cuda"
    lost = 0.0

    def charge(op: str | None, us: float) -> None:
        nonlocal lost
        if op is None:
            lost += us * 1e-6
        else:
            times[op] = times.get(op, 0.0) + us * 1e-6

    def total(e: Any) -> float:
        return float(e.device_time_total if cuda else e.cpu_time_total)

    def own(e: Any) -> float:
        return float(e.self_device_time_total if cuda else e.self_cpu_time_total)

    accs = iter(acc_order)
    for e in _events_tree(events):
        name = e.name
        if name.startswith(_EVAL):
            if name.endswith("AccumulateGrad"):
                charge(f"grad/{next(accs)}", total(e))
            else:
                i = seq_index.get(e.sequence_nr)
                charge(None if i is None else bwd_ids[i], total(e))
        elif name.startswith("Optimizer.step"):
            adds = [c for c in e.cpu_children if c.name == "aten::add_"]
            for p, c in zip(opt_params, adds, strict=False):
                charge(f"sgd/{p}", total(c))
            charge(None, total(e) - sum(total(c) for c in adds))
        else:
            stack: list[tuple[Any, str | None]] = [(e, None)]
            while stack:
                ev, owner = stack.pop()
                if ev.sequence_nr >= 0 and ev.sequence_nr in seq_index:
                    owner = fwd_ids[seq_index[ev.sequence_nr]]
                charge(owner, own(ev))
                stack.extend((c, owner) for c in ev.cpu_children)
    return lost
