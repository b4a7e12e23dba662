"""The thesis' simulator predicting live steps, with the runtime's overheads fitted once.

The live cluster's devices are those of a thesis device file, their speeds relative to the
fastest, which runs one operation per microsecond (:func:`live_cluster`); the job slows
each op of a slower device down (:func:`commsched.placement.live.mapping.slowdowns`) and
the prediction slows exactly those ops by the same factor (:func:`simulate`). The
calibration configurations run at host speed on every device (no slow-down: they measure
the runtime, not the devices). The traced times leave out what the distributed runtime
adds. The op times the prediction starts from are those of a trace taken as the live
tasks run (one intra-op and one inter-op thread, each op's minimum over
``time_trace_iterations`` steps: :func:`with_op_times`), not the planning trace's (two
intra-op threads: a convolution about twice as fast as live, a small op about as fast).
What the simulator needs is fitted on the two *calibration*
configurations, which are none of the measured partitioner x scheduler combinations
(:func:`calibrate`, then :func:`pooled_fit` of that one calibration with its own op
times), all from the run itself (their FULL_TRACE steps are spread over the timed
rounds, :func:`commsched.placement.live.job.trace_rounds`):

* ``op_s``: each op's live time, its median over the FULL_TRACE steps of ``calib-one``
  (every op on device 0, TensorFlow's own order, one op at a time), used instead of its
  traced time; ``time_factor`` is their sum over the traced sum (reported, and used for
  an op ``calib-one`` did not show);
* ``op_us``: per op, the executor's cost around each kernel, from the same step stats:
  the span from the first op's start to the last op's end minus the summed op times, over
  the op count (:func:`run_op_overhead_us`);
* ``step_s``: per step, the session's round trips, ``calib-one``'s median step minus its
  simulated makespan;
* ``transfer_s`` and ``rate_Bps``: per transfer, ``transfer_s + bytes / rate_Bps``;
  ``rate_Bps`` is the rate the links are shaped to (nominal, the fastest pair's), and
  ``transfer_s`` the median of ``span - bytes / rate_Bps`` over the ``RecvTensor`` spans of
  ``calib-split`` (nearly every edge crosses a link). The rate is not fitted: most
  calibration tensors are small enough to pass in the shaper's burst, so their spans
  hardly see the rate (the RNN's, all below 60 kB, fitted 148-156 MB/s on a 125 MB/s
  link; the CNN predicted from that fit was a median 21-23% short, 9-10% with the shaped
  rate). A transfer lasts from the later of the receiver's request and the producer's end
  (all tasks share the machine's clock) to the tensor's arrival; transfers that overlap
  another one on a host link they share are left out (their time is queueing), and each
  transfer's median over the traced steps is kept (the timed steps are medians too; the
  shortest, kept before, fitted the least loaded moment and underpredicted the
  transfer-heavy configurations).

  Where every pair has one rate (host links shaped by ``tbf`` on both ends), each device
  has one outgoing and one incoming port: a transfer holds its sender's outgoing and its
  receiver's incoming port for its whole ``transfer_s + bytes / rate_Bps``
  (:func:`commsched.sim.devices.simulate_devices` with ``host_ports``), so the transfers
  into or out of one host queue whatever their peers; with per-pair rates (``htb`` class
  per peer) each directed pair is a link of its own. Measured in the job results: a
  ``RecvTensor``'s span grows with the transfers in flight beside it (the RNN's
  ``calib-split``, median 0.17 ms alone, 0.41 ms beside 3-10 others, 12 ms beside 30 or
  more), which per-pair links (where its three hosts' transfers overlap freely) miss.

  With per-pair link rates (a device file whose rates differ, :func:`nominal_rates`),
  each transfer's bytes are first divided by its pair's nominal rate over the fastest
  pair's (``pair_scale``), so ``rate_Bps`` is what the fastest pair delivers and pair
  ``(i, j)`` gets ``rate_Bps * pair_scale[i, j]``: one efficiency (goodput over the
  shaped rate) for every pair, the pairs' ratios those of the device file.

:func:`predict` then simulates a configuration's placement with its enforced order (the
order's control edges added to the graph) under :func:`commsched.sim.devices.
simulate_devices` with link contention, and adds ``step_s``.

**One fit for the runtime, a model left out.** :func:`calibrate` keeps what one model's
calibration configurations measured (:class:`Calibration`); :func:`pooled_fit` of it alone,
with ``own_op_times``, gives that model's own overheads (the above, with its ops' live
times). Of several models' calibrations :func:`pooled_fit` fits one set for the runtime,
with no op's live time: every op takes
its traced time times one compute factor (the models' summed live ``calib-one`` op time
over their summed traced time), ``op_us`` and ``step_s`` are the median over the models,
and the per-transfer cost on all their transfers together. :func:`lomo_fits` gives each model
the pooled fit of the *other* models (leave-one-model-out): what a user predicting a model
that has never run on the cluster would have, from its trace alone.
"""

