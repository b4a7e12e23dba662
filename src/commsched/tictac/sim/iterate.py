"""Synchronous iterations of a composed cluster: orders, noise, the barrier.

See :mod:`commsched.tictac.sim` (Orders, Noise, Iteration metrics).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

import numpy as np

from commsched.errors import CommschedError
from commsched.sim.priority import Schedule, simulate_compiled
from commsched.sim.validate import check_schedule
from commsched.tictac.sim.compose import MultiWorker
from commsched.tictac.sim.decompose import decomposed_schedule
from commsched.tictac.sim.timeline import timeline_efficiency, timeline_index

__all__ = [
    "CONTENTION_PASSES",
    "Interleave",
    "IterationResult",
    "Method",
    "RunResult",
    "channel_overlap",
    "iteration",
    "jitter_durations",
    "rank_priorities",
    "run",
    "worker_noise_factors",
]

#: How :func:`iteration` computes a schedule (see there).
Method = Literal["auto", "reference"]

#: How the baseline interleaves the requests of different workers (see :func:`run`).
Interleave = Literal["rank", "random"]

#: Width of the random tie-break added to dense ranks (must stay below 1).
_TIE_WIDTH = 0.5


def rank_priorities(
    mw: MultiWorker, order: Mapping[str, float], tie: np.ndarray | None = None
) -> np.ndarray:
    """Per-worker recv priorities for an order shared by every worker.

    Each recv gets the dense rank of its priority plus ``tie`` scaled into ``[0, 0.5)``,
    so that equal ranks of different workers are interleaved by ``tie`` and never reorder
    a worker's own ranks (:mod:`commsched.tictac.sim`, Orders).

    Parameters
    ----------
    mw : MultiWorker
        The composed cluster.
    order : mapping of str to float
        Recv op ids of the worker graph to numbers, lower first; equal numbers allowed
        (TIC's shared priorities). A recv it does not name goes after all named ones.
    tie : numpy.ndarray, optional
        ``(n_workers, n_recvs)`` numbers in ``[0, 1)``; default 0.

    Returns
    -------
    numpy.ndarray
        ``(n_workers, n_recvs)`` priorities in ``mw.recvs`` order.

    Raises
    ------
    CommschedError
        If ``order`` names an op that is not a recv of the worker graph.

    References
    ----------
    .. [1] Hashemi, Jyothi & Campbell, "TicTac", SysML 2019, Sec. 5.1 (transfers of equal
       priority go in any order).
    """
    unknown = set(order) - set(mw.recvs)
    if unknown:
        raise CommschedError(
            f"the order names ops that are not recvs of the worker graph: {sorted(unknown)[:3]}"
        )
    big = max(order.values(), default=0.0) + 1.0
    raw = np.array([order.get(r, big) for r in mw.recvs], dtype=float)
    ranks = np.unique(raw, return_inverse=True)[1].astype(float)
    out = np.broadcast_to(ranks, (mw.n_workers, mw.n_recvs)).copy()
    if tie is not None:
        out += _TIE_WIDTH * np.asarray(tie, dtype=float)
    return out


def jitter_durations(
    mw: MultiWorker, jitter: float, rng: np.random.Generator, scale: np.ndarray | None = None
) -> np.ndarray:
    """Op durations of one iteration: the base durations times ``U[1-jitter, 1+jitter]``.

    Parameters
    ----------
    mw : MultiWorker
        The composed cluster (its ``base_duration``).
    jitter : float
        Half-width of the uniform factor, ``0 <= jitter < 1``; 0 draws nothing.
    rng : numpy.random.Generator
        The jitter's stream.
    scale : numpy.ndarray, optional
        Per-op factors applied before the jitter (the batch factor on compute ops).

    Returns
    -------
    numpy.ndarray
        One duration per op, composed-graph order.
    """
    d = mw.base_duration if scale is None else mw.base_duration * scale
    if jitter == 0.0:
        return d
    return d * rng.uniform(1.0 - jitter, 1.0 + jitter, size=d.shape)


def worker_noise_factors(cv: float, n_workers: int, rng: np.random.Generator) -> np.ndarray:
    """Per-worker compute factors of one iteration (:mod:`commsched.tictac.sim`, Noise).

    Parameters
    ----------
    cv : float
        Their coefficient of variation, >= 0.
    n_workers : int
        How many to draw.
    rng : numpy.random.Generator
        The noise's stream (not used when ``cv == 0``).

    Returns
    -------
    numpy.ndarray
        Lognormal factors with mean 1 and coefficient of variation ``cv`` (``sigma^2 =
        ln(1 + cv^2)``); all ones when ``cv == 0``.

    Examples
    --------
    >>> f = worker_noise_factors(0.1, 200_000, np.random.default_rng(0))
    >>> round(float(f.mean()), 2), round(float(f.std() / f.mean()), 2)
    (1.0, 0.1)
    """
    if cv == 0.0:
        return np.ones(n_workers)
    sigma = math.sqrt(math.log1p(cv * cv))
    return np.exp(sigma * rng.standard_normal(n_workers) - sigma * sigma / 2.0)


@dataclass(frozen=True)
class IterationResult:
    """One synchronous iteration, as :func:`iteration` returns it.

    Attributes
    ----------
    worker_end : numpy.ndarray
        Every worker's finish time (its last op's end).
    schedule : Schedule
        The schedule of the composed graph.
    durations : numpy.ndarray or None
        The op durations the schedule ran with, where contention changed them (see
        :func:`iteration`); None: the durations given.

    References
    ----------
    .. [1] Hashemi, Jyothi & Campbell, "TicTac", SysML 2019, Sec. 6.3 (straggler effect).
    """

    worker_end: np.ndarray
    schedule: Schedule
    durations: np.ndarray | None = None

    @property
    def iteration_time(self) -> float:
        """The slowest worker's finish time (the synchronous barrier)."""
        return float(self.worker_end.max())

    @property
    def straggler(self) -> float:
        """Longest wait of any worker at the barrier over the iteration time (Sec. 6.3)."""
        t = self.iteration_time
        return float((t - self.worker_end.min()) / t) if t > 0 else 0.0


