"""Live enforcement (issue 5): TIC/TAC in a real TensorFlow parameter-server cluster.

live_trace traces each live model at the live batch with the servers' thread settings;
live_run brings up the emulated cluster (or uses live.hosts), measures baseline vs TIC vs
TAC with each configured hook, tears everything down, fits the simulator's overheads from
the traced steps (commsched.sim.overhead) and writes the tables and metrics;
live_figure draws them. Both TensorFlow rules take every core (threads: workflow.cores) so
nothing else runs beside them and their timings stay clean. Without root or namespace
support (or with live.enabled false) live_run writes tables that say "skipped: <reason>",
the metrics table stays empty and the live claims stay pending.
"""

import json

LIVE = config["live"]
LIVE_CONFIG_JSON = json.dumps(LIVE, sort_keys=True)
LIVE_TRACE_DIR = "results/live/traces"

LIVE_BATCH = {
    (m["model"], mode): m["batch"][mode] if isinstance(m["batch"], dict) else m["batch"]
    for m in LIVE["models"]
    for mode in LIVE["modes"]
}
LIVE_TRACES = [
    f"{LIVE_TRACE_DIR}/{m['model']}-{mode}-b{LIVE_BATCH[m['model'], mode]}-s{m['size']}.json"
    for m in (LIVE["models"] if LIVE["enabled"] else [])
    for mode in LIVE["modes"]
]
LIVE_TABLES = {
    name: f"results/tables/live_{name}.csv"
    for name in ["steps", "transfers", "traced", "summary"]
}
LIVE_METRICS = "results/metrics/live.csv"
LIVE_FIGURE_NAMES = ["steptime_cdf", "gain", "prediction", "transfers"]
LIVE_FIGURES = expand(
    "results/figures/live_{name}.{ext}", name=LIVE_FIGURE_NAMES, ext=["pdf", "png"]
)

ALL_TARGETS.extend(LIVE_FIGURES)
METRICS_TABLES.append(LIVE_METRICS)


rule live:
    """Target: the live experiment's tables, metrics and figures."""
    input:
        LIVE_FIGURES,
        LIVE_METRICS,


rule live_trace:
    """Trace a live model at the live batch with one intra-op and one inter-op thread."""
    output:
        graph=f"{LIVE_TRACE_DIR}/{{model}}-{{mode}}-b{{batch}}-s{{size}}.json",
    wildcard_constraints:
        model="[a-z0-9_]+",
        mode="train|infer",
        batch="[0-9]+",
        size="[0-9]+",
    params:
        warmup=LIVE["trace"]["warmup"],
        iters=LIVE["trace"]["iterations"],
        threads=LIVE["threads"],
        seed=LIVE["seed"],
        raw=f"{LIVE_TRACE_DIR}/raw",
    threads: workflow.cores
    log:
        "logs/live/trace_{model}-{mode}-b{batch}-s{size}.log",
    conda:
        CONDA_ENV
    shell:
        "commsched trace --model {wildcards.model} --mode {wildcards.mode} "
        "--batch {wildcards.batch} --size {wildcards.size} --warmup {params.warmup} "
        "--iters {params.iters} --intra-threads {params.threads} "
        "--inter-threads {params.threads} --seed {params.seed} --out {output.graph} "
        "--raw-out {params.raw} > {log} 2>&1"


rule live_run:
    """Run baseline, TIC and TAC with each hook on the emulated (or configured) cluster and
    put the simulator's prediction beside each measurement; always tears down."""
    input:
        traces=LIVE_TRACES,
    output:
        steps=LIVE_TABLES["steps"],
        transfers=LIVE_TABLES["transfers"],
        traced=LIVE_TABLES["traced"],
        summary=LIVE_TABLES["summary"],
        metrics=LIVE_METRICS,
    params:
        cfg=LIVE_CONFIG_JSON,
        workdir="results/live/run",
    threads: workflow.cores
    log:
        "logs/live/run.log",
    benchmark:
        "results/benchmarks/live_run.tsv"
    conda:
        CONDA_ENV
    shell:
        "python -m commsched.experiments.live --config-json '{params.cfg}' "
        "--traces {input.traces} --workdir {params.workdir} "
        "--steps {output.steps} --transfers {output.transfers} --traced {output.traced} "
        "--summary {output.summary} --metrics {output.metrics} > {log} 2>&1"


rule live_figure:
    """Step-time CDF, throughput gain (measured and predicted), prediction vs measurement,
    and the transfer timeline of one traced step, from the live tables."""
    input:
        nb="notebooks/live.ipynb",
        summary=LIVE_TABLES["summary"],
        steps=LIVE_TABLES["steps"],
        transfers=LIVE_TABLES["transfers"],
    output:
        nb="results/notebooks/live_{name}.ipynb",
        pdf="results/figures/live_{name}.pdf",
        png=report(
            "results/figures/live_{name}.png",
            caption="../report/live.rst",
            category="Live enforcement",
        ),
    wildcard_constraints:
        name="|".join(LIVE_FIGURE_NAMES),
    log:
        "logs/live/figure_{name}.log",
    conda:
        CONDA_ENV
    shell:
        "papermill {input.nb} {output.nb} -p summary {input.summary} -p steps {input.steps} "
        "-p transfers {input.transfers} -p figure {output.pdf} -p kind {wildcards.name} "
        "> {log} 2>&1"
