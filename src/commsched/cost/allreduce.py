"""The all-reduce cost models of every work: one factory, one fit.

PACE (Bao, Peng, Chen, Wu; INFOCOM 2020) models the time of one all-reduce of ``S`` bytes
among ``W`` workers as affine in ``S`` (Sec. II-C, Fig. 3; Eq. (1) for the ring). This
module is the single place where that model is built from a cluster description or fitted
to a measurement:

* :func:`summarize` and :func:`fit_table` reduce a measurement (the table of
  :mod:`commsched.pace.experiments.allreduce_bench`) to one ``a + b*S`` fit per worker count;
* :func:`allreduce_cost` builds ``g(S)`` from ``ring`` (Eq. (1) + per-step latency) or
  ``fit`` (measured start-up + Eq. (1));
* :func:`allreduce_model` is the ring in PACE's form ``a + b*S`` plus a per-operation
  overhead, used by the PACE simulations and the live DDP runs.

Examples
--------
>>> m = allreduce_model(2, 8.0, 0.0, 0.0)  # 2(n-1)/n * S / 1 GB/s
>>> round(m.time(1e9), 12)
1.0
"""

from __future__ import annotations

import math

import pandas as pd

from commsched.cost.network import (
    AllReduceModel,
    LinearModel,
    LinkModel,
    RingAllReduce,
    fit_linear,
)
from commsched.errors import CommschedError
from commsched.results import read_table

__all__ = [
    "DEFAULT_MEASUREMENT",
    "allreduce_cost",
    "allreduce_model",
    "fit_table",
    "summarize",
]

_COLUMNS = {"workers", "rank", "size_bytes", "rep", "seconds"}


def summarize(df: pd.DataFrame) -> pd.DataFrame:
    """Reduce an all-reduce measurement to one row per worker count and size.

    Parameters
    ----------
    df : pandas.DataFrame
        One row per worker count, rank, size and repetition (columns ``workers``, ``rank``,
        ``size_bytes``, ``rep``, ``seconds``), as
        :mod:`commsched.pace.experiments.allreduce_bench` writes it.

    Returns
    -------
    pandas.DataFrame
        Per (workers, size): median, quartiles, min and max over repetitions of the
        time at which the collective finished on every rank (max over ranks).

    Raises
    ------
    CommschedError
        If a column is missing or a time is not positive.
    """
    missing = _COLUMNS - set(df.columns)
    if missing:
        raise CommschedError(f"measurement table lacks columns {sorted(missing)}")
    if (df["seconds"] <= 0).any():
        raise CommschedError("measurement table has non-positive times")
    per_rep = df.groupby(["workers", "size_bytes", "rep"], as_index=False)["seconds"].max()
    g = per_rep.groupby(["workers", "size_bytes"])["seconds"]
    out = pd.DataFrame({
        "median_s": g.median(), "q25_s": g.quantile(0.25), "q75_s": g.quantile(0.75),
        "min_s": g.min(), "max_s": g.max(), "reps": g.size(),
    }).reset_index()
    return out


def fit_table(summary: pd.DataFrame, relative: bool = True) -> pd.DataFrame:
    """One linear fit ``a + b*S`` per worker count, on the medians of :func:`summarize`.

    Parameters
    ----------
    summary : pandas.DataFrame
        :func:`summarize`'s table.
    relative : bool
        Minimise relative residuals (:func:`commsched.cost.fit_linear`).

    Returns
    -------
    pandas.DataFrame
        Per worker count: ``a_s``, ``b_s_per_byte``, ``r2``, the points and sizes fitted
        and the bus bandwidth ``2(n-1)/n / b`` a ring with this slope implies.

    References
    ----------
    PACE (Bao et al., INFOCOM 2020), Sec. II-C and Fig. 3.
    """
    rows = []
    for n, d in summary.groupby("workers"):
        fit = fit_linear(d["size_bytes"].to_numpy(), d["median_s"].to_numpy(), relative=relative)
        n = int(n)
        rows.append({
            "workers": n, "a_s": fit.a, "b_s_per_byte": fit.b, "r2": fit.r2,
            "n_points": fit.n_points, "relative": relative,
            "busbw_Bps": 2 * (n - 1) / n / fit.b if fit.b > 0 else float("nan"),
            "min_size_bytes": int(d["size_bytes"].min()),
            "max_size_bytes": int(d["size_bytes"].max()),
        })
    return pd.DataFrame(rows)


#: The committed all-reduce measurement (PACE Fig. 3 analog, rule comm_allreduce_fit).
DEFAULT_MEASUREMENT = "data/measurements/allreduce_loopback.csv"


