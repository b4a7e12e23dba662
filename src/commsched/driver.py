"""The skeleton every experiment driver shares.

An experiment driver is a module ``commsched.<work>.experiments.<name>`` that a Snakemake
rule runs as ``python -m``. Each one

1. parses its arguments with :func:`parser`;
2. reads its config section with :func:`config_section`, validated against the package's
   config schema (``commsched/schemas/config.schema.yaml``, the same file Snakemake
   validates ``config/config.yaml`` with), so no driver checks its config a second time
   by hand;
3. computes, and writes tables and metrics with provenance (:mod:`commsched.results`);
4. returns through :func:`run`, which turns a :class:`~commsched.errors.CommschedError`
   into one line on stderr and exit status 2.

Notebooks check their parameters with a subclass of :class:`FigureConfig` before they
plot anything.

Examples
--------
>>> config_section("toys", {"sizes": [4], "random_orders": 10, "seed": 0})["seed"]
0
>>> config_section("toys", {"sizes": [4], "random_orders": -1, "seed": 0})
Traceback (most recent call last):
...
commsched.errors.CommschedError: config toys.random_orders: -1 is less than the minimum of 1
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Callable, Mapping
from functools import cache
from pathlib import Path
from typing import Any, ClassVar

import jsonschema
import yaml

from commsched.errors import CommschedError
from commsched.plotting import check_figure_inputs

__all__ = ["SCHEMA_PATH", "FigureConfig", "config_section", "parser", "run", "schema"]

#: The config schema of the pipeline, shipped with the package.
SCHEMA_PATH = Path(__file__).with_name("schemas") / "config.schema.yaml"


@cache
def schema() -> dict[str, Any]:
    """The pipeline's config schema (parsed once)."""
    data: dict[str, Any] = yaml.safe_load(SCHEMA_PATH.read_text())
    return data


def config_section(section: str, data: Mapping[str, Any] | str) -> dict[str, Any]:
    """One section of the pipeline config, checked against the schema.

    Parameters
    ----------
    section : str
        A top-level key of ``config/config.yaml`` (``"pace_sim"``).
    data : mapping or str
        The section, or its JSON text (what a rule passes as ``--config-json``).

    Returns
    -------
    dict
        The section as given.

    Raises
    ------
    CommschedError
        One line naming the first offending key path: invalid JSON, an unknown section,
        or a value the schema rejects.
    """
    if isinstance(data, str):
        try:
            data = json.loads(data)
        except json.JSONDecodeError as e:
            raise CommschedError(f"config {section}: invalid JSON: {e.msg}") from None
    full = schema()
    if section not in full["properties"]:
        raise CommschedError(f"config: unknown section {section!r}")
    # validate {section: data} against the whole schema with only this section required,
    # so that $refs into other parts of the document resolve
    doc = dict(full, required=[section])
    try:
        jsonschema.validate({section: data}, doc)
    except jsonschema.ValidationError as e:
        where = ".".join(str(p) for p in e.absolute_path)
        raise CommschedError(f"config {where}: {e.message}") from None
    assert isinstance(data, Mapping)
    return dict(data)


def parser(module: str, doc: str | None) -> argparse.ArgumentParser:
    """The argument parser of driver ``module`` (its ``__name__``), described by the first
    line of its docstring."""
    return argparse.ArgumentParser(prog=f"python -m {module}",
                                   description=doc.splitlines()[0] if doc else None)


def run(name: str, body: Callable[[], int | None]) -> int:
    """Run a driver's work; a :class:`CommschedError` becomes ``<name>: error: <message>``
    on stderr and exit status 2 (bad input never prints a traceback).

    Returns
    -------
    int
        ``body``'s status, 0 when it returns None.
    """
    try:
        return body() or 0
    except CommschedError as e:
        print(f"{name}: error: {e}", file=sys.stderr)
        return 2


@dataclasses.dataclass(frozen=True)
class FigureConfig:
    """A notebook's parameters, checked before anything is plotted.

    Subclasses add their input tables as ``str`` fields and set :attr:`WHAT` (the figure's
    name in messages) and :attr:`HINT` (which target makes the inputs). Every non-empty
    table must exist and ``figure`` must be the PDF path (the PNG is written beside it).
    """

    figure: str  # the PDF; the PNG is written beside it
    WHAT: ClassVar[str] = "figure"
    HINT: ClassVar[str] = "run `make reproduce`"

    def tables(self) -> dict[str, str]:
        """``{field: path}`` of every input table (the ``str`` fields but ``figure``)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                if f.name != "figure" and isinstance(getattr(self, f.name), str)}

    def __post_init__(self) -> None:
        check_figure_inputs(self.WHAT, self.tables(), self.figure, self.HINT)
