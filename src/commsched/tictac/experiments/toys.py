"""TicTac Sec. 6 toys: makespan of Par-N and Seq-N under random recv orders and the best.

For every toy graph (written by ``commsched generate par|seq``) the driver simulates

* ``random``: ``random_orders`` random recv orders; order ``k`` is the permutation
  ``numpy.random.default_rng([seed, k]).permutation`` of the recvs in layer order, given
  to the simulator as priorities (first = priority 0);
* ``best``: the recvs in layer order (the best order of Seq-N; every order is best for
  Par-N);
* ``reversed``: the recvs in reverse layer order (the worst order of Seq-N),

validates every schedule with :func:`commsched.sim.check_schedule`, checks that no random
order beats the best order, and writes

* a tidy table (model, family, n, order_kind, seed, makespan, makespan_over_best);
* metrics ``toys.<model>.frac_orders_optimal`` (fraction of random orders whose makespan
  equals the best within a relative 1e-9), ``best_makespan``, ``mean_over_best``,
  ``worst_over_best`` (worst random order / best) and ``reversed_over_best``.

TicTac (Hashemi et al., SysML 2019, Sec. 6) states that every order is best for Par-32
and that only one of the 32! orders is best for Seq-32.

Run as ``python -m commsched.tictac.experiments.toys --graphs par32.json seq32.json
--random-orders 1000 --seed 0 --table T.csv --metrics M.csv``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass

import networkx as nx
import numpy as np
import pandas as pd

from commsched import driver
from commsched.errors import CommschedError
from commsched.model import graph
from commsched.sim import check_schedule, simulate_compiled
from commsched.trace.synthetic import layer_order, order_priorities

__all__ = ["FigureConfig", "main", "order_makespan", "run_toys", "toy_metrics"]

#: Two makespans are equal when they differ by at most this fraction of the larger one.
REL_TOL = 1e-9


def order_makespan(g: nx.DiGraph, order: Sequence[str]) -> float:
    """Makespan of a toy when its recvs go in a given order; the schedule is validated.

    Parameters
    ----------
    g : networkx.DiGraph
        A toy graph.
    order : sequence of str
        Its recvs, first = priority 0.

    Returns
    -------
    float
        Its makespan.

    Raises
    ------
    InvalidSchedule
        If the schedule breaks a rule of the executor.
    """
    cg = graph.compile_graph(g, order_priorities(order))
    s = simulate_compiled(cg)
    check_schedule(cg, s)
    return s.makespan


def _model(g: nx.DiGraph, source: str) -> tuple[str, str, int]:
    toy = g.graph.get("toy")
    if not isinstance(toy, dict) or toy.get("family") not in ("par", "seq"):
        raise CommschedError(f"{source}: not a toy graph (no graph attribute 'toy'); "
                             "write it with `commsched generate par|seq`")
    return f"{toy['family']}{toy['n']}", str(toy["family"]), int(toy["n"])


def run_toys(graphs: dict[str, nx.DiGraph], random_orders: int, seed: int) -> pd.DataFrame:
    """Simulate every toy under random, best and reversed orders.

    Parameters
    ----------
    graphs : dict of str to networkx.DiGraph
        A source name (for messages) to a toy graph (``commsched generate par|seq``).
    random_orders : int
        Random orders per toy, >= 1.
    seed : int
        Seeds the random orders (order ``k`` uses ``[seed, k]``).

    Returns
    -------
    pandas.DataFrame
        The tidy table of the module docstring.

    Raises
    ------
    CommschedError
        If ``random_orders`` is below 1, a graph is not a toy, or a random order beats
        the layer order (which is best for both families).

    References
    ----------
    .. [1] Hashemi, Jyothi & Campbell, arXiv:1803.03288v1 and SysML 2019, Sec. 6 (the
       Par-N and Seq-N toys).
    """
    if random_orders < 1:
        raise CommschedError(f"random_orders must be >= 1, got {random_orders}")
    rows: list[dict[str, object]] = []
    for source, g in graphs.items():
        model, family, n = _model(g, source)
        best_order = layer_order(g)
        best = order_makespan(g, best_order)
        fixed = {"best": best_order, "reversed": best_order[::-1]}
        for kind, order in fixed.items():
            rows.append(dict(model=model, family=family, n=n, order_kind=kind, seed=None,
                             makespan=best if kind == "best" else order_makespan(g, order)))
        for k in range(random_orders):
            perm = np.random.default_rng([seed, k]).permutation(len(best_order))
            m = order_makespan(g, [best_order[i] for i in perm])
            if m < best * (1 - REL_TOL):
                raise CommschedError(f"{source}: random order {k} (makespan {m}) beats the "
                                     f"layer order (makespan {best}), which should be best")
            rows.append(dict(model=model, family=family, n=n, order_kind="random", seed=k,
                             makespan=m))
    df = pd.DataFrame(rows)
    df["seed"] = df["seed"].astype("Int64")
    best_of = df[df.order_kind == "best"].set_index("model")["makespan"]
    df["makespan_over_best"] = df["makespan"] / df["model"].map(best_of)
    return df


def toy_metrics(df: pd.DataFrame) -> dict[str, float]:
    """Headline numbers of a :func:`run_toys` table.

    Parameters
    ----------
    df : pandas.DataFrame
        :func:`run_toys`'s table.

    Returns
    -------
    dict of str to float
        ``toys.<model>.<metric>`` (module docstring) to its value.
    """
    out: dict[str, float] = {}
    for model, d in df.groupby("model", sort=False):
        best = float(d.loc[d.order_kind == "best", "makespan"].iloc[0])
        rnd = d.loc[d.order_kind == "random", "makespan"]
        rev = float(d.loc[d.order_kind == "reversed", "makespan"].iloc[0])
        optimal = (rnd - best).abs() <= REL_TOL * max(best, 1.0)
        out[f"toys.{model}.best_makespan"] = best
        out[f"toys.{model}.frac_orders_optimal"] = float(optimal.mean())
        out[f"toys.{model}.mean_over_best"] = float(rnd.mean() / best)
        out[f"toys.{model}.worst_over_best"] = float(rnd.max() / best)
        out[f"toys.{model}.reversed_over_best"] = rev / best
    return out


@dataclass(frozen=True)
class FigureConfig(driver.FigureConfig):
    """Parameters of ``notebooks/toys.ipynb``, checked before anything is plotted.

    ``figure`` and the checks: see :class:`~commsched.driver.FigureConfig`.

    Attributes
    ----------
    table : str
        :func:`run_toys`'s table.
    """

    table: str = ""
    WHAT = "toys"
    HINT = "run `snakemake results/tables/toys_makespans.csv`"


def main(argv: Sequence[str] | None = None) -> int:
    """Simulate the toys and write the table and the metrics.

    Parameters
    ----------
    argv : sequence of str, optional
        The graphs, the order count and seed, and the two files to write (default:
        ``sys.argv[1:]``).

    Returns
    -------
    int
        0, or 2 after a one-line error on stderr.
    """
    p = driver.parser(__name__, __doc__)
    p.add_argument("--graphs", nargs="+", required=True, help="toy op graphs (JSON)")
    p.add_argument("--random-orders", type=int, required=True, help="random orders per toy")
    p.add_argument("--seed", type=int, required=True, help="seed of the random orders")
    p.add_argument("--table", required=True, help="tidy makespan table to write (CSV)")
    p.add_argument("--metrics", required=True, help="metrics table to write (CSV)")
    args = p.parse_args(argv)

    def body() -> None:
        graphs = {os.fspath(f): graph.load(f) for f in args.graphs}
        df = run_toys(graphs, args.random_orders, args.seed)
        config = {"graphs": args.graphs, "random_orders": args.random_orders,
                  "seed": args.seed}
        driver.write_outputs({args.table: df}, toy_metrics(df), args.metrics, config)

    return driver.run("toys", body)


if __name__ == "__main__":
    sys.exit(main())
