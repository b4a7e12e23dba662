"""PACE's GPU per model: the compute time of one training iteration on a GTX 1080 Ti.

PACE (Bao et al., INFOCOM 2020, Sec. VI-B) trains on one GTX 1080 Ti per worker. The
simulated reproduction (:mod:`commsched.pace.experiments.sim`) scales each CPU trace so that
one iteration without communication takes the model's 1080 Ti step time, read from a
calibration table (config ``pace_sim.calibration``, by default
``data/calibration/pace_gtx1080ti.csv``; its README gives every source and derivation).
Each row derives its step time from public measurements:

* ``method = throughput``: ``step_s = batch / (reported_per_s * device_ratio)``, a measured
  training throughput (samples/s), ``device_ratio`` converting it from the GPU it was
  measured on to a 1080 Ti (1 when measured on one);
* ``method = kernels``: ``step_s = k * kernel_s`` with ``kernel_s = gemm_mflop_per_sample *
  1e6 * batch / (gemm_tflops * 1e12) + recurrent_layers * batch * recurrent_us_per_token *
  1e-6`` (the GEMM and recurrent kernels at benchmarked rates) and ``k`` the ratio of the
  ``overhead_from`` row's throughput step to its own kernel estimate.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from commsched.errors import CommschedError

__all__ = ["COLUMNS", "Calibration", "load_calibration"]

#: The columns of a calibration table (README of ``data/calibration``).
COLUMNS = ("model", "batch", "unit", "method", "reported_per_s", "device_ratio",
           "gemm_mflop_per_sample", "gemm_tflops", "recurrent_layers",
           "recurrent_us_per_token", "overhead_from", "source")


@dataclass(frozen=True)
class Calibration:
    """One model's 1080 Ti compute time (a row of the calibration table).

    Parameters
    ----------
    model : str
        The model's name (``pace_sim.models[].name``).
    batch : int
        The batch per GPU the step time is for.
    unit : str
        What a sample is.
    method : str
        ``throughput`` or ``kernels`` (module docstring).
    step_s : float
        One training iteration without communication on a 1080 Ti (s).
    kernel_s : float or None
        The kernel estimate of the step (s), where the row has its inputs.
    source : str
        The row's source key (the README's "Sources").
    """

    model: str
    batch: int
    unit: str
    method: str
    step_s: float
    kernel_s: float | None
    source: str


def _num(row: Mapping[str, object], col: str, where: str) -> float:
    v = row[col]
    try:
        x = float(v)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        x = math.nan
    if not math.isfinite(x) or x < 0:
        raise CommschedError(f"{where}: {col} must be a number >= 0, got {v!r}")
    return x


def _kernel_s(row: Mapping[str, object], where: str) -> float | None:
    if all(pd.isna(row[c]) for c in ("gemm_mflop_per_sample", "gemm_tflops")):
        return None
    batch = _num(row, "batch", where)
    rate = _num(row, "gemm_tflops", where)
    if rate == 0:
        raise CommschedError(f"{where}: gemm_tflops must be > 0")
    gemm = _num(row, "gemm_mflop_per_sample", where) * 1e6 * batch / (rate * 1e12)
    layers = 0.0 if pd.isna(row["recurrent_layers"]) else _num(row, "recurrent_layers", where)
    per_tok = (0.0 if pd.isna(row["recurrent_us_per_token"])
               else _num(row, "recurrent_us_per_token", where))
    return gemm + layers * batch * per_tok * 1e-6


def load_calibration(path: str | Path) -> dict[str, Calibration]:
    """Read a calibration table and derive every model's 1080 Ti step time.

    Parameters
    ----------
    path : str or Path
        A CSV with :data:`COLUMNS` (``data/calibration/pace_gtx1080ti.csv``).

    Returns
    -------
    dict of str to Calibration
        By model name.

    Raises
    ------
    CommschedError
        One line naming the file (and row, column) for an unreadable file, a missing
        column, a duplicate model, an unknown method, a missing or non-positive input, or an
        ``overhead_from`` that is not a ``throughput`` row with kernel inputs.

    References
    ----------
    PACE (Bao et al., INFOCOM 2020), Sec. VI-B (one GTX 1080 Ti per worker; batches 64, 32,
    4096 and 2048 samples).
    """
    try:
        df = pd.read_csv(path, dtype={"model": str, "overhead_from": str})
    except (OSError, ValueError) as e:
        raise CommschedError(f"{path}: cannot read calibration table ({e})") from None
    missing = [c for c in COLUMNS if c not in df.columns]
    if missing:
        raise CommschedError(f"{path}: missing column(s) {', '.join(missing)}")
    dup = sorted(set(df.model[df.model.duplicated()]))
    if dup:
        raise CommschedError(f"{path}: model {dup[0]!r} has more than one row")
    rows = {str(r["model"]): r for r in df.to_dict("records")}
    out: dict[str, Calibration] = {}

    def derive(name: str) -> Calibration:
        if name in out:
            return out[name]
        r = rows[name]
        where = f"{path}: {name}"
        batch = _num(r, "batch", where)
        if batch < 1 or batch != int(batch):
            raise CommschedError(f"{where}: batch must be a positive integer, got {batch:g}")
        kernel = _kernel_s(r, where)
        if r["method"] == "throughput":
            rate = _num(r, "reported_per_s", where) * _num(r, "device_ratio", where)
            if rate == 0:
                raise CommschedError(f"{where}: reported_per_s and device_ratio must be > 0")
            step = batch / rate
        elif r["method"] == "kernels":
            ref = r["overhead_from"]
            ok = isinstance(ref, str) and ref in rows and rows[ref]["method"] == "throughput"
            base = derive(ref) if ok else None
            if base is None or not base.kernel_s:
                raise CommschedError(f"{where}: overhead_from must name a throughput row "
                                     f"with kernel inputs, got {ref!r}")
            if kernel is None:
                raise CommschedError(f"{where}: method kernels needs gemm_mflop_per_sample "
                                     "and gemm_tflops")
            step = base.step_s / base.kernel_s * kernel
        else:
            raise CommschedError(f"{where}: method must be throughput or kernels, "
                                 f"got {r['method']!r}")
        if step <= 0:
            raise CommschedError(f"{where}: the derived step time is {step:g} s")
        out[name] = Calibration(name, int(batch), str(r["unit"]), str(r["method"]), step,
                                kernel, str(r["source"]))
        return out[name]

    for name in rows:
        derive(name)
    return out
