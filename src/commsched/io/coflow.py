"""Read Coflow-Benchmark traces (``coflow/coflow-benchmark``, e.g. ``FB2010-1Hr-150-0.txt``).

Format (the repository's README): line 1 is ``<ports> <coflows>``; then one Coflow per line,
``<id> <arrival ms> <#mappers> <mapper port>... <#reducers> <reducer port>:<MB>...``, where
a port is in ``0..ports-1`` and ``MB`` is what the reducer receives from all mappers.
:func:`read_coflow_trace` checks every line (counts, port range, sizes, non-decreasing
arrivals, the Coflow count of the header, at least one Coflow, at most :data:`MAX_PORTS`
ports, arrivals up to 1e12 ms, reducer MB up to :data:`MAX_MB`); a malformed line raises a one-line
:class:`~commsched.errors.CommschedError` naming the file and the line.

:meth:`CoflowTrace.flows` expands the Coflows into flows the way Varys' simulator does:
every mapper sends every reducer an equal share of the reducer's MB.

>>> t = parse_coflow_trace("4 2\\n1 0 2 0 1 1 2:4.0\\n2 5 1 3 2 0:1.0 1:2.0\\n")
>>> t.ports, t.ids.tolist(), t.arrival_ms.tolist()
(4, [1, 2], [0.0, 5.0])
>>> f = t.flows(mb=1.0)
>>> f["src"].tolist(), f["dst"].tolist(), f["size"].tolist(), f["coflow"].tolist()
([0, 1, 3, 3], [2, 2, 0, 1], [2.0, 2.0, 1.0, 2.0], [0, 0, 1, 1])
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from commsched.errors import CommschedError
from commsched.validation import MAX_SECONDS, read_text, short, within

__all__ = ["MAX_MB", "MAX_PORTS", "MB", "CoflowTrace", "parse_coflow_trace", "read_coflow_trace"]

#: Bytes per trace MB (2**20, as Varys' simulator counts).
MB = float(2**20)
#: Largest port count of a trace header (the switch model allocates per port).
MAX_PORTS = 2**16
#: Largest shuffle of one reducer, MB (1 EiB).
MAX_MB = 2.0**40
_MAX_INT = 2**62  # every integer field fits an int64


@dataclass(frozen=True)
class CoflowTrace:
    """Coflows of a trace: ``ids``, ``arrival_ms`` and per Coflow its mapper ports and
    ``(reducer port, MB)`` pairs."""

    ports: int
    ids: np.ndarray
    arrival_ms: np.ndarray
    mappers: tuple[np.ndarray, ...]
    reducers: tuple[np.ndarray, ...]
    reducer_mb: tuple[np.ndarray, ...]

    def __len__(self) -> int:
        return len(self.ids)

    def total_mb(self) -> np.ndarray:
        """Total shuffle MB of each Coflow."""
        return np.array([float(m.sum()) for m in self.reducer_mb])

    def flows(self, mb: float = MB) -> dict[str, np.ndarray]:
        """One flow per (mapper, reducer) of every Coflow: ``src``, ``dst`` ports,
        ``size`` (bytes: the reducer's MB times ``mb`` over the number of mappers),
        ``release`` (s) and ``coflow`` (the Coflow's index in the trace)."""
        src, dst, size, rel, cof = [], [], [], [], []
        for k, (m, r, v) in enumerate(zip(self.mappers, self.reducers, self.reducer_mb,
                                          strict=True)):
            s, d = np.meshgrid(m, r, indexing="ij")
            src.append(s.ravel())
            dst.append(d.ravel())
            size.append(np.broadcast_to(v[None, :] * mb / len(m), s.shape).ravel())
            rel.append(np.full(s.size, self.arrival_ms[k] / 1000.0))
            cof.append(np.full(s.size, k))
        return {"src": np.concatenate(src).astype(np.int64),
                "dst": np.concatenate(dst).astype(np.int64),
                "size": np.concatenate(size).astype(float),
                "release": np.concatenate(rel), "coflow": np.concatenate(cof)}


def _int(tok: str, what: str, where: str) -> int:
    try:
        value = int(tok)
    except ValueError:
        raise CommschedError(f"{where}: {what} {short(tok)} is not an integer") from None
    if abs(value) > _MAX_INT:
        raise CommschedError(f"{where}: {what} {short(tok)} is out of range "
                             f"(|x| <= {_MAX_INT})")
    return value


def parse_coflow_trace(text: str, name: str = "<trace>") -> CoflowTrace:
    """Parse the text of a Coflow-Benchmark trace (module docstring); ``name`` is used in
    error messages."""
    lines = text.splitlines()
    if not lines or len(lines[0].split()) != 2:
        raise CommschedError(f"{name}:1: header must be '<ports> <coflows>'")
    ports = _int(lines[0].split()[0], "port count", f"{name}:1")
    count = _int(lines[0].split()[1], "Coflow count", f"{name}:1")
    if ports < 1 or count < 1:
        raise CommschedError(f"{name}:1: needs ports >= 1 and coflows >= 1")
    within(ports, f"{name}:1: port count (the switch has one port per trace port)",
           MAX_PORTS)
    ids: list[int] = []
    arr: list[int] = []
    maps: list[np.ndarray] = []
    reds: list[np.ndarray] = []
    mbs: list[np.ndarray] = []
    seen: dict[int, int] = {}  # Coflow id -> its line
    for no, line in enumerate(lines[1:], start=2):
        t = line.split()
        if not t:
            continue
        where = f"{name}:{no}"
        if len(t) < 4:
            raise CommschedError(f"{where}: too few fields for a Coflow")
        cid = _int(t[0], "Coflow id", where)
        ms = _int(t[1], "arrival time", where)
        nm = _int(t[2], "mapper count", where)
        if nm < 1 or len(t) < 4 + nm:
            raise CommschedError(f"{where}: mapper count {nm} does not match the line")
        m = np.array([_int(x, "mapper port", where) for x in t[3:3 + nm]], dtype=np.int64)
        nr = _int(t[3 + nm], "reducer count", where)
        rest = t[4 + nm:]
        if nr < 1 or len(rest) != nr:
            raise CommschedError(f"{where}: reducer count {nr} but {len(rest)} reducer "
                                 "entries")
        r = np.zeros(nr, dtype=np.int64)
        v = np.zeros(nr)
        for j, tok in enumerate(rest):
            port, sep, amount = tok.partition(":")
            if not sep:
                raise CommschedError(f"{where}: reducer entry {tok!r} is not <port>:<MB>")
            r[j] = _int(port, "reducer port", where)
            try:
                v[j] = float(amount)
            except ValueError:
                raise CommschedError(f"{where}: reducer MB {amount!r} is not a number") from None
        if min(m.min(), r.min()) < 0 or max(m.max(), r.max()) >= ports:
            raise CommschedError(f"{where}: a port is outside 0..{ports - 1}")
        if not np.all(np.isfinite(v)) or np.any(v <= 0) or np.any(v > MAX_MB):
            raise CommschedError(f"{where}: reducer MB must be positive and <= {MAX_MB:g}")
        if ms < 0 or ms > MAX_SECONDS * 1e3 or (arr and ms < arr[-1]):
            raise CommschedError(f"{where}: arrival time {short(ms)} ms is negative, above "
                                 f"{MAX_SECONDS * 1e3:g} or before the previous Coflow's")
        if cid in seen:
            raise CommschedError(f"{where}: Coflow id {cid} already on line {seen[cid]}")
        seen[cid] = no
        ids.append(cid)
        arr.append(ms)
        maps.append(m)
        reds.append(r)
        mbs.append(v)
    if len(ids) != count:
        raise CommschedError(f"{name}:1: header says {count} Coflows, the file has {len(ids)}")
    return CoflowTrace(ports, np.array(ids, dtype=np.int64), np.array(arr, dtype=float),
                       tuple(maps), tuple(reds), tuple(mbs))


def read_coflow_trace(path: str | os.PathLike[str]) -> CoflowTrace:
    """Read a Coflow-Benchmark trace file (module docstring; gzip-compressed or not)."""
    return parse_coflow_trace(read_text(path), os.fspath(path))
