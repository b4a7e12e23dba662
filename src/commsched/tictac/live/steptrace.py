"""Parse distributed FULL_TRACE step stats into per-transfer start and end times.

TensorFlow's distributed runtime records every ``RecvTensor`` RPC a device issued as a
node stat named ``RecvTensor`` whose timeline label reads, for example::

    [14.1MB] [662.317993Mb/s] edge_18_model/dense/Cast/ReadVariableOp from
    /job:ps/replica:0/task:0/device:CPU:0 to /job:worker/replica:0/task:0/device:CPU:0

(``all_start_micros`` is when the request was issued, ``op_end_rel_micros`` how long until
the value had arrived). The functions here take plain dictionaries so they can be tested
without TensorFlow; :func:`commsched.tictac.live.job` converts the protobufs.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["Transfer", "compute_busy", "compute_intervals", "parse_label", "transfers"]

#: Op types of one device's step stats that wait for the network rather than compute.
_COMM_OPS = frozenset({"_Recv", "_Send", "_HostRecv", "_HostSend", "RecvTensor"})
_OP_TYPE = re.compile(r"^\S+ = (?P<type>[\w]+)\(")

_LABEL = re.compile(
    r"^\[(?P<size>[^\]]*)\] \[(?P<rate>[^\]]*)\] edge_\d+_(?P<src>\S+) "
    r"from (?P<from>\S+) to (?P<to>\S+)"
)


@dataclass(frozen=True)
class Transfer:
    """One tensor transfer seen by the receiving device.

    Attributes
    ----------
    src_op : str
        The op whose output was sent.
    src_device, dst_device : str
        Sender and receiver.
    start, end : float
        When the request was issued and when the value had arrived, in seconds from the
        step's start.
    """

    src_op: str
    src_device: str
    dst_device: str
    start: float
    end: float


def parse_label(label: str) -> tuple[str, str, str] | None:
    """The source op and the devices of a RecvTensor timeline label.

    Parameters
    ----------
    label : str
        A node stat's ``timeline_label``.

    Returns
    -------
    tuple of (str, str, str) or None
        ``(source op, from device, to device)``; None when the label is not a
        RecvTensor's.

    Examples
    --------
    >>> parse_label("[64B] [0.005Mb/s] edge_8_m/d/ReadVariableOp from /job:ps/task:0 "
    ...             "to /job:worker/task:0")
    ('m/d/ReadVariableOp', '/job:ps/task:0', '/job:worker/task:0')
    """
    m = _LABEL.match(label)
    return (m.group("src"), m.group("from"), m.group("to")) if m else None


def transfers(node_stats: Iterable[Mapping[str, Any]], t0_us: int) -> list[Transfer]:
    """Every RecvTensor transfer of one device's step stats.

    Parameters
    ----------
    node_stats : iterable of mapping
        Dicts with ``node_name``, ``timeline_label``, ``all_start_micros`` and
        ``op_end_rel_micros``.
    t0_us : int
        The step's start, in the stats' microseconds.

    Returns
    -------
    list of Transfer
        Times relative to ``t0_us``, sorted by start.

    Examples
    --------
    >>> s = [{"node_name": "RecvTensor", "all_start_micros": 1_000_100,
    ...       "op_end_rel_micros": 500, "timeline_label":
    ...       "[1B] [1Mb/s] edge_3_a/Read from /job:ps/x to /job:worker/y"}]
    >>> transfers(s, 1_000_000)[0].end
    0.0006
    """
    out = []
    for n in node_stats:
        if n["node_name"] != "RecvTensor":
            continue
        parsed = parse_label(n["timeline_label"])
        if parsed is None:
            continue
        start = int(n["all_start_micros"]) - t0_us
        end = start + int(n["op_end_rel_micros"])
        out.append(Transfer(parsed[0], parsed[1], parsed[2], start / 1e6, end / 1e6))
    return sorted(out, key=lambda t: (t.start, t.src_op))


def _is_compute(n: Mapping[str, Any]) -> bool:
    if n["node_name"] == "RecvTensor":
        return False
    m = _OP_TYPE.match(n.get("timeline_label") or "")
    return not (m and m.group("type") in _COMM_OPS)


def compute_intervals(node_stats: Iterable[Mapping[str, Any]], t0_us: int
                      ) -> list[tuple[float, float]]:
    """The worker's executor timeline: every compute op's interval, gaps included.

    Parameters
    ----------
    node_stats : iterable of mapping
        One device's step stats (as :func:`transfers` takes them).
    t0_us : int
        The step's start, in the stats' microseconds.

    Returns
    -------
    list of tuple of (float, float)
        ``(start, end)`` in seconds from ``t0_us`` of the ops :func:`compute_busy`
        counts, sorted by start.

    Examples
    --------
    >>> s = [{"node_name": "a", "timeline_label": "a = Conv2D(x, w)", "all_start_micros": 30,
    ...       "op_end_rel_micros": 20},
    ...      {"node_name": "r", "timeline_label": "r = _Recv()", "all_start_micros": 0,
    ...       "op_end_rel_micros": 9}]
    >>> compute_intervals(s, 10)
    [(2e-05, 4e-05)]
    """
    out = [((int(n["all_start_micros"]) - t0_us) / 1e6,
            (int(n["all_start_micros"]) - t0_us + int(n["op_end_rel_micros"])) / 1e6)
           for n in node_stats if _is_compute(n)]
    return sorted(out)


def compute_busy(node_stats: Iterable[Mapping[str, Any]]) -> tuple[float, int]:
    """The summed run time of one device's compute ops in a traced step.

    ``RecvTensor`` entries and send/recv ops (whose time is spent waiting for the network)
    are left out. The op type is read from the timeline label (``name = Type(inputs)``);
    entries without one count as compute.

    Parameters
    ----------
    node_stats : iterable of mapping
        One device's step stats, with ``node_name``, ``timeline_label`` and
        ``op_end_rel_micros``.

    Returns
    -------
    seconds : float
        Their summed run time.
    ops : int
        Their number.

    Examples
    --------
    >>> s = [{"node_name": "a", "timeline_label": "a = Conv2D(x, w)", "op_end_rel_micros": 300},
    ...      {"node_name": "r", "timeline_label": "r = _Recv()", "op_end_rel_micros": 9000},
    ...      {"node_name": "RecvTensor", "timeline_label": "[1B] ...", "op_end_rel_micros": 5}]
    >>> compute_busy(s)
    (0.0003, 1)
    """
    busy = 0
    ops = 0
    for n in node_stats:
        if not _is_compute(n):
            continue
        busy += int(n["op_end_rel_micros"])
        ops += 1
    return busy / 1e6, ops
