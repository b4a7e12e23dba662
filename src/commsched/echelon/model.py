"""The EchelonFlow abstraction (Pan et al., HotNets 2022, Sec. 3) and how schedulers see it.

An *EchelonFlow* is a set of flows whose ideal finish times are tied together by an
*arrangement function* of a *reference time* (Def. 3.1). Here the arrangement is data: one
*offset* per flow, its ideal finish time minus the reference time
(:mod:`commsched.echelon.arrangement` builds the paper's arrangement functions, Eqs. 5-7),
so ``ideal_j = reference + offset_j``.

Reference time (our choice, the paper leaves "start" open for a fluid network). The
reference is the **release** time of the head flow (the flow released first), not the time
its first byte is sent. In a fluid simulator a released flow may get rate 0 for a while;
if "start" meant the first byte, a scheduler could shift an EchelonFlow's ideal finish
times later, and so lower its tardiness, just by holding its head flow back. With the
release, ideal finish times depend only on the application (when the data was produced),
never on the scheduler. In the paper's arrangements the head flow's offset is 0, so
``d_0 = r = s_0`` (Def. 3.1); arrangements derived from other pipeline schedules may give
the head flow a positive offset (its consumer is busy when it is produced: see
:func:`commsched.echelon.arrangement.pipeline_echelonflows`).

Tardiness. Flow tardiness (Eq. 1) is the *signed* lateness ``e - d`` (negative when a flow
finishes before its ideal time, which only happens when its offset exceeds its transfer
time); EchelonFlow tardiness (Eq. 2) is the largest flow tardiness of its flows; the
objective is the tardiness of one EchelonFlow (Eq. 3), the sum over EchelonFlows (Eq. 4),
or the weighted sum (``weight`` per EchelonFlow, default 1).

How a scheduler sees EchelonFlows (the contract with :mod:`commsched.sim.flow`). A policy
is ``View -> rates``; EchelonFlow policies read per-flow *meta columns* of the simulation
(``view.sim.meta[name][view.active]``), given to :meth:`commsched.sim.flow.FlowSim.add`
when the flows are added:

``group`` (int)
    the EchelonFlow id, unique over all EchelonFlows in the simulation;
``ideal`` (float, seconds)
    the flow's ideal finish time, absolute: the group's reference time plus the flow's
    offset (known at the flow's release: the reference is the head flow's release);
``index`` (int)
    the flow's position in its EchelonFlow (0 = head flow);
``weight`` (float, optional)
    the EchelonFlow's weight in the objective, the same for all its flows (absent = 1).

:func:`flow_table` turns EchelonFlows into these arrays (and the flows' ``src``, ``dst``,
``size``, ``release``); :func:`simulate_echelonflows` runs them under a policy and
returns finish times and tardiness. The coupled compute + network simulation
(:mod:`commsched.echelon.cluster_sim`) sets the same columns at run time.

Examples
--------
Fig. 2's three activations of 2 bytes each on a 1 byte/s link, produced one per second
from t = 1 s (GPipe arrangement, T = 1 s); served in order they finish at 3, 5 and 7 s:

>>> h = EchelonFlow(src=[0, 0, 0], dst=[1, 1, 1], size=[2.0, 2.0, 2.0],
...                 release=[1.0, 2.0, 3.0], offset=[0.0, 1.0, 2.0])
>>> h.reference, h.ideal.tolist()
(1.0, [1.0, 2.0, 3.0])
>>> flow_tardiness([3.0, 5.0, 7.0], h.ideal).tolist()
[2.0, 3.0, 4.0]
>>> float(echelon_tardiness([3.0, 5.0, 7.0], h.ideal, [0, 0, 0])[0])
4.0
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from commsched.errors import CommschedError
from commsched.sim.flow import FlowResult, FlowSim, Network, Policy

__all__ = [
    "EchelonFlow",
    "EchelonRun",
    "FlowTable",
    "echelon_tardiness",
    "flow_table",
    "flow_tardiness",
    "objective",
    "simulate_echelonflows",
]

ArrayLike = Sequence[float] | np.ndarray


def _vec(x: ArrayLike | Sequence[int], dtype: type) -> np.ndarray:
    return np.array(x, dtype=dtype).reshape(-1)


@dataclass(frozen=True, eq=False)
class EchelonFlow:
    """One EchelonFlow: flows and their arrangement.

    Parameters
    ----------
    src, dst : sequence of int
        The flows' hosts.
    size : array_like
        Bytes per flow (positive, finite).
    release : array_like
        Release time per flow (s, finite).
    offset : array_like
        The arrangement: ideal finish time minus the reference time, per flow (s).
    weight : float
        The EchelonFlow's weight in the objective (positive).
    name : str
        For messages.

    Raises
    ------
    CommschedError
        If there are no flows, the columns differ in length, a size is not positive, a
        release or offset is not finite, or the weight is not positive.

    References
    ----------
    EchelonFlow (Pan et al., HotNets 2022), Sec. 3.2, Def. 3.1 (an EchelonFlow and its
    arrangement function) and Eq. 1.
    """

    src: np.ndarray
    dst: np.ndarray
    size: np.ndarray
    release: np.ndarray
    offset: np.ndarray
    weight: float = 1.0
    name: str = ""

    def __init__(self, src: Sequence[int] | np.ndarray, dst: Sequence[int] | np.ndarray,
                 size: ArrayLike, release: ArrayLike, offset: ArrayLike,
                 weight: float = 1.0, name: str = "") -> None:
        cols = {"src": _vec(src, np.int64), "dst": _vec(dst, np.int64),
                "size": _vec(size, float), "release": _vec(release, float),
                "offset": _vec(offset, float)}
        n = len(cols["src"])
        label = f"EchelonFlow {name!r}" if name else "EchelonFlow"
        if n == 0:
            raise CommschedError(f"{label}: has no flows")
        if any(len(c) != n for c in cols.values()):
            raise CommschedError(f"{label}: src, dst, size, release, offset differ in length")
        if np.any(~(cols["size"] > 0)) or not np.all(np.isfinite(cols["size"])):
            raise CommschedError(f"{label}: sizes must be positive and finite")
        if not (np.all(np.isfinite(cols["release"])) and np.all(np.isfinite(cols["offset"]))):
            raise CommschedError(f"{label}: releases and offsets must be finite")
        if not (weight > 0 and np.isfinite(weight)):
            raise CommschedError(f"{label}: weight must be positive and finite")
        for k, v in cols.items():
            v.setflags(write=False)
            object.__setattr__(self, k, v)
        object.__setattr__(self, "weight", float(weight))
        object.__setattr__(self, "name", name)

    def __len__(self) -> int:
        return len(self.src)

    @property
    def head(self) -> int:
        """Index of the head flow: the first released (ties: the first listed)."""
        return int(np.argmin(self.release))

    @property
    def reference(self) -> float:
        """The reference time ``r``: the head flow's release (Def. 3.1, our reading)."""
        return float(self.release.min())

    @property
    def ideal(self) -> np.ndarray:
        """Ideal finish times ``d_j = r + offset_j``."""
        return self.reference + self.offset


