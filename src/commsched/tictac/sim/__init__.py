"""Multi-worker parameter-server simulation: N workers, P servers, synchronous iterations.

TicTac (Hashemi, Jyothi & Campbell, SysML 2019) evaluates recv orderings in data-parallel
training with parameter servers (PS): every worker runs the same graph; each parameter
lives on one PS and travels PS -> worker by a ``recv`` at the start of an iteration; in
training each worker sends its gradients back (``send``); a synchronous barrier ends the
iteration (Sec. 2.3, Sec. 6). This package simulates that setting on top of the
single-worker priority executor (:func:`commsched.sim.priority.simulate_compiled`):

Composition (:func:`compose`)
    The worker graph (one worker's PS view: ``recv``/``send`` ops on per-server channel
    resources, compute ops on the worker's own resources) is copied ``N`` times into one op
    graph. Op ``x`` of worker ``i`` becomes ``w<i>/x``. Resources used by a ``recv`` or
    ``send`` op are *shared*: every worker's copy of a transfer runs on the same resource,
    with the capacity the worker graph gives it (1 for the views of
    :mod:`commsched.views.ps`). So a server's link is one capacity-1 channel shared by all
    workers it serves, which is TicTac's "order at the sender" setting: the PS sends one
    transfer at a time, in priority order (Sec. 4, "enforcing the order" at the PS). Every
    other resource (compute) is private and renamed ``w<i>/<resource>``.
    Choice (documented, tested): one channel per server resource of the view; whether
    downlink and uplink are one channel or two is decided by the view.
    Known consequence: a whole tensor is sent to one worker at a time. When one tensor
    dominates a model's bytes (the first fully connected kernel: 74% of VGG-16's bytes,
    52% of AlexNet v2's) and every worker uses the same order, the server
    sends that tensor to the workers one after another and the last one waits for the
    others' copies: a shared order then *raises* the straggler effect of those models,
    where a link shared fairly between the workers' streams (gRPC's per-worker channels
    on one NIC) would deliver the copies together. The random baseline spreads the big
    tensor over the iteration and hides this.

Orders (:func:`rank_priorities`)
    An order is given per worker as a priority per recv (lower first). The sender of a
    shared channel always starts the ready transfer with the lowest priority; transfers of
    *different workers* with the same priority (for TIC/TAC: the same parameter, as every
    worker uses the same order) are interleaved uniformly at random, redrawn every
    iteration. We implement this by mapping each worker's priorities to dense ranks
    ``0, 1, ...`` and adding an independent draw in ``[0, 0.5)``; ranks stay in order, and
    the random part only decides among equal ranks. The baseline (vanilla TensorFlow's
    arbitrary order, Sec. 1 and Sec. 6) gives every worker an independent uniformly random
    permutation of its recvs every iteration; with ranks, the sender serves every worker's
    k-th request before any worker's (k+1)-th, as a FIFO server would when all workers
    issue their requests at once (``interleave="rank"``; ``"random"`` serves all
    outstanding requests in one random order instead).

Noise
    Two independent components, both redrawn every iteration; baseline and ordered runs
    with the same seed see the same draws (common random numbers):

    * *per-op jitter*: every op duration of every worker is multiplied by its own factor
      drawn uniformly from ``[1 - jitter, 1 + jitter]`` (``jitter = 0``: the time
      oracle's durations). Summed over thousands of ops it nearly averages out, so alone
      it leaves workers with the same order almost in lockstep;
    * *per-worker noise* (``worker_noise``, a coefficient of variation): all compute ops of
      worker ``w`` in iteration ``t`` are multiplied by one factor ``f[t, w]``, lognormal
      with mean 1 and that coefficient of variation. It models what makes one process
      slower than another in a given step (scheduling, caches, the machine's other load).
      The TicTac study sets it per model to the spread of the traced step times
      (:mod:`commsched.tictac.experiments.sweeps`). Transfers are not scaled: they run on the
      servers' shared links.

Iteration metrics (:class:`IterationResult`, :class:`RunResult`)
    Iterations are independent (the barrier resets every worker). A worker finishes when
    its last op ends; the iteration time is the slowest worker's finish time (synchronous
    barrier). The *straggler effect* of an iteration is the longest wait of any worker at
    the barrier divided by the iteration time, ``(T - min_w T_w) / T`` (TicTac SysML Sec.
    6.3: the largest time any worker spends waiting, over the iteration time).

    The *scheduling efficiency* of worker ``w`` in iteration ``t`` (TicTac Eq. 3) comes from
    that iteration's own timeline (:func:`timeline_efficiency`), as the authors compute it
    from measured timelines: ``C`` = its compute busy time, ``N`` = its communication busy
    time (the measure of the time during which one of its transfers is outstanding: from
    the moment the transfer could start -- 0 for a recv, the end of its producers for a
    send -- to its end, so time spent queued behind other workers' transfers on a shared
    server counts, as a recv op's span does in a TensorFlow timeline), ``U = C + N``
    (Eq. 1), ``L = max(C, N)`` (Eq. 2), ``m`` = its finish time, ``E = (U - m) / (U - L)``.
    At every moment before ``m`` the worker computes or has a transfer outstanding (the
    executor is work-conserving and recvs have no predecessors), so ``L <= m <= U`` and
    ``E`` lies in [0, 1] (tested).

Every simulated schedule can be checked with :func:`commsched.sim.validate.check_schedule`
(``validate_every`` in :func:`run`; tests validate every one).

Speed
    Traced graphs have thousands of ops per worker. :func:`coarsen` merges compute ops into
    segments that keep the communication structure (exact for compute chains, an
    approximation otherwise, measured in ``benchmarks/bench_multiworker.py``), and
    :func:`iteration` computes the schedule by an exact decomposition (channels, then each
    worker alone, then the uplinks) instead of the general event loop when the graph
    allows it; both are tested against the reference.

Modules
    :mod:`~commsched.tictac.sim.compose` (the composed cluster), :mod:`~commsched.tictac.
    sim.coarsen` (segments of compute ops), :mod:`~commsched.tictac.sim.iterate` (orders,
    noise, iterations and runs), :mod:`~commsched.tictac.sim.decompose` (the exact fast
    path of one iteration) and :mod:`~commsched.tictac.sim.timeline` (Eq. 3 per worker);
    the names below are the package's interface.

Examples
--------
>>> import numpy as np
>>> from commsched.model.graph import new_graph, add_op
>>> g = new_graph({"ps0": 1, "cpu": 1})
>>> add_op(g, "r1", "recv", "ps0", 1.0); add_op(g, "c1", "compute", "cpu", 2.0)
>>> g.add_edge("r1", "c1")
>>> mw = compose(g, 2)
>>> res = iteration(mw, np.array([[0.0], [0.25]]))
>>> res.iteration_time, res.worker_end.tolist()
(4.0, [3.0, 4.0])
>>> round(res.straggler, 6)
0.25
"""

from __future__ import annotations

from commsched.tictac.sim.coarsen import coarsen
from commsched.tictac.sim.compose import NET_KINDS, MultiWorker, compose, scale_compute, worker_id
from commsched.tictac.sim.iterate import (
    CONTENTION_PASSES,
    Interleave,
    IterationResult,
    Method,
    RunResult,
    channel_overlap,
    iteration,
    jitter_durations,
    rank_priorities,
    run,
    union_busy,
    worker_noise_factors,
)
from commsched.tictac.sim.timeline import timeline_efficiency

__all__ = [
    "CONTENTION_PASSES",
    "NET_KINDS",
    "Interleave",
    "IterationResult",
    "Method",
    "MultiWorker",
    "RunResult",
    "channel_overlap",
    "coarsen",
    "compose",
    "iteration",
    "jitter_durations",
    "rank_priorities",
    "run",
    "scale_compute",
    "timeline_efficiency",
    "union_busy",
    "worker_id",
    "worker_noise_factors",
]
