"""PACE's model of our traced models (Table II analog, tensor sizes) and solver agreement.

``table``: per training trace, PACE's Table II columns counted on our traces --
parameters (millions, trainable variables with a gradient), all-reduce operators (one per
op that outputs gradients, :mod:`commsched.pace.model`) and computation operators (those of
the window PACE schedules: backward of iteration k + forward of k+1; the paper does not
say which it counts) -- and the gradient tensor sizes the paper quotes (Sec. II-C, Fig. 4):
smallest, largest and second largest tensor and the share below 1 MB (10^6 bytes).
Metrics ``pace.table2.<model>.{params_M,allreduce_ops,compute_ops}`` and
``pace.tensors.<model>.{min_bytes,max_bytes,second_bytes,frac_below_1MB}``.

``solvers``: the three solvers of :mod:`commsched.pace.schedule` and :mod:`commsched.pace.lp`
on every trace (unfused, and fused by Alg. 1; for a model so small that every fusion is
shorter than a slot, fused by Alg. 1 without the slot guidance) at the configured setting,
and the paper's LP (14) against the exact solver on seeded random problems small enough
for it. Table rows per instance; metrics
``pace.solvers.{instances,sound_equals_exact,traced_instances,lp14_random,lp14_solved,lp14_equals_exact,lp14_traced_solved,lp14_traced_share,
lp14_not_exact}`` (counts; the share is of the traced instances LP (14) could solve).

Run: ``python -m commsched.pace.experiments.model table|solvers --config-json '{...}'
--traces T1.json.gz ... --table T.csv --metrics M.csv``.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from commsched.cost.allreduce import allreduce_cost
from commsched.errors import CommschedError
from commsched.model.traced import load_trace
from commsched.pace.fusion import balanced_fusion
from commsched.pace.lp import (
    PaperLPError,
    PaperLPTooLarge,
    paper_lp,
    paper_lp_max_coef,
    sound_lp,
)
from commsched.pace.model import PaceModel, SlotProblem, build_model, to_problem
from commsched.pace.schedule import jackson, objective
from commsched.results import write_metrics, write_table

__all__ = ["SETTINGS", "check_config", "main", "random_problem", "solver_rows", "table_rows"]

MB = 10**6


def _name(model: PaceModel, path: str) -> str:
    return str(model.meta.get("model") or path)


def table_rows(paths: Sequence[str]) -> tuple[pd.DataFrame, dict[str, float]]:
    """Table II analog and tensor sizes (module docstring)."""
    rows, metrics = [], {}
    for path in paths:
        trace = load_trace(path)
        model = build_model(trace)
        variables = trace.graph["variables"]
        sizes = np.array(sorted(model.tensors.values()))
        params = sum(math.prod(variables[v].get("shape") or [1]) for v in model.tensors)
        name = _name(model, path)
        row = {
            "model": name, "trace": path, "params_M": params / 1e6,
            "allreduce_ops": len(model.ops), "compute_ops": model.n_compute,
            "tensors": len(sizes), "min_bytes": int(sizes[0]), "max_bytes": int(sizes[-1]),
            "second_bytes": int(sizes[-2]) if len(sizes) > 1 else 0,
            "frac_below_1MB": float(np.mean(sizes < MB)),
        }
        rows.append(row)
        for k in ("params_M", "allreduce_ops", "compute_ops"):
            metrics[f"pace.table2.{name}.{k}"] = float(row[k])
        for k in ("min_bytes", "max_bytes", "second_bytes", "frac_below_1MB"):
            metrics[f"pace.tensors.{name}.{k}"] = float(row[k])
    return pd.DataFrame(rows), metrics


def random_problem(rng: random.Random, n: int, max_p: int) -> SlotProblem:
    """A random problem with integer tails (LP (14) needs them)."""
    return SlotProblem(
        release=tuple(rng.randrange(0, 2 * max_p) for _ in range(n)),
        proc=tuple(rng.randint(1, max_p) for _ in range(n)),
        tail=tuple(float(rng.randrange(0, 4)) for _ in range(n)),
    )


def _lp14(problem: SlotProblem) -> tuple[float | None, str]:
    try:
        return objective(problem, paper_lp(problem)), "solved"
    except PaperLPTooLarge:
        tn, top = paper_lp_max_coef(problem)
        return None, f"refused: coefficient {tn}^{top:g}"
    except PaperLPError as e:
        return None, f"failed: {e}"


#: The settings :func:`solver_rows` reads from the ``pace`` config section, and their types.
SETTINGS: dict[str, tuple[type, ...]] = {
    "workers": (int,), "bandwidth_gbps": (int, float), "latency_us": (int, float),
    "cost": (str,), "slot_ms": (int, float), "compute_scale": (int, float),
}


def check_config(cfg: Any) -> None:
    """One-line :class:`CommschedError` unless ``cfg`` has every setting :func:`solver_rows`
    reads, with its type (the values themselves are checked where they are used).

    >>> check_config({"workers": "8"})
    Traceback (most recent call last):
    ...
    commsched.errors.CommschedError: pace setting 'workers' must be int, got '8'
    """
    if not isinstance(cfg, Mapping):
        raise CommschedError(f"the pace settings must be a mapping, got {type(cfg).__name__}")
    for key, types in SETTINGS.items():
        if key not in cfg:
            raise CommschedError(f"the pace settings lack {key!r}")
        value = cfg[key]
        if isinstance(value, bool) or not isinstance(value, types):
            kind = "a number" if float in types else types[0].__name__
            raise CommschedError(f"pace setting {key!r} must be {kind}, got {value!r}")
    rnd = cfg.get("lp14_random")
    if not (isinstance(rnd, Mapping) and all(
            isinstance(rnd.get(k), int) and not isinstance(rnd.get(k), bool)
            for k in ("instances", "seed"))):
        raise CommschedError("pace setting 'lp14_random' must be {instances: int, seed: int}, "
                             f"got {rnd!r}")


def solver_rows(paths: Sequence[str], cfg: Mapping[str, Any]
                ) -> tuple[pd.DataFrame, dict[str, float]]:
    """Solver agreement (module docstring); ``cfg`` is checked by :func:`check_config`."""
    check_config(cfg)
    slot_s = cfg["slot_ms"] / 1e3
    cost = allreduce_cost(cfg["cost"], cfg["workers"], cfg["bandwidth_gbps"] * 1e9 / 8,
                          cfg["latency_us"] * 1e-6)
    rows: list[dict[str, Any]] = []
    for path in paths:
        model = build_model(load_trace(path), compute_scale=cfg["compute_scale"])
        try:
            fused, label = balanced_fusion(model, cost, slot_s).model, "fused"
        except CommschedError:  # every fusion is shorter than a slot (a tiny model)
            fused = balanced_fusion(model, cost, slot_s, slot_guidance=False).model
            label = "fused-no-slot-guidance"
        for variant, m in (("unfused", model), (label, fused)):
            p = to_problem(m, cost, slot_s)
            exact = objective(p, jackson(p))
            lp14, status = _lp14(p.integral())
            rows.append({
                "instance": f"{_name(model, path)}/{variant}", "n": p.n, "slots": p.horizon,
                "exact": exact, "sound_lp": objective(p, sound_lp(p)),
                "exact_integral": objective(p.integral(), jackson(p.integral())),
                "lp14": lp14, "lp14_status": status,
            })
    rng = random.Random(cfg["lp14_random"]["seed"])
    for k in range(cfg["lp14_random"]["instances"]):
        p = random_problem(rng, rng.randint(1, 4), rng.randint(1, 3))
        exact = objective(p, jackson(p))
        lp14, status = _lp14(p)
        rows.append({"instance": f"random/{k}", "n": p.n, "slots": p.horizon, "exact": exact,
                     "sound_lp": objective(p, sound_lp(p)), "exact_integral": exact,
                     "lp14": lp14, "lp14_status": status})
    df = pd.DataFrame(rows)
    traced = ~df["instance"].str.startswith("random/")
    solved = df["lp14_status"] == "solved"
    metrics = {
        "pace.solvers.instances": float(len(df)),
        "pace.solvers.sound_equals_exact": float((df["sound_lp"] == df["exact"]).sum()),
        "pace.solvers.traced_instances": float(traced.sum()),
        "pace.solvers.lp14_random": float((~traced).sum()),
        "pace.solvers.lp14_solved": float(solved.sum()),
        "pace.solvers.lp14_equals_exact": float((solved & (df["lp14"] == df["exact_integral"]))
                                               .sum()),
        "pace.solvers.lp14_traced_solved": float((solved & traced).sum()),
        "pace.solvers.lp14_traced_share": float((solved & traced).sum() / max(1, traced.sum())),
        # Theorem 2 broken: an optimum that is not the exact one, or not integral.
        "pace.solvers.lp14_not_exact": float(
            (solved & (df["lp14"] != df["exact_integral"])).sum()
            + df["lp14_status"].str.contains("not integral").sum()),
    }
    return df, metrics


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m commsched.pace.experiments.model",
                                description=__doc__.split("\n")[0] if __doc__ else None)
    p.add_argument("what", choices=["table", "solvers"])
    p.add_argument("--config-json", default="{}", help="the pace config section (solvers)")
    p.add_argument("--traces", nargs="+", required=True)
    p.add_argument("--table", required=True)
    p.add_argument("--metrics", required=True)
    args = p.parse_args(argv)
    try:
        cfg = json.loads(args.config_json)
        if args.what == "table":
            df, metrics = table_rows(args.traces)
        else:
            df, metrics = solver_rows(args.traces, cfg)
        config = {"what": args.what, "traces": args.traces, "pace": cfg}
        write_table(df, args.table, config)
        write_metrics(metrics, args.metrics, config)
    except (CommschedError, json.JSONDecodeError) as e:
        print(f"pace_model: error: {e}", file=sys.stderr)
        return 2
    print(df.to_string(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
