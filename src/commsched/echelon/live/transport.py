"""Tagged flows between the processes of a live job, with per-flow records.

gloo opens its own TCP connections (ephemeral ports, no socket options exposed), so the
network cannot tell its flows apart and its ``send`` returns when the data is in the
local socket buffer, not when the peer has it. The bulk tensors of a live EchelonFlow job
therefore travel over this module's own TCP connections (torch.distributed/gloo only
joins the processes and synchronises them): :class:`TaggedTransport`.

* Every process listens on its own ``(address, port)``. A *flow* (one logical transfer:
  an activation, a gradient, one rank's part of a ring collective) holds a *lane* to its
  destination for its whole life: a TCP connection whose IP TOS byte carries a *tag*
  (DSCP ``tag``, i.e. TOS ``tag << 2``), set once with ``setsockopt(IP_TOS)`` when the
  lane is opened. Lanes are reused by later flows, never shared by two flows at a time,
  so while a flow is active its tag identifies it on every link (``u32 match ip tos``,
  :mod:`commsched.echelon.live.tc`). Tags are ``tag_base .. tag_base + tags - 1``;
  distinct processes get disjoint ranges.
* Each message (header: key and length) is acknowledged by the receiver once it has every
  byte; a flow's *finish* is the acknowledgement of its last message, measured by the
  sender (its *start*: when it asked for a lane).
* At a flow's start and finish the sender sends one UDP datagram to the controller
  (``notify``), which turns the scheduler's decisions into traffic control.

:class:`GlooTransport` is the same interface over ``torch.distributed`` point-to-point
(untagged; records start and the local completion of the send), used to check the
jobs against gloo and as a fallback on loopback.

Every wait is bounded by ``timeout`` and ends with a one-line
:class:`~commsched.errors.CommschedError`.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import socket
import struct
import threading
import time
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import torch
import torch.distributed as dist

from commsched.errors import CommschedError

__all__ = ["FlowInfo", "GlooTransport", "TaggedTransport", "Transport", "tos_of"]

_HDR = struct.Struct("!HQ")  # key length, payload length
_HELLO = struct.Struct("!I")  # the connecting rank


def tos_of(tag: int) -> int:
    """The TOS byte of DSCP ``tag`` (ECN bits zero).

    Parameters
    ----------
    tag : int
        The flow's DSCP tag.

    Returns
    -------
    int
        ``tag << 2``.

    Raises
    ------
    CommschedError
        ``tag`` is not in ``1..63``.

    Examples
    --------
    >>> tos_of(5)
    20
    """
    if not 0 < tag < 64:
        raise CommschedError(f"tag {tag} is not a DSCP value in 1..63")
    return tag << 2


@dataclass(frozen=True)
class FlowInfo:
    """What a flow is, for its record and the controller: job name, iteration, the
    EchelonFlow it belongs to (``group``: the simulator's group label, e.g. ``act0``),
    ``seq`` (its position among this sender's flows of that group and iteration, the
    key that matches it with the simulator's flow), ``index`` and ``offset`` (ideal
    finish minus the group's reference time, s) from the job's arrangement."""

    job: str
    iteration: int
    group: str
    seq: int
    index: int = 0
    offset: float = 0.0


class Transport:
    """A rank's end of the bulk-data network (see the module docstring)."""

    rank: int
    world: int
    timeout: float
    records: list[dict[str, Any]]

    def open_flow(self, dst: int, info: FlowInfo, nbytes: int) -> Flow:
        """Start a flow to rank ``dst``.

        Parameters
        ----------
        dst : int
            The receiving rank.
        info : FlowInfo
            What the flow is (its record and the controller's view).
        nbytes : int
            The bytes it will carry, all messages together.

        Returns
        -------
        Flow
            Send its messages with :meth:`Flow.send`, then :meth:`Flow.finish`.
        """
        raise NotImplementedError

    def recv(self, src: int, key: str, out: torch.Tensor) -> None:
        """Receive message ``key`` from rank ``src`` into ``out`` (bounded by ``timeout``).

        Parameters
        ----------
        src : int
            The sending rank.
        key : str
            The message's name, unique within the job.
        out : torch.Tensor
            Filled in place; its size must be the message's.
        """
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError


class Flow:
    """One flow: :meth:`send` messages (each blocks until delivered), then :meth:`finish`."""

    def __init__(self, transport: Transport, dst: int, info: FlowInfo, nbytes: int,
                 tag: int) -> None:
        self.t, self.dst, self.info, self.nbytes, self.tag = transport, dst, info, nbytes, tag
        self.start = time.time()
        self.sent = 0

    def send(self, key: str, tensor: torch.Tensor) -> None:
        """Send one message of the flow; returns once it is delivered.

        Parameters
        ----------
        key : str
            The name the receiver's :meth:`Transport.recv` asks for.
        tensor : torch.Tensor
            The payload (its raw bytes).
        """
        raise NotImplementedError

    def finish(self) -> dict[str, Any]:
        rec = {**asdict(self.info), "src": self.t.rank, "dst": self.dst, "tag": self.tag,
               "bytes": self.sent, "start": self.start, "finish": time.time()}
        self.t.records.append(rec)
        return rec


def _payload(tensor: torch.Tensor) -> memoryview:
    arr = tensor.detach().contiguous().view(torch.uint8).numpy()
    return memoryview(arr.tobytes() if not arr.flags.c_contiguous else arr.data).cast("B")


def _recv_exact(sock: socket.socket, n: int) -> bytearray:
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = sock.recv_into(view[got:], n - got)
        if k == 0:
            raise ConnectionError("peer closed the connection")
        got += k
    return buf


class _Lane:
    def __init__(self, sock: socket.socket, tag: int) -> None:
        self.sock, self.tag = sock, tag


class _TaggedFlow(Flow):
    def __init__(self, transport: TaggedTransport, dst: int, info: FlowInfo, nbytes: int,
                 lane: _Lane) -> None:
        super().__init__(transport, dst, info, nbytes, lane.tag)
        self.lane = lane
        self.tt = transport
        self.id = f"{info.job}/{transport.rank}/{info.iteration}/{info.group}/{info.seq}"
        transport.notify({"e": "s", "id": self.id, "src": transport.hosts[transport.rank],
                          "dst": transport.hosts[dst], "size": nbytes, "tag": lane.tag,
                          "group": f"{info.job}/{info.iteration}/{info.group}",
                          "index": info.index, "offset": info.offset, "job": info.job,
                          "t": self.start})

    def send(self, key: str, tensor: torch.Tensor) -> None:
        data = _payload(tensor)
        k = key.encode()
        s = self.lane.sock
        try:
            s.sendall(_HDR.pack(len(k), len(data)) + k)
            s.sendall(data)
            if _recv_exact(s, 1) != b"\x01":
                raise ConnectionError("bad acknowledgement")
        except (OSError, ConnectionError) as e:
            raise CommschedError(f"rank {self.t.rank}: flow {key!r} to rank {self.dst} failed "
                                 f"within {self.t.timeout:g} s ({e})") from None
        self.sent += len(data)

    def finish(self) -> dict[str, Any]:
        rec = super().finish()
        self.tt.notify({"e": "f", "id": self.id, "t": rec["finish"]})
        self.tt.release(self.dst, self.lane)
        return rec


class TaggedTransport(Transport):
    """Bulk data over this module's own tagged TCP lanes (module docstring).

    ``peers[r]`` is rank ``r``'s ``(address, port)``; ``hosts[r]`` its host id in the
    network (for the controller); ``controller`` the ``(address, port)`` of the
    controller's UDP socket (None: no notifications).
    """

    def __init__(self, rank: int, peers: Sequence[tuple[str, int]], *, tag_base: int,
                 tags: int, timeout: float, hosts: Sequence[int] | None = None,
                 controller: tuple[str, int] | None = None, sndbuf: int = 0) -> None:
        self.rank, self.world, self.timeout = rank, len(peers), timeout
        self.peers = [(str(a), int(p)) for a, p in peers]
        self.hosts = list(hosts) if hosts is not None else list(range(self.world))
        if not (tag_base > 0 and tag_base + tags - 1 < 64):
            raise CommschedError(f"tags {tag_base}..{tag_base + tags - 1} outside DSCP 1..63")
        self.free_tags = list(range(tag_base, tag_base + tags))
        self.sndbuf = sndbuf
        self.records: list[dict[str, Any]] = []
        self.controller = controller
        self._udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM) if controller else None
        self._idle: dict[int, list[_Lane]] = {}
        self._lock = threading.Condition()
        self._box: dict[tuple[int, str], bytearray] = {}
        self._box_cond = threading.Condition()
        self._error: str | None = None
        self._gone: set[int] = set()
        self._closed = False
        self._conns: list[socket.socket] = []
        self._srv = socket.socket()
        self._srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self._srv.bind(self.peers[rank])
        except OSError as e:
            raise CommschedError(f"rank {rank}: cannot listen on {self.peers[rank]}: "
                                 f"{e.strerror}") from None
        self._srv.listen(64)
        self._srv.settimeout(0.2)
        self._acceptor = threading.Thread(target=self._accept, name="accept", daemon=True)
        self._acceptor.start()

    # -- controller -------------------------------------------------------------------
    def notify(self, msg: Mapping[str, Any]) -> None:
        """Tell the controller of a flow event (UDP, best effort; a no-op without one).

        Parameters
        ----------
        msg : mapping
            The event, sent as JSON (:meth:`commsched.echelon.live.controller.PhaseState.event`).
        """
        if self._udp is not None and self.controller is not None:
            # the controller is advisory: a lost event is a late update
            with contextlib.suppress(OSError):
                self._udp.sendto(json.dumps(msg).encode(), self.controller)

    # -- sending ----------------------------------------------------------------------
    def _connect(self, dst: int, tag: int) -> _Lane:
        deadline = time.monotonic() + self.timeout
        while True:
            s = socket.socket()
            s.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, tos_of(tag))
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.sndbuf:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self.sndbuf)
            s.settimeout(self.timeout)
            try:
                s.connect(self.peers[dst])
                s.sendall(_HELLO.pack(self.rank))
                return _Lane(s, tag)
            except OSError as e:
                s.close()
                if time.monotonic() > deadline:
                    raise CommschedError(
                        f"rank {self.rank}: cannot reach rank {dst} at {self.peers[dst]} "
                        f"within {self.timeout:g} s ({e})") from None
                time.sleep(0.05)

    def open_flow(self, dst: int, info: FlowInfo, nbytes: int) -> Flow:
        """A flow to ``dst`` on an idle lane (a new one while tags are left; else wait).

        The controller is told of its start.

        Parameters
        ----------
        dst : int
            Rank to send to.
        info : FlowInfo
            Sent to the controller with the lane's tag.
        nbytes : int
            Announced size, bytes.

        Returns
        -------
        Flow

        Raises
        ------
        CommschedError
            No lane frees up, or ``dst`` cannot be reached, within ``timeout`` s.
        """
        deadline = time.monotonic() + self.timeout
        lane: _Lane | None = None
        with self._lock:
            while True:
                if self._idle.get(dst):
                    lane = self._idle[dst].pop()
                    break
                if self.free_tags:
                    tag = self.free_tags.pop(0)
                    break
                if not self._lock.wait(max(0.0, deadline - time.monotonic())):
                    raise CommschedError(f"rank {self.rank}: no free lane to rank {dst} "
                                         f"within {self.timeout:g} s")
        if lane is None:
            try:
                lane = self._connect(dst, tag)
            except CommschedError:
                with self._lock:
                    self.free_tags.append(tag)
                raise
        return _TaggedFlow(self, dst, info, nbytes, lane)

    def release(self, dst: int, lane: _Lane) -> None:
        """Return a finished flow's lane to the idle lanes to ``dst``.

        Parameters
        ----------
        dst : int
            The rank the lane connects to.
        lane : _Lane
            The socket and its tag.
        """
        with self._lock:
            self._idle.setdefault(dst, []).append(lane)
            self._lock.notify_all()

    # -- receiving ----------------------------------------------------------------------
    def _accept(self) -> None:
        while not self._closed:
            try:
                c, _ = self._srv.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            c.settimeout(None)
            self._conns.append(c)
            threading.Thread(target=self._read, args=(c,), name="reader", daemon=True).start()

    def _read(self, c: socket.socket) -> None:
        src = -1
        try:
            (src,) = _HELLO.unpack(_recv_exact(c, _HELLO.size))
            while True:
                first = c.recv(1)
                if not first:  # closed between messages: the peer is done (or died)
                    with self._box_cond:
                        self._gone.add(src)
                        self._box_cond.notify_all()
                    return
                klen, n = _HDR.unpack(first + _recv_exact(c, _HDR.size - 1))
                key = _recv_exact(c, klen).decode()
                data = _recv_exact(c, n)
                with self._box_cond:
                    self._box[(src, key)] = data
                    self._box_cond.notify_all()
                c.sendall(b"\x01")
        except (OSError, ConnectionError, struct.error) as e:
            if not self._closed:
                with self._box_cond:
                    self._error = self._error or f"the connection from rank {src} broke ({e})"
                    self._gone.add(src)
                    self._box_cond.notify_all()

    def recv(self, src: int, key: str, out: torch.Tensor) -> None:
        """Wait (bounded) for message ``key`` from ``src`` and copy it into ``out``.

        Parameters
        ----------
        src : int
            Rank the message comes from.
        key : str
            Its name.
        out : torch.Tensor
            Must have exactly the message's bytes.

        Raises
        ------
        CommschedError
            ``src`` closed its connection first, ``timeout`` s passed, or the size differs.
        """
        deadline = time.monotonic() + self.timeout
        with self._box_cond:
            while (src, key) not in self._box:
                if src in self._gone:
                    raise CommschedError(f"rank {self.rank}: rank {src} closed its connection "
                                         f"before sending {key!r}"
                                         + (f" ({self._error})" if self._error else ""))
                left = deadline - time.monotonic()
                if left <= 0:
                    raise CommschedError(f"rank {self.rank}: no data {key!r} from rank {src} "
                                         f"within {self.timeout:g} s")
                self._box_cond.wait(min(left, 1.0))
            data = self._box.pop((src, key))
        flat = out.view(-1).view(torch.uint8)
        if flat.numel() != len(data):
            raise CommschedError(f"rank {self.rank}: {key!r} from rank {src} has {len(data)} "
                                 f"bytes, expected {flat.numel()}")
        flat.copy_(torch.frombuffer(data, dtype=torch.uint8))

    def close(self) -> None:
        self._closed = True
        with self._lock:
            lanes = [ln for v in self._idle.values() for ln in v]
        for s in [ln.sock for ln in lanes] + self._conns + [self._srv]:
            with contextlib.suppress(OSError):
                s.close()
        if self._udp is not None:
            self._udp.close()
        self._acceptor.join(1.0)


