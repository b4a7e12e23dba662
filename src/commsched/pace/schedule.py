"""Optimal preemptive all-reduce schedules: the exact combinatorial solver (PACE Sec. IV-B).

After Theorem 1, PACE's problem (10) is to give each all-reduce ``i`` ``p_i`` slots at or
after its release ``r_i``, at most one all-reduce per slot, minimising
``max_i (y_i + q_i)`` where ``y_i`` is the end of its last slot and ``q_i`` its tail: the
single-machine problem ``1 | r_j, pmtn | L_max`` in its delivery-time form. With
preemption it is solved exactly by the *preemptive largest-tail-first* rule (Jackson's
rule with preemption; Horn 1974, Lenstra, Rinnooy Kan and Brucker 1977): whenever the
channel is free or an all-reduce is released, run the released unfinished all-reduce with
the largest tail. With integer releases and processing times every decision falls on a
slot boundary, so the schedule is a slot assignment, and it is optimal for real tails.
The paper solves the same problem by the LP (14) (:mod:`commsched.pace.lp`); the tests
prove both equal, and equal to :func:`brute_force` on tiny instances.

A *schedule* is ``{op index: sorted slot indices}`` (0-based slots). :func:`check`
validates one against its problem, :func:`objective` evaluates it, :func:`runs` cuts an
op's slots into maximal runs (one plan partition each).

Examples
--------
Sec. II-C's pattern: a long all-reduce preempted by a later, more urgent one.

>>> from commsched.pace.slots import SlotProblem
>>> p = SlotProblem(release=(0, 1), proc=(3, 1), tail=(1.0, 4.0))
>>> s = jackson(p)
>>> s
{0: (0, 2, 3), 1: (1,)}
>>> objective(p, s), brute_force(p)[0]
(6.0, 6.0)
>>> runs(s[0])
[(0, 1), (2, 2)]
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from functools import cache

from commsched.errors import CommschedError
from commsched.pace.slots import SlotProblem

__all__ = ["Schedule", "brute_force", "check", "jackson", "objective", "order_vector", "runs"]

#: ``{op index: sorted slot indices}``.
Schedule = dict[int, tuple[int, ...]]


def check(problem: SlotProblem, schedule: Mapping[int, Sequence[int]]) -> None:
    """Check that ``schedule`` is a schedule of ``problem``.

    Parameters
    ----------
    problem : SlotProblem
        The problem.
    schedule : mapping
        ``{op index: slots}``.

    Raises
    ------
    CommschedError
        Unless every op gets exactly its processing slots, none before its release, and
        no slot goes to two ops.

    References
    ----------
    PACE (Bao et al., INFOCOM 2020), Sec. IV-B, the constraints of LP (14).
    """
    if set(schedule) != set(range(problem.n)):
        raise CommschedError(f"schedule covers ops {sorted(schedule)}, expected 0..{problem.n - 1}")
    used: dict[int, int] = {}
    for i, ts in schedule.items():
        if len(set(ts)) != len(ts) or len(ts) != problem.proc[i]:
            raise CommschedError(
                f"schedule: op {i} has {len(set(ts))} distinct slots, needs {problem.proc[i]}"
            )
        for t in ts:
            if t < problem.release[i]:
                raise CommschedError(
                    f"schedule: op {i} runs in slot {t} before its release {problem.release[i]}"
                )
            if t in used:
                raise CommschedError(f"schedule: slot {t} holds ops {used[t]} and {i}")
            used[t] = i


def objective(problem: SlotProblem, schedule: Mapping[int, Sequence[int]]) -> float:
    """The DAG's end in slots under ``schedule``.

    Parameters
    ----------
    problem, schedule
        As for :func:`check` (which checks the schedule first).

    Returns
    -------
    float
        ``max(base, max_i (y_i + q_i))`` with ``y_i`` = last slot + 1.

    Raises
    ------
    CommschedError
        If the schedule fails :func:`check`.

    References
    ----------
    PACE (Bao et al., INFOCOM 2020), Sec. IV-A, Theorem 1 (the iteration time).
    """
    check(problem, schedule)
    return max([problem.base]
               + [max(schedule[i]) + 1 + problem.tail[i] for i in range(problem.n)])


def order_vector(problem: SlotProblem, schedule: Mapping[int, Sequence[int]]) -> list[float]:
    """The paper's ``alpha(x)``: the items ``t x_i(t) + L_i`` for every op ``i`` and slot
    ``t in [T]`` (1-based, ``T`` the horizon), non-increasing.

    Parameters
    ----------
    problem, schedule
        As for :func:`check` (0-based slots; checked with it first).

    Returns
    -------
    list of float
        ``N * T`` items; Python's list order is the paper's lexicographic order.

    Raises
    ------
    CommschedError
        If ``schedule`` is not a schedule of ``problem`` (:func:`check`).

    References
    ----------
    PACE (Bao et al., INFOCOM 2020), Sec. IV-B: ``alpha(x)`` and its lexicographic order.

    Examples
    --------
    >>> order_vector(SlotProblem(release=(0,), proc=(2,), tail=(1.0,)), {0: (0, 1)})
    [3.0, 2.0]
    """
    check(problem, schedule)
    items: list[float] = []
    for i in range(problem.n):
        used = {s + 1 for s in schedule[i]}
        items += [(t if t in used else 0) + problem.tail[i]
                  for t in range(1, problem.horizon + 1)]
    return sorted(items, reverse=True)


def runs(slots: Sequence[int]) -> list[tuple[int, int]]:
    """Maximal runs of consecutive slots, in time order.

    Parameters
    ----------
    slots : sequence of int
        One op's slots.

    Returns
    -------
    list of (int, int)
        ``(start, length)`` of every run (a run is one partition of the plan).

    Examples
    --------
    >>> runs([7, 3, 4, 5, 9])
    [(3, 3), (7, 1), (9, 1)]
    """
    out: list[tuple[int, int]] = []
    for t in sorted(slots):
        if out and out[-1][0] + out[-1][1] == t:
            out[-1] = (out[-1][0], out[-1][1] + 1)
        else:
            out.append((t, 1))
    return out


def jackson(problem: SlotProblem) -> Schedule:
    """The optimal preemptive schedule by largest-tail-first (module docstring).

    Ties between equal tails go to the earlier release, then the lower index (the
    running op wins a tie against a newly released one, so no needless preemption).
    O(N log N) heap operations plus one entry per slot of the output.

    Parameters
    ----------
    problem : SlotProblem
        The problem.

    Returns
    -------
    Schedule
        An optimal schedule of ``max(C0, max_i(y_i + q_i))``.

    References
    ----------
    J. R. Jackson, "Scheduling a production line to minimize maximum tardiness", 1955
    (largest tail first is optimal with preemption, ``1 | r_j, pmtn | max(C_j + q_j)``);
    PACE (Bao et al., INFOCOM 2020), Sec. IV-B.
    """
    n = problem.n
    by_release = sorted(range(n), key=lambda i: (problem.release[i], i))
    remaining = list(problem.proc)
    out: dict[int, list[int]] = {i: [] for i in range(n)}
    heap: list[tuple[float, int, int]] = []
    t, k = 0, 0
    while k < n or heap:
        if not heap:
            t = max(t, problem.release[by_release[k]])
        while k < n and problem.release[by_release[k]] <= t:
            i = by_release[k]
            heapq.heappush(heap, (-problem.tail[i], problem.release[i], i))
            k += 1
        _, _, i = heap[0]
        nxt = problem.release[by_release[k]] if k < n else t + remaining[i]
        run = min(remaining[i], nxt - t)
        out[i].extend(range(t, t + run))
        remaining[i] -= run
        t += run
        if remaining[i] == 0:
            heapq.heappop(heap)
    return {i: tuple(ts) for i, ts in out.items()}


def brute_force(problem: SlotProblem, max_states: int = 2_000_000) -> tuple[float, Schedule]:
    """Exhaustive search over every slot assignment (idle slots included), for tiny
    problems: the optimum and one optimal schedule.

    Dynamic programming over (slot, remaining work of every op); it assumes nothing about
    the structure of optimal schedules. Slots run up to :attr:`SlotProblem.horizon`,
    enough for a schedule that never idles while work is released, hence for an optimal
    one; a schedule that idles needlessly is explored too within that horizon.

    Parameters
    ----------
    problem : SlotProblem
        A tiny problem.
    max_states : int
        Bound on the states explored.

    Returns
    -------
    float
        The optimum.
    Schedule
        One optimal schedule.

    Raises
    ------
    CommschedError
        Beyond ``max_states`` states.
    """
    horizon = problem.horizon
    n = problem.n
    states = 1
    for p in problem.proc:
        states *= p + 1
    if states * (horizon + 1) > max_states:
        raise CommschedError(f"brute force: {states * (horizon + 1)} states > {max_states}")

    @cache
    def best(t: int, rem: tuple[int, ...]) -> tuple[float, int]:
        """(optimal value from slot t with work ``rem`` left, the op run in slot t or -1)."""
        if not any(rem):
            return (-float("inf"), -1)
        if t >= horizon:
            return (float("inf"), -1)
        choices: list[tuple[float, int]] = [(best(t + 1, rem)[0], -1)]
        for i in range(n):
            if rem[i] and problem.release[i] <= t:
                nrem = (*rem[:i], rem[i] - 1, *rem[i + 1:])
                done = t + 1 + problem.tail[i] if nrem[i] == 0 else -float("inf")
                choices.append((max(done, best(t + 1, nrem)[0]), i))
        return min(choices, key=lambda c: c[0])

    rem = tuple(problem.proc)
    value = max(problem.base, best(0, rem)[0])
    schedule: dict[int, list[int]] = {i: [] for i in range(n)}
    t = 0
    while any(rem):
        _, i = best(t, rem)
        if i >= 0:
            schedule[i].append(t)
            rem = (*rem[:i], rem[i] - 1, *rem[i + 1:])
        t += 1
    return value, {i: tuple(ts) for i, ts in schedule.items()}
