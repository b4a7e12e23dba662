"""The controller of EchelonFlow live: one flow scheduler, enforced with htb on the core.

``python -m commsched.echelon.live.controller CONFIG.json`` runs in the controller's
namespace of the emulated cluster (:mod:`commsched.echelon.live.topology`). It hosts the
phase barrier (a :class:`torch.distributed.TCPStore`: every job process adds itself to
``ready/<p>`` and waits for ``go/<p>``) and, for each phase, enforces one policy:

* ``none``: no control; the core's htb tree has only its default class (one FIFO at the
  link rate: the kernel's own sharing between TCP flows);
* any name of :data:`commsched.echelon.schedulers.FLOW_SCHEDULERS` (``fair`` = per-flow max-min
  fairness, ``sebf`` = Varys, ``echelon-*`` and ``eiff`` = the EchelonFlow readings):
  the same policy object the simulator calls. The controller keeps the phase's flows in
  a :class:`commsched.sim.flow.FlowSim` used as a table (sizes, releases, finishes, the
  meta columns ``group``, ``ideal``, ``index``, ``job`` the policies read); on every
  batch of flow events (the senders' UDP datagrams,
  :mod:`commsched.echelon.live.transport`) it estimates each active flow's remaining
  bytes (core flows: its tag's htb byte counter since it started, read every 50 ms by
  a thread of its own; others: the rates it was given), calls the policy on a
  :class:`~commsched.sim.flow.View` of the active flows on
  :func:`~commsched.echelon.live.topology.network`, and turns the rates of the flows that
  cross the core into htb classes (:func:`commsched.echelon.live.tc.enforce`).

An EchelonFlow's reference time is the start of its first flow the controller sees (as
in the simulator: the release of its first flow); a flow's ideal finish is that plus
its offset. Every event is logged with the sender's time, the controller's receive time
and the time its update was in force (the update latency), and every update with the
policy's and tc's time. The controller exits when every process has finished the last
phase, on SIGTERM, when its owner process is gone, or at ``timeout`` per phase; it
writes ``out`` (JSON) on the way out.
"""

from __future__ import annotations

import datetime as _dt
import json
import select
import signal
import socket
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch.distributed as dist

from commsched.atomic import atomic_write_text
from commsched.cluster.procs import config_main, owner_alive
from commsched.echelon.live.tc import HtbLink, enforce
from commsched.echelon.live.topology import CORE_DEV, network
from commsched.echelon.schedulers import FLOW_SCHEDULERS
from commsched.errors import CommschedError
from commsched.sim.flow import FlowSim, Network, Policy, View

__all__ = ["POLICIES", "ControllerConfig", "PhaseState", "main"]

#: Policies a phase can enforce: no control, or a simulator flow scheduler.
POLICIES = ("none", *FLOW_SCHEDULERS)


@dataclass
class ControllerConfig:
    """See the module docstring. ``bridges[r]``: the namespace of rack ``r``'s end of
    the core; ``racks``: the rack of each job host; rates in bytes/s."""

    racks: list[int]
    host_Bps: float
    core_Bps: float
    bridges: list[str]
    phases: list[str]
    n_workers: int
    udp_port: int
    store_port: int
    out: str
    timeout: float = 300.0
    owner: str | None = None

    def __post_init__(self) -> None:
        bad = [p for p in self.phases if p not in POLICIES]
        if bad:
            raise CommschedError(f"controller: unknown policy {bad[0]!r}; known: "
                                 f"{', '.join(POLICIES)}")
        if self.core_Bps <= 0 or self.host_Bps <= 0:
            raise CommschedError("controller: link rates must be positive")