from __future__ import annotations

import statistics
from collections.abc import Collection, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import networkx as nx
import numpy as np

from commsched.errors import CommschedError
from commsched.placement.live.mapping import canonical_device, device_index, relative_speeds
from commsched.placement.model import TYPES, Cluster, Options, Problem
from commsched.placement.schedulers import DEVICE_SCHEDULERS
from commsched.placement.sendrecv import insert_send_recv
from commsched.placement.traced import problem_from_trace
from commsched.sim.devices import (
    SEND,
    DeviceSchedule,
    ExecGraph,
    check_device_schedule,
    simulate_devices,
)
from commsched.tictac.live.steptrace import compute_busy, transfers

__all__ = ["RATE_UNIT_BPS", "Calibration", "Fit", "calibrate", "calibration_placements",
           "live_cluster", "lomo_fits", "nominal_rates", "placed_fraction", "pooled_fit",
           "predict", "run_op_overhead_us", "trace_op_overhead_us", "with_op_times"]

#: Bytes per second of one unit of a device file's transfer rate. The live problem is in
#: microseconds and bytes (:func:`commsched.placement.traced.problem_from_trace`), so a
#: file rate ``r`` moves ``r`` bytes per microsecond: ``125`` is 125 MB/s, 1 Gbit/s.
RATE_UNIT_BPS = 1e6

#: The calibration configurations' names.
CALIB_ONE, CALIB_SPLIT = "calib-one", "calib-split"


@dataclass(frozen=True)
class Fit:
    """The runtime's overheads (module docstring); times in seconds, rate in bytes/s.

    ``op_s`` maps an op to its live time; an op it lacks takes its traced time times
    ``time_factor``. ``rate_Bps`` is the fastest pair's nominal rate. ``pair_scale`` (k x
    k, None: every pair alike, each device behind one full-duplex port) is each directed
    pair's nominal rate over the fastest pair's; pair ``(i, j)`` moves
    ``rate_Bps * pair_scale[i][j]`` bytes per second.
    """

    op_us: float
    time_factor: float
    step_s: float
    transfer_s: float
    rate_Bps: float
    op_s: Mapping[str, float] = field(default_factory=dict)
    pair_scale: tuple[tuple[float, ...], ...] | None = None

    def as_dict(self) -> dict[str, float]:
        """The five numbers by name (not ``op_s`` nor ``pair_scale``)."""
        return {k: v for k, v in asdict(self).items() if k not in ("op_s", "pair_scale")}

    def rates(self, k: int) -> np.ndarray:
        """Every directed pair's rate in bytes per second (k x k, ``inf`` diagonal).

        Parameters
        ----------
        k : int
            Devices; ``pair_scale``, when set, must be k x k.

        Returns
        -------
        numpy.ndarray
            ``rate_Bps`` times the pair's scale.
        """
        scale = np.ones((k, k)) if self.pair_scale is None else np.array(self.pair_scale)
        rate = self.rate_Bps * scale
        np.fill_diagonal(rate, np.inf)
        return rate