class _GlooFlow(Flow):
    """gloo sends need the matching receive posted (a ring whose ranks all send first
    would deadlock): :meth:`send` posts the send and waits for the *previous* one, so a
    ring step's receive runs while its send is in flight; :meth:`finish` waits for the
    last."""

    _work: Any = None

    def _wait(self) -> None:
        t = self.t
        if self._work is not None and not self._work.wait(_td(t.timeout)):
            raise CommschedError(f"rank {t.rank}: a send to rank {self.dst} was not done "
                                 f"within {t.timeout:g} s")
        self._work = None

    def send(self, key: str, tensor: torch.Tensor) -> None:
        t = self.t
        assert isinstance(t, GlooTransport)
        self._wait()
        self._work = dist.isend(tensor.detach().contiguous(), self.dst,
                                group=t.group_of(key), tag=_tag_of(key))
        self.sent += tensor.numel() * tensor.element_size()

    def finish(self) -> dict[str, Any]:
        self._wait()
        return super().finish()


def _td(seconds: float) -> _dt.timedelta:
    return _dt.timedelta(seconds=seconds)


def _tag_of(key: str) -> int:
    return zlib.crc32(key.encode()) & 0x7FFFFFFF


#: Communication streams that run at the same time in one job (FSDP's all-gathers and
#: reduce-scatters): each gets its own gloo group, whose work gloo runs in order.
_STREAMS = ("allgather", "reduce-scatter")


