"""Scheduler decisions as Linux traffic control: htb classes and u32 filters on flow tags.

On the controlled link (the oversubscribed core of the emulated cluster, one device per
direction) the root qdisc is ``htb``: class ``1:1`` holds the link rate; class ``1:2``
(the default) carries untagged traffic (acknowledgements, gloo's barriers, the
controller's own messages) at priority 0 with a small guaranteed rate; every flow tag
``t`` (DSCP, :mod:`commsched.echelon.live.transport`) has class ``1:(100 + t)`` and a
``u32`` filter ``match ip tos (t << 2) 0xfc`` that sends the tag's packets there. The
kernel has no ``prio``, ``fq`` or ``netem`` qdisc and no ``fw`` filter (FACTS), so
priorities are htb class priorities and flows are told apart by the TOS byte.

:class:`HtbLink` builds that tree (mode ``none``: only the default class, so every flow
shares one FIFO at the link rate, the kernel's own sharing under TCP; mode ``classes``:
the per-tag classes and filters), applies rate/ceil/prio changes in one exchange with a
running ``tc -batch`` (:class:`TcSession`) per update, and reads each class's byte
counter. :func:`enforce` maps a flow policy's
rates to classes: a flow with rate ``r > 0`` gets ``rate r`` (guaranteed), ``ceil`` the
link rate and ``prio 0``; a flow the policy gives nothing gets a floor rate (htb cannot
guarantee 0) and ``prio 7``: it only borrows what the prio-0 classes leave, htb's
approximation of strict priority. Idle tags keep the floor rate at ``prio 0``: a flow
the controller has not seen yet shares the excess with the flows it favours until its
first update (a flow of 64 kB needs about 10 ms at 50 Mbit/s, less than an update
takes on a loaded machine).

Where enforcement cannot follow the policy (measured in the live experiment): updates
arrive after the flow started (the sender's UDP event, the controller's policy call and
a round trip to a running ``tc -batch``); a flow the policy stops still sends at the floor rate; htb
shares the excess among prio-0 classes by quantum, not in the policy's rank order; and
packets already queued are not reordered.

:func:`commsched.cluster.net.check_htb` tells at start whether ``htb`` and ``u32`` exist
(a clear error where they do not). :class:`EnforcedPolicy` is the same back end as a flow
policy of the simulator (the controller's delay and htb's classes), so that the simulator predicts
what the live enforcement does rather than what the policy asks for.
"""

from __future__ import annotations

import contextlib
import os
import re
import select
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from commsched.cluster import net
from commsched.errors import CommschedError
from commsched.sim.flow import Policy, View, max_min

__all__ = ["FLOOR_SHARE", "GSO_BYTES", "EnforcedPolicy", "HtbLink", "TcSession", "classid",
           "enforce"]

#: Floor rate of a class the policy gives nothing, as a share of the link rate.
FLOOR_SHARE = 0.005
#: Share of the link guaranteed to untagged traffic (class 1:2).
DEFAULT_SHARE = 0.03
#: The largest packet the kernel hands a qdisc (``gso_max_size`` of the emulated
#: cluster's veth links, ``ip -d link``): what a class held at the floor sends, once
#: dequeued, while a favoured flow waits (:class:`EnforcedPolicy`).
GSO_BYTES = 65536
_BURST = "16k"  # htb burst: a few 1.5 kB packets (GSO segments up to 64 kB are charged)


def classid(tag: int) -> str:
    """The htb class of flow tag ``tag``.

    Parameters
    ----------
    tag : int
        A DSCP flow tag, 1-63.

    Returns
    -------
    str
        ``"1:<100 + tag>"``.

    Examples
    --------
    >>> classid(7)
    '1:107'
    """
    return f"1:{100 + tag}"


def _bits(rate_Bps: float) -> str:
    """A tc rate for a class, never under 8 kbit/s, so no class is given a zero rate."""
    return net.tc_bits(rate_Bps, floor_bit=8000)


_MARK = "eclmark0"  # a device that does not exist: its failure ends each exchange