@dataclass
class PhaseState:
    """The flows of one phase and the policy's view of them (module docstring)."""

    net: Network
    policy: Policy | None
    racks: list[int]
    go: float
    sim: FlowSim = field(init=False)
    ids: dict[str, int] = field(default_factory=dict)
    groups: dict[str, tuple[int, float]] = field(default_factory=dict)
    jobs: dict[str, int] = field(default_factory=dict)
    active: list[int] = field(default_factory=list)
    tag: dict[int, tuple[int, int]] = field(default_factory=dict)  # flow -> (core, tag)
    sent: dict[int, float] = field(default_factory=dict)
    rate: dict[int, float] = field(default_factory=dict)
    counters: list[dict[int, int]] = field(default_factory=lambda: [{}, {}])
    last: float = 0.0

    def __post_init__(self) -> None:
        self.sim = FlowSim(self.net, self.policy or (lambda v: np.zeros(len(v.active))))

    def event(self, m: dict[str, Any]) -> None:
        """Apply one sender event (``e``: ``s`` start, ``f`` finish).

        A start adds the flow (its group's reference time is the group's first start);
        a finish of an unknown flow is ignored.

        Parameters
        ----------
        m : dict
            The decoded datagram: ``e``, ``id``, ``t`` (epoch s) and, for a start,
            ``group``, ``job``, ``src``, ``dst``, ``size`` (bytes), ``offset`` (s),
            ``index``, ``tag``.
        """
        t = max(float(m["t"]) - self.go, 0.0)
        if m["e"] == "s":
            gid, ref = self.groups.setdefault(m["group"], (len(self.groups), t))
            jid = self.jobs.setdefault(m["job"], len(self.jobs))
            src, dst = int(m["src"]), int(m["dst"])
            i = int(self.sim.add([src], [dst], [float(m["size"])], [t], group=[gid],
                                 ideal=[ref + float(m["offset"])], index=[int(m["index"])],
                                 job=[jid])[0])
            self.ids[m["id"]] = i
            self.active.append(i)
            self.sent[i] = 0.0
            if self.racks[src] != self.racks[dst]:
                self.tag[i] = (self.racks[src], int(m["tag"]))
        elif m["e"] == "f" and m["id"] in self.ids:
            i = self.ids[m["id"]]
            self.sim.finish[i] = max(t, float(self.sim.release[i]))
            if i in self.active:
                self.active.remove(i)
            self.tag.pop(i, None)

    def decide(self, now: float, counters: Sequence[dict[int, int]]
               ) -> list[dict[int, tuple[float, int]]]:
        """The policy's htb classes per core direction (``tag -> (rate, prio)``).

        Parameters
        ----------
        now : float
            Epoch seconds.
        counters : sequence of dict of int to int
            Per core direction, each tag's htb byte counter; the growth since the last
            call counts as the flow's bytes sent.

        Returns
        -------
        list of dict
            Two dicts (rack 0 -> 1, rack 1 -> 0) of
            :func:`commsched.echelon.live.tc.enforce` classes; empty without a policy
            or active flows.

        References
        ----------
        .. [1] Pan et al., "EchelonFlow", HotNets 2022, Sec. 3.2 (ideal finish times).
        """
        t = now - self.go
        by_tag = {v: i for i, v in self.tag.items()}
        for core, cnt in enumerate(counters):
            for tg, c in cnt.items():
                i = by_tag.get((core, tg))
                if i is not None:
                    self.sent[i] += max(c - self.counters[core].get(tg, c), 0)
        for i in self.active:
            if i not in self.tag:
                self.sent[i] += self.rate.get(i, 0.0) * max(t - self.last, 0.0)
        self.counters = [dict(c) for c in counters]
        self.last = t
        out: list[dict[int, tuple[float, int]]] = [{}, {}]
        if not self.active or self.policy is None:
            return out
        a = np.array(self.active, dtype=np.int64)
        size = self.sim.size[a]
        rem = np.maximum(size - np.array([self.sent[i] for i in self.active]), 1e-3 * size)
        self.sim.remaining[a] = rem  # the flow table's remaining bytes: what htb counted
        view = View(t, a, self.net.routes[self.sim.src[a], self.sim.dst[a]], self.net, self.sim)
        rates = np.asarray(self.policy(view), dtype=float)
        self.rate = dict(zip(self.active, rates.tolist(), strict=True))
        for core in (0, 1):
            mine = {tg: self.rate[i] for i, (c, tg) in self.tag.items() if c == core}
            out[core] = enforce(mine, float(self.net.capacity[-2 + core]))
        return out


def _events(sock: socket.socket, wait: float) -> list[tuple[float, dict[str, Any]]]:
    out = []
    r, _, _ = select.select([sock], [], [], wait)
    while r:
        data = sock.recv(65536)
        out.append((time.time(), json.loads(data)))
        r, _, _ = select.select([sock], [], [], 0)
    return out


class _Counters:
    """Reads every core class's byte counter in a thread of its own (its own ``tc``
    sessions; a read of 65 classes takes tens of ms on a loaded machine), so a decision
    uses the latest reading instead of waiting for one."""

    def __init__(self, bridges: Sequence[str], rate: float, interval: float = 0.05) -> None:
        self.links = [HtbLink(ns, CORE_DEV, rate, range(1, 64)) for ns in bridges]
        self.latest: list[dict[int, int]] = [{} for _ in bridges]
        self.error: str | None = None
        self._stop = threading.Event()
        self._interval = interval
        self._thread = threading.Thread(target=self._run, name="counters", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.latest = [link.counters() for link in self.links]
            except CommschedError as e:  # between phases the tree is rebuilt: retry
                self.error = str(e)
            self._stop.wait(self._interval)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5.0)
        for link in self.links:
            link.close()


