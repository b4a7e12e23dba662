"""The ``tictac`` config section of the simulated sweeps, and the orders they compare.

:mod:`commsched.tictac.experiments.sweeps` describes the study; the schema
(``src/commsched/schemas/config.schema.yaml``) checks the section.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from commsched import driver
from commsched.errors import CommschedError
from commsched.tictac import ORDERINGS
from commsched.tictac.sim import Interleave

__all__ = ["ALGOS", "CONTROL", "FIGURES", "SWEEPS", "Params"]

#: Orders compared everywhere: the random baseline, TIC (Alg. 2) and TAC (Alg. 3).
ALGOS = ("baseline", *ORDERINGS)
#: The Sec. 6.3 control (``models`` only): one random order shared by all workers.
CONTROL = "fixed_random"
#: Experiments (one result table each).
FIGURES = ("workers", "servers", "batch", "ratio", "models", "arxiv", "steptime")
#: The sweeps :func:`~commsched.tictac.experiments.sweep_runs.run_figure` runs (``steptime``
#: is :func:`~commsched.tictac.experiments.sweep_runs.run_steptime`).
SWEEPS = FIGURES[:-1]


@dataclass(frozen=True)
class Params(driver.SectionParams):
    """The ``tictac`` section of the pipeline config, checked against the schema.

    Build it with :meth:`from_mapping` or :meth:`from_file`; the fields are the
    section's keys, flattened (``workers.n_workers`` -> ``workers``, ``protocol.warmup``
    -> ``warmup``, ...), and ``worker_noise`` is None for ``'trace'`` (per model, from
    the trace). The schema (``src/commsched/schemas/config.schema.yaml``) documents
    every key; ``config/config.yaml`` says why each value was chosen.

    References
    ----------
    .. [1] Hashemi, Jyothi & Campbell, "TicTac", SysML 2019, Sec. 6 (Setup; Figs. 7, 9-13);
       arXiv:1803.03288v1, Sec. 6 (Figs. 7-10).
    """

    traces: tuple[str, ...]
    seed: int
    jitter: float
    worker_noise: float | None  # None: per model from the trace
    comm_to_compute: float
    latency_s: float
    sharding: str
    duplex: bool
    coarsen: bool
    baseline_interleave: Interleave
    warmup: int
    recorded: int
    iterations: int
    validate_every: int
    workers: tuple[int, ...]
    workers_per_server: int
    servers_workers: int
    servers: tuple[int, ...]
    batch_factors: tuple[float, ...]
    batch_workers: int
    batch_servers: int
    ratios: tuple[float, ...]
    ratio_workers: int
    ratio_servers: int
    models_workers: int
    models_servers: int
    arxiv_workers: tuple[int, ...]
    arxiv_servers: int
    arxiv_link_Bps: float
    arxiv_min_speedup: float
    steptime_traces: tuple[str, ...]
    steptime_workers: int
    steptime_servers: int
    steptime_iterations: int
    SECTION = "tictac"

    @classmethod
    def _fields(cls, m: dict[str, Any]) -> dict[str, Any]:
        proto = m["protocol"]
        warmup, recorded, iterations = proto["warmup"], proto["recorded"], m["iterations"]
        if iterations < warmup + recorded:
            raise CommschedError(f"config tictac.iterations: must be >= protocol.warmup + "
                                 f"protocol.recorded ({warmup + recorded}), got {iterations}")
        noise = m["worker_noise"]
        w, s, b, r = m["workers"], m["servers"], m["batch"], m["ratio"]
        md, ax, st = m["models"], m["arxiv"], m["steptime"]
        return dict(
            traces=tuple(m["traces"]),
            seed=m["seed"],
            jitter=float(m["jitter"]),
            worker_noise=None if noise == "trace" else float(noise),
            comm_to_compute=float(m["comm_to_compute"]),
            latency_s=float(m["latency_s"]),
            sharding=m["sharding"],
            duplex=m["duplex"],
            coarsen=m["coarsen"],
            baseline_interleave=m["baseline_interleave"],
            warmup=warmup,
            recorded=recorded,
            iterations=iterations,
            validate_every=m["validate_every"],
            workers=tuple(w["n_workers"]),
            workers_per_server=w["workers_per_server"],
            servers_workers=s["n_workers"],
            servers=tuple(s["n_servers"]),
            batch_factors=tuple(float(f) for f in b["factors"]),
            batch_workers=b["n_workers"],
            batch_servers=b["n_servers"],
            ratios=tuple(float(x) for x in r["ratios"]),
            ratio_workers=r["n_workers"],
            ratio_servers=r["n_servers"],
            models_workers=md["n_workers"],
            models_servers=md["n_servers"],
            arxiv_workers=tuple(ax["n_workers"]),
            arxiv_servers=ax["n_servers"],
            arxiv_link_Bps=float(ax["link_Bps"]),
            arxiv_min_speedup=float(ax["min_speedup"]),
            steptime_traces=tuple(st["traces"]),
            steptime_workers=st["n_workers"],
            steptime_servers=st["n_servers"],
            steptime_iterations=st["iterations"],
        )
