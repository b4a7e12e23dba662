"""The checks every reader and every command-line flag share.

Readers decode and parse through :func:`read_text` and :func:`parse_json` (gzip, binary,
nesting depth and integer limits become one-line errors naming the file), check numbers
with :func:`number` (type, finiteness, range) and sizes from headers or flags with
:func:`within` (a stated bound checked before anything is allocated). Every numeric flag
of the CLI is typed with :func:`flag`, every output flag with :func:`output_file` and
every input file with :func:`input_file`, so that :func:`check_outputs_not_inputs` can
refuse to overwrite an input. All errors are :class:`~commsched.errors.CommschedError`
(or :class:`argparse.ArgumentTypeError` for flags): one line, exit status 2.

The bounds (README, "What the CLI promises"):

* :data:`MAX_INPUT_BYTES`: an input file (after gzip decompression) is at most 1 GiB;
* :data:`MAX_SECONDS`: a duration or time in a file is at most 1e9 s (about 32 years), so
  that sums over millions of ops stay finite;
* :data:`MAX_BYTES`: a byte count is at most 2**53 (exact in a float);
* :data:`MAX_CELLS`: an array sized from a header or flag has at most 1e8 cells.

Examples
--------
>>> number(3, "op 'a': duration", lo=0, hi=MAX_SECONDS)
3
>>> number(float("nan"), "op 'a': duration", lo=0)
Traceback (most recent call last):
...
commsched.errors.CommschedError: op 'a': duration must be a finite number >= 0, got nan
>>> flag(lo=0)("1.5")
1.5
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import math
import os
import zlib
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from commsched.atomic import check_output
from commsched.errors import CommschedError

__all__ = [
    "MAX_BYTES",
    "MAX_CELLS",
    "MAX_INPUT_BYTES",
    "MAX_SECONDS",
    "SEED",
    "InputPath",
    "OutputPath",
    "check_outputs_not_inputs",
    "flag",
    "input_file",
    "number",
    "output_file",
    "parse_json",
    "read_text",
    "short",
    "within",
]

#: Largest input file, bytes after decompression.
MAX_INPUT_BYTES = 2**30
#: Largest duration or time in an input file, seconds.
MAX_SECONDS = 1e9
#: Largest byte count in an input file (every integer up to it is exact in a float).
MAX_BYTES = 2**53
#: Largest array (cells) that a header or a flag may ask for.
MAX_CELLS = 10**8

_GZIP_MAGIC = b"\x1f\x8b"


def short(value: object, limit: int = 40) -> str:
    """``repr(value)``, cut to ``limit`` characters for a one-line message."""
    try:
        text = repr(value)
    except ValueError:  # an int too long to print
        text = f"<{type(value).__name__} too large to print>"
    return text if len(text) <= limit else text[:limit - 3] + "..."


def read_text(path: str | os.PathLike[str]) -> str:
    """The text of ``path``, gunzipped if it starts with the gzip magic, decoded as UTF-8.

    Raises
    ------
    CommschedError
        Naming the file: it cannot be read, it is larger than :data:`MAX_INPUT_BYTES`, it
        is a broken gzip stream, or it is not UTF-8 text (a binary file).
    """
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_INPUT_BYTES + 1)
        if raw[:2] == _GZIP_MAGIC:
            with gzip.GzipFile(fileobj=io.BytesIO(raw)) as z:
                raw = z.read(MAX_INPUT_BYTES + 1)
    except OSError as e:  # also gzip.BadGzipFile
        raise CommschedError(f"{os.fspath(path)}: cannot read: {e.strerror or e}") from None
    except (EOFError, zlib.error) as e:
        raise CommschedError(f"{os.fspath(path)}: broken gzip data: {e}") from None
    if len(raw) > MAX_INPUT_BYTES:
        raise CommschedError(f"{os.fspath(path)}: larger than the bound of "
                             f"{MAX_INPUT_BYTES} bytes")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise CommschedError(f"{os.fspath(path)}: not UTF-8 text (a binary file?): byte "
                             f"{e.start}") from None


def parse_json(text: str, source: str | os.PathLike[str]) -> Any:
    """Parse JSON; malformed, too deeply nested or over-long numbers name ``source``."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise CommschedError(f"{os.fspath(source)}: invalid JSON at line {e.lineno} column "
                             f"{e.colno}: {e.msg}") from None
    except RecursionError:
        raise CommschedError(f"{os.fspath(source)}: JSON nested too deeply") from None
    except ValueError as e:  # an integer literal beyond Python's digit limit
        raise CommschedError(f"{os.fspath(source)}: invalid JSON: "
                             f"{str(e).split(';')[0]}") from None


def _g(x: float) -> str:
    return str(x) if isinstance(x, int) else f"{x:g}"


