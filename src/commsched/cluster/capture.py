"""Packet capture at a server of the emulated cluster: the HTTP/2 streams it sent and received.

TensorFlow's distributed trace times a transfer only at its receiver. What the *sender*
did, in which order its gRPC runtime put the responses on the wire, is visible only in its
traffic. This module records a server's TCP traffic on its own link, inside its network
namespace (an ``AF_PACKET`` socket: root), during short *windows*, and recovers the
HTTP/2 streams of its gRPC connections (cleartext HTTP/2 in the emulated cluster): for
every stream, i.e. every RPC, where and when its first frame went in each direction,
when its last frame went, and the first bytes of its messages. Layers, bottom up:

* :func:`parse_packet`: the Ethernet, IPv4 and TCP headers of a captured frame.
* :func:`reassemble`: one direction's segments (in any order, with retransmissions and
  overlaps) as the contiguous runs of its byte stream, each byte with the time it was
  first captured; a segment never captured leaves a hole between two runs.
* :func:`frame_at`, :func:`find_frame_start`, :func:`frames`: HTTP/2 frame headers
  (RFC 9113 Sec. 4.1: 24-bit length, type, flags, 31-bit stream id). A window opens on a
  connection that is already running, and a hole loses a frame boundary, so a run's
  first frame is the first offset where a chain of plausible headers starts.
* :func:`http2_connections`: per connection to the server, every stream's two sides
  (:class:`StreamSide`).
* :func:`capture_filter`, :func:`open_capture`: the socket, with a classic BPF filter
  that keeps only the server's connections' segments that carry data.
* :class:`CaptureWindow` (the clients' side) and :func:`main` (the capture process, as
  ``python -m commsched.cluster.capture CONFIG.json``): the windows, agreed through files
  in a shared folder, every wait bounded.

The times are the kernel's capture timestamps (``SO_TIMESTAMPNS``, ``CLOCK_REALTIME``),
the clock TensorFlow's step stats use on the same machine. On egress a packet is captured
when it leaves the link's queueing discipline (after the ``tbf``), i.e. when it goes on
the wire; the *order* of responses is their order in the byte stream, which is the order
in which the server's gRPC runtime wrote them.
"""

from __future__ import annotations

import bisect
import ctypes
import json
import os
import socket
import struct
import sys
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from commsched.atomic import atomic_write_text
from commsched.cluster.emulated import EmulatedCluster
from commsched.cluster.procs import (
    ProcRecord,
    config_main,
    end_processes,
    owner_alive,
    self_owner,
    start_time,
)
from commsched.errors import CommschedError

__all__ = [
    "CaptureWindow",
    "Frame",
    "Run",
    "Segment",
    "StreamSide",
    "capture_filter",
    "capturing",
    "find_frame_start",
    "frame_at",
    "frames",
    "http2_connections",
    "main",
    "open_capture",
    "parse_packet",
    "reassemble",
]

#: The client connection preface (RFC 9113 Sec. 3.4), skipped when a window sees it.
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
_ETH_P_ALL = 0x0003
_SO_ATTACH_FILTER = 26
_SO_RCVBUFFORCE = 33
_SO_TIMESTAMPNS = 35
_SOL_PACKET = 263
_PACKET_STATISTICS = 6
_MAX_FRAME = (1 << 24) - 1
# type -> (stream id: 1 nonzero, 0 zero, None either; allowed flags; length check)
_FRAME_RULES: dict[int, tuple[int | None, int]] = {
    0: (1, 0x09),   # DATA: END_STREAM, PADDED
    1: (1, 0x2D),   # HEADERS: END_STREAM, END_HEADERS, PADDED, PRIORITY
    2: (1, 0x00),   # PRIORITY
    3: (1, 0x00),   # RST_STREAM
    4: (0, 0x01),   # SETTINGS: ACK
    5: (1, 0x0C),   # PUSH_PROMISE: END_HEADERS, PADDED
    6: (0, 0x01),   # PING: ACK
    7: (0, 0x00),   # GOAWAY
    8: (None, 0x00),  # WINDOW_UPDATE
    9: (1, 0x04),   # CONTINUATION: END_HEADERS
}
_FIXED_LENGTH = {2: 5, 3: 4, 6: 8, 8: 4}