def iteration(
    mw: MultiWorker,
    priorities: np.ndarray,
    durations: np.ndarray | None = None,
    validate_schedule: bool = True,
    method: Method = "auto",
    contention: float = 0.0,
) -> IterationResult:
    """Simulate one synchronous iteration of the composed cluster.

    Parameters
    ----------
    mw : MultiWorker
        The composed cluster.
    priorities : numpy.ndarray
        ``(n_workers, n_recvs)`` priority of each worker's recvs (see
        :func:`rank_priorities`); lower is sent first by the shared channel.
    durations : numpy.ndarray, optional
        Op durations in composed-graph order; default the base durations.
    validate_schedule : bool, optional
        Check the schedule with :func:`commsched.sim.validate.check_schedule` (default).
    method : {"auto", "reference"}, optional
        ``reference``: :func:`commsched.sim.priority.simulate_compiled` on the composed
        graph. ``auto`` (default): the same schedule computed by decomposition
        (:func:`commsched.tictac.sim.decompose.decomposed_schedule`: channels, then each
        worker's compute unit, then the uplinks) when the graph allows it and every
        duration is > 0, else the reference. The decomposition exists for speed only:
        profiling 16 workers of a coarsened ResNet-50 (17,000 ops per iteration) showed
        97 % of the time in the general event loop, 0.1 s per iteration, too slow for
        1,000 iterations in a minute; equality with the reference is tested on random
        graphs.

    contention : float, optional
        How much slower a compute op runs while the network is busy (>= 0; default 0,
        none): every compute op takes ``d * (1 + contention * phi)``, ``phi`` the share
        of its run during which some shared channel carries a transfer (the hosts'
        cores also run the transfers' protocol work). ``phi`` depends on the schedule
        and the schedule on it, so the schedule is recomputed
        :data:`CONTENTION_PASSES` times, each pass with the ``phi`` of the last
        (:func:`channel_overlap`).

    Returns
    -------
    IterationResult
        With ``durations`` set when ``contention`` > 0.

    Raises
    ------
    CommschedError
        If ``priorities`` or ``durations`` has the wrong shape, ``method`` is unknown or
        ``contention`` is negative.
    InvalidSchedule
        If ``validate_schedule`` and the schedule breaks a rule of the executor.

    References
    ----------
    .. [1] Hashemi, Jyothi & Campbell, "TicTac", SysML 2019, Secs. 2.3 and 6.
    """
    p = np.asarray(priorities, dtype=float)
    if p.shape != (mw.n_workers, mw.n_recvs):
        raise CommschedError(
            f"priorities must have shape {(mw.n_workers, mw.n_recvs)}, got {p.shape}"
        )
    if method not in ("auto", "reference"):
        raise CommschedError(f"method must be auto or reference, got {method!r}")
    d = mw.base_duration if durations is None else np.asarray(durations, dtype=float)
    if d.shape != mw.base_duration.shape:
        raise CommschedError(f"durations must have {mw.cg.n} entries, got {d.shape}")
    if not (math.isfinite(contention) and contention >= 0):
        raise CommschedError(f"contention must be finite and >= 0, got {contention!r}")
    if contention > 0:
        res = iteration(mw, p, d, False, method)
        for k in range(CONTENTION_PASSES):
            phi = channel_overlap(mw, res.schedule)
            dk = np.where(mw.is_net, d, d * (1.0 + contention * phi))
            last = k == CONTENTION_PASSES - 1
            res = iteration(mw, p, dk, validate_schedule and last, method)
        return dataclasses.replace(res, durations=dk)
    cg = mw.cg
    if method == "auto" and mw.plan is not None and bool(np.all(d > 0)):
        start, end = decomposed_schedule(mw, mw.plan, p, d)
        s = Schedule(cg.ids, start, end)
        if validate_schedule:
            check_schedule(dataclasses.replace(cg, duration=d.tolist()), s)
    else:
        prio: list[float | None] = [None] * cg.n
        for i, v in zip(mw.recv_index.ravel().tolist(), p.ravel().tolist(), strict=True):
            prio[i] = v
        cg = dataclasses.replace(cg, duration=d.tolist(), priority=prio)
        s = simulate_compiled(cg)
        if validate_schedule:
            check_schedule(cg, s)
    ends = np.asarray(s.end).reshape(mw.n_workers, mw.ops_per_worker).max(axis=1)
    return IterationResult(worker_end=ends, schedule=s)


