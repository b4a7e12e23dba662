"""The ``commsched`` command.

Each subcommand lives in ``commsched/commands/<name>.py`` and exposes
``register(subparsers)``, which adds its parser (with the same one-line help as its entry
in :data:`COMMANDS`) and sets ``func`` to a handler ``handler(args) -> int``. To add a
subcommand, write such a module and add ``name: one-line help`` to :data:`COMMANDS`.

Start-up stays fast because only the chosen subcommand's module is imported: the others
are listed from :data:`COMMANDS` alone, and the modules import their heavy dependencies
(TensorFlow, jsonschema, pandas) inside their handlers. ``benchmarks/bench_cli.py``
records the times. User errors (:class:`commsched.errors.CommschedError`) and bad flags
print one line on stderr and exit with status 2; they never print a traceback. Before any
work, every output flag is checked (:func:`commsched.validation.output_file`) and compared
with the input files (:func:`commsched.validation.check_outputs_not_inputs`).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Collection, Sequence
from typing import NoReturn

from commsched import __version__
from commsched.errors import CommschedError
from commsched.validation import check_outputs_not_inputs

__all__ = ["COMMANDS", "OneLineParser", "UsageError", "build_parser", "main"]

#: Subcommand name -> its one-line help, in the order ``--help`` lists them; the module is
#: ``commsched.commands.<name>``.
COMMANDS: dict[str, str] = {
    "validate": "check an op graph file",
    "simulate": "simulate an op graph with the priority executor",
    "generate": "write a synthetic op graph (toys, random DAGs)",
    "order": "priority order of the recv ops (TicTac TIC / TAC)",
    "view": "derive the parameter-server or all-reduce view of a trace",
    "trace": "trace a model into an op graph (or check / count; Chakra ET import / export)",
    "cluster": "emulated TensorFlow parameter-server cluster",
    "claims": "write the claims table (paper value vs ours)",
    "pace": "PACE: all-reduce plans (balanced fusion + optimal preemption), simulated",
    "place": "partition and schedule a thesis graph on devices",
    "echelon": "EchelonFlow / Coflow scheduling (trace replay)",
}


def chosen_command(argv: Sequence[str]) -> str | None:
    """The subcommand named in ``argv``: its first word that does not start with ``-``.

    The top-level parser has no option that takes a value, so that word is the subcommand.

    >>> chosen_command(["--version"]), chosen_command(["validate", "g.json"])
    (None, 'validate')
    """
    return next((a for a in argv if not a.startswith("-")), None)


class UsageError(Exception):
    """A bad flag or argument, reported by :func:`main` in one line with exit status 2."""


class OneLineParser(argparse.ArgumentParser):
    """An argument parser whose errors raise :class:`UsageError` (one line naming the flag)
    instead of printing the usage and exiting; ``--help`` still prints the usage.
    Subcommand parsers inherit the class."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: error: {message} (see {self.prog} --help)")


def build_parser(full: Collection[str] | None = None) -> argparse.ArgumentParser:
    """The parser, with the full parsers of the subcommands in ``full`` (default: all).

    Every other subcommand gets a placeholder parser carrying its help line, enough for
    the top-level ``--help`` and for argparse's "invalid choice" message.
    """
    full = COMMANDS if full is None else full
    parser = OneLineParser(
        prog="commsched",
        description="Communication scheduling for distributed deep learning, reproduced.",
    )
    parser.add_argument("--version", action="version", version=f"commsched {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, help_line in COMMANDS.items():
        if name in full:
            importlib.import_module(f"commsched.commands.{name}").register(sub)
        else:
            sub.add_parser(name, help=help_line)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    name = chosen_command(argv)
    try:
        args = build_parser([name] if name in COMMANDS else []).parse_args(argv)
    except UsageError as e:
        print(e, file=sys.stderr)
        return 2
    try:
        check_outputs_not_inputs(vars(args).values())
        return int(args.func(args))
    except CommschedError as e:
        print(f"commsched {args.command}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"commsched {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
