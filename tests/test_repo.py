"""Repository hygiene: lock and conda environment in step, notebooks stripped, pipeline
parses, quick-start commands present."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent


def _lock_pins() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "requirements.lock").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, ver = line.partition("==")
            pins[name.lower().replace("_", "-")] = ver
    return pins


def test_environment_yml_matches_lock():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip_section = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    conda_pins = {}
    for spec in pip_section:
        name, _, ver = spec.partition("==")
        conda_pins[name.lower().replace("_", "-")] = ver
    assert conda_pins == _lock_pins()
    py = next(d for d in env["dependencies"] if isinstance(d, str) and d.startswith("python="))
    assert py == f"python={sys.version_info.major}.{sys.version_info.minor}"


def test_requirements_in_is_locked():
    pins = _lock_pins()
    for line in (ROOT / "requirements.in").read_text().splitlines():
        name = re.split(r"[<>=\[ ]", line.strip())[0].lower().replace("_", "-")
        if name and not name.startswith("#"):
            assert name in pins, f"{name} is in requirements.in but not in requirements.lock"


def test_notebooks_have_no_outputs_and_a_kernelspec():
    notebooks = sorted((ROOT / "notebooks").glob("*.ipynb"))
    for nb_path in notebooks:
        nb = json.loads(nb_path.read_text())
        assert nb["metadata"].get("kernelspec", {}).get("language") == "python", nb_path.name
        tagged = [c for c in nb["cells"] if "parameters" in c.get("metadata", {}).get("tags", [])]
        assert len(tagged) == 1, f"{nb_path.name}: needs exactly one 'parameters' cell"
        for cell in nb["cells"]:
            if cell["cell_type"] == "code":
                assert not cell.get("outputs"), f"{nb_path.name} has stored outputs"
                assert cell.get("execution_count") is None, f"{nb_path.name} has execution counts"


def test_quick_start_commands():
    readme = (ROOT / "README.md").read_text()
    assert "make reproduce" in readme and "make test" in readme
    assert "make test" in (ROOT / ".ci/run").read_text()


@pytest.mark.slow
def test_snakemake_dry_run_all():
    snakemake = shutil.which("snakemake") or str(Path(sys.executable).parent / "snakemake")
    r = subprocess.run([snakemake, "-n", "--quiet", "rules", "all"], cwd=ROOT,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
