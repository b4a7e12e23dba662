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

from collections.abc import Mapping, Sequence

import networkx as nx

from commsched.errors import CommschedError

__all__ = ["match_variables", "priority_groups", "variable_priorities"]


def variable_priorities(view: nx.DiGraph, priorities: Mapping[str, float]) -> dict[str, float]:
    """Priority of each variable: the smallest priority of a ``recv`` op carrying it.

    ``view`` is a parameter-server view (recv ops with ``param``); ``priorities`` maps op
    ids to numbers (lower first), as :func:`commsched.priorities.load_priorities` returns.

    >>> from commsched.graph import new_graph, add_op
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


def _strip_root(name: str) -> str:
    return name.split("/", 1)[1] if "/" in name else name


def match_variables(
    traced: Mapping[str, Sequence[int]], live: Mapping[str, Sequence[int]]
) -> dict[str, str]:
    """Map each traced variable name to the live job's variable of the same parameter.

    Both arguments map names to shapes, in creation order. Tried in turn: equal names;
    equal names once the first path component (the model's auto-generated name, which
    depends on how many models a process built before) is dropped; equal creation order
    when the two shape sequences are identical. Raises :class:`CommschedError` when none
    of them gives a one-to-one map with equal shapes.

    >>> match_variables({"m/d/kernel": [2, 3]}, {"m_1/d/kernel": [2, 3]})
    {'m/d/kernel': 'm_1/d/kernel'}
    """
    if len(traced) != len(live):
        raise CommschedError(
            f"the trace has {len(traced)} variables, the live model {len(live)}: not the same model"
        )
    t_shapes = {k: list(v) for k, v in traced.items()}
    l_shapes = {k: list(v) for k, v in live.items()}
    if set(traced) == set(live):
        candidate = {k: k for k in traced}
    else:
        stripped = {_strip_root(k): k for k in live}
        if len(stripped) == len(live) and all(_strip_root(k) in stripped for k in traced):
            candidate = {k: stripped[_strip_root(k)] for k in traced}
        elif list(t_shapes.values()) == list(l_shapes.values()):
            candidate = dict(zip(traced, live, strict=True))
        else:
            missing = next(k for k in traced if k not in live)
            raise CommschedError(
                f"traced variable {missing!r} has no counterpart in the live model "
                "(names and creation order both differ)"
            )
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

    >>> priority_groups({"a": 1, "b": 0, "c": 1}, ["a", "b", "c", "d"])
    [['b'], ['a', 'c']]
    """
    levels = sorted({priorities[n] for n in names if n in priorities})
    return [[n for n in names if priorities.get(n) == lv] for lv in levels]
