"""What the TicTac drivers ``sweeps`` and ``live`` add to the shared driver skeleton.

:mod:`commsched.driver` is the skeleton of every experiment driver. Two needs of these
drivers are not in it yet:

* they take a whole config section either from a config file (``--config``, default
  ``config/config.yaml``, for a run by hand) or as JSON (``--config-json``, what the
  Snakemake rules pass); either way it is checked against the package's config schema
  (:func:`commsched.driver.config_section`);
* their notebooks draw one of several figures, chosen by a ``kind`` parameter that is
  not an input table (:class:`KindFigureConfig`).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from commsched import driver
from commsched.errors import CommschedError
from commsched.io.structured import read_yaml

__all__ = ["KindFigureConfig", "add_config_options", "load_section", "section_from_options"]


def add_config_options(p: argparse.ArgumentParser, section: str) -> None:
    """Add the mutually exclusive ``--config FILE`` and ``--config-json JSON`` to ``p``.

    Parameters
    ----------
    p : argparse.ArgumentParser
        A driver's parser (:func:`commsched.driver.parser`).
    section : str
        The config section the driver reads (for the help texts).
    """
    src = p.add_mutually_exclusive_group()
    src.add_argument("--config", default="config/config.yaml",
                     help=f"config file with a '{section}' section (default %(default)s)")
    src.add_argument("--config-json", help=f"the '{section}' section as a JSON object")


def load_section(path: str | Path, section: str) -> dict[str, Any]:
    """One section of a YAML (or JSON) config file, checked against the schema.

    Parameters
    ----------
    path : str or Path
        The config file.
    section : str
        The top-level key.

    Returns
    -------
    dict
        The section.

    Raises
    ------
    CommschedError
        One line naming the file: it is missing or malformed, has no such section, or
        the schema rejects the section.
    """
    data = read_yaml(path)
    if not isinstance(data, dict) or section not in data:
        raise CommschedError(f"{path}: no '{section}' section")
    try:
        return driver.config_section(section, data[section])
    except CommschedError as e:
        raise CommschedError(f"{path}: {e}") from None


def section_from_options(args: argparse.Namespace, section: str) -> dict[str, Any]:
    """The section that :func:`add_config_options`' options name, checked.

    Parameters
    ----------
    args : argparse.Namespace
        Parsed arguments with ``config`` and ``config_json``.
    section : str
        The top-level key.

    Returns
    -------
    dict
        The section: ``--config-json`` when given, else the one of ``--config``.

    Raises
    ------
    CommschedError
        Invalid JSON, or as :func:`load_section`.
    """
    if args.config_json is not None:
        return driver.config_section(section, args.config_json)
    return load_section(args.config, section)


@dataclass(frozen=True)
class KindFigureConfig(driver.FigureConfig):
    """A notebook's parameters where ``kind`` picks one of :attr:`KINDS` figures.

    A subclass declares its tables and a ``str`` field ``kind``; ``kind`` is not checked
    as a table but must be one of :attr:`KINDS`.

    Raises
    ------
    CommschedError
        If a table does not exist, ``figure`` is not a PDF path or ``kind`` is unknown.
    """

    KINDS: ClassVar[tuple[str, ...]] = ()

    def tables(self) -> dict[str, str]:
        """The input tables.

        Returns
        -------
        dict of str to str
            ``{field: path}`` of the ``str`` fields but ``figure`` and ``kind``.
        """
        return {k: v for k, v in super().tables().items() if k != "kind"}

    def __post_init__(self) -> None:
        super().__post_init__()
        # each subclass declares ``kind`` where it fits among its fields (with or without
        # a default), so this class cannot
        kind = getattr(self, "kind")  # noqa: B009
        if kind not in self.KINDS:
            raise CommschedError(f"{self.WHAT} figure: kind {kind!r} is not one of "
                                 f"{', '.join(self.KINDS)}")