def allreduce_cost(kind: str, workers: int, bandwidth_Bps: float, latency_s: float = 50e-6,
                   measurement: str = DEFAULT_MEASUREMENT) -> AllReduceModel:
    """The all-reduce time ``g(S)`` of ``workers`` workers on links of ``bandwidth_Bps``.

    ``ring``: Eq. (1)'s transmission term ``2(W-1)/W * S / B`` plus a per-step latency,
    ``2(W-1) * latency_s`` (:class:`commsched.cost.RingAllReduce`; ``latency_s = 0`` is
    Eq. (1) without its aggregation term ``(W-1)/W * S / G``, which GPUs make negligible).
    ``fit``: the start-up ``a`` of the affine model fitted to our all-reduce measurement
    (relative least squares, the fit of the largest measured worker count <= ``workers``,
    else the smallest) plus the same transmission term: ``a + 2(W-1)/W * S / B``. The
    measured slope reflects loopback memory copies, not a network, so only its start-up
    is used. Without a start-up term fusion only pays through the rounding to slots
    (with every ``g`` a whole number of slots it never pays: the proof is in
    ``tests/test_pace_fusion.py::test_without_startup_cost_fusion_never_pays``); the
    paper's Fig. 3 shows the start-up is what makes small tensors inefficient.

    *Which one we use*: ``ring`` with the 10 GbE preset's 50 us per step (a start-up of
    ``2(W-1) * 50 us``, 0.7 ms for 8 workers) is the default of ``commsched pace plan``
    and of the ``pace`` config section. Our measured start-up (3.2 ms for 2, 8.1 ms for
    4 TensorFlow processes) is TensorFlow's collective runtime over gRPC on a 2-core VM,
    larger than a GPU cluster's NCCL start-up; ``fit`` is there to show its effect.

    Parameters
    ----------
    kind : {"ring", "fit"}
        Which model.
    workers : int
        Workers (>= 2).
    bandwidth_Bps : float
        Link bandwidth (bytes/s).
    latency_s : float
        Per-step latency of ``ring``.
    measurement : str
        The measurement ``fit`` reads.

    Returns
    -------
    AllReduceModel
        :class:`~commsched.cost.RingAllReduce` or :class:`~commsched.cost.LinearModel`.

    Raises
    ------
    CommschedError
        If ``workers < 2``, the bandwidth is not a number > 0, ``kind`` is unknown, or the
        measurement cannot be read.

    References
    ----------
    PACE (Bao et al., INFOCOM 2020), Sec. II-C, Eq. (1) and Fig. 3.
    """
    if not isinstance(workers, int) or workers < 2:
        raise CommschedError(f"PACE needs at least 2 workers, got {workers!r}")
    if not (math.isfinite(bandwidth_Bps) and bandwidth_Bps > 0):
        raise CommschedError(f"bandwidth must be a finite number > 0, got {bandwidth_Bps!r}")
    if kind == "ring":
        return RingAllReduce(workers, LinkModel(latency_s, bandwidth_Bps))
    if kind == "fit":
        table = read_table(measurement, dict.fromkeys(_COLUMNS, (0, None)))
        fits = fit_table(summarize(table), relative=True)
        below = fits[fits["workers"] <= workers]
        row = (below if len(below) else fits).sort_values("workers").iloc[-1 if len(below) else 0]
        return LinearModel(float(row["a_s"]), 2 * (workers - 1) / (workers * bandwidth_Bps))
    raise CommschedError(f"unknown all-reduce cost model {kind!r} (known: ring, fit)")


def allreduce_model(n_workers: int, bandwidth_gbps: float, latency_s: float,
                    overhead_s: float) -> LinearModel:
    """Ring all-reduce plus a per-operation overhead, in PACE's form ``a + b*S``.

    Parameters
    ----------
    n_workers : int
        Workers (>= 2).
    bandwidth_gbps : float
        Link bandwidth (Gbit/s).
    latency_s : float
        Per-step latency of the ring (:func:`allreduce_cost`, ``ring``).
    overhead_s : float
        A fixed per-operation overhead of the runtime, added to ``a``.

    Returns
    -------
    LinearModel
        ``a = 2(W-1) * latency_s + overhead_s``, ``b = 2(W-1) / (W * B)``.

    Raises
    ------
    CommschedError
        If the bandwidth is not a number > 0 or ``n_workers < 2``.

    References
    ----------
    PACE (Bao et al., INFOCOM 2020), Eq. (1).
    """
    if not (bandwidth_gbps > 0 and math.isfinite(bandwidth_gbps)):
        raise CommschedError(f"bandwidth must be > 0 Gbit/s, got {bandwidth_gbps!r}")
    ring = allreduce_cost("ring", n_workers, bandwidth_gbps * 1e9 / 8, latency_s)
    assert isinstance(ring, RingAllReduce)
    lin = ring.as_linear()
    return LinearModel(lin.a + overhead_s, lin.b)
