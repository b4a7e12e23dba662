"""Synthetic graphs: TicTac's Par-N / Seq-N toys and the thesis' level-based random DAGs.

Toys (TicTac, Hashemi, Jyothi & Campbell, SysML 2019, Sec. 6): one worker, one network
channel ``net`` (capacity 1) that carries the parameter transfers (``recv`` ops) and one
compute unit ``cpu`` (capacity 1). Layer ``i`` has one recv ``recv_i`` (its parameter
``w_i``) and one compute op ``comp_i`` that needs it.

* :func:`par_n`: N concurrent layers; ``comp_i`` depends only on ``recv_i``. Whatever the
  order of the recvs, each compute op fits in the gap before the next recv ends, so every
  order is best.
* :func:`seq_n`: N sequential layers; ``comp_i`` depends on ``recv_i`` and ``comp_{i-1}``.
  Only the order of layer index overlaps every transfer with computation.

Default times are one unit for every recv and every compute op (``recv_time =
compute_time = 1.0``). With them the makespan of a recv order ``pi`` (``pos(i)`` = the
1-based position of ``recv_i``, which is also its end time) is ``N + 1`` for Par-N, and
``max_i (pos(i) + N - i + 1)`` for Seq-N: ``N + 1`` only for the identity order (it
needs ``pos(i) <= i`` for all i), ``2N`` for the reversed order. So exactly one of the N!
orders is best for Seq-N, the paper's "one order in 32!" for N = 32.

Random DAGs (Laich, B.Sc. thesis, Stuttgart 2017, Sec. 6.2; the generator published with
Mayer, Mayer & Laich, DIDL 2017): :func:`level_dag` builds a graph level by level and
returns it in the form of :func:`commsched.io.thesis.read_graph`.

Every random choice takes ``seed``; the same arguments give the same graph and the same
JSON bytes.

Examples
--------
>>> from commsched.sim import simulate
>>> g = seq_n(4)
>>> simulate(g, priorities=order_priorities(layer_order(g))).makespan
5.0
>>> simulate(g, priorities=order_priorities(layer_order(g)[::-1])).makespan
8.0
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from typing import Any

import networkx as nx

from commsched.io.thesis import colocation_groups
from commsched.model.graph import add_op, new_graph

__all__ = ["layer_order", "level_dag", "order_priorities", "par_n", "seq_n"]


def _toy(family: str, n: int, recv_time: float, compute_time: float) -> nx.DiGraph:
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ValueError(f"n must be an integer >= 1, got {n!r}")
    for name, t in (("recv_time", recv_time), ("compute_time", compute_time)):
        if not (math.isfinite(t) and t >= 0):
            raise ValueError(f"{name} must be a finite number >= 0, got {t!r}")
    g = new_graph({"net": 1, "cpu": 1}, toy={"family": family, "n": n})
    for i in range(n):
        add_op(g, f"recv_{i}", "recv", "net", recv_time, param=f"w_{i}", layer=i)
        add_op(g, f"comp_{i}", "compute", "cpu", compute_time, layer=i)
        g.add_edge(f"recv_{i}", f"comp_{i}")
        if family == "seq" and i > 0:
            g.add_edge(f"comp_{i - 1}", f"comp_{i}")
    return g


def par_n(n: int, recv_time: float = 1.0, compute_time: float = 1.0) -> nx.DiGraph:
    """TicTac's Par-N toy: N concurrent layers, each fed by its own transfer.

    Parameters
    ----------
    n
        Number of layers (TicTac Sec. 6 uses 32).
    recv_time, compute_time
        Duration of every recv and every compute op (one time unit by default).

    Returns
    -------
    networkx.DiGraph
        Op graph with resources ``net`` and ``cpu`` (capacity 1 each), ops ``recv_i``
        (kind ``recv``, ``param`` ``w_i``) and ``comp_i`` (kind ``compute``), both with
        ``layer = i``, edges ``recv_i -> comp_i``; graph attribute
        ``toy = {"family": "par", "n": n}``.

    References
    ----------
    Hashemi, Jyothi, Campbell. TicTac: Accelerating Distributed Deep Learning with
    Communication Scheduling. SysML 2019, Sec. 6.
    """
    return _toy("par", n, recv_time, compute_time)


def seq_n(n: int, recv_time: float = 1.0, compute_time: float = 1.0) -> nx.DiGraph:
    """TicTac's Seq-N toy: N sequential layers, each fed by its own transfer.

    As :func:`par_n` (graph attribute ``toy = {"family": "seq", "n": n}``) plus the
    edges ``comp_{i-1} -> comp_i``: layer i computes after layer i-1 and after its own
    transfer.

    References
    ----------
    Hashemi, Jyothi, Campbell. TicTac. SysML 2019, Sec. 6.
    """
    return _toy("seq", n, recv_time, compute_time)


def layer_order(g: nx.DiGraph) -> list[str]:
    """The recv ops of a toy in layer order (the best order for Seq-N; any is for Par-N)."""
    recvs = [(a["layer"], n) for n, a in g.nodes(data=True) if a["kind"] == "recv"]
    return [n for _, n in sorted(recvs)]


def order_priorities(order: Sequence[str]) -> dict[str, float]:
    """Priorities that make the simulator send ``order[0]`` first, then ``order[1]``, ..."""
    return {op: float(k) for k, op in enumerate(order)}


def _range(name: str, r: tuple[int, int]) -> tuple[int, int]:
    lo, hi = int(r[0]), int(r[1])
    if lo < 0 or hi < lo:
        raise ValueError(f"{name} must be a range (lo, hi) with 0 <= lo <= hi, got {r!r}")
    return lo, hi


def _prob(name: str, p: float) -> float:
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"{name} must be a probability in [0, 1], got {p!r}")
    return float(p)


def level_dag(
    levels: int = 100,
    min_per_level: int = 1,
    max_per_level: int = 80,
    edge_prob: float = 0.006,
    max_level_distance: int | None = 4,
    long_range_fraction: float = 0.1,
    tensor_size: tuple[int, int] = (1, 100),
    operations: tuple[int, int] = (1, 100),
    ram: tuple[int, int] = (1, 100),
    cpu_prob: float = 0.01,
    gpu_prob: float = 0.01,
    tpu_prob: float = 0.0,
    colocation_scale: float = 0.2,
    max_colocation_size: int | None = None,
    seed: int = 0,
    nodes: int | None = None,
    level_edges: int | None = None,
    long_range_edges: int | None = None,
    colocated_nodes: int | None = None,
) -> nx.DiGraph:
    """The thesis' level-based random DAG (Laich 2017, Sec. 6.2).

    The graph is built level by level:

    1. level ``l`` (0-based) gets ``U{min_per_level..max_per_level}`` nodes; node ids run
       0, 1, ... in level order; each node draws ``tensor_size``, ``operations`` and
       ``ram`` uniformly from the inclusive integer ranges and its device constraint:
       ``CPU`` with ``cpu_prob``, ``GPU`` with ``gpu_prob``, ``TPU`` with ``tpu_prob``,
       else ``NO``;
    2. every node of level ``l`` gets an edge from every node of an earlier level ``k``
       with ``l - k <= max_level_distance`` (no limit when None) independently with
       probability ``edge_prob``;
    3. long-range edges: ``round(long_range_fraction * E)`` attempts, E the number of
       edges of step 2; each draws two nodes uniformly; if they lie on different levels
       and are not yet joined, it adds the edge from the lower to the higher level
       (ignoring the distance limit). So at most that many long-range edges are added;
    4. colocation groups shaped like the thesis' Fig. 6.1 (many small groups, few large
       ones): for group size ``k = 2, 3, ...`` (up to ``max_colocation_size``) draw
       ``u ~ U[0, 1)`` and form ``floor(colocation_scale * n * u * 2**-k)`` groups of
       ``k`` distinct nodes not yet in a group, such that all constrained members of a
       group share one constraint (they must share a device). Sizes stop when
       ``colocation_scale * n * 2**-k < 1`` or the free nodes run out.

    Count targets (for Table 7.1 of the thesis, which gives counts, not probabilities):
    ``nodes`` adjusts the drawn level sizes one node at a time (random levels, within
    ``min_per_level..max_per_level``) until they sum to ``nodes``; ``level_edges``
    replaces ``edge_prob`` by ``level_edges / C``, C the number of
    candidate pairs of step 2 for the level sizes drawn in step 1; ``long_range_edges``
    replaces the number of step-3 attempts; ``colocated_nodes`` replaces step 4's random
    group counts by ``round(colocated_nodes * 2**-k / 1.5)`` groups of size k (the same
    halving shape; ``sum_k k 2**-k / 1.5 = 1`` over k >= 2).

    Where the thesis leaves a detail open we follow the published generator's choices
    (uniform integer ranges, long-range edges as a fraction of the level edges, group
    counts halving with each size); the distance limit is inclusive here (the default 4
    equals the published limit of "fewer than 5 levels apart").

    Returns
    -------
    networkx.DiGraph
        Integer node ids with the attributes of :func:`commsched.io.thesis.read_graph`
        (``tensor_size``, ``operations``, ``ram``, ``constraint``, ``name``,
        ``colocation``) plus ``level``; graph attributes ``columns = 9``,
        ``generator`` (the arguments) and ``edge_counts`` (``level`` and
        ``long_range`` edges added by steps 2 and 3).

    References
    ----------
    L. Laich. Graph partitioning and scheduling of TensorFlow graphs. B.Sc. thesis,
    University of Stuttgart, 2017, Sec. 6.2 and Fig. 6.1.
    R. Mayer, C. Mayer, L. Laich. The TensorFlow partitioning and scheduling problem:
    it's the critical path! DIDL 2017. doi:10.1145/3154842.3154843.
    """
    args: dict[str, Any] = dict(
        levels=levels, min_per_level=min_per_level, max_per_level=max_per_level,
        edge_prob=edge_prob, max_level_distance=max_level_distance,
        long_range_fraction=long_range_fraction, tensor_size=list(tensor_size),
        operations=list(operations), ram=list(ram), cpu_prob=cpu_prob, gpu_prob=gpu_prob,
        tpu_prob=tpu_prob, colocation_scale=colocation_scale,
        max_colocation_size=max_colocation_size, seed=seed, nodes=nodes,
        level_edges=level_edges,
        long_range_edges=long_range_edges, colocated_nodes=colocated_nodes,
    )
    if levels < 1 or min_per_level < 1 or max_per_level < min_per_level:
        raise ValueError("need levels >= 1 and 1 <= min_per_level <= max_per_level")
    if max_level_distance is not None and max_level_distance < 1:
        raise ValueError(f"max_level_distance must be >= 1 or None, got {max_level_distance}")
    if long_range_fraction < 0 or colocation_scale < 0:
        raise ValueError("long_range_fraction and colocation_scale must be >= 0")
    for name, target in (("level_edges", level_edges), ("long_range_edges", long_range_edges),
                         ("colocated_nodes", colocated_nodes)):
        if target is not None and target < 0:
            raise ValueError(f"{name} must be >= 0 or None, got {target}")
    if max_colocation_size is not None and max_colocation_size < 2:
        raise ValueError(f"max_colocation_size must be >= 2 or None, got {max_colocation_size}")
    p_edge = _prob("edge_prob", edge_prob)
    pc, pg, pt = (_prob(k, v) for k, v in
                  (("cpu_prob", cpu_prob), ("gpu_prob", gpu_prob), ("tpu_prob", tpu_prob)))
    if pc + pg + pt > 1.0:
        raise ValueError("cpu_prob + gpu_prob + tpu_prob must be <= 1")
    ts, ops, rm = _range("tensor_size", tensor_size), _range("operations", operations), \
        _range("ram", ram)
    rng = random.Random(seed)

    # 1. nodes, level by level
    level_of: list[int] = []
    first: list[int] = []  # first node id of each level
    g = nx.DiGraph(columns=9, generator=args)
    sizes = [rng.randint(min_per_level, max_per_level) for _ in range(levels)]
    if nodes is not None:
        if not levels * min_per_level <= nodes <= levels * max_per_level:
            raise ValueError(f"nodes={nodes} does not fit {levels} levels of "
                             f"{min_per_level}..{max_per_level}")
        total = sum(sizes)
        while total != nodes:  # move single nodes in or out of random levels
            lvl = rng.randrange(levels)
            if total < nodes and sizes[lvl] < max_per_level:
                sizes[lvl] += 1
                total += 1
            elif total > nodes and sizes[lvl] > min_per_level:
                sizes[lvl] -= 1
                total -= 1
    for lvl in range(levels):
        first.append(len(level_of))
        for _ in range(sizes[lvl]):
            nid = len(level_of)
            level_of.append(lvl)
            u = rng.random()
            constraint = "CPU" if u < pc else "GPU" if u < pc + pg else \
                "TPU" if u < pc + pg + pt else "NO"
            g.add_node(nid, tensor_size=rng.randint(*ts), operations=rng.randint(*ops),
                       ram=rng.randint(*rm), constraint=constraint, name=f"L{lvl}/op{nid}",
                       colocation=nid, level=lvl)
    n = len(level_of)
    first.append(n)
    if level_edges is not None:
        cand = 0
        for lvl in range(1, levels):
            lo_lvl = 0 if max_level_distance is None else max(0, lvl - max_level_distance)
            cand += (first[lvl + 1] - first[lvl]) * (first[lvl] - first[lo_lvl])
        p_edge = min(1.0, level_edges / cand) if cand else 0.0

    # 2. level edges: Bernoulli(p) over the candidate predecessors, by geometric skips
    #    (same distribution, time proportional to the number of edges).
    log_q = math.log1p(-p_edge) if 0.0 < p_edge < 1.0 else 0.0
    for lvl in range(1, levels):
        lo_lvl = 0 if max_level_distance is None else max(0, lvl - max_level_distance)
        lo, hi = first[lo_lvl], first[lvl]
        if p_edge == 0.0 or hi == lo:
            continue
        for v in range(first[lvl], first[lvl + 1]):
            if p_edge == 1.0:
                g.add_edges_from((u, v) for u in range(lo, hi))
                continue
            u = lo - 1
            while True:
                u += 1 + int(math.log(1.0 - rng.random()) / log_q)
                if u >= hi:
                    break
                g.add_edge(u, v)

    # 3. long-range edges
    n_level_edges = g.number_of_edges()
    attempts = (round(long_range_fraction * g.number_of_edges()) if long_range_edges is None
                else long_range_edges)
    for _ in range(attempts):
        a, b = rng.randrange(n), rng.randrange(n)
        if level_of[a] == level_of[b]:
            continue
        u, v = (a, b) if level_of[a] < level_of[b] else (b, a)
        if not g.has_edge(u, v):
            g.add_edge(u, v)

    # 4. colocation groups
    pool = list(range(n))
    rng.shuffle(pool)
    pairs: list[tuple[int, int]] = []
    k = 2
    def n_groups(k: int) -> int:
        if colocated_nodes is not None:
            return round(colocated_nodes * 2.0**-k / 1.5)
        return int(colocation_scale * n * rng.random() * 2.0**-k)

    def more_sizes(k: int) -> bool:
        if max_colocation_size is not None and k > max_colocation_size:
            return False
        if colocated_nodes is not None:
            return colocated_nodes * 2.0**-k / 1.5 >= 0.5
        return colocation_scale * n * 2.0**-k >= 1

    while more_sizes(k):
        for _ in range(n_groups(k)):
            group: list[int] = []
            group_constraint = "NO"
            deferred: list[int] = []
            while len(group) < k and pool:
                v = pool.pop()
                c = g.nodes[v]["constraint"]
                if c != "NO" and group_constraint not in ("NO", c):
                    deferred.append(v)
                    continue
                group.append(v)
                if c != "NO":
                    group_constraint = c
            pool.extend(reversed(deferred))
            if len(group) < k:  # free nodes ran out: leave the rest alone
                pool.extend(group)
                break
            pairs.extend((group[0], w) for w in group[1:])
        k += 1
    for v, root in colocation_groups(pairs, range(n)).items():
        g.nodes[v]["colocation"] = root
    g.graph["edge_counts"] = {"level": n_level_edges,
                              "long_range": g.number_of_edges() - n_level_edges}
    return g
