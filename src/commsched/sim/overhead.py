"""Runtime overheads the time oracle leaves out, fitted from live traces.

The multi-worker simulator (:mod:`commsched.sim.multiworker`) runs a parameter-server view
whose compute ops take the tracer's per-op minimum (TicTac Sec. 5's time oracle, measured
with the model alone on the machine) and whose transfers take ``bytes / nominal rate``.
A live cluster adds costs that neither number contains:

* **per transfer** (``transfer_s``): the gRPC request/response of each ``RecvTensor`` and
  the executor's dispatch of the Recv op, paid once per transfer whatever its size;
* **the link rate** (``rate_Bps``): what gRPC over TCP gets through the shaped link, below
  the nominal ``tbf`` rate (protocol headers, TCP's window, tbf's bursts);
* **compute** (``compute_factor``, ``op_s``): a live worker's ops run slower than the
  oracle's minimum (other processes on the same cores: the server, the other worker, the
  kernel's network stack; caches shared with them), and the executor spends a fixed time
  per op (``op_s``) that the oracle does not count;
* **per iteration** (``step_s``): the synchronisation barrier's round trip to the server,
  which the simulated iteration (slowest worker's last op) ends before;
* **how a server's link is shared** (``fair_share``): the simulator's default channel sends
  one transfer at a time in priority order. A live server hands each read over to gRPC,
  which sends every response it holds at once, one HTTP/2 stream each, sharing the link:
  in the traced baseline steps of our first run with this model (Inception v1 inference,
  2 workers) every transfer had been handed over within 21 ms, the median transfer took
  0.38 s and half of a worker's bytes had arrived only after 0.34 s of a 0.49 s busy
  period, where one-at-a-time sending would deliver the early layers' parameters at
  once. With ``fair_share`` true the simulator's downlinks hand transfers over in
  priority order, one per ``transfer_s``, and share their rate equally among those
  handed over (:func:`commsched.sim.multiworker.fair_share_ends`); false gives the
  one-at-a-time channel (kept to show what the sharing changes).

:class:`Overhead` holds these numbers and :meth:`Overhead.apply` rewrites a view with
them: every ``recv``/``send`` of ``b`` bytes takes ``transfer_s + b / rate_Bps``, every
other op ``compute_factor * d + op_s``; :meth:`Overhead.iteration_time` adds ``step_s``;
:attr:`Overhead.sim_fair_share` is the simulator's ``fair_share`` argument. The
fits (:func:`fit_link`, :func:`fit_compute`) are least squares over *traced* steps of a
live run (distributed ``FULL_TRACE``, which the measured steps do not use), pooled over
all models, modes and configs given, so one set of numbers serves every prediction;
nothing is fitted to the measured iteration times.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import networkx as nx
import numpy as np

from commsched.errors import CommschedError

__all__ = ["Overhead", "fit_compute", "fit_link"]

_NET = frozenset({"recv", "send"})


@dataclass(frozen=True)
class Overhead:
    """The overheads of the module docstring (seconds, bytes per second)."""

    transfer_s: float
    rate_Bps: float
    compute_factor: float
    op_s: float
    step_s: float
    fair_share: bool = True

    def __post_init__(self) -> None:
        for name in ("transfer_s", "op_s", "step_s"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v >= 0):
                raise CommschedError(f"overhead {name} must be finite and >= 0, got {v!r}")
        for name in ("rate_Bps", "compute_factor"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v > 0):
                raise CommschedError(f"overhead {name} must be finite and > 0, got {v!r}")

    def apply(self, view: nx.DiGraph) -> nx.DiGraph:
        """A copy of ``view`` with the overheads in its op durations.

        >>> from commsched.graph import new_graph, add_op
        >>> g = new_graph({"ps0": 1, "cpu": 1})
        >>> add_op(g, "r", "recv", "ps0", 1.0, bytes=1000); add_op(g, "c", "compute", "cpu", 2.0)
        >>> h = Overhead(0.5, 100.0, 1.5, 0.25, 0.0).apply(g)
        >>> h.nodes["r"]["duration"], h.nodes["c"]["duration"], g.nodes["c"]["duration"]
        (10.5, 3.25, 2.0)
        """
        out = view.copy()
        for _, a in out.nodes(data=True):
            if a["kind"] in _NET:
                a["duration"] = self.transfer_s + int(a.get("bytes", 0)) / self.rate_Bps
            else:
                a["duration"] = self.compute_factor * float(a["duration"]) + self.op_s
        return out

    @property
    def sim_fair_share(self) -> float | None:
        """The ``fair_share`` argument of :func:`commsched.sim.multiworker.run`: the
        hand-over interval (``transfer_s``) when links are shared, else None."""
        return self.transfer_s if self.fair_share else None

    def iteration_time(self, simulated_s: float) -> float:
        """A simulated iteration time plus the per-iteration cost."""
        return simulated_s + self.step_s


def _nonneg_lstsq(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Least squares ``y ~ x @ c`` with ``c >= 0`` (two columns: drop a negative one)."""
    c = np.linalg.lstsq(x, y, rcond=None)[0]
    if (c >= 0).all():
        return c
    best = np.zeros(x.shape[1])
    best_err = math.inf
    for j in range(x.shape[1]):
        cj = max(0.0, float(x[:, j] @ y) / float(x[:, j] @ x[:, j]))
        err = float(np.sum((y - x[:, j] * cj) ** 2))
        if err < best_err:
            best, best_err = np.zeros(x.shape[1]), err
            best[j] = cj
    return best


