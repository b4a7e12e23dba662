"""The parameters of PACE's notebooks that draw one of several figures from one table.

:class:`KindFigureConfig` is :class:`commsched.driver.FigureConfig` with a ``kind``
parameter that selects the figure: ``kind`` is a choice, not an input table, so it is
left out of :meth:`~commsched.driver.FigureConfig.tables` and checked against
:attr:`KindFigureConfig.KINDS`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from commsched import driver
from commsched.errors import CommschedError

__all__ = ["KindFigureConfig"]


@dataclass(frozen=True)
class KindFigureConfig(driver.FigureConfig):
    """A notebook's parameters with the figure's ``kind``, checked before plotting.

    Subclasses add their input tables as ``str`` fields, redeclare ``kind`` with their
    default and set :attr:`KINDS`, :attr:`WHAT` and :attr:`HINT`.

    Parameters
    ----------
    figure : str
        The PDF to write (the PNG is written beside it).
    kind : str
        Which figure to draw, one of :attr:`KINDS`.

    Raises
    ------
    CommschedError
        If an input table does not exist, ``figure`` is not a PDF path or ``kind`` is not
        one of :attr:`KINDS`.
    """

    kind: str = ""
    KINDS: ClassVar[tuple[str, ...]] = ()

    def tables(self) -> dict[str, str]:
        """The input tables (``kind`` is not one).

        Returns
        -------
        dict
            ``{field: path}``.
        """
        return {k: v for k, v in super().tables().items() if k != "kind"}

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.kind not in self.KINDS:
            raise CommschedError(f"{self.WHAT} figure: kind {self.kind!r} is not one of "
                                 f"{', '.join(self.KINDS)}")