def nominal_rates(file_rates: Sequence[Sequence[float]], bandwidth_Bps: float
                  ) -> tuple[np.ndarray, bool]:
    """The links' nominal rates from a device file's per-pair rates.

    Parameters
    ----------
    file_rates : sequence of sequence of float
        The file's symmetric rate matrix (:attr:`commsched.io.thesis.Devices.rates`,
        ``inf`` diagonal), in its units.
    bandwidth_Bps : float
        ``placement_live.bandwidth`` in bytes per second.

    Returns
    -------
    (numpy.ndarray, bool)
        k x k bytes per second (``inf`` diagonal) and whether the pairs differ. A file
        whose pairs all have one rate (or a single device) gives ``bandwidth_Bps``
        everywhere and ``False``: every link shaped alike, as without per-pair rates.
        Otherwise each pair gets its file rate times :data:`RATE_UNIT_BPS` and ``True``.

    References
    ----------
    Laich 2017, Sec. 2.2 (a transfer rate per device pair; transfer time = size / rate).

    Examples
    --------
    >>> r, per_pair = nominal_rates([[np.inf, 125], [125, np.inf]], 1e8)
    >>> float(r[0, 1]), per_pair
    (100000000.0, False)
    >>> r, per_pair = nominal_rates([[np.inf, 125, 25], [125, np.inf, 50],
    ...                              [25, 50, np.inf]], 1e8)
    >>> float(r[0, 2]), float(r[2, 1]), per_pair
    (25000000.0, 50000000.0, True)
    """
    m = np.array(file_rates, dtype=float)
    k = len(m)
    off = m[~np.eye(k, dtype=bool)]
    per_pair = bool(len(off)) and bool((off != off[0]).any())
    rate = m * RATE_UNIT_BPS if per_pair else np.full((k, k), float(bandwidth_Bps))
    np.fill_diagonal(rate, np.inf)
    return rate, per_pair


def live_cluster(speed: Sequence[float], memory_bytes: Sequence[float],
                 rate_Bps: float | np.ndarray) -> Cluster:
    """The live devices: relative speeds (the fastest: an operation per microsecond).

    Parameters
    ----------
    speed : sequence of float
        Every device's speed (a thesis device file's ``#operations``); only the ratios
        count (:func:`commsched.placement.live.mapping.relative_speeds`).
    memory_bytes : sequence of float
        Every device's memory (the file's ``RAM``, bytes).
    rate_Bps : float or numpy.ndarray
        Link rate in bytes per second (converted to bytes per microsecond): one for every
        pair, or k x k per directed pair (:func:`nominal_rates`; the diagonal is ignored).

    Returns
    -------
    Cluster
        CPU devices (the traced ops carry no device constraint).

    References
    ----------
    Laich 2017, Sec. 2.2 (devices: speed, memory, type, transfer rates).
    """
    r = relative_speeds(speed)
    k = len(r)
    rate = np.broadcast_to(np.asarray(rate_Bps, dtype=float) / 1e6, (k, k)).copy()
    np.fill_diagonal(rate, np.inf)
    return Cluster(r, np.asarray(memory_bytes, dtype=float),
                   np.full(k, TYPES.index("CPU"), dtype=np.int64), rate)


def trace_op_overhead_us(g: nx.DiGraph) -> float:
    """Per-op executor cost of a trace: (median step wall - median summed op time) / ops.

    Parameters
    ----------
    g : networkx.DiGraph
        A traced graph whose ``meta`` has ``step_wall_s`` and ``sum_op_s``.

    Returns
    -------
    float
        Microseconds (0 when the ops' sum exceeds the wall time).
    """
    meta = g.graph["meta"]
    wall = statistics.median(meta["step_wall_s"])
    ops = statistics.median(meta["sum_op_s"])
    return max(0.0, (wall - ops) / g.number_of_nodes() * 1e6)


