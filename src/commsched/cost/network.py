"""Communication cost models: point-to-point links, ring all-reduce, fitted linear models.

Times are seconds, sizes bytes, bandwidths bytes per second (DESIGN.md fixed points).

* :class:`LinkModel` -- one network channel: ``latency + bytes / bandwidth``. This is the
  per-transfer cost TicTac uses for a parameter transfer between a parameter server and a
  worker (Hashemi et al., SysML 2019, Sec. 3: a transfer occupies the channel for a time
  proportional to the parameter's size).
* :class:`RingAllReduce` -- ring all-reduce of ``n`` workers over identical links (the
  bandwidth-optimal algorithm of Patarasuk and Yuan, JPDC 2009): ``2(n-1)`` steps, each
  moving ``bytes/n``, so ``T(s) = 2(n-1) * latency + 2(n-1)/n * s / bandwidth``.
* :class:`LinearModel` and :func:`fit_linear` -- PACE (Bao, Peng, Chen, Wu, INFOCOM 2020)
  models the time of one all-reduce operation as a linear function of the tensor size,
  ``T(s) = a + b * s``, where ``a`` is the start-up cost paid once per operation (the
  reason tensor fusion pays off) and ``b`` the time per byte; the paper fits it to measured
  all-reduce times (its Fig. 3, log-log time versus size). We could not retrieve the
  paper's text to confirm the numbering, so we call this "PACE's linear all-reduce model
  (Eq. 1)" as the brief does. The ring model above is a special case with
  ``a = 2(n-1) * latency`` and ``b = 2(n-1) / (n * bandwidth)``
  (:meth:`RingAllReduce.as_linear`); both expose ``time(nbytes)`` so that the views in
  :mod:`commsched.views` accept either.

Link presets (:data:`PRESETS`) give the nominal bandwidth of 1 GbE, 10 GbE, 25 GbE and
100 Gb/s links (bits / 8 = bytes per second) and a default one-way latency. The latencies
are our assumption (order of magnitude of a TCP hop inside a rack, 50 us, and of an RDMA
hop, 5 us), not a number from the papers; pass ``latency_s`` to override.

Examples
--------
>>> link = LinkModel.preset("10GbE", latency_s=0.0)
>>> link.transfer_time(1_250_000_000)
1.0
>>> ring = RingAllReduce(n_workers=4, link=LinkModel(1e-5, 1e9))
>>> round(ring.time(1_000_000), 9)  # 6 * 1e-5 + 1.5 * 1e6 / 1e9
0.00156
>>> fit = fit_linear([1, 2, 3, 4], [3.0, 5.0, 7.0, 9.0])
>>> (round(fit.a, 9), round(fit.b, 9), round(fit.r2, 9))
(1.0, 2.0, 1.0)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from commsched.errors import CommschedError

__all__ = [
    "PRESETS",
    "AllReduceModel",
    "LinearFit",
    "LinearModel",
    "LinkModel",
    "RingAllReduce",
    "fit_linear",
    "ring_allreduce_time",
]

#: name -> (bandwidth in bytes/s, default one-way latency in s). Bandwidth = bits / 8.
PRESETS: dict[str, tuple[float, float]] = {
    "1GbE": (1e9 / 8, 50e-6),
    "10GbE": (10e9 / 8, 50e-6),
    "25GbE": (25e9 / 8, 50e-6),
    "100Gb": (100e9 / 8, 5e-6),
}


def _check_bytes(nbytes: float) -> None:
    if not math.isfinite(nbytes) or nbytes < 0:
        raise CommschedError(f"a size in bytes must be a finite number >= 0, got {nbytes!r}")


@dataclass(frozen=True)
class LinkModel:
    """A network channel: a transfer of ``s`` bytes takes ``latency_s + s / bandwidth_Bps``.

    Parameters
    ----------
    latency_s
        One-way latency (s), paid once per transfer; >= 0.
    bandwidth_Bps
        Bandwidth in bytes per second; > 0.
    """

    latency_s: float
    bandwidth_Bps: float

    def __post_init__(self) -> None:
        if not (math.isfinite(self.latency_s) and self.latency_s >= 0):
            raise CommschedError(
                f"link latency must be a finite number >= 0 s, got {self.latency_s!r}"
            )
        if not (math.isfinite(self.bandwidth_Bps) and self.bandwidth_Bps > 0):
            raise CommschedError(
                f"link bandwidth must be a finite number > 0 bytes/s, got {self.bandwidth_Bps!r}"
            )

    def transfer_time(self, nbytes: float) -> float:
        """Seconds to move ``nbytes`` over this link (0 bytes cost the latency only).

        Parameters
        ----------
        nbytes : float
            Bytes to move (finite, >= 0).

        Returns
        -------
        float
            ``latency_s + nbytes / bandwidth_Bps``.

        Raises
        ------
        CommschedError
            If ``nbytes`` is negative or not finite.

        References
        ----------
        TicTac (Hashemi et al., SysML 2019), Sec. 3: a transfer occupies the channel for a
        time proportional to its size.
        """
        _check_bytes(nbytes)
        return self.latency_s + nbytes / self.bandwidth_Bps

    @classmethod
    def preset(cls, name: str, latency_s: float | None = None) -> LinkModel:
        """The link named ``name`` in :data:`PRESETS`.

        Parameters
        ----------
        name : str
            A preset (``1GbE``, ``10GbE``, ``25GbE``, ``100Gb``).
        latency_s : float, optional
            Overrides the preset's latency.

        Returns
        -------
        LinkModel
            The link.

        Raises
        ------
        CommschedError
            If ``name`` is not a preset.
        """
        if name not in PRESETS:
            raise CommschedError(f"unknown link preset {name!r} (known: {', '.join(PRESETS)})")
        bw, lat = PRESETS[name]
        return cls(lat if latency_s is None else float(latency_s), bw)


class AllReduceModel(Protocol):
    """Anything that gives the time of one all-reduce of ``nbytes`` bytes.

    Implemented by :class:`LinearModel` and :class:`RingAllReduce`; the simulators and
    PACE's planner accept either.

    References
    ----------
    PACE (Bao et al., INFOCOM 2020), Sec. II-C: the time of one all-reduce operation as a
    function of the tensor size.
    """

    def time(self, nbytes: float) -> float:
        """Seconds of one all-reduce.

        Parameters
        ----------
        nbytes : float
            The size in bytes.

        Returns
        -------
        float
            The time (s).
        """
        ...


@dataclass(frozen=True)
class LinearModel:
    """PACE's all-reduce time model ``T(s) = a + b * s``.

    Parameters
    ----------
    a : float
        Start-up cost per operation (s), the reason fusion pays off.
    b : float
        Time per byte (s/byte).

    References
    ----------
    PACE (Bao et al., INFOCOM 2020), Sec. II-C and Fig. 3.
    """

    a: float
    b: float

    def time(self, nbytes: float) -> float:
        """Seconds of one all-reduce of ``nbytes`` bytes.

        Parameters
        ----------
        nbytes : float
            Bytes all-reduced (finite, >= 0).

        Returns
        -------
        float
            ``a + b * nbytes``.

        Raises
        ------
        CommschedError
            If ``nbytes`` is negative or not finite.
        """
        _check_bytes(nbytes)
        return self.a + self.b * nbytes


def ring_allreduce_time(nbytes: float, n_workers: int, link: LinkModel) -> float:
    """Ring all-reduce of ``nbytes`` among ``n_workers`` workers over ``link``.

    ``2(n-1) * latency + 2(n-1)/n * nbytes / bandwidth``: a reduce-scatter and an
    all-gather of ``n-1`` steps each, every step sending one ``1/n`` chunk on every link
    at once. One worker needs no communication: 0 s.

    Parameters
    ----------
    nbytes : float
        The size (finite, >= 0).
    n_workers : int
        Workers in the ring (>= 1).
    link : LinkModel
        Every link of the ring.

    Returns
    -------
    float
        The time (s).

    Raises
    ------
    CommschedError
        If ``nbytes`` or ``n_workers`` is out of range.

    References
    ----------
    P. Patarasuk, X. Yuan, "Bandwidth optimal all-reduce algorithms for clusters of
    workstations", JPDC 69(2), 2009; PACE (Bao et al., INFOCOM 2020), Sec. II and Eq. (1).

    Examples
    --------
    >>> ring_allreduce_time(8e6, 2, LinkModel(0.0, 1e9))
    0.008
    """
    _check_bytes(nbytes)
    if not isinstance(n_workers, int) or isinstance(n_workers, bool) or n_workers < 1:
        raise CommschedError(f"n_workers must be an integer >= 1, got {n_workers!r}")
    n = n_workers
    steps = 2 * (n - 1)
    return steps * link.latency_s + steps / n * nbytes / link.bandwidth_Bps


@dataclass(frozen=True)
class RingAllReduce:
    """Ring all-reduce time model (:func:`ring_allreduce_time`).

    Parameters
    ----------
    n_workers : int
        Workers in the ring.
    link : LinkModel
        Every link of the ring.

    References
    ----------
    PACE (Bao et al., INFOCOM 2020), Eq. (1) without its aggregation term, plus a
    per-step latency.
    """

    n_workers: int
    link: LinkModel

    def time(self, nbytes: float) -> float:
        """Seconds of one all-reduce of ``nbytes`` bytes (:func:`ring_allreduce_time`).

        Parameters
        ----------
        nbytes : float
            Bytes all-reduced in the ring (finite, >= 0).

        Returns
        -------
        float
            ``2(n-1) * latency + 2(n-1)/n * nbytes / bandwidth``.
        """
        return ring_allreduce_time(nbytes, self.n_workers, self.link)

    def as_linear(self) -> LinearModel:
        """The same model in PACE's form ``a + b * s``.

        Returns
        -------
        LinearModel
            ``a = 2(n-1) * latency``, ``b = 2(n-1) / (n * bandwidth)``.
        """
        n = self.n_workers
        steps = 2 * (n - 1)
        return LinearModel(a=steps * self.link.latency_s, b=steps / (n * self.link.bandwidth_Bps))


@dataclass(frozen=True)
class LinearFit(LinearModel):
    """A :class:`LinearModel` fitted to data (:func:`fit_linear`).

    Parameters
    ----------
    a, b : float
        As in :class:`LinearModel`.
    r2 : float
        Coefficient of determination on the raw values.
    n_points : int
        Number of points fitted.
    """

    r2: float = float("nan")
    n_points: int = 0


def fit_linear(
    sizes: Sequence[float], times: Sequence[float], relative: bool = False
) -> LinearFit:
    """Least-squares fit of ``times ~ a + b * sizes`` (PACE's all-reduce model, Fig. 3).

    Parameters
    ----------
    sizes, times
        Equal-length sequences, at least two distinct sizes, all finite.
    relative
        If False (default), ordinary least squares on the raw values. If True, minimise
        the squared *relative* residuals ``((t - a - b s) / t)^2`` (weighted least squares,
        weights ``1/t^2``), which keeps the small sizes -- several decades below the large
        ones -- from being ignored; needs every time > 0.

    Returns
    -------
    LinearFit
        ``a`` (s), ``b`` (s/byte), ``r2`` = 1 - SS_res / SS_tot on the raw values (1.0 when
        every time is equal and the fit is exact), ``n_points``.

    Raises
    ------
    CommschedError
        If the sequences differ in length, hold a non-finite value, have fewer than two
        distinct sizes, or (``relative``) a time <= 0.

    References
    ----------
    PACE (Bao et al., INFOCOM 2020), Sec. II-C and Fig. 3 (all-reduce time against size,
    log-log).
    """
    s = np.asarray(sizes, dtype=float)
    t = np.asarray(times, dtype=float)
    if s.ndim != 1 or s.shape != t.shape:
        raise CommschedError(
            f"fit_linear needs two equal-length lists, got {s.shape} and {t.shape}"
        )
    if not (np.all(np.isfinite(s)) and np.all(np.isfinite(t))):
        raise CommschedError("fit_linear: sizes and times must be finite")
    if len(np.unique(s)) < 2:
        raise CommschedError("fit_linear needs at least two distinct sizes")
    if relative and np.any(t <= 0):
        raise CommschedError("fit_linear(relative=True) needs every time > 0")
    w = 1.0 / t if relative else np.ones_like(t)
    design = np.column_stack([np.ones_like(s), s]) * w[:, None]
    (a, b), *_ = np.linalg.lstsq(design, t * w, rcond=None)
    resid = t - (a + b * s)
    ss_res = float(np.sum(resid**2))
    ss_tot = float(np.sum((t - t.mean()) ** 2))
    r2 = 1.0 - ss_res / ss_tot if ss_tot > 0 else (1.0 if ss_res == 0 else 0.0)
    return LinearFit(a=float(a), b=float(b), r2=r2, n_points=len(s))
