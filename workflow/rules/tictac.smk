"""TicTac Sec. 6 in simulation: multi-worker parameter-server study (Figs. 7, 9-13)."""

import json

TICTAC = config["tictac"]
# The whole section goes to the driver; a changed setting re-runs the tables.
TICTAC_CONFIG_JSON = json.dumps(TICTAC, sort_keys=True)
TICTAC_SWEEPS = ["workers", "servers", "batch", "models"]
TICTAC_TABLE = "results/tables/tictac_{figure}.csv"
TICTAC_STEPTIME = "results/tables/tictac_steptime.csv"
TICTAC_METRICS = "results/metrics/tictac.csv"
TICTAC_FIGURE_NAMES = ["workers", "servers", "batch", "efficiency", "steptime", "tic_vs_tac"]
TICTAC_FIGURES = expand(
    "results/figures/tictac_{name}.{ext}", name=TICTAC_FIGURE_NAMES, ext=["pdf", "png"]
)

ALL_TARGETS.extend(TICTAC_FIGURES)
METRICS_TABLES.append(TICTAC_METRICS)


rule tictac:
    """Target: every TicTac Sec. 6 figure and its metrics (throughput, straggler, E)."""
    input:
        TICTAC_FIGURES,
        TICTAC_METRICS,


rule tictac_sweep:
    """Simulate one sweep (workers: Fig. 7, servers: Fig. 9, batch: Fig. 10, models: Figs. 11
    and 13) for every traced model: random baseline, TIC and TAC orders."""
    input:
        traces=expand(f"{TRACE_DIR}/{{name}}.json.gz", name=TICTAC["traces"]),
    output:
        table=TICTAC_TABLE,
    params:
        cfg=TICTAC_CONFIG_JSON,
    log:
        "logs/tictac/{figure}.log",
    wildcard_constraints:
        figure="workers|servers|batch|models",
    conda:
        CONDA_ENV
    shell:
        "python -m commsched.experiments.tictac {wildcards.figure} --config-json '{params.cfg}' "
        "--traces {input.traces} --table {output.table} > {log} 2>&1"


rule tictac_steptime:
    """Fig. 12: per-iteration ordering efficiency and step time of one model, baseline vs TAC."""
    input:
        trace=f"{TRACE_DIR}/{TICTAC['steptime']['trace']}.json.gz",
    output:
        table=TICTAC_STEPTIME,
    params:
        cfg=TICTAC_CONFIG_JSON,
    log:
        "logs/tictac/steptime.log",
    conda:
        CONDA_ENV
    shell:
        "python -m commsched.experiments.tictac steptime --config-json '{params.cfg}' "
        "--traces {input.trace} --table {output.table} > {log} 2>&1"


rule tictac_metrics:
    """The TicTac headline numbers (max gains, straggler reduction, R^2, ...) for the claims."""
    input:
        workers=expand(TICTAC_TABLE, figure="workers"),
        servers=expand(TICTAC_TABLE, figure="servers"),
        batch=expand(TICTAC_TABLE, figure="batch"),
        models=expand(TICTAC_TABLE, figure="models"),
        steptime=TICTAC_STEPTIME,
    output:
        metrics=TICTAC_METRICS,
    log:
        "logs/tictac/metrics.log",
    conda:
        CONDA_ENV
    shell:
        "python -m commsched.experiments.tictac metrics --tables workers={input.workers} "
        "servers={input.servers} batch={input.batch} models={input.models} "
        "steptime={input.steptime} --metrics {output.metrics} > {log} 2>&1"


rule tictac_scaling_figure:
    """Figs. 7, 9, 10: throughput gain of TIC and TAC over the random order vs workers,
    servers or batch factor."""
    input:
        nb="notebooks/tictac_scaling.ipynb",
        table=TICTAC_TABLE,
    output:
        nb="results/notebooks/tictac_{figure}.ipynb",
        pdf="results/figures/tictac_{figure}.pdf",
        png=report(
            "results/figures/tictac_{figure}.png",
            caption="../report/tictac_scaling.rst",
            category="TicTac Sec. 6",
        ),
    log:
        "logs/tictac/figure_{figure}.log",
    wildcard_constraints:
        figure="workers|servers|batch",
    conda:
        CONDA_ENV
    shell:
        "papermill {input.nb} {output.nb} -p table {input.table} -p figure {output.pdf} "
        "-p kind {wildcards.figure} > {log} 2>&1"


rule tictac_models_figure:
    """Fig. 11 (efficiency: ordering efficiency E and straggler effect per model) and Fig. 13
    (tic_vs_tac: throughput gain of TIC vs TAC per model)."""
    input:
        nb="notebooks/tictac_models.ipynb",
        table=expand(TICTAC_TABLE, figure="models"),
    output:
        nb="results/notebooks/tictac_{name}.ipynb",
        pdf="results/figures/tictac_{name}.pdf",
        png=report(
            "results/figures/tictac_{name}.png",
            caption="../report/tictac_models.rst",
            category="TicTac Sec. 6",
        ),
    log:
        "logs/tictac/figure_{name}.log",
    wildcard_constraints:
        name="efficiency|tic_vs_tac",
    conda:
        CONDA_ENV
    shell:
        "papermill {input.nb} {output.nb} -p table {input.table} -p figure {output.pdf} "
        "-p kind {wildcards.name} > {log} 2>&1"


rule tictac_steptime_figure:
    """Fig. 12: ordering efficiency vs normalized step time (with R^2) and the step-time CDF
    with its 95th percentiles, baseline vs TAC."""
    input:
        nb="notebooks/tictac_steptime.ipynb",
        table=TICTAC_STEPTIME,
        metrics=TICTAC_METRICS,
    output:
        nb="results/notebooks/tictac_steptime.ipynb",
        pdf="results/figures/tictac_steptime.pdf",
        png=report(
            "results/figures/tictac_steptime.png",
            caption="../report/tictac_steptime.rst",
            category="TicTac Sec. 6",
        ),
    log:
        "logs/tictac/figure_steptime.log",
    conda:
        CONDA_ENV
    shell:
        "papermill {input.nb} {output.nb} -p table {input.table} -p metrics {input.metrics} "
        "-p figure {output.pdf} > {log} 2>&1"
