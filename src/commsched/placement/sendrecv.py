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
    n, ndev = p.n, c.n
    dev = np.asarray(placement, dtype=np.int64)
    speed = np.asarray(c.speed, dtype=float)
    eu, ev = p.edges  # edge k: eu[k] -> ev[k], producer-major, successors ascending
    k = np.arange(len(eu))
    remote = dev[eu] != dev[ev]
    ru, rv, rk = eu[remote], ev[remote], k[remote]
    # one pair per (producer, destination device), by producer and then device
    pairs, pair_of = np.unique(ru * ndev + dev[rv], return_inverse=True)
    pv, pe = pairs // ndev, pairs % ndev
    m = len(pairs)
    snd = n + 2 * np.arange(m)
    rcv = snd + 1

    def interleave(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.stack([a, b], axis=1).reshape(-1)

    size = np.asarray(p.size, dtype=float)
    device = np.concatenate([dev, interleave(dev[pv], pe)])
    duration = np.concatenate([np.asarray(p.ops, dtype=float) / speed[dev],
                               interleave(send_ops / speed[dev[pv]], np.zeros(m))])
    kind = np.concatenate([np.full(n, COMPUTE), np.tile([SEND, RECV], m)])
    origin = np.concatenate([np.arange(n), np.repeat(pv, 2)])
    tensor = np.concatenate([size, interleave(np.zeros(m), size[pv])])
    # the edges in the order of the loop of the thesis' Sec. 2.4 (``ExecGraph.build``
    # keeps it per source and per target): per producer its local edges, then per
    # destination device the edge to the send node, the transfer and the receive node's
    # edges to the consumers there; sorted by (producer, block, rank within the block)
    local = ~remote
    zeros_m = np.zeros(m)
    u = np.concatenate([eu[local], pv, snd, rcv[pair_of]])
    v = np.concatenate([ev[local], snd, rcv, rv])
    delay = np.concatenate([np.zeros(local.sum()), zeros_m, size[pv] / c.rate[dev[pv], pe],
                            np.zeros(len(rv))])
    producer = np.concatenate([eu[local], pv, pv, ru])
    block = np.concatenate([np.zeros(local.sum(), dtype=np.int64), 1 + pe, 1 + pe,
                            1 + dev[rv]])
    rank = np.concatenate([k[local], np.zeros(m, dtype=np.int64),
                           np.ones(m, dtype=np.int64), 2 + rk])
    order = np.lexsort((rank, block, producer))
    edges = np.stack([u[order], v[order], delay[order]], axis=1)
    traffic = float(sum(size[pv].tolist()))  # summed in pair order, as the loop adds
    return ExecGraph.build(ndev, device, duration, kind, origin, tensor, edges, traffic)


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
