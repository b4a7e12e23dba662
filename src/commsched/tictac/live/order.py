"""TensorFlow-free half of enforcement: which variable goes in which priority group.

The orderings (:mod:`commsched.tictac`) rank the ``recv`` ops of a parameter-server view;
each ``recv`` carries the name of the variable it transfers in its ``param`` attribute.
The live job reads the same variables through TensorFlow ``ReadVariableOp``s. This module
maps recv priorities to variable priorities, matches the trace's variable names to the
job's, and cuts the variables into *priority groups*: all variables with the same priority
form one group, groups are activated in increasing priority (TicTac Sec. 5.1: "transfers
with the same priority are issued concurrently").
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import networkx as nx

from commsched.errors import CommschedError

__all__ = ["match_variables", "priority_groups", "variable_priorities"]


def variable_priorities(view: nx.DiGraph, priorities: Mapping[str, float]) -> dict[str, float]:
    """Priority of each variable: the smallest priority of a ``recv`` op carrying it.

    Parameters
    ----------
    view : networkx.DiGraph
        A parameter-server view (recv ops with ``param``).
    priorities : mapping of str to float
        Op ids to numbers (lower first), as an ordering or
        :func:`commsched.io.priorities.load_priorities` gives them; ops that are not recvs
        are ignored.

    Returns
    -------
    dict of str to float
        ``{variable: priority}``.

    Raises
    ------
    CommschedError
        If an op is not in the view, or a recv has no ``param``.

    References
    ----------
    .. [1] Hashemi, Jyothi & Campbell, "TicTac", SysML 2019, Sec. 5 (the order is enforced
       per parameter transfer).

    Examples
    --------
    >>> from commsched.model.graph import new_graph, add_op
    >>> g = new_graph({"net": 1})
    >>> add_op(g, "r1", "recv", "net", 1.0, param="a")
    >>> add_op(g, "r2", "recv", "net", 1.0, param="b")
    >>> variable_priorities(g, {"r1": 1.0, "r2": 0.0})
    {'a': 1.0, 'b': 0.0}
    """
    out: dict[str, float] = {}
    for op, p in priorities.items():
        if op not in view:
            raise CommschedError(f"priorities name op {op!r}, which is not in the view")
        a = view.nodes[op]
        if a.get("kind") != "recv":
            continue
        var = a.get("param")
        if var is None:
            raise CommschedError(f"recv op {op!r} has no 'param' (variable name)")
        out[var] = min(p, out.get(var, p))
    return out


def _canonical(name: str) -> str:
    """``name`` without the ``_<n>`` suffixes Keras appends to auto-generated names that
    repeat within a process (``seed_generator_2/state`` -> ``seed_generator/state``)."""
    return "/".join(re.sub(r"_\d+$", "", part) for part in name.split("/"))


def match_variables(
    traced: Mapping[str, Sequence[int]], live: Mapping[str, Sequence[int]]
) -> dict[str, str]:
    """Map each traced variable name to the live job's variable of the same parameter.

    Both arguments map names to shapes, in creation order; ``live`` may have more
    variables than ``traced`` (a live step also reads variables the trace's
    parameter-server view does not transfer, e.g. a batch-norm moving mean read only by
    its own update). A traced variable matches the live variable of the same name; failing
    that, the only not yet matched live variable with the same name up to Keras'
    ``_<n>`` uniquifying suffixes (which depend on how many models a process built
    before). When that leaves a variable unmatched and both sides have the same number
    of variables, creation order decides.

    Parameters
    ----------
    traced : mapping of str to sequence of int
        The trace's variables and their shapes, in creation order.
    live : mapping of str to sequence of int
        The live job's, in creation order.

    Returns
    -------
    dict of str to str
        ``{traced name: live name}``.

    Raises
    ------
    CommschedError
        If a traced variable has no counterpart, or matched shapes differ.

    Examples
    --------
    >>> match_variables({"d/kernel": [2, 3], "seed_generator/state": [2]},
    ...                 {"d/kernel": [2, 3], "seed_generator_3/state": [2]})
    {'d/kernel': 'd/kernel', 'seed_generator/state': 'seed_generator_3/state'}
    """
    t_shapes = {k: list(v) for k, v in traced.items()}
    l_shapes = {k: list(v) for k, v in live.items()}
    candidate = {k: k for k in traced if k in live}
    free = [v for v in live if v not in candidate.values()]
    for k in traced:
        if k in candidate:
            continue
        same = [v for v in free if _canonical(v) == _canonical(k)]
        if len(same) == 1:
            candidate[k] = same[0]
            free.remove(same[0])
    if len(candidate) < len(traced):
        if len(traced) != len(live):
            missing = next(k for k in traced if k not in candidate)
            raise CommschedError(
                f"traced variable {missing!r} has no counterpart in the live model")
        candidate = dict(zip(traced, live, strict=True))
    for t, lv in candidate.items():
        if t_shapes[t] != l_shapes[lv]:
            raise CommschedError(
                f"variable {t!r}: shape {t_shapes[t]} in the trace, {l_shapes[lv]} live"
            )
    return candidate


def priority_groups(priorities: Mapping[str, float], names: Sequence[str]) -> list[list[str]]:
    """The names of ``names`` grouped by equal priority, groups in increasing priority.

    A name without a priority is left out: it is never held back (the simulator's rule for
    unprioritized ops, :mod:`commsched.sim.priority`). Within a group, ``names`` order is
    kept.

    Parameters
    ----------
    priorities : mapping of str to float
        Priorities, lower first.
    names : sequence of str
        The names to group.

    Returns
    -------
    list of list of str

    References
    ----------
    .. [1] Hashemi, Jyothi & Campbell, "TicTac", SysML 2019, Sec. 5.1 (transfers with the
       same priority are issued together).

    Examples
    --------
    >>> priority_groups({"a": 1, "b": 0, "c": 1}, ["a", "b", "c", "d"])
    [['b'], ['a', 'c']]
    """
    levels = sorted({priorities[n] for n in names if n in priorities})
    return [[n for n in names if priorities.get(n) == lv] for lv in levels]
