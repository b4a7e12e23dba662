"""commsched.cluster.capture on synthetic traffic (no root): packets, TCP reassembly,
HTTP/2 frames and streams, the BPF filter (by a small interpreter) and the window files."""

from __future__ import annotations

import socket
import struct
import threading
import time

import pytest

from commsched.cluster.capture import (
    PREFACE,
    CaptureWindow,
    Segment,
    capture_filter,
    find_frame_start,
    frame_at,
    frames,
    http2_connections,
    parse_packet,
    reassemble,
)
from commsched.errors import CommschedError

SERVER = ("10.77.0.2", 2222)
CLIENT = ("10.77.0.3", 40001)


def frame(ftype: int, flags: int, sid: int, payload: bytes = b"") -> bytes:
    return len(payload).to_bytes(3, "big") + bytes([ftype, flags]) + sid.to_bytes(4, "big") \
        + payload


def packet(src: tuple[str, int], dst: tuple[str, int], seq: int, payload: bytes,
           tcp_flags: int = 0x18, frag: int = 0x4000, proto: int = 6) -> bytes:
    tcp = struct.pack("!HHIIBBHHH", src[1], dst[1], seq % (1 << 32), 0, 0x80, tcp_flags,
                      1000, 0, 0) + bytes(12)  # 32-byte header (timestamps option)
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp) + len(payload), 0, frag, 64,
                     proto, 0, socket.inet_aton(src[0]), socket.inet_aton(dst[0]))
    return bytes(6) + bytes(6) + b"\x08\x00" + ip + tcp + payload


def segments_of(stream: bytes, isn: int, mss: int = 1448) -> list[tuple[int, bytes]]:
    return [(isn + i, stream[i:i + mss]) for i in range(0, len(stream), mss)]


def request_stream(sids: list[int]) -> bytes:
    out = b""
    for sid in sids:
        msg = b"\x00" + (6).to_bytes(4, "big") + b"req" + bytes([sid]) + b"xy"
        out += frame(1, 0x04, sid, b"hdrs") + frame(0, 0x01, sid, msg)
    return out


def response_stream(order: list[int], size: int = 40000, interleave: bool = True) -> bytes:
    """Responses in ``order``: HEADERS, DATA in 16 KiB frames, trailers; the DATA frames
    of consecutive responses interleaved (several streams at once on the connection)."""
    parts = {sid: [frame(1, 0x04, sid, b"status")]
             + [frame(0, 0, sid, bytes([sid]) * min(16384, size - i))
                for i in range(0, size, 16384)]
             + [frame(1, 0x05, sid, b"trailers")] for sid in order}
    out = frame(8, 0, 0, bytes(4))  # a connection-level WINDOW_UPDATE first
    if not interleave:
        return out + b"".join(b"".join(p) for p in parts.values())
    queues = [list(parts[s]) for s in order]
    while any(queues):
        for q in queues:
            if q:
                out += q.pop(0)
            if q:
                out += q.pop(0)
    return out


def test_parse_packet_fields_and_rejects():
    seg = parse_packet(packet(CLIENT, SERVER, 77, b"hello"), 3.5)
    assert seg == Segment(3.5, CLIENT, SERVER, 77, b"hello")
    assert parse_packet(packet(CLIENT, SERVER, 77, b""), 0.0) is None      # pure ACK
    assert parse_packet(packet(CLIENT, SERVER, 77, b"x", proto=17), 0.0) is None  # UDP
    assert parse_packet(packet(CLIENT, SERVER, 77, b"x", frag=0x2000), 0.0) is None
    assert parse_packet(b"\x00" * 60, 0.0) is None                           # not IPv4
    padded = packet(CLIENT, SERVER, 1, b"ab") + bytes(6)   # Ethernet padding is not data
    assert parse_packet(padded, 0.0).payload == b"ab"


def test_reassemble_out_of_order_retransmits_overlaps_and_wraparound():
    data = bytes(range(256)) * 40
    isn = (1 << 32) - 3000  # the sequence numbers wrap inside the stream
    segs = segments_of(data, isn, mss=700)
    order = list(range(len(segs)))
    order[2], order[5] = order[5], order[2]                 # out of order
    timed = [(float(k), segs[i][0] % (1 << 32), segs[i][1]) for k, i in enumerate(order)]
    timed.insert(4, (99.0, segs[1][0] % (1 << 32), segs[1][1]))          # retransmission
    timed.append((100.0, (segs[3][0] + 350) % (1 << 32), data[2450:3500]))  # overlap
    runs = reassemble(timed)
    assert len(runs) == 1 and runs[0].offset == 0 and runs[0].data == data
    r = runs[0]
    assert r.time_at(1 * 700) == 1.0          # the first copy's time, not the retransmit's
    assert r.time_at(2 * 700) == 5.0 and r.time_at(5 * 700 + 3) == 2.0


