"""The plan executor: an all-reduce plan enforced in PyTorch data-parallel training.

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

With :class:`HorovodFusion` the executor runs Horovod's tensor fusion instead of the static
plan order: the plan's groups are the fusable units (usually WFBP's); every ``cycle``
seconds the units ready on all workers are fused, in the plan's order, up to ``threshold``
bytes per all-reduce.

Every wait is bounded (``timeout``): a peer that stops communicating ends the run with a
one-line :class:`~commsched.errors.CommschedError`. The workers that run the executor are
:mod:`commsched.pace.live.ddp`.

References
----------
.. [1] Y. Bao, Y. Peng, Y. Chen, C. Wu, "Preemptive All-reduce Scheduling for Expediting
   Distributed DNN Training", IEEE INFOCOM 2020 (PACE), Secs. II-C, IV-A and VI.
.. [2] A. Sergeev, M. Del Balso, "Horovod: fast and easy distributed deep learning in
   TensorFlow", arXiv:1802.05799 (tensor fusion, the coordinator).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from commsched.errors import CommschedError
from commsched.pace.dynamic import HOROVOD
from commsched.pace.plan import Plan, PlanError

__all__ = ["HorovodFusion", "PlanExecutor"]


@dataclass(frozen=True)
class HorovodFusion:
    """Horovod's tensor fusion in the executor.

    The defaults are Horovod's before v0.21 (:data:`commsched.pace.dynamic.HOROVOD`).

    Parameters
    ----------
    threshold : int
        Bytes per fused all-reduce at most (a larger unit goes alone).
    cycle : float
        Seconds between two fusion cycles.

    References
    ----------
    Horovod (Sergeev and Del Balso, arXiv:1802.05799): ``HOROVOD_FUSION_THRESHOLD`` and
    ``HOROVOD_CYCLE_TIME``.
    """

    threshold: int = HOROVOD["horovod-0.20"][0]
    cycle: float = HOROVOD["horovod-0.20"][1]


@dataclass
class _GroupState:
    buffer: torch.Tensor
    offsets: dict[str, int]  # parameter -> element offset in the buffer
    missing: int
    done: threading.Event = field(default_factory=threading.Event)


class PlanExecutor:
    """Executes ``plan`` for ``module``'s gradients in the default process group.

    Parameters
    ----------
    module : torch.nn.Module
        The model; every parameter is float32 and is a tensor of the plan.
    plan : Plan
        The all-reduce plan (module docstring).
    lr : float
        Learning rate of the SGD update the executor applies.
    timeout : float
        Bound on every wait, in seconds.
    fusion : HorovodFusion, optional
        Horovod's dynamic fusion instead of the static plan order (the plan's groups are
        then the fusable units, usually WFBP's).

    Attributes
    ----------
    records : list of dict
        One per all-reduce: iteration, groups and byte ranges, start and end (Unix s),
        and ``agree_start``, when the agreement round that chose it began.

    Raises
    ------
    PlanError
        If a parameter is not float32, the plan's tensors are not the parameters, or a
        partition is not aligned to float32 elements.

    References
    ----------
    PACE (Bao et al., INFOCOM 2020), Sec. II-C (preemption at partition boundaries) and
    Sec. IV-A (the next forward pass overlaps the communication).
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
        """Call before ``backward``: apply the updates the forward pass did not reach.

        Raises
        ------
        CommschedError
            If the communication thread failed or an all-reduce timed out.
        """
        self._raise_error()
        left = set(self.params) - self._applied
        for name in sorted(left):  # parameters the forward pass did not reach
            self._apply(name)
        self._applied = set()
        self.iteration += 1

    def wait(self) -> None:
        """Wait until every partition of the current iteration is all-reduced.

        Raises
        ------
        CommschedError
            If the communication thread failed or the wait timed out.
        """
        for st in self.groups:
            if not st.done.wait(self.timeout):
                self._raise_error()
                raise CommschedError(f"all-reduce not done within {self.timeout:g} s")
        self._raise_error()

    def averaged_grads(self) -> dict[str, torch.Tensor]:
        """The current iteration's averaged gradients (after :meth:`wait`).

        Returns
        -------
        dict
            ``{parameter: sum over workers / W}``, copies.
        """
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