def run(cfg: ControllerConfig) -> dict[str, Any]:
    """Serve every phase (module docstring); returns the log written to ``cfg.out``.

    Parameters
    ----------
    cfg : ControllerConfig
        Racks, rates (bytes/s), the bridges' namespaces, phases, ports, ``timeout`` (s per
        phase), ``owner`` and ``out``; needs root (htb on the core veths).

    Returns
    -------
    dict
        ``config`` and, per phase, ``policy``, ``go`` and ``end`` (epoch s), ``events``
        (kind, flow id, sender time, receive time, time in force) and ``updates`` (start
        after ``go``; seconds reading counters, in the policy, in tc; active flows; classes
        changed).

    Raises
    ------
    CommschedError
        Not every process reaches a phase or finishes it within ``timeout``, the owner
        process is gone, or a tc command fails; the log so far is written first.
    """
    net_ = network(cfg.racks, cfg.host_Bps, cfg.core_Bps)
    cores = [HtbLink(ns, CORE_DEV, cfg.core_Bps, range(1, 64)) for ns in cfg.bridges]
    store = dist.TCPStore("0.0.0.0", cfg.store_port, is_master=True,
                          timeout=_dt.timedelta(seconds=cfg.timeout), wait_for_workers=False)
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("0.0.0.0", cfg.udp_port))
    counters = _Counters(cfg.bridges, cfg.core_Bps)
    log: dict[str, Any] = {"config": cfg.__dict__, "phases": []}

    def count(p: int) -> int:
        return int(store.add(f"ready/{p}", 0))

    def wait_ready(p: int) -> None:
        deadline = time.monotonic() + cfg.timeout
        while count(p) < cfg.n_workers:
            if not owner_alive(cfg.owner):
                raise CommschedError("the controller's owner is gone")
            if time.monotonic() > deadline:
                raise CommschedError(f"only {count(p)} of {cfg.n_workers} processes reached "
                                     f"phase {p} within {cfg.timeout:g} s")
            _events(sock, 0.05)  # drop stragglers of the phase before
    try:
        for p, name in enumerate(cfg.phases):
            wait_ready(p)
            for c in cores:
                c.setup("none" if name == "none" else "classes")
            policy = None if name == "none" else FLOW_SCHEDULERS[name]()
            go = time.time()
            st = PhaseState(net_, policy, cfg.racks, go)
            events: list[list[Any]] = []
            updates: list[list[float]] = []
            store.set(f"go/{p}", repr(go))
            deadline = time.monotonic() + cfg.timeout
            next_check = 0.0
            while True:
                if time.monotonic() > next_check:
                    if count(p + 1) >= cfg.n_workers:
                        break
                    if time.monotonic() > deadline or not owner_alive(cfg.owner):
                        raise CommschedError(f"phase {p} ({name}) not over within "
                                             f"{cfg.timeout:g} s")
                    next_check = time.monotonic() + 0.1
                batch = _events(sock, 0.05)
                if not batch:
                    continue
                for _, m in batch:
                    st.event(m)
                t0 = time.time()
                n = 0
                if policy is not None:
                    cnt = counters.latest
                    t1 = time.time()
                    classes = st.decide(t1, cnt)
                    t2 = time.time()
                    n = sum(c.update(k) for c, k in zip(cores, classes, strict=True))
                else:
                    t1 = t2 = t0
                t3 = time.time()
                updates.append([t0 - go, t1 - t0, t2 - t1, t3 - t2, len(st.active), n])
                events += [[m["e"], m["id"], float(m["t"]), recv, t3] for recv, m in batch]
            log["phases"].append({"phase": p, "policy": name, "go": go, "events": events,
                                  "updates": updates, "end": time.time()})
            atomic_write_text(cfg.out, json.dumps(log) + "\n")
    finally:
        atomic_write_text(cfg.out, json.dumps(log) + "\n")
        sock.close()
        counters.close()
        for c in cores:
            c.close()
    return log


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m commsched.echelon.live.controller CONFIG.json`` (one-line errors).

    Parameters
    ----------
    argv : sequence of str, optional
        The config file, alone; default ``sys.argv[1:]``.

    Returns
    -------
    int
        As :func:`commsched.cluster.procs.config_main`; SIGTERM exits 143.
    """
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    return config_main(argv, "commsched.echelon.live.controller", "echelon live controller",
                       lambda data: run(ControllerConfig(**data)))


if __name__ == "__main__":
    sys.exit(main())

