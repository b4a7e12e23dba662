"""One registry per family of algorithms: a name -> member mapping with the papers' aliases.

Every family (TicTac's orderings, all-reduce policies, flow schedulers, partitioners,
per-device schedulers) keeps its members in one :class:`Registry`. The CLI's ``choices``,
the experiments' loops, the config schema's enums (checked by ``tests/test_registries.py``)
and the contract tests read it, so adding an algorithm is one function, one
:meth:`Registry.add` line and one test row (README, "Extending commsched").

A registry is a read-only :class:`~collections.abc.Mapping` from canonical names to members,
in registration order; an alias (a paper's name for a member, e.g. ``varys`` for SEBF + MADD)
resolves to its member on lookup but is not iterated, so tables keep one row per member.

Examples
--------
>>> ORDERS = Registry("ordering")
>>> _ = ORDERS.add("tac", len, aliases=("timing-aware",))
>>> ORDERS["timing-aware"] is ORDERS["tac"]
True
>>> list(ORDERS), ORDERS.choices()
(['tac'], ['tac', 'timing-aware'])
>>> ORDERS.canonical("timing-aware")
'tac'
>>> ORDERS["tic"]
Traceback (most recent call last):
...
commsched.errors.CommschedError: unknown ordering 'tic' (known: tac, timing-aware)
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Generic, TypeVar

from commsched.errors import CommschedError

__all__ = ["Registry"]

T = TypeVar("T")


class Registry(Mapping[str, T], Generic[T]):
    """Members of one algorithm family by name, with aliases.

    Parameters
    ----------
    family : str
        What a member is, for error messages (``"all-reduce policy"``).
    """

    def __init__(self, family: str) -> None:
        self.family = family
        self._members: dict[str, T] = {}
        self._aliases: dict[str, str] = {}

    def add(self, name: str, member: T, aliases: tuple[str, ...] = ()) -> T:
        """Register ``member`` under ``name`` (and ``aliases``); returns the member.

        Raises
        ------
        ValueError
            If the name or an alias is taken (a programming error, not a user's).
        """
        for n in (name, *aliases):
            if n in self._members or n in self._aliases:
                raise ValueError(f"{self.family} {n!r} is registered twice")
        self._members[name] = member
        self._aliases.update(dict.fromkeys(aliases, name))
        return member

    def canonical(self, name: str) -> str:
        """The member's own name for ``name`` (itself or the member an alias names).

        Raises
        ------
        CommschedError
            If ``name`` is neither a member nor an alias.
        """
        if name in self._members:
            return name
        if name in self._aliases:
            return self._aliases[name]
        raise CommschedError(f"unknown {self.family} {name!r} (known: "
                             f"{', '.join(self.choices())})")

    def choices(self) -> list[str]:
        """Every accepted name: members in registration order, then aliases."""
        return [*self._members, *self._aliases]

    def aliases(self) -> dict[str, str]:
        """``{alias: member name}``."""
        return dict(self._aliases)

    def __getitem__(self, name: str) -> T:
        return self._members[self.canonical(name)]

    def __contains__(self, name: object) -> bool:
        return name in self._members or name in self._aliases

    def __iter__(self) -> Iterator[str]:
        return iter(self._members)

    def __len__(self) -> int:
        return len(self._members)

    def __repr__(self) -> str:
        return f"Registry({self.family!r}, {list(self._members)})"
