"""Plans and predictions of the live all-reduce experiment (:mod:`.live`).

:class:`Params` is the config section ``pace_live``; :func:`make_plans` makes every
configured policy's plan from the model's trace (:mod:`commsched.pace.policies`) and the
nominal cost of the shaped links (:func:`cost_model`); :func:`predict` simulates a
decision (:mod:`commsched.pace.sim`) for the step time the live run is compared with.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import networkx as nx

from commsched import driver
from commsched.cluster import net
from commsched.cost import LinearModel
from commsched.cost.allreduce import allreduce_model
from commsched.errors import CommschedError
from commsched.pace.baselines import Decision, PolicyContext
from commsched.pace.dynamic import HOROVOD
from commsched.pace.live.ddp import USER_PLAN
from commsched.pace.plan import Plan, load_plan
from commsched.pace.planrun import PlanRun
from commsched.pace.policies import POLICIES
from commsched.pace.sim import Workload

__all__ = ["LiveModel", "Params", "cost_model", "make_plans", "predict"]


@dataclass(frozen=True)
class LiveModel:
    """One live model (an entry of ``pace_live.models``).

    Parameters
    ----------
    trace : str
        Its committed PyTorch training trace (``<trace_dir>/<trace>.json.gz``).
    bandwidth : str
        The ``tbf`` rate of every link, e.g. ``"400mbit"``.
    """

    trace: str
    bandwidth: str  # tbf rate, e.g. "400mbit"

    @property
    def bandwidth_Bps(self) -> float:
        """The link rate in bytes/s (:func:`commsched.cluster.net.parse_rate`)."""
        return net.parse_rate(self.bandwidth)


@dataclass(frozen=True)
class Params:
    """The ``pace_live`` config section (schema: ``src/commsched/schemas/config.schema.yaml``).

    Build it with :meth:`from_config`, which checks the section against the schema; the
    defaults serve direct construction (tests).

    Parameters
    ----------
    enabled : bool
        Whether the live run may run.
    models : tuple of LiveModel
        The models and their links.
    policies : tuple of str
        Live policies (:data:`commsched.pace.live.ddp.POLICIES`).
    n_workers, threads, warmup, iterations, rounds, latency_s, overhead_s, sample_ms, slot_ms
        The section's keys of these names (``config/config.yaml`` explains each).
    threshold_bytes, cycle_s
        Horovod's fusion threshold and cycle.
    plan_file : str or None
        The user's plan (policy ``plan``).
    timeout_s, seed, trace_dir
        Bound on a model's run, the seed of the inputs, where the traces are.
    launcher : {"torchrun", "direct"}
        How the emulated run starts its workers (:func:`commsched.pace.live.launch.launch`).
    hosts : tuple of str or None
        Real hosts, one worker each (``n_workers`` of them): their addresses as the others
        reach them; the first serves the rendezvous. ``None``: the emulated cluster.
    raw : dict
        The section as given (recorded in the tables' provenance).

    Raises
    ------
    CommschedError
        If policy ``plan`` has no ``plan_file``, or ``hosts`` does not name ``n_workers``
        hosts.
    """

    enabled: bool
    models: tuple[LiveModel, ...]
    policies: tuple[str, ...]
    n_workers: int = 2
    threads: int = 1
    warmup: int = 1
    iterations: int = 3
    rounds: int = 1
    latency_s: float = 1e-4
    overhead_s: float = 0.0
    sample_ms: float = 5.0
    slot_ms: float = 5.0
    threshold_bytes: int = HOROVOD["horovod-0.20"][0]
    cycle_s: float = HOROVOD["horovod-0.20"][1]
    plan_file: str | None = None
    timeout_s: float = 900.0
    seed: int = 0
    trace_dir: str = "data/traces"
    launcher: str = "torchrun"
    hosts: tuple[str, ...] | None = None
    raw: dict[str, Any] = field(compare=False, repr=False, default_factory=dict)

    def __post_init__(self) -> None:
        # across keys, which the config schema cannot express
        if USER_PLAN in self.policies and not self.plan_file:
            raise CommschedError("pace_live: policy 'plan' needs pace_live.plan_file")
        if self.hosts is not None and len(self.hosts) != self.n_workers:
            raise CommschedError(f"pace_live: hosts names {len(self.hosts)} hosts but "
                                 f"n_workers is {self.n_workers}")

    @staticmethod
    def from_config(cfg: Mapping[str, Any] | str) -> Params:
        """The parameters of a ``pace_live`` section.

        Parameters
        ----------
        cfg : mapping or str
            The section (what ``--config-json`` gives, as text or parsed).

        Returns
        -------
        Params
            Models and policies as tuples; ``raw`` is the section.

        Raises
        ------
        CommschedError
            One line naming the first key the config schema rejects, policy ``plan``
            without ``plan_file``, or ``hosts`` of another length than ``n_workers``.
        """
        raw = driver.config_section("pace_live", cfg)
        args = dict(raw, models=tuple(LiveModel(**m) for m in raw["models"]),
                    policies=tuple(raw["policies"]),
                    hosts=None if raw["hosts"] is None else tuple(raw["hosts"]))
        return Params(**args, raw=raw)


def cost_model(params: Params, bandwidth_Bps: float) -> LinearModel:
    """The nominal all-reduce cost of the run: ring all-reduce over the shaped links.

    Parameters
    ----------
    params : Params
        The run (``n_workers``, ``latency_s``, ``overhead_s``).
    bandwidth_Bps : float
        The link rate in bytes/s.

    Returns
    -------
    LinearModel
        PACE's ``a + b*S`` (:func:`commsched.cost.allreduce.allreduce_model`).

    References
    ----------
    PACE (Bao et al., INFOCOM 2020), Sec. II-C, Eq. (1).
    """
    return allreduce_model(params.n_workers, bandwidth_Bps * 8 / 1e9, params.latency_s,
                           params.overhead_s)


def make_plans(trace: nx.DiGraph, params: Params, bandwidth_Bps: float,
               workload: Workload | None = None) -> dict[str, tuple[Plan | None, Decision]]:
    """The plan the workers execute and the simulator's decision, per configured policy.

    Parameters
    ----------
    trace : networkx.DiGraph
        The model's PyTorch training trace.
    params : Params
        The run (policies, slots, Horovod's fusion, the user's plan file).
    bandwidth_Bps : float
        The link rate in bytes/s (:func:`cost_model`).
    workload : Workload, optional
        ``trace`` prepared (built if not given).

    Returns
    -------
    dict
        ``{policy: (plan or None, Decision)}``: ``ddp`` executes no plan (PyTorch DDP);
        ``horovod`` executes WFBP's tensors, fused at run time, while its decision is the
        realised fusion; ``ddp_buckets`` launches by plan order (no release times).

    Raises
    ------
    CommschedError
        If the user's plan does not cover the trace's gradients, or a policy fails.
    """
    w = workload or Workload(trace)
    model = cost_model(params, bandwidth_Bps)
    opts: dict[str, Any] = {"slot_ms": params.slot_ms, "threshold_bytes": params.threshold_bytes,
                            "cycle_s": params.cycle_s}
    ctx = PolicyContext(w, model, trace, params.n_workers, bandwidth_Bps, opts)
    out: dict[str, tuple[Plan | None, Decision]] = {}
    for policy in params.policies:
        if policy == USER_PLAN:
            assert params.plan_file
            user = load_plan(params.plan_file)
            user.check_tensors(w.sizes, f"plan file {params.plan_file}")
            out[policy] = (user, Decision(user))
            continue
        entry = POLICIES[policy]
        d = entry(ctx)
        if entry.live == "ddp":
            out[policy] = (None, d)
        elif entry.live == "horovod":  # fused at run time: the units are WFBP's tensors
            out[policy] = (POLICIES["wfbp"](ctx).plan, d)
        elif entry.live == "plan-by-order":  # the executor launches by plan order, no release
            out[policy] = (d.plan, Decision(d.plan))
        else:
            out[policy] = (d.plan, d)
    return out


def predict(w: Workload, decision: Decision, model: LinearModel, sync: bool = False
            ) -> tuple[float, PlanRun]:
    """Predicted step time of ``decision`` on ``w`` (module docstring, step 3).

    Parameters
    ----------
    w : Workload
        The iteration (compute possibly rescaled to the run's).
    decision : Decision
        What the policy decided.
    model : LinearModel
        The all-reduce cost.
    sync : bool
        PyTorch DDP, which waits for every bucket before the update: the step is the
        later of the last bucket's end and the compute time.

    Returns
    -------
    float
        The predicted step time (s).
    PlanRun
        The simulated iteration.
    """
    run = w.simulate(decision.plan, model, decision.release or None)
    if not sync:
        return run.iteration_time, run
    last = max((p.end for p in run.partitions), default=0.0)
    return max(last, w.compute_time), run