def _describe(lo: float | None, hi: float | None, integer: bool, lo_open: bool) -> str:
    what = "an integer" if integer else "a finite number"
    if lo is not None and hi is not None:
        return f"{what} {'>' if lo_open else '>='} {_g(lo)} and <= {_g(hi)}"
    if lo is not None:
        return f"{what} {'>' if lo_open else '>='} {_g(lo)}"
    if hi is not None:
        return f"{what} <= {_g(hi)}"
    return what


def number(value: object, what: str, lo: float | None = None, hi: float | None = None, *,
           integer: bool = False, lo_open: bool = False) -> Any:
    """Return ``value`` if it is a finite number (an int if ``integer``) in range.

    Parameters
    ----------
    value
        The value read from a file.
    what
        The file and field, e.g. ``"g.json: node 'a': duration"``; starts the message.
    lo, hi
        Inclusive bounds (``lo`` exclusive if ``lo_open``); None: unbounded.
    integer
        Require an ``int`` (``bool`` is never a number here).

    Raises
    ------
    CommschedError
        ``"<what> must be <kind and range>, got <value>"``.
    """
    ok = isinstance(value, int) if integer else isinstance(value, (int, float))
    if ok and not isinstance(value, bool):
        try:
            x = float(value)  # type: ignore[arg-type]
        except OverflowError:
            x = math.inf
        v: Any = value  # compared exactly (an int is not rounded to a float)
        if (math.isfinite(x) and (lo is None or (v > lo if lo_open else v >= lo))
                and (hi is None or v <= hi)):
            return value
    raise CommschedError(f"{what} must be {_describe(lo, hi, integer, lo_open)}, "
                         f"got {short(value)}")


def within(count: float, what: str, bound: int = MAX_CELLS) -> int:
    """Check a size taken from a header or a flag against ``bound`` before allocating.

    ``what`` names the flag or header field and what it sizes, e.g. ``"--bin-ms: usage
    bins"``. Returns ``count`` as an int.

    Raises
    ------
    CommschedError
        ``"<what>: <count> exceeds the bound of <bound>"``.
    """
    if not math.isfinite(count) or count > bound:
        raise CommschedError(f"{what}: {count:.4g} exceeds the bound of {bound}")
    return int(count)


def flag(lo: float | None = None, hi: float | None = None, *, integer: bool = False,
         lo_open: bool = False) -> Callable[[str], Any]:
    """The argparse ``type`` of a numeric flag: a finite number (or int) in range.

    NaN and infinities never pass. The error (``argparse.ArgumentTypeError``) reads, after
    argparse's ``argument --flag:``, ``must be a finite number > 0, got 'nan'``.
    """
    def parse(text: str) -> Any:
        try:
            value: Any = int(text) if integer else float(text)
        except ValueError:
            value = text
        try:
            return number(value, "", lo, hi, integer=integer, lo_open=lo_open)
        except CommschedError:
            raise argparse.ArgumentTypeError(
                f"must be {_describe(lo, hi, integer, lo_open)}, got {short(text)}"
            ) from None

    parse.__name__ = "integer" if integer else "number"
    parse.bounds = (lo, hi, integer, lo_open)  # type: ignore[attr-defined]  # for tests
    return parse


#: The argparse ``type`` of every ``--seed``: an integer in ``0..2**63-1``.
SEED = flag(0, 2**63 - 1, integer=True)


class InputPath(str):
    """A path an argument reads (:func:`input_file`)."""


class OutputPath(str):
    """A path an argument writes (:func:`output_file`), checked by :func:`check_output`."""


def input_file(text: str) -> InputPath:
    """The argparse ``type`` of an input file: marks it so no output may overwrite it."""
    return InputPath(text)


def output_file(text: str) -> OutputPath:
    """The argparse ``type`` of an output file: :func:`commsched.atomic.check_output`
    before any work, as an argparse error naming the flag."""
    try:
        check_output(text)
    except CommschedError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return OutputPath(text)


def _same(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return Path(a).resolve() == Path(b).resolve()


def check_outputs_not_inputs(values: Iterable[object]) -> None:
    """Refuse a run whose output path is one of its input paths (it would clobber it).

    ``values`` are the parsed arguments (lists are looked into); inputs are the
    :class:`InputPath` among them, outputs the :class:`OutputPath`.
    """
    flat: list[object] = []
    for v in values:
        flat.extend(v if isinstance(v, list) else [v])
    inputs = [v for v in flat if isinstance(v, InputPath)]
    for out in (v for v in flat if isinstance(v, OutputPath)):
        for inp in inputs:
            if _same(out, inp):
                raise CommschedError(f"{out}: is also an input of this command; refusing to "
                                     "overwrite it")