#: Schedules :func:`iteration` recomputes under contention (after the first).
CONTENTION_PASSES = 3


def union_busy(flight_start: np.ndarray, flight_end: np.ndarray, start: np.ndarray,
               end: np.ndarray) -> np.ndarray:
    """Per interval, the time during which some flight is in progress.

    Parameters
    ----------
    flight_start, flight_end : numpy.ndarray
        The flights (e.g. transfers' runs), as start and end times; they may overlap.
    start, end : numpy.ndarray
        The intervals to measure (e.g. ops' runs), ``start <= end``.

    Returns
    -------
    numpy.ndarray
        Per interval, the length of its intersection with the union of the flights.

    Examples
    --------
    >>> union_busy(np.array([0.0, 1.0]), np.array([2.0, 3.0]), np.array([1.0, 5.0]),
    ...            np.array([4.0, 6.0])).tolist()
    [2.0, 0.0]
    """
    s_u: list[float] = []
    e_u: list[float] = []
    for a, b in sorted(zip(np.asarray(flight_start).tolist(), np.asarray(flight_end).tolist(),
                           strict=True)):  # the union of the flights, interval by interval
        if s_u and a <= e_u[-1]:
            e_u[-1] = max(e_u[-1], b)
        else:
            s_u.append(a)
            e_u.append(b)
    su, eu = np.array(s_u), np.array(e_u)
    before = np.concatenate([[0.0], np.cumsum(eu - su)])  # busy time before each interval

    def busy_until(t: np.ndarray) -> np.ndarray:
        if not len(su):
            return np.zeros_like(t)
        j = np.searchsorted(su, t, side="right") - 1  # the last interval begun by t
        jj = np.maximum(j, 0)
        return np.where(j >= 0, before[jj] + np.clip(t - su[jj], 0.0, eu[jj] - su[jj]), 0.0)

    start, end = np.asarray(start, dtype=float), np.asarray(end, dtype=float)
    return busy_until(end) - busy_until(start)


def channel_overlap(mw: MultiWorker, schedule: Schedule) -> np.ndarray:
    """Per op, the share of its run during which some transfer is on a shared channel.

    Parameters
    ----------
    mw : MultiWorker
        The composed cluster.
    schedule : Schedule
        A schedule of ``mw.cg``; the transfers are ``mw.is_net``.

    Returns
    -------
    numpy.ndarray
        One share in [0, 1] per op (0 for an op of zero duration), against the union of
        every transfer's run, the op's own included.

    Examples
    --------
    >>> from commsched.model.graph import new_graph, add_op
    >>> from commsched.tictac.sim import compose
    >>> g = new_graph({"ps0": 1, "cpu": 1})
    >>> add_op(g, "r", "recv", "ps0", 1.0); add_op(g, "c", "compute", "cpu", 4.0)
    >>> mw = compose(g, 1)
    >>> channel_overlap(mw, iteration(mw, np.zeros((1, 1))).schedule).tolist()
    [1.0, 0.25]
    """
    net = mw.is_net
    start, end = np.asarray(schedule.start), np.asarray(schedule.end)
    busy = union_busy(start[net], end[net], start, end)
    length = end - start
    return np.divide(busy, length, out=np.zeros_like(length), where=length > 0)


