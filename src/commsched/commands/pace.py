"""``commsched pace``: PACE's plan (balanced fusion + optimal preemptive schedule), simulated.

``commsched pace plan TRACE --workers W --bandwidth GBPS [--slot MS] [--cost ring|fit]
[--solver NAME] -o PLAN.json`` builds PACE's model of a traced training iteration
(:mod:`commsched.pace.model`), runs Alg. 1 with the exact scheduler as oracle, or another
of :data:`commsched.pace.lp.SLOT_SOLVERS` (``--solver lex-lp``: the paper's lexicographic
LP), (:mod:`commsched.pace.fusion`) and writes the all-reduce plan
(:mod:`commsched.pace.plan`): fused groups, their partitions and priorities.
``--no-fusion`` schedules the unfused all-reduces instead (PACE without fusion).

``commsched pace simulate PLAN TRACE --workers W --bandwidth GBPS [--cost ring|fit]
[--compute-capacity N|unbounded] [--table CSV] [--usage CSV]`` runs a plan file (PACE's or
any other) on the traced iteration in the all-reduce simulator
(:func:`commsched.pace.sim.simulate_plan`) and prints the steady-state iteration time;
``--table`` writes one row per executed partition, ``--usage`` the channel's use in bins.
"""

from __future__ import annotations

import argparse
from typing import Any

from commsched.errors import CommschedError
from commsched.validation import flag, input_file, output_file, within

#: ``commsched.pace.lp.SLOT_SOLVERS.choices()``, spelled out so that ``commsched --help``
#: does not import the LP solvers (tests/test_registries.py keeps them equal).
SOLVER_CHOICES = ["exact", "sound-lp", "lex-lp", "lp14", "largest-tail-first"]

#: Largest number of time slots (``plan --slot``) or usage bins (``simulate --bin-ms``)
#: in one iteration.
MAX_STEPS = 10**6

__all__ = ["SOLVER_CHOICES", "register", "run_plan", "run_simulate"]


def register(sub: Any) -> None:
    p = sub.add_parser("pace", help="PACE: all-reduce plans (balanced fusion + optimal "
                       "preemption), simulated")
    psub = p.add_subparsers(dest="pace_command", metavar="ACTION", required=True)
    pl = psub.add_parser("plan", help="write PACE's all-reduce plan of a traced training step")
    pl.add_argument("trace", type=input_file,
                    help="traced training iteration (*.json.gz, commsched trace)")
    _cluster_options(pl)
    pl.add_argument("--slot", type=flag(0, 1e6, lo_open=True), default=None,
                    help="time slot, ms; at most 1e6 slots per iteration (default 5, PACE "
                         "Sec. IV-A: "
                         "commsched.pace.slots.DEFAULT_SLOT_S)")
    pl.add_argument("--no-fusion", action="store_true",
                    help="schedule the unfused all-reduces (PACE without fusion)")
    pl.add_argument("--no-slot-guidance", action="store_true",
                    help="allow all-reduces shorter than a slot (Sec. IV-A advises against)")
    pl.add_argument("--solver", choices=SOLVER_CHOICES, default="exact",
                    help="Alg. 1's oracle: exact (largest-tail-first, default), sound-lp, "
                         "lex-lp (the paper's lexicographic objective as a sequence of LPs) "
                         "or lp14 (LP (14) as written, small problems only); lex-lp and "
                         "lp14 schedule with tails in whole slots (PACE Sec. IV-B)")
    pl.add_argument("-o", "--output", required=True, type=output_file,
                    help="plan file to write (JSON)")
    pl.set_defaults(func=run_plan)
    sm = psub.add_parser("simulate", help="run an all-reduce plan on a traced training step "
                         "in the all-reduce simulator")
    sm.add_argument("plan", type=input_file, help="all-reduce plan (JSON, commsched pace plan)")
    sm.add_argument("trace", type=input_file,
                    help="traced training iteration (*.json.gz, commsched trace)")
    _cluster_options(sm)
    sm.add_argument("--compute-capacity", default=None,
                    help="compute ops at once: an integer, or 'unbounded' (PACE's ideal "
                         "compute); default: the trace's (1, one op at a time)")
    sm.add_argument("--table", type=output_file, help="write one row per executed partition (CSV)")
    sm.add_argument("--usage", type=output_file,
                    help="write the channel's use in bins of --bin-ms (CSV)")
    sm.add_argument("--bin-ms", type=flag(0, 1e6, lo_open=True), default=5.0,
                    help="bin length of --usage, ms; at most 1e6 bins per iteration "
                         "(default 5, PACE Sec. VI-E)")
    sm.set_defaults(func=run_simulate)


def _cluster_options(p: argparse.ArgumentParser) -> None:
    """The cluster and cost options that ``plan`` and ``simulate`` share."""
    p.add_argument("--workers", type=flag(2, 2**20, integer=True), required=True,
                   help="data-parallel workers W (>= 2)")
    p.add_argument("--bandwidth", type=flag(0, 1e6, lo_open=True), required=True,
                   help="link bandwidth between workers, Gbit/s")
    p.add_argument("--cost", choices=["ring", "fit"], default="ring",
                   help="all-reduce time: ring = Eq. (1) + per-step latency (default); fit = "
                        "measured start-up + Eq. (1) (commsched.cost.allreduce.allreduce_cost)")
    p.add_argument("--latency-us", type=flag(0, 1e9), default=50.0,
                   help="per-step link latency of --cost ring, microseconds (default 50)")
    p.add_argument("--measurement", type=input_file, default=None,
                   help="all-reduce measurement of --cost fit (default "
                        "data/measurements/allreduce_loopback.csv)")
    p.add_argument("--compute-scale", type=flag(0, 1e6, lo_open=True), default=1.0,
                   help="multiply every traced compute time (default 1)")


