"""Helpers shared by every rule file: config validation, the tools rules run, and the list
of final targets."""

import glob
import os
import shlex
import sys
from pathlib import Path

from snakemake.settings.types import DeploymentMethod
from snakemake.utils import validate


validate(config, "../../src/commsched/schemas/config.schema.yaml")

# Rules run `commsched`, `python` and `papermill` of the environment that runs Snakemake
# (`.venv/bin/snakemake --cores 2 toys` works without the venv on PATH); under --use-conda
# the rule's conda environment provides them instead.
# Headless: drivers and notebook kernels draw with Agg; the executed notebooks still hold
# their figures as image outputs (commsched.plotting.save_figure).
VENV_BIN = Path(sys.executable).parent
if DeploymentMethod.CONDA in workflow.deployment_settings.deployment_method:
    shell.prefix("export MPLBACKEND=agg; ")
else:
    shell.prefix(f'export MPLBACKEND=agg PATH={shlex.quote(str(VENV_BIN))}:"$PATH"; ')

# Every job's shell command runs under scripts/job-shell (`job-shell -c CMD`, which runs it
# with bash): the job gets its own session and process group, and all its processes (a
# notebook's kernel, a live run's servers and workers) end when Snakemake dies (SIGKILL
# too) or on a Ctrl-C: SIGTERM first (the live runs tear their cluster down), SIGKILL after
# 30 s. It runs under Snakemake's Python and checks that this Snakemake is still alive.
shell.executable(str(Path(workflow.basedir) / "scripts" / "job-shell"))
# (set here for the jobs, not read: no `envvars:` directive)
os.environ.update(COMMSCHED_JOB_PYTHON=sys.executable, COMMSCHED_JOB_PARENT=str(os.getpid()))

# Final outputs of every area; rule files extend it, rule `all` requests it.
ALL_TARGETS = []
# Metrics tables that the claims table reads; rule files extend it.
METRICS_TABLES = []
# Software environment of every rule (`--use-conda` builds it; same pins as the .venv).
CONDA_ENV = "../../environment.yml"

# `snakemake --report report.html` after any subset of targets: rule `all` then asks only
# for the outputs made so far, so every file marked for the report exists.
REPORTING = any(a == "--report" or a.startswith("--report=") for a in sys.argv)


# The report's landing page lists the claims table (workflow/report/workflow.rst renders
# config["_report_claims"]): results/claims.csv, or after a partial run the claims judged
# now against the metrics tables made so far.
if REPORTING:
    from commsched.explore import paper_vs_ours

    _claims = paper_vs_ours(["*"], "results/claims.csv")
    config["_report_claims"] = {
        "source": _claims.attrs["source"],
        "rows": [{k: ("–" if v is None or v != v else str(v)) for k, v in r.items()}
                 for r in _claims.to_dict("records")],
    }
