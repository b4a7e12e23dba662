"""User-facing errors.

Every problem caused by the user's input (a malformed file, a cycle, an infeasible
constraint, an unreachable peer) is raised as :class:`CommschedError`. The command line
catches it and prints its message as one line on stderr with a non-zero exit status;
tracebacks are reserved for bugs.
"""

from __future__ import annotations

__all__ = ["CommschedError", "GraphError"]


class CommschedError(Exception):
    """An error in the user's input or environment, reported in one line."""


class GraphError(CommschedError):
    """An op graph that violates the model of :mod:`commsched.model.graph`."""