def test_reassemble_reports_holes_as_separate_runs():
    data = bytes(5000)
    segs = segments_of(data, 10, mss=1000)
    runs = reassemble([(0.0, s, p) for k, (s, p) in enumerate(segs) if k != 2])
    assert [(r.offset, len(r.data)) for r in runs] == [(0, 2000), (3000, 2000)]
    # a segment that starts before the first one captured moves the origin
    late = reassemble([(0.0, 1000, b"b" * 10), (1.0, 990, b"a" * 10)])
    assert late[0].offset == 0 and late[0].data == b"a" * 10 + b"b" * 10


def test_frame_checks_and_resync():
    ok = frame(6, 0, 0, bytes(8))
    assert frame_at(ok, 0).type == 6
    assert frame_at(frame(6, 0, 1, bytes(8)), 0) is None       # PING on a stream
    assert frame_at(frame(6, 0, 0, bytes(7)), 0) is None       # PING of the wrong length
    assert frame_at(frame(0, 0x02, 1, b"x"), 0) is None        # DATA with a foreign flag
    assert frame_at(frame(12, 0, 1, b"x"), 0) is None          # unknown type
    assert frame_at(ok[:8], 0) is None
    stream = response_stream([1, 3])
    boundaries = [f.pos for f in frames(stream, 0)]
    assert boundaries[0] == 0 and boundaries[-1] + 9 + 8 == len(stream)
    # cut inside the first DATA frame: the next boundary is found, not a false one
    cut = 13 + 15 + 9 + 5000
    found = find_frame_start(stream[cut:])
    assert found is not None and cut + found in boundaries
    assert found == min(b for b in boundaries if b >= cut) - cut
    assert find_frame_start(bytes(range(256)) * 4) is None


def _connection(sides: dict[bool, list[tuple[float, int, bytes]]]) -> dict:
    segs = []
    for to_server, parts in sides.items():
        src, dst = (CLIENT, SERVER) if to_server else (SERVER, CLIENT)
        segs += [parse_packet(packet(src, dst, seq, p), t) for t, seq, p in parts]
    segs.sort(key=lambda s: s.t)
    (conn,) = http2_connections(segs, SERVER, keep=64)
    return conn


def test_streams_of_a_connection_in_order_of_the_byte_stream():
    req = PREFACE + frame(4, 0, 0, bytes(6)) + request_stream([1, 3, 5])
    resp = response_stream([3, 1, 5])
    t_req = [(0.001 * i, s, p) for i, (s, p) in enumerate(segments_of(req, 500))]
    t_resp = [(1.0 + 0.001 * i, s, p) for i, (s, p) in enumerate(segments_of(resp, 9000))]
    t_resp[3], t_resp[4] = t_resp[4], t_resp[3]     # reordered on capture
    t_resp.insert(10, t_resp[7])                     # and a retransmission
    conn = _connection({True: t_req, False: t_resp})
    assert conn["client"] == "10.77.0.3:40001" and conn["server"] == "10.77.0.2:2222"
    assert conn["to_client"]["holes"] == 0 and conn["to_client"]["unparsed_bytes"] == 0
    assert conn["to_server"]["unparsed_bytes"] == 0 and conn["to_client"]["resyncs"] == 0
    by = {s["id"]: s for s in conn["streams"]}
    assert sorted(by) == [1, 3, 5]
    for sid in (1, 3, 5):
        head = bytes.fromhex(by[sid]["request"]["head"])
        assert head == b"\x00" + (6).to_bytes(4, "big") + b"req" + bytes([sid]) + b"xy"
        assert by[sid]["response"]["data_bytes"] == 40000
        assert by[sid]["response"]["first_type"] == 1
        assert by[sid]["response"]["end_t"] >= by[sid]["response"]["t"]
    order = sorted(by, key=lambda s: by[s]["response"]["pos"])
    assert order == [3, 1, 5]
    assert by[3]["response"]["pos"] == 13   # after the WINDOW_UPDATE
    # the three responses were interleaved: 5 started before 3 ended
    assert by[5]["response"]["t"] < by[3]["response"]["end_t"]


def test_window_that_opens_mid_frame_and_a_hole():
    resp = response_stream([1, 3, 5, 7], interleave=False)
    segs = segments_of(resp, 123, mss=1000)
    kept = segs[7:30] + segs[31:]   # opens inside stream 1's DATA; one segment lost
    conn = _connection({False: [(float(i), s, p) for i, (s, p) in enumerate(kept)]})
    st = conn["to_client"]
    assert st["holes"] == 1 and 0 < st["unparsed_bytes"] < 2 * 16384 + 2000
    ids = [s["id"] for s in conn["streams"]]
    assert 5 in ids and 7 in ids        # found again after the start and after the hole
    by = {s["id"]: s["response"] for s in conn["streams"]}
    assert by[7]["data_bytes"] == 40000 and by[7]["end_t"] is not None
    assert by[5]["pos"] < by[7]["pos"]


