"""Subcommands of the ``commsched`` command, one module each (see :mod:`commsched.cli`)."""
