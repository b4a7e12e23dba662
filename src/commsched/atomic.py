"""Atomic writes: a failed run never leaves a half-written file that a later step trusts.

:func:`check_output` is the one check of an output path; the CLI runs it on every output
flag before any work (:func:`commsched.validation.output_file`), and the writers below run
it again, so a destination that went bad meanwhile is still a one-line error.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from commsched.errors import CommschedError

__all__ = ["atomic_write_bytes", "atomic_write_text", "check_output"]


def check_output(path: str | os.PathLike[str]) -> Path:
    """Raise :class:`CommschedError` unless ``path`` can be written as a file.

    The path must be non-empty and not a directory; its nearest existing ancestor must be
    a writable directory (missing directories below it are created by the writers).

    Returns
    -------
    Path
        ``path`` as a :class:`~pathlib.Path`.

    Raises
    ------
    CommschedError
        One line naming the path and what is wrong with it.
    """
    text = os.fspath(path)
    if not text.strip():
        raise CommschedError("output path is empty")
    p = Path(text)
    if p.is_dir() or text.endswith(os.sep):
        raise CommschedError(f"{text}: is a directory, expected a file path")
    parent = p.parent
    while not parent.exists():
        if parent == parent.parent:
            break
        parent = parent.parent
    if not parent.is_dir():
        raise CommschedError(f"{text}: cannot create it: {parent} is not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise CommschedError(f"{text}: cannot create it: directory {parent} is not writable")
    return p


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to a temporary file beside ``path``, then rename it over ``path``.

    The file gets the usual permissions (``0o666`` less the umask). Raises
    :class:`CommschedError` naming ``path`` when it cannot be written.
    """
    p = check_output(path)
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=f".{p.name}.", suffix=".tmp")
    except OSError as e:
        raise CommschedError(f"{p}: cannot write: {e.strerror or e}") from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, p)
    except OSError as e:
        Path(tmp).unlink(missing_ok=True)
        raise CommschedError(f"{p}: cannot write: {e.strerror or e}") from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    """Text form of :func:`atomic_write_bytes` (UTF-8)."""
    atomic_write_bytes(path, text.encode("utf-8"))