@dataclass(frozen=True)
class Segment:
    """One captured TCP segment that carries data.

    Attributes
    ----------
    t : float
        Capture time, seconds since the epoch.
    src, dst : tuple of (str, int)
        Address and port of its sender and its receiver.
    seq : int
        TCP sequence number of its first byte.
    payload : bytes
        The data.
    """

    t: float
    src: tuple[str, int]
    dst: tuple[str, int]
    seq: int
    payload: bytes


def parse_packet(frame: bytes, t: float) -> Segment | None:
    """The TCP segment in a captured Ethernet frame.

    Parameters
    ----------
    frame : bytes
        The frame as an ``AF_PACKET`` raw socket returns it (Ethernet header first).
    t : float
        Its capture time.

    Returns
    -------
    Segment or None
        None for anything but an unfragmented IPv4 TCP segment with data.

    Examples
    --------
    >>> ip = bytes([0x45, 0, 0, 43, 0, 0, 0, 0, 64, 6, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2])
    >>> tcp = struct.pack("!HHIIBB6x", 1234, 80, 7, 0, 0x50, 0x18)
    >>> parse_packet(bytes(12) + b"\\x08\\x00" + ip + tcp + b"abc", 1.0)
    Segment(t=1.0, src=('10.0.0.1', 1234), dst=('10.0.0.2', 80), seq=7, payload=b'abc')
    """
    if len(frame) < 54 or frame[12:14] != b"\x08\x00" or frame[14] >> 4 != 4:
        return None
    ihl = (frame[14] & 0x0F) * 4
    total, frag = struct.unpack_from("!H2xH", frame, 16)
    if frame[23] != 6 or frag & 0x1FFF or frag & 0x2000:
        return None
    tcp = 14 + ihl
    if len(frame) < tcp + 20:
        return None
    sport, dport, seq = struct.unpack_from("!HHI", frame, tcp)
    start = tcp + (frame[tcp + 12] >> 4) * 4
    end = 14 + total if total else len(frame)  # a TSO frame may carry total length 0
    payload = frame[start:end]
    if not payload:
        return None
    return Segment(t, (socket.inet_ntoa(frame[26:30]), sport),
                   (socket.inet_ntoa(frame[30:34]), dport), seq, bytes(payload))


@dataclass
class Run:
    """A contiguous part of one direction's byte stream.

    Attributes
    ----------
    offset : int
        Its first byte's position in the stream (0: the first byte the window saw).
    data : bytes
        The bytes.
    starts, times : list
        Positions where a captured piece begins (ascending, the first is ``offset``) and
        the capture time of that piece: a byte's time is that of the piece holding it.
    """

    offset: int
    data: bytes
    starts: list[int] = field(default_factory=list)
    times: list[float] = field(default_factory=list)

    @property
    def end(self) -> int:
        """The position after its last byte."""
        return self.offset + len(self.data)

    def time_at(self, pos: int) -> float:
        """When the byte at stream position ``pos`` (inside the run) was captured."""
        return self.times[bisect.bisect_right(self.starts, pos) - 1]


def _relative(seq: int, base: int) -> int:
    """``seq - base`` modulo 2**32, as a signed 32-bit number (sequence wrap-around)."""
    return ((seq - base + (1 << 31)) % (1 << 32)) - (1 << 31)


