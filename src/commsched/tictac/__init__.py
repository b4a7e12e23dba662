"""TicTac (Hashemi, Jyothi & Campbell, SysML 2019): ordering parameter transfers.

* :mod:`~commsched.tictac.dependencies` -- communication dependencies ``dep`` (Sec. 4.1);
* :mod:`~commsched.tictac.properties` -- op properties ``M``, ``P``, ``M+`` (Alg. 1);
* :mod:`~commsched.tictac.order` -- the TIC (Alg. 2) and TAC (Alg. 3) priority orders;
* :mod:`~commsched.tictac.metrics` -- makespan bounds, ordering efficiency and speedup
  (SysML Sec. 3.2, Eqs. 1-4);
* :mod:`~commsched.tictac.bruteforce` -- every recv order of a small graph simulated, to
  measure how far TIC and TAC are from the best order.
"""

from __future__ import annotations

from commsched.tictac.dependencies import comm_dependencies
from commsched.tictac.metrics import (
    efficiency,
    makespan_lower_bound,
    makespan_upper_bound,
    overlap_metrics,
    speedup,
)
from commsched.tictac.order import ORDERINGS, Ordering, tac, tic
from commsched.tictac.properties import OpProperties, op_properties

__all__ = [
    "ORDERINGS",
    "OpProperties",
    "Ordering",
    "comm_dependencies",
    "efficiency",
    "makespan_lower_bound",
    "makespan_upper_bound",
    "op_properties",
    "overlap_metrics",
    "speedup",
    "tac",
    "tic",
]
