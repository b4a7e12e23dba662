"""Helpers shared by every rule file: config validation and the list of final targets."""

import glob

from snakemake.utils import validate


validate(config, "../../src/commsched/schemas/config.schema.yaml")

# Final outputs of every area; rule files extend it, rule `all` requests it.
ALL_TARGETS = []
# Metrics tables that the claims table reads; rule files extend it.
METRICS_TABLES = []
# Software environment of every rule (`--use-conda` builds it; same pins as the .venv).
CONDA_ENV = "../../environment.yml"
