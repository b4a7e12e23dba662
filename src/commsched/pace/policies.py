"""The registry of all-reduce policies (name -> policy), simulated and live from one entry.

Every policy maps a :class:`~commsched.pace.baselines.PolicyContext` (a prepared traced
iteration, the all-reduce cost model, the cluster and the policy's options) to a
:class:`~commsched.pace.baselines.Decision`: the all-reduce plan it executes and, for
dynamic policies, the release time of each partition. :data:`POLICIES` holds one
:class:`AllReducePolicy` per policy: the decision the simulator runs
(:func:`run_policy`) and, if the policy runs in a live PyTorch job, how
(:data:`LIVE_MODES`, :mod:`commsched.pace.live`). The config schema's policy enums, the
experiments' loops and the contract test (``tests/test_pace_baselines.py``, which
simulates and validates every policy on small traced graphs) read it, so a new policy is
one function and one registry line (README, "Extending commsched").

The baselines (WFBP, Horovod, PyTorch DDP, TicTac, ByteScheduler, P3) are
:mod:`commsched.pace.baselines`. PACE's own entries and its ablations are here.
The PACE entries call :mod:`commsched.pace`'s planner on the trace (its model,
:func:`commsched.pace.model.build_model`, with the same ``compute_scale`` as the workload;
slot length option ``slot_ms``, default 5 ms, Sec. IV-A):

========================  =====================================================================
``pace``                  Alg. 1 (balanced fusion, search over R with the exact preemptive
                          solver as oracle) and the optimal preemptive schedule of the fused
                          DAG, as a plan (:func:`commsched.pace.fusion.make_plan`).
``pace-nofusion``         ablation: the optimal preemptive schedule of the unfused DAG (one
                          all-reduce per gradient-producing op).
``fusion-nopreempt``      ablation: PACE's fused groups, each all-reduced whole, in the order
                          in which PACE's schedule first runs them (no preemption).
========================  =====================================================================

References
----------
.. [1] Y. Bao, Y. Peng, Y. Chen, C. Wu, "Preemptive All-reduce Scheduling for Expediting
   Distributed DNN Training", IEEE INFOCOM 2020 (PACE).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from commsched.errors import CommschedError
from commsched.pace.baselines import Decision, Policy, PolicyContext, p3, tictac, wfbp, whole_group
from commsched.pace.dynamic import bytescheduler, ddp, horovod
from commsched.pace.fusion import balanced_fusion, make_plan
from commsched.pace.model import PaceModel, build_model
from commsched.pace.plan import Plan
from commsched.pace.planrun import PlanRun
from commsched.pace.schedule import jackson
from commsched.pace.slots import to_problem
from commsched.registry import Registry

__all__ = [
    "LIVE_MODES",
    "POLICIES",
    "AllReducePolicy",
    "fusion_nopreempt",
    "live_policies",
    "pace",
    "pace_nofusion",
    "run_policy",
]


def _pace_model(ctx: PolicyContext) -> tuple[PaceModel, float]:
    if ctx.trace is None:
        raise CommschedError("PACE policies need the trace (PolicyContext.trace)")
    slot_s = float(ctx.option("slot_ms", 5.0)) / 1e3
    return build_model(ctx.trace, compute_scale=ctx.workload.compute_scale), slot_s


def pace(ctx: PolicyContext) -> Decision:
    """PACE: balanced fusion and the optimal preemptive schedule of the fused DAG.

    Parameters
    ----------
    ctx : PolicyContext
        The iteration, cost model and trace; option ``slot_ms`` (default 5).

    Returns
    -------
    Decision
        PACE's plan (:func:`commsched.pace.fusion.make_plan`); ``info`` holds ``R``, the
        number of all-reduce operators ``N``, the slot and PACE's predicted iteration
        time.

    Raises
    ------
    CommschedError
        If ``ctx.trace`` is None or no fusion fits the slots.

    References
    ----------
    PACE (Bao et al., INFOCOM 2020), Sec. IV (the model and the optimal preemptive
    schedule, Theorem 1) and Sec. V, Alg. 1 (balanced fusion).
    """
    model, slot_s = _pace_model(ctx)
    res = balanced_fusion(model, ctx.model, slot_s)
    meta = {"R": res.r, "N": len(model.ops), "slot_s": slot_s,
            "predicted_iter_s": res.iter_time_s}
    plan = make_plan(res.model, res.problem, res.schedule, meta=meta, policy="pace")
    return Decision(plan, info=meta)


def pace_nofusion(ctx: PolicyContext) -> Decision:
    """Ablation: the optimal preemptive schedule of the unfused DAG.

    Parameters
    ----------
    ctx : PolicyContext
        As for :func:`pace`; no fusion is searched.

    Returns
    -------
    Decision
        One group per gradient-producing op, partitioned by the exact solver's schedule.

    Raises
    ------
    CommschedError
        If ``ctx.trace`` is None.

    References
    ----------
    PACE (Bao et al., INFOCOM 2020), Sec. IV-B (the exact preemptive schedule); our ablation.
    """
    model, slot_s = _pace_model(ctx)
    problem = to_problem(model, ctx.model, slot_s)
    schedule = jackson(problem)
    meta = {"N": len(model.ops), "slot_s": slot_s}
    return Decision(make_plan(model, problem, schedule, meta=meta, policy="pace-nofusion"),
                    info=meta)


def fusion_nopreempt(ctx: PolicyContext) -> Decision:
    """Ablation: PACE's fused groups, each whole, in the order PACE's schedule starts them.

    Parameters
    ----------
    ctx : PolicyContext
        As for :func:`pace`.

    Returns
    -------
    Decision
        One unpartitioned group per fused all-reduce (no preemption).

    Raises
    ------
    CommschedError
        As :func:`pace` does.

    References
    ----------
    PACE (Bao et al., INFOCOM 2020), Sec. V, Alg. 1 (the fusion); our ablation of preemption.
    """
    model, slot_s = _pace_model(ctx)
    res = balanced_fusion(model, ctx.model, slot_s)
    first = {i: min(ts) for i, ts in res.schedule.items() if ts}
    order = sorted(range(len(res.model.ops)), key=lambda i: (first.get(i, math.inf), i))
    groups = tuple(whole_group(res.model.ops[i].tensors, k) for k, i in enumerate(order))
    meta = {"R": res.r, "N": len(model.ops), "slot_s": slot_s}
    return Decision(Plan("fusion-nopreempt", groups, meta), info=meta)


#: How a live PyTorch job (:mod:`commsched.pace.live.ddp`) executes a policy: PyTorch DDP
#: itself; the decision's plan in the plan executor (``plan``); the plan launched in its own
#: order without release times (``plan-by-order``); WFBP's tensors fused at run time by
#: Horovod's cycle (``horovod``).
LIVE_MODES = ("ddp", "plan", "plan-by-order", "horovod")


@dataclass(frozen=True)
class AllReducePolicy:
    """One all-reduce policy: the simulator's decision and, if it runs live, how.

    Parameters
    ----------
    decide : Policy
        :class:`PolicyContext` -> :class:`Decision` (the plan and release times the
        simulator runs; the live job runs the same plan).
    live : str or None
        One of :data:`LIVE_MODES`, or None for a policy that is only simulated.
    """

    decide: Policy
    live: str | None = None

    def __post_init__(self) -> None:
        if self.live is not None and self.live not in LIVE_MODES:
            raise ValueError(f"live mode {self.live!r} is not one of {LIVE_MODES}")

    def __call__(self, ctx: PolicyContext) -> Decision:
        return self.decide(ctx)


#: The registry of all-reduce policies, simulated and live from the same entries. Aliases:
#: ``horovod`` is Horovod as PACE measured it (v0.20).
POLICIES: Registry[AllReducePolicy] = Registry("all-reduce policy")
POLICIES.add("wfbp", AllReducePolicy(wfbp, live="plan"))
POLICIES.add("horovod-0.20", AllReducePolicy(horovod("horovod-0.20"), live="horovod"),
             aliases=("horovod",))
POLICIES.add("horovod-0.21", AllReducePolicy(horovod("horovod-0.21")))
POLICIES.add("ddp", AllReducePolicy(ddp, live="ddp"))
#: DDP's buckets as a plan in our executor (layer-wise overlap with the next forward pass).
POLICIES.add("ddp_buckets", AllReducePolicy(ddp, live="plan-by-order"))
POLICIES.add("tictac", AllReducePolicy(tictac))
POLICIES.add("bytescheduler", AllReducePolicy(bytescheduler))
POLICIES.add("p3", AllReducePolicy(p3))
POLICIES.add("pace", AllReducePolicy(pace, live="plan"))
POLICIES.add("pace-nofusion", AllReducePolicy(pace_nofusion))
POLICIES.add("fusion-nopreempt", AllReducePolicy(fusion_nopreempt))


def live_policies() -> tuple[str, ...]:
    """Every policy name (aliases included) that a live job can execute.

    Returns
    -------
    tuple of str
        The names whose entry has a live mode, in :meth:`Registry.choices` order.
    """
    return tuple(n for n in POLICIES.choices() if POLICIES[n].live is not None)


def run_policy(name: str, ctx: PolicyContext, validate: bool = True
               ) -> tuple[Decision, PlanRun]:
    """Decide with policy ``name`` and simulate its plan.

    Parameters
    ----------
    name : str
        A policy of :data:`POLICIES` (or an alias).
    ctx : PolicyContext
        What the policy may look at.
    validate : bool
        Check the simulated schedule (:func:`commsched.sim.validate.check_schedule`).

    Returns
    -------
    Decision
        The policy's plan, release times and choices.
    PlanRun
        The simulated iteration (:meth:`commsched.pace.sim.Workload.simulate`).

    Raises
    ------
    CommschedError
        If the policy is unknown or rejects its options.
    """
    d = POLICIES[name](ctx)
    return d, ctx.workload.simulate(d.plan, ctx.model, d.release or None, validate=validate)