def reassemble(segments: Iterable[tuple[float, int, bytes]]) -> list[Run]:
    """One direction's byte stream from its segments.

    Parameters
    ----------
    segments : iterable of (float, int, bytes)
        ``(capture time, sequence number, payload)`` in capture order. Segments may come
        out of order, repeat (retransmissions) or overlap; a byte's data and time are
        those of the first segment captured that holds it.

    Returns
    -------
    list of Run
        The contiguous runs in stream order, positions counted from the lowest sequence
        number seen; between two runs lies a hole (bytes never captured).

    Examples
    --------
    >>> runs = reassemble([(0.0, 100, b"ab"), (1.0, 104, b"ef"), (2.0, 102, b"cd"),
    ...                    (3.0, 100, b"abc")])
    >>> [(r.offset, r.data, r.times) for r in runs]
    [(0, b'abcdef', [0.0, 2.0, 1.0])]
    >>> [(r.offset, r.data) for r in reassemble([(0.0, 5, b"x"), (1.0, 9, b"y")])]
    [(0, b'x'), (4, b'y')]
    """
    segs = [(t, seq, p) for t, seq, p in segments if p]
    if not segs:
        return []
    base = segs[0][1]
    rel = [_relative(seq, base) for _, seq, _ in segs]
    low = min(rel)
    starts: list[int] = []  # covered intervals [starts[i], ends[i]), disjoint, sorted
    ends: list[int] = []
    pieces: list[tuple[int, bytes, float]] = []
    for (t, _, p), r in zip(segs, rel, strict=True):
        a = r - low
        b = a + len(p)
        i = bisect.bisect_right(ends, a)
        cur = a
        while i < len(starts) and starts[i] < b:
            if starts[i] > cur:
                pieces.append((cur, p[cur - a:starts[i] - a], t))
            cur = max(cur, ends[i])
            i += 1
        if cur < b:
            pieces.append((cur, p[cur - a:], t))
        i = bisect.bisect_left(ends, a)
        j = bisect.bisect_right(starts, b)
        if i < j:
            a, b = min(a, starts[i]), max(b, ends[j - 1])
        starts[i:j] = [a]
        ends[i:j] = [b]
    pieces.sort(key=lambda x: x[0])
    runs: list[Run] = []
    chunks: list[bytes] = []
    end = None
    for pos, data, t in pieces:
        if pos != end:
            if runs:
                runs[-1].data = b"".join(chunks)
            runs.append(Run(pos, b""))
            chunks = []
        chunks.append(data)
        end = pos + len(data)
        runs[-1].starts.append(pos)
        runs[-1].times.append(t)
    runs[-1].data = b"".join(chunks)
    return runs


@dataclass(frozen=True)
class Frame:
    """One HTTP/2 frame header.

    Attributes
    ----------
    pos : int
        Position of its first byte in the data it was read from.
    length, type, flags, stream : int
        The header's fields (RFC 9113 Sec. 4.1); the payload is ``length`` bytes after
        the 9-byte header.
    """

    pos: int
    length: int
    type: int
    flags: int
    stream: int

    @property
    def end(self) -> int:
        """Position after its payload."""
        return self.pos + 9 + self.length


def frame_at(data: bytes, pos: int, max_length: int = _MAX_FRAME) -> Frame | None:
    """The frame header at ``pos`` if it is a plausible one, else None.

    Plausible: a known type, only that type's flags, the reserved bit clear, a stream id
    that the type allows (nonzero for stream frames, zero for connection frames), the
    type's fixed length where it has one, and ``length <= max_length``.

    Parameters
    ----------
    data : bytes
        The stream's bytes.
    pos : int
        Where the header would start (9 bytes needed).
    max_length : int, optional
        The largest payload allowed (the peer's ``SETTINGS_MAX_FRAME_SIZE``).

    Returns
    -------
    Frame or None

    Examples
    --------
    >>> frame_at(bytes([0, 0, 4, 8, 0, 0, 0, 0, 0]) + bytes(4), 0)
    Frame(pos=0, length=4, type=8, flags=0, stream=0)
    >>> frame_at(bytes([0, 0, 4, 0, 0, 0, 0, 0, 0]), 0) is None   # DATA on stream 0
    True
    """
    if pos < 0 or pos + 9 > len(data):
        return None
    length = int.from_bytes(data[pos:pos + 3], "big")
    ftype, flags = data[pos + 3], data[pos + 4]
    sid = int.from_bytes(data[pos + 5:pos + 9], "big")
    rule = _FRAME_RULES.get(ftype)
    if rule is None or sid >> 31 or length > max_length or flags & ~rule[1]:
        return None
    need_sid, _ = rule
    if (need_sid == 1 and sid == 0) or (need_sid == 0 and sid != 0):
        return None
    if _FIXED_LENGTH.get(ftype, length) != length or (ftype == 4 and length % 6):
        return None
    if ftype == 7 and length < 8:
        return None
    return Frame(pos, length, ftype, flags, sid)


