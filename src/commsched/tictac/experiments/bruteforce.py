"""How far are TIC and TAC from the best recv order? Brute force on small graphs.

For every instance -- random DNN-like DAGs with ``n`` recvs on one or more channels, and
two-stage (Johnson flow-shop) instances where each recv feeds only its own compute op --
the driver simulates all ``n!`` recv orders (:func:`commsched.tictac.bruteforce.brute_force`,
every schedule validated) and the orders of TIC (Alg. 2) and TAC (Alg. 3) of TicTac
(Hashemi et al., SysML 2019), and writes

* a table, one row per instance: ``family, instance, seed, n_recvs, n_ops, channels``,
  the makespans ``optimum, worst, random_mean`` (mean over all orders = a uniformly
  random order), ``tic`` (TIC's priorities, ties in graph order), ``tic_best`` /
  ``tic_worst`` (over every order consistent with TIC's shared priorities), ``tac``,
  the bounds ``lower_bound, upper_bound`` (Eqs. 1-2), the efficiencies (Eq. 3)
  ``E_optimum, E_tic, E_tac, E_random``, the ratios ``tic_over_opt, tac_over_opt,
  random_over_opt, worst_over_opt`` and ``frac_orders_optimal``;
* metrics ``tictac_bruteforce.<family>.<name>``: mean and max of ``tac_over_opt`` and
  ``tic_over_opt``, the fraction of instances where TAC / TIC is optimal (within a
  relative 1e-9), the mean ``random_over_opt`` and the mean TIC / TAC makespan ratio,
  plus the instance count.

Run as ``python -m commsched.tictac.experiments.bruteforce --sizes 3 4 5 --instances 4
--channels 1 2 --two-stage-instances 4 --seed 0 --table T.csv --metrics M.csv``.
"""

from __future__ import annotations

import random
import sys
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass

import networkx as nx
import pandas as pd

from commsched import driver
from commsched.errors import CommschedError
from commsched.tictac.bruteforce import (
    brute_force,
    priorities_makespan,
    random_instance,
    two_stage_instance,
)
from commsched.tictac.metrics import efficiency, makespan_lower_bound, makespan_upper_bound
from commsched.tictac.order import tac, tic

__all__ = ["BruteForceConfig", "bruteforce_metrics", "instances", "main", "run_bruteforce"]

#: Two makespans are equal when they differ by at most this fraction of the larger one.
REL_TOL = 1e-9


@dataclass(frozen=True)
class BruteForceConfig:
    """The ``tictac_bruteforce`` section of the pipeline config, checked against the schema.

    Attributes
    ----------
    sizes : tuple of int
        Recv counts, at most :data:`commsched.tictac.bruteforce.MAX_RECVS` (the schema's
        maximum; a test keeps the two equal).
    instances : int
        Random DAG instances per size and channel count.
    channels : tuple of int
        Channel (parameter-server) counts.
    two_stage_instances : int
        Two-stage (Johnson) instances per size.
    seed : int
        The base seed of the instances.

    Raises
    ------
    CommschedError
        One line naming the key the schema rejects.
    """

    sizes: tuple[int, ...]
    instances: int
    channels: tuple[int, ...]
    two_stage_instances: int
    seed: int

    def __post_init__(self) -> None:
        section = {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}
        driver.config_section("tictac_bruteforce", section)


def instances(cfg: BruteForceConfig) -> Iterator[tuple[str, str, int, nx.DiGraph]]:
    """Every instance the config asks for.

    Instance seeds derive from ``cfg.seed`` so that each instance is reproducible alone.
    Two-stage times are distinct multiples of 0.05 s in [0.05, 2] (drawn without
    replacement), so Johnson's rule has no ties.

    Parameters
    ----------
    cfg : BruteForceConfig
        Sizes, counts and the base seed.

    Yields
    ------
    family : str
        ``dag`` (:func:`~commsched.tictac.bruteforce.random_instance`) or ``two_stage``
        (:func:`~commsched.tictac.bruteforce.two_stage_instance`).
    name : str
        The instance's name.
    seed : int
        Its seed.
    graph : networkx.DiGraph
        The instance.
    """
    for n in cfg.sizes:
        for c in cfg.channels:
            for k in range(cfg.instances):
                seed = cfg.seed * 1_000_003 + n * 10_007 + c * 101 + k
                yield "dag", f"dag-n{n}-c{c}-{k}", seed, random_instance(n, seed, channels=c)
        for k in range(cfg.two_stage_instances):
            seed = cfg.seed * 1_000_003 + n * 10_007 + k + 50_000
            times = random.Random(seed).sample(range(1, 41), 2 * n)
            g = two_stage_instance([t * 0.05 for t in times[:n]], [t * 0.05 for t in times[n:]])
            yield "two_stage", f"two_stage-n{n}-{k}", seed, g


def _equal(a: float, b: float) -> bool:
    return abs(a - b) <= REL_TOL * max(abs(a), abs(b), 1.0)


