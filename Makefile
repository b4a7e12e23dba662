# The two commands of the README quick start. Both bootstrap .venv from the pinned lock
# when it is missing or older than the lock (a second run installs nothing).
SHELL := /bin/bash
VENV  := .venv
BIN   := $(VENV)/bin
STAMP := $(VENV)/.commsched-installed
export PATH := $(abspath $(BIN)):$(PATH)

.PHONY: reproduce test bootstrap clean-results record-benchmarks record-reference

bootstrap: $(STAMP)

$(STAMP): requirements.lock pyproject.toml scripts/bootstrap-system.sh
	bash scripts/bootstrap-system.sh
	test -x $(BIN)/python || python3 -m venv $(VENV)
	$(BIN)/pip install --disable-pip-version-check -q -r requirements.lock
	$(BIN)/pip install --disable-pip-version-check -q --no-deps --no-build-isolation -e .
	touch $(STAMP)

# scripts/reproduce.sh: a killed run is simply run again (stale lock removed, incomplete
# outputs redone); the same script takes a SLURM profile (docs/scale-out.md).
reproduce: $(STAMP)
	bash scripts/reproduce.sh --cores all all

test: $(STAMP)
	$(BIN)/python -m pytest
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/mypy src
	$(BIN)/snakemake --lint

clean-results:
	rm -rf results/tables results/metrics results/figures results/notebooks results/claims.md results/claims.csv

# The last run's Snakemake benchmark records (results/benchmarks/*.tsv, ignored) into the
# committed benchmarks/results/; a pipeline run itself never writes tracked files.
record-benchmarks:
	@ls results/benchmarks/*.tsv >/dev/null 2>&1 || { echo "record-benchmarks: no results/benchmarks/*.tsv; run the pipeline first" >&2; exit 2; }
	cp -v results/benchmarks/*.tsv benchmarks/results/

# The last full run's claims table, metrics and PNG figures into the committed reference run
# results/reference/ (`commsched claims compare` compares a run with it); only on request.
record-reference:
	@test -f results/claims.csv || { echo "record-reference: no results/claims.csv; run make reproduce first" >&2; exit 2; }
	rm -rf results/reference.new && mkdir -p results/reference.new/metrics results/reference.new/figures
	cp results/claims.csv results/claims.md results/reference.new/
	cp results/metrics/*.csv results/reference.new/metrics/
	cp results/figures/*.png results/reference.new/figures/
	rm -rf results/reference && mv results/reference.new results/reference
	@echo "record-reference: results/reference/ holds the run of $$(sed -n 's/^# git_revision: "\(.*\)"/\1/p' results/claims.csv)"
