"""Shared harness of the fuzz tests (tests/test_fuzz_*.py): run the CLI in-process on
hostile input and check the promises of the README ("What the CLI promises")."""

from __future__ import annotations

import contextlib
import io
import json
import math
import signal
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from commsched.cli import main

#: Every fuzz test: a fixed number of examples, derandomized (the same inputs every run).
FUZZ = settings(max_examples=25, derandomize=True, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
#: A run may take this long (README: no hang).
LIMIT_S = 10.0
SENTINEL = b"a good output that a failed run must not touch\n"


class Hang(Exception):
    """The command ran past :data:`LIMIT_S`."""


@dataclass
class Outcome:
    rc: int
    stderr: str
    stdout: str
    seconds: float


@contextlib.contextmanager
def _deadline(seconds: float) -> Iterator[None]:
    def alarm(signum: int, frame: Any) -> None:
        raise Hang(f"ran past {seconds} s")

    old = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def run(argv: Sequence[str]) -> Outcome:
    """``commsched ARGV`` in this process; an exception other than SystemExit propagates
    (that is a traceback for the user), as does :class:`Hang`."""
    err, out = io.StringIO(), io.StringIO()
    t0 = time.perf_counter()
    with _deadline(LIMIT_S), contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        try:
            rc = main(list(argv))
        except SystemExit as e:
            rc = e.code if isinstance(e.code, int) else 2
    return Outcome(rc, err.getvalue(), out.getvalue(), time.perf_counter() - t0)


def check_rejected(o: Outcome, names: Sequence[str], argv: Sequence[str]) -> None:
    """Exit 2, exactly one line on stderr naming one of ``names``, no traceback."""
    lines = o.stderr.splitlines()
    assert o.rc == 2, f"{argv}: exit {o.rc}, expected 2; stdout {o.stdout[-300:]!r}"
    assert len(lines) == 1, f"{argv}: stderr is not one line: {o.stderr[-600:]!r}"
    assert "Traceback" not in o.stderr
    assert any(str(n) in lines[0] for n in names), f"{argv}: {lines[0]!r} names none of {names}"


def check_handled(o: Outcome, names: Sequence[str], argv: Sequence[str]) -> None:
    """Either accepted (exit 0, nothing on stderr) or rejected (:func:`check_rejected`)."""
    if o.rc == 0:
        assert o.stderr == "", f"{argv}: exit 0 with stderr {o.stderr[-600:]!r}"
    else:
        check_rejected(o, names, argv)


def guarded_output(path: Path) -> Path:
    """Create ``path`` with :data:`SENTINEL` content (to check a failed run left it alone)."""
    path.write_bytes(SENTINEL)
    return path


# --------------------------------------------------------------------------------------
# Mutations of valid inputs.

#: Values that break any numeric field: not finite, negative, beyond every bound, wrong type.
BAD_NUMBERS: list[Any] = [math.nan, math.inf, -math.inf, -1, -1e-9, 1e308, 10**400, "7",
                          None, True, [], {}]
#: Values of any type, for type swaps.
ANY_VALUES: list[Any] = [*BAD_NUMBERS, 0, 1, 0.5, "", "x" * 1000, [1, [2, [3]]],
                         {"a": {"b": None}}, "\u0000\ud7ff"]


def _paths(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc[:6]):  # the first few entries of long lists
            out += _paths(v, (*prefix, i))
    return out


def _get(doc: Any, path: tuple[Any, ...]) -> Any:
    for k in path:
        doc = doc[k]
    return doc


def _set(doc: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    _get(doc, path[:-1])[path[-1]] = value
    return doc


def _delete(doc: Any, path: tuple[Any, ...]) -> Any:
    if path:
        del _get(doc, path[:-1])[path[-1]]
    return doc


_DEEP = "\u0000deep nesting here\u0000"


@st.composite
def json_mutation(draw: st.DrawFn, doc: Any) -> bytes:
    """Bytes of a mutated copy of the JSON document ``doc``: a value swapped (type, NaN,
    inf, negative, huge), a key or entry deleted, deep nesting inserted, or the text
    truncated or re-encoded."""
    doc = json.loads(json.dumps(doc))
    kind = draw(st.sampled_from(["swap", "delete", "nest", "truncate", "encode"]))
    path = draw(st.sampled_from(_paths(doc)))
    if kind == "swap":
        doc = _set(doc, path, draw(st.sampled_from(ANY_VALUES)))
    elif kind == "delete":
        doc = _delete(doc, path)
    elif kind == "nest":
        doc = _set(doc, path, _DEEP)
    text = json.dumps(doc).encode()
    if kind == "nest":
        n = draw(st.sampled_from([100, 5000, 200_000]))
        text = text.replace(json.dumps(_DEEP).encode(), b"[" * n + b"]" * n)
    if kind == "truncate":
        text = text[:draw(st.integers(0, max(0, len(text) - 1)))]
    elif kind == "encode":
        text = draw(st.sampled_from([
            json.dumps(doc).encode("utf-16"),
            b"\x1f\x8b" + text,                      # a broken gzip stream
            bytes(range(256)),                        # binary
            text.replace(b'"', b"\xff", 1),           # one invalid UTF-8 byte
        ]))
    return text


@st.composite
def numeric_swap(draw: st.DrawFn, doc: Any, paths: Sequence[tuple[Any, ...]]) -> bytes:
    """A copy of ``doc`` with one of the numeric fields at ``paths`` set to a value that is
    invalid for every numeric field (:data:`BAD_NUMBERS`); the reader must reject it."""
    doc = json.loads(json.dumps(doc))
    path = draw(st.sampled_from(list(paths)))
    return json.dumps(_set(doc, path, draw(st.sampled_from(BAD_NUMBERS)))).encode()


BAD_CELLS = ["nan", "inf", "-1", "1e400", "9" * 30, "9" * 5000, "x", "", "1.5", "0x10"]


@st.composite
def text_mutation(draw: st.DrawFn, text: str, sep: str) -> bytes:
    """A mutated copy of a line-based text format: a field replaced by a bad value
    (:data:`BAD_CELLS`), a line deleted or duplicated, truncation, binary or UTF-16."""
    lines = text.splitlines()
    kind = draw(st.sampled_from(["cell", "cell", "drop", "dup", "truncate", "encode"]))
    i = draw(st.integers(0, len(lines) - 1))
    if kind == "cell":
        cells = lines[i].split(sep)
        j = draw(st.integers(0, len(cells) - 1))
        cells[j] = draw(st.sampled_from(BAD_CELLS))
        lines[i] = sep.join(cells)
    elif kind == "drop":
        del lines[i]
    elif kind == "dup":
        lines.insert(i, lines[i])
    out = ("\n".join(lines) + "\n").encode()
    if kind == "truncate":
        out = out[:draw(st.integers(0, len(out) - 1))]
    elif kind == "encode":
        out = draw(st.sampled_from([out.decode().encode("utf-16"), bytes(range(256)),
                                    b"\x1f\x8b" + out]))
    return out