def test_other_connections_are_ignored():
    other = ("10.77.0.4", 2222)  # the PS as a client of another server
    segs = [parse_packet(packet(("10.77.0.2", 40000), other, 1, frame(6, 0, 0, bytes(8))),
                         0.0),
            parse_packet(packet(CLIENT, SERVER, 1, frame(6, 0, 0, bytes(8))), 0.0)]
    conns = http2_connections(segs, SERVER)
    assert [c["client"] for c in conns] == ["10.77.0.3:40001"]
    assert conns[0]["streams"] == []


def _bpf(prog: list[tuple[int, int, int, int]], pkt: bytes) -> int:
    """A classic BPF interpreter for the instructions capture_filter uses."""
    a = x = pc = 0
    while True:
        code, jt, jf, k = prog[pc]
        pc += 1
        if code == 0x28:
            a = int.from_bytes(pkt[k:k + 2], "big")
        elif code == 0x30:
            a = pkt[k]
        elif code == 0x20:
            a = int.from_bytes(pkt[k:k + 4], "big")
        elif code == 0x48:
            a = int.from_bytes(pkt[x + k:x + k + 2], "big")
        elif code == 0x50:
            a = pkt[x + k]
        elif code == 0xB1:
            x = 4 * (pkt[k] & 0x0F)
        elif code == 0x54:
            a &= k
        elif code == 0x74:
            a >>= k
        elif code == 0x0C:
            a = (a + x) & 0xFFFFFFFF
        elif code == 0x1C:
            a = (a - x) & 0xFFFFFFFF
        elif code == 0x07:
            x = a
        elif code == 0x15:
            pc += jt if a == k else jf
        elif code == 0x45:
            pc += jt if a & k else jf
        elif code == 0x06:
            return k
        else:
            raise AssertionError(f"opcode {code:#x}")


def test_bpf_filter_keeps_only_the_servers_data_segments():
    prog = capture_filter(*SERVER)
    assert all(0 <= pc + 1 + j < len(prog) for pc, (c, jt, jf, _) in enumerate(prog)
               if c in (0x15, 0x45) for j in (jt, jf))
    assert _bpf(prog, packet(CLIENT, SERVER, 1, b"data")) > 0
    assert _bpf(prog, packet(SERVER, CLIENT, 1, b"data")) > 0
    assert _bpf(prog, packet(CLIENT, SERVER, 1, b"")) == 0                    # pure ACK
    # the PS as a client of another server (gradients), either direction
    assert _bpf(prog, packet(("10.77.0.2", 40000), ("10.77.0.4", 2222), 1, b"d")) == 0
    assert _bpf(prog, packet(("10.77.0.4", 2222), ("10.77.0.2", 40000), 1, b"d")) == 0
    assert _bpf(prog, packet(CLIENT, ("10.77.0.9", 2222), 1, b"d")) == 0
    assert _bpf(prog, packet(CLIENT, SERVER, 1, b"d", proto=17)) == 0
    assert _bpf(prog, packet(CLIENT, SERVER, 1, b"d", frag=0x2000)) == 0
    assert _bpf(prog, bytes(12) + b"\x86\xdd" + bytes(60)) == 0               # IPv6


def test_capture_window_files(tmp_path):
    def capture() -> None:  # a stand-in for the capture process
        deadline = time.monotonic() + 10
        while not (tmp_path / "g.c.start").exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        (tmp_path / "g.c.on.ps0").write_text("")

    th = threading.Thread(target=capture)
    th.start()
    with CaptureWindow(tmp_path, "g.c", 0, ["ps0"], timeout=10) as w:
        assert w.on
    th.join()
    assert (tmp_path / "g.c.end.0").exists()
    t = time.monotonic()
    with CaptureWindow(tmp_path, "g.d", 1, ["ps0"], timeout=0.2) as w:
        assert not w.on               # nobody opened it: the steps run uncaptured
    assert 0.2 <= time.monotonic() - t < 5 and (tmp_path / "g.d.end.1").exists()
    (tmp_path / "failed.ps0").write_text("no root\n")
    t = time.monotonic()
    with CaptureWindow(tmp_path, "g.e", 0, ["ps0"], timeout=30) as w:
        assert not w.on
    assert time.monotonic() - t < 5   # a failed capture process is not waited for
    with pytest.raises(CommschedError, match="capture window"):
        CaptureWindow(tmp_path, "../x", 0, ["ps0"], timeout=1)
