"""Laich's partitioning and scheduling suite (B.Sc. thesis, Stuttgart 2017; Mayer, Mayer &
Laich, DIDL 2017): the system model, seven partitioners, three per-device schedulers.

Modules: :mod:`~commsched.placement.model` (problem, devices, union-find, constraints,
traffic), :mod:`~commsched.placement.sendrecv` (Sec. 2.4), :mod:`~commsched.placement.heft`
(HEFT core), :mod:`~commsched.placement.partitioners` (Ch. 4, registry
:data:`PARTITIONERS`), :mod:`~commsched.placement.schedulers` (Ch. 5, registry
:data:`SCHEDULERS`), :mod:`~commsched.placement.run` (one run, validated), and
:mod:`~commsched.placement.bruteforce` (optimal placement and order of tiny graphs). The
simulator is :mod:`commsched.sim.devices`.

Two semantics (:class:`Options`): ``thesis`` follows the text; ``published-code`` follows
the Java simulator published with the DIDL paper where it deviates from the text (HEFT's
earliest start as a minimum over predecessors, Batch Split's ranges by device id, receive
nodes charged in PCT, MSR's bonuses only for cross-device successors, MITE's node-id /
device-id comparison, hash-set orders and random ties, here seeded).
"""

from commsched.placement.model import SEMANTICS, Cluster, Options, PlacementError, Problem
from commsched.placement.partitioners import PARTITIONERS
from commsched.placement.run import RunResult, run, run_all
from commsched.placement.schedulers import SCHEDULERS

__all__ = [
    "PARTITIONERS",
    "SCHEDULERS",
    "SEMANTICS",
    "Cluster",
    "Options",
    "PlacementError",
    "Problem",
    "RunResult",
    "run",
    "run_all",
]