class TcSession:
    """One long-running ``tc -s -n NAMESPACE -force -batch -`` process: each
    :meth:`run` writes its commands and reads the output up to a marker (the error
    lines of a ``show`` of a device that does not exist), so an update costs a pipe round trip
    instead of starting ``tc`` (tens of ms on a loaded machine). Raises on any error line
    (htb's quantum notices aside)."""

    def __init__(self, namespace: str, timeout: float = 20.0) -> None:
        self.namespace, self.timeout = namespace, timeout
        try:
            self._p = subprocess.Popen(
                ["stdbuf", "-oL", "-eL", "tc", "-s", "-n", namespace, "-force", "-batch", "-"],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                text=True)
            self._buf = b""
        except FileNotFoundError as e:
            raise CommschedError(f"{e.filename}: not found (install iproute2, coreutils)"
                                 ) from None

    def run(self, lines: Sequence[str]) -> list[str]:
        """Run ``tc`` batch commands and wait for their output.

        Parameters
        ----------
        lines : sequence of str
            Batch lines without the ``tc`` word (``class change dev ...``).

        Returns
        -------
        list of str
            Their output lines.

        Raises
        ------
        CommschedError
            An error line, no answer within ``timeout`` s, or ``tc`` exited.
        """
        p = self._p
        assert p.stdin is not None and p.stdout is not None
        try:
            p.stdin.write("".join(x + "\n" for x in lines) + f"class show dev {_MARK}\n")
            p.stdin.flush()
        except (BrokenPipeError, OSError):
            raise CommschedError(f"tc in {self.namespace} exited") from None
        out: list[str] = []
        fd = p.stdout.fileno()
        seen = False
        deadline = time.monotonic() + self.timeout
        while True:
            while b"\n" not in self._buf:
                if not select.select([fd], [], [], max(0.0, deadline - time.monotonic()))[0]:
                    raise CommschedError(f"tc in {self.namespace}: no answer within "
                                         f"{self.timeout:g} s")
                chunk = os.read(fd, 65536)
                if not chunk:
                    raise CommschedError(f"tc in {self.namespace} exited")
                self._buf += chunk
            raw, _, self._buf = self._buf.partition(b"\n")
            line = raw.decode(errors="replace")
            if _MARK in line:
                seen = True
            elif seen and line.startswith("Command failed"):
                break  # the marker's own failure: the end of this exchange
            else:
                out.append(line)
        err = [x.strip() for x in out if x.startswith(("Error", "RTNETLINK", "Command failed",
                                                       "Unknown", "Illegal", "Cannot"))]
        if err:
            raise CommschedError(f"tc in {self.namespace}: {err[-1]}")
        return out

    def close(self) -> None:
        p = self._p
        if p.poll() is None:
            with contextlib.suppress(OSError):
                assert p.stdin is not None
                p.stdin.close()
            try:
                p.wait(timeout=5.0)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


@dataclass
class HtbLink:
    """One direction of the controlled link: device ``dev`` in ``namespace`` at
    ``rate`` bytes/s, with classes for ``tags`` (module docstring)."""

    namespace: str
    dev: str
    rate: float
    tags: Sequence[int]
    applied: dict[int, tuple[str, int]] = field(default_factory=dict)
    _tc: TcSession | None = field(default=None, repr=False)

    @property
    def tc(self) -> TcSession:
        if self._tc is None:
            self._tc = TcSession(self.namespace)
        return self._tc

    def setup(self, mode: str) -> None:
        """(Re)build the tree: ``none`` (default class only) or ``classes``.

        Parameters
        ----------
        mode : {"none", "classes"}
            ``classes`` adds a class and a u32 filter per tag, at the floor rate.

        Raises
        ------
        CommschedError
            Another mode, or a tc error.
        """
        if mode not in ("none", "classes"):
            raise CommschedError(f"htb mode {mode!r}: none or classes")
        self.remove()
        full = _bits(self.rate)
        floor = _bits(self.rate * FLOOR_SHARE)
        b = f"burst {_BURST} cburst {_BURST}"
        lines = [f"qdisc add dev {self.dev} root handle 1: htb default 2",
                 f"class add dev {self.dev} parent 1: classid 1:1 htb rate {full} "
                 f"ceil {full} {b}"]
        if mode == "none":
            lines.append(f"class add dev {self.dev} parent 1:1 classid 1:2 htb rate {full} "
                         f"ceil {full} prio 0 {b}")
        else:
            lines.append(f"class add dev {self.dev} parent 1:1 classid 1:2 htb "
                         f"rate {_bits(self.rate * DEFAULT_SHARE)} ceil {full} prio 0 {b}")
            for t in self.tags:
                lines.append(f"class add dev {self.dev} parent 1:1 classid {classid(t)} htb "
                             f"rate {floor} ceil {full} prio 0 quantum 1514 {b}")
                lines.append(f"filter add dev {self.dev} parent 1: protocol ip prio 1 u32 "
                             f"match ip tos {t << 2:#04x} 0xfc flowid {classid(t)}")
        self.tc.run(lines)
        self.applied = {t: (floor, 0) for t in self.tags} if mode == "classes" else {}

    def update(self, classes: Mapping[int, tuple[float, int]]) -> int:
        """Set ``tag -> (rate B/s, prio)``; tags not named (idle) go back to the floor
        rate at prio 0. One ``tc -batch``; returns the number of classes changed.

        Parameters
        ----------
        classes : mapping of int to (float, int)
            Per tag, the guaranteed rate (bytes/s; raised to the floor) and htb prio.

        Returns
        -------
        int
            Classes whose rate or prio changed (0: nothing sent to tc but the marker).

        Raises
        ------
        CommschedError
            A tc error.
        """
        full = _bits(self.rate)
        floor = self.rate * FLOOR_SHARE
        lines = []
        for t in self.tags:
            rate, prio = classes.get(t, (floor, 0))
            want = (_bits(max(rate, floor)), int(prio))
            if self.applied.get(t) != want:
                lines.append(f"class change dev {self.dev} parent 1:1 classid {classid(t)} "
                             f"htb rate {want[0]} ceil {full} prio {want[1]} quantum 1514 "
                             f"burst {_BURST} cburst {_BURST}")
                self.applied[t] = want
        self.tc.run(lines)
        return len(lines)

    def counters(self) -> dict[int, int]:
        """Bytes sent so far by each tag's class."""
        out = "\n".join(self.tc.run([f"class show dev {self.dev}"]))
        res: dict[int, int] = {}
        for m in re.finditer(r"class htb 1:(\d+) .*?\n\s*Sent (\d+) bytes", out):
            cid = int(m.group(1))
            if cid > 100:
                res[cid - 100] = int(m.group(2))
        return res

    def remove(self) -> None:
        """Delete the tree (none there is not an error)."""
        net.run(["tc", "-n", self.namespace, "qdisc", "del", "dev", self.dev, "root"],
                check=False)

    def close(self) -> None:
        """End the tc session."""
        if self._tc is not None:
            self._tc.close()
            self._tc = None


