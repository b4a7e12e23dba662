"""The result of simulating an all-reduce plan (:mod:`commsched.pace.sim`).

:class:`PlanRun` holds one simulated iteration: its times, every partition's execution
(:class:`PartitionRun`) and the channel's use over time.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from commsched.errors import CommschedError
from commsched.sim.priority import Schedule

__all__ = ["PartitionRun", "PlanRun"]


@dataclass(frozen=True)
class PartitionRun:
    """One executed partition of a simulated plan.

    Parameters
    ----------
    group, offset : int
        Its place in the plan.
    bytes : int
        Its size.
    priority : int
        Its priority in the plan.
    rank : int
        Its position in :meth:`~commsched.pace.plan.Plan.priority_order`.
    start, end : float
        When it ran (s).
    tensors : tuple of str
        The tensors whose bytes it covers.
    """

    group: int
    offset: int
    bytes: int
    priority: int
    rank: int
    start: float
    end: float
    tensors: tuple[str, ...]


@dataclass(frozen=True)
class PlanRun:
    """A simulated iteration (:func:`commsched.pace.sim.simulate_plan`).

    Parameters
    ----------
    policy : str
        The plan's policy.
    makespan : float
        End of the simulated window (s).
    forward_time : float
        Makespan of the forward pass alone (s).
    partitions : tuple of PartitionRun
        Every partition, in execution order.
    schedule : Schedule
        The whole schedule (:mod:`commsched.sim.priority`).

    References
    ----------
    PACE (Bao et al., INFOCOM 2020), Sec. IV-A (the iteration time) and Sec. VI-E
    (channel use, Fig. 10).
    """

    policy: str
    makespan: float
    forward_time: float
    partitions: tuple[PartitionRun, ...]
    schedule: Schedule

    @property
    def iteration_time(self) -> float:
        """Steady-state time of one iteration: ``makespan - forward_time``
        (:mod:`commsched.pace.sim`)."""
        return self.makespan - self.forward_time

    @property
    def comm_time(self) -> float:
        """Total channel busy time (s)."""
        return math.fsum(p.end - p.start for p in self.partitions)

    def table(self) -> pd.DataFrame:
        """The partitions as a table.

        Returns
        -------
        pandas.DataFrame
            One row per partition (:class:`PartitionRun`'s fields), in execution order.
        """
        rows = [dataclasses.asdict(p) | {"tensors": " ".join(p.tensors)}
                for p in self.partitions]
        return pd.DataFrame(rows).sort_values(["start", "rank"], ignore_index=True)

    def channel_usage(self, bin_s: float = 0.005, wire_factor: float = 1.0) -> pd.DataFrame:
        """Channel use over one steady-state iteration, in bins of ``bin_s`` seconds.

        Parameters
        ----------
        bin_s : float
            Bin length (s, > 0).
        wire_factor : float
            A partition of ``b`` bytes sends ``wire_factor * b`` bytes at a constant rate
            over its duration (ring all-reduce: ``2(W-1)/W``).

        Returns
        -------
        pandas.DataFrame
            Per bin of the window ``[forward_time, makespan)``: ``t_s``, ``busy`` (the
            fraction of the bin the channel is busy) and ``wire_bytes`` (bytes one worker
            sends in the bin).

        Raises
        ------
        CommschedError
            If ``bin_s`` is not a number > 0.

        References
        ----------
        PACE (Bao et al., INFOCOM 2020), Sec. VI-E: a worker's outbound NIC traffic
        every 5 ms (Fig. 10).
        """
        if not (bin_s > 0 and math.isfinite(bin_s)):
            raise CommschedError(f"bin length must be a number > 0 s, got {bin_s!r}")
        t0, t1 = self.forward_time, self.makespan
        n = max(1, math.ceil((t1 - t0) / bin_s - 1e-9))
        edges = t0 + bin_s * np.arange(n + 1)
        busy = np.zeros(n)
        wire = np.zeros(n)
        for p in self.partitions:
            d = p.end - p.start
            if d <= 0:
                continue
            lo = np.clip(edges[:-1], p.start, p.end)
            hi = np.clip(edges[1:], p.start, p.end)
            busy += (hi - lo) / bin_s
            wire += (hi - lo) / d * wire_factor * p.bytes
        return pd.DataFrame({"t_s": edges[:-1] - t0, "busy": busy, "wire_bytes": wire})
