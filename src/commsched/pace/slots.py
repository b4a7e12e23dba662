"""PACE's model in time slots: the single-channel preemptive scheduling problem.

:func:`to_problem` turns the model of :mod:`commsched.pace.model` into time slots
(:class:`SlotProblem`), as PACE (Bao, Peng, Chen, Wu; INFOCOM 2020) Sec. IV-A and IV-B do:

* **Slots.** Time is cut into slots of ``slot_s`` seconds (5 ms by default, Sec. IV-A);
  slot ``s`` (0-based) is ``[s * slot_s, (s+1) * slot_s)`` and at most one all-reduce
  runs in a slot (constraint (6)). The paper asks for a slot no longer than the smallest
  (fused) all-reduce: :func:`check_slot` enforces it where a caller wants it
  (:mod:`commsched.pace.fusion` applies it to the fused operators).
* **Processing** ``p_i = ceil(g_i / slot_s)`` slots (constraint (3)), ``g_i`` from the
  all-reduce cost model (:mod:`commsched.cost`: ring all-reduce = Eq. (1) without the
  aggregation term, or the affine ``a + b*S`` fitted to our measurement, Fig. 3 analog).
* **Release (the off-by-one in (7)).** (7) forbids slots ``t < z_{u_i}``, which lets an
  all-reduce run in the very slot in which its producer finishes. *Our choice*: an
  all-reduce may use slot ``s`` only if its producer is done when the slot starts,
  ``s * slot_s >= z_{u_i}``, so its release is ``r_i = ceil(z_{u_i} / slot_s)`` (0-based;
  in the paper's 1-based slots: ``t > r_i``). Compute times stay in seconds (they are
  microseconds to milliseconds, far below a slot; rounding each op to whole slots would
  inflate the DAG).
* **Tails** ``q_i = L_i / slot_s`` and ``C0 / slot_s`` in (fractional) slots. An
  all-reduce whose last slot is ``s`` completes at ``y_i = s + 1`` (the paper's 1-based
  index of that slot), and the DAG ends at ``max(C0/slot_s, max_i (y_i + q_i))`` slots.
  LP (14)'s lexicographic transform needs integer exponents: :meth:`SlotProblem.
  integral` rounds the tails up to whole slots (the paper's ``f_j`` are whole slots).

Examples
--------
>>> p = SlotProblem(release=(0, 1), proc=(3, 1), tail=(1.0, 4.0), base=0.0, slot_s=0.005)
>>> p.horizon
5
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from commsched.cost import AllReduceModel
from commsched.errors import CommschedError
from commsched.pace.model import PaceModel

__all__ = ["DEFAULT_SLOT_S", "SlotProblem", "check_slot", "slots", "to_problem"]

#: The paper's example slot length (Sec. IV-A), seconds.
DEFAULT_SLOT_S = 0.005
# Relative tolerance when rounding a time to slots (7.0000000001 slots is 7).
_EPS = 1e-9


def slots(seconds: float, slot_s: float) -> int:
    """``ceil(seconds / slot_s)`` robust to floating-point noise.

    Parameters
    ----------
    seconds : float
        A time.
    slot_s : float
        The slot length (> 0).

    Returns
    -------
    int
        Whole slots covering ``seconds`` (>= 0).

    References
    ----------
    PACE, Sec. IV-A (time slots).

    Examples
    --------
    >>> slots(0.015, 0.005), slots(0.0150001, 0.005), slots(0.0, 0.005)
    (3, 4, 0)
    """
    x = seconds / slot_s
    return max(0, math.ceil(x - _EPS * max(1.0, abs(x))))


@dataclass(frozen=True)
class SlotProblem:
    """Single-channel preemptive scheduling in slots: ``1 | r_j, pmtn | max(C_j + q_j)``.

    Parameters
    ----------
    release : tuple of int
        Operator ``i`` may run in slots ``s >= release[i]`` (0-based).
    proc : tuple of int
        It needs ``proc[i] >= 1`` slots.
    tail : tuple of float
        Once its last slot ``s`` is done (``y_i = s + 1``) the DAG ends no earlier than
        ``y_i + tail[i]``.
    base : float
        ``C0`` in slots.
    slot_s : float
        Slot length, to convert to seconds.

    Raises
    ------
    CommschedError
        If the lengths differ or a value is out of range.

    References
    ----------
    PACE, Sec. IV-A and IV-B (the slotted problem, LP (14)).
    """

    release: tuple[int, ...]
    proc: tuple[int, ...]
    tail: tuple[float, ...]
    base: float = 0.0
    slot_s: float = DEFAULT_SLOT_S

    def __post_init__(self) -> None:
        n = len(self.release)
        if len(self.proc) != n or len(self.tail) != n:
            raise CommschedError("a slot problem needs release, proc and tail of equal length")
        if any(r < 0 for r in self.release) or any(p < 1 for p in self.proc):
            raise CommschedError("a slot problem needs releases >= 0 and processing >= 1 slot")
        if any(not math.isfinite(q) or q < 0 for q in self.tail):
            raise CommschedError("a slot problem needs finite tails >= 0")
        if not (math.isfinite(self.slot_s) and self.slot_s > 0):
            raise CommschedError(f"slot length must be > 0 s, got {self.slot_s!r}")

    @property
    def n(self) -> int:
        """Number of all-reduce operators."""
        return len(self.release)

    @property
    def horizon(self) -> int:
        """Slots enough for any schedule without needless idling: ``max r + sum p``."""
        return max(self.release, default=0) + sum(self.proc)

    def integral(self) -> SlotProblem:
        """The same problem with tails and base rounded up to whole slots.

        Returns
        -------
        SlotProblem
            Integral data, as LP (14) needs (PACE, Sec. IV-B).
        """
        return replace(self, tail=tuple(float(math.ceil(q - _EPS)) for q in self.tail),
                       base=float(math.ceil(self.base - _EPS)))


def to_problem(model: PaceModel, cost: AllReduceModel, slot_s: float = DEFAULT_SLOT_S
               ) -> SlotProblem:
    """Slot the model (module docstring).

    Parameters
    ----------
    model : PaceModel
        The model.
    cost : AllReduceModel
        ``g(S)``, the time of one all-reduce.
    slot_s : float
        Slot length (> 0).

    Returns
    -------
    SlotProblem
        ``r = ceil(z/slot)``, ``p = max(1, ceil(g/slot))``, ``q = L/slot``,
        ``base = C0/slot``.

    Raises
    ------
    CommschedError
        If ``slot_s`` is not a number > 0.

    References
    ----------
    PACE, Sec. IV-A (slots).
    """
    if not (math.isfinite(slot_s) and slot_s > 0):
        raise CommschedError(f"slot length must be a finite number > 0 s, got {slot_s!r}")
    return SlotProblem(
        release=tuple(slots(op.ready_s, slot_s) for op in model.ops),
        proc=tuple(max(1, slots(cost.time(op.bytes), slot_s)) for op in model.ops),
        tail=tuple(op.tail_s / slot_s for op in model.ops),
        base=model.compute_only_s / slot_s,
        slot_s=slot_s,
    )


def check_slot(model: PaceModel, cost: AllReduceModel, slot_s: float) -> None:
    """Check Sec. IV-A's guidance: a slot no longer than the smallest all-reduce.

    Parameters
    ----------
    model : PaceModel
        The model.
    cost : AllReduceModel
        ``g(S)``.
    slot_s : float
        Slot length.

    Raises
    ------
    CommschedError
        One line naming the smallest all-reduce if the slot is longer.

    References
    ----------
    PACE, Sec. IV-A.
    """
    smallest = min(model.ops, key=lambda op: cost.time(op.bytes))
    g = cost.time(smallest.bytes)
    if slot_s > g * (1 + _EPS):
        raise CommschedError(
            f"slot of {slot_s * 1e3:g} ms is longer than the smallest all-reduce "
            f"({smallest.name!r}, {smallest.bytes} B, {g * 1e3:.3g} ms); PACE Sec. IV-A needs "
            "slots no longer than any all-reduce: use a shorter slot or fuse tensors"
        )
