"""Send and receive node insertion after partitioning (Laich 2017, Sec. 2.4).

For every producer and every other device that holds at least one of its consumers, one
send node (on the producer's device) and one receive node (on the consumer's device) are
inserted: the tensor crosses the network once, whatever the number of consumers there.
Nodes of the executed graph are the original nodes ``0..n-1`` followed by the pairs, in
producer order and, per producer, by destination device (send, then receive); this is the
numbering of the thesis' Sec. 2.5 example.

Costs (our reading of Sec. 2.5, whose numbers need it): a send node runs ``send_ops``
operations on its device (the thesis folds the start-up cost of a transfer into the send
node; its example has 10); a receive node takes no time; the transfer itself takes
``size / rate`` on the edge from the send to the receive node.
"""

from __future__ import annotations

import numpy as np

from commsched.placement.model import Cluster, Problem
from commsched.sim.devices import COMPUTE, RECV, SEND, ExecGraph

__all__ = ["DEFAULT_SEND_OPS", "exec_names", "insert_send_recv"]

#: Operations of a send node (thesis Sec. 2.5: nodes 6 and 8 of Fig. 2.3).
DEFAULT_SEND_OPS = 10.0


def insert_send_recv(p: Problem, c: Cluster, placement: np.ndarray,
                     send_ops: float = DEFAULT_SEND_OPS) -> ExecGraph:
    """The executed graph of ``p`` placed by ``placement`` (node -> device).

    Parameters
    ----------
    p : Problem
        The graph.
    c : Cluster
        The devices (speeds and transfer rates).
    placement : numpy.ndarray
        The device of every node.
    send_ops : float
        Operations of a send node (Sec. 2.5).

    Returns
    -------
    ExecGraph
        The graph with one send node per (producer, destination device) and a receive node
        on that device.

    References
    ----------
    Laich 2017, Secs. 2.4-2.5.
    """
    n = p.n
    dev = [int(x) for x in placement]
    speed = c.speed
    device = list(dev)
    duration = [float(p.ops[v]) / float(speed[dev[v]]) for v in range(n)]
    kind = [COMPUTE] * n
    origin = list(range(n))
    tensor = [float(x) for x in p.size]
    edges: list[tuple[int, int, float]] = []
    traffic = 0.0
    for v in range(n):
        dv = dev[v]
        remote: dict[int, list[int]] = {}
        for s in p.succ[v]:
            if dev[s] == dv:
                edges.append((v, s, 0.0))
            else:
                remote.setdefault(dev[s], []).append(s)
        for e in sorted(remote):
            snd, rcv = len(device), len(device) + 1
            device += [dv, e]
            duration += [send_ops / float(speed[dv]), 0.0]
            kind += [SEND, RECV]
            origin += [v, v]
            tensor += [0.0, float(p.size[v])]
            edges.append((v, snd, 0.0))
            edges.append((snd, rcv, float(p.size[v]) / float(c.rate[dv, e])))
            edges.extend((rcv, s, 0.0) for s in remote[e])
            traffic += float(p.size[v])
    return ExecGraph.build(c.n, device, duration, kind, origin, tensor, edges, traffic)


def exec_names(p: Problem, eg: ExecGraph) -> list[str]:
    """Readable names of the executed graph's nodes: the original id, ``send <id>-><d>``
    and ``recv <id>@<d>``.

    Parameters
    ----------
    p : Problem
        The original graph.
    eg : ExecGraph
        Its executed graph (:func:`insert_send_recv`).

    Returns
    -------
    list of str
        One name per node of ``eg``.

    References
    ----------
    Laich 2017, Sec. 2.4.
    """
    names = [str(x) for x in p.ids]
    for i in range(p.n, eg.n):
        src = p.ids[eg.origin[i]]
        if eg.kind[i] == SEND:
            names.append(f"send {src}->{eg.device[i + 1]}")
        else:
            names.append(f"recv {src}@{eg.device[i]}")
    return names
