"""Progress bars for long commands (tracing, live runs, multi-worker sweeps).

:func:`progress` and :func:`bar` are :mod:`tqdm` bars on stderr that are shown only when
stderr is a terminal: in pipeline logs (Snakemake redirects stderr to a file) they are
disabled and print nothing.

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


def bar(total: int | None, desc: str) -> tqdm[Any]:
    """A bar to advance by hand (``.update(n)``); use it as a context manager."""
    return tqdm(total=total, desc=desc, disable=not show_progress(), leave=False,
                file=sys.stderr, dynamic_ncols=True)


def progress(items: Iterable[T], desc: str, total: int | None = None) -> tqdm[T]:
    """Iterate over ``items`` with a bar named ``desc``."""
    return tqdm(items, desc=desc, total=total, disable=not show_progress(), leave=False,
                file=sys.stderr, dynamic_ncols=True)
