"""All-reduce plans enforced in PyTorch data-parallel training.

An all-reduce plan (:mod:`commsched.pace.plan`: fused groups, their partitions, one
priority per partition) is executed by :class:`PlanExecutor`, a *gradient-hook scheduler*
beside the model (PyTorch's ``DistributedDataParallel`` runs the ``ddp`` policy itself,
with its own reducer and buckets):

* a post-accumulate-grad hook copies each parameter's gradient into its group's flat
  buffer (the group's tensors concatenated in plan order) and frees ``.grad``; when a
  group's last gradient arrives, its partitions become *ready*;
* one communication thread per worker runs one all-reduce at a time (gloo, SUM): whenever
  it is free it starts the ready partition with the smallest ``(priority, group, offset)``
  and runs it to completion, so a later group with a smaller priority preempts an earlier
  one at a partition boundary (PACE Sec. II-C and VI);
* *the same order on every worker*: which partitions are ready differs between workers by
  timing, so before each decision the workers agree on the partitions ready everywhere
  (one small all-reduce, MIN, of a ready flag per partition), as Horovod's coordinator
  does; a worker whose agreed set is empty waits for another local gradient (or, if it
  has all of them, joins the next round at once), so every worker makes the same sequence
  of collective calls;
* when all partitions of a group are done, its averaged gradients (sum / W) are final.
  The SGD update of a parameter is applied lazily, in the main thread, by a forward
  pre-hook of the module that owns it in the *next* iteration: the next forward pass
  overlaps with the communication still running, and a layer waits only for its own
  parameters, the window PACE optimises (Sec. IV-A). :meth:`PlanExecutor.finish` waits for
  everything and applies the remaining updates.

Policies (:data:`POLICIES`): ``ddp`` is PyTorch DDP itself (``DistributedDataParallel``:
25 MiB buckets, the first 1 MiB, reverse parameter order; it waits for every bucket at the
end of ``backward``; a communication hook only records each bucket's start and end). Every
other policy runs in :class:`PlanExecutor` from a plan file (``WorkerConfig.plans``), which
the caller makes with :mod:`commsched.pace.baselines` from the model's trace, so the live
run and the simulator execute the same plan (:mod:`commsched.pace.experiments.live`):
``wfbp`` (one all-reduce per gradient, FIFO), ``ddp_buckets`` (DDP's buckets as a plan,
executed here: same fusion, layer-wise overlap with the next forward pass), ``horovod``
(the plan's groups are the fusable units, usually WFBP's; every ``cycle`` seconds the
units ready on all workers are fused, in the plan's order, up to ``threshold`` bytes per
all-reduce: :class:`HorovodFusion`), ``pace`` (PACE's plan) and ``plan`` (a user's own plan
file, :mod:`commsched.pace.plan`).

Every wait is bounded (``timeout``): a worker that never joins the process group, or a
peer that stops communicating, ends the run with a one-line :class:`CommschedError`.
:func:`launch` starts the workers (on loopback, or in a cluster's namespaces), bounds the
whole run and ends every worker it started on every exit path.
"""

from __future__ import annotations

import datetime as _dt
import itertools
import json
import os
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from commsched.atomic import atomic_write_text
from commsched.cluster.procs import ProcRecord, end_processes, spawn, start_time
from commsched.errors import CommschedError
from commsched.pace.baselines import DDP_BUCKET_BYTES, HOROVOD, live_policies
from commsched.pace.baselines import POLICIES as ALLREDUCE_POLICIES
from commsched.pace.plan import Plan, PlanError, load_plan
from commsched.trace import torch_models

__all__ = [
    "NO_COMM",
    "POLICIES",
    "HorovodFusion",
    "LinkSampler",
    "PlanExecutor",
    "WorkerConfig",
    "from_torchrun",
    "launch",
    "main",
    "run_worker",
]

#: A user's own plan file (:mod:`commsched.pace.plan`), run like a policy's plan.
USER_PLAN = "plan"
#: The policies a worker can run: every all-reduce policy with a live mode
#: (:data:`commsched.pace.baselines.POLICIES`) and a user's plan; all but ``ddp`` read a
#: plan file (``WorkerConfig.plans``).
POLICIES = (*live_policies(), USER_PLAN)
#: Not a policy: local SGD steps without communication, the compute time under the run's
#: own conditions (load, threads), which calibrates the simulator's compute times.
NO_COMM = "none"


# --------------------------------------------------------------------------------------
# Horovod's fusion parameters.