def with_op_times(g: nx.DiGraph, timed: nx.DiGraph, threads: int) -> nx.DiGraph:
    """The planning trace ``g`` with every op's time taken from ``timed``.

    The live tasks run with ``threads`` intra-op and inter-op threads; the planning trace
    (the thesis' Ch. 7 graph) was taken with two intra-op threads, so its large ops are up
    to twice as fast as live. ``timed`` is the same graph traced as the tasks run
    (:func:`commsched.trace.tf.trace_model` with ``threads`` threads, each op's minimum
    over many steps), whose op times the prediction starts from; the planning graph's
    node order, edges, bytes and metadata stay (the job's placements index them).

    Parameters
    ----------
    g : networkx.DiGraph
        The planning trace.
    timed : networkx.DiGraph
        The same model traced with the live tasks' threads.
    threads : int
        The live tasks' intra-op and inter-op threads.

    Returns
    -------
    networkx.DiGraph
        A copy of ``g`` with ``timed``'s ``duration`` on every op.

    Raises
    ------
    CommschedError
        If ``timed`` was traced with other threads or has other ops than ``g``.

    References
    ----------
    Laich 2017, Sec. 2.2 (an op's time is its work over the device's speed: the time
    oracle must be the device's, here one TensorFlow task of ``threads`` threads).
    """
    meta = timed.graph.get("meta", {})
    got = (meta.get("intra_threads"), meta.get("inter_threads"))
    if got != (threads, threads):
        raise CommschedError(f"op-time trace of {meta.get('model')}: traced with intra/inter "
                             f"threads {got[0]}/{got[1]}, the live tasks run {threads}/"
                             f"{threads}")
    if set(timed.nodes) != set(g.nodes):
        diff = sorted(set(timed.nodes) ^ set(g.nodes))
        raise CommschedError(f"op-time trace of {meta.get('model')}: its ops differ from the "
                             f"planning trace's ({len(diff)} differ, e.g. {diff[0]!r})")
    h = g.copy()
    for v in h.nodes:
        h.nodes[v]["duration"] = float(timed.nodes[v]["duration"])
    return h


def run_op_overhead_us(steps: Sequence[Mapping[str, Sequence[Mapping[str, Any]]]],
                       ops: Collection[str]) -> float:
    """Per-op executor cost of a live run: (span - summed op time) / ops, median over steps.

    Parameters
    ----------
    steps : sequence of mapping
        Traced steps of a configuration with every op on one device (node stats by
        device, as :mod:`commsched.placement.live.job` keeps them).
    ops : collection of str
        The graph's ops (send/receive and other runtime nodes are left out).

    Returns
    -------
    float
        Microseconds (0 when no step saw an op).

    Examples
    --------
    >>> st = {"d": [{"node_name": "a", "timeline_label": "a = MatMul()",
    ...              "all_start_micros": 0, "op_end_rel_micros": 10},
    ...             {"node_name": "b", "timeline_label": "b = MatMul()",
    ...              "all_start_micros": 40, "op_end_rel_micros": 20}]}
    >>> run_op_overhead_us([st], {"a", "b"})
    15.0
    """
    per = []
    for step in _traced_ops({"traced": steps}, set(ops)):
        if step:
            span = max(n["all_start_micros"] + n["op_end_rel_micros"] for n in step) \
                - min(n["all_start_micros"] for n in step)
            busy, n_ops = compute_busy(step)
            per.append(max(0.0, span - busy * 1e6) / n_ops)
    return statistics.median(per) if per else 0.0


def calibration_placements(p: Problem, k: int) -> dict[str, np.ndarray]:
    """``calib-one`` (every op on device 0) and ``calib-split`` (edges cross where they can).

    ``calib-split`` visits the nodes in topological order and gives each new colocation
    unit the next device in turn that holds none of the node's predecessors, so nearly
    every tensor, large and small, crosses a link once (the link fit sees the whole range
    of sizes).

    Parameters
    ----------
    p : Problem
        The graph.
    k : int
        Devices.

    Returns
    -------
    dict of str to numpy.ndarray
    """
    split = np.full(p.n, -1, dtype=np.int64)
    dev_of_unit: dict[int, int] = {}
    turn = 0
    for v in p.topo:
        u = int(p.unit[v])
        if u not in dev_of_unit:
            taken = {int(split[q]) for q in p.pred[v]}
            free = [d for d in range(turn, turn + k) if d % k not in taken]
            d = (free[0] if free else turn) % k
            dev_of_unit[u] = d
            turn = d + 1
        split[v] = dev_of_unit[u]
    return {CALIB_ONE: np.zeros(p.n, dtype=np.int64), CALIB_SPLIT: split}


