"""Progress bars for long commands (tracing, live runs, multi-worker sweeps, replays).

:func:`progress` and :func:`bar` are :mod:`tqdm` bars on stderr that are shown only when
stderr is a terminal: in pipeline logs (Snakemake redirects stderr to a file) they are
disabled and print nothing, unless ``log_every`` is given: then a step that runs longer
than ``log_every`` seconds writes the bar's state as one plain line (no carriage returns)
every ``log_every`` seconds and once at the end.

>>> list(progress(range(3), "steps"))
[0, 1, 2]
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Any, TypeVar

from tqdm import tqdm

__all__ = ["bar", "progress", "show_progress"]

T = TypeVar("T")


def show_progress() -> bool:
    """Whether bars are shown: stderr is a terminal."""
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):  # replaced or closed stderr
        return False


class _Lines:
    """A file for :mod:`tqdm` that turns each redraw into one line on stderr."""

    def write(self, s: str) -> None:
        s = s.strip("\r\n")
        if s.strip():
            sys.stderr.write(s + "\n")

    def flush(self) -> None:
        sys.stderr.flush()


def bar(total: int | None, desc: str, log_every: float | None = None) -> tqdm[Any]:
    """A bar to advance by hand (``.update(n)``); use it as a context manager. With
    ``log_every`` (seconds) and stderr not a terminal, one progress line per period."""
    if show_progress() or log_every is None:
        return tqdm(total=total, desc=desc, disable=not show_progress(), leave=False,
                    file=sys.stderr, dynamic_ncols=True)
    return tqdm(total=total, desc=desc, file=_Lines(), mininterval=log_every,
                maxinterval=log_every, delay=log_every, ncols=100, ascii=True, leave=True)


def progress(items: Iterable[T], desc: str, total: int | None = None) -> tqdm[T]:
    """Iterate over ``items`` with a bar named ``desc``."""
    return tqdm(items, desc=desc, total=total, disable=not show_progress(), leave=False,
                file=sys.stderr, dynamic_ncols=True)
