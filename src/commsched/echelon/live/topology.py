"""The emulated two-rack cluster of EchelonFlow live, and its model for the scheduler.

Built from the primitives of :mod:`commsched.cluster` (namespaces, veth, bridges,
``tbf``, run state, processes by PID)::

    cs-<run>-bra : bridge br0 (rack 0) -- veth "core" --  cs-<run>-brb : bridge br0 (rack 1)
    cs-<run>-h<i>: one per job host, eth0 on its rack's bridge, tbf at the host rate
    cs-<run>-ctl : the controller (rack 0)

Both ends of every host link carry ``tbf`` at ``host_rate``; the core veth carries the
controller's ``htb`` tree (:mod:`commsched.echelon.live.tc`) at ``core_rate`` in each
direction: an oversubscribed core whenever the racks' hosts together can send more. Run
ids start with ``ecl``, so every name is ``cs-ecl...`` and ``commsched cluster status
--clean`` finds what a killed run left. The state file (namespaces, processes) is
written before anything is created; :func:`live_cluster` always tears down (exit, error,
Ctrl-C, SIGTERM, SIGHUP, its time limit).

:func:`network` is the same cluster as a :class:`commsched.sim.flow.Network` (host
egress and ingress ports, one core link per direction), which the controller's policies
and the simulator's predictions share.
"""

from __future__ import annotations

import secrets
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from commsched.cluster import net
from commsched.cluster.emulated import down, up_inside
from commsched.cluster.procs import self_owner, spawn
from commsched.cluster.state import RunState, run_base
from commsched.echelon.live.tc import HtbLink
from commsched.errors import CommschedError
from commsched.sim.flow import Network

__all__ = ["CORE_DEV", "LiveCluster", "Topology", "live_cluster", "network"]

#: Name of the core veth in both bridge namespaces.
CORE_DEV = "core"


@dataclass(frozen=True)
class Topology:
    """``racks[h]``: the rack (0 or 1) of job host ``h``; link rates as tc rates."""

    racks: tuple[int, ...]
    host_rate: str = "400mbit"
    core_rate: str = "100mbit"
    burst: str = "256kb"
    latency: str = "20ms"

    def __post_init__(self) -> None:
        if not self.racks or any(r not in (0, 1) for r in self.racks):
            raise CommschedError("topology: racks must be a non-empty list of 0 and 1")
        net.parse_rate(self.host_rate)
        net.parse_rate(self.core_rate)

    @property
    def host_Bps(self) -> float:
        return net.parse_rate(self.host_rate)

    @property
    def core_Bps(self) -> float:
        return net.parse_rate(self.core_rate)


def network(racks: Sequence[int], host_Bps: float, core_Bps: float) -> Network:
    """Hosts ``0..H-1`` with egress (link ``h``) and ingress (``H + h``) ports of
    ``host_Bps``; a flow between racks also crosses the core link of its direction
    (``2H`` from rack 0, ``2H + 1`` from rack 1) of ``core_Bps``.

    Parameters
    ----------
    racks : sequence of int
        ``racks[h]``: the rack (0 or 1) of host ``h``.
    host_Bps, core_Bps : float
        Link rates, bytes/s.

    Returns
    -------
    Network
        ``2H + 2`` links; routes of up to three links (-1 pads).

    Examples
    --------
    >>> n = network([0, 1, 0], 10.0, 1.0)
    >>> n.routes[0, 1].tolist(), n.routes[0, 2].tolist(), n.link_names[6:]
    ([0, 6, 4], [0, 5, -1], ('core0', 'core1'))
    """
    H = len(racks)
    cap = np.concatenate([np.full(2 * H, float(host_Bps)), np.full(2, float(core_Bps))])
    routes = np.full((H, H, 3), -1, dtype=np.int64)
    for s in range(H):
        for d in range(H):
            routes[s, d, 0] = s
            if racks[s] == racks[d]:
                routes[s, d, 1] = H + d
            else:
                routes[s, d, 1], routes[s, d, 2] = 2 * H + racks[s], H + d
    names = (tuple(f"egress{i}" for i in range(H)) + tuple(f"ingress{i}" for i in range(H))
             + ("core0", "core1"))
    return Network(cap, routes, names)