def find_frame_start(data: bytes, start: int = 0, limit: int | None = None, depth: int = 3,
                     max_length: int = 1 << 16) -> int | None:
    """The first position where a frame boundary is likely: a chain of plausible headers.

    A position qualifies when ``depth`` consecutive plausible headers
    (:func:`frame_at`) start there, each where the previous frame ends, or when fewer (at
    least one) lead into a frame that the data ends inside.

    Parameters
    ----------
    data : bytes
        Bytes of a stream from an unknown position on.
    start : int, optional
        The first position to look at.
    limit : int, optional
        Look at ``limit`` positions only (default: all).
    depth : int, optional
        Headers the chain needs.
    max_length : int, optional
        The largest payload a header may announce while searching (gRPC's frames are at
        most 16 KiB unless the peer allows more).

    Returns
    -------
    int or None
        The position, or None if none qualifies.

    Examples
    --------
    >>> ping = bytes([0, 0, 8, 6, 0, 0, 0, 0, 0]) + bytes(8)
    >>> find_frame_start(b"\\xff\\xfe" + ping * 3)
    2
    """
    stop = len(data) - 8 if limit is None else min(start + limit, len(data) - 8)
    for pos in range(start, max(stop, start)):
        n, p = 0, pos
        while n < depth:
            f = frame_at(data, p, max_length)
            if f is None:
                break
            n, p = n + 1, f.end
            if p + 9 > len(data):
                n = depth  # the data ends inside or right after a plausible frame
        if n >= depth:
            return pos
    return None


def frames(data: bytes, pos: int, max_length: int = _MAX_FRAME) -> Iterator[Frame]:
    """The frames of ``data`` from the frame boundary ``pos`` on.

    Parameters
    ----------
    data : bytes
        A contiguous run of one direction's stream.
    pos : int
        A frame boundary.
    max_length : int, optional
        As in :func:`frame_at`.

    Yields
    ------
    Frame
        Every complete frame, in order; it stops at the first header that is not
        plausible or at a frame that the data ends inside.

    Examples
    --------
    >>> w = bytes([0, 0, 4, 8, 0, 0, 0, 0, 0]) + bytes(4)
    >>> [f.pos for f in frames(w * 2 + w[:5], 0)]
    [0, 13]
    """
    while True:
        f = frame_at(data, pos, max_length)
        if f is None or f.end > len(data):
            return
        yield f
        pos = f.end


@dataclass
class StreamSide:
    """What one direction of an HTTP/2 stream carried in a window.

    Attributes
    ----------
    pos : int
        Stream position of its first frame (the direction's byte stream, from the first
        byte captured).
    t : float
        Capture time of that frame's first byte.
    first_type : int
        That frame's type (1: HEADERS, 0: DATA).
    end_t : float or None
        Capture time of the last byte of the frame that ended the stream (END_STREAM),
        None if not seen.
    data_bytes : int
        Payload bytes of its DATA frames (without padding).
    head : bytearray
        The first ``keep`` bytes of that payload (for gRPC: the 5-byte message prefix,
        then the message).
    """

    pos: int
    t: float
    first_type: int
    end_t: float | None = None
    data_bytes: int = 0
    head: bytearray = field(default_factory=bytearray)

    def to_json(self) -> dict[str, Any]:
        return {"pos": self.pos, "t": self.t, "first_type": self.first_type,
                "end_t": self.end_t, "data_bytes": self.data_bytes, "head": self.head.hex()}


def _direction_streams(runs: Sequence[Run], keep: int) -> tuple[dict[int, StreamSide],
                                                                 dict[str, int]]:
    """Every stream's side in one direction's runs, and counts: bytes, holes, resyncs (frame
    boundaries searched for inside a run) and bytes outside the frames parsed."""
    out: dict[int, StreamSide] = {}
    stats = {"bytes": sum(len(r.data) for r in runs), "holes": max(len(runs) - 1, 0),
             "resyncs": 0, "unparsed_bytes": 0}
    search = (1 << 16) + 9  # a boundary lies within one frame of any position
    for r in runs:
        data = r.data
        parsed = 0
        skip = len(PREFACE) if data.startswith(PREFACE) else 0
        pos = find_frame_start(data, skip, search)
        while pos is not None:
            last = pos
            for f in frames(data, pos):
                last = f.end
                parsed += f.end - f.pos
                if f.stream:
                    _add_frame(out, r, data, f, keep)
            if last + 9 > len(data) or frame_at(data, last) is not None:
                break  # the run ends inside the last frame
            stats["resyncs"] += 1
            pos = find_frame_start(data, last + 1, search)
        stats["unparsed_bytes"] += len(data) - parsed - skip
    return out, stats


