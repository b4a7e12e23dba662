"""TicTac Sec. 6 in simulation, both versions' protocols: SysML Figs. 7, 9-13 and the
Sec. 6.1 ratio sweep; arXiv Figs. 7-10 (1 PS, 1 and 4 workers)."""

import json

TICTAC = config["tictac"]
# The whole section goes to the driver; a changed setting re-runs the tables.
TICTAC_CONFIG_JSON = json.dumps(TICTAC, sort_keys=True)
TICTAC_SWEEPS = ["workers", "servers", "batch", "ratio", "models", "arxiv"]
TICTAC_TABLE = "results/tables/tictac_{figure}.csv"
TICTAC_STEPTIME = "results/tables/tictac_steptime.csv"
TICTAC_METRICS = "results/metrics/tictac.csv"
TICTAC_FIGURE_NAMES = [
    "workers", "servers", "batch", "ratio", "efficiency", "tic_vs_tac", "arxiv", "steptime"
]
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
    """Simulate one sweep for every traced model: random baseline, TIC and TAC orders
    (SysML workers: Fig. 7, servers: Fig. 9, batch: Fig. 10, ratio: Sec. 6.1, models: Figs.
    11 and 13 with the fixed-random control; arxiv: arXiv Figs. 9-10)."""
    input:
        traces=expand(f"{TRACE_DIR}/{{name}}.json.gz", name=TICTAC["traces"]),
    output:
        table=TICTAC_TABLE,
    params:
        cfg=TICTAC_CONFIG_JSON,
    log:
        "logs/tictac/{figure}.log",
    wildcard_constraints:
        figure="workers|servers|batch|ratio|models|arxiv",
    conda:
        CONDA_ENV
    shell:
        "python -m commsched.experiments.tictac {wildcards.figure} --config-json '{params.cfg}' "
        "--traces {input.traces} --table {output.table} > {log} 2>&1"


rule tictac_steptime:
    """SysML Fig. 12 / arXiv Figs. 7-8: per-iteration scheduling efficiency and step time
    of Inception v2 (inference and training), baseline, TIC and TAC."""
    input:
        traces=expand(f"{TRACE_DIR}/{{name}}.json.gz", name=TICTAC["steptime"]["traces"]),
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
        "--traces {input.traces} --table {output.table} > {log} 2>&1"


rule tictac_metrics:
    """The TicTac headline numbers (max gains, straggler reduction, R^2, ...) for the claims."""
    input:
        workers=expand(TICTAC_TABLE, figure="workers"),
        servers=expand(TICTAC_TABLE, figure="servers"),
        batch=expand(TICTAC_TABLE, figure="batch"),
        ratio=expand(TICTAC_TABLE, figure="ratio"),
        models=expand(TICTAC_TABLE, figure="models"),
        arxiv=expand(TICTAC_TABLE, figure="arxiv"),
        steptime=TICTAC_STEPTIME,
    output:
        metrics=TICTAC_METRICS,
    log:
        "logs/tictac/metrics.log",
    conda:
        CONDA_ENV
    shell:
        "python -m commsched.experiments.tictac metrics --tables workers={input.workers} "
        "servers={input.servers} batch={input.batch} ratio={input.ratio} "
        "models={input.models} arxiv={input.arxiv} steptime={input.steptime} --metrics {output.metrics} > {log} 2>&1"


rule tictac_scaling_figure:
    """SysML Figs. 7, 9, 10 and the Sec. 6.1 ratio sweep: throughput gain of TIC and TAC
    over the random order vs workers, servers, batch factor or comm/compute ratio."""
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
        figure="workers|servers|batch|ratio",
    conda:
        CONDA_ENV
    shell:
        "papermill {input.nb} {output.nb} -p table {input.table} -p figure {output.pdf} "
        "-p kind {wildcards.figure} > {log} 2>&1"


rule tictac_models_figure:
    """SysML Fig. 11 (efficiency: scheduling efficiency E and straggler effect per model),
    Fig. 13 (tic_vs_tac: gain of TIC vs TAC per model) and arXiv Fig. 9 (arxiv: gains of
    TIO, TAO and the theoretical best and worst, straggler effect)."""
    input:
        nb="notebooks/tictac_models.ipynb",
        table=lambda w: TICTAC_TABLE.format(figure="arxiv" if w.name == "arxiv" else "models"),
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
        name="efficiency|tic_vs_tac|arxiv",
    conda:
        CONDA_ENV
    shell:
        "papermill {input.nb} {output.nb} -p table {input.table} -p figure {output.pdf} "
        "-p kind {wildcards.name} > {log} 2>&1"


rule tictac_steptime_figure:
    """SysML Fig. 12 / arXiv Figs. 7-8: scheduling efficiency vs normalized step time (with
    R^2) and the step-time CDF with its 95th percentiles, per mode."""
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
