"""Emulated network: namespaces, veth links, a bridge and ``tc`` shaping (iproute2).

Topology of one emulated cluster with run id ``R`` (see :func:`names`)::

    namespace cs-R-br : bridge "br0", one veth end "v-<host>" per host, each shaped
    namespace cs-R-<host> : "lo" and veth end "eth0" (address 10.77.x.y/16), shaped

Every link is created directly inside the namespaces the run owns (``ip -n NS link add
... peer ... netns NS2``), so nothing is ever created in, attached to, or routed through
the root namespace: the servers' addresses are reachable only from inside the run's
namespaces. Both ends of every host link carry a token bucket (``tbf``) with the configured
rate, so each host has a full-duplex port of that bandwidth on an ideal switch (TicTac's
testbed: 1 GbE hosts on one switch). Deleting a namespace destroys the veth ends in it and
their peers, which is how teardown removes links.

Links of different rates per host pair (the thesis' device model, :func:`shape_peers`):
a host's ``eth0`` carries an ``htb`` root instead, one class per peer at that pair's rate
(``rate`` = ``ceil``, so a class never borrows: each directed pair is a link of its own)
chosen by a ``u32`` filter on the destination address, and a default class for everything
else (ARP, traffic to addresses outside the run); :func:`peer_shaping` reads that state
back from ``tc``. The kernel here has ``htb`` and ``tbf`` and the ``u32`` classifier only
(no ``prio``, ``fq``, ``netem``, no ``fw`` filter); :func:`check_htb` says whether the
first two exist.

All commands run with a timeout and raise :class:`commsched.errors.CommschedError` with
the command and its stderr on failure.
"""

from __future__ import annotations

import ipaddress
import os
import re
import shutil
import subprocess
import sys
import textwrap
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from commsched.errors import CommschedError

__all__ = [
    "BRIDGE",
    "NS_PREFIX",
    "HostLink",
    "add_host",
    "check_htb",
    "check_support",
    "create_bridge",
    "delete_namespace",
    "list_namespaces",
    "names",
    "namespace_pids",
    "parse_rate",
    "parse_size",
    "peer_shaping",
    "run",
    "shape",
    "shape_peers",
    "tcp_rate",
]

#: Every namespace of every run starts with this; ``status`` looks for it.
NS_PREFIX = "cs-"
#: Name of the bridge inside the bridge namespace.
BRIDGE = "br0"
_SUBNET = ipaddress.ip_network("10.77.0.0/16")
_TIMEOUT = 20.0

_RATE_UNITS = {
    "bit": 1 / 8, "kbit": 1e3 / 8, "mbit": 1e6 / 8, "gbit": 1e9 / 8, "tbit": 1e12 / 8,
    "bps": 1.0, "kbps": 1e3, "mbps": 1e6, "gbps": 1e9, "tbps": 1e12,
}
_SIZE_UNITS = {"b": 1, "k": 1024, "kb": 1024, "m": 1024**2, "mb": 1024**2, "g": 1024**3,
               "gb": 1024**3}


def parse_rate(rate: str) -> float:
    """Bytes per second of a tc rate such as ``1gbit`` or ``100mbit`` (tc's units).

    >>> parse_rate("1gbit")
    125000000.0
    >>> parse_rate("8mbps")
    8000000.0
    """
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([a-zA-Z]+)\s*", str(rate))
    if not m or m.group(2).lower() not in _RATE_UNITS:
        raise CommschedError(
            f"bandwidth {rate!r}: expected a number and one of {', '.join(_RATE_UNITS)}"
        )
    value = float(m.group(1)) * _RATE_UNITS[m.group(2).lower()]
    if value <= 0:
        raise CommschedError(f"bandwidth {rate!r} must be positive")
    return value


def parse_size(size: str) -> int:
    """Bytes of a tc size such as ``64kb`` (tc's ``kb`` is KiB).

    >>> parse_size("64kb")
    65536
    """
    m = re.fullmatch(r"\s*([0-9]+)\s*([a-zA-Z]*)\s*", str(size))
    unit = (m.group(2) or "b").lower() if m else ""
    if not m or unit not in _SIZE_UNITS:
        raise CommschedError(f"size {size!r}: expected an integer and one of b, kb, mb, gb")
    return int(m.group(1)) * _SIZE_UNITS[unit]


def run(args: Sequence[str], timeout: float = _TIMEOUT, check: bool = True) -> str:
    """Run one command (no shell) with a timeout; return its stdout."""
    try:
        p = subprocess.run(list(args), capture_output=True, text=True, timeout=timeout)
    except FileNotFoundError:
        raise CommschedError(f"{args[0]}: not found (install iproute2)") from None
    except subprocess.TimeoutExpired:
        raise CommschedError(f"{' '.join(args)}: timed out after {timeout:g} s") from None
    if check and p.returncode != 0:
        err = (p.stderr or p.stdout).strip().splitlines()
        raise CommschedError(f"{' '.join(args)}: {err[-1] if err else f'exit {p.returncode}'}")
    return p.stdout