def _add_frame(out: dict[int, StreamSide], r: Run, data: bytes, f: Frame, keep: int) -> None:
    side = out.get(f.stream)
    if side is None:
        side = out[f.stream] = StreamSide(r.offset + f.pos, r.time_at(r.offset + f.pos),
                                          f.type)
    if f.type == 0:
        payload = data[f.pos + 9:f.end]
        if f.flags & 0x08 and payload:
            payload = payload[1:len(payload) - payload[0]]
        side.data_bytes += len(payload)
        if len(side.head) < keep:
            side.head += payload[:keep - len(side.head)]
    if f.flags & 0x01 and f.type in (0, 1):
        side.end_t = r.time_at(r.offset + f.end - 1)


def http2_connections(segments: Iterable[Segment], server: tuple[str, int],
                      keep: int = 4096) -> list[dict[str, Any]]:
    """The HTTP/2 streams of every connection to ``server`` among ``segments``.

    Parameters
    ----------
    segments : iterable of Segment
        Captured segments, in capture order; those of other connections are ignored.
    server : tuple of (str, int)
        The server's address and port: a connection's other end is its client.
    keep : int, optional
        DATA bytes kept per stream side (:attr:`StreamSide.head`).

    Returns
    -------
    list of dict
        One per connection (by client address and port), JSON-ready: ``client``,
        ``server`` (``"addr:port"``), ``to_server`` and ``to_client`` (bytes, holes,
        unparsed bytes of each direction) and ``streams``: ``{"id", "request",
        "response"}`` per stream id in id order, ``request`` the client's side
        (:meth:`StreamSide.to_json`, None if not seen), ``response`` the server's.
    """
    by_conn: dict[tuple[str, int], dict[bool, list[tuple[float, int, bytes]]]] = {}
    for s in segments:
        if s.dst == server:
            by_conn.setdefault(s.src, {True: [], False: []})[True].append(
                (s.t, s.seq, s.payload))
        elif s.src == server:
            by_conn.setdefault(s.dst, {True: [], False: []})[False].append(
                (s.t, s.seq, s.payload))
    out = []
    for client, sides in sorted(by_conn.items()):
        req, req_stats = _direction_streams(reassemble(sides[True]), keep)
        resp, resp_stats = _direction_streams(reassemble(sides[False]), keep)
        streams = [{"id": sid,
                    "request": req[sid].to_json() if sid in req else None,
                    "response": resp[sid].to_json() if sid in resp else None}
                   for sid in sorted(set(req) | set(resp))]
        out.append({"client": f"{client[0]}:{client[1]}", "server": f"{server[0]}:{server[1]}",
                    "to_server": req_stats, "to_client": resp_stats, "streams": streams})
    return out


def capture_filter(addr: str, port: int) -> list[tuple[int, int, int, int]]:
    """A classic BPF program that keeps the data segments of ``addr:port``'s connections.

    Accepts an unfragmented IPv4 TCP segment whose source or destination is ``addr`` and
    ``port`` and whose payload (IP total length minus the IP and TCP headers) is not
    empty; everything else (pure ACKs, other connections) is dropped in the kernel.

    Parameters
    ----------
    addr : str
        The server's IPv4 address.
    port : int
        Its port.

    Returns
    -------
    list of tuple of (int, int, int, int)
        ``(code, jt, jf, k)`` instructions (``struct sock_filter``).
    """
    host = int.from_bytes(socket.inet_aton(addr), "big")
    ok, no = 23, 24  # the two returns
    # (code, jump if true, jump if false, k); jumps name the absolute target
    prog = [
        (0x28, 0, 0, 12),         # 0  ldh [12]: EtherType
        (0x15, 2, no, 0x0800),    # 1  IPv4?
        (0x30, 0, 0, 23),         # 2  ldb [23]: protocol
        (0x15, 4, no, 6),         # 3  TCP?
        (0x28, 0, 0, 20),         # 4  ldh [20]: flags and fragment offset
        (0x45, no, 6, 0x3FFF),    # 5  a fragment (MF or an offset)?
        (0xB1, 0, 0, 14),         # 6  ldxb 4*([14]&0xf): X = IP header length
        (0x20, 0, 0, 26),         # 7  ld [26]: source address
        (0x15, 9, 11, host),      # 8
        (0x48, 0, 0, 14),         # 9  ldh [x+14]: source port
        (0x15, 15, 11, port),     # 10
        (0x20, 0, 0, 30),         # 11 ld [30]: destination address
        (0x15, 13, no, host),     # 12
        (0x48, 0, 0, 16),         # 13 ldh [x+16]: destination port
        (0x15, 15, no, port),     # 14
        (0x50, 0, 0, 26),         # 15 ldb [x+26]: TCP data offset
        (0x54, 0, 0, 0xF0),       # 16 and #0xf0
        (0x74, 0, 0, 2),          # 17 rsh #2: TCP header length
        (0x0C, 0, 0, 0),          # 18 add x: both headers
        (0x07, 0, 0, 0),          # 19 tax
        (0x28, 0, 0, 16),         # 20 ldh [16]: IP total length
        (0x1C, 0, 0, 0),          # 21 sub x: the payload's length
        (0x15, no, ok, 0),        # 22 empty?
        (0x06, 0, 0, 0x40000),    # 23 accept (the whole frame)
        (0x06, 0, 0, 0),          # 24 drop
    ]
    return [(code, jt - i - 1, jf - i - 1, k) if code in (0x15, 0x45) else (code, 0, 0, k)
            for i, (code, jt, jf, k) in enumerate(prog)]