def _with_latency(eg: ExecGraph, latency: float) -> ExecGraph:
    x = eg.arrays
    from_send = (x.kind == SEND)[np.repeat(np.arange(eg.n), np.diff(x.succ_ptr))]
    delay = np.where(from_send, x.succ_delay + latency, x.succ_delay)
    return ExecGraph(eg.n_devices, x._replace(succ_delay=delay), eg.traffic)


def simulate(g: nx.DiGraph, placement: np.ndarray, control: Sequence[tuple[int, int]],
             slow: Mapping[str, float], k: int, f: Fit) -> DeviceSchedule:
    """The simulated step (without ``step_s``) of a placement and its enforced order.

    Parameters
    ----------
    g : networkx.DiGraph
        The traced graph.
    placement : numpy.ndarray
        Device of every node (``g.nodes`` order).
    control : sequence of (int, int)
        The order's control edges (:func:`commsched.placement.live.mapping.order_edges`).
    slow : mapping of str to float
        The ops the job slows down and their busy-wait factor ``k``
        (:func:`commsched.placement.live.mapping.slowdowns`): their live time is
        ``(1 + k)`` times their time at host speed.
    k : int
        Devices.
    f : Fit
        The overheads.

    Returns
    -------
    DeviceSchedule
        In microseconds; validated.

    References
    ----------
    Laich 2017, Secs. 2.4-2.5 (send/receive nodes, execution time).
    """
    names = list(g.nodes)
    h = g.copy()
    h.add_edges_from(((names[a], names[b]) for a, b in control), control=True, bytes=0)
    for v in names:
        h.nodes[v]["duration"] = f.op_s.get(v, float(g.nodes[v]["duration"]) * f.time_factor)
    p = problem_from_trace(h, measured=True, op_overhead_us=f.op_us,
                           time_factor=[1.0 + slow.get(v, 0.0) for v in names])
    c = live_cluster([1.0] * k, [np.inf] * k, f.rates(k))
    eg = _with_latency(insert_send_recv(p, c, placement, 0.0), f.transfer_s * 1e6)
    s = simulate_devices(eg, DEVICE_SCHEDULERS["fifo"](eg, c, Options(send_ops=0.0)),
                         link_contention=True, host_ports=f.pair_scale is None)
    check_device_schedule(eg, s)
    return s


def predict(g: nx.DiGraph, placement: np.ndarray, control: Sequence[tuple[int, int]],
            slow: Mapping[str, float], k: int, f: Fit) -> float:
    """The predicted live step in seconds: :func:`simulate`'s makespan plus ``step_s``.

    Parameters
    ----------
    g, placement, control, slow, k, f
        As in :func:`simulate`.

    Returns
    -------
    float
    """
    return simulate(g, placement, control, slow, k, f).makespan / 1e6 + f.step_s


def _traced_ops(result: Mapping[str, Any], ops: set[str]) -> list[list[dict[str, Any]]]:
    """Per traced step, the node stats of the graph's ops (every device)."""
    return [[n for ns in step.values() for n in ns if n["node_name"] in ops]
            for step in result["traced"]]


@dataclass(frozen=True)
class Calibration:
    """What one model's two calibration configurations measured (:func:`calibrate`).

    ``op_s``: each op's live time (``calib-one``); ``live_op_s`` / ``traced_op_s``: their
    sum and the same ops' traced sum (their ratio is the model's live/traced compute
    factor, :attr:`Fit.time_factor`); ``op_us``: per-op
    executor cost; ``step_s``: per-step cost; ``link_bytes`` / ``link_s``: the
    ``calib-split`` transfers alone on their links, bytes (over the pair's relative rate)
    and median span; ``rate_Bps`` and ``pair_scale`` as in :class:`Fit`.
    """

    op_s: Mapping[str, float]
    live_op_s: float
    traced_op_s: float
    op_us: float
    step_s: float
    link_bytes: tuple[float, ...]
    link_s: tuple[float, ...]
    rate_Bps: float
    pair_scale: tuple[tuple[float, ...], ...] | None = None


