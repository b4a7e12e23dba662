"""The ``commsched`` command.

Each subcommand lives in ``commsched/commands/<name>.py`` and exposes
``register(subparsers)``, which adds its parser and sets ``func`` to a handler
``handler(args) -> int``. To add a subcommand, write such a module and list it in
:data:`COMMANDS`. User errors (:class:`commsched.errors.CommschedError`) print one line on
stderr and exit with status 2; they never print a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from commsched import __version__
from commsched.errors import CommschedError

__all__ = ["COMMANDS", "build_parser", "main"]

#: Modules under ``commsched.commands``, in the order ``--help`` lists them.
COMMANDS = ["validate", "simulate", "generate", "order", "view", "trace", "cluster", "claims",
            "place"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="commsched",
        description="Communication scheduling for distributed deep learning, reproduced.",
    )
    parser.add_argument("--version", action="version", version=f"commsched {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMANDS:
        importlib.import_module(f"commsched.commands.{name}").register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except CommschedError as e:
        print(f"commsched {args.command}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"commsched {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