def open_capture(dev: str, addr: str, port: int, rcvbuf: int) -> socket.socket:
    """An ``AF_PACKET`` socket on ``dev`` that receives :func:`capture_filter`'s segments.

    Parameters
    ----------
    dev : str
        The interface (in this process's namespace).
    addr, port : str, int
        The server whose connections to keep.
    rcvbuf : int
        Receive buffer, bytes (``SO_RCVBUFFORCE``: the backlog while this process waits
        for the CPU).

    Returns
    -------
    socket.socket
        Bound, filtered, with kernel timestamps (``SO_TIMESTAMPNS``).

    Raises
    ------
    CommschedError
        Without ``CAP_NET_RAW`` or when ``dev`` does not exist.
    """
    try:
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)  # receives nothing yet
    except PermissionError:
        raise CommschedError("packet capture needs root (CAP_NET_RAW)") from None
    try:
        prog = capture_filter(addr, port)
        buf = ctypes.create_string_buffer(b"".join(struct.pack("HBBI", *x) for x in prog))
        fprog = struct.pack("HL", len(prog), ctypes.addressof(buf))
        s.setsockopt(socket.SOL_SOCKET, _SO_ATTACH_FILTER, fprog)
        s.setsockopt(socket.SOL_SOCKET, _SO_RCVBUFFORCE, rcvbuf)
        s.setsockopt(socket.SOL_SOCKET, _SO_TIMESTAMPNS, 1)
        s.bind((dev, _ETH_P_ALL))
    except OSError as e:
        s.close()
        raise CommschedError(f"packet capture on {dev}: {e.strerror or e}") from None
    return s


_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_")


def _check_name(name: str) -> str:
    if not name or not set(name) <= _NAME_CHARS or name[0] in ".-":
        raise CommschedError(f"capture window {name!r}: use letters, digits, '.', '-', '_'")
    return name


class CaptureWindow:
    """The clients' side of one capture window: every client enters it around its steps.

    Task 0 asks for the window (file ``NAME.start`` in ``folder``). Every client then
    waits until each capture process has its socket open (``NAME.on.ID`` for every id)
    or ``timeout`` seconds pass, or a capture process reported that it cannot capture
    (``failed.ID``); runs its steps; and on leaving, also after an error, writes
    ``NAME.end.TASK``. The steps run either way (the clients must stay in step with each
    other); :attr:`on` says whether they were captured. A capture process closes the
    window once every task's end file exists (:func:`main`) and writes its streams to
    ``NAME.ID.json``.

    Parameters
    ----------
    folder : path
        The shared folder (the clients and the capture processes see the same files).
    name : str
        The window's name (letters, digits, ``.``, ``-``, ``_``).
    task : int
        This client's task.
    ids : sequence of str
        The capture processes (one per captured server).
    timeout : float
        Seconds to wait for the sockets.

    Attributes
    ----------
    on : bool
        Every capture process had its socket open when the steps began.
    """

    def __init__(self, folder: str | os.PathLike[str], name: str, task: int,
                 ids: Sequence[str], timeout: float) -> None:
        self.folder = Path(folder)
        self.name = _check_name(name)
        self.task = int(task)
        self.ids = [_check_name(i) for i in ids]
        self.timeout = float(timeout)
        self.on = False

    def __enter__(self) -> CaptureWindow:
        if self.task == 0:
            atomic_write_text(self.folder / f"{self.name}.start", "")
        deadline = time.monotonic() + self.timeout
        while True:
            if all((self.folder / f"{self.name}.on.{i}").exists() for i in self.ids):
                self.on = True
                break
            if (time.monotonic() > deadline
                    or any((self.folder / f"failed.{i}").exists() for i in self.ids)):
                break
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        atomic_write_text(self.folder / f"{self.name}.end.{self.task}", "")


