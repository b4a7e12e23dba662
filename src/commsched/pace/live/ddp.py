"""A worker of PyTorch data-parallel training that runs all-reduce policies live.

``python -m commsched.pace.live.ddp CONFIG.json`` runs one worker (:class:`WorkerConfig`,
:func:`run_worker`): it joins the gloo process group, trains the model with every
configured policy in turn and writes its step times, every all-reduce's start and end and
the interface counters (:class:`~commsched.pace.live.link.LinkSampler`) as JSON.
:func:`commsched.pace.live.launch.launch` starts the workers of one run; under
``torchrun`` the rank and rendezvous come from torchrun (:func:`from_torchrun`).

Policies (:data:`POLICIES`): ``ddp`` is PyTorch DDP itself (``DistributedDataParallel``
with its default buckets: 25 MiB, the first 1 MiB, reverse parameter order, as
:func:`commsched.pace.dynamic.ddp_buckets` simulates them; it waits for every bucket at the
end of ``backward``; a communication hook only records each bucket's start and end). The
module is built without ``bucket_cap_mb``: PyTorch 2.13 keeps the 1 MiB first bucket only
while that argument is left at its default (``_BucketCapacityConfig``), and with it given
the reference run's DDP all-reduced AlexNet in 83.5, 151 and 9.9 MB buckets where the
simulator's DDP has 16.4, 67.1, 151 and 9.9 MB. Every
other policy runs in the plan executor (:mod:`commsched.pace.live.executor`) from a plan
file (``WorkerConfig.plans``), which the caller makes with :mod:`commsched.pace.policies`
from the model's trace, so the live run and the simulator execute the same plan
(:mod:`commsched.pace.experiments.live`): ``wfbp`` (one all-reduce per gradient, FIFO),
``ddp_buckets`` (DDP's buckets as a plan, executed there: same fusion, layer-wise overlap
with the next forward pass), ``horovod`` (the plan's groups are the fusable units, usually
WFBP's, fused at run time by Horovod's cycle), ``pace`` (PACE's plan) and ``plan`` (a
user's own plan file, :mod:`commsched.pace.plan`).

Every wait is bounded: a worker that never joins the process group, or a peer that stops
communicating, ends the run with a one-line :class:`~commsched.errors.CommschedError`.

References
----------
.. [1] Y. Bao, Y. Peng, Y. Chen, C. Wu, "Preemptive All-reduce Scheduling for Expediting
   Distributed DNN Training", IEEE INFOCOM 2020 (PACE), Sec. VI.
.. [2] S. Li et al., "PyTorch Distributed: Experiences on Accelerating Data Parallel
   Training", VLDB 2020 (DDP's buckets).
"""

from __future__ import annotations

import datetime as _dt
import itertools
import json
import os
import sys
import time
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from commsched.atomic import atomic_write_text
from commsched.errors import CommschedError
from commsched.pace.dynamic import HOROVOD
from commsched.pace.live.executor import HorovodFusion, PlanExecutor
from commsched.pace.live.link import LinkSampler
from commsched.pace.plan import load_plan
from commsched.pace.policies import POLICIES as ALLREDUCE_POLICIES
from commsched.pace.policies import live_policies
from commsched.trace import torch_models

__all__ = [
    "NO_COMM",
    "POLICIES",
    "USER_PLAN",
    "WorkerConfig",
    "ddp_module",
    "from_torchrun",
    "main",
    "run_worker",
]

#: A user's own plan file (:mod:`commsched.pace.plan`), run like a policy's plan.
USER_PLAN = "plan"
#: The policies a worker can run: every all-reduce policy with a live mode
#: (:data:`commsched.pace.policies.POLICIES`) and a user's plan; all but ``ddp`` read a
#: plan file (``WorkerConfig.plans``).
POLICIES = (*live_policies(), USER_PLAN)
#: Not a policy: local SGD steps without communication, the compute time under the run's
#: own conditions (load, threads), which calibrates the simulator's compute times.
NO_COMM = "none"