def check_support() -> str | None:
    """None when this process can build an emulated cluster, else the reason it cannot."""
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            return f"'{tool}' not found (install iproute2: scripts/bootstrap-system.sh)"
    if os.geteuid() != 0:
        return "network namespaces need root (CAP_NET_ADMIN and CAP_SYS_ADMIN)"
    probe = f"{NS_PREFIX}probe-{os.getpid()}"
    try:
        run(["ip", "netns", "add", probe])
    except CommschedError as e:
        return f"cannot create a network namespace: {e}"
    try:
        run(["ip", "-n", probe, "link", "add", "p0", "type", "veth", "peer", "name", "p1"])
        run(["tc", "-n", probe, "qdisc", "add", "dev", "p0", "root", "tbf", "rate", "1gbit",
             "burst", "64kb", "latency", "10ms"])
        run(["ip", "-n", probe, "link", "add", "b0", "type", "bridge"])
    except CommschedError as e:
        return f"veth, bridge or tbf not supported: {e}"
    finally:
        run(["ip", "netns", "del", probe], check=False)
    return None


def check_htb(namespace: str | None = None) -> str | None:
    """None when ``htb`` classes with ``u32`` filters can be built, else the reason.

    Parameters
    ----------
    namespace : str, optional
        Probe there (a veth pair is added and deleted); default: a probe namespace of
        its own, created and deleted.

    Returns
    -------
    str or None
        :func:`check_support`'s reason, or which of ``htb`` and ``u32`` is missing.
    """
    reason = check_support()
    if reason:
        return reason
    probe = namespace or f"{NS_PREFIX}probe-{os.getpid()}"
    try:
        if namespace is None:
            run(["ip", "netns", "add", probe])
        run(["ip", "-n", probe, "link", "add", "q0", "type", "veth", "peer", "name", "q1"])
        try:
            run(["tc", "-n", probe, "qdisc", "add", "dev", "q0", "root", "handle", "1:",
                 "htb", "default", "2"])
            run(["tc", "-n", probe, "class", "add", "dev", "q0", "parent", "1:",
                 "classid", "1:1", "htb", "rate", "1mbit", "ceil", "1mbit", "prio", "0"])
        except CommschedError as e:
            return f"the htb qdisc is missing ({e})"
        try:
            run(["tc", "-n", probe, "filter", "add", "dev", "q0", "parent", "1:",
                 "protocol", "ip", "prio", "1", "u32", "match", "ip", "tos", "0x04",
                 "0xfc", "flowid", "1:1"])
        except CommschedError as e:
            return f"the u32 classifier is missing ({e})"
    except CommschedError as e:
        return f"cannot probe traffic control: {e}"
    finally:
        if namespace is None:
            run(["ip", "netns", "del", probe], check=False)
        else:
            run(["ip", "-n", probe, "link", "del", "q0"], check=False)
    return None


@dataclass(frozen=True)
class HostLink:
    """One emulated host: its namespace, address and the names of its link's two ends."""

    host: str
    namespace: str
    address: str
    host_dev: str = "eth0"

    @property
    def bridge_dev(self) -> str:
        return f"v-{self.host}"


def names(run_id: str, hosts: Sequence[str]) -> tuple[str, list[HostLink]]:
    """The bridge namespace and the :class:`HostLink` of each host of run ``run_id``.

    >>> br, links = names("ab12cd", ["ps0", "w0"])
    >>> br, links[1].namespace, links[1].address, links[1].bridge_dev
    ('cs-ab12cd-br', 'cs-ab12cd-w0', '10.77.0.3', 'v-w0')
    """
    if not re.fullmatch(r"[a-z0-9]{1,12}", run_id):
        raise CommschedError(f"run id {run_id!r}: use 1-12 lowercase letters or digits")
    prefix = f"{NS_PREFIX}{run_id}-"
    hosts_ = list(hosts)
    if len(hosts_) > _SUBNET.num_addresses - 3:
        raise CommschedError(f"{len(hosts_)} hosts do not fit in {_SUBNET}")
    links = []
    for i, h in enumerate(hosts_):
        if not re.fullmatch(r"[a-z0-9]{1,10}", h):
            raise CommschedError(f"host name {h!r}: use 1-10 lowercase letters or digits")
        links.append(HostLink(h, prefix + h, str(_SUBNET.network_address + 2 + i)))
    return prefix + "br", links


