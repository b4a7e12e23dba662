"""Coarsening: a worker graph's compute ops merged into segments, transfers kept.

See :func:`coarsen`; the effect on the TicTac study is measured in
``benchmarks/bench_multiworker.py``.
"""

from __future__ import annotations

import dataclasses
import math

import networkx as nx

from commsched.model.graph import compile_graph
from commsched.sim.priority import simulate_compiled
from commsched.tictac.dependencies import comm_index
from commsched.tictac.sim.compose import NET_KINDS

__all__ = ["coarsen"]


def coarsen(g: nx.DiGraph) -> nx.DiGraph:
    """Merge a worker graph's compute ops into segments that keep its communication structure.

    A traced training graph has thousands of compute ops (ResNet-50: about 5,000, 3,000 of
    them under 2 us); simulating 16 copies for 1,000 iterations op by op is too slow. The
    coarse graph keeps every ``recv`` and ``send`` op unchanged and replaces the compute
    ops by *segments*:

    1. The *reference order* is the order in which the executor runs the compute ops when
       transfers take no time (one simulation of ``g`` with zero-time recvs and sends).
    2. Compute ops are grouped by resource and by their communication dependencies
       ``dep(op)`` (TicTac Sec. 4.1: the recvs an op depends on,
       :func:`commsched.tictac.dependencies.comm_index`): ops of a group become executable
       when the same recvs have arrived.
    3. A group's ops, in reference order, are cut into consecutive segments after every op
       that feeds a send, so a gradient send still becomes ready when its producer's
       segment ends rather than at the end of the backward pass.
    4. A segment takes the summed time of its ops; the coarse graph has an edge between
       two segments (or a recv and a segment, a segment and a send) when the fine graph
       has one between their members. Edges go from a smaller ``dep`` set to a larger one
       or forward in the reference order, so the result is acyclic.

    What changes: a segment runs as one block, so ops of different segments no longer
    interleave on the compute unit, and a segment waits for all of its members'
    predecessors. For a compute chain (each op needs the previous one) nothing changes
    (tested). Total compute time, the transfers and, for every transfer, the set of
    transfers it depends on are preserved (tested); the effect on the TicTac study is
    measured in ``benchmarks/bench_multiworker.py``.

    Parameters
    ----------
    g : networkx.DiGraph
        A worker graph (a PS view).

    Returns
    -------
    networkx.DiGraph
        The coarse graph. Segment ids are ``seg<k>`` with node attributes ``members``
        (number of ops) and ``first`` (the first member); the graph attribute
        ``coarsened`` records how many ops became how many segments.

    Raises
    ------
    CommschedError
        If ``g`` is not acyclic.

    References
    ----------
    .. [1] Hashemi, Jyothi & Campbell, "TicTac", SysML 2019, Sec. 4.1 (communication
       dependencies).
    """
    nodes = g.nodes
    idx = comm_index(g)
    dep = dict(zip(idx.ops, idx.dep, strict=True))
    zero = compile_graph(g)
    is_net = [nodes[n]["kind"] in NET_KINDS for n in zero.ids]
    zero = dataclasses.replace(
        zero, duration=[0.0 if net else d for net, d in zip(is_net, zero.duration, strict=True)]
    )
    ref = simulate_compiled(zero)
    position = {n: k for k, n in enumerate(zero.ids)}
    compute = [n for n, net in zip(zero.ids, is_net, strict=True) if not net]
    compute.sort(key=lambda n: (ref.start[position[n]], ref.end[position[n]], position[n]))
    succ = g.succ
    seg_of: dict[str, str] = {}
    open_seg: dict[tuple[str, int], str] = {}
    members: dict[str, list[str]] = {}
    for n in compute:
        key = (nodes[n]["resource"], dep[n])
        sid = open_seg.get(key)
        if sid is None:
            sid = f"seg{len(members)}"
            open_seg[key] = sid
            members[sid] = []
        members[sid].append(n)
        seg_of[n] = sid
        if any(nodes[s]["kind"] == "send" for s in succ[n]):
            del open_seg[key]
    out = nx.DiGraph()
    out.graph.update(g.graph)
    out.graph["coarsened"] = {"ops": len(compute), "segments": len(members)}
    for n, a in g.nodes(data=True):
        if a["kind"] in NET_KINDS:
            out.add_node(n, **a)
    for sid, ms in members.items():
        first = nodes[ms[0]]
        out.add_node(sid, kind=first["kind"], resource=first["resource"],
                     duration=math.fsum(float(nodes[m]["duration"]) for m in ms),
                     members=len(ms), first=ms[0])
    for u, v in g.edges:
        cu, cv = seg_of.get(u, u), seg_of.get(v, v)
        if cu != cv:
            out.add_edge(cu, cv)
    return out