def _timestamp(ancdata: Sequence[tuple[int, int, bytes]]) -> float:
    for level, kind, data in ancdata:
        if level == socket.SOL_SOCKET and kind == _SO_TIMESTAMPNS and len(data) >= 16:
            sec, nsec = struct.unpack_from("qq", data)
            return sec + nsec * 1e-9
    return time.time()


def _window(cfg: Mapping[str, Any], name: str) -> None:
    """Capture one window (:class:`CaptureWindow`) and write ``NAME.ID.json``."""
    folder, cid = Path(cfg["folder"]), str(cfg["id"])
    addr, port = str(cfg["addr"]), int(cfg["port"])
    ends = [folder / f"{name}.end.{t}" for t in range(int(cfg["tasks"]))]
    log = Path(cfg["log"]) if cfg.get("log") else None
    log_start = log.stat().st_size if log and log.exists() else 0
    sock = open_capture(str(cfg["dev"]), addr, port, int(cfg.get("rcvbuf", 512 << 20)))
    packets: list[tuple[float, bytes]] = []
    size, truncated, complete = 0, False, False
    max_bytes = int(cfg.get("max_bytes", 512 << 20))
    grace = float(cfg.get("grace_s", 0.3))
    try:
        sock.settimeout(0.02)
        opened = time.time()
        atomic_write_text(folder / f"{name}.on.{cid}", "")
        deadline = time.monotonic() + float(cfg.get("window_s", 600.0))
        ended: float | None = None
        looked = 0.0
        while True:
            now = time.monotonic()
            if ended is None and now - looked > 0.05:
                looked = now
                if all(p.exists() for p in ends):
                    ended, complete = now, True
                elif (folder / "stop").exists() or not owner_alive(cfg.get("owner")):
                    ended = now - grace
            if now > deadline:
                break
            try:
                data, anc, _, _ = sock.recvmsg(1 << 18, 64)
            except TimeoutError:
                if ended is not None and now - ended > grace:
                    break  # the backlog is read and the grace period over
                continue
            if size + len(data) > max_bytes:
                truncated = True
                continue
            packets.append((_timestamp(anc), data))
            size += len(data)
        seen, drops = struct.unpack("II", sock.getsockopt(_SOL_PACKET, _PACKET_STATISTICS, 8))
    finally:
        sock.close()
    closed = time.time()
    lines: list[str] = []
    if log and log.exists():
        with log.open("rb") as f:
            f.seek(log_start)
            match = str(cfg.get("log_match", ""))
            lines = [x for x in f.read().decode(errors="replace").splitlines() if match in x]
    segments = [s for t, d in packets if (s := parse_packet(d, t)) is not None]
    result = {"name": name, "id": cid, "dev": cfg["dev"], "server": f"{addr}:{port}",
              "opened": opened, "closed": closed, "complete": complete,
              "packets": len(packets), "bytes": size, "truncated": truncated,
              "kernel_packets": seen, "kernel_drops": drops, "log": lines,
              "connections": http2_connections(segments, (addr, port),
                                               int(cfg.get("keep", 4096)))}
    atomic_write_text(folder / f"{name}.{cid}.json", json.dumps(result))


def _serve(cfg: Mapping[str, Any]) -> None:
    """The capture process: serve windows until ``stop``, the owner's exit or the ttl."""
    folder, cid = Path(cfg["folder"]), _check_name(str(cfg["id"]))
    folder.mkdir(parents=True, exist_ok=True)
    try:
        open_capture(str(cfg["dev"]), str(cfg["addr"]), int(cfg["port"]), 1 << 16).close()
    except CommschedError as e:
        atomic_write_text(folder / f"failed.{cid}", f"{e}\n")
        raise
    os.nice(int(cfg.get("nice", 10)))  # below the servers and clients it observes
    t0 = time.monotonic()
    ttl = float(cfg.get("ttl_s", 3600.0))
    while (owner_alive(cfg.get("owner")) and time.monotonic() - t0 < ttl
           and not (folder / "stop").exists()):
        for start in sorted(folder.glob("*.start")):
            name = start.name.removesuffix(".start")
            if not (folder / f"{name}.on.{cid}").exists():
                _window(cfg, name)
        time.sleep(0.05)


