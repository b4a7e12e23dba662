"""Live all-reduce scheduling (issue 10): PACE and its baselines in PyTorch DDP training.

pace_live_run brings up the emulated cluster (network namespaces, tbf-shaped links, no
servers), runs every policy in n_workers gloo workers (commsched.enforce.ddp), tears
everything down, and puts the simulator's prediction from the same trace and plan beside
each measurement; pace_live_figure draws measured vs simulated step times and the link
utilisation timelines. The run takes every core (threads: workflow.cores) so nothing runs
beside it. Without root or namespace support (or with pace_live.enabled false) the tables
say "skipped: <reason>", the metrics table stays empty and the pace-live claims stay pending.
"""

import json

PACE_LIVE = config["pace_live"]
PACE_LIVE_CONFIG_JSON = json.dumps(PACE_LIVE, sort_keys=True)
PACE_LIVE_TABLES = {
    name: f"results/tables/pace_live_{name}.csv"
    for name in ["steps", "allreduces", "link", "summary"]
}
PACE_LIVE_METRICS = "results/metrics/pace_live.csv"
PACE_LIVE_FIGURE_NAMES = ["steptime", "utilisation"]
PACE_LIVE_FIGURES = expand(
    "results/figures/pace_live_{name}.{ext}", name=PACE_LIVE_FIGURE_NAMES, ext=["pdf", "png"]
)
PACE_LIVE_TRACES = [
    f"{PACE_LIVE['trace_dir']}/{m['trace']}.json.gz" for m in PACE_LIVE["models"]
]

ALL_TARGETS.extend(PACE_LIVE_FIGURES)
METRICS_TABLES.append(PACE_LIVE_METRICS)


rule pace_live:
    """Target: the live all-reduce experiment's tables, metrics and figures."""
    input:
        PACE_LIVE_FIGURES,
        PACE_LIVE_METRICS,


rule pace_live_run:
    """Run every policy live on the emulated cluster (always torn down) and predict each
    step time with the all-reduce simulator."""
    input:
        traces=PACE_LIVE_TRACES,
    output:
        steps=PACE_LIVE_TABLES["steps"],
        allreduces=PACE_LIVE_TABLES["allreduces"],
        link=PACE_LIVE_TABLES["link"],
        summary=PACE_LIVE_TABLES["summary"],
        metrics=PACE_LIVE_METRICS,
    params:
        cfg=PACE_LIVE_CONFIG_JSON,
        workdir="results/pace_live/run",
    threads: workflow.cores
    log:
        "logs/pace_live/run.log",
    benchmark:
        "results/benchmarks/pace_live_run.tsv"
    conda:
        CONDA_ENV
    shell:
        "python -m commsched.experiments.pace_live --config-json '{params.cfg}' "
        "--workdir {params.workdir} --steps {output.steps} --allreduces {output.allreduces} "
        "--link {output.link} --summary {output.summary} --metrics {output.metrics} "
        "> {log} 2>&1"


rule pace_live_figure:
    """Measured vs simulated step time per policy; link utilisation over time (PACE
    Fig. 10 analog, measured)."""
    input:
        nb="notebooks/pace_live.ipynb",
        summary=PACE_LIVE_TABLES["summary"],
        link=PACE_LIVE_TABLES["link"],
        allreduces=PACE_LIVE_TABLES["allreduces"],
    output:
        nb="results/notebooks/pace_live_{name}.ipynb",
        pdf="results/figures/pace_live_{name}.pdf",
        png=report(
            "results/figures/pace_live_{name}.png",
            caption="../report/pace_live.rst",
            category="PACE live",
        ),
    wildcard_constraints:
        name="|".join(PACE_LIVE_FIGURE_NAMES),
    log:
        "logs/pace_live/figure_{name}.log",
    conda:
        CONDA_ENV
    shell:
        "papermill {input.nb} {output.nb} -p summary {input.summary} -p link {input.link} "
        "-p allreduces {input.allreduces} -p figure {output.pdf} -p kind {wildcards.name} "
        "> {log} 2>&1"