@dataclass
class WorkerConfig:
    """One worker of a data-parallel run (``python -m commsched.pace.live.ddp CONFIG.json``).

    ``policies`` run one after the other in the same process group, each from the same
    freshly seeded model: ``warmup`` untimed steps, ``iterations`` timed steps and one
    last untimed step (whose start ends the last timed one); all of that
    ``rounds`` times (policies interleaved, so that a change of the machine's load
    affects them alike). ``plans`` maps
    every policy but ``ddp`` to its plan file (:data:`NO_COMM` needs none). ``dump`` writes
    the last iteration's averaged gradients and the final parameters (``torch.save``) for
    the gradient-equality test.

    Parameters
    ----------
    rank, world, master, port
        The process group (``master = "env"`` joins by ``env://``).
    out : str
        The result file (JSON).
    model, batch, size
        The model (:mod:`commsched.trace.torch_models`) and its input.
    policies, plans, warmup, iterations, rounds
        What runs (above).
    lr, seed
        SGD's learning rate; the seed of model and input.
    timeout, join_timeout
        Bounds on every all-reduce wait and on joining the process group (s).
    threads, cpu
        Torch threads; the core to pin to.
    horovod_threshold, horovod_cycle
        Horovod's fusion (policy ``horovod``).
    sample_dev, sample_interval
        The interface to sample (:class:`~commsched.pace.live.link.LinkSampler`) and
        how often.
    dump : str or None
        Where to ``torch.save`` gradients and parameters.

    Raises
    ------
    CommschedError
        If a policy is unknown, ``rank`` is not below ``world``, or a step count is out of
        range (the file is read by a worker process, not checked by the config schema).
    """

    rank: int
    world: int
    master: str
    port: int
    out: str
    model: str = "tiny_cnn"
    batch: int = 4
    size: int | None = None
    policies: list[str] = field(default_factory=lambda: ["ddp", "wfbp"])
    plans: dict[str, str] = field(default_factory=dict)  # policy -> plan file
    warmup: int = 1
    iterations: int = 3
    rounds: int = 1
    lr: float = 0.01
    seed: int = 0
    timeout: float = 60.0
    join_timeout: float = 60.0
    threads: int = 1
    cpu: int | None = None
    horovod_threshold: int = HOROVOD["horovod-0.20"][0]
    horovod_cycle: float = HOROVOD["horovod-0.20"][1]
    sample_dev: str | None = None
    sample_interval: float = 0.005
    dump: str | None = None

    def __post_init__(self) -> None:
        bad = [p for p in self.policies if p not in (*POLICIES, NO_COMM)]
        if bad:
            raise CommschedError(f"unknown policy {bad[0]!r}; known: "
                                 f"{', '.join((*POLICIES, NO_COMM))}")
        if (not 0 <= self.rank < self.world or self.iterations < 1 or self.warmup < 0
                or self.rounds < 1):
            raise CommschedError(f"worker config: need 0 <= rank < world, iterations >= 1, "
                                 f"warmup >= 0 and rounds >= 1 (got {self.rank}, {self.world}, "
                                 f"{self.iterations}, {self.warmup}, {self.rounds})")


def _plan_file(policy: str, cfg: WorkerConfig) -> str:
    if policy not in cfg.plans:
        raise CommschedError(f"policy {policy!r} needs a plan file (plans.{policy})")
    return cfg.plans[policy]


#: What one policy's steps produced: every step's start, its all-reduces, the last
#: step's gradients (when dumped).
_Steps = tuple[list[float], list[dict[str, Any]], dict[str, torch.Tensor]]


def ddp_module(module: nn.Module) -> DistributedDataParallel:
    """``module`` in PyTorch DDP as the ``ddp`` policy runs it (module docstring).

    Parameters
    ----------
    module : torch.nn.Module
        The model replica; the default process group must be initialised.

    Returns
    -------
    torch.nn.parallel.DistributedDataParallel
        With DDP's default buckets (25 MiB, the first 1 MiB) and no buffer broadcast.
    """
    with warnings.catch_warnings():  # broadcast_buffers' deprecation notice
        warnings.simplefilter("ignore", FutureWarning)
        return DistributedDataParallel(module, broadcast_buffers=False)


