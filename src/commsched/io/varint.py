"""Protocol Buffers' base-128 varints (the length prefixes of Chakra's files, the fields of
a gRPC message): one reader and one writer for every caller.

References
----------
Protocol Buffers, "Encoding", https://protobuf.dev/programming-guides/encoding/ (varints).
"""

from __future__ import annotations

__all__ = ["read_varint", "write_varint"]


def read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    """The varint at ``buf[pos:]`` and the position after it.

    Parameters
    ----------
    buf : bytes
        The data.
    pos : int
        Where the varint starts.

    Returns
    -------
    tuple of (int, int)
        ``(value, position after its last byte)``.

    Raises
    ------
    ValueError
        If the data end before the varint does (``truncated varint``) or it runs past 64
        bits (``varint longer than 64 bits``).

    Examples
    --------
    >>> read_varint(b"\\x96\\x01\\x00", 0)
    (150, 2)
    """
    value = shift = 0
    while True:
        if pos >= len(buf):
            raise ValueError("truncated varint")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7
        if shift > 63:
            raise ValueError("varint longer than 64 bits")


def write_varint(value: int, out: bytearray) -> None:
    """Append ``value`` (>= 0) to ``out`` as a varint.

    Parameters
    ----------
    value : int
        The number (>= 0).
    out : bytearray
        Where to append it.

    Examples
    --------
    >>> out = bytearray(); write_varint(150, out); bytes(out)
    b'\\x96\\x01'
    """
    while True:
        b = value & 0x7F
        value >>= 7
        out.append(b | 0x80 if value else b)
        if not value:
            return
