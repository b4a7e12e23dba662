"""Parameter-server view: the worker partition of a traced training iteration.

TicTac (Hashemi, Jyothi, Campbell; SysML 2019), Sec. 2.3-2.4: in parameter-server
training a worker's partition of the graph starts with one ``recv`` per parameter (the
value travels from the server holding it), runs the forward and backward computation on
the worker's compute device, and ends with one ``send`` per gradient (pushed back to the
server, which runs the update). TicTac's model (Sec. 3) gives every parameter server one
network channel on which transfers run one at a time; TicTac then orders the recvs.

:func:`ps_view` derives that graph from a traced graph (see :mod:`commsched.views.common`
for the format and for which ops count as optimizer ops, which are left out):

* every compute op of the trace that is not an optimizer op is kept with its traced
  duration, its attributes and its edges, on the worker compute resource;
* every parameter ``v`` (a variable read by a kept op or having a gradient) is assigned to
  one of ``n_servers`` servers (:func:`shard_parameters`);
* a parameter read by a kept op gets ``recv:<v>`` (kind ``recv``, resource ``net:ps<k>``,
  ``bytes`` = the variable's bytes, ``param`` = v, duration = ``link.transfer_time``);
  edges ``recv:<v> -> r`` for **every** kept op ``r`` whose ``reads`` names ``v`` (a recv
  precedes all readers of its variable; nothing else depends on it directly);
* a parameter with a gradient gets ``send:<v>`` (kind ``send``, same bytes and param),
  with edges ``p -> send:<v>`` from every op ``p`` whose ``grad_of`` names ``v``. Sends
  run on ``net:ps<k>:up`` when ``duplex`` is true (full-duplex links: pushes do not
  compete with pulls, our default) and on ``net:ps<k>`` otherwise.

Op ids ``recv:...``/``send:...`` cannot collide with TensorFlow op names, which never
contain a colon. The graph attributes ``recvs`` ({recv id: variable}), ``sends``
({send id: variable}) and ``shards`` ({variable: server index}) record the mapping; they
survive :func:`commsched.model.graph.save`.

Zero-time bookkeeping ops (Const, Identity, ReadVariableOp) are kept: they cost the
simulator little and keep the op names of the trace intact for the live enforcement.
"""

from __future__ import annotations

from typing import Literal

import networkx as nx

from commsched.cost import LinkModel
from commsched.errors import CommschedError
from commsched.model.graph import new_graph, validate
from commsched.views.common import (
    check_trace,
    grad_producers,
    optimizer_ops,
    parameters,
    readers,
)

__all__ = ["ps_view", "recv_params", "shard_parameters"]

Sharding = Literal["round_robin", "greedy", "size"]


def shard_parameters(
    params: dict[str, int], n_servers: int, sharding: Sharding = "round_robin"
) -> dict[str, int]:
    """Assign every parameter to one server: {name: server index in 0..n_servers-1}.

    ``round_robin`` deals the parameters in the given order (the trace's variable creation
    order), like TensorFlow's ``replica_device_setter`` by default: with 2 servers a model
    whose variables alternate kernel, bias, kernel, bias ... puts nearly all bytes on one
    server. ``greedy`` is TensorFlow's ``GreedyLoadBalancingStrategy`` with its
    ``byte_size_load_fn``: in creation order, each parameter onto the server with the
    fewest bytes so far (ties: lowest index). ``size`` is greedy by bytes with the largest
    first (ties by name) -- Graham's LPT rule, so the loads of any two servers differ by
    at most the largest parameter. No sharding can split one parameter: VGG-16's 392 MiB
    ``fc6`` kernel alone is 74% of its bytes.

    >>> shard_parameters({"a": 10, "b": 1, "c": 5}, 2, "round_robin")
    {'a': 0, 'b': 1, 'c': 0}
    >>> shard_parameters({"b": 1, "a": 10, "c": 5}, 2, "greedy")
    {'b': 0, 'a': 1, 'c': 0}
    >>> shard_parameters({"a": 10, "b": 1, "c": 5}, 2, "size")
    {'a': 0, 'c': 1, 'b': 1}
    """
    if not isinstance(n_servers, int) or isinstance(n_servers, bool) or n_servers < 1:
        raise CommschedError(f"n_servers must be an integer >= 1, got {n_servers!r}")
    if sharding == "round_robin":
        return {v: i % n_servers for i, v in enumerate(params)}
    if sharding in ("size", "greedy"):
        load = [0] * n_servers
        out: dict[str, int] = {}
        order = sorted(params, key=lambda name: (-params[name], name)) if sharding == "size" \
            else list(params)
        for v in order:
            k = min(range(n_servers), key=lambda i: (load[i], i))
            out[v] = k
            load[k] += params[v]
        return out
    raise CommschedError(f"unknown sharding {sharding!r} (round_robin, greedy or size)")


