"""PACE's Fig. 2 instance: FIFO vs reordering vs preemption of three all-reduces.

PACE (Bao, Peng, Chen, Wu; INFOCOM 2020), Sec. II-C and Fig. 2, shows on the DAG of its
Fig. 1 that reordering all-reduces shortens an iteration and that preemption shortens it
more (by 25% over FIFO). :func:`fig2_trace` is that DAG as a traced iteration,
:func:`fig2_plans` the three strategies as all-reduce plans, and :func:`run_fig2` simulates
them (:mod:`commsched.pace.sim`) beside PACE's own plan. The experiment ``fig2`` of
:mod:`commsched.pace.experiments.sim` writes the table; ``tests/test_pace_sim.py`` derives
every number by hand.
"""

from __future__ import annotations

from typing import Any

import networkx as nx
import pandas as pd

from commsched.cost import LinearModel
from commsched.model.graph import add_op, new_graph
from commsched.pace.baselines import PolicyContext, whole_group
from commsched.pace.plan import Group, Partition, Plan
from commsched.pace.policies import run_policy
from commsched.pace.sim import Workload

__all__ = ["FIG2_MODEL", "fig2_plans", "fig2_trace", "run_fig2"]


def fig2_trace() -> nx.DiGraph:
    """A traced iteration shaped like PACE's Fig. 1 DAG, with times chosen for Fig. 2.

    Forward: ``Mul`` (1 s) reads ``w3``, ``Add`` (2 s) reads ``w2`` after ``Mul``, ``ReLu``
    (2 s) reads ``w1`` after ``Add``. Backward: ``dReLu``, ``dAdd``, ``dMul`` (1 s each,
    a chain) output the gradients of ``w1`` (AR_1, 3 B), ``w2`` (AR_2, 2 B), ``w3`` (AR_3,
    1 B). With 1 s per byte (:func:`fig2_plans`) AR_1 is ready first and is the longest,
    so it blocks AR_2, and AR_3, needed first by the next forward pass, is ready last.

    Returns
    -------
    networkx.DiGraph
        The traced iteration (three variables, three forward and three backward ops).

    References
    ----------
    PACE (Bao et al., INFOCOM 2020), Sec. II-C, Figs. 1 and 2.
    """
    g = new_graph({"cpu": 1}, variables={
        v: {"bytes": b, "shape": [b], "dtype": "uint8", "trainable": True, "path": v}
        for v, b in (("w1", 3), ("w2", 2), ("w3", 1))},
        meta={"model": "pace_fig2", "mode": "train", "batch": 1, "iterations": 1})

    def op(name: str, d: float, **kw: Any) -> None:
        add_op(g, name, "compute", "cpu", d, op_type="Op", samples=[d], out_bytes=4,
               is_gradient=kw.pop("is_gradient", False), **kw)

    for v in ("w1", "w2", "w3"):
        op(f"read_{v}", 0.0, reads=[v])
    op("mul", 1.0)
    op("add", 2.0)
    op("relu", 2.0)
    op("d_relu", 1.0, is_gradient=True, grad_of=["w1"])
    op("d_add", 1.0, is_gradient=True, grad_of=["w2"])
    op("d_mul", 1.0, is_gradient=True, grad_of=["w3"])
    for u, v in [("read_w3", "mul"), ("mul", "add"), ("read_w2", "add"), ("add", "relu"),
                 ("read_w1", "relu"), ("relu", "d_relu"), ("d_relu", "d_add"),
                 ("d_add", "d_mul")]:
        g.add_edge(u, v, control=False, bytes=4)
    return g


#: The cost model of the Fig. 2 instance: 1 s per byte, no start-up.
FIG2_MODEL = LinearModel(0.0, 1.0)


def fig2_plans() -> dict[str, Plan]:
    """Fig. 2's three strategies on :func:`fig2_trace`.

    ``fifo``: whole tensors in ready order. ``reorder``: whole tensors, AR_3 before AR_2
    before AR_1. ``preempt``: AR_1 split so that its first part ends when AR_2 is ready
    (1 B), AR_2 split so that its first part ends when AR_3 is ready (1 B); then AR_3, the
    rest of AR_2, the rest of AR_1.

    Returns
    -------
    dict
        ``{"fifo" | "reorder" | "preempt": Plan}``.

    References
    ----------
    PACE (Bao et al., INFOCOM 2020), Sec. II-C and Fig. 2.
    """
    def whole(v: str, b: int, p: int) -> Group:
        return whole_group([(v, b)], p)

    return {
        "fifo": Plan("fifo", (whole("w1", 3, 0), whole("w2", 2, 1), whole("w3", 1, 2))),
        "reorder": Plan("reorder", (whole("w1", 3, 2), whole("w2", 2, 1), whole("w3", 1, 0))),
        "preempt": Plan("preempt", (
            Group((("w1", 3),), (Partition(0, 1, 0), Partition(1, 2, 4))),
            Group((("w2", 2),), (Partition(0, 1, 1), Partition(1, 1, 3))),
            whole("w3", 1, 2))),
    }


def run_fig2() -> pd.DataFrame:
    """Simulate Fig. 2's strategies and PACE's own plan (1 s slots) on :func:`fig2_trace`.

    Returns
    -------
    pandas.DataFrame
        One row per strategy: iteration time, partitions, the channel's order and the
        reduction of the iteration time over FIFO in percent (the paper's is 25%).

    References
    ----------
    PACE (Bao et al., INFOCOM 2020), Sec. II-C and Fig. 2.
    """
    t = fig2_trace()
    w = Workload(t)
    rows = []
    plans = fig2_plans()
    d, _ = run_policy("pace", PolicyContext(w, FIG2_MODEL, t, options={"slot_ms": 1000.0}))
    plans["pace"] = d.plan
    for name, plan in plans.items():
        r = w.simulate(plan, FIG2_MODEL)
        rows.append({"strategy": name, "iteration_time_s": r.iteration_time,
                     "partitions": len(r.partitions),
                     "order": " ".join(f"{p.tensors[0]}[{p.start:g},{p.end:g}]"
                                       for p in r.partitions)})
    df = pd.DataFrame(rows)
    fifo = float(df.loc[df.strategy == "fifo", "iteration_time_s"].iloc[0])
    df["reduction_pct"] = (1.0 - df.iteration_time_s / fifo) * 100.0
    return df
