"""Laich's partitioning and scheduling suite (B.Sc. thesis, Stuttgart 2017; Mayer, Mayer &
Laich, DIDL 2017): the system model, seven partitioners, three per-device schedulers.

Modules: :mod:`~commsched.placement.model` (problem, devices, union-find, constraints,
traffic), :mod:`~commsched.placement.sendrecv` (Sec. 2.4), :mod:`~commsched.placement.heft`
(HEFT core), :mod:`~commsched.placement.partitioners` (Ch. 4, registry
:data:`PARTITIONERS`), :mod:`~commsched.placement.schedulers` (Ch. 5, registry
:data:`DEVICE_SCHEDULERS`), :mod:`~commsched.placement.compiled` (those schedulers
compiled into the simulators' loops of both semantics, what runs use),
:mod:`~commsched.placement.run`
(one run, validated), and :mod:`~commsched.placement.bruteforce` (optimal placement and
order of tiny graphs). The simulator is :mod:`commsched.sim.devices`.

Two semantics (:class:`Options`): ``thesis`` follows the text; ``published-code`` follows
the Java simulator published with the DIDL paper (repository
``mayerrn/tensorflowPartitioningAndScheduling``, read, not copied): its simulation loop
(:func:`commsched.placement.compiled.simulate_published`), its FIFO/PCT/MSR classes
(the same kernel), its HEFT (order-dependent
ranks, earliest start as a minimum over remote predecessors), Batch Split (hash-map order,
ranges by device id in single precision), MITE's and DFS's integer traffic term, its memory
test (demand may reach the capacity), and its hash-set orders, drawn from ``seed``. Batch
Split x PCT/MSR reproduce the Java output exactly on the published CNN graph
(``tests/test_placement_java.py``).
"""

from commsched.placement.model import SEMANTICS, Cluster, Options, PlacementError, Problem
from commsched.placement.partitioners import PARTITIONERS
from commsched.placement.run import RunResult, run, run_all
from commsched.placement.schedulers import DEVICE_SCHEDULERS

__all__ = [
    "DEVICE_SCHEDULERS",
    "PARTITIONERS",
    "SEMANTICS",
    "Cluster",
    "Options",
    "PlacementError",
    "Problem",
    "RunResult",
    "run",
    "run_all",
]
