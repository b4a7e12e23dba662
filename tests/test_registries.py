"""Each algorithm family has one registry, and the CLI, the config schema and the
experiments read it (README, "Extending commsched")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from commsched.cli import build_parser
from commsched.commands.pace import SOLVER_CHOICES
from commsched.errors import CommschedError
from commsched.pace.live import ddp
from commsched.pace.lp import SLOT_SOLVERS
from commsched.pace.policies import POLICIES, live_policies
from commsched.placement import DEVICE_SCHEDULERS, PARTITIONERS
from commsched.placement.experiments.thesis import run_seven
from commsched.registry import Registry
from commsched.tictac import ORDERINGS
from commsched.tictac.experiments.sweep_config import ALGOS
from commsched.tictac.live.config import HOOKS

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = yaml.safe_load((ROOT / "src/commsched/schemas/config.schema.yaml").read_text())
CONFIG = yaml.safe_load((ROOT / "config/config.yaml").read_text())


def _choices(command: str) -> dict[str, Any]:
    sub = build_parser()._subparsers._group_actions[0].choices[command]  # type: ignore[union-attr]
    return {a.dest: list(a.choices) for a in sub._actions if a.choices}


def test_orderings_drive_cli_schema_and_experiments():
    assert _choices("order")["algo"] == ORDERINGS.choices()
    pattern = SCHEMA["properties"]["live"]["properties"]["configs"]["items"]["pattern"]
    assert pattern == f"^({'|'.join(ORDERINGS)})-({'|'.join(HOOKS)})$"
    assert ("baseline", *ORDERINGS) == ALGOS


def test_allreduce_policies_drive_schema_sim_and_live():
    sim = SCHEMA["properties"]["pace_sim"]["$defs"]["policy"]["enum"]
    assert sim == POLICIES.choices()
    assert set(CONFIG["pace_sim"]["policies"]) <= set(POLICIES)
    live_enum = SCHEMA["properties"]["pace_live"]["properties"]["policies"]["items"]["enum"]
    assert live_enum == list(ddp.POLICIES) == [*live_policies(), ddp.USER_PLAN]
    # the alias runs what PACE measured: Horovod 0.20's decision, fused at run time
    assert POLICIES["horovod"] is POLICIES["horovod-0.20"]
    assert POLICIES["horovod"].live == "horovod"


def test_slot_solvers_drive_pace_plan():
    assert SLOT_SOLVERS.choices() == SOLVER_CHOICES
    plan = build_parser()._subparsers._group_actions[0].choices["pace"]  # type: ignore[union-attr]
    sub = plan._subparsers._group_actions[0].choices["plan"]  # type: ignore[union-attr]
    assert next(a.choices for a in sub._actions if a.dest == "solver") == SOLVER_CHOICES


def test_registry_rejects_duplicates_and_unknown_names():
    r: Registry[int] = Registry("thing")
    r.add("a", 1, aliases=("alpha",))
    with pytest.raises(ValueError, match="registered twice"):
        r.add("alpha", 2)
    with pytest.raises(CommschedError, match=r"unknown thing 'b' \(known: a, alpha\)"):
        r["b"]
    assert dict(r) == {"a": 1} and "alpha" in r and r.aliases() == {"alpha": "a"}


def test_flow_schedulers_are_one_registry_with_the_papers_names():
    from commsched.echelon import exact
    from commsched.echelon.coflow import COFLOW_SCHEDULERS
    from commsched.echelon.schedulers import ECHELON_SCHEDULERS, FLOW_SCHEDULERS

    assert FLOW_SCHEDULERS["varys"] is FLOW_SCHEDULERS["sebf"]
    assert list(FLOW_SCHEDULERS) == [*COFLOW_SCHEDULERS, *ECHELON_SCHEDULERS]
    assert set(exact.POLICIES) == {"fair", "sebf", *ECHELON_SCHEDULERS}
    assert _choices("echelon")  # the replay subcommand's choices live one level down
    replay = SCHEMA["properties"]["echelon_replay"]["properties"]["schedulers"]["items"]["enum"]
    assert replay == list(COFLOW_SCHEDULERS)
    for name in CONFIG["echelon_eval"]["schedulers"]:
        assert name in FLOW_SCHEDULERS


def test_placement_registries_drive_cli_schema_and_experiments(monkeypatch):
    choices = _choices("place")
    assert choices["partitioner"] == [*PARTITIONERS.choices(), "all"]
    assert choices["scheduler"] == [*DEVICE_SCHEDULERS.choices(), "all"]
    seven = SCHEMA["properties"]["placement"]["properties"]["seven"]["properties"]
    assert seven["gantt_scheduler"]["enum"] == DEVICE_SCHEDULERS.choices()
    assert CONFIG["placement"]["seven"]["gantt_scheduler"] in DEVICE_SCHEDULERS
    assert PARTITIONERS["iterated-critical-path"] is PARTITIONERS["icp"]
    assert DEVICE_SCHEDULERS["path-computation-time-first"] is DEVICE_SCHEDULERS["pct"]
    # the experiments loop over members only: one row per partitioner and scheduler
    cfg = {**CONFIG["placement"], "full": False, "semantics": ["thesis"]}
    cfg["seven"] = {**cfg["seven"], "synthetic": [3], "traces": [], "runs": 1, "scale": 0.01,
                    "gantt_scheduler": "path-computation-time-first"}
    runs, gantt = run_seven(cfg, "unused")
    assert sorted(set(zip(runs.partitioner, runs.scheduler, strict=True))) == sorted(
        (p, s) for p in PARTITIONERS for s in DEVICE_SCHEDULERS)
    assert set(gantt.scheduler) == {"pct"} and set(gantt.partitioner) == set(PARTITIONERS)