def _ddp_steps(module: nn.Module, batch: tuple[Any, Any], cfg: WorkerConfig,
               total: int) -> _Steps:
    """``total`` steps of PyTorch DDP itself; a communication hook records each bucket."""
    inputs, labels = batch
    starts: list[float] = []
    records: list[dict[str, Any]] = []
    grads: dict[str, torch.Tensor] = {}
    net = ddp_module(module)

    # DDP checks the hook's annotations against the real classes: none given here.
    def hook(_state, bucket):  # type: ignore[no-untyped-def]
        t0 = time.time()
        buf = bucket.buffer()
        fut = dist.all_reduce(buf, async_op=True).get_future()
        it = len(starts) - 1

        def done(f: torch.futures.Future[Any]) -> torch.Tensor:
            records.append({"iteration": it, "start": t0, "end": time.time(),
                            "bytes": buf.numel() * buf.element_size(),
                            "parts": [[bucket.index(), 0, buf.numel() * 4, bucket.index()]]})
            return f.value()[0] / cfg.world

        return fut.then(done)

    net.register_comm_hook(None, hook)
    opt = torch.optim.SGD(net.parameters(), lr=cfg.lr, foreach=False)
    for _ in range(total):
        starts.append(time.time())
        opt.zero_grad(set_to_none=True)
        nn.functional.cross_entropy(net(*inputs), labels).backward()
        if len(starts) == total and cfg.dump:
            grads = {n: p.grad.detach().clone() for n, p in module.named_parameters()
                     if p.grad is not None}
        opt.step()
    starts.append(time.time())
    return starts, records, grads


def _local_steps(module: nn.Module, batch: tuple[Any, Any], cfg: WorkerConfig,
                 total: int) -> _Steps:
    """``total`` local SGD steps without communication (:data:`NO_COMM`)."""
    inputs, labels = batch
    starts: list[float] = []
    opt = torch.optim.SGD(module.parameters(), lr=cfg.lr, foreach=False)
    for _ in range(total):
        starts.append(time.time())
        opt.zero_grad(set_to_none=True)
        nn.functional.cross_entropy(module(*inputs), labels).backward()
        opt.step()
    starts.append(time.time())
    return starts, [], {}


def _plan_steps(module: nn.Module, batch: tuple[Any, Any], cfg: WorkerConfig, total: int,
                plan_file: str, fusion: HorovodFusion | None) -> _Steps:
    """``total`` steps with the plan executor (:mod:`commsched.pace.live.executor`)."""
    inputs, labels = batch
    starts: list[float] = []
    grads: dict[str, torch.Tensor] = {}
    ex = PlanExecutor(module, load_plan(plan_file), lr=cfg.lr, timeout=cfg.timeout,
                      fusion=fusion)
    try:
        for i in range(total):
            starts.append(time.time())
            loss = nn.functional.cross_entropy(module(*inputs), labels)
            ex.begin_backward()
            loss.backward()
            if i == total - 1 and cfg.dump:
                grads = ex.averaged_grads()
        ex.finish()
        starts.append(time.time())
        records = [dict(r, iteration=r["iteration"] - 1) for r in ex.records]
    finally:
        ex.close()
    return starts, records, grads


def _run_policy(policy: str, cfg: WorkerConfig, module: nn.Module,
                batch: tuple[Any, Any]) -> dict[str, Any]:
    # one more step than timed: its start ends the last timed step, so no timed step
    # includes draining the last all-reduces (the plan executor's next forward pass
    # overlaps them; after the last step nothing does)
    timed = cfg.warmup + cfg.iterations
    total = timed + 1
    mode = "plan" if policy in (USER_PLAN, NO_COMM) else ALLREDUCE_POLICIES[policy].live
    if mode == "ddp":
        starts, records, grads = _ddp_steps(module, batch, cfg, total)
    elif policy == NO_COMM:
        starts, records, grads = _local_steps(module, batch, cfg, total)
    else:
        fusion = (HorovodFusion(cfg.horovod_threshold, cfg.horovod_cycle)
                  if mode == "horovod" else None)
        starts, records, grads = _plan_steps(module, batch, cfg, total,
                                             _plan_file(policy, cfg), fusion)
    params = {n: p.detach().clone() for n, p in module.named_parameters()}
    steps = [b - a for a, b in itertools.pairwise(starts)]
    return {"policy": policy, "iteration_start": starts[:timed + 1],
            "step_s": steps[cfg.warmup:timed], "warmup_step_s": steps[:cfg.warmup],
            "last_step_s": steps[timed:], "allreduces": records,
            "_grads": grads, "_params": params}


