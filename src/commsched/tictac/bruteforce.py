"""Brute force over recv orders: the exact best and worst order of a small op graph.

To measure how far TicTac's TIC and TAC orders (Alg. 2, Alg. 3) are from the optimum,
every permutation of the recv ops of a small graph is turned into priorities
(``order[k]`` gets priority ``k``) and simulated with the priority executor of
:mod:`commsched.sim` (TicTac Sec. 3 semantics; compute ops unprioritized, FIFO); every
schedule is checked with :func:`commsched.sim.check_schedule`. With ``n`` recvs that is
``n!`` simulations, so :data:`MAX_RECVS` caps ``n``.

The random instances are small DNN-like DAGs: a chain-like DAG of compute ops on one
``cpu`` and recvs (sources) that each feed one to three compute ops, spread over one or
more channels ``net0, net1, ...``. The two-stage instances are Johnson's two-machine flow
shop in TicTac's terms: every recv feeds only its own compute op.

Examples
--------
>>> g = two_stage_instance([3.0, 1.0], [1.0, 2.0])
>>> bf = brute_force(g)
>>> bf.optimum, bf.worst, bf.best_order
(5.0, 6.0, ('r1', 'r0'))
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import networkx as nx

from commsched.errors import CommschedError
from commsched.model.graph import CompiledGraph, add_op, compile_graph, new_graph
from commsched.sim import check_schedule, simulate_compiled

__all__ = [
    "MAX_RECVS",
    "BruteForce",
    "brute_force",
    "priorities_makespan",
    "random_instance",
    "recv_ops",
    "two_stage_instance",
]

#: Largest number of recvs :func:`brute_force` accepts (9! = 362,880 simulations).
MAX_RECVS = 9


def recv_ops(g: nx.DiGraph) -> list[str]:
    """The recv ops of an op graph.

    Parameters
    ----------
    g : networkx.DiGraph
        An op graph (ops with a ``kind``).

    Returns
    -------
    list of str
        Its ``recv`` ops, in graph order.
    """
    return [n for n, a in g.nodes(data=True) if a["kind"] == "recv"]


def priorities_makespan(g: nx.DiGraph, priorities: Mapping[str, float]) -> float:
    """The makespan of an op graph under recv priorities, the schedule validated.

    Parameters
    ----------
    g : networkx.DiGraph
        An op graph.
    priorities : mapping of str to float
        ``{op: priority}``, lower first; ties and unprioritized ops go FIFO
        (:mod:`commsched.sim.priority`).

    Returns
    -------
    float
        The makespan of the validated schedule.

    Raises
    ------
    InvalidSchedule
        If the schedule breaks a rule of the executor (:func:`commsched.sim.check_schedule`).

    References
    ----------
    .. [1] Hashemi, Jyothi & Campbell, "TicTac", SysML 2019, Sec. 3 (the execution model).
    """
    cg = compile_graph(g, dict(priorities))
    s = simulate_compiled(cg)
    check_schedule(cg, s)
    return s.makespan


@dataclass(frozen=True)
class BruteForce:
    """The makespan of every recv order of one graph, as :func:`brute_force` returns it.

    Attributes
    ----------
    recvs : tuple of str
        The graph's recvs, in graph order.
    makespans : dict
        ``makespans[order]``: the simulated makespan when the recvs are sent in ``order``
        (a tuple of recv ids).
    """

    recvs: tuple[str, ...]
    makespans: dict[tuple[str, ...], float]

    @property
    def optimum(self) -> float:
        """The smallest makespan over every order."""
        return min(self.makespans.values())

    @property
    def worst(self) -> float:
        """The largest makespan over every order."""
        return max(self.makespans.values())

    @property
    def mean(self) -> float:
        """Expected makespan of a uniformly random order (vanilla TensorFlow's)."""
        return math.fsum(self.makespans.values()) / len(self.makespans)

    @property
    def best_order(self) -> tuple[str, ...]:
        """The first optimal order in lexicographic order of recv positions."""
        return min(self.makespans, key=lambda o: self.makespans[o])

    def frac_optimal(self, rel_tol: float = 1e-9) -> float:
        """Fraction of the orders whose makespan equals the optimum.

        Parameters
        ----------
        rel_tol : float, optional
            Equal within this fraction of the optimum.

        Returns
        -------
        float
        """
        opt = self.optimum
        hits = sum(1 for m in self.makespans.values() if m <= opt * (1 + rel_tol))
        return hits / len(self.makespans)

    def consistent(self, priorities: Mapping[str, float]) -> list[float]:
        """Makespans of the orders that sort the recvs by priority (ties in any order).

        Parameters
        ----------
        priorities : mapping of str to float
            A priority for every recv (TIC's shared priorities, say).

        Returns
        -------
        list of float
            One makespan per consistent order.
        """
        return [
            m
            for order, m in self.makespans.items()
            if all(priorities[a] <= priorities[b] for a, b in itertools.pairwise(order))
        ]


def brute_force(g: nx.DiGraph, check: bool = True) -> BruteForce:
    """Simulate every order of the recvs of ``g`` (at most :data:`MAX_RECVS` of them).

    Parameters
    ----------
    g : networkx.DiGraph
        Op graph with 1..MAX_RECVS recv ops.
    check : bool, optional
        Validate every schedule with :func:`commsched.sim.check_schedule` (default).

    Returns
    -------
    BruteForce
        The makespan of all ``n!`` orders.

    Raises
    ------
    CommschedError
        If ``g`` has no recv op or more than :data:`MAX_RECVS`.
    InvalidSchedule
        If ``check`` and a schedule breaks a rule of the executor.
    """
    recvs = recv_ops(g)
    if not 1 <= len(recvs) <= MAX_RECVS:
        raise CommschedError(
            f"brute force needs 1..{MAX_RECVS} recv ops, the graph has {len(recvs)}"
        )
    base = compile_graph(g)
    pos = {op: i for i, op in enumerate(base.ids)}
    slots = [pos[r] for r in recvs]
    makespans: dict[tuple[str, ...], float] = {}
    for perm in itertools.permutations(range(len(recvs))):
        prio: list[float | None] = list(base.priority)
        for k, j in enumerate(perm):
            prio[slots[j]] = float(k)
        cg: CompiledGraph = dataclasses.replace(base, priority=prio)
        s = simulate_compiled(cg)
        if check:
            check_schedule(cg, s)
        makespans[tuple(recvs[j] for j in perm)] = s.makespan
    return BruteForce(tuple(recvs), makespans)


def two_stage_instance(recv_times: Sequence[float], compute_times: Sequence[float]) -> nx.DiGraph:
    """Johnson's flow shop as an op graph: recv ``r<i>`` on ``net`` feeds only ``c<i>`` on ``cpu``.

    With these graphs ``M(r_i)`` is the recv time, ``P(r_i)`` the compute time, ``M+`` is
    infinite, and TAC's comparator (SysML Eq. 6) is Johnson's rule, which is optimal.

    Parameters
    ----------
    recv_times : sequence of float
        The recvs' times (machine 1).
    compute_times : sequence of float
        Their compute ops' times (machine 2), as many.

    Returns
    -------
    networkx.DiGraph

    Raises
    ------
    ValueError
        If the two sequences differ in length.

    References
    ----------
    .. [1] S. M. Johnson, "Optimal two- and three-stage production schedules with setup
       times included", Naval Research Logistics Quarterly 1(1), 1954.
    .. [2] Hashemi, Jyothi & Campbell, "TicTac", SysML 2019, Sec. 4.3, Eq. 6.
    """
    if len(recv_times) != len(compute_times):
        raise ValueError("recv_times and compute_times must have the same length")
    g = new_graph({"net": 1, "cpu": 1}, instance={"family": "two_stage"})
    for i, (m, p) in enumerate(zip(recv_times, compute_times, strict=True)):
        add_op(g, f"r{i}", "recv", "net", m)
        add_op(g, f"c{i}", "compute", "cpu", p)
        g.add_edge(f"r{i}", f"c{i}")
    return g


def random_instance(n_recvs: int, seed: int, channels: int = 1) -> nx.DiGraph:
    """A random DNN-like op graph with ``n_recvs`` recvs over ``channels`` channels.

    ``n_recvs`` to ``2 n_recvs + 2`` compute ops on ``cpu`` in a random DAG where each op
    (but the first) depends on one or two earlier ones, mostly the previous one (a layer
    chain with some branches); each recv (a source, on a random channel ``net<k>``) feeds
    one to three compute ops, biased towards one. Times are multiples of 0.05 s: recvs in
    [0.1, 2], compute ops in [0.05, 1.5], so communication and computation are comparable.

    Parameters
    ----------
    n_recvs : int
        Recvs, >= 1.
    seed : int
        Seeds every random choice.
    channels : int, optional
        Channels, >= 1 (default 1).

    Returns
    -------
    networkx.DiGraph
        The graph attribute ``instance`` records the arguments.

    Raises
    ------
    ValueError
        If ``n_recvs`` or ``channels`` is below 1.
    """
    if n_recvs < 1 or channels < 1:
        raise ValueError("n_recvs and channels must be >= 1")
    rng = random.Random(seed)
    nets = [f"net{k}" for k in range(channels)]
    g = new_graph(
        {**dict.fromkeys(nets, 1), "cpu": 1},
        instance={"family": "dag", "n_recvs": n_recvs, "channels": channels, "seed": seed},
    )
    n_comp = rng.randint(n_recvs, 2 * n_recvs + 2)
    for j in range(n_comp):
        add_op(g, f"c{j}", "compute", "cpu", rng.randint(1, 30) * 0.05)
        if j:
            g.add_edge(f"c{j - 1}" if rng.random() < 0.7 else f"c{rng.randrange(j)}", f"c{j}")
            if j > 1 and rng.random() < 0.25:
                g.add_edge(f"c{rng.randrange(j - 1)}", f"c{j}")
    for i in range(n_recvs):
        add_op(g, f"r{i}", "recv", rng.choice(nets), rng.randint(2, 40) * 0.05)
        k = rng.choices((1, 2, 3), weights=(6, 3, 1))[0]
        for j in rng.sample(range(n_comp), min(k, n_comp)):
            g.add_edge(f"r{i}", f"c{j}")
    return g
