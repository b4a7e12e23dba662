"""Benchmarks of PACE's solvers (issue 9, item 7): time and peak memory.

Cases (each runs in its own process, so its peak RSS, from ``os.wait4``, is its own; the
RSS after the imports and the model build is recorded beside it):

* ``fusion``: Alg. 1 (:func:`commsched.pace.fusion.balanced_fusion`) over **every**
  ``R = 1..N`` (``slot_guidance=False``) with the exact solver as oracle, on the
  Transformer trace (ours has 253 all-reduces; the paper's 164). Target: under 1 s.
  Also timed with the slot guidance (the ``R`` whose smallest group fills a slot).
* ``sound_lp``: the sound LP (:func:`commsched.pace.lp.sound_lp`) on VGG-16 at 5 ms slots,
  unfused (32 all-reduces) and fused by Alg. 1, and on the unfused Transformer (253
  all-reduces, its largest problem), each checked equal to the exact solver.
* ``paper_lp``: the paper's LP (14) as written (:func:`commsched.pace.lp.paper_lp` with the
  coefficient guard off) on 240 seeded random problems of growing size (1-8 all-reduces,
  horizons up to about 45 slots, integer tails 0-3), against the exact solver: per
  problem the largest coefficient ``(TN)^(T + max q)``, whether HiGHS returned the exact
  optimum, another value, or no optimum, and the time. The summary gives the largest
  coefficient solved right, the smallest one where it failed, and how many answers were
  wrong; :data:`commsched.pace.lp.PAPER_LP_MAX_COEF` is the guard ``paper_lp`` applies.
* ``lex_lp``: the paper's lexicographic objective as a sequence of LPs
  (:func:`commsched.pace.lp.lexicographic_lp`) on every traced training model at 5 ms
  slots, unfused and fused by Alg. 1 (integral tails), where LP (14) needs coefficients
  of 1e35 and more: time, LPs solved, levels of the order, and whether its ``alpha`` is
  the lexicographic optimum (largest-tail-first's); and, on VGG-16 and the unfused
  ResNet-50, with one level per LP (``max_weight=1``) to show what grouping levels saves.

Setting: the ``pace`` section of ``config/config.yaml`` (workers, bandwidth, latency, cost,
compute scale; slot 5 ms). Writes ``benchmarks/results/pace.json``. The 2 cores are shared
with other work; the load average is recorded with the result.

Run: ``python benchmarks/bench_pace.py`` (a few minutes; most of it ``lex_lp``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml
from benchlib import timed, write_result

from commsched.cost.allreduce import allreduce_cost
from commsched.errors import CommschedError
from commsched.model.traced import load_trace
from commsched.pace.experiments.model import random_problem
from commsched.pace.fusion import balanced_fusion
from commsched.pace.lp import (
    PAPER_LP_MAX_COEF,
    PaperLPError,
    lexicographic_lp,
    paper_lp,
    paper_lp_max_coef,
    sound_lp,
)
from commsched.pace.model import build_model
from commsched.pace.schedule import jackson, objective, order_vector
from commsched.pace.slots import to_problem

ROOT = Path(__file__).resolve().parent.parent
TARGET_FUSION_S = 1.0
CASES = ("fusion", "sound_lp", "paper_lp", "lex_lp")
TRACES = sorted(p for p in (ROOT / "data/traces").glob("*-train-*.json.gz")
                if "torch" not in p.name)  # the pipeline's pace_solvers traces


def _setting() -> dict[str, Any]:
    cfg = yaml.safe_load((ROOT / "config/config.yaml").read_text())["pace"]
    cost = allreduce_cost(cfg["cost"], cfg["workers"], cfg["bandwidth_gbps"] * 1e9 / 8,
                          cfg["latency_us"] * 1e-6)
    return {"cfg": cfg, "cost": cost, "slot_s": cfg["slot_ms"] / 1e3}


def _rss_mib() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def case_fusion(repeat: int) -> dict[str, Any]:
    s = _setting()
    trace = "data/traces/transformer-train-b4.json.gz"
    model = build_model(load_trace(ROOT / trace), s["cfg"]["compute_scale"])
    rss = _rss_mib()
    times, res = timed(lambda: balanced_fusion(model, s["cost"], s["slot_s"],
                                               slot_guidance=False), repeat)
    g_times, g_res = timed(lambda: balanced_fusion(model, s["cost"], s["slot_s"]), repeat)
    return {
        "trace": trace, "allreduces": len(model.ops), "rss_before_mib": rss,
        "all_R": {"R_evaluated": len(res.candidates), "best_R": res.r,
                  "iter_time_s": res.iter_time_s, "median_s": statistics.median(times),
                  "runs_s": times},
        "slot_guidance": {"R_evaluated": sum(c["iter_time_s"] is not None
                                             for c in g_res.candidates),
                          "best_R": g_res.r, "iter_time_s": g_res.iter_time_s,
                          "median_s": statistics.median(g_times), "runs_s": g_times},
        "target": f"all R in < {TARGET_FUSION_S:g} s",
        "target_met": statistics.median(times) < TARGET_FUSION_S,
    }


def case_sound_lp(repeat: int) -> dict[str, Any]:
    s = _setting()
    trace = "data/traces/vgg16-train-b2.json.gz"
    model = build_model(load_trace(ROOT / trace), s["cfg"]["compute_scale"])
    fused = balanced_fusion(model, s["cost"], s["slot_s"]).model
    big = "data/traces/transformer-train-b4.json.gz"
    transformer = build_model(load_trace(ROOT / big), s["cfg"]["compute_scale"])
    rss = _rss_mib()
    out: dict[str, Any] = {"trace": trace, "rss_before_mib": rss, "large_trace": big}
    for variant, m in (("unfused", model), ("fused", fused), ("transformer_unfused", transformer)):
        p = to_problem(m, s["cost"], s["slot_s"])
        times, sched = timed(lambda p=p: sound_lp(p), repeat)
        j_times, j_sched = timed(lambda p=p: jackson(p), repeat)
        out[variant] = {
            "allreduces": p.n, "horizon_slots": p.horizon,
            "sound_lp_median_s": statistics.median(times), "sound_lp_runs_s": times,
            "exact_median_s": statistics.median(j_times),
            "objective_slots": objective(p, sched),
            "equals_exact": objective(p, sched) == objective(p, j_sched),
        }
    return out


def case_paper_lp(repeat: int) -> dict[str, Any]:
    rng = random.Random(0)
    rows = []
    for n in range(1, 9):
        for max_p in (1, 2, 3, 4, 6):
            for _ in range(6):
                p = random_problem(rng, n, max_p)
                tn, top = paper_lp_max_coef(p)
                exact = objective(p, jackson(p))
                t = time.perf_counter()
                try:
                    v = objective(p, paper_lp(p, max_coef=math.inf))
                    status = "exact" if v == exact else "wrong"
                except PaperLPError as e:
                    status, v = f"failed: {e}", None
                rows.append({"n": n, "T": p.horizon, "log10_coef": round(top * math.log10(tn), 2),
                             "status": status, "lp14": v, "exact": exact,
                             "seconds": round(time.perf_counter() - t, 4)})
    ok = [r["log10_coef"] for r in rows if r["status"] == "exact"]
    bad = [r["log10_coef"] for r in rows if r["status"] != "exact"]
    return {
        "problems": len(rows),
        "solved_exact": len(ok),
        "wrong_answers": sum(r["status"] == "wrong" for r in rows),
        "failed": len(bad),
        "largest_log10_coef_solved": max(ok, default=None),
        "smallest_log10_coef_failed": min(bad, default=None),
        "guard_log10_coef": math.log10(PAPER_LP_MAX_COEF),
        "all_below_guard_exact": all(r["status"] == "exact" for r in rows
                                     if r["log10_coef"] <= math.log10(PAPER_LP_MAX_COEF)),
        "largest_T_solved": max((r["T"] for r in rows if r["status"] == "exact"), default=None),
        "max_seconds": max(r["seconds"] for r in rows),
        "rows": rows,
    }


def case_lex_lp(repeat: int) -> dict[str, Any]:
    s = _setting()
    rows = []
    for path in TRACES:
        model = build_model(load_trace(path), s["cfg"]["compute_scale"])
        try:
            fused = balanced_fusion(model, s["cost"], s["slot_s"]).model
        except CommschedError:  # every fusion shorter than a slot (a tiny model)
            fused = balanced_fusion(model, s["cost"], s["slot_s"], slot_guidance=False).model
        for variant, m in (("unfused", model), ("fused", fused)):
            p = to_problem(m, s["cost"], s["slot_s"]).integral()
            tn, top = paper_lp_max_coef(p)
            single = path.name.startswith("vgg16") or (path.name.startswith("resnet50")
                                                       and variant == "unfused")
            settings = [("grouped", None), *([("one_level_per_lp", 1.0)] if single else [])]
            for how, w in settings:
                times, sol = timed(lambda p=p, w=w: lexicographic_lp(p) if w is None
                                   else lexicographic_lp(p, max_weight=w), repeat)
                rows.append({
                    "trace": path.name.split(".")[0], "variant": variant, "levels_per_lp": how,
                    "allreduces": p.n, "horizon_slots": p.horizon, "levels": sol.levels,
                    "lp_solves": sol.lp_solves, "lp14_log10_coef": round(top * math.log10(tn)),
                    "lexmin": order_vector(p, sol.schedule) == order_vector(p, jackson(p)),
                    "median_s": statistics.median(times), "runs_s": times,
                })
    grouped = [r for r in rows if r["levels_per_lp"] == "grouped"]
    return {
        "instances": len(grouped),
        "all_lexmin": all(r["lexmin"] for r in rows),
        "max_median_s": max(r["median_s"] for r in grouped),
        "total_median_s": round(sum(r["median_s"] for r in grouped), 3),
        "max_lp_solves": max(r["lp_solves"] for r in grouped),
        "max_levels": max(r["levels"] for r in grouped),
        "rows": rows,
    }


def run_case(name: str, repeat: int) -> dict[str, Any]:
    """Run one case in a child process; its result with the child's peak RSS."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "case.json"
        cmd = [sys.executable, __file__, "--case", name, "--repeat", str(repeat),
               "--case-out", str(out)]
        load_before = os.getloadavg()
        proc = subprocess.Popen(cmd, cwd=ROOT)
        _, status, usage = os.wait4(proc.pid, 0)
        if os.waitstatus_to_exitcode(status) != 0:
            raise SystemExit(f"case {name} failed")
        result = json.loads(out.read_text())
    result["peak_rss_mib"] = round(usage.ru_maxrss / 1024, 1)
    result["load_before"] = [round(x, 2) for x in load_before]
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--case", choices=CASES, help="run one case here (used by the parent)")
    ap.add_argument("--case-out", help="where --case writes its result")
    ap.add_argument("--result", default=str(ROOT / "benchmarks/results/pace.json"))
    args = ap.parse_args(argv)
    if args.case:
        fn = {"fusion": case_fusion, "sound_lp": case_sound_lp, "paper_lp": case_paper_lp,
              "lex_lp": case_lex_lp}
        Path(args.case_out).write_text(json.dumps(fn[args.case](args.repeat)))
        return 0
    cases = {name: run_case(name, args.repeat) for name in CASES}
    for name, r in cases.items():
        brief = {k: v for k, v in r.items() if k != "rows"}
        print(name, json.dumps(brief), flush=True)
    write_result(args.result, {
        "benchmark": "PACE solvers: Alg. 1 over all R, sound LP, the paper's LP (14), its "
                     "lexicographic objective as a sequence of LPs",
        "setting": {k: v for k, v in _setting()["cfg"].items() if k != "traces"},
        "repeat": args.repeat,
        "note": "wall times on a 2-core VM shared with other engineers' jobs (load_before); "
                "peak_rss_mib is the case process's own (os.wait4), imports included",
        "cases": cases,
    })
    return 0


if __name__ == "__main__":
    sys.exit(main())