class LiveCluster:
    """The namespaces of one run (module docstring)."""

    def __init__(self, topo: Topology, run_id: str | None = None) -> None:
        self.topo = topo
        self.run_id = run_id or f"ecl{secrets.token_hex(3)}"
        self.hosts = [f"h{i}" for i in range(len(topo.racks))] + ["ctl"]
        _, self.links = net.names(self.run_id, self.hosts)
        pre = f"{net.NS_PREFIX}{self.run_id}-"
        self.bridges = (pre + "bra", pre + "brb")
        self.state = RunState(self.run_id, run_base() / self.run_id, self_owner())
        self.core = [HtbLink(self.bridges[r], CORE_DEV, topo.core_Bps, range(1, 64))
                     for r in (0, 1)]

    def address(self, host: int | str) -> str:
        """The IPv4 address of a host.

        Parameters
        ----------
        host : int or str
            A job host's number or a name (``"ctl"``).

        Returns
        -------
        str
        """
        return self.links[self.hosts.index(host if isinstance(host, str) else f"h{host}")].address

    def namespace(self, host: int | str) -> str:
        """The network namespace a host's processes run in.

        Parameters
        ----------
        host : int or str
            As for :meth:`address`.

        Returns
        -------
        str
        """
        return self.links[self.hosts.index(host if isinstance(host, str) else f"h{host}")
                          ].namespace

    def up(self) -> None:
        """Create everything (or raise with the reason, e.g. no htb/u32)."""
        reason = net.check_htb()
        if reason:
            raise CommschedError(f"EchelonFlow live cluster unavailable: {reason}")
        t = self.topo
        self.state.namespaces = list(self.bridges) + [lk.namespace for lk in self.links]
        self.state.info = {"topology": {"racks": list(t.racks), "host_rate": t.host_rate,
                                        "core_rate": t.core_rate}}
        self.state.dir.mkdir(parents=True, exist_ok=True)
        self.state.save()
        for br in self.bridges:
            net.create_bridge(br)
        for i, lk in enumerate(self.links):
            rack = t.racks[i] if i < len(t.racks) else 0
            net.add_host(self.bridges[rack], lk)
            net.shape(lk.namespace, lk.host_dev, t.host_rate, t.burst, t.latency)
            net.shape(self.bridges[rack], lk.bridge_dev, t.host_rate, t.burst, t.latency)
        a, b = self.bridges
        net.run(["ip", "-n", a, "link", "add", CORE_DEV, "type", "veth", "peer", "name",
                 CORE_DEV, "netns", b])
        for br in self.bridges:
            net.run(["ip", "-n", br, "link", "set", CORE_DEV, "master", net.BRIDGE])
            net.run(["ip", "-n", br, "link", "set", CORE_DEV, "up"])
        for link in self.core:
            link.setup("none")
        self.state.status = "up"
        self.state.save()

    def spawn(self, host: int | str, role: str, argv: Sequence[str], log: str | Path,
              env: Mapping[str, str] | None = None) -> subprocess.Popen[bytes]:
        """Start a process in ``host``'s namespace, recorded for teardown.

        Parameters
        ----------
        host : int or str
            As for :meth:`address`.
        role : str
            Its name in the run state and messages.
        argv : sequence of str
            The command.
        log : str or Path
            Its stdout and stderr.
        env : mapping of str to str, optional
            Added to the environment.

        Returns
        -------
        subprocess.Popen
        """
        p, rec = spawn(argv, role, log, namespace=self.namespace(host), env=env)
        self.state.processes.append(rec)
        self.state.save()
        return p

    def down(self) -> None:
        """End every recorded process, delete every namespace (:func:`commsched.cluster.
        emulated.down`)."""
        for link in self.core:
            link.close()
        if self.state.path.exists():
            down(self.run_id)


@contextmanager
def live_cluster(topo: Topology, timeout: float | None = None) -> Iterator[LiveCluster]:
    """A :class:`LiveCluster` that is up inside the block and always torn down.

    Parameters
    ----------
    topo : Topology
        Racks and link rates.
    timeout : float, optional
        Seconds that bound the whole block (SIGALRM); default none.

    Yields
    ------
    LiveCluster
        Up; needs root.

    Raises
    ------
    CommschedError
        The cluster cannot be built (no htb/u32, a failed ``ip``/``tc`` command).
    ClusterInterrupted
        SIGTERM, SIGHUP, or the timeout.
    """
    with up_inside(LiveCluster(topo), timeout) as c:
        yield c