def enforce(rates: Mapping[int, float], capacity: float) -> dict[int, tuple[float, int]]:
    """htb ``(rate, prio)`` per tag from a policy's rates (B/s) on a link of
    ``capacity`` (module docstring): positive rates scaled to fit what the default class
    leaves, ``prio 0``; zero rates at the floor, ``prio 7``.

    Parameters
    ----------
    rates : mapping of int to float
        Per active tag, the rate the policy gives it, bytes/s (>= 0); a rate at or below
        the floor (:data:`FLOOR_SHARE` of ``capacity``) counts as zero.
    capacity : float
        The link's rate, bytes/s (> 0).

    Returns
    -------
    dict of int to (float, int)
        Per tag, the class's guaranteed rate (bytes/s) and htb priority (0 or 7).

    Examples
    --------
    >>> enforce({1: 60.0, 2: 40.0, 3: 0.0}, 100.0)
    {1: (57.9, 0), 2: (38.6, 0), 3: (0.5, 7)}
    """
    floor = capacity * FLOOR_SHARE
    pos = {t: r for t, r in rates.items() if r > floor}
    room = capacity * (1 - DEFAULT_SHARE) - floor * (len(rates) - len(pos))
    total = sum(pos.values())
    scale = min(1.0, room / total) if total > 0 else 1.0
    return {t: ((round(pos[t] * scale, 9), 0) if t in pos else (floor, 7)) for t in rates}


