"""PACE's model of our traced models (Table II analog, tensor sizes) and solver agreement.

``table``: per training trace, PACE's Table II columns counted on our traces --
parameters (millions, trainable variables with a gradient), all-reduce operators (one per
op that outputs gradients, :mod:`commsched.pace.model`) and computation operators two
ways: at MXNet's operator granularity, forward plus backward operators
(:mod:`commsched.pace.operators`; Table II counts MXNet operators), and TensorFlow's
fine-grained ops of the window PACE schedules (backward of iteration k + forward of k+1)
-- and the gradient tensor sizes the paper quotes (Sec. II-C, Fig. 4): smallest, largest
and second largest tensor and the share below 1 MB (10^6 bytes). Metrics
``pace.table2.<model>.{params_M,allreduce_ops,mxnet_ops,mxnet_forward_ops,compute_ops}``
(the MXNet counts only for a trace with a ``loss/`` scope, as our TensorFlow traces and
their Chakra round trips have; NaN in the table otherwise, e.g. for another tool's Chakra
trace) and
``pace.tensors.<model>.{min_bytes,max_bytes,second_bytes,frac_below_1MB}``. With
``--symbols``, one row more per MXNet symbol JSON (sockeye's Seq2Seq and Transformer,
``data/models/sockeye``): its parameters (the variables with a shape), all-reduce tensors
(one per parameter) and computation operators counted on the symbol itself
(:func:`commsched.pace.operators.symbol_operators`); metrics
``pace.table2.<file stem>.{params_M,allreduce_ops,mxnet_ops,mxnet_forward_ops}``.

``solvers``: the solvers of :mod:`commsched.pace.schedule` and :mod:`commsched.pace.lp`
on every trace (unfused, and fused by Alg. 1; for a model so small that every fusion is
shorter than a slot, fused by Alg. 1 without the slot guidance) at the configured setting,
and the paper's LP (14) against the exact solver on seeded random problems small enough
for it. The lexicographic LP (the paper's order of ``alpha`` as a sequence of LPs) runs
on every instance, with its wall time and number of LPs; it counts as exact when its
``alpha`` equals that of largest-tail-first (the lexicographic optimum) on the integral
problem. Table rows per instance; metrics
``pace.solvers.{instances,sound_equals_exact,traced_instances,lp14_random,lp14_solved,lp14_equals_exact,lp14_traced_solved,lp14_traced_share,
lp14_not_exact}`` (counts; the share is of the traced instances LP (14) could solve),
``pace.solvers.{lex_solved,lex_equals_exact,lex_not_exact,lex_traced_share,
lex_traced_max_time_s,lex_traced_max_lp_solves,lex_traced_max_levels}`` (the share is of the
traced instances the lexicographic LP solved exactly; seconds are wall time), and
Theorem 1 on every trace's window, Lemma 2 and Theorem 3 on seeded random chains
(:mod:`commsched.pace.experiments.theorems`, metrics ``pace.theorems.*``).

Run: ``python -m commsched.pace.experiments.model table|solvers --config-json '{...}'
--traces T1.json.gz ... [--symbols S1.json.gz ...] --table T.csv --metrics M.csv``.
"""

from __future__ import annotations

import math
import random
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from commsched import driver
from commsched.cost.allreduce import allreduce_cost
from commsched.errors import CommschedError
from commsched.model.traced import load_trace
from commsched.pace.experiments.theorems import lemma2_counts, theorem1_counts, theorem3_counts
from commsched.pace.fusion import balanced_fusion
from commsched.pace.lp import (
    PaperLPError,
    PaperLPTooLarge,
    lexicographic_lp,
    paper_lp,
    paper_lp_max_coef,
    sound_lp,
)
from commsched.pace.model import PaceModel, build_model, window
from commsched.pace.operators import (
    has_loss_scope,
    mxnet_operators,
    read_symbol,
    symbol_operators,
)
from commsched.pace.schedule import jackson, objective, order_vector
from commsched.pace.slots import SlotProblem, to_problem

__all__ = ["main", "random_problem", "solver_rows", "table_rows"]

MB = 10**6


def _name(model: PaceModel, path: str) -> str:
    return str(model.meta.get("model") or path)


