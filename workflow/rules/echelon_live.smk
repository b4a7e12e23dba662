"""EchelonFlow live (issue 23): real pipeline, FSDP and data-parallel PyTorch jobs share the
oversubscribed core of an emulated two-rack cluster; every policy (kernel sharing, per-flow
fair, Varys, the EchelonFlow readings) is enforced there with htb classes and u32 filters by
a controller that calls the simulator's schedulers; the coupled compute + flow simulator
predicts each job's completion time.

echelon_live_run brings up the cluster (network namespaces cs-ecl*, tbf host links, htb core),
runs every policy `repeats` times, tears everything down and writes the tables;
echelon_live_figure draws them. The run takes every core (threads: workflow.cores) so nothing
runs beside it. Without root, without htb/u32 (or with echelon_live.enabled false) the tables
say "skipped: <reason>", the metrics table stays empty and the echelon-live claims stay pending.
"""

import json

ECHELON_LIVE = config["echelon_live"]
ECHELON_LIVE_CONFIG_JSON = json.dumps(ECHELON_LIVE, sort_keys=True)
ECHELON_LIVE_TABLES = {
    name: f"results/tables/echelon_live_{name}.csv"
    for name in ["jobs", "iterations", "flows", "updates", "summary"]
}
ECHELON_LIVE_METRICS = "results/metrics/echelon_live.csv"
ECHELON_LIVE_FIGURE_NAMES = ["jct", "prediction"]
ECHELON_LIVE_FIGURES = expand(
    "results/figures/echelon_live_{name}.{ext}", name=ECHELON_LIVE_FIGURE_NAMES, ext=["pdf", "png"]
)

ALL_TARGETS.extend(ECHELON_LIVE_FIGURES)
METRICS_TABLES.append(ECHELON_LIVE_METRICS)


rule echelon_live:
    """Target: the EchelonFlow live experiment's tables, metrics and figures."""
    input:
        ECHELON_LIVE_FIGURES,
        ECHELON_LIVE_METRICS,


rule echelon_live_run:
    """Run every policy live on the emulated cluster (always torn down) and predict every
    job's completion time with the coupled compute + flow simulator."""
    output:
        jobs=ECHELON_LIVE_TABLES["jobs"],
        iterations=ECHELON_LIVE_TABLES["iterations"],
        flows=ECHELON_LIVE_TABLES["flows"],
        updates=ECHELON_LIVE_TABLES["updates"],
        summary=ECHELON_LIVE_TABLES["summary"],
        metrics=ECHELON_LIVE_METRICS,
    params:
        cfg=ECHELON_LIVE_CONFIG_JSON,
        workdir="results/echelon_live/run",
    threads: workflow.cores
    log:
        "logs/echelon_live/run.log",
    benchmark:
        "benchmarks/results/echelon_live_run.tsv"
    conda:
        CONDA_ENV
    shell:
        "python -m commsched.echelon.experiments.live --config-json '{params.cfg}' "
        "--workdir {params.workdir} --jobs {output.jobs} --iterations {output.iterations} "
        "--flows {output.flows} --updates {output.updates} --summary {output.summary} "
        "--metrics {output.metrics} > {log} 2>&1"


rule echelon_live_figure:
    """jct: job completion times per policy (live, repeats as points); prediction: the
    simulator's JCT against the measured one, per policy."""
    input:
        nb="notebooks/echelon_live.ipynb",
        summary=ECHELON_LIVE_TABLES["summary"],
        jobs=ECHELON_LIVE_TABLES["jobs"],
    output:
        nb="results/notebooks/echelon_live_{name}.ipynb",
        pdf="results/figures/echelon_live_{name}.pdf",
        png=report(
            "results/figures/echelon_live_{name}.png",
            caption="../report/echelon_live.rst",
            category="EchelonFlow live",
        ),
    wildcard_constraints:
        name="|".join(ECHELON_LIVE_FIGURE_NAMES),
    log:
        "logs/echelon_live/figure_{name}.log",
    conda:
        CONDA_ENV
    shell:
        "papermill {input.nb} {output.nb} -p summary {input.summary} -p jobs {input.jobs} "
        "-p figure {output.pdf} -p kind {wildcards.name} > {log} 2>&1"