def run_worker(cfg: WorkerConfig) -> dict[str, Any]:
    """Join the process group, run every policy and write ``cfg.out`` (JSON).

    Parameters
    ----------
    cfg : WorkerConfig
        This worker.

    Returns
    -------
    dict
        What was written: the config, rank, torch version, per policy and round the step
        times and all-reduces, and the sampled interface counters.

    Raises
    ------
    CommschedError
        One line when a bounded wait ends: the workers did not all join the process group,
        or an all-reduce did not finish in time.
    """
    torch.set_num_threads(cfg.threads)
    if cfg.cpu is not None and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {cfg.cpu % (os.cpu_count() or 1)})
    spec = torch_models.get(cfg.model)
    size = spec.size if cfg.size is None else cfg.size
    gen = torch.Generator().manual_seed(cfg.seed * 1000 + cfg.rank + 1)
    inputs_labels = spec.batch(cfg.batch, size, gen)
    try:
        init = "env://" if cfg.master == "env" else f"tcp://{cfg.master}:{cfg.port}"
        dist.init_process_group(
            "gloo", init_method=init, rank=cfg.rank, world_size=cfg.world,
            timeout=_dt.timedelta(seconds=cfg.join_timeout))
    except (RuntimeError, ValueError) as e:  # DistStoreError is a RuntimeError
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise CommschedError(
            f"rank {cfg.rank}: the {cfg.world} workers did not all join the process group at "
            f"{cfg.master}:{cfg.port} within {cfg.join_timeout:g} s ({msg[:120]})") from None
    sampler = (LinkSampler(cfg.sample_dev, cfg.sample_interval).start() if cfg.sample_dev
               else None)
    results = []
    dumps: dict[str, Any] = {}
    try:
        for rnd in range(cfg.rounds):
            for policy in cfg.policies:
                dist.barrier()
                r = _run_policy(policy, cfg, torch_models.build(cfg.model, cfg.seed),
                                inputs_labels)
                dumps[policy] = {"grads": r.pop("_grads"), "params": r.pop("_params")}
                results.append({"round": rnd, **r})
        dist.barrier()
    finally:
        link = sampler.stop() if sampler else []
        dist.destroy_process_group()
    out = {"config": asdict(cfg), "rank": cfg.rank, "torch_version": torch.__version__,
           "policies": results, "link": {"dev": cfg.sample_dev, "rows": link}}
    atomic_write_text(cfg.out, json.dumps(out) + "\n")
    if cfg.dump:
        torch.save(dumps, cfg.dump)
    return out


def from_torchrun(data: Mapping[str, Any], env: Mapping[str, str]) -> dict[str, Any]:
    """The worker config ``data`` with rank, world size and rendezvous from a ``torchrun``
    launch (``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``/``MASTER_PORT`` in ``env``; then
    ``master = "env"``: the process group joins by ``env://``, through torchrun's own
    store); ``{rank}`` in ``out`` and ``dump`` becomes the rank. Without them, ``data``.

    Parameters
    ----------
    data : mapping
        A worker config (:class:`WorkerConfig`'s fields).
    env : mapping
        The environment.

    Returns
    -------
    dict
        The config for this process.

    Examples
    --------
    >>> cfg = {"rank": 0, "world": 1, "master": "x", "port": 1, "out": "r{rank}.json"}
    >>> from_torchrun(cfg, {"RANK": "1", "WORLD_SIZE": "2", "MASTER_ADDR": "h", "MASTER_PORT": "9"})
    {'rank': 1, 'world': 2, 'master': 'env', 'port': 9, 'out': 'r1.json'}
    """
    out = dict(data)
    if "RANK" in env and "WORLD_SIZE" in env:
        out.update(rank=int(env["RANK"]), world=int(env["WORLD_SIZE"]), master="env",
                   port=int(env.get("MASTER_PORT", out.get("port", 0))))
    for key in ("out", "dump"):
        if isinstance(out.get(key), str):
            out[key] = out[key].replace("{rank}", str(out["rank"]))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m commsched.pace.live.ddp CONFIG.json``: run one worker (one-line errors).

    Under ``torchrun`` (on each host the command of
    :func:`commsched.cluster.torchrun.torchrun_argv`, c10d rendezvous; ``python -m
    commsched.pace.experiments.live --prepare`` prints them for ``pace_live.hosts``) the
    rank and the rendezvous come from torchrun (:func:`from_torchrun`).

    Parameters
    ----------
    argv : sequence of str, optional
        The arguments (default: ``sys.argv[1:]``): one worker config file.

    Returns
    -------
    int
        0, or 2 after a one-line error (a bad config file, a bounded wait that ended).
    """
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print("usage: python -m commsched.pace.live.ddp CONFIG.json", file=sys.stderr)
        return 2
    try:
        data: Mapping[str, Any] = json.loads(Path(args[0]).read_text())
        run_worker(WorkerConfig(**from_torchrun(data, os.environ)))
    except (CommschedError, OSError, TypeError, ValueError) as e:
        print(f"commsched ddp worker: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
