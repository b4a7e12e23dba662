"""Every numeric flag and every output flag of every command, at and past its bounds
(issue 22).

The flags are found by walking the parser, so a new command or flag is covered without
editing this file: no flag may be a bare ``int`` / ``float`` (those let NaN, inf and
negative values reach an algorithm), every numeric flag is a
:func:`commsched.validation.flag`, and a value outside its range (NaN, inf, past a bound,
not a number) is an exit 2 with one stderr line naming the flag, before any work.
"""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fuzz_cli import FUZZ, SENTINEL, check_rejected, guarded_output, run
from hypothesis import given, settings
from hypothesis import strategies as st

from commsched.cli import build_parser
from commsched.validation import input_file, output_file


def _parsers(p: argparse.ArgumentParser, words: tuple[str, ...] = ()
             ) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    yield words, p
    for a in p._actions:
        if isinstance(a, argparse._SubParsersAction):
            for name, sub in a.choices.items():
                yield from _parsers(sub, (*words, name))


PARSERS = list(_parsers(build_parser()))[1:]  # not the top level


def _valid(a: argparse.Action, out_dir: Path) -> list[str]:
    """A valid value (or values) for action ``a``."""
    n = a.nargs if isinstance(a.nargs, int) else 1
    if a.choices:
        return [str(next(iter(a.choices)))] * n
    if a.type is output_file:
        return [str(out_dir / f"out{i}{a.dest}.json") for i in range(n)]
    bounds = getattr(a.type, "bounds", None)
    if bounds:
        lo, hi, integer, lo_open = bounds
        v = 0 if lo is None else (min(lo + 1, hi) if lo_open else lo)
        return [str(int(v) if integer else v)] * n
    return ["x"] * n


def _base(words: tuple[str, ...], p: argparse.ArgumentParser, out_dir: Path,
          skip: argparse.Action | None = None) -> list[str]:
    """The subcommand words, every positional and every required option, all valid."""
    argv = list(words)
    for a in p._actions:
        if a is skip or isinstance(a, (argparse._SubParsersAction, argparse._HelpAction)):
            continue
        if not a.option_strings:
            argv += _valid(a, out_dir)
        elif a.required:
            argv += [a.option_strings[-1], *_valid(a, out_dir)]
    return argv


NUMERIC = [(w, p, a) for w, p in PARSERS for a in p._actions if hasattr(a.type, "bounds")]
OUTPUTS = [(w, p, a) for w, p in PARSERS for a in p._actions if a.type is output_file]


def test_no_bare_numeric_flag() -> None:
    bad = [f"{' '.join(w)} {'/'.join(a.option_strings) or a.dest}" for w, p in PARSERS
           for a in p._actions
           if a.type in (int, float) or (a.type is None and not isinstance(a.default, bool)
                                         and isinstance(a.default, (int, float)))]
    assert not bad, f"numeric flags without validation.flag: {bad}"
    assert len(NUMERIC) > 40 and len(OUTPUTS) > 10


def test_bounds_are_accepted() -> None:
    """Each numeric flag accepts its own bounds (the range is inclusive unless open)."""
    for _, _, a in NUMERIC:
        lo, hi, integer, lo_open = a.type.bounds
        for v in (lo, hi):
            if v is not None and not (v == lo and lo_open):
                a.type(str(int(v) if integer else v))


def _outside(bounds: tuple[Any, ...]) -> list[str]:
    lo, hi, integer, lo_open = bounds
    out = ["nan", "-nan", "inf", "-inf", "NaN", "Infinity", "1e400", "x", "", "9" * 5000]
    if lo is not None:
        out.append(str(lo) if lo_open else str(lo - 1 if integer else lo - abs(lo) * 1e-9 - 1e-12))
    if hi is not None:
        out.append(str(hi + 1 if integer else hi * 1.001 + 1))
    if integer:
        out.append("1.5")
    return out


@settings(FUZZ, max_examples=150)
@given(data=st.data())
def test_numeric_flags_reject_out_of_range(tmp_path_factory: pytest.TempPathFactory,
                                           data: st.DataObject) -> None:
    out_dir = tmp_path_factory.mktemp("flags")
    words, p, a = data.draw(st.sampled_from(NUMERIC))
    value = data.draw(st.sampled_from(_outside(a.type.bounds)))
    n = a.nargs if isinstance(a.nargs, int) else 1
    argv = [*_base(words, p, out_dir, skip=a), a.option_strings[-1], value,
            *_valid(a, out_dir)[1:n]]
    o = run(argv)
    check_rejected(o, a.option_strings, argv)
    assert not any(out_dir.iterdir()), f"{argv}: wrote {list(out_dir.iterdir())}"


@pytest.mark.parametrize("words, flag", [(w, a.option_strings[-1]) for w, _, a in OUTPUTS])
def test_output_flags_refuse_bad_destinations(tmp_path: Path, words: tuple[str, ...],
                                              flag: str) -> None:
    """A directory, a path under a file, an empty path: exit 2 naming the flag."""
    p, a = next((p, a) for w, p, a in OUTPUTS if w == words and flag in a.option_strings)
    a_file = guarded_output(tmp_path / "a_file")
    for bad in (str(tmp_path), str(a_file / "x.json"), ""):
        argv = [*_base(words, p, tmp_path, skip=a), flag, bad]
        check_rejected(run(argv), a.option_strings, argv)
    assert a_file.read_bytes() == SENTINEL


def test_unwritable_directory_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A read-only directory (simulated: the tests may run as root, which writes anyway)."""
    ro = tmp_path / "ro"
    ro.mkdir()
    real = os.access
    monkeypatch.setattr(os, "access", lambda path, mode: False if Path(path) == ro
                        else real(path, mode))
    argv = ["generate", "par", "--n", "2", "-o", str(ro / "g.json")]
    o = run(argv)
    check_rejected(o, ["-o/--output"], argv)
    assert "not writable" in o.stderr and not (ro / "g.json").exists()


@pytest.mark.parametrize("words", sorted({w for w, p, _ in OUTPUTS
                                          if any(x.type is input_file and not x.option_strings
                                                 for x in p._actions)}))
def test_output_is_not_an_input(tmp_path: Path, words: tuple[str, ...]) -> None:
    """``commsched view ps T.json.gz -o T.json.gz`` and the like refuse, the input intact."""
    p = next(p for w, p, _ in OUTPUTS if w == words)
    out = next(a for a in p._actions if a.type is output_file)
    victim = guarded_output(tmp_path / "input.json")
    argv = []
    for x in _base(words, p, tmp_path, skip=out):
        argv.append(str(victim) if x == "x" else x)
    argv += [out.option_strings[-1], str(victim)]
    check_rejected(run(argv), [str(victim)], argv)
    assert victim.read_bytes() == SENTINEL


@pytest.mark.parametrize("argv, flag", [
    (["generate", "random", "--levels", "100000", "--max-per-level", "100000"], "--levels"),
])
def test_sizes_from_flags_are_bounded(tmp_path: Path, argv: list[str], flag: str) -> None:
    argv = [*argv, "-o", str(tmp_path / "g.json")]
    o = run(argv)
    check_rejected(o, [flag], argv)
    assert "bound" in o.stderr and math.isfinite(o.seconds)