def calibrate(g: nx.DiGraph, calib: Mapping[str, Mapping[str, Any]], k: int,
              rates: np.ndarray) -> Calibration:
    """One model's runtime measurements from its two calibration results (module docstring).

    Parameters
    ----------
    g : networkx.DiGraph
        The traced graph.
    calib : mapping
        The job's results of ``calib-one`` and ``calib-split`` by name.
    k : int
        Devices.
    rates : numpy.ndarray
        The links' nominal rates in bytes per second (k x k, :func:`nominal_rates`; the
        diagonal is ignored). Pairs that all have one rate: host links, one port per
        device each way (``pair_scale`` None).

    Returns
    -------
    Calibration

    Raises
    ------
    CommschedError
        If a calibration result is missing or, with per-pair rates, a transfer between
        devices the cluster lacks.

    References
    ----------
    Laich 2017, Sec. 2.5 (execution time: op times and transfer times, which the
    simulator takes from these measurements).
    """
    for name in (CALIB_ONE, CALIB_SPLIT):
        if name not in calib:
            raise CommschedError(f"calibration configuration {name!r} has no result")
    ops = set(g.nodes)
    op_us = run_op_overhead_us(calib[CALIB_ONE]["traced"], ops)
    live: dict[str, list[float]] = {}
    for step in _traced_ops(calib[CALIB_ONE], ops):
        for n in step:
            live.setdefault(n["node_name"], []).append(n["op_end_rel_micros"] / 1e6)
    op_s = {v: statistics.median(x) for v, x in live.items()}
    traced_sum = sum(float(g.nodes[v]["duration"]) for v in op_s)
    off = ~np.eye(k, dtype=bool)
    nominal = np.asarray(rates, dtype=float)[off]
    scale = None
    if (nominal != nominal[0]).any():
        scale = np.ones((k, k))
        scale[off] = nominal / nominal.max()
    index = device_index(k)
    spans: dict[tuple[str, str], list[float]] = {}
    pair_of: dict[tuple[str, str], float] = {}
    for step in calib[CALIB_SPLIT]["traced"]:
        done = {n["node_name"]: (n["all_start_micros"] + n["op_end_rel_micros"]) / 1e6
                for ns in step.values() for n in ns if n["node_name"] in ops}
        xs = [(t, max(t.start, done[t.src_op])) for ns in step.values()
              for t in transfers(ns, 0) if t.src_op in done]
        for t, begin in xs:
            if any(o is not t and o.start < t.end and begin < o.end
                   and {o.src_device, o.dst_device} & {t.src_device, t.dst_device}
                   for o, _ in xs):
                continue  # shared a host link with another transfer: queued, not fitted
            key = (t.src_op, t.dst_device)
            spans.setdefault(key, []).append(t.end - begin)
            if scale is not None:
                ends = [index.get(canonical_device(x)) for x in (t.src_device, t.dst_device)]
                if ends[0] is None or ends[1] is None:
                    raise CommschedError(f"{CALIB_SPLIT}: a transfer from {t.src_device} to "
                                         f"{t.dst_device}, outside the {k} devices")
                pair_of[key] = float(scale[ends[0], ends[1]])
    # bytes over the pair's relative rate: the fit's rate is the fastest pair's
    nbytes = tuple(float(g.nodes[src].get("out_bytes") or 0) / pair_of.get((src, d), 1.0)
                   for src, d in spans)
    span = tuple(statistics.median(x) for x in spans.values())
    pair_scale = None if scale is None else tuple(tuple(map(float, r)) for r in scale)
    factor = sum(op_s.values()) / traced_sum if traced_sum > 0 else 1.0
    # calib-one has no transfer: its simulation needs no link
    alone = Fit(op_us, factor, 0.0, 0.0, 1.0, op_s, pair_scale)
    one = calibration_placements(problem_from_trace(g, measured=True), k)[CALIB_ONE]
    sim_one = simulate(g, one, [], {}, k, alone).makespan / 1e6
    step_s = max(0.0, statistics.median(calib[CALIB_ONE]["steps_s"]) - sim_one)
    return Calibration(op_s, sum(op_s.values()), traced_sum, op_us, step_s, nbytes, span,
                       float(nominal.max()), pair_scale)