def run_bruteforce(cfg: BruteForceConfig) -> pd.DataFrame:
    """Brute force, TIC and TAC on every instance of the config.

    Parameters
    ----------
    cfg : BruteForceConfig
        The instances (:func:`instances`).

    Returns
    -------
    pandas.DataFrame
        One row per instance, the columns of the module docstring.

    Raises
    ------
    CommschedError
        If TIC or TAC beats the brute-force optimum (the search missed an order).

    References
    ----------
    .. [1] Hashemi, Jyothi & Campbell, "TicTac", SysML 2019, Alg. 2 (TIC), Alg. 3 and
       Eq. 6 (TAC), Sec. 3.2 (Eqs. 1-3).
    """
    rows = []
    for family, name, seed, g in instances(cfg):
        bf = brute_force(g)
        tic_p, tac_p = tic(g), tac(g)
        m_tic, m_tac = priorities_makespan(g, tic_p), priorities_makespan(g, tac_p)
        tied = bf.consistent(tic_p)
        opt = bf.optimum
        for label, m in (("TIC", m_tic), ("TAC", m_tac)):
            if m < opt and not _equal(m, opt):
                raise CommschedError(f"{name}: {label} makespan {m} beats the brute-force "
                                     f"optimum {opt}: the search missed an order")
        rows.append(dict(
            family=family, instance=name, seed=seed, n_recvs=len(bf.recvs),
            n_ops=g.number_of_nodes(),
            channels=sum(1 for r in g.graph["resources"] if r != "cpu"),
            optimum=opt, worst=bf.worst, random_mean=bf.mean,
            tic=m_tic, tic_best=min(tied), tic_worst=max(tied), tac=m_tac,
            lower_bound=makespan_lower_bound(g), upper_bound=makespan_upper_bound(g),
            E_optimum=efficiency(g, opt), E_tic=efficiency(g, m_tic),
            E_tac=efficiency(g, m_tac), E_random=efficiency(g, bf.mean),
            tic_over_opt=m_tic / opt, tac_over_opt=m_tac / opt,
            random_over_opt=bf.mean / opt, worst_over_opt=bf.worst / opt,
            frac_orders_optimal=bf.frac_optimal(REL_TOL),
        ))
    return pd.DataFrame(rows)


def bruteforce_metrics(df: pd.DataFrame) -> dict[str, float]:
    """Headline numbers of a :func:`run_bruteforce` table, per instance family.

    Parameters
    ----------
    df : pandas.DataFrame
        :func:`run_bruteforce`'s table.

    Returns
    -------
    dict of str to float
        ``tictac_bruteforce.<family>.<name>`` (module docstring) to its value.
    """
    out: dict[str, float] = {}
    for family, d in df.groupby("family", sort=True):
        p = f"tictac_bruteforce.{family}"
        out[f"{p}.instances"] = float(len(d))
        for algo in ("tac", "tic"):
            r = d[f"{algo}_over_opt"]
            out[f"{p}.{algo}_over_opt_mean"] = float(r.mean())
            out[f"{p}.{algo}_over_opt_max"] = float(r.max())
            hits = [_equal(m, o) for m, o in zip(d[algo], d["optimum"], strict=True)]
            out[f"{p}.{algo}_frac_optimal"] = sum(hits) / len(hits)
        out[f"{p}.random_over_opt_mean"] = float(d["random_over_opt"].mean())
        out[f"{p}.tic_over_tac_mean"] = float((d["tic"] / d["tac"]).mean())
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """Run the brute-force experiment and write its table and metrics.

    Parameters
    ----------
    argv : sequence of str, optional
        The config values and the two files to write (default: ``sys.argv[1:]``).

    Returns
    -------
    int
        0, or 2 after a one-line error on stderr.
    """
    p = driver.parser(__name__, __doc__)
    p.add_argument("--sizes", type=int, nargs="+", required=True, help="recv counts")
    p.add_argument("--instances", type=int, required=True,
                   help="random DAG instances per size and channel count")
    p.add_argument("--channels", type=int, nargs="+", required=True, help="channel counts")
    p.add_argument("--two-stage-instances", type=int, required=True,
                   help="two-stage (Johnson) instances per size")
    p.add_argument("--seed", type=int, required=True, help="base seed of the instances")
    p.add_argument("--table", required=True, help="per-instance table to write (CSV)")
    p.add_argument("--metrics", required=True, help="metrics table to write (CSV)")
    args = p.parse_args(argv)

    def body() -> None:
        cfg = BruteForceConfig(tuple(args.sizes), args.instances, tuple(args.channels),
                               args.two_stage_instances, args.seed)
        df = run_bruteforce(cfg)
        driver.write_outputs({args.table: df}, bruteforce_metrics(df), args.metrics, asdict(cfg))

    return driver.run("tictac_bruteforce", body)


if __name__ == "__main__":
    sys.exit(main())
