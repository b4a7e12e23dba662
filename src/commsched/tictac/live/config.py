"""The ``live`` config section of the live TicTac experiment, checked against the schema.

:mod:`commsched.tictac.experiments.live` describes the experiment; the schema
(``src/commsched/schemas/config.schema.yaml``) checks the section, and :class:`LiveParams`
adds the two checks it cannot state.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from commsched import driver
from commsched.cluster import net
from commsched.errors import CommschedError

__all__ = ["HOOKS", "LiveParams", "ModelEntry"]

#: The hooks that enforce an order (:mod:`commsched.tictac.live.hooks`), as a config
#: ``<ordering>-<hook>`` names them; the baseline is hook ``none``.
HOOKS = ("sender", "dag")


@dataclass(frozen=True)
class ModelEntry:
    """One model of the live experiment.

    Attributes
    ----------
    model : str
        A model of :mod:`commsched.trace.zoo`.
    batch : dict of str to int
        The per-worker batch of every configured mode.
    size : int
        The input size.
    bandwidth : str
        Every link's rate, in tc's units (``1gbit``).
    """

    model: str
    batch: dict[str, int]
    size: int
    bandwidth: str


@dataclass(frozen=True)
class LiveParams:
    """The ``live`` config section, flattened; build it with :meth:`from_config`.

    The fields are the section's keys (the schema documents them), with ``models`` as
    :class:`ModelEntry` and ``configs`` as ``(ordering, hook)`` pairs; ``raw`` keeps the
    section as given, for provenance.

    References
    ----------
    .. [1] Hashemi, Jyothi & Campbell, "TicTac", SysML 2019, Sec. 5 (enforcement) and
       Sec. 6 (setup).
    """

    raw: dict[str, Any]
    models: list[ModelEntry]
    modes: list[str]
    configs: list[tuple[str, str]]  # (order, hook) of every config besides the baseline
    hosts: dict[str, list[str]] | None
    ps: int
    workers: int
    burst: str
    latency: str
    threads: int
    warmup: int
    iterations: int
    trace_iterations: int
    baseline_trace_iterations: int
    timeout_s: float
    step_timeout_s: float
    sim_iterations: int
    seed: int
    enabled: bool = True
    grpc_capture_iterations: int = 0

    @staticmethod
    def from_config(cfg: Mapping[str, Any] | str) -> LiveParams:
        """The parameters of a ``live`` section.

        Parameters
        ----------
        cfg : mapping or str
            The section (``config/config.yaml``'s ``live``), or its JSON text.

        Returns
        -------
        LiveParams
            Models inherit the section's ``bandwidth`` unless they set their own;
            ``baseline_trace_iterations`` defaults to ``trace_iterations``,
            ``grpc_capture_iterations`` to 0 (no capture).

        Raises
        ------
        CommschedError
            One line naming the key: a value the schema rejects; a model whose ``batch``
            mapping lacks a configured mode (a relation between keys, which the schema
            cannot state); or a bandwidth that is not a positive rate in tc's units (the
            schema checks only its form).
        """
        cfg = driver.config_section("live", cfg)
        modes = list(cfg["modes"])
        models = []
        for m in cfg["models"]:
            batch = m["batch"] if isinstance(m["batch"], dict) else dict.fromkeys(
                modes, m["batch"])
            for mode in modes:
                if mode not in batch:
                    raise CommschedError(f"config live.models {m['model']}: no batch for "
                                         f"{mode}")
            bandwidth = m.get("bandwidth", cfg["bandwidth"])
            net.parse_rate(bandwidth)
            models.append(ModelEntry(m["model"], dict(batch), m["size"], bandwidth))
        configs = [(order, hook) for order, _, hook in
                   (str(c).partition("-") for c in cfg["configs"])]
        return LiveParams(
            raw=cfg, models=models, modes=modes, configs=configs,
            hosts=cfg["hosts"], ps=cfg["ps"], workers=cfg["workers"], burst=cfg["burst"],
            latency=cfg["latency"], threads=cfg["threads"], warmup=cfg["warmup"],
            iterations=cfg["iterations"], trace_iterations=cfg["trace_iterations"],
            baseline_trace_iterations=cfg.get("baseline_trace_iterations",
                                              cfg["trace_iterations"]),
            timeout_s=float(cfg["timeout_s"]), step_timeout_s=float(cfg["step_timeout_s"]),
            sim_iterations=cfg["sim_iterations"], seed=cfg["seed"], enabled=cfg["enabled"],
            grpc_capture_iterations=cfg.get("grpc_capture_iterations", 0),
        )
