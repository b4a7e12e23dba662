"""Arrangement functions as data (Pan et al., HotNets 2022, Sec. 4) and Table 1 from them.

An arrangement function maps an EchelonFlow's reference time ``r`` to its flows' ideal
finish times. Every arrangement of the paper is ``d_j = r + offset_j``, so here an
arrangement is the vector of offsets (:class:`commsched.echelon.model.EchelonFlow` holds
it):

* :func:`coflow` -- Eq. 5, every offset 0 (Coflow as a special EchelonFlow, Property 2);
* :func:`gpipe` -- Eq. 6, ``offset_j = j T`` (``T``: the consumer's compute time per
  micro-batch);
* :func:`fsdp` -- Eq. 7, one offset per all-gather Coflow ``C_0 .. C_{2n-1}`` of an
  ``n``-layer model (every flow of a Coflow shares it). **The boundary at i = n.** Read
  literally, Eq. 7 spaces ``C_n`` from ``C_{n-1}`` by ``T_bwd``. But the gap between two
  consecutive ideal finish times is the compute that consumes the earlier one: ``C_{n-1}``
  is consumed by the *forward* of the last layer, and only then can the backward of that
  layer consume ``C_n``. We therefore space ``C_1 .. C_n`` by ``T_fwd`` and
  ``C_{n+1} .. C_{2n-1}`` by ``T_bwd`` (Eq. 7 with its middle case extended to ``i = n``;
  the same choice as :mod:`commsched.echelon.jobs`). Both readings agree everywhere else.
* :func:`pipeline_timeline` / :func:`pipeline_echelonflows` -- **our extension** for the
  pipeline schedules the paper leaves open (1F1B as in PipeDream-Flush / Megatron-LM;
  PipeDream's steady state runs the same one-forward-one-backward order): the stage
  schedule is run with an infinitely fast network, and each flow's ideal finish time is
  the start of the computation that consumes it, its release the end of the computation
  that produces it. For GPipe with equal stages this gives Eq. 6 (tested); for 1F1B the
  offsets are no longer a constant ``T`` apart, and a head flow whose consumer is still
  busy gets a positive offset.

The paradigms' EchelonFlows (one iteration, communication only; collectives as in
:mod:`commsched.echelon.jobs`: a ring all-reduce is one Coflow of neighbour flows):
:func:`dp_allreduce` (one Coflow per gradient bucket), :func:`dp_ps` (a push Coflow per
bucket, one pull Coflow), :func:`tensor_parallel` (a forward and a backward all-reduce
Coflow per layer, all-to-all flows as the paper says), :func:`fsdp_echelonflows` (the
all-gathers of an iteration as one EchelonFlow of Coflows, Eq. 7, and one reduce-scatter
Coflow per layer) and :func:`pipeline_echelonflows`. :func:`classify` reads the shape of an
arrangement off its offsets and :func:`table1` regenerates the paper's Table 1 from them.

Examples
--------
>>> gpipe(3, 2.0).tolist()
[0.0, 2.0, 4.0]
>>> fsdp(2, t_fwd=1.0, t_bwd=2.0).tolist()   # C_0..C_3: fwd, fwd | bwd, bwd
[0.0, 1.0, 2.0, 4.0]
>>> classify(dp_allreduce(4, [8.0])[0])
'same'
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from commsched.echelon.model import EchelonFlow
from commsched.errors import CommschedError

__all__ = [
    "ARRANGEMENT_TEXT",
    "PIPELINE_SCHEDULES",
    "classify",
    "coflow",
    "dp_allreduce",
    "dp_ps",
    "fsdp",
    "fsdp_echelonflows",
    "gpipe",
    "pipeline_echelonflows",
    "pipeline_timeline",
    "table1",
    "tensor_parallel",
]

#: Pipeline schedules :func:`pipeline_timeline` knows.
PIPELINE_SCHEDULES = ("gpipe", "1f1b")

#: Table 1's wording of each arrangement shape of :func:`classify`.
ARRANGEMENT_TEXT = {"same": "Same flow finish time",
                    "staggered-flow": "Staggered flow finish time",
                    "staggered-coflow": "Staggered Coflow finish time"}


def coflow(n: int) -> np.ndarray:
    """The Coflow arrangement: ``n`` flows sharing the reference time as ideal finish time.

    Parameters
    ----------
    n : int
        The number of flows.

    Returns
    -------
    numpy.ndarray
        ``n`` zero offsets.

    Raises
    ------
    CommschedError
        If ``n < 1``.

    References
    ----------
    EchelonFlow (Pan et al., HotNets 2022), Sec. 4 (Case I), Eq. 5.
    """
    if n < 1:
        raise CommschedError("coflow: needs at least one flow")
    return np.zeros(n)


def gpipe(n: int, t: float) -> np.ndarray:
    """The GPipe arrangement: ``d_0 = r``, ``d_j = d_{j-1} + T``.

    Parameters
    ----------
    n : int
        The number of flows (micro-batches).
    t : float
        ``T``, the consumer's compute time per micro-batch (s).

    Returns
    -------
    numpy.ndarray
        The offsets ``j T``.

    Raises
    ------
    CommschedError
        If ``n < 1`` or ``t < 0``.

    References
    ----------
    EchelonFlow (Pan et al., HotNets 2022), Sec. 4 (Case II), Eq. 6 and Fig. 1b.
    """
    if n < 1 or not t >= 0:
        raise CommschedError("gpipe arrangement: n >= 1 flows and T >= 0")
    return np.arange(n) * float(t)


def fsdp(layers: int, t_fwd: float, t_bwd: float) -> np.ndarray:
    """The FSDP arrangement: offsets of the all-gather Coflows ``C_0 .. C_{2n-1}``.

    Parameters
    ----------
    layers : int
        ``n``.
    t_fwd, t_bwd : float
        A layer's forward and backward time (s).

    Returns
    -------
    numpy.ndarray
        ``2n`` offsets (the boundary at ``i = n`` spaced by ``T_fwd``: module docstring).

    Raises
    ------
    CommschedError
        If ``layers < 1`` or a time is negative.

    References
    ----------
    EchelonFlow (Pan et al., HotNets 2022), Sec. 4 (Case III), Eq. 7 and Fig. 3.
    """
    if layers < 1 or not (t_fwd >= 0 and t_bwd >= 0):
        raise CommschedError("fsdp arrangement: n >= 1 layers and T_fwd, T_bwd >= 0")
    gaps = np.array([0.0] + [float(t_fwd)] * layers + [float(t_bwd)] * (layers - 1))
    return np.cumsum(gaps)


def _all_to_all(hosts: Sequence[int], per_pair: float) -> tuple[list[int], list[int], list[float]]:
    src = [a for a in hosts for b in hosts if a != b]
    dst = [b for a in hosts for b in hosts if a != b]
    return src, dst, [per_pair] * len(src)


def _check_workers(workers: int, what: str) -> None:
    if workers < 2:
        raise CommschedError(f"{what}: needs at least two workers")


def _releases(workers: int, what: str, buckets: Sequence[float],
              ready: Sequence[float] | None) -> list[float]:
    """The release time of each bucket (default 0), after :func:`_check_workers`."""
    _check_workers(workers, what)
    return [0.0] * len(buckets) if ready is None else list(ready)


def dp_allreduce(workers: int, buckets: Sequence[float],
                 ready: Sequence[float] | None = None) -> list[EchelonFlow]:
    """DP with ring all-reduce: per gradient bucket of ``buckets[b]`` bytes, ready at
    ``ready[b]`` (default 0), one Coflow of ``workers`` flows ``w -> w+1`` of
    ``2 (W-1)/W`` of the bucket each (hosts ``0..W-1``).

    Parameters
    ----------
    workers : int
        ``W`` (at least 2).
    buckets : sequence of float
        Bytes per gradient bucket.
    ready : sequence of float, optional
        Release time per bucket (default 0).

    Returns
    -------
    list of EchelonFlow
        One Coflow (Eq. 5) per bucket.

    Raises
    ------
    CommschedError
        If ``workers < 2``.

    References
    ----------
    EchelonFlow (Pan et al., HotNets 2022), Table 1 (DP - AllReduce).
    """
    at = _releases(workers, "dp-allreduce", buckets, ready)
    w = workers
    out = []
    for b, (s, t) in enumerate(zip(buckets, at, strict=True)):
        out.append(EchelonFlow(list(range(w)), [(i + 1) % w for i in range(w)],
                               [2 * (w - 1) / w * s] * w, [t] * w, coflow(w),
                               name=f"allreduce{b}"))
    return out


def dp_ps(workers: int, buckets: Sequence[float],
          ready: Sequence[float] | None = None, pull_at: float | None = None
          ) -> list[EchelonFlow]:
    """DP with one parameter server (host ``workers``): a push Coflow per bucket (every
    worker sends the bucket to the server, at ``ready[b]``) and one pull Coflow (the
    server sends the whole model to every worker, at ``pull_at``, default the last
    ready time).

    Parameters
    ----------
    workers, buckets, ready
        As for :func:`dp_allreduce` (workers are hosts ``0..workers-1``; ``ready`` is when
        each bucket is pushed).
    pull_at : float, optional
        Release of the pull.

    Returns
    -------
    list of EchelonFlow
        The push Coflows, then the pull Coflow.

    Raises
    ------
    CommschedError
        If ``workers < 2``.

    References
    ----------
    EchelonFlow (Pan et al., HotNets 2022), Table 1 (DP - PS).
    """
    at = _releases(workers, "dp-ps", buckets, ready)
    ps, w = workers, workers
    out = [EchelonFlow(list(range(w)), [ps] * w, [s] * w, [t] * w, coflow(w), name=f"push{b}")
           for b, (s, t) in enumerate(zip(buckets, at, strict=True))]
    t_pull = max(at) if pull_at is None else pull_at
    out.append(EchelonFlow([ps] * w, list(range(w)), [float(sum(buckets))] * w, [t_pull] * w,
                           coflow(w), name="pull"))
    return out


def tensor_parallel(workers: int, layer_bytes: Sequence[float]) -> list[EchelonFlow]:
    """Megatron-style TP: per layer a forward (activations) and a backward (gradients)
    all-reduce of ``layer_bytes[k]``, each a Coflow of all-to-all flows (reduce-scatter
    plus all-gather: ``2 S / W`` per ordered pair).

    Parameters
    ----------
    workers : int
        ``W`` (at least 2).
    layer_bytes : sequence of float
        ``S`` per layer.

    Returns
    -------
    list of EchelonFlow
        The forward all-reduces, then the backward ones.

    Raises
    ------
    CommschedError
        If ``workers < 2``.

    References
    ----------
    EchelonFlow (Pan et al., HotNets 2022), Table 1 (TP) and Fig. 5.
    """
    _check_workers(workers, "tensor-parallel")
    hosts = list(range(workers))
    out = []
    for phase in ("fwd", "bwd"):
        for k, s in enumerate(layer_bytes):
            src, dst, size = _all_to_all(hosts, 2 * s / workers)
            out.append(EchelonFlow(src, dst, size, [0.0] * len(src), coflow(len(src)),
                                   name=f"{phase}-allreduce{k}"))
    return out


def fsdp_echelonflows(workers: int, layer_bytes: Sequence[float], t_fwd: float,
                      t_bwd: float) -> list[EchelonFlow]:
    """FSDP / ZeRO-3: the ``2n`` all-gathers of an iteration (layer ``k``'s parameters
    before its forward, again before its backward, last layer first) as one EchelonFlow
    of Coflows (Eq. 7, all issued at 0: prefetching is not limited), then per layer a
    reduce-scatter Coflow. An all-gather of ``S`` bytes: every worker sends its shard
    ``S / W`` to every other worker; a reduce-scatter the same amount.

    Parameters
    ----------
    workers : int
        ``W`` (at least 2).
    layer_bytes : sequence of float
        Parameter bytes per layer.
    t_fwd, t_bwd : float
        A layer's forward and backward time (s).

    Returns
    -------
    list of EchelonFlow
        The all-gather EchelonFlow, then the reduce-scatter Coflows (last layer first).

    Raises
    ------
    CommschedError
        If ``workers < 2`` or as :func:`fsdp`.

    References
    ----------
    EchelonFlow (Pan et al., HotNets 2022), Table 1 (FSDP), Sec. 4 (Case III), Eq. 7.
    """
    _check_workers(workers, "fsdp")
    n = len(layer_bytes)
    hosts = list(range(workers))
    offsets = fsdp(n, t_fwd, t_bwd)
    order = list(range(n)) + list(range(n - 1, -1, -1))
    src: list[int] = []
    dst: list[int] = []
    size: list[float] = []
    off: list[float] = []
    for i, k in enumerate(order):
        s, d, z = _all_to_all(hosts, layer_bytes[k] / workers)
        src, dst, size = src + s, dst + d, size + z
        off += [float(offsets[i])] * len(s)
    out = [EchelonFlow(src, dst, size, [0.0] * len(src), off, name="allgather")]
    for k in range(n - 1, -1, -1):
        s, d, z = _all_to_all(hosts, layer_bytes[k] / workers)
        out.append(EchelonFlow(s, d, z, [0.0] * len(s), coflow(len(s)),
                               name=f"reduce-scatter{k}"))
    return out


def _stage_order(schedule: str, stages: int, s: int, m: int) -> list[tuple[str, int]]:
    if schedule == "gpipe":
        return [("F", j) for j in range(m)] + [("B", j) for j in range(m - 1, -1, -1)]
    warm = min(stages - s - 1, m)
    order = [("F", j) for j in range(warm)]
    for k in range(m - warm):
        order += [("F", warm + k), ("B", k)]
    return order + [("B", j) for j in range(m - warm, m)]


def pipeline_timeline(stages: int, micro_batches: int, fwd: Sequence[float] | float,
                      bwd: Sequence[float] | float, schedule: str = "gpipe"
                      ) -> dict[tuple[str, int, int], tuple[float, float]]:
    """Start and end of every computation ``(kind, stage, micro-batch)`` (kind ``F`` or
    ``B``) of one pipelined mini-batch with an infinitely fast network: stage ``s`` runs
    its ops in the ``schedule``'s order (``gpipe``: all forwards, then the backwards last
    micro-batch first; ``1f1b``: ``S - s - 1`` warm-up forwards, then one forward one
    backward, then the remaining backwards), ``F(s, j)`` after ``F(s-1, j)``, ``B(s, j)``
    after ``B(s+1, j)``.

    Parameters
    ----------
    stages : int
        ``S`` (at least 2).
    micro_batches : int
        ``M`` (at least 1).
    fwd, bwd : float or sequence of float
        Per stage time per micro-batch (s).
    schedule : str
        One of :data:`PIPELINE_SCHEDULES`.

    Returns
    -------
    dict
        ``{(kind, stage, micro-batch): (start, end)}``.

    Raises
    ------
    CommschedError
        If the schedule is unknown, a count is too small or a time is negative.

    References
    ----------
    EchelonFlow (Pan et al., HotNets 2022), Sec. 4 (Case II) and Fig. 1b (GPipe); 1F1B is our
    extension.
    """
    if schedule not in PIPELINE_SCHEDULES:
        raise CommschedError(f"unknown pipeline schedule {schedule!r}; known: "
                             f"{', '.join(PIPELINE_SCHEDULES)}")
    if stages < 2 or micro_batches < 1:
        raise CommschedError("pipeline: needs >= 2 stages and >= 1 micro-batch")
    f = np.broadcast_to(np.asarray(fwd, dtype=float), (stages,))
    b = np.broadcast_to(np.asarray(bwd, dtype=float), (stages,))
    if np.any(f < 0) or np.any(b < 0):
        raise CommschedError("pipeline: compute times must be >= 0")
    orders = [_stage_order(schedule, stages, s, micro_batches) for s in range(stages)]
    pos = [0] * stages
    free = [0.0] * stages
    done: dict[tuple[str, int, int], tuple[float, float]] = {}
    total = sum(len(o) for o in orders)
    while len(done) < total:
        progressed = False
        for s in range(stages):
            while pos[s] < len(orders[s]):
                kind, j = orders[s][pos[s]]
                dep = ("F", s - 1, j) if kind == "F" else ("B", s + 1, j)
                if kind == "F" and s == 0:
                    ready = 0.0
                elif kind == "B" and s == stages - 1:
                    ready = done[("F", s, j)][1]
                elif dep in done:
                    ready = done[dep][1]
                else:
                    break
                start = max(free[s], ready)
                free[s] = start + (f[s] if kind == "F" else b[s])
                done[(kind, s, j)] = (start, free[s])
                pos[s] += 1
                progressed = True
        if not progressed:  # cannot happen for the two schedules; guards a future one
            raise CommschedError(f"pipeline schedule {schedule!r} deadlocks")
    return done


def pipeline_echelonflows(stages: int, micro_batches: int, fwd: Sequence[float] | float,
                          bwd: Sequence[float] | float, act_bytes: Sequence[float] | float,
                          schedule: str = "gpipe") -> list[EchelonFlow]:
    """Per pair of consecutive stages (host ``s`` = stage ``s``) two EchelonFlows: the
    activations ``s -> s+1`` and the gradients ``s+1 -> s`` of every micro-batch, released
    when their producer ends and ideally finished when their consumer starts in
    :func:`pipeline_timeline`; flows in release order, offsets from the head's release.
    For GPipe with equal stages the offsets are Eq. 6's.

    Parameters
    ----------
    stages, micro_batches, fwd, bwd, schedule
        As :func:`pipeline_timeline`.
    act_bytes : float or sequence of float
        ``act_bytes[s]``: what stage ``s`` sends to ``s + 1`` (gradients: the same size).

    Returns
    -------
    list of EchelonFlow
        ``act0, grad0, act1, grad1, ...``.

    Raises
    ------
    CommschedError
        As :func:`pipeline_timeline`.

    References
    ----------
    EchelonFlow (Pan et al., HotNets 2022), Sec. 4, Eq. 6 and Table 1 (PP); 1F1B is our extension.
    """
    tl = pipeline_timeline(stages, micro_batches, fwd, bwd, schedule)
    size = np.broadcast_to(np.asarray(act_bytes, dtype=float), (stages,))
    out = []
    for s in range(stages - 1):
        for kind, a, b_, name in (("F", s, s + 1, f"act{s}"), ("B", s + 1, s, f"grad{s}")):
            rel = np.array([tl[(kind, a, j)][1] for j in range(micro_batches)])
            ideal = np.array([tl[(kind, b_, j)][0] for j in range(micro_batches)])
            order = np.argsort(rel, kind="stable")
            rel, ideal = rel[order], ideal[order]
            out.append(EchelonFlow([a] * micro_batches, [b_] * micro_batches,
                                   [float(size[s])] * micro_batches, rel, ideal - rel.min(),
                                   name=name))
    return out


def classify(h: EchelonFlow, tol: float = 1e-12) -> str:
    """The shape of ``h``'s arrangement: ``same`` (one ideal finish time: a Coflow),
    ``staggered-flow`` (no two flows share one) or ``staggered-coflow`` (Coflows of
    several flows, staggered).

    Parameters
    ----------
    h : EchelonFlow
    tol : float
        Offsets closer than this are equal.

    Returns
    -------
    str

    References
    ----------
    EchelonFlow (Pan et al., HotNets 2022), Table 1 (its "arrangement" column).
    """
    off = np.sort(h.offset)
    classes = np.split(off, np.flatnonzero(np.diff(off) > tol) + 1)
    if len(classes) == 1:
        return "same"
    return "staggered-flow" if all(len(c) == 1 for c in classes) else "staggered-coflow"


def table1(workers: int = 4, layers: int = 3, micro_batches: int = 4,
           extended: bool = False) -> pd.DataFrame:
    """Table 1 regenerated: per paradigm, whether every EchelonFlow it creates is a
    Coflow, and the shape of its arrangement (the most staggered one it creates), from
    small instances of each paradigm.

    Parameters
    ----------
    workers, layers, micro_batches : int
        The instances' sizes.
    extended : bool
        Add our 1F1B pipeline row.

    Returns
    -------
    pandas.DataFrame
        ``paradigm, coflow_compliance, arrangement, echelonflows``.

    References
    ----------
    EchelonFlow (Pan et al., HotNets 2022), Table 1.
    """
    layer = [float(k + 1) for k in range(layers)]
    cases: list[tuple[str, list[EchelonFlow]]] = [
        ("DP - AllReduce", dp_allreduce(workers, layer)),
        ("DP - PS", dp_ps(workers, layer)),
        ("PP", pipeline_echelonflows(workers, micro_batches, 1.0, 2.0, 1.0, "gpipe")),
        ("TP", tensor_parallel(workers, layer)),
        ("FSDP", fsdp_echelonflows(workers, layer, 1.0, 2.0)),
    ]
    if extended:
        cases.append(("PP - 1F1B", pipeline_echelonflows(workers, micro_batches, 1.0, 2.0,
                                                          1.0, "1f1b")))
    rank = {"same": 0, "staggered-flow": 1, "staggered-coflow": 2}
    rows = []
    for name, hs in cases:
        shapes = [classify(h) for h in hs]
        shape = max(shapes, key=rank.__getitem__)
        rows.append({"paradigm": name, "coflow_compliance": all(s == "same" for s in shapes),
                     "arrangement": ARRANGEMENT_TEXT[shape], "echelonflows": len(hs)})
    return pd.DataFrame(rows)
