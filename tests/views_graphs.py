"""Hand-built traced graphs (data/traces format) shared by the view tests."""

from __future__ import annotations

import networkx as nx

from commsched.model.graph import add_op, new_graph


def op(g: nx.DiGraph, name: str, duration: float, **attrs) -> None:
    """A traced op: one sample equal to its duration, 4 output bytes unless given."""
    attrs = {"op_type": "Op", "out_bytes": 4, "is_gradient": False, "samples": [duration],
             **attrs}
    add_op(g, name, "compute", "cpu", duration, **attrs)


def meta(model: str) -> dict[str, object]:
    return {"model": model, "mode": "train", "batch": 1, "iterations": 1}


def edge(g: nx.DiGraph, u: str, v: str, control: bool = False, nbytes: int = 4) -> None:
    g.add_edge(u, v, control=control, bytes=0 if control else nbytes)


def mlp_trace() -> nx.DiGraph:
    """Two dense layers, SGD, one training iteration (durations in seconds).

    Variables: w1 400 B, b1 40 B, w2 80 B, learning_rate 4 B (read by the optimizer only).
    Forward:  rd_w1, rd_b1, rd_w2 (ReadVariableOp, 0 s); mm1 (2) <- rd_w1;
              add1 (1) <- mm1, rd_b1; mm2 (2) <- add1, rd_w2; loss (1) <- mm2.
    Backward: g_mm2 (1, grad of w2) <- loss, add1; g_h (1) <- loss, rd_w2;
              g_b1 (1, grad of b1) <- g_h; g_w1 (1, grad of w1) <- g_b1.
    Optimizer: rd_lr (0, reads learning_rate); apply_<v> (0.5, updates v) <- grad, rd_lr;
              done (0) <- every apply (control edges).
    """
    g = new_graph({"cpu": 1}, variables={
        "w1": {"bytes": 400, "shape": [10, 10], "dtype": "float32"},
        "b1": {"bytes": 40, "shape": [10], "dtype": "float32"},
        "w2": {"bytes": 80, "shape": [10, 2], "dtype": "float32"},
        "learning_rate": {"bytes": 4, "shape": [], "dtype": "float32"},
    }, meta=meta("mlp"))
    for v in ("w1", "b1", "w2"):
        op(g, f"rd_{v}", 0.0, op_type="ReadVariableOp", reads=[v], is_gradient=False)
    op(g, "mm1", 2.0, is_gradient=False)
    op(g, "add1", 1.0, is_gradient=False)
    op(g, "mm2", 2.0, is_gradient=False)
    op(g, "loss", 1.0, is_gradient=False)
    op(g, "g_mm2", 1.0, is_gradient=True, grad_of=["w2"])
    op(g, "g_h", 1.0, is_gradient=True)
    op(g, "g_b1", 1.0, is_gradient=True, grad_of=["b1"])
    op(g, "g_w1", 1.0, is_gradient=True, grad_of=["w1"])
    op(g, "rd_lr", 0.0, op_type="ReadVariableOp", reads=["learning_rate"], is_gradient=False)
    for v in ("w1", "b1", "w2"):
        op(g, f"apply_{v}", 0.5, op_type="AssignSubVariableOp", updates=[v], is_gradient=False)
    op(g, "done", 0.0, op_type="NoOp", is_gradient=False)
    for u, v in [("rd_w1", "mm1"), ("mm1", "add1"), ("rd_b1", "add1"), ("add1", "mm2"),
                 ("rd_w2", "mm2"), ("mm2", "loss"), ("loss", "g_mm2"), ("add1", "g_mm2"),
                 ("loss", "g_h"), ("rd_w2", "g_h"), ("g_h", "g_b1"), ("g_b1", "g_w1"),
                 ("g_w1", "apply_w1"), ("g_b1", "apply_b1"), ("g_mm2", "apply_w2")]:
        edge(g, u, v)
    for v in ("w1", "b1", "w2"):
        edge(g, "rd_lr", f"apply_{v}")
        edge(g, f"apply_{v}", "done", control=True)
    return g


def bn_trace() -> nx.DiGraph:
    """Conv + batch norm; one op produces both batch-norm gradients (PACE's fused case).

    Variables: w 400 B, gamma 40 B, beta 40 B.
    Forward:  rd_w, rd_gamma, rd_beta (0 s); conv (2) <- rd_w; bn (1) <- conv, rd_gamma,
              rd_beta; loss (1) <- bn.
    Backward: g_bn (1, grads of gamma and beta) <- loss, rd_gamma;
              g_conv (2, grad of w) <- g_bn.
    """
    g = new_graph({"cpu": 1}, variables={
        "w": {"bytes": 400, "shape": [100], "dtype": "float32"},
        "gamma": {"bytes": 40, "shape": [10], "dtype": "float32"},
        "beta": {"bytes": 40, "shape": [10], "dtype": "float32"},
    }, meta=meta("bn"))
    for v in ("w", "gamma", "beta"):
        op(g, f"rd_{v}", 0.0, op_type="ReadVariableOp", reads=[v], is_gradient=False)
    op(g, "conv", 2.0, is_gradient=False)
    op(g, "bn", 1.0, is_gradient=False)
    op(g, "loss", 1.0, is_gradient=False)
    op(g, "g_bn", 1.0, op_type="FusedBatchNormGradV3", is_gradient=True,
       grad_of=["gamma", "beta"])
    op(g, "g_conv", 2.0, is_gradient=True, grad_of=["w"])
    for u, v in [("rd_w", "conv"), ("conv", "bn"), ("rd_gamma", "bn"), ("rd_beta", "bn"),
                 ("bn", "loss"), ("loss", "g_bn"), ("rd_gamma", "g_bn"), ("g_bn", "g_conv")]:
        edge(g, u, v)
    return g


def random_trace(seed: int, n_ops: int, n_vars: int, p_edge: float) -> nx.DiGraph:
    """A random traced graph: a random DAG, each variable read by 1-2 forward ops and with
    a gradient produced by a backward op; durations and sizes from the seed."""
    import random

    rng = random.Random(seed)
    variables = {f"v{i}": {"bytes": rng.randint(1, 10_000), "shape": [1], "dtype": "float32"}
                 for i in range(n_vars)}
    g = new_graph({"cpu": 1}, variables=variables, meta=meta("random"))
    half = max(1, n_ops // 2)
    for i in range(n_ops):
        op(g, f"o{i}", rng.choice([0.0, rng.uniform(0.0, 2.0)]), is_gradient=i >= half)
    for i in range(n_ops):
        for j in range(i + 1, n_ops):
            if rng.random() < p_edge:
                edge(g, f"o{i}", f"o{j}")
    for v in variables:
        for r in rng.sample(range(half), min(half, rng.randint(1, 2))):
            g.nodes[f"o{r}"].setdefault("reads", []).append(v)
        if n_ops > half:
            p = rng.randrange(half, n_ops)
            g.nodes[f"o{p}"]["grad_of"] = [*g.nodes[f"o{p}"].get("grad_of", []), v]
    return g