@contextmanager
def capturing(cluster: EmulatedCluster, hosts: Sequence[str], folder: Path, tasks: int,
              timeout_s: float, window_s: float, log_match: str = "",
              max_bytes: int = 512 << 20) -> Iterator[dict[str, Any]]:
    """Capture processes (:func:`main`) on ``hosts`` of an emulated cluster for the block.

    Each captures its host's server (the link ``eth0``, the cluster's port). ``folder``
    is emptied first (a re-run's windows start afresh). On leaving, also after an error,
    the processes are told to stop (file ``stop``), given 60 s to finish the window
    they are reading, then ended by PID; the cluster's teardown would end them too.

    Parameters
    ----------
    cluster : EmulatedCluster
        A cluster that is up.
    hosts : sequence of str
        The hosts whose servers to capture (``ps0``, ...).
    folder : Path
        The windows' files; each process's config and log go beside it
        (``capture-HOST.json``, ``capture-HOST.log``).
    tasks : int
        The clients that enter every window.
    timeout_s : float
        How long a client waits for the sockets of a window.
    window_s : float
        The longest a window stays open.
    log_match : str, optional
        With it, every window also keeps the lines of the host's server log that contain
        it (:func:`main`'s ``log``; a parameter server's rendezvous log with
        :attr:`~commsched.cluster.emulated.ClusterConfig.ps_vmodule`).
    max_bytes : int, optional
        Captured bytes kept per window and process.

    Yields
    ------
    dict
        The clients' part of a plan: ``folder``, ``ids`` (the hosts) and ``timeout_s``
        (:class:`CaptureWindow`'s arguments).
    """
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.iterdir():
        if old.is_file():
            old.unlink()
    procs = []
    try:
        for host in hosts:
            link = cluster.link(host)
            cfg = {"dev": link.host_dev, "addr": link.address, "port": cluster.config.port,
                   "folder": str(folder), "id": host, "tasks": tasks, "owner": self_owner(),
                   "ttl_s": cluster.config.ttl, "window_s": window_s, "max_bytes": max_bytes,
                   "log": str(cluster.log_dir / f"{host}.log") if log_match else None,
                   "log_match": log_match}
            path = folder.parent / f"capture-{host}.json"
            atomic_write_text(path, json.dumps(cfg))
            procs.append(cluster.spawn_on(
                host, f"capture-{host}", [sys.executable, "-m", "commsched.cluster.capture",
                                          str(path)], folder.parent / f"capture-{host}.log"))
        yield {"folder": str(folder), "ids": list(hosts), "timeout_s": timeout_s}
    finally:
        atomic_write_text(folder / "stop", "")
        deadline = time.monotonic() + 60.0  # a window being read and parsed is finished
        while any(p.poll() is None for p in procs) and time.monotonic() < deadline:
            time.sleep(0.1)
        left = [ProcRecord(p.pid, st, "capture", None, "") for p in procs
                if p.poll() is None and (st := start_time(p.pid)) is not None]
        end_processes(left, popens={p.pid: p for p in procs})


def main(argv: Sequence[str] | None = None) -> int:
    """Run a capture process (``python -m commsched.cluster.capture CONFIG.json``).

    Parameters
    ----------
    argv : sequence of str, optional
        The JSON config file: ``dev``, ``addr`` and ``port`` (the server), ``folder``
        (the windows' files), ``id``, ``tasks`` (the clients that enter every window) and
        optionally ``owner`` (``PID:START``: exit when it is gone), ``ttl_s``,
        ``window_s`` (the longest window), ``rcvbuf``, ``max_bytes`` (kept per window),
        ``keep`` (:func:`http2_connections`), ``grace_s`` (captured after the last end
        file), ``nice``, ``log`` and ``log_match`` (the lines of the server's log file
        that contain ``log_match`` and were written during a window go to the window's
        file as ``log``).

    Returns
    -------
    int
        0 after ``stop``, the owner's exit or the ttl; 2 after a one-line error (also
        written to ``failed.ID`` when the socket cannot be opened).
    """
    return config_main(argv, "commsched.cluster.capture", "packet capture", _serve)


if __name__ == "__main__":
    sys.exit(main())
