"""From a placement and a per-device order to a TensorFlow graph (no TensorFlow import).

The live placement (:mod:`commsched.placement.live`) runs a traced graph on K TensorFlow
tasks, one per thesis device. This module does the mapping, on a ``GraphDef`` (any
protobuf with ``node`` entries of ``name``, ``op``, ``input``, ``device`` and ``attr``):

* :func:`device_names`: device ``d`` of the thesis cluster is TensorFlow task ``d`` of
  the cluster spec (the parameter-server task first, then the workers);
* :func:`order_edges`: a scheduler's order of each device's compute nodes, read from the
  simulated schedule, as a chain of control dependencies (consecutive nodes of a device);
  the chain agrees with a topological order of the graph, so it adds no cycle;
* :func:`apply`: each op's device (``tf.device`` of the op, set in the ``GraphDef``), the
  chain as control inputs, and the run's resource container on every variable;
* :func:`relative_speeds` and :func:`slowdowns`: the thesis' device speeds (operations per
  time unit, Sec. 2.2) as a slow-down of each op on a slower device. The fastest device
  runs at the host's speed (relative speed 1); an op of traced time ``t >= min_us`` placed
  on a device of relative speed ``r < 1`` is followed by a busy-wait of ``1/r - 1`` times
  its own live duration (:mod:`commsched.placement.live.job` builds it), so it lasts
  ``1/r`` times what it lasts on the host at that moment. Shorter ops (the executor's
  cost dominates them; in the thesis CNN's training step the 12 ops above 100 us carry 97%
  of the traced op time) are left at host speed, and the simulator's prediction slows
  exactly the ops the job slows (:func:`commsched.placement.live.predict.simulate`).

Ops of the graph outside the traced iteration (the variables' initialisers) follow the op
they are colocated with (``_class: loc:@...``), else their first input, else device 0.
Ops of the iteration lose their ``_class`` colocation: ``tf.gradients`` colocates each
gradient op with its forward op, and TensorFlow's placer would let that override the
placement; the colocations that matter (an op reading or updating a variable stays with
it) are in the thesis problem already (:mod:`commsched.placement.traced`).

Examples
--------
>>> device_names({"ps": ["a:1"], "worker": ["b:1", "c:1"]})[2]
'/job:worker/replica:0/task:1/device:CPU:0'
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from itertools import pairwise
from typing import Any

import numpy as np

from commsched.placement.model import PlacementError
from commsched.sim.devices import COMPUTE, DeviceSchedule, ExecGraph

__all__ = ["apply", "canonical_device", "device_index", "device_names", "order_edges",
           "placed_devices", "relative_speeds", "slowdowns"]


def device_names(spec: Mapping[str, Sequence[str]]) -> list[str]:
    """The TensorFlow device of each thesis device: the ``ps`` tasks, then the workers.

    Parameters
    ----------
    spec : mapping
        A cluster spec, ``{"ps": [host:port, ...], "worker": [...]}``.

    Returns
    -------
    list of str
        Fully qualified CPU device names.
    """
    out = []
    for job in ("ps", "worker"):
        out += [f"/job:{job}/replica:0/task:{i}/device:CPU:0"
                for i in range(len(spec.get(job, [])))]
    return out


def canonical_device(name: str) -> str:
    """A device name as TensorFlow prints it in step stats (``cpu:0``) or in a placement
    (``device:CPU:0``), in one spelling.

    Parameters
    ----------
    name : str

    Returns
    -------
    str

    Examples
    --------
    >>> canonical_device("/job:ps/replica:0/task:0/device:CPU:0")
    '/job:ps/replica:0/task:0/cpu:0'
    """
    return name.lower().replace("device:", "")


def device_index(k: int) -> dict[str, int]:
    """The thesis device of each TensorFlow device of a K-task cluster, by canonical name.

    Parameters
    ----------
    k : int
        Devices (one ``ps`` task, then ``k - 1`` workers, as :func:`device_names`).

    Returns
    -------
    dict of str to int
        :func:`canonical_device` spelling -> device number.

    Examples
    --------
    >>> device_index(2)["/job:worker/replica:0/task:0/cpu:0"]
    1
    """
    return {canonical_device(n): i for i, n in
            enumerate(device_names({"ps": ["-"], "worker": ["-"] * (k - 1)}))}


def order_edges(eg: ExecGraph, s: DeviceSchedule, n_ops: int, skip: Collection[int] = ()
                ) -> list[tuple[int, int]]:
    """The per-device order of a simulated schedule as control dependencies.

    Parameters
    ----------
    eg : ExecGraph
        The executed graph (original nodes ``0..n_ops-1`` first, Laich Sec. 2.4).
    s : DeviceSchedule
        Its simulated schedule under one per-device scheduler.
    n_ops : int
        Number of original nodes; send and receive nodes get no edge (TensorFlow inserts
        its own).
    skip : collection of int
        Nodes left out of the chain: the variables' handle ops (``VarHandleOp``), which the
        variables' initialiser runs too; a control input on one would make the initialiser
        run the iteration's ops, reading variables not yet initialised.

    Returns
    -------
    list of (int, int)
        ``(a, b)``: ``b`` runs after ``a``, consecutive compute nodes of one device by
        start time (ties by end time, then by node).

    References
    ----------
    Laich 2017, Ch. 5 (a scheduler orders each device's ready nodes).
    """
    by_dev: dict[int, list[int]] = {}
    for v in range(n_ops):
        if eg.kind[v] == COMPUTE and v not in skip:
            by_dev.setdefault(eg.device[v], []).append(v)
    edges = []
    for nodes in by_dev.values():
        nodes.sort(key=lambda v: (s.start[v], s.end[v], v))
        edges += list(pairwise(nodes))
    return edges


def placed_devices(names: Sequence[str], placement: np.ndarray, devices: Sequence[str]
                   ) -> dict[str, str]:
    """Each traced op's TensorFlow device.

    Parameters
    ----------
    names : sequence of str
        The traced ops, in the problem's node order.
    placement : numpy.ndarray
        The device index of every node.
    devices : sequence of str
        :func:`device_names` of the cluster.

    Returns
    -------
    dict of str to str

    Raises
    ------
    PlacementError
        If the placement names a device the cluster does not have.
    """
    if len(placement) != len(names):
        raise PlacementError(f"placement of {len(placement)} nodes for a graph of "
                             f"{len(names)} ops")
    out = {}
    for name, d in zip(names, placement, strict=True):
        if not 0 <= int(d) < len(devices):
            raise PlacementError(f"op {name!r} is placed on device {int(d)}, but the cluster "
                                 f"has {len(devices)} devices (0..{len(devices) - 1})")
        out[name] = devices[int(d)]
    return out


def apply(gdef: Any, placed: Mapping[str, str], control: Sequence[tuple[str, str]],
          iteration: Sequence[str], container: str, default_device: str) -> Any:
    """Set devices, control dependencies and the resource container in a ``GraphDef``.

    Parameters
    ----------
    gdef : GraphDef
        The rebuilt graph (:func:`commsched.trace.tf.build_iteration`); changed in place.
    placed : mapping of str to str
        Device of every op of the traced iteration (:func:`placed_devices`).
    control : sequence of (str, str)
        ``(a, b)``: ``b`` gets the control input ``^a`` (:func:`order_edges`).
    iteration : sequence of str
        The ops of one iteration in the rebuilt graph (what the targets need).
    container : str
        Resource container of every variable (one per configuration).
    default_device : str
        The device of an op outside the iteration with nothing to follow.

    Returns
    -------
    GraphDef
        ``gdef``.

    Raises
    ------
    PlacementError
        If an op of the iteration has no traced counterpart (cannot be mapped to the
        trace), or a control edge names an op the graph lacks.
    """
    unmapped = [n for n in iteration if n not in placed]
    if unmapped:
        raise PlacementError(f"op {unmapped[0]!r} of the live graph is not in the trace: "
                             f"it cannot be mapped ({len(unmapped)} such ops)")
    nodes = {n.name: n for n in gdef.node}
    for a, b in control:
        if a not in nodes or b not in nodes:
            raise PlacementError(f"control edge {a!r} -> {b!r} names an op the graph lacks")
        nodes[b].input.append(f"^{a}")
    for n in gdef.node:  # GraphDef order: inputs and colocated ops come first
        if n.name in placed:
            n.device = placed[n.name]
            if n.op != "VarHandleOp" and "_class" in n.attr:
                del n.attr["_class"]  # the placement decides, not tf.gradients' colocation
        else:
            loc = [x.decode().removeprefix("loc:@") for x in n.attr["_class"].list.s] \
                if "_class" in n.attr else []
            srcs = loc + [i.lstrip("^").split(":")[0] for i in n.input]
            n.device = next((nodes[x].device for x in srcs if x in nodes and nodes[x].device),
                            default_device)
        if n.op == "VarHandleOp":
            n.attr["container"].s = container.encode()
    return gdef


def relative_speeds(speed: Sequence[float]) -> np.ndarray:
    """Each device's speed over the fastest one's (the fastest runs at the host's speed).

    Parameters
    ----------
    speed : sequence of float
        Operations per time unit of every device (a thesis device file's ``#operations``).

    Returns
    -------
    numpy.ndarray
        In (0, 1], 1 for the fastest device.

    Raises
    ------
    PlacementError
        If a speed is not a positive number.

    References
    ----------
    Laich 2017, Sec. 2.2 (a device's speed: operations per time unit; time = operations /
    speed).

    Examples
    --------
    >>> relative_speeds([80, 40, 20]).tolist()
    [1.0, 0.5, 0.25]
    """
    s = np.asarray(speed, dtype=float)
    if len(s) == 0:
        raise PlacementError("no devices")
    for i, x in enumerate(s):
        if not (math.isfinite(x) and x > 0):
            raise PlacementError(f"device {i} has speed {x:g}: a speed must be positive")
    return s / s.max()


def slowdowns(names: Sequence[str], duration_s: Sequence[float], placement: np.ndarray,
              speed: np.ndarray, min_us: float) -> dict[str, float]:
    """The busy-wait factor of every op the live job slows down (module docstring).

    Parameters
    ----------
    names : sequence of str
        The traced ops, in the problem's node order.
    duration_s : sequence of float
        Their traced times in seconds.
    placement : numpy.ndarray
        The device index of every node.
    speed : numpy.ndarray
        Relative speed of every device (:func:`relative_speeds`).
    min_us : float
        Ops traced shorter than this (microseconds) run at host speed.

    Returns
    -------
    dict of str to float
        ``op -> 1/r - 1`` for every op of time ``>= min_us`` on a device of relative speed
        ``r < 1``: after the op, a busy-wait of that many times the op's own duration.

    References
    ----------
    Laich 2017, Sec. 2.2 (time of a node on a device = operations / speed).

    Examples
    --------
    >>> slowdowns(["a", "b", "c"], [1e-3, 1e-3, 1e-6], np.array([0, 1, 1]),
    ...           np.array([1.0, 0.25]), 100.0)
    {'b': 3.0}
    """
    out = {}
    for name, t, d in zip(names, duration_s, placement, strict=True):
        r = float(speed[int(d)])
        if r < 1.0 and t * 1e6 >= min_us:
            out[name] = 1.0 / r - 1.0
    return out