def ps_view(
    trace: nx.DiGraph,
    n_servers: int = 1,
    sharding: Sharding = "round_robin",
    link: LinkModel | None = None,
    uplink: LinkModel | None = None,
    duplex: bool = True,
    compute: str = "cpu",
) -> nx.DiGraph:
    """The worker partition of ``trace`` under parameter-server training (TicTac Sec. 2.3).

    Parameters
    ----------
    trace
        A traced graph (train or infer mode; an inference trace has no sends).
    n_servers, sharding
        Number of parameter servers and how parameters are spread over them
        (:func:`shard_parameters`).
    link
        Server-to-worker channel model for recvs; default :meth:`LinkModel.preset`
        ``"10GbE"``.
    uplink
        Worker-to-server model for sends; default ``link``.
    duplex
        Sends on their own ``net:ps<k>:up`` channel (True) or on ``net:ps<k>`` (False).
    compute
        Name of the worker's compute resource (capacity 1).

    Returns
    -------
    networkx.DiGraph
        A valid op graph; graph attributes ``view="ps"``, ``recvs``, ``sends``,
        ``shards``, ``link``, ``uplink``, ``duplex``, and the trace's ``meta`` and
        ``variables``.

    Examples
    --------
    >>> from commsched.model.traced import example_trace
    >>> t = example_trace()  # read -> mm -> grad (of w, 100 B)
    >>> v = ps_view(t, link=LinkModel(0.0, 100.0))
    >>> sorted(v.nodes), v.graph["recvs"]
    (['grad', 'mm', 'read', 'recv:w', 'send:w'], {'recv:w': 'w'})
    """
    check_trace(trace)
    link = link or LinkModel.preset("10GbE")
    uplink = uplink or link
    dropped = optimizer_ops(trace)
    kept = [op for op in trace.nodes if op not in dropped]
    params = parameters(trace, dropped)
    shards = shard_parameters(params, n_servers, sharding)
    read_by = readers(trace, set(kept))
    grads = grad_producers(trace)

    resources: dict[str, int] = {compute: 1}
    for k in range(n_servers):
        resources[f"net:ps{k}"] = 1
        if duplex:
            resources[f"net:ps{k}:up"] = 1
    if len(resources) != (1 + n_servers * (2 if duplex else 1)):
        raise CommschedError(f"compute resource name {compute!r} clashes with a channel name")
    g = new_graph(
        resources,
        view="ps",
        meta=dict(trace.graph.get("meta", {})),
        variables=dict(trace.graph["variables"]),
        link={"latency_s": link.latency_s, "bandwidth_Bps": link.bandwidth_Bps},
        uplink={"latency_s": uplink.latency_s, "bandwidth_Bps": uplink.bandwidth_Bps},
        duplex=duplex,
        shards=shards,
    )
    recvs: dict[str, str] = {}
    sends: dict[str, str] = {}
    for var, nbytes in params.items():
        if var in read_by:
            rid = f"recv:{var}"
            g.add_node(
                rid, kind="recv", resource=f"net:ps{shards[var]}",
                duration=link.transfer_time(nbytes), bytes=nbytes, param=var,
            )
            recvs[rid] = var
    for op in kept:
        g.add_node(op, **{**trace.nodes[op], "resource": compute})
    for u, w, a in trace.edges(data=True):
        if u not in dropped and w not in dropped:
            g.add_edge(u, w, **a)
    for rid, var in recvs.items():
        for r in read_by[var]:
            g.add_edge(rid, r, control=False, bytes=params[var])
    for op, names in grads.items():
        for var in names:
            sid = f"send:{var}"
            if sid not in g:
                k = shards[var]
                g.add_node(
                    sid, kind="send", resource=f"net:ps{k}:up" if duplex else f"net:ps{k}",
                    duration=uplink.transfer_time(params[var]), bytes=params[var], param=var,
                )
                sends[sid] = var
            g.add_edge(op, sid, control=False, bytes=params[var])
    g.graph["recvs"] = recvs
    g.graph["sends"] = sends
    validate(g)
    return g


def recv_params(g: nx.DiGraph) -> dict[str, str]:
    """{recv op id: variable} of a graph made by :func:`ps_view` (also after a save/load)."""
    if g.graph.get("view") != "ps" or not isinstance(g.graph.get("recvs"), dict):
        raise CommschedError("not a parameter-server view (graph attribute view != 'ps')")
    return dict(g.graph["recvs"])