class GlooTransport(Transport):
    """The same interface over torch.distributed point-to-point (gloo; untagged). A
    message goes over one of ``1 + len(_STREAMS)`` gloo groups chosen by its key, so
    that concurrent streams (FSDP) do not wait for each other inside gloo."""

    def __init__(self, timeout: float) -> None:
        self.rank, self.world, self.timeout = dist.get_rank(), dist.get_world_size(), timeout
        self.records = []
        self.groups = [dist.new_group(list(range(self.world))) for _ in range(len(_STREAMS) + 1)]

    def group_of(self, key: str) -> Any:
        """The gloo group of a message: one per stream of :data:`_STREAMS`, else the first.

        Parameters
        ----------
        key : str
            The message's name; the stream is its ``/<stream>/`` part.

        Returns
        -------
        torch.distributed.ProcessGroup
        """
        return self.groups[next((i + 1 for i, s in enumerate(_STREAMS) if f"/{s}/" in key), 0)]

    def open_flow(self, dst: int, info: FlowInfo, nbytes: int) -> Flow:
        """A gloo flow (tag 0: untagged, no controller).

        Parameters
        ----------
        dst : int
            Peer rank.
        info : FlowInfo
            For the record only.
        nbytes : int
            For the record only.

        Returns
        -------
        Flow
        """
        return _GlooFlow(self, dst, info, nbytes, 0)

    def recv(self, src: int, key: str, out: torch.Tensor) -> None:
        """Post a gloo receive of ``key`` and wait for it.

        Parameters
        ----------
        src : int
            Sender.
        key : str
            Picks the group and the tag (a CRC of the key).
        out : torch.Tensor
            The receive buffer.

        Raises
        ------
        CommschedError
            Nothing arrived within ``timeout`` s.
        """
        w = dist.irecv(out, src, group=self.group_of(key), tag=_tag_of(key))
        if w is None or not w.wait(_td(self.timeout)):
            raise CommschedError(f"rank {self.rank}: no data {key!r} from rank {src} within "
                                 f"{self.timeout:g} s")

    def close(self) -> None:
        pass
