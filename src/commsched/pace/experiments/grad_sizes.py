"""Gradient tensor sizes per model (the data of the analog of PACE Fig. 4).

PACE (Bao et al., INFOCOM 2020) plots the CDF of the gradient tensor sizes of its models
(Fig. 4) to show that many tensors are small, so the per-operation start-up cost ``a`` of
an all-reduce matters and tensor fusion pays off. From every training trace we list

* one row per gradient tensor (``kind=tensor``): the variable, its bytes, the op that
  produces it (``grad_of``), and
* one row per all-reduce of the all-reduce view (``kind=allreduce``): the gradients one
  op produces together (:mod:`commsched.views.allreduce`), with their summed bytes,

and write metrics per model: ``comm.grad_sizes.<model>.{n_tensors,total_MiB,
median_bytes,frac_below_1MiB,max_bytes}`` (over gradient tensors). A model traced at
several batch sizes is counted once (its gradients do not depend on the batch): the trace
with the smallest batch is used.

Run: ``python -m commsched.pace.experiments.grad_sizes --traces T1.json T2.json
--table grad_sizes.csv --metrics comm_grad_sizes.csv``.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from commsched import driver
from commsched.errors import CommschedError
from commsched.model.traced import load_trace
from commsched.views.common import grad_producers, variable_bytes

__all__ = ["FigureConfig", "grad_rows", "main", "size_metrics"]

MIB = 1 << 20


def grad_rows(trace_path: str) -> list[dict[str, object]]:
    """The gradient tensors and all-reduces of one trace (module docstring).

    Parameters
    ----------
    trace_path : str
        A traced graph (:func:`commsched.model.traced.load_trace`).

    Returns
    -------
    list of dict
        One row per gradient tensor (``kind=tensor``) and one per all-reduce of the
        all-reduce view (``kind=allreduce``); empty for a trace without gradients.

    Raises
    ------
    CommschedError
        If the trace cannot be read.

    References
    ----------
    PACE (Bao et al., INFOCOM 2020), Fig. 4 (gradient tensor sizes) and Sec. IV-A (one
    all-reduce per gradient-producing op).
    """
    g = load_trace(trace_path)
    meta = g.graph.get("meta", {})
    model = str(meta.get("model") or Path(trace_path).stem)
    base = {"model": model, "batch": meta.get("batch"), "trace": Path(trace_path).name}
    sizes = variable_bytes(g)
    rows: list[dict[str, object]] = []
    for op, names in grad_producers(g).items():
        for v in names:
            rows.append({**base, "kind": "tensor", "name": v, "producer": op,
                         "bytes": sizes[v]})
        rows.append({**base, "kind": "allreduce", "name": f"allreduce:{op}", "producer": op,
                     "bytes": sum(sizes[v] for v in names)})
    return rows


def size_metrics(df: pd.DataFrame) -> dict[str, float]:
    """Per-model metrics over the ``kind=tensor`` rows of :func:`grad_rows`.

    Parameters
    ----------
    df : pandas.DataFrame
        Rows of :func:`grad_rows` (several models).

    Returns
    -------
    dict
        ``comm.grad_sizes.<model>.{n_tensors,total_MiB,median_bytes,frac_below_1MiB,
        max_bytes}``.

    References
    ----------
    PACE (Bao et al., INFOCOM 2020), Sec. II-C and Fig. 4: many gradient tensors are
    small, so the all-reduce start-up cost matters.
    """
    out: dict[str, float] = {}
    for model, d in df[df["kind"] == "tensor"].groupby("model"):
        b = d["bytes"].to_numpy(dtype=float)
        key = f"comm.grad_sizes.{model}"
        out[f"{key}.n_tensors"] = float(len(b))
        out[f"{key}.total_MiB"] = float(b.sum() / MIB)
        out[f"{key}.median_bytes"] = float(np.median(b))
        out[f"{key}.frac_below_1MiB"] = float(np.mean(b < MIB))
        out[f"{key}.max_bytes"] = float(b.max())
    return out


@dataclass(frozen=True)
class FigureConfig(driver.FigureConfig):
    """Parameters of ``notebooks/grad_sizes.ipynb``, checked before anything is plotted.

    ``figure`` and the checks: see :class:`~commsched.driver.FigureConfig`.

    Parameters
    ----------
    table : str
        The table of :func:`main`.
    """

    table: str = ""
    WHAT = "gradient-size"
    HINT = "run `snakemake comm_grad_sizes`"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the driver (module docstring).

    Parameters
    ----------
    argv : sequence of str, optional
        ``--traces T ... --table G.csv --metrics M.csv``.

    Returns
    -------
    int
        0, or 2 after a one-line error (bad input: no training trace).
    """
    p = driver.parser("commsched.pace.experiments.grad_sizes", __doc__)
    p.add_argument("--traces", nargs="+", required=True)
    p.add_argument("--table", required=True)
    p.add_argument("--metrics", required=True)
    args = p.parse_args(argv)

    def body() -> None:
        frames = [pd.DataFrame(grad_rows(t)) for t in sorted(args.traces)]
        frames = [f for f in frames if not f.empty]
        if not frames:
            raise CommschedError("no trace has gradient ops (need training traces)")
        df = pd.concat(frames, ignore_index=True)
        # one trace per model: the smallest batch (then the first file name)
        first = (df.drop_duplicates("trace").sort_values(["model", "batch", "trace"])
                 .drop_duplicates("model")["trace"])
        df = df[df["trace"].isin(set(first))].reset_index(drop=True)
        config = {"traces": sorted(args.traces)}
        driver.write_outputs({args.table: df}, size_metrics(df), args.metrics, config)
        print(df[df["kind"] == "tensor"].groupby("model")["bytes"].describe().to_string())

    return driver.run("grad_sizes", body)


if __name__ == "__main__":
    sys.exit(main())