def create_bridge(namespace: str) -> None:
    """Create namespace ``namespace`` with an up bridge :data:`BRIDGE` and ``lo``."""
    run(["ip", "netns", "add", namespace])
    run(["ip", "-n", namespace, "link", "set", "lo", "up"])
    run(["ip", "-n", namespace, "link", "add", BRIDGE, "type", "bridge"])
    run(["ip", "-n", namespace, "link", "set", BRIDGE, "up"])


def add_host(bridge_ns: str, link: HostLink) -> None:
    """Create the host's namespace and its veth link to the bridge, address it, bring it up."""
    ns = link.namespace
    run(["ip", "netns", "add", ns])
    run(["ip", "-n", ns, "link", "set", "lo", "up"])
    run(["ip", "-n", bridge_ns, "link", "add", link.bridge_dev, "type", "veth",
         "peer", "name", link.host_dev, "netns", ns])
    run(["ip", "-n", bridge_ns, "link", "set", link.bridge_dev, "master", BRIDGE])
    run(["ip", "-n", bridge_ns, "link", "set", link.bridge_dev, "up"])
    run(["ip", "-n", ns, "addr", "add", f"{link.address}/{_SUBNET.prefixlen}", "dev",
         link.host_dev])
    run(["ip", "-n", ns, "link", "set", link.host_dev, "up"])


def shape(namespace: str, dev: str, rate: str, burst: str, latency: str) -> None:
    """Put a ``tbf`` root qdisc with ``rate``/``burst``/``latency`` on ``dev`` in ``namespace``."""
    run(["tc", "-n", namespace, "qdisc", "replace", "dev", dev, "root", "tbf", "rate", rate,
         "burst", burst, "latency", latency])


#: htb class of the traffic no peer filter matches (:func:`shape_peers`).
DEFAULT_CLASS = "1:1"


def tc_bits(rate_Bps: float, floor_bit: int = 0) -> str:
    """A rate in bytes/s as a tc rate in bits/s: whole bits, at least ``floor_bit``."""
    return f"{max(round(rate_Bps * 8), floor_bit)}bit"


def shape_peers(namespace: str, dev: str, peers: Mapping[str, float], default_Bps: float,
                burst: str) -> None:
    """Shape ``dev``'s egress per destination: one ``htb`` class per peer address.

    The root qdisc becomes ``htb`` (what was there is deleted first); peer ``i`` (in the order
    given) gets class ``1:<10 + i, hex>`` with ``rate`` = ``ceil`` = its rate, so it never
    borrows and each peer's traffic is a link of its own; a ``u32`` filter ``match ip dst
    ADDR/32`` sends the packets for that address there. Everything else (ARP, other
    addresses) goes to the default class :data:`DEFAULT_CLASS` at ``default_Bps``.

    Parameters
    ----------
    namespace, dev : str
        Where the device lives.
    peers : mapping of str to float
        Destination IPv4 address -> rate in bytes per second.
    default_Bps : float
        Rate of the default class, bytes per second.
    burst : str
        htb ``burst`` and ``cburst`` of every class (a tc size: what may leave at line
        speed; at least one 64 KiB GSO segment of a veth, or the rate is not reached).

    Raises
    ------
    CommschedError
        A rate that is not positive, an address that is not IPv4, or a failing ``tc``.

    References
    ----------
    Laich 2017, Sec. 2.2 (a transfer rate per pair of devices).
    """
    parse_size(burst)
    rates = {str(ipaddress.IPv4Address(a)): float(r) for a, r in peers.items()}
    for a, r in [("default", default_Bps), *rates.items()]:
        if not r > 0:
            raise CommschedError(f"rate of {a} on {dev} in {namespace} must be positive, "
                                 f"not {r!r}")
    tc = ["tc", "-n", namespace]
    opts = ["burst", burst, "cburst", burst, "quantum", "1514"]
    run([*tc, "qdisc", "del", "dev", dev, "root"], check=False)  # htb cannot replace htb
    run([*tc, "qdisc", "add", "dev", dev, "root", "handle", "1:", "htb", "default", "1"])
    run([*tc, "class", "add", "dev", dev, "parent", "1:", "classid", DEFAULT_CLASS, "htb",
         "rate", tc_bits(default_Bps), "ceil", tc_bits(default_Bps), *opts])
    for i, (addr, rate) in enumerate(rates.items()):
        cid = f"1:{0x10 + i:x}"
        run([*tc, "class", "add", "dev", dev, "parent", "1:", "classid", cid, "htb",
             "rate", tc_bits(rate), "ceil", tc_bits(rate), *opts])
        run([*tc, "filter", "add", "dev", dev, "parent", "1:", "protocol", "ip", "prio", "1",
             "u32", "match", "ip", "dst", f"{addr}/32", "flowid", cid])