def table_rows(paths: Sequence[str], symbols: Sequence[str] = ()
               ) -> tuple[pd.DataFrame, dict[str, float]]:
    """PACE's Table II columns and the gradient tensor sizes of traced models.

    Parameters
    ----------
    paths : sequence of str
        Traced training iterations.
    symbols : sequence of str, optional
        MXNet training symbols (``mx.sym.save`` JSON with parameter shapes), one row each,
        named by the file's stem.

    Returns
    -------
    pandas.DataFrame
        One row per trace: parameters (millions), all-reduce operators, computation
        operators at MXNet's granularity (forward, backward, total, forward by MXNet
        operator) and TensorFlow's window compute ops, the smallest, largest and second
        largest gradient tensor and the share below 1 MB.
    dict
        ``pace.table2.<model>.*`` and ``pace.tensors.<model>.*`` (module docstring).

    Raises
    ------
    CommschedError
        If a trace cannot be read or modelled, or a symbol cannot be read.

    References
    ----------
    PACE (Bao et al., INFOCOM 2020), Table II; Sec. II-C and Fig. 4 (tensor sizes);
    Sec. IV-A (the window of computation operators); Sec. VI (MXNet 1.5, sockeye).
    """
    rows, metrics = [], {}
    for path in paths:
        trace = load_trace(path)
        model = build_model(trace)
        variables = trace.graph["variables"]
        sizes = np.array(sorted(model.tensors.values()))
        params = sum(math.prod(variables[v].get("shape") or [1]) for v in model.tensors)
        name = _name(model, path)
        mx = mxnet_operators(trace) if has_loss_scope(trace) else None
        row = {
            "model": name, "trace": path, "params_M": params / 1e6,
            "allreduce_ops": len(model.ops),
            "mxnet_ops": mx.total if mx else math.nan,
            "mxnet_forward_ops": mx.n_forward if mx else math.nan,
            "mxnet_backward_ops": mx.backward if mx else math.nan,
            "mxnet_forward": mx.breakdown() if mx else "",
            "compute_ops": model.n_compute,
            "tensors": len(sizes), "min_bytes": int(sizes[0]), "max_bytes": int(sizes[-1]),
            "second_bytes": int(sizes[-2]) if len(sizes) > 1 else 0,
            "frac_below_1MB": float(np.mean(sizes < MB)),
        }
        rows.append(row)
        for k in ("params_M", "allreduce_ops", "compute_ops"):
            metrics[f"pace.table2.{name}.{k}"] = float(row[k])
        if mx:
            metrics[f"pace.table2.{name}.mxnet_ops"] = float(mx.total)
            metrics[f"pace.table2.{name}.mxnet_forward_ops"] = float(mx.n_forward)
        for k in ("min_bytes", "max_bytes", "second_bytes", "frac_below_1MB"):
            metrics[f"pace.tensors.{name}.{k}"] = float(row[k])
    for path in symbols:
        sym = read_symbol(path)
        ops = symbol_operators(sym)
        name = Path(path).name.split(".")[0]
        rows.append({"model": name, "trace": path, "params_M": sym.n_params / 1e6,
                     "allreduce_ops": len(sym.params), "mxnet_ops": ops.total,
                     "mxnet_forward_ops": ops.n_forward, "mxnet_backward_ops": ops.backward,
                     "mxnet_forward": ops.breakdown(), "tensors": len(sym.params)})
        metrics.update({f"pace.table2.{name}.params_M": sym.n_params / 1e6,
                        f"pace.table2.{name}.allreduce_ops": float(len(sym.params)),
                        f"pace.table2.{name}.mxnet_ops": float(ops.total),
                        f"pace.table2.{name}.mxnet_forward_ops": float(ops.n_forward)})
    return pd.DataFrame(rows), metrics


def random_problem(rng: random.Random, n: int, max_p: int) -> SlotProblem:
    """A random slotted problem with integer tails (LP (14) needs them).

    Parameters
    ----------
    rng : random.Random
        The seeded source of every choice.
    n : int
        Number of all-reduces.
    max_p : int
        Largest processing time in slots (releases are below ``2 * max_p``, tails below 4).

    Returns
    -------
    SlotProblem
        The problem.

    References
    ----------
    PACE (Bao et al., INFOCOM 2020), Sec. IV-B, LP (14) (integral data).
    """
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


def _lex(problem: SlotProblem) -> dict[str, Any]:
    """The lexicographic LP on an integral problem: its row entries."""
    start = time.perf_counter()
    try:
        sol = lexicographic_lp(problem)
    except PaperLPError as e:
        return {"lex": None, "lex_status": f"failed: {e}", "lex_lexmin": False,
                "lex_lp_solves": None, "lex_levels": None,
                "lex_s": time.perf_counter() - start}
    seconds = time.perf_counter() - start
    return {"lex": objective(problem, sol.schedule), "lex_status": "solved",
            "lex_lexmin": order_vector(problem, sol.schedule)
            == order_vector(problem, jackson(problem)),
            "lex_lp_solves": sol.lp_solves, "lex_levels": sol.levels, "lex_s": seconds}