def pooled_fit(cals: Sequence[Calibration], own_op_times: bool = False) -> Fit:
    """One set of runtime overheads from the calibrations of one or more models.

    Parameters
    ----------
    cals : sequence of Calibration
        The models' :func:`calibrate` results (one cluster, so one ``pair_scale``).
    own_op_times : bool
        Keep the op live times (``op_s``); only for a single model, whose ops they are.
        Otherwise every op takes its traced time times the pooled ``time_factor``.

    Returns
    -------
    Fit
        ``time_factor``: the models' summed live ``calib-one`` op time over their summed
        traced time; ``op_us`` and ``step_s``: the median over the models; ``rate_Bps``:
        the links' nominal rate; ``transfer_s``: the median of ``span - bytes /
        rate_Bps`` over every model's ``calib-split`` transfers together (at least 0).

    Raises
    ------
    CommschedError
        No calibration, ``own_op_times`` with several, calibrations of different links,
        or no transfer alone on its link.

    References
    ----------
    Laich 2017, Sec. 2.5 (the simulator's execution time, here with the runtime's costs).
    """
    if not cals:
        raise CommschedError("no calibration to fit the runtime overheads on")
    if own_op_times and len(cals) != 1:
        raise CommschedError("own op times are one model's: pool them over one calibration")
    if len({(c.rate_Bps, c.pair_scale) for c in cals}) != 1:
        raise CommschedError("calibrations of different links cannot be pooled")
    rate = cals[0].rate_Bps
    over = [x - b / rate for c in cals for x, b in zip(c.link_s, c.link_bytes, strict=True)]
    if not over:
        raise CommschedError(f"{CALIB_SPLIT}: no transfer alone on its link to fit the "
                             "per-transfer cost on")
    transfer_s = max(0.0, float(statistics.median(over)))
    traced = sum(c.traced_op_s for c in cals)
    factor = sum(c.live_op_s for c in cals) / traced if traced > 0 else 1.0
    return Fit(statistics.median(c.op_us for c in cals), factor,
               statistics.median(c.step_s for c in cals), transfer_s, rate,
               cals[0].op_s if own_op_times else {}, cals[0].pair_scale)


def lomo_fits(cals: Mapping[str, Calibration]) -> dict[str, Fit]:
    """Leave-one-model-out: each model's overheads fitted on the other models only.

    Parameters
    ----------
    cals : mapping of str to Calibration
        Every model's calibration by name.

    Returns
    -------
    dict of str to Fit
        Per model, :func:`pooled_fit` of the others' calibrations: no op live time, no
        measurement of the model itself (its ops take their traced time times the others'
        ``time_factor``). Empty with fewer than two models.

    Raises
    ------
    CommschedError
        :func:`pooled_fit`'s errors.
    """
    if len(cals) < 2:
        return {}
    return {m: pooled_fit([c for o, c in cals.items() if o != m]) for m in cals}


def placed_fraction(result: Mapping[str, Any], placed: Mapping[str, str]) -> float:
    """Fraction of the traced ops that ran on the device their placement gave them.

    Parameters
    ----------
    result : mapping
        One configuration's job result (its FULL_TRACE step stats, by device).
    placed : mapping of str to str
        The intended device of every op.

    Returns
    -------
    float
        Over every (traced step, op) seen in the stats; NaN if no op was seen.
    """
    seen = ok = 0
    for step in result["traced"]:
        for dev, ns in step.items():
            for n in ns:
                want = placed.get(n["node_name"])
                if want is not None:
                    seen += 1
                    ok += canonical_device(dev) == canonical_device(want)
    return ok / seen if seen else float("nan")