@dataclass(frozen=True, eq=False)
class FlowTable:
    """EchelonFlows flattened to per-flow arrays (the simulator's and the solvers' view).

    Parameters
    ----------
    src, dst, size, release : numpy.ndarray
        Per flow, as :class:`EchelonFlow`.
    ideal : numpy.ndarray
        Absolute ideal finish time per flow (Eq. 1's ``d``).
    group : numpy.ndarray
        ``group[i]`` is the EchelonFlow of flow ``i``.
    index : numpy.ndarray
        The flow's position in its EchelonFlow.
    weight : numpy.ndarray
        ``weight[g]`` is the weight of EchelonFlow ``g``.
    """

    src: np.ndarray
    dst: np.ndarray
    size: np.ndarray
    release: np.ndarray
    ideal: np.ndarray
    group: np.ndarray
    index: np.ndarray
    weight: np.ndarray = field(default_factory=lambda: np.ones(0))

    @property
    def n(self) -> int:
        """The number of flows."""
        return len(self.src)

    @property
    def groups(self) -> int:
        """The number of EchelonFlows."""
        return len(self.weight)

    def meta(self) -> dict[str, np.ndarray]:
        """The FlowSim meta columns (see the module docstring)."""
        return {"group": self.group, "ideal": self.ideal, "index": self.index,
                "weight": self.weight[self.group]}


def flow_table(echelonflows: Sequence[EchelonFlow]) -> FlowTable:
    """Flatten ``echelonflows`` (group ids in list order, flows in each one's order).

    Parameters
    ----------
    echelonflows : sequence of EchelonFlow

    Returns
    -------
    FlowTable

    Raises
    ------
    CommschedError
        If ``echelonflows`` is empty.
    """
    if not echelonflows:
        raise CommschedError("no EchelonFlows given")
    hs = list(echelonflows)
    cat = np.concatenate
    return FlowTable(
        src=cat([h.src for h in hs]), dst=cat([h.dst for h in hs]),
        size=cat([h.size for h in hs]), release=cat([h.release for h in hs]),
        ideal=cat([h.ideal for h in hs]),
        group=cat([np.full(len(h), g, dtype=np.int64) for g, h in enumerate(hs)]),
        index=cat([np.arange(len(h), dtype=np.int64) for h in hs]),
        weight=np.array([h.weight for h in hs], dtype=float))