def fit_link(transfers: Sequence[int], nbytes: Sequence[float], span_s: Sequence[float]
             ) -> tuple[float, float]:
    """``(transfer_s, rate_Bps)`` from busy periods of one server link.

    Each sample is one traced iteration in which ``transfers`` transfers of ``nbytes`` bytes
    in all kept the link busy for ``span_s`` seconds (first start to last arrival; the
    baseline, where every request is issued at once). The model of a capacity-1 channel,
    ``span = transfers * transfer_s + nbytes / rate``, is fitted by least squares with
    both terms >= 0.

    >>> fit_link([10, 100, 50], [1e6, 1e6, 4e6], [0.02, 0.11, 0.09])
    (0.001, 100000000.0)
    """
    n = np.asarray(transfers, float)
    b = np.asarray(nbytes, float)
    y = np.asarray(span_s, float)
    if len(y) < 2 or not np.isfinite(y).all():
        raise CommschedError("fit_link: need at least two finite busy periods")
    a, inv_rate = _nonneg_lstsq(np.column_stack([n, b]), y)
    if inv_rate <= 0:
        raise CommschedError("fit_link: the spans do not grow with the bytes moved")
    return round(float(a), 12), round(float(1.0 / inv_rate), 3)


def fit_compute(oracle_s: Sequence[float], ops: Sequence[int], live_s: Sequence[float]
                ) -> tuple[float, float]:
    """``(compute_factor, op_s)``: ``live = compute_factor * oracle + ops * op_s`` by least
    squares (both >= 0) over traced iterations, where ``oracle_s`` is the time oracle's
    summed compute time of the iteration's graph, ``ops`` its number of compute ops and
    ``live_s`` the live worker's summed compute time.

    >>> fit_compute([1.0, 2.0, 1.0], [100, 100, 300], [1.2, 2.3, 1.4])
    (1.1, 0.001)
    """
    x = np.column_stack([np.asarray(oracle_s, float), np.asarray(ops, float)])
    y = np.asarray(live_s, float)
    if len(y) < 2 or not np.isfinite(y).all():
        raise CommschedError("fit_compute: need at least two finite traced iterations")
    k, c = _nonneg_lstsq(x, y)
    if k <= 0:
        raise CommschedError("fit_compute: live compute time does not grow with the oracle's")
    return round(float(k), 9), round(float(c), 12)
