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

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from commsched.errors import CommschedError
from commsched.model.traced import load_trace
from commsched.plotting import check_figure_inputs
from commsched.results import write_metrics, write_table
from commsched.views.common import grad_producers, variable_bytes

__all__ = ["FigureConfig", "grad_rows", "main", "size_metrics"]

MIB = 1 << 20


def grad_rows(trace_path: str) -> list[dict[str, object]]:
    """Rows of one trace (see the module docstring); empty for a trace without gradients."""
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
    """Per-model metrics over the ``kind=tensor`` rows."""
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
class FigureConfig:
    """Parameters of ``notebooks/grad_sizes.ipynb``, checked before anything is plotted."""

    table: str
    figure: str  # the PDF; the PNG is written beside it

    def __post_init__(self) -> None:
        check_figure_inputs("gradient-size", {"table": self.table}, self.figure,
                            "run `snakemake comm_grad_sizes`")


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m commsched.pace.experiments.grad_sizes",
                                description=__doc__.split("\n")[0])
    p.add_argument("--traces", nargs="+", required=True)
    p.add_argument("--table", required=True)
    p.add_argument("--metrics", required=True)
    args = p.parse_args(argv)
    try:
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
        write_table(df, args.table, config)
        write_metrics(size_metrics(df), args.metrics, config)
    except CommschedError as e:
        print(f"grad_sizes: error: {e}", file=sys.stderr)
        return 2
    print(df[df["kind"] == "tensor"].groupby("model")["bytes"].describe().to_string())
    return 0


if __name__ == "__main__":
    sys.exit(main())