_CLASS_RE = re.compile(r"class htb (\S+) .*?\brate (\S+) ceil (\S+)")
_FLOWID_RE = re.compile(r"\bflowid (\S+)")
_MATCH_RE = re.compile(r"match ([0-9a-f]{8})/ffffffff at 16\b")


def peer_shaping(namespace: str, dev: str) -> dict[str, float]:
    """Read :func:`shape_peers`' state back from ``tc``: the rate each address gets.

    Parameters
    ----------
    namespace, dev : str
        Where the device lives.

    Returns
    -------
    dict of str to float
        Destination address (``"default"`` for the default class) -> bytes per second,
        from ``tc class show`` and ``tc filter show`` (a class whose rate and ceil differ
        is an error, as is a filter to a class that does not exist). Empty without an
        ``htb`` root.

    Raises
    ------
    CommschedError
        If the state is not what :func:`shape_peers` builds.
    """
    classes = {}
    for m in _CLASS_RE.finditer(run(["tc", "-n", namespace, "class", "show", "dev", dev])):
        cid, rate, ceil = m.groups()
        if parse_rate(rate) != parse_rate(ceil):
            raise CommschedError(f"{namespace} {dev}: class {cid} has rate {rate} but ceil "
                                 f"{ceil}")
        classes[cid] = parse_rate(rate)
    if not classes:
        return {}
    out = {"default": classes.pop(DEFAULT_CLASS, float("nan"))}
    flowid = None
    for line in run(["tc", "-n", namespace, "filter", "show", "dev", dev]).splitlines():
        f = _FLOWID_RE.search(line)
        if f:
            flowid = f.group(1)
            continue
        match = _MATCH_RE.search(line)
        if match and flowid is not None:
            if flowid not in classes:
                raise CommschedError(f"{namespace} {dev}: a filter sends to class {flowid}, "
                                     "which does not exist")
            out[str(ipaddress.IPv4Address(int(match.group(1), 16)))] = classes[flowid]
            flowid = None
    return out


def list_namespaces(prefix: str = NS_PREFIX) -> list[str]:
    """Names of the existing network namespaces that start with ``prefix``."""
    out = run(["ip", "netns", "list"], check=False)
    found = [line.split()[0] for line in out.splitlines() if line.strip()]
    return sorted(n for n in found if n.startswith(prefix))


def namespace_pids(namespace: str) -> list[int]:
    """PIDs of the processes that live in ``namespace`` (``ip netns pids``)."""
    out = run(["ip", "netns", "pids", namespace], check=False)
    return [int(x) for x in out.split() if x.isdigit()]


def delete_namespace(namespace: str) -> None:
    """Delete ``namespace`` (and with it its veth ends); a missing one is not an error."""
    if namespace in list_namespaces(namespace):
        run(["ip", "netns", "del", namespace])


_SINK = textwrap.dedent("""
    import socket, sys, time
    s = socket.socket(); s.bind(("0.0.0.0", int(sys.argv[1]))); s.listen(1)
    s.settimeout(float(sys.argv[2]))
    c, _ = s.accept(); c.settimeout(float(sys.argv[2])); n = 0; t0 = None
    while True:
        b = c.recv(1 << 20)
        if not b: break
        t0 = t0 or time.perf_counter(); n += len(b)
    print(n, time.perf_counter() - t0)
""")


def tcp_rate(
    src_ns: str, dst_ns: str, dst_addr: str, nbytes: int, port: int = 5998,
    timeout: float = 60.0,
) -> tuple[int, float]:
    """Send ``nbytes`` over one TCP stream from ``src_ns`` to ``dst_ns`` (``dst_addr``).

    Returns the bytes received and their rate in bytes per second (timed from the first
    byte). Every wait is bounded by ``timeout``; the receiver is killed on any failure.
    """
    recv = subprocess.Popen(
        ["ip", "netns", "exec", dst_ns, sys.executable, "-c", _SINK, str(port), str(timeout)],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        time.sleep(1.0)  # the sink is listening well within a second
        subprocess.run(
            ["ip", "netns", "exec", src_ns, sys.executable, "-c",
             f"import socket; c = socket.create_connection(({dst_addr!r}, {port}), "
             f"timeout={timeout}); c.sendall(bytes({nbytes})); c.close()"],
            check=True, timeout=timeout,
        )
        out, _ = recv.communicate(timeout=timeout)
    except (subprocess.SubprocessError, OSError) as e:
        raise CommschedError(f"TCP rate {src_ns} -> {dst_ns}: {e}") from None
    finally:
        if recv.poll() is None:
            recv.kill()
            recv.wait()
    received, secs = out.split()
    return int(received), int(received) / float(secs)