@dataclass(frozen=True)
class RunResult:
    """``n_iterations`` synchronous iterations of one configuration, as :func:`run`
    returns them.

    Attributes
    ----------
    worker_end : numpy.ndarray
        ``[t, i]``: worker ``i``'s finish time in iteration ``t``.
    ranks : numpy.ndarray
        ``[t, i, k]``: the rank of recv ``k`` in worker ``i``'s order in iteration ``t``
        (0 = first).
    validated : int
        How many schedules were checked.
    efficiency, compute_busy, comm_busy : numpy.ndarray
        ``[t, i]``, from iteration ``t``'s timeline
        (:func:`commsched.tictac.sim.timeline_efficiency`).
    channel_load : numpy.ndarray
        ``[t, c]``: the summed duration of every transfer on shared channel ``c`` in
        iteration ``t``.

    References
    ----------
    .. [1] Hashemi, Jyothi & Campbell, "TicTac", SysML 2019, Sec. 3.2 (Eqs. 1-3) and
       Sec. 6.3; arXiv:1803.03288v1, Sec. 6 (theoretical best and worst).
    """

    worker_end: np.ndarray
    ranks: np.ndarray
    validated: int
    efficiency: np.ndarray
    compute_busy: np.ndarray
    comm_busy: np.ndarray
    channel_load: np.ndarray

    @property
    def best_time(self) -> np.ndarray:
        """Per iteration, the theoretical best (E = 1) iteration time: the slowest worker's
        Eq. (2) bound with that iteration's op times, the larger of its compute time and
        the busiest shared channel's load (which carries every worker's transfers)."""
        busiest = self.channel_load.max(axis=1, initial=0.0)
        return np.asarray(np.maximum(self.compute_busy.max(axis=1), busiest))

    @property
    def worst_time(self) -> np.ndarray:
        """Per iteration, the theoretical worst (E = 0) iteration time: Eq. (1), nothing
        overlaps -- the slowest worker's compute time plus every shared channel's load."""
        return np.asarray(self.compute_busy.max(axis=1) + self.channel_load.sum(axis=1))

    @property
    def iteration_time(self) -> np.ndarray:
        """Per iteration, the slowest worker's finish time."""
        return np.asarray(self.worker_end.max(axis=1))

    @property
    def straggler(self) -> np.ndarray:
        """Per iteration, the longest barrier wait over the iteration time (Sec. 6.3)."""
        t = self.iteration_time
        wait = t - self.worker_end.min(axis=1)
        return np.divide(wait, t, out=np.zeros_like(t), where=t > 0)