def solver_rows(paths: Sequence[str], cfg: Mapping[str, Any]
                ) -> tuple[pd.DataFrame, dict[str, float]]:
    """Solver agreement on traced and random problems (module docstring).

    Parameters
    ----------
    paths : sequence of str
        Traced training iterations.
    cfg : mapping
        The ``pace`` config section, valid for the config schema
        (:func:`commsched.driver.config_section`): ``workers``, ``bandwidth_gbps``,
        ``latency_us``, ``cost``, ``slot_ms``, ``compute_scale``, ``lp14_random`` and
        ``theorems``.

    Returns
    -------
    pandas.DataFrame
        One row per instance: the objective of the exact solver, the sound LP, the exact
        solver on the integral problem, LP (14) with its status, and the lexicographic LP
        with its status, whether its ``alpha`` is the lexicographic optimum, its LPs, its
        levels and its wall time.
    dict
        ``pace.solvers.*`` and ``pace.theorems.*`` counts (module docstring).

    Raises
    ------
    CommschedError
        If a trace cannot be read, or PACE's model of it cannot be built.

    References
    ----------
    PACE (Bao et al., INFOCOM 2020), Sec. IV-A, Theorem 1; Sec. IV-B: LP (14) and
    Theorem 2 (its optimum is integral and optimal); Sec. V, Alg. 1 (balanced fusion),
    Lemma 2 and Theorem 3.
    """
    slot_s = cfg["slot_ms"] / 1e3
    cost = allreduce_cost(cfg["cost"], cfg["workers"], cfg["bandwidth_gbps"] * 1e9 / 8,
                          cfg["latency_us"] * 1e-6)
    rows: list[dict[str, Any]] = []
    th_rng = random.Random(cfg["theorems"]["seed"])
    theorems = dict.fromkeys(("theorem1_cases", "theorem1_mismatches", "lemma2_groupings",
                              "lemma2_violations", "theorem3_cases", "theorem3_violations"), 0)
    for path in paths:
        trace = load_trace(path)
        model = build_model(trace, compute_scale=cfg["compute_scale"])
        cases, bad = theorem1_counts(window(trace), th_rng)
        theorems["theorem1_cases"] += cases
        theorems["theorem1_mismatches"] += bad
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
                "lp14": lp14, "lp14_status": status, **_lex(p.integral()),
            })
    rng = random.Random(cfg["lp14_random"]["seed"])
    for k in range(cfg["lp14_random"]["instances"]):
        p = random_problem(rng, rng.randint(1, 4), rng.randint(1, 3))
        exact = objective(p, jackson(p))
        lp14, status = _lp14(p)
        rows.append({"instance": f"random/{k}", "n": p.n, "slots": p.horizon, "exact": exact,
                     "sound_lp": objective(p, sound_lp(p)), "exact_integral": exact,
                     "lp14": lp14, "lp14_status": status, **_lex(p)})
    for _ in range(cfg["theorems"]["instances"]):
        groupings, bad = lemma2_counts([th_rng.randint(0, 20) for _ in range(th_rng.randint(2, 6))])
        theorems["lemma2_groupings"] += groupings
        theorems["lemma2_violations"] += bad
        cases, bad = theorem3_counts([th_rng.randint(1, 6) for _ in range(th_rng.randint(1, 8))])
        theorems["theorem3_cases"] += cases
        theorems["theorem3_violations"] += bad
    df = pd.DataFrame(rows)
    traced = ~df["instance"].str.startswith("random/")
    solved = df["lp14_status"] == "solved"
    lex_solved = df["lex_status"] == "solved"
    # exact: alpha is the lexicographic optimum and the objective the exact solver's
    lex_exact = lex_solved & df["lex_lexmin"].astype(bool) & (df["lex"] == df["exact_integral"])
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
        "pace.solvers.lex_solved": float(lex_solved.sum()),
        "pace.solvers.lex_equals_exact": float(lex_exact.sum()),
        "pace.solvers.lex_not_exact": float(
            (lex_solved & ~lex_exact).sum() + df["lex_status"].str.contains("not integral").sum()),
        "pace.solvers.lex_traced_share": float((lex_exact & traced).sum() / max(1, traced.sum())),
        "pace.solvers.lex_traced_max_time_s": float(df.loc[traced, "lex_s"].max()),
        "pace.solvers.lex_traced_max_lp_solves": float(df.loc[traced, "lex_lp_solves"].max()),
        "pace.solvers.lex_traced_max_levels": float(df.loc[traced, "lex_levels"].max()),
        **{f"pace.theorems.{k}": float(v) for k, v in theorems.items()},
    }
    return df, metrics


def main(argv: Sequence[str] | None = None) -> int:
    """Run the driver: ``table`` or ``solvers`` (module docstring).

    Parameters
    ----------
    argv : sequence of str, optional
        ``table|solvers [--config-json J] --traces T ... [--symbols S ...] --table
        --metrics``.

    Returns
    -------
    int
        0, or 2 after a one-line error (a config the schema rejects, an unreadable trace).
    """
    p = driver.parser("commsched.pace.experiments.model", __doc__)
    p.add_argument("what", choices=["table", "solvers"])
    p.add_argument("--config-json", default="{}", help="the pace config section (solvers)")
    p.add_argument("--traces", nargs="+", required=True)
    p.add_argument("--symbols", nargs="*", default=[],
                   help="MXNet training symbols counted beside the traces (table)")
    p.add_argument("--table", required=True)
    p.add_argument("--metrics", required=True)
    args = p.parse_args(argv)

    def body() -> None:
        if args.what == "table":
            cfg: dict[str, Any] = {}
            df, metrics = table_rows(args.traces, args.symbols)
        else:
            cfg = driver.config_section("pace", args.config_json)
            df, metrics = solver_rows(args.traces, cfg)
        config = {"what": args.what, "traces": args.traces, "symbols": args.symbols,
                  "pace": cfg}
        driver.write_outputs({args.table: df}, metrics, args.metrics, config)
        print(df.to_string(index=False))

    return driver.run("pace_model", body)


if __name__ == "__main__":
    sys.exit(main())