def _cost(args: argparse.Namespace) -> Any:
    """The all-reduce time model of the shared cluster options."""
    from commsched.cost.allreduce import DEFAULT_MEASUREMENT, allreduce_cost

    measurement = args.measurement or DEFAULT_MEASUREMENT
    try:
        return allreduce_cost(args.cost, args.workers, args.bandwidth * 1e9 / 8,
                              args.latency_us * 1e-6, measurement)
    except CommschedError as e:  # the measurement's content: name the file
        if args.cost != "fit" or str(e).startswith(str(measurement)):
            raise
        raise CommschedError(f"{measurement}: {e}") from None


def run_plan(args: argparse.Namespace) -> int:
    # Imported here so that `commsched --help` and the other subcommands start fast.
    from commsched.model.traced import load_trace
    from commsched.pace.fusion import balanced_fusion, make_plan
    from commsched.pace.lp import SLOT_SOLVERS
    from commsched.pace.model import build_model
    from commsched.pace.plan import save_plan
    from commsched.pace.schedule import objective
    from commsched.pace.slots import DEFAULT_SLOT_S, check_slot, to_problem

    if args.slot is None:
        args.slot = DEFAULT_SLOT_S * 1e3
    cost = _cost(args)
    slot_s = args.slot / 1e3
    model = build_model(load_trace(args.trace), compute_scale=args.compute_scale)
    horizon_s = model.compute_only_s + sum(cost.time(op.bytes) for op in model.ops)
    within(horizon_s / slot_s, "--slot: time slots of one iteration", MAX_STEPS)
    meta: dict[str, Any] = {
        "trace": args.trace, "model": model.meta.get("model"), "workers": args.workers,
        "bandwidth_gbps": args.bandwidth, "slot_s": slot_s, "cost": repr(cost),
        "compute_scale": args.compute_scale, "allreduces": len(model.ops),
        "solver": SLOT_SOLVERS.canonical(args.solver),
    }
    solver = SLOT_SOLVERS[args.solver]
    if args.no_fusion:
        if not args.no_slot_guidance:
            check_slot(model, cost, slot_s)
        problem = to_problem(model, cost, slot_s)
        schedule = solver(problem)
        fused, policy = model, "pace-nofusion"
        meta["iter_time_s"] = objective(problem, schedule) * slot_s
    else:
        res = balanced_fusion(model, cost, slot_s, slot_guidance=not args.no_slot_guidance,
                              solver=solver)
        fused, problem, schedule, policy = res.model, res.problem, res.schedule, "pace"
        meta.update(R=res.r, iter_time_s=res.iter_time_s)
    plan = make_plan(fused, problem, schedule, meta, policy=policy)
    plan.check_tensors(model.tensors, source=args.trace)
    save_plan(plan, args.output)
    parts = sum(len(g.partitions) for g in plan.groups)
    print(f"{policy}: {len(model.ops)} all-reduces -> {len(plan.groups)} groups, {parts} "
          f"partitions; modelled iteration {meta['iter_time_s'] * 1e3:.1f} ms -> {args.output}")
    return 0


def run_simulate(args: argparse.Namespace) -> int:
    from commsched.model.traced import load_trace
    from commsched.pace.plan import PlanError, load_plan
    from commsched.pace.sim import UNBOUNDED, simulate_plan
    from commsched.results import write_table

    cost = _cost(args)
    capacity: int | str | None = args.compute_capacity
    if capacity is not None and capacity != UNBOUNDED:
        try:
            capacity = int(capacity)
        except ValueError:
            raise CommschedError(f"--compute-capacity must be an integer >= 1 or "
                                 f"{UNBOUNDED!r}, got {capacity!r}") from None
    plan = load_plan(args.plan)
    trace = load_trace(args.trace)
    try:
        run = simulate_plan(trace, plan, cost, compute_scale=args.compute_scale,
                            compute_capacity=capacity)
    except PlanError as e:  # a plan that does not fit the trace: name the plan file
        raise PlanError(f"{args.plan}: {e}") from None
    setting = {"plan": args.plan, "trace": args.trace, "policy": plan.policy,
               "workers": args.workers, "bandwidth_gbps": args.bandwidth, "cost": repr(cost),
               "compute_scale": args.compute_scale, "compute_capacity": capacity}
    if args.table:
        write_table(run.table(), args.table, setting)
    if args.usage:
        within((run.makespan - run.forward_time) / (args.bin_ms / 1e3),
               "--bin-ms: usage bins of one iteration", MAX_STEPS)
        usage = run.channel_usage(args.bin_ms / 1e3, 2 * (args.workers - 1) / args.workers)
        write_table(usage, args.usage, {**setting, "bin_ms": args.bin_ms})
    print(f"{plan.policy}: iteration {run.iteration_time * 1e3:.2f} ms (forward pass "
          f"{run.forward_time * 1e3:.2f} ms, channel busy {run.comm_time * 1e3:.2f} ms, "
          f"{len(run.partitions)} partitions)")
    return 0
