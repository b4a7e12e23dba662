"""Scheduling efficiency (TicTac Eq. 3) of every worker from one iteration's timeline.

See :mod:`commsched.tictac.sim` (Iteration metrics) for the definitions.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from commsched.tictac.sim.compose import NET_KINDS, MultiWorker

__all__ = ["Timeline", "timeline_efficiency", "timeline_index"]


@dataclass(frozen=True)
class Timeline:
    """Index arrays of a composed cluster for :func:`timeline_efficiency`.

    Built once per cluster by :func:`timeline_index`; positions are local (in the worker
    graph's node order) unless said otherwise.

    Attributes
    ----------
    compute : numpy.ndarray
        The compute ops.
    net : numpy.ndarray
        The transfers (recvs and sends).
    net_preds : numpy.ndarray
        ``(len(net), k)``: the predecessors of each transfer, padded with -1 (none).
    channels : tuple of numpy.ndarray
        Per shared channel, the composite indices of its ops (every worker's).
    """

    compute: np.ndarray
    net: np.ndarray
    net_preds: np.ndarray
    channels: tuple[np.ndarray, ...]


def timeline_index(mw: MultiWorker) -> Timeline:
    """The index arrays :func:`timeline_efficiency` reads, for every iteration of ``mw``.

    Parameters
    ----------
    mw : MultiWorker
        The composed cluster.

    Returns
    -------
    Timeline
    """
    w = mw.worker
    local = list(w.nodes)
    pos = {n: i for i, n in enumerate(local)}
    kinds = [w.nodes[n]["kind"] for n in local]
    net = [i for i, k in enumerate(kinds) if k in NET_KINDS]
    preds = [[pos[p] for p in w.predecessors(local[i])] for i in net]
    width = max((len(p) for p in preds), default=0) or 1
    pad = np.full((len(net), width), -1, dtype=np.int64)
    for k, p in enumerate(preds):
        pad[k, :len(p)] = p
    per = mw.ops_per_worker
    offsets = np.arange(mw.n_workers, dtype=np.int64)[:, None] * per
    channels = []
    for r in mw.shared:
        loc = np.array([i for i in net if w.nodes[local[i]]["resource"] == r], dtype=np.int64)
        if len(loc):
            channels.append((offsets + loc[None, :]).ravel())
    return Timeline(
        compute=np.array([i for i, k in enumerate(kinds) if k not in NET_KINDS],
                         dtype=np.int64),
        net=np.array(net, dtype=np.int64), net_preds=pad, channels=tuple(channels),
    )


def timeline_efficiency(
    mw: MultiWorker, durations: np.ndarray, end: np.ndarray,
    timeline: Timeline | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-worker scheduling efficiency and busy times of one simulated iteration.

    See :mod:`commsched.tictac.sim` (Iteration metrics): ``E = (U - m) / (U - L)`` with
    ``U`` the sum and ``L`` the larger of the worker's compute and communication busy
    times and ``m`` its finish time; 1 when ``U == L``. A transfer is outstanding from
    the end of its last producer (0 for a recv) to its own end, so queueing behind other
    workers' transfers counts as communication time, as in a measured timeline.

    Parameters
    ----------
    mw : MultiWorker
        The composed cluster.
    durations : numpy.ndarray
        The iteration's op durations, in composed-graph order.
    end : numpy.ndarray
        The end time of every op in the iteration's schedule, same order.
    timeline : Timeline, optional
        ``timeline_index(mw)``, computed when not given.

    Returns
    -------
    efficiency, compute_busy, comm_busy : numpy.ndarray
        One entry per worker; ``efficiency`` is clipped to [0, 1].

    References
    ----------
    .. [1] Hashemi, Jyothi & Campbell, "TicTac", SysML 2019, Sec. 3.2, Eqs. 1-3.
    """
    tl = timeline or timeline_index(mw)
    n, per = mw.n_workers, mw.ops_per_worker
    d2 = np.asarray(durations, dtype=float).reshape(n, per)
    e2 = np.asarray(end, dtype=float).reshape(n, per)
    comp = d2[:, tl.compute].sum(axis=1)
    if len(tl.net):
        ez = np.concatenate([e2, np.zeros((n, 1))], axis=1)  # column -1: "no predecessor"
        ready = ez[:, tl.net_preds].max(axis=2)
        ends = e2[:, tl.net]
        order = np.argsort(ready, axis=1, kind="stable")
        s_sorted = np.take_along_axis(ready, order, axis=1)
        e_sorted = np.take_along_axis(ends, order, axis=1)
        reach = np.maximum.accumulate(e_sorted, axis=1)
        prev = np.concatenate([np.full((n, 1), -np.inf), reach[:, :-1]], axis=1)
        comm = np.clip(e_sorted - np.maximum(s_sorted, prev), 0.0, None).sum(axis=1)
    else:
        comm = np.zeros(n)
    m = e2.max(axis=1)
    upper, lower = comp + comm, np.maximum(comp, comm)
    span = upper - lower
    tol = 1e-9 * np.maximum(1.0, upper)
    with np.errstate(divide="ignore", invalid="ignore"):
        eff = np.where(span > tol, (upper - m) / np.where(span > tol, span, 1.0), 1.0)
    return np.clip(eff, 0.0, 1.0), comp, comm
