"""PACE Sec. VI in simulation: every all-reduce policy on traced models (Figs. 2, 8-10)."""

import json

PACE_SIM = config["pace_sim"]
# The whole section goes to the driver; a changed setting re-runs the tables.
PACE_SIM_CONFIG_JSON = json.dumps(PACE_SIM, sort_keys=True)
PACE_SIM_TABLE = "results/tables/pace_sim_{experiment}.csv"
PACE_SIM_FIG2 = "results/tables/pace_sim_fig2.csv"
PACE_SIM_METRICS = "results/metrics/pace_sim.csv"
PACE_SIM_TRACES = sorted({m["trace"] for m in PACE_SIM["models"]})
PACE_SIM_FIGURES = expand(
    "results/figures/pace_sim_{kind}.{ext}",
    kind=["workers", "bandwidth", "scale", "usage"],
    ext=["pdf", "png"],
)

ALL_TARGETS.extend(PACE_SIM_FIGURES)
METRICS_TABLES.append(PACE_SIM_METRICS)


rule pace_sim:
    """Target: every PACE Sec. VI figure (simulated) and its metrics."""
    input:
        PACE_SIM_FIGURES,
        PACE_SIM_METRICS,


rule pace_sim_fig2:
    """Fig. 2: FIFO vs reordering vs preemption (and PACE's own plan) on the Sec. II-C
    instance."""
    output:
        table=PACE_SIM_FIG2,
    log:
        "logs/pace_sim/fig2.log",
    conda:
        CONDA_ENV
    shell:
        "python -m commsched.experiments.pace_sim fig2 --table {output.table} > {log} 2>&1"


rule pace_sim_run:
    """Simulate one experiment (workers: Fig. 8, bandwidth: Fig. 9, usage: Fig. 10, scale:
    the compute-scale sweep) for every model and policy of the config."""
    input:
        traces=expand(f"{TRACE_DIR}/{{name}}.json.gz", name=PACE_SIM_TRACES),
    output:
        table=PACE_SIM_TABLE,
    params:
        cfg=PACE_SIM_CONFIG_JSON,
    log:
        "logs/pace_sim/{experiment}.log",
    wildcard_constraints:
        experiment="workers|bandwidth|usage|scale",
    conda:
        CONDA_ENV
    shell:
        "python -m commsched.experiments.pace_sim {wildcards.experiment} "
        "--config-json '{params.cfg}' --traces {input.traces} "
        "--table {output.table} > {log} 2>&1"


rule pace_sim_metrics:
    """The PACE headline numbers (gains over each baseline, stable bandwidth, valleys)."""
    input:
        fig2=PACE_SIM_FIG2,
        workers=expand(PACE_SIM_TABLE, experiment="workers"),
        bandwidth=expand(PACE_SIM_TABLE, experiment="bandwidth"),
        usage=expand(PACE_SIM_TABLE, experiment="usage"),
        scale=expand(PACE_SIM_TABLE, experiment="scale"),
    output:
        metrics=PACE_SIM_METRICS,
    log:
        "logs/pace_sim/metrics.log",
    conda:
        CONDA_ENV
    shell:
        "python -m commsched.experiments.pace_sim metrics --tables fig2={input.fig2} "
        "workers={input.workers} bandwidth={input.bandwidth} usage={input.usage} "
        "scale={input.scale} --metrics {output.metrics} > {log} 2>&1"


rule pace_sim_speed_figure:
    """Figs. 8 and 9 and the compute-scale sweep: training speed of every policy."""
    input:
        nb="notebooks/pace_speed.ipynb",
        table=PACE_SIM_TABLE,
    output:
        nb="results/notebooks/pace_sim_{experiment}.ipynb",
        pdf="results/figures/pace_sim_{experiment}.pdf",
        png=report(
            "results/figures/pace_sim_{experiment}.png",
            caption="../report/pace_speed.rst",
            category="PACE Sec. VI",
        ),
    log:
        "logs/pace_sim/figure_{experiment}.log",
    wildcard_constraints:
        experiment="workers|bandwidth|scale",
    conda:
        CONDA_ENV
    shell:
        "papermill {input.nb} {output.nb} -p table {input.table} -p figure {output.pdf} "
        "-p kind {wildcards.experiment} > {log} 2>&1"


rule pace_sim_usage_figure:
    """Fig. 10: a worker's outbound traffic in 5 ms bins, PACE vs Horovod."""
    input:
        nb="notebooks/pace_usage.ipynb",
        table=expand(PACE_SIM_TABLE, experiment="usage"),
    output:
        nb="results/notebooks/pace_sim_usage.ipynb",
        pdf="results/figures/pace_sim_usage.pdf",
        png=report(
            "results/figures/pace_sim_usage.png",
            caption="../report/pace_usage.rst",
            category="PACE Sec. VI",
        ),
    log:
        "logs/pace_sim/figure_usage.log",
    conda:
        CONDA_ENV
    shell:
        "papermill {input.nb} {output.nb} -p table {input.table} -p figure {output.pdf} "
        "-p kind usage > {log} 2>&1"