@dataclass(frozen=True)
class HorovodFusion:
    """Horovod's tensor fusion: ``threshold`` bytes per fused all-reduce, ``cycle`` s
    (defaults: Horovod before v0.21, :data:`commsched.pace.baselines.HOROVOD`)."""

    threshold: int = HOROVOD["horovod-0.20"][0]
    cycle: float = HOROVOD["horovod-0.20"][1]


# --------------------------------------------------------------------------------------
# The executor.


@dataclass
class _GroupState:
    buffer: torch.Tensor
    offsets: dict[str, int]  # parameter -> element offset in the buffer
    missing: int
    done: threading.Event = field(default_factory=threading.Event)


class PlanExecutor:
    """Executes ``plan`` for ``module``'s gradients in the default process group.

    ``fusion`` switches from the static plan order to Horovod's dynamic fusion (the plan's
    groups are then the fusable units, usually WFBP's). ``records`` collects
    one dict per all-reduce: iteration, groups and byte ranges, start and end (Unix s),
    and ``agree_start``, when the agreement round that chose it began.
    """

    def __init__(self, module: nn.Module, plan: Plan, *, lr: float, timeout: float = 60.0,
                 fusion: HorovodFusion | None = None) -> None:
        self.module, self.plan, self.lr, self.timeout, self.fusion = (
            module, plan, lr, timeout, fusion)
        self.world = dist.get_world_size()
        params = dict(module.named_parameters())
        for n, p in params.items():
            if p.dtype != torch.float32:
                raise PlanError(f"parameter {n!r} is {p.dtype}; the executor handles float32")
        plan.check_tensors({n: p.numel() * 4 for n, p in params.items()})
        self.params = params
        self._names = {id(q): n for n, q in params.items()}
        self._seen = -1  # ready partitions at the last round that agreed on none
        self._last_cycle = 0.0  # start of the last fusion cycle (monotonic s)
        self._agree_start = 0.0  # start of the last agreement round (Unix s)
        self.groups: list[_GroupState] = []
        self.group_of: dict[str, int] = {}
        for gi, g in enumerate(plan.groups):
            for part in g.partitions:
                if part.offset % 4 or part.bytes % 4:
                    raise PlanError(f"plan: group {gi}: partition at byte {part.offset} is "
                                    "not aligned to 4-byte float32 elements")
            offsets, off = {}, 0
            for name, nbytes in g.tensors:
                offsets[name] = off
                off += nbytes // 4
                self.group_of[name] = gi
            st = _GroupState(torch.zeros(off), offsets, 0)
            st.done.set()
            self.groups.append(st)
        self.order = plan.priority_order()  # decision keys: (priority, group, offset)
        self.records: list[dict[str, Any]] = []
        self.iteration = 0
        self._applied: set[str] = set(params)
        self._ready = [False] * len(self.order)
        self._pending: set[int] = set()
        self._cond = threading.Condition()
        self._error: BaseException | None = None
        self._closed = False
        self._hooks = [p.register_post_accumulate_grad_hook(self._on_grad)
                       for p in params.values()]
        self._hooks += [m.register_forward_pre_hook(self._before_forward)
                        for m in module.modules() if any(True for _ in m.parameters(False))]
        self._thread = threading.Thread(target=self._run, name="allreduce", daemon=True)
        self._thread.start()

    # -- main thread ---------------------------------------------------------------
    def _on_grad(self, p: torch.Tensor) -> None:
        name = self._name(p)
        gi = self.group_of[name]
        st = self.groups[gi]
        with self._cond:
            if not self._pending:  # first gradient of a new iteration
                self._pending = set(range(len(self.order)))
                self._ready = [False] * len(self.order)
                for s in self.groups:
                    s.missing = len(s.offsets)
                    s.done.clear()
            assert p.grad is not None
            off = st.offsets[name]
            st.buffer[off:off + p.numel()].copy_(p.grad.reshape(-1))
            p.grad = None
            st.missing -= 1
            if st.missing == 0:
                for k, (g, _) in enumerate(self.order):
                    if g == gi:
                        self._ready[k] = True
                self._cond.notify_all()

    def _name(self, p: torch.Tensor) -> str:
        return self._names[id(p)]

    def _apply(self, name: str) -> None:
        if name in self._applied:
            return
        st = self.groups[self.group_of[name]]
        if not st.done.wait(self.timeout):
            self._raise_error()
            raise CommschedError(f"all-reduce of {name!r} not done within {self.timeout:g} s")
        self._raise_error()
        p = self.params[name]
        off = st.offsets[name]
        with torch.no_grad():
            p.add_(st.buffer[off:off + p.numel()].view_as(p), alpha=-self.lr / self.world)
        self._applied.add(name)

    def _before_forward(self, module: nn.Module, _args: Any) -> None:
        for p in module.parameters():
            self._apply(self._name(p))

    def begin_backward(self) -> None:
        """Call before ``backward``: the parameters' pending updates were all applied."""
        self._raise_error()
        left = set(self.params) - self._applied
        for name in sorted(left):  # parameters the forward pass did not reach
            self._apply(name)
        self._applied = set()
        self.iteration += 1

    def wait(self) -> None:
        """Wait until every partition of the current iteration is all-reduced."""
        for st in self.groups:
            if not st.done.wait(self.timeout):
                self._raise_error()
                raise CommschedError(f"all-reduce not done within {self.timeout:g} s")
        self._raise_error()

    def averaged_grads(self) -> dict[str, torch.Tensor]:
        """The current iteration's averaged gradients (after :meth:`wait`)."""
        self.wait()
        out = {}
        for name, p in self.params.items():
            st = self.groups[self.group_of[name]]
            off = st.offsets[name]
            out[name] = (st.buffer[off:off + p.numel()] / self.world).view_as(p).clone()
        return out

    def finish(self) -> None:
        """Wait for the last all-reduces and apply every pending update."""
        self.wait()
        for name in self.params:
            self._apply(name)
        self._applied = set(self.params)

    def close(self) -> None:
        """Stop the communication thread and remove the hooks."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        for h in self._hooks:
            h.remove()
        self._thread.join(self.timeout)

    def _raise_error(self) -> None:
        if self._error is not None:
            raise CommschedError(f"all-reduce thread failed: {self._error}")

    # -- communication thread --------------------------------------------------------
    def _run(self) -> None:
        try:
            while True:
                agreed = self._agree()
                if agreed is None:
                    return
                if agreed:
                    self._communicate(agreed)
        except BaseException as e:  # reported to the main thread
            self._error = e
            for st in self.groups:
                st.done.set()

    def _agree(self) -> list[int] | None:
        """Block until this worker has a ready partition; agree with the others on the
        partitions ready everywhere; return their decision keys in order (None: closed)."""
        with self._cond:
            seen = self._seen
            deadline = time.monotonic() + self.timeout
            while True:
                if self._closed:
                    return None
                ready = [k for k in self._pending if self._ready[k]]
                if ready and (len(ready) > seen or len(ready) == len(self._pending)):
                    break
                if not self._cond.wait(max(0.0, deadline - time.monotonic())):
                    if not self._pending:  # idle between iterations: keep waiting
                        deadline = time.monotonic() + self.timeout
                        continue
                    raise CommschedError(f"no gradient arrived within {self.timeout:g} s")
            flags = torch.zeros(len(self.order), dtype=torch.uint8)
            flags[ready] = 1
        if self.fusion is not None:
            time.sleep(max(0.0, self._last_cycle + self.fusion.cycle - time.monotonic()))
            self._last_cycle = time.monotonic()
        self._agree_start = time.time()
        dist.all_reduce(flags, op=dist.ReduceOp.MIN)
        agreed = [k for k in sorted(self._pending) if flags[k]]
        self._seen = -1 if agreed else len(ready)
        return agreed

    def _communicate(self, agreed: list[int]) -> None:
        if self.fusion is None:
            chosen = agreed[:1]
        else:
            chosen, total = [], 0
            for k in agreed:
                b = self.order[k][1].bytes
                if chosen and total + b > self.fusion.threshold:
                    break
                chosen.append(k)
                total += b
        views = []
        for k in chosen:
            gi, part = self.order[k]
            buf = self.groups[gi].buffer
            views.append(buf[part.offset // 4:(part.offset + part.bytes) // 4])
        start = time.time()
        if len(views) == 1:
            dist.all_reduce(views[0])
        else:
            fused = torch.cat(views)
            dist.all_reduce(fused)
            pos = 0
            for v in views:
                v.copy_(fused[pos:pos + v.numel()])
                pos += v.numel()
        end = time.time()
        self.records.append({
            "iteration": self.iteration, "agree_start": self._agree_start, "start": start,
            "end": end,
            "bytes": sum(v.numel() * 4 for v in views),
            "parts": [[self.order[k][0], self.order[k][1].offset, self.order[k][1].bytes,
                       self.order[k][1].priority] for k in chosen],
        })
        with self._cond:
            self._pending.difference_update(chosen)
            finished = {self.order[k][0] for k in chosen}
            for gi in finished:
                if not any(self.order[k][0] == gi for k in self._pending):
                    self.groups[gi].done.set()


# --------------------------------------------------------------------------------------
# Link utilisation.


class LinkSampler:
    """Samples an interface's byte counters (``/proc/self/net/dev``: the caller's network
    namespace) every ``interval`` seconds in a thread: rows ``[unix s, tx bytes, rx bytes]``.
    """

    def __init__(self, dev: str = "eth0", interval: float = 0.005) -> None:
        self.dev, self.interval = dev, interval
        self.rows: list[list[float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="link-sampler", daemon=True)

    def read(self) -> tuple[int, int] | None:
        with open("/proc/self/net/dev") as f:
            for line in f:
                name, _, rest = line.partition(":")
                if name.strip() == self.dev:
                    v = rest.split()
                    return int(v[8]), int(v[0])
        return None

    def start(self) -> LinkSampler:
        if self.read() is not None:
            self._thread.start()
        return self

    def _run(self) -> None:
        nxt = time.monotonic()
        while not self._stop.is_set():
            c = self.read()
            if c is not None:
                self.rows.append([time.time(), c[0], c[1]])
            nxt += self.interval
            self._stop.wait(max(0.0, nxt - time.monotonic()))

    def stop(self) -> list[list[float]]:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(1.0)
        return self.rows


# --------------------------------------------------------------------------------------
# A worker.


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


def _make_plan(policy: str, cfg: WorkerConfig) -> Plan:
    if policy not in cfg.plans:
        raise CommschedError(f"policy {policy!r} needs a plan file (plans.{policy})")
    return load_plan(cfg.plans[policy])


def _run_policy(policy: str, cfg: WorkerConfig,
                build: Callable[[], nn.Module], batch: Callable[[], Any]) -> dict[str, Any]:
    module = build()
    inputs, labels = batch()
    starts: list[float] = []
    records: list[dict[str, Any]] = []
    grads: dict[str, torch.Tensor] = {}
    # one more step than timed: its start ends the last timed step, so no timed step
    # includes draining the last all-reduces (the plan executor's next forward pass
    # overlaps them; after the last step nothing does)
    timed = cfg.warmup + cfg.iterations
    total = timed + 1
    loss_fn = nn.functional.cross_entropy
    mode = "plan" if policy in (USER_PLAN, NO_COMM) else ALLREDUCE_POLICIES[policy].live
    if mode == "ddp":
        from torch.nn.parallel import DistributedDataParallel as DDP

        with warnings.catch_warnings():  # broadcast_buffers' deprecation notice
            warnings.simplefilter("ignore", FutureWarning)
            net = DDP(module, bucket_cap_mb=DDP_BUCKET_BYTES / 2**20, broadcast_buffers=False)
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
            loss_fn(net(*inputs), labels).backward()
            if len(starts) == total and cfg.dump:
                grads = {n: p.grad.detach().clone() for n, p in module.named_parameters()
                         if p.grad is not None}
            opt.step()
        starts.append(time.time())
    elif policy == NO_COMM:
        opt = torch.optim.SGD(module.parameters(), lr=cfg.lr, foreach=False)
        for _ in range(total):
            starts.append(time.time())
            opt.zero_grad(set_to_none=True)
            loss_fn(module(*inputs), labels).backward()
            opt.step()
        starts.append(time.time())
    else:
        plan = _make_plan(policy, cfg)
        fusion = (HorovodFusion(cfg.horovod_threshold, cfg.horovod_cycle)
                  if mode == "horovod" else None)
        ex = PlanExecutor(module, plan, lr=cfg.lr, timeout=cfg.timeout, fusion=fusion)
        try:
            for i in range(total):
                starts.append(time.time())
                loss = loss_fn(module(*inputs), labels)
                ex.begin_backward()
                loss.backward()
                if i == total - 1 and cfg.dump:
                    grads = ex.averaged_grads()
            ex.finish()
            starts.append(time.time())
            records = [dict(r, iteration=r["iteration"] - 1) for r in ex.records]
        finally:
            ex.close()
    params = {n: p.detach().clone() for n, p in module.named_parameters()}
    steps = [b - a for a, b in itertools.pairwise(starts)]
    return {"policy": policy, "iteration_start": starts[:timed + 1],
            "step_s": steps[cfg.warmup:timed], "warmup_step_s": steps[:cfg.warmup],
            "last_step_s": steps[timed:], "allreduces": records,
            "_grads": grads, "_params": params}


def run_worker(cfg: WorkerConfig) -> dict[str, Any]:
    """Join the process group, run every policy, write ``cfg.out`` (JSON); see
    :class:`WorkerConfig`. Raises a one-line :class:`CommschedError` on a bounded wait."""

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
                r = _run_policy(policy, cfg, lambda: torch_models.build(cfg.model, cfg.seed),
                                lambda: inputs_labels)
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


#: ``spawn_worker(rank, argv, log, env)``: start one worker process (see :func:`launch`).
SpawnWorker = Callable[[int, list[str], Path, Mapping[str, str]], "subprocess.Popen[bytes]"]


def _last_error(log: Path) -> str:
    try:
        lines = log.read_text(errors="replace").strip().splitlines()
    except OSError:
        return "(no log)"
    errs = [x for x in lines if "error:" in x]
    return (errs or lines or ["(empty log)"])[-1].strip()[:300]


def launch(cfgs: Sequence[WorkerConfig], workdir: str | os.PathLike[str], timeout: float,
           spawn_worker: SpawnWorker | None = None, ifname: str = "lo",
           poll: float = 0.1) -> list[dict[str, Any]]:
    """Run one worker process per config (``python -m commsched.pace.live.ddp``); return
    their results (the JSON each wrote to ``cfg.out``) in rank order.

    ``spawn_worker`` starts a process (default: on this machine, loopback; the live runs
    pass :meth:`commsched.cluster.emulated.EmulatedCluster.spawn_client`); ``ifname`` is the
    interface gloo uses (``GLOO_SOCKET_IFNAME``). The whole run is bounded by ``timeout``
    seconds. On every exit path -- success, a worker's error, the time limit, an exception
    or Ctrl-C here -- every worker still running is ended (SIGTERM, then SIGKILL), by PID.
    A failed worker is a one-line :class:`CommschedError` quoting its error.
    """
    work = Path(workdir)
    work.mkdir(parents=True, exist_ok=True)
    env = {"GLOO_SOCKET_IFNAME": ifname, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    started: dict[int, tuple[subprocess.Popen[bytes], ProcRecord, Path]] = {}

    def local(rank: int, argv: list[str], log: Path, env: Mapping[str, str]
              ) -> subprocess.Popen[bytes]:
        return spawn(argv, f"ddp-w{rank}", log, env=env)[0]

    start = spawn_worker or local
    try:
        for cfg in cfgs:
            path = work / f"worker{cfg.rank}.json"
            atomic_write_text(path, json.dumps(asdict(cfg)) + "\n")
            log = work / f"worker{cfg.rank}.log"
            log.unlink(missing_ok=True)
            p = start(cfg.rank, [sys.executable, "-m", "commsched.pace.live.ddp", str(path)],
                      log, env)
            started[cfg.rank] = (p, ProcRecord(p.pid, start_time(p.pid) or 0,
                                               f"ddp-w{cfg.rank}", None, str(log)), log)
        deadline = time.monotonic() + timeout
        while True:
            codes = {r: p.poll() for r, (p, _, _) in started.items()}
            for r, code in sorted(codes.items()):
                if code not in (None, 0):
                    raise CommschedError(f"ddp worker {r} failed (exit {code}): "
                                         f"{_last_error(started[r][2])}")
            if all(c == 0 for c in codes.values()):
                break
            if time.monotonic() > deadline:
                raise CommschedError(f"ddp workers still running after {timeout:g} s; ended")
            time.sleep(poll)
    finally:
        end_processes([rec for _, rec, _ in started.values()],
                      popens={p.pid: p for p, _, _ in started.values()})
    return [json.loads(Path(cfg.out).read_text()) for cfg in cfgs]


def from_torchrun(data: Mapping[str, Any], env: Mapping[str, str]) -> dict[str, Any]:
    """The worker config ``data`` with rank, world size and rendezvous from a ``torchrun``
    launch (``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``/``MASTER_PORT`` in ``env``; then
    ``master = "env"``: the process group joins by ``env://``, through torchrun's own
    store); ``{rank}`` in ``out`` and ``dump`` becomes the rank. Without them, ``data``.

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

    Under ``torchrun`` (``torchrun --nnodes W --nproc-per-node 1 --node-rank R
    --master-addr HOST --master-port PORT -m commsched.pace.live.ddp CONFIG.json`` on each
    host) the rank and the rendezvous come from torchrun (:func:`from_torchrun`).
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
