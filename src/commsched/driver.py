"""The skeleton every experiment driver shares.

An experiment driver is a module ``commsched.<work>.experiments.<name>`` that a Snakemake
rule runs as ``python -m``. Each one

1. parses its arguments with :func:`parser`;
2. reads its config section with :func:`config_section`, validated against the package's
   config schema (``commsched/schemas/config.schema.yaml``, the same file Snakemake
   validates ``config/config.yaml`` with), so no driver checks its config a second time
   by hand;
3. computes, reporting progress with :func:`say`, and writes its tables and metrics with
   provenance (:func:`write_outputs`, :mod:`commsched.results`);
4. returns through :func:`run`, which turns a :class:`~commsched.errors.CommschedError`
   into one line on stderr and exit status 2 (:func:`run_interruptible` for live drivers,
   where Ctrl-C tears a cluster down and exits 130).

Drivers that read traces take :func:`add_trace_options`; drivers whose steps each write
a table from the config's traces, with a ``metrics`` step that summarizes those tables,
take :func:`add_step_options` (config, traces and tables) and run that step with
:func:`metrics_step`; live drivers that cannot run here write
:func:`write_skipped` tables instead.

Drivers that also run by hand take their section from a config file or as JSON
(:func:`add_config_options`, :func:`section_from_options`), and ``NAME=CSV`` lists with
:func:`named_paths`. Notebooks check their parameters with a subclass of
:class:`FigureConfig` (or :class:`KindFigureConfig`, when a ``kind`` picks the figure)
before they plot anything.

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
from typing import Any, ClassVar, Self

import jsonschema
import pandas as pd
import yaml

from commsched.errors import CommschedError
from commsched.io.structured import read_yaml
from commsched.plotting import check_figure_inputs
from commsched.results import read_table, write_metrics, write_table

__all__ = [
    "SCHEMA_PATH",
    "FigureConfig",
    "KindFigureConfig",
    "SectionParams",
    "add_config_options",
    "add_step_options",
    "add_trace_options",
    "config_section",
    "load_section",
    "metrics_step",
    "named_paths",
    "parser",
    "run",
    "run_interruptible",
    "say",
    "schema",
    "section_from_options",
    "trace_file",
    "write_outputs",
    "write_skipped",
]

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
    """The argument parser of a driver, described by the first line of its docstring.

    Parameters
    ----------
    module : str
        The driver's ``__name__`` (under ``python -m`` that is ``__main__``: the module's
        own name is then taken from its spec, so usage lines name the real module).
    doc : str or None
        The driver's module docstring.

    Returns
    -------
    argparse.ArgumentParser
    """
    if module == "__main__":
        spec = getattr(sys.modules["__main__"], "__spec__", None)
        module = spec.name if spec is not None else module
    return argparse.ArgumentParser(prog=f"python -m {module}",
                                   description=doc.splitlines()[0] if doc else None)


@dataclasses.dataclass(frozen=True)
class SectionParams:
    """A driver's parameters: one config section, checked against the schema, flattened.

    A frozen dataclass subclass declares its fields, sets :attr:`SECTION` and overrides
    :meth:`_fields`; :meth:`from_mapping` and :meth:`from_file` build it.

    Parameters
    ----------
    raw : dict
        The section as given (keyword only; recorded in the tables' provenance).
    """

    SECTION: ClassVar[str] = ""
    raw: dict[str, Any] = dataclasses.field(compare=False, repr=False, default_factory=dict,
                                            kw_only=True)

    @classmethod
    def _fields(cls, m: dict[str, Any]) -> dict[str, Any]:
        """The subclass's fields from its checked section (and checks across keys, which
        the schema cannot state, as :class:`CommschedError`)."""
        raise NotImplementedError

    @classmethod
    def from_mapping(cls, m: Mapping[str, Any] | str) -> Self:
        """The parameters of a :attr:`SECTION` section.

        Parameters
        ----------
        m : mapping or str
            The section, or its JSON text (what ``--config-json`` gives).

        Returns
        -------
        SectionParams
            The flattened section; ``raw`` keeps it as given.

        Raises
        ------
        CommschedError
            One line naming the first key the config schema rejects, or a relation
            between keys the subclass checks.
        """
        section = config_section(cls.SECTION, m)
        return cls(**cls._fields(section), raw=section)

    @classmethod
    def from_file(cls, path: str | Path) -> Self:
        """The parameters of the :attr:`SECTION` section of a YAML (or JSON) config file.

        Parameters
        ----------
        path : str or Path
            The config file (``config/config.yaml``).

        Returns
        -------
        SectionParams
            As :meth:`from_mapping` returns them.

        Raises
        ------
        CommschedError
            If the file is missing or malformed, has no such section, or the section is
            invalid (:func:`load_section`, :meth:`from_mapping`).
        """
        return cls.from_mapping(load_section(path, cls.SECTION))


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
        return config_section(section, data[section])
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
        return config_section(section, args.config_json)
    return load_section(args.config, section)


def named_paths(items: list[str] | None, allowed: tuple[str, ...], flag: str = "--tables"
                ) -> dict[str, str]:
    """``NAME=PATH`` arguments (a driver's ``--tables``) as ``{name: path}``.

    Parameters
    ----------
    items : list of str or None
        The flag's values.
    allowed : tuple of str
        The names the driver knows.
    flag : str
        The flag, for messages.

    Returns
    -------
    dict of str to str
        ``{name: path}`` in the given order.

    Raises
    ------
    CommschedError
        If the flag is missing or an item is not ``NAME=PATH`` with a known name.
    """
    if not items:
        raise CommschedError(f"{flag}: expected NAME=CSV ... (NAME in {', '.join(allowed)})")
    out: dict[str, str] = {}
    for item in items:
        name, sep, path = item.partition("=")
        if not sep or name not in allowed or not path:
            raise CommschedError(f"{flag}: expected NAME=CSV with NAME in "
                                 f"{', '.join(allowed)}, got {item!r}")
        out[name] = path
    return out


def add_trace_options(p: argparse.ArgumentParser, what: str) -> None:
    """Add ``--trace-dir DIR`` (default ``data/traces``) and ``--traces FILE ...`` to ``p``.

    Parameters
    ----------
    p : argparse.ArgumentParser
        A driver's parser (:func:`parser`).
    what : str
        The traces the config names, for the help texts (``"the config's traces"``).
    """
    p.add_argument("--trace-dir", default="data/traces",
                   help=f"where {what} live (default %(default)s)")
    p.add_argument("--traces", nargs="+", help=f"trace files instead of {what} in --trace-dir")


def add_workdir_options(p: argparse.ArgumentParser, what: str,
                        default: str | None = None) -> None:
    """Add a live driver's ``--workdir DIR`` and ``--reuse`` (analyse the results an
    earlier run left in it instead of running) to ``p``.

    Parameters
    ----------
    p : argparse.ArgumentParser
        A driver's parser (:func:`parser`).
    what : str
        What the run writes there, for the help text.
    default : str, optional
        The default folder; without it ``--workdir`` is required.
    """
    p.add_argument("--workdir", required=default is None, default=default, help=what)
    p.add_argument("--reuse", action="store_true",
                   help="analyse the results an earlier run left in --workdir instead of "
                        "running")


def trace_file(trace_dir: str | Path, name: str) -> str:
    """The file of a trace the config names, in a ``--trace-dir``.

    Parameters
    ----------
    trace_dir : str or Path
        Where the traces are (``data/traces``).
    name : str
        The trace's name in the config (``<model>-<mode>-b<batch>``).

    Returns
    -------
    str
        ``<trace_dir>/<name>.json.gz``.
    """
    return str(Path(trace_dir) / f"{name}.json.gz")


def add_step_options(p: argparse.ArgumentParser, what: str, steps: tuple[str, ...],
                     section: str, traces: str) -> None:
    """Add the options of a step driver to ``p``: the config section
    (:func:`add_config_options`), the traces (:func:`add_trace_options`), the step
    ``what`` (one of ``steps`` or ``metrics``), ``--table CSV``, ``--tables WHAT=CSV ...``
    and ``--metrics CSV``.

    For a driver whose steps each write one ``--table`` from the config's traces and
    whose ``metrics`` step summarizes those tables (:func:`metrics_step`).

    Parameters
    ----------
    p : argparse.ArgumentParser
        A driver's parser (:func:`parser`).
    what : str
        What a step is (``"figure"``): the positional argument's name; upper case, what
        a table is named by in ``--tables``.
    steps : tuple of str
        The steps that write a table.
    section : str
        The config section the driver reads (:func:`add_config_options`).
    traces : str
        The traces the config names, for the help texts (:func:`add_trace_options`).
    """
    add_config_options(p, section)
    add_trace_options(p, traces)
    p.add_argument(what, choices=[*steps, "metrics"])
    p.add_argument("--table", help="result table to write (CSV)")
    p.add_argument("--tables", nargs="+", metavar=f"{what.upper()}=CSV",
                   help=f"metrics: the {what} tables to summarize")
    p.add_argument("--metrics", help="metrics: the metrics table to write (CSV)")


def metrics_step(args: argparse.Namespace, what: str, steps: tuple[str, ...],
                 headline: Callable[[dict[str, pd.DataFrame]], Mapping[str, float]]) -> bool:
    """Run the ``metrics`` step of :func:`add_step_options` (summarize ``--tables``), or
    check that another step has its ``--table``.

    Parameters
    ----------
    args : argparse.Namespace
        Parsed arguments of :func:`add_step_options`.
    what : str
        As given to :func:`add_step_options`.
    steps : tuple of str
        As given to :func:`add_step_options`: the names ``--tables`` may use.
    headline : callable
        ``{step: table}`` to ``{metric: value}``.

    Returns
    -------
    bool
        True when the step was ``metrics`` (done), False for a step that writes a table.

    Raises
    ------
    CommschedError
        If a step has no ``--table``; for ``metrics``, if ``--metrics`` or ``--tables`` is
        missing, a name is unknown or a table unreadable.
    """
    step = getattr(args, what)
    if step != "metrics":
        if not args.table:
            raise CommschedError(f"{step} needs --table")
        return False
    if not args.metrics:
        raise CommschedError(f"metrics needs --tables {what.upper()}=CSV ... and --metrics")
    tables = {k: read_table(path) for k, path in named_paths(args.tables, steps).items()}
    write_metrics(headline(tables), args.metrics, {"tables": args.tables})
    return True


def write_outputs(tables: Mapping[str, pd.DataFrame], metrics: Mapping[str, float],
                  metrics_path: str, config: Mapping[str, Any]) -> None:
    """Write a driver's tables, then its metrics, all with the same provenance.

    Parameters
    ----------
    tables : mapping of str to pandas.DataFrame
        ``{path: table}``, written in order.
    metrics : mapping of str to float
        The headline numbers.
    metrics_path : str
        The metrics table to write.
    config : mapping
        What the provenance records as the config.
    """
    for path, df in tables.items():
        write_table(df, path, config)
    write_metrics(metrics, metrics_path, config)


def write_skipped(name: str, reason: str, tables: list[str], metrics_path: str,
                  config: Mapping[str, Any]) -> None:
    """Say on stderr why a live run is skipped, and write tables that say it too.

    Each table gets one row ``status=skipped, reason=...``, the metrics table none; the
    provenance records ``skipped: reason``.

    Parameters
    ----------
    name : str
        The driver, for the message (``"pace_live"``).
    reason : str
        Why the run cannot happen here.
    tables : list of str
        The table paths.
    metrics_path : str
        The metrics table.
    config : mapping
        The driver's config section.
    """
    say(f"{name} skipped: {reason}")
    skip = pd.DataFrame({"status": ["skipped"], "reason": [reason]})
    write_outputs(dict.fromkeys(tables, skip), {}, metrics_path, {**config, "skipped": reason})


def say(msg: str) -> None:
    """Print a progress line on stderr, flushed (a Snakemake log shows it at once)."""
    print(msg, file=sys.stderr, flush=True)


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


def run_interruptible(name: str, body: Callable[[], int | None]) -> int:
    """:func:`run` for a live driver: Ctrl-C prints ``<name>: interrupted``, exit 130.

    The body's context managers have torn its cluster down by then.

    Returns
    -------
    int
        As :func:`run`, or 130 after a :class:`KeyboardInterrupt`.
    """
    try:
        return run(name, body)
    except KeyboardInterrupt:
        print(f"{name}: interrupted", file=sys.stderr)
        return 130


@dataclasses.dataclass(frozen=True)
class FigureConfig:
    """A notebook's parameters, checked before anything is plotted.

    Subclasses add their input tables as ``str`` fields and set :attr:`WHAT` (the figure's
    name in messages) and :attr:`HINT` (which target makes the inputs). Every non-empty
    table must exist and ``figure`` must be the PDF path (the PNG is written beside it).

    Parameters
    ----------
    figure : str
        The PDF to write (the PNG is written beside it).

    Raises
    ------
    CommschedError
        If a table does not exist or ``figure`` is not a PDF path.
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


@dataclasses.dataclass(frozen=True)
class KindFigureConfig(FigureConfig):
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