def run(
    mw: MultiWorker,
    order: Mapping[str, float] | None,
    n_iterations: int,
    jitter: float = 0.0,
    seed: int = 0,
    validate_every: int = 1,
    compute_scale: float = 1.0,
    interleave: Interleave = "rank",
    method: Method = "auto",
    worker_noise: float = 0.0,
    contention: float = 0.0,
) -> RunResult:
    """Simulate ``n_iterations`` independent synchronous iterations.

    Parameters
    ----------
    mw : MultiWorker
        The composed cluster.
    order : mapping of str to float or None
        The recv priorities every worker uses (TIC or TAC), or ``None`` for the baseline:
        an independent random permutation per worker and iteration.
    n_iterations : int
        How many iterations, >= 1.
    interleave : {"rank", "random"}, optional
        How the baseline's requests of different workers share a channel: ``rank`` (every
        worker's k-th request before any (k+1)-th, a FIFO sender receiving all requests
        at once) or ``random`` (all outstanding requests in one uniformly random order;
        each worker's own order is still a uniform random permutation). Ignored when
        ``order`` is given (the sender then sends a parameter to every worker before the
        next one).
    method : {"auto", "reference"}, optional
        See :func:`iteration`.
    jitter : float, optional
        Multiplicative jitter on every op time, ``0 <= jitter < 1`` (default 0).
    seed : int, optional
        Seeds the jitter, the baseline orders, the interleaving of equal ranks and the
        per-worker noise; four independent streams, so runs with the same seed share
        their jitter and noise.
    worker_noise : float, optional
        Coefficient of variation of the per-worker per-iteration compute factor
        (:func:`worker_noise_factors`; :mod:`commsched.tictac.sim`, Noise); 0 (default)
        disables it.
    validate_every : int, optional
        Validate the schedule of iterations ``0, k, 2k, ...``; 0 validates none.
    compute_scale : float, optional
        Multiplies the duration of every op that is not a recv or send (TicTac Fig. 10's
        batch factor; communication is unchanged).
    contention : float, optional
        Compute slowed while the network is busy (:func:`iteration`); 0 (default): not.

    Returns
    -------
    RunResult
        Per iteration: every worker's finish time, recv ranks, efficiency and busy
        times, and the shared channels' load.

    Raises
    ------
    CommschedError
        If an argument is out of its range, or ``order`` names an op that is not a recv.

    References
    ----------
    .. [1] Hashemi, Jyothi & Campbell, "TicTac", SysML 2019, Secs. 1, 2.2 (the baseline's
       arbitrary order), 6 (protocol) and 6.3 (straggler effect).
    """
    if not isinstance(n_iterations, int) or n_iterations < 1:
        raise CommschedError(f"n_iterations must be an integer >= 1, got {n_iterations!r}")
    if not 0.0 <= jitter < 1.0:
        raise CommschedError(f"jitter must be in [0, 1), got {jitter!r}")
    if not compute_scale > 0:
        raise CommschedError(f"compute_scale must be > 0, got {compute_scale!r}")
    if validate_every < 0:
        raise CommschedError(f"validate_every must be >= 0, got {validate_every!r}")
    if interleave not in ("rank", "random"):
        raise CommschedError(f"interleave must be rank or random, got {interleave!r}")
    if not (0.0 <= worker_noise < 10.0):
        raise CommschedError(f"worker_noise must be in [0, 10), got {worker_noise!r}")
    scale = None
    if compute_scale != 1.0:
        scale = np.where(mw.is_net, 1.0, compute_scale)
    tl = timeline_index(mw)
    rng_jitter = np.random.default_rng([seed, 0])
    rng_order = np.random.default_rng([seed, 1])
    rng_tie = np.random.default_rng([seed, 2])
    rng_noise = np.random.default_rng([seed, 3])
    n, r = mw.n_workers, mw.n_recvs
    fixed = None if order is None else rank_priorities(mw, order)
    base_perm = np.broadcast_to(np.arange(r, dtype=float), (n, r))
    ends = np.empty((n_iterations, n))
    ranks = np.empty((n_iterations, n, r), dtype=np.int32)
    eff = np.empty((n_iterations, n))
    comp = np.empty((n_iterations, n))
    comm = np.empty((n_iterations, n))
    load = np.empty((n_iterations, len(tl.channels)))
    validated = 0
    for t in range(n_iterations):
        d = jitter_durations(mw, jitter, rng_jitter, scale)
        if worker_noise > 0.0:
            f = worker_noise_factors(worker_noise, n, rng_noise)
            d = d * np.where(mw.is_net, 1.0, f[mw.op_worker])
        tie = rng_tie.random((n, r))
        if fixed is not None:
            rk, prio = fixed, fixed + _TIE_WIDTH * tie
        elif interleave == "rank":
            rk = rng_order.permuted(base_perm, axis=1)
            prio = rk + _TIE_WIDTH * tie
        else:
            prio = rng_order.random((n, r))
            rk = np.argsort(np.argsort(prio, axis=1), axis=1)
        check = validate_every > 0 and t % validate_every == 0
        res = iteration(mw, prio, d, validate_schedule=check, method=method,
                        contention=contention)
        validated += check
        ends[t] = res.worker_end
        ranks[t] = rk
        if res.durations is not None:
            d = res.durations
        eff[t], comp[t], comm[t] = timeline_efficiency(mw, d, np.asarray(res.schedule.end), tl)
        load[t] = [float(d[c].sum()) for c in tl.channels]
    return RunResult(worker_end=ends, ranks=ranks, validated=validated, efficiency=eff,
                     compute_busy=comp, comm_busy=comm, channel_load=load)