def flow_tardiness(finish: ArrayLike, ideal: ArrayLike) -> np.ndarray:
    """Flow tardiness ``e - d`` per flow (signed).

    Parameters
    ----------
    finish, ideal : array_like
        Finish times ``e`` and ideal finish times ``d``.

    Returns
    -------
    numpy.ndarray

    References
    ----------
    EchelonFlow (Pan et al., HotNets 2022), Sec. 3.2, Def. 3.2, Eq. 1.
    """
    return _vec(finish, float) - _vec(ideal, float)


def echelon_tardiness(finish: ArrayLike, ideal: ArrayLike,
                      group: Sequence[int] | np.ndarray) -> np.ndarray:
    """EchelonFlow tardiness: per EchelonFlow, the largest tardiness of its flows.

    Parameters
    ----------
    finish, ideal : array_like
        Per flow.
    group : sequence of int
        Per flow, its EchelonFlow.

    Returns
    -------
    numpy.ndarray
        Per EchelonFlow ``g`` in ``0..max(group)`` (``nan`` for an id without flows).

    Raises
    ------
    CommschedError
        If the three columns differ in length.

    References
    ----------
    EchelonFlow (Pan et al., HotNets 2022), Sec. 3.2, Def. 3.3, Eq. 2.
    """
    t = flow_tardiness(finish, ideal)
    g = _vec(group, np.int64)
    if len(g) != len(t):
        raise CommschedError("tardiness: finish, ideal and group differ in length")
    out = np.full(int(g.max(initial=-1)) + 1, -np.inf)
    np.maximum.at(out, g, t)
    out[np.isneginf(out)] = np.nan
    return out


def objective(finish: ArrayLike, ideal: ArrayLike, group: Sequence[int] | np.ndarray,
              weight: ArrayLike | None = None) -> float:
    """The scheduling objective ``sum_g weight[g] * t_g`` over the EchelonFlows with flows.

    Parameters
    ----------
    finish, ideal, group
        As in :func:`echelon_tardiness`.
    weight : array_like, optional
        Per EchelonFlow (default: unit weights).

    Returns
    -------
    float

    Raises
    ------
    CommschedError
        If the columns differ in length or the weights do not match the EchelonFlows.

    References
    ----------
    EchelonFlow (Pan et al., HotNets 2022), Sec. 3.2, Eqs. 3-4 (one EchelonFlow: Eq. 3;
    unit weights: Eq. 4).
    """
    t = echelon_tardiness(finish, ideal, group)
    w = np.ones(len(t)) if weight is None else _vec(weight, float)
    if len(w) != len(t):
        raise CommschedError(f"objective: {len(w)} weights for {len(t)} EchelonFlows")
    have = ~np.isnan(t)
    return float(np.sum(w[have] * t[have]))


@dataclass(frozen=True, eq=False)
class EchelonRun:
    """Outcome of :func:`simulate_echelonflows`.

    Parameters
    ----------
    table : FlowTable
        The flows run.
    result : FlowResult
        The flow simulator's result.
    """

    table: FlowTable
    result: FlowResult

    @property
    def finish(self) -> np.ndarray:
        """Finish time per flow."""
        return self.result.finish

    @property
    def tardiness(self) -> np.ndarray:
        """Per EchelonFlow (Eq. 2)."""
        return echelon_tardiness(self.finish, self.table.ideal, self.table.group)

    @property
    def objective(self) -> float:
        """Weighted sum of EchelonFlow tardiness (Eq. 4)."""
        return objective(self.finish, self.table.ideal, self.table.group, self.table.weight)


def simulate_echelonflows(net: Network, echelonflows: Sequence[EchelonFlow] | FlowTable,
                          policy: Policy, record: bool = False) -> EchelonRun:
    """Run static EchelonFlows on ``net`` under ``policy``.

    Parameters
    ----------
    net : Network
        The fabric.
    echelonflows : sequence of EchelonFlow or FlowTable
        The flows (added with their meta columns, module docstring).
    policy : Policy
        A flow policy (:data:`commsched.echelon.schedulers.FLOW_SCHEDULERS`).
    record : bool
        Keep the segments for :func:`commsched.sim.flow.check_flow_schedule`.

    Returns
    -------
    EchelonRun

    Raises
    ------
    CommschedError
        As :func:`flow_table`.

    References
    ----------
    EchelonFlow (Pan et al., HotNets 2022), Sec. 3.2 (Eqs. 1-4 on the simulated finish
    times) and Sec. 3.3.
    """
    tab = echelonflows if isinstance(echelonflows, FlowTable) else flow_table(echelonflows)
    sim = FlowSim(net, policy, record=record)
    sim.add(tab.src, tab.dst, tab.size, tab.release, **tab.meta())
    sim.run()
    return EchelonRun(tab, sim.result())
