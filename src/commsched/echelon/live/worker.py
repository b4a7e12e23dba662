"""One process (host) of a live EchelonFlow job: ``python -m commsched.echelon.live.worker
CONFIG.json``, under ``torchrun`` or started directly.

The process joins its job's gloo process group as the rank of its config (``env://``:
``WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT`` from torchrun or from the launcher),
opens its end of the bulk-data network (:mod:`commsched.echelon.live.transport`: tagged
lanes, or gloo point-to-point with ``backend: gloo``), then runs one *phase* per entry of
``phases`` (the same job, from the same seed, under the policy the controller enforces in
that phase): before each phase it waits at the cluster-wide phase barrier in the
controller's store (a :class:`torch.distributed.TCPStore`; without a store, a gloo
barrier). It writes ``out`` (JSON): per phase the computations, iteration ends and flow
records. Every wait is bounded (``timeout``, ``join_timeout``); any failure is one line
on stderr and exit 2.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import torch
import torch.distributed as dist

from commsched.atomic import atomic_write_text
from commsched.cluster.procs import config_main
from commsched.echelon.live.jobs import LiveJob, profile_compute, run_rank, simulator_profile
from commsched.echelon.live.transport import GlooTransport, TaggedTransport, Transport
from commsched.errors import CommschedError

__all__ = ["BACKENDS", "WorkerConfig", "main", "run_worker"]

#: Bulk-data transports: tagged TCP lanes, or gloo point-to-point (untagged).
BACKENDS = ("tagged", "gloo")


@dataclass
class WorkerConfig:
    """One process of a live job (module docstring). ``peers[r]``: rank ``r``'s data
    address and port; ``hosts[r]``: its host id in the controller's network model;
    ``controller``: the controller's UDP address; ``store``: its phase-barrier store;
    ``profile``: ``{"fwd": [...], "bwd": [...]}`` compute times that set the flows'
    EchelonFlow offsets (:func:`commsched.echelon.live.jobs.flow_meta`; default: the
    profile measured here). Under torchrun the process group joins through torchrun's
    store (``master``/``port`` overridden), with ``rank`` as given. ``dump``:
    ``torch.save`` the final parameters there."""

    job: dict[str, Any]
    rank: int
    peers: list[list[Any]]
    out: str
    hosts: list[int] = field(default_factory=list)
    backend: str = "tagged"
    master: str = "127.0.0.1"
    port: int = 29500
    tag_base: int = 1
    tags: int = 7
    controller: list[Any] | None = None
    store: list[Any] | None = None
    phases: list[str] = field(default_factory=lambda: ["run"])
    profile: dict[str, list[float]] | None = None
    timeout: float = 60.0
    join_timeout: float = 60.0
    threads: int = 1
    sndbuf: int = 0
    dump: str | None = None

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise CommschedError(f"worker: unknown backend {self.backend!r}; known: "
                                 f"{', '.join(BACKENDS)}")
        if not self.phases:
            raise CommschedError("worker: phases must not be empty")
        if self.timeout <= 0 or self.join_timeout <= 0:
            raise CommschedError("worker: timeouts must be positive")


def _with_env(data: Mapping[str, Any], env: Mapping[str, str]) -> dict[str, Any]:
    """The config with the rendezvous of a torchrun (or ``direct``) environment: the
    process group joins through its store (``master = "env"``) with the config's own rank
    (the rank's peers and tags are in the config; torchrun's c10d rendezvous numbers its
    agents by address, not in the job's rank order)."""
    out = dict(data)
    if "RANK" in env and "WORLD_SIZE" in env:
        out.update(master="env")
    for key in ("out", "dump"):
        if isinstance(out.get(key), str):
            out[key] = out[key].replace("{rank}", str(out["rank"]))
    return out


def _phase_barrier(store: dist.TCPStore | None, p: int, timeout: float) -> float:
    if store is None:
        dist.barrier()
        return time.time()
    store.add(f"ready/{p}", 1)
    try:
        store.wait([f"go/{p}"], _dt.timedelta(seconds=timeout))
    except RuntimeError:
        raise CommschedError(f"the controller did not start phase {p} within {timeout:g} s"
                             ) from None
    return float(store.get(f"go/{p}").decode())


def run_worker(cfg: WorkerConfig) -> dict[str, Any]:
    """Run every phase of ``cfg``'s job in this process; write and return the results.

    Parameters
    ----------
    cfg : WorkerConfig
        The rank's config (job, peers, phases, timeouts in seconds, ``out`` path).

    Returns
    -------
    dict
        ``config``, ``rank``, ``job``, ``paradigm``, ``profile`` and ``phases`` (per phase:
        ``policy``, ``go`` (the phase's start, epoch seconds), ``tasks``,
        ``iteration_end``, ``flows``), as written to ``cfg.out``.

    Raises
    ------
    CommschedError
        The job's world size differs from the peers, the processes do not all join within
        ``join_timeout``, the controller's store cannot be reached or does not start a
        phase within ``timeout``, or a rank's wait times out.
    """
    torch.set_num_threads(cfg.threads)
    job = LiveJob(**cfg.job)
    world = job.world
    if len(cfg.peers) != world or (cfg.hosts and len(cfg.hosts) != world):
        raise CommschedError(f"worker: job {job.name} has {world} processes but "
                             f"{len(cfg.peers)} peers")
    prof = (simulator_profile(job, cfg.profile["fwd"], cfg.profile["bwd"]) if cfg.profile
            else profile_compute(job, 1))
    init = "env://" if cfg.master == "env" else f"tcp://{cfg.master}:{cfg.port}"
    try:
        dist.init_process_group("gloo", init_method=init, rank=cfg.rank, world_size=world,
                                timeout=_dt.timedelta(seconds=cfg.join_timeout))
    except (RuntimeError, ValueError) as e:
        msg = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise CommschedError(f"rank {cfg.rank}: the {world} processes of job {job.name} did "
                             f"not all join within {cfg.join_timeout:g} s ({msg[:120]})"
                             ) from None
    tr: Transport | None = None
    store = None
    phases = []
    try:
        if cfg.backend == "gloo":
            tr = GlooTransport(cfg.timeout)
        else:
            tr = TaggedTransport(cfg.rank, [(str(a), int(p)) for a, p in cfg.peers],
                                 tag_base=cfg.tag_base, tags=cfg.tags, timeout=cfg.timeout,
                                 hosts=cfg.hosts or None,
                                 controller=((str(cfg.controller[0]), int(cfg.controller[1]))
                                             if cfg.controller else None),
                                 sndbuf=cfg.sndbuf)
        if cfg.store:
            try:
                store = dist.TCPStore(str(cfg.store[0]), int(cfg.store[1]), is_master=False,
                                      timeout=_dt.timedelta(seconds=cfg.join_timeout))
            except RuntimeError as e:
                raise CommschedError(f"rank {cfg.rank}: cannot reach the controller's store "
                                     f"at {cfg.store[0]}:{cfg.store[1]} ({str(e)[:100]})"
                                     ) from None
        res = None
        for p, name in enumerate(cfg.phases):
            go = _phase_barrier(store, p, cfg.timeout)
            res = run_rank(job, cfg.rank, tr, prof, cfg.timeout)
            phases.append({"phase": p, "policy": name, "go": go, "tasks": res.tasks,
                           "iteration_end": res.iteration_end, "flows": res.flows})
        if store is not None:
            store.add(f"ready/{len(cfg.phases)}", 1)  # tells the controller we are done
        dist.barrier()
    finally:
        if tr is not None:
            tr.close()
        dist.destroy_process_group()
    out = {"config": asdict(cfg), "rank": cfg.rank, "job": job.name,
           "paradigm": job.paradigm, "phases": phases, "profile": asdict(prof)}
    atomic_write_text(cfg.out, json.dumps(out) + "\n")
    if cfg.dump and res is not None:
        torch.save(res.params, cfg.dump)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m commsched.echelon.live.worker CONFIG.json`` (one-line errors, exit 2).

    Parameters
    ----------
    argv : sequence of str, optional
        One argument, the config file; default ``sys.argv[1:]``.

    Returns
    -------
    int
        0, or 2 after a usage line or a one-line error
        (:func:`commsched.cluster.procs.config_main`).
    """
    return config_main(argv, "commsched.echelon.live.worker", "echelon live worker",
                       lambda data: run_worker(WorkerConfig(**_with_env(data, os.environ))))


if __name__ == "__main__":
    sys.exit(main())