class EnforcedPolicy:
    """A flow policy as the live controller enforces it on the core links: the
    simulator's model of this back end (:mod:`commsched.echelon.live.controller`).

    * **Delay.** The policy is asked only when the set of active flows changes (the
      controller acts on the senders' start and finish events) and its decision is in
      force ``delay`` s later (the measured update latency: event, policy call, ``tc``);
      until then the decision before stays in force.
    * **htb classes.** On each core link the decision in force becomes classes as
      :func:`enforce` makes them (guaranteed rate, prio 0; nothing: the floor, prio 7),
      a flow that decision does not know yet keeps its idle class (floor, prio 0).
      Every class has the link rate as ceil, so what the guarantees leave is shared
      equally (equal quanta) among the prio-0 classes, or, without any, among the
      prio-7 classes (htb borrows in priority order; a fluid flow is always backlogged).
    * **Message boundaries.** With ``message_bytes`` (per group, the ``group`` meta
      column) and ``leak_bytes``: a favoured flow's queue runs empty after each of its
      messages (the sender waits for the acknowledgement), and a backlogged class held
      at the floor then sends a packet that the favoured flow waits behind; so of every
      ``m + leak_bytes`` bytes on the link, ``m`` (one message) are the favoured flow's
      and ``leak_bytes`` are shared by the held flows.
    * Flows that do not cross the core are not shaped: they get a max-min share of what
      the core flows leave on their host links.

    Parameters
    ----------
    policy : Policy
        The scheduler (the same object the controller calls).
    delay : float
        Update latency (s), >= 0.
    core_links : sequence of int
        The link ids the controller shapes.
    message_bytes : ndarray of float, optional
        Bytes of one message, per group (the ``group`` meta column's values).
    leak_bytes : float
        Bytes a held class sends at each message boundary of a favoured flow (0: none).

    Examples
    --------
    Strict priority (the first flow gets the whole link) on one 100 B/s link, decisions
    in force 0.5 s late: a second flow arriving at t = 1 shares the excess over the
    first flow's guarantee until the decision that stops it is in force (then it keeps
    the floor rate), and gets the link at once when the first one ends (htb lends it).

    >>> from commsched.sim.flow import big_switch, simulate
    >>> first = lambda v: np.where(np.arange(len(v.active)) == 0, 100.0, 0.0)
    >>> net = big_switch(2, 1000.0)
    >>> net.capacity[:] = [1000.0, 1000.0, 100.0, 100.0]
    >>> r = simulate(net, [0, 0], [1, 1], [300.0, 50.0], [0.0, 1.0],
    ...              EnforcedPolicy(first, 0.5, [2, 3]))
    >>> r.finish.round(3).tolist()
    [3.016, 3.5]
    """

    def __init__(self, policy: Policy, delay: float, core_links: Sequence[int],
                 message_bytes: np.ndarray | None = None, leak_bytes: float = 0.0) -> None:
        if delay < 0 or leak_bytes < 0:
            raise CommschedError(f"update delay {delay} and leak bytes {leak_bytes} must "
                                 "be >= 0")
        self.policy, self.delay = policy, float(delay)
        self.message_bytes, self.leak = message_bytes, float(leak_bytes)
        self.core = np.asarray(core_links, dtype=np.int64)
        self.in_force: dict[int, float] = {}
        self.pending: list[tuple[float, dict[int, float]]] = []
        self.seen: frozenset[int] = frozenset()

    def __call__(self, view: View) -> np.ndarray:
        act = [int(i) for i in view.active]
        if frozenset(act) != self.seen:  # a start or finish event: a new decision
            self.seen = frozenset(act)
            dec = dict(zip(act, np.asarray(self.policy(view), dtype=float).tolist(),
                           strict=True))
            if self.delay > 0:
                self.pending.append((view.now + self.delay, dec))
                view.sim.wake_at(view.now + self.delay)
            else:
                self.in_force = dec
        while self.pending and self.pending[0][0] <= view.now + 1e-12:
            self.in_force = self.pending.pop(0)[1]
        links = np.asarray(view.links)
        cap = np.asarray(view.net.capacity, dtype=float)
        rate = np.zeros(len(act))
        left = cap.copy()
        on_core = np.isin(links, self.core)
        for c in self.core:
            mine = [int(k) for k in np.flatnonzero((links == c).any(axis=1))]
            if not mine:
                continue
            known = {k: self.in_force[act[k]] for k in mine if act[k] in self.in_force}
            cls = enforce(known, float(cap[c]))
            floor = cap[c] * FLOOR_SHARE
            guar = np.array([cls[k][0] if k in cls else floor for k in mine])
            prio = np.array([cls[k][1] if k in cls else 0 for k in mine])
            excess = max(cap[c] - guar.sum(), 0.0)
            top = prio == prio.min()
            r = guar + np.where(top, excess / top.sum(), 0.0)
            low = guar <= floor * (1 + 1e-9)  # held at the floor or not seen yet
            if self.leak and self.message_bytes is not None and low.any() and (~low).any():
                m = self.message_bytes[view.sim.meta["group"][view.active[mine]]]
                give = np.where(low, 0.0, r * self.leak / (m + self.leak))
                r = r - give + np.where(low, give.sum() / low.sum(), 0.0)
            rate[mine] = r
        core_flows = on_core.any(axis=1)
        for k in np.flatnonzero(core_flows):  # what the core flows take from host links
            for ln in links[k][links[k] >= 0]:
                if ln not in self.core:
                    left[ln] -= rate[k]
        local = np.flatnonzero(~core_flows)
        if len(local):
            rate[local] = max_min(links[local], np.maximum(left, 0.0))
        return rate
