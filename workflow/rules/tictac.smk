"""TicTac (SysML 2019; arXiv 2018): toys, brute force, simulated sweeps, live cluster.

One section per experiment; each appends its final outputs to ALL_TARGETS and its
metrics table to METRICS_TABLES (common.smk)."""

import json


# --------------------------------------------------------------------------------------
# TicTac Sec. 6 toys: Par-N and Seq-N under random recv orders vs the best order.
# --------------------------------------------------------------------------------------

TOY_GRAPHS = expand(
    "results/graphs/toys/{family}{n}.json",
    family=["par", "seq"],
    n=config["toys"]["sizes"],
)
TOYS_TABLE = "results/tables/toys_makespans.csv"
TOYS_METRICS = "results/metrics/toys.csv"
TOYS_FIGURES = multiext("results/figures/toys_makespan", ".pdf", ".png")

ALL_TARGETS.extend(TOYS_FIGURES)
METRICS_TABLES.append(TOYS_METRICS)


rule toys:
    """Target: the toys' figure and metrics (TicTac Sec. 6 claims)."""
    input:
        TOYS_FIGURES,
        TOYS_METRICS,


rule toys_graph:
    """Generate TicTac's Par-N or Seq-N toy op graph (unit recv and compute times)."""
    output:
        graph="results/graphs/toys/{family}{n}.json",
    log:
        "logs/toys/graph_{family}{n}.log",
    conda:
        CONDA_ENV
    wildcard_constraints:
        family="par|seq",
        n=r"\d+",
    shell:
        "commsched generate {wildcards.family} --n {wildcards.n} -o {output.graph} > {log} 2>&1"


rule toys_simulate:
    """Simulate every toy under seeded random recv orders, the best and the reversed order."""
    input:
        graphs=TOY_GRAPHS,
    output:
        table=TOYS_TABLE,
        metrics=TOYS_METRICS,
    params:
        random_orders=config["toys"]["random_orders"],
        seed=config["toys"]["seed"],
    log:
        "logs/toys/simulate.log",
    conda:
        CONDA_ENV
    shell:
        "python -m commsched.tictac.experiments.toys --graphs {input.graphs} "
        "--random-orders {params.random_orders} --seed {params.seed} "
        "--table {output.table} --metrics {output.metrics} > {log} 2>&1"


rule toys_figure:
    """Plot the makespan distribution of Par-N vs Seq-N, normalised by the best order."""
    input:
        nb="notebooks/toys.ipynb",
        table=TOYS_TABLE,
    output:
        nb=report("results/notebooks/toys.ipynb", category="Notebooks"),
        pdf=TOYS_FIGURES[0],
        png=report(TOYS_FIGURES[1], caption="../report/toys.rst", category="TicTac toys"),
    log:
        "logs/toys/figure.log",
    conda:
        CONDA_ENV
    shell:
        "papermill {input.nb} {output.nb} -p table {input.table} "
        "-p figure {output.pdf} > {log} 2>&1"


# --------------------------------------------------------------------------------------
# TicTac TIC and TAC against the best recv order: brute force over all orders of small graphs.
# --------------------------------------------------------------------------------------

TICTAC_BF_TABLE = "results/tables/tictac_bruteforce.csv"
TICTAC_BF_METRICS = "results/metrics/tictac_bruteforce.csv"

ALL_TARGETS.extend([TICTAC_BF_TABLE, TICTAC_BF_METRICS])
METRICS_TABLES.append(TICTAC_BF_METRICS)


rule tictac_bruteforce:
    """Target: the brute-force table and its metrics (how far TIC and TAC are from optimal)."""
    input:
        TICTAC_BF_TABLE,
        TICTAC_BF_METRICS,


rule tictac_bruteforce_run:
    """Simulate every recv order of random DAGs and two-stage instances, and TIC and TAC."""
    output:
        table=TICTAC_BF_TABLE,
        metrics=TICTAC_BF_METRICS,
    params:
        sizes=config["tictac_bruteforce"]["sizes"],
        instances=config["tictac_bruteforce"]["instances"],
        channels=config["tictac_bruteforce"]["channels"],
        two_stage=config["tictac_bruteforce"]["two_stage_instances"],
        seed=config["tictac_bruteforce"]["seed"],
    log:
        "logs/tictac/bruteforce.log",
    benchmark:
        "logs/tictac/bruteforce.benchmark.tsv"
    conda:
        CONDA_ENV
    shell:
        "python -m commsched.tictac.experiments.bruteforce --sizes {params.sizes} "
        "--instances {params.instances} --channels {params.channels} "
        "--two-stage-instances {params.two_stage} --seed {params.seed} "
        "--table {output.table} --metrics {output.metrics} > {log} 2>&1"


# --------------------------------------------------------------------------------------
# TicTac Sec. 6 in simulation, both versions' protocols: SysML Figs. 7, 9-13 and the
# Sec. 6.1 ratio sweep; arXiv Figs. 7-10 (1 PS, 1 and 4 workers).
# --------------------------------------------------------------------------------------

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
        "python -m commsched.tictac.experiments.sweeps {wildcards.figure} --config-json '{params.cfg}' "
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
        "python -m commsched.tictac.experiments.sweeps steptime --config-json '{params.cfg}' "
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
        "python -m commsched.tictac.experiments.sweeps metrics --tables workers={input.workers} "
        "servers={input.servers} batch={input.batch} ratio={input.ratio} "
        "models={input.models} arxiv={input.arxiv} steptime={input.steptime} --metrics {output.metrics} > {log} 2>&1"


rule tictac_scaling_figure:
    """SysML Figs. 7, 9, 10 and the Sec. 6.1 ratio sweep: throughput gain of TIC and TAC
    over the random order vs workers, servers, batch factor or comm/compute ratio."""
    input:
        nb="notebooks/tictac_scaling.ipynb",
        table=TICTAC_TABLE,
    output:
        nb=report("results/notebooks/tictac_{figure}.ipynb", category="Notebooks"),
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
        nb=report("results/notebooks/tictac_{name}.ipynb", category="Notebooks"),
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
        nb=report("results/notebooks/tictac_steptime.ipynb", category="Notebooks"),
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


# --------------------------------------------------------------------------------------
# Live enforcement (issue 5): TIC/TAC in a real TensorFlow parameter-server cluster.
#
# live_trace traces each live model at the live batch with the servers' thread settings;
# live_run brings up the emulated cluster (or uses live.hosts), measures baseline vs TIC vs
# TAC with each configured hook, tears everything down, fits the simulator's overheads from
# the traced steps (commsched.cost.overhead) and writes the tables and metrics (the sender
# configs' captured steps: the order the PS's gRPC sent the transfers, live_grpc_order.csv);
# live_figure draws them. Both TensorFlow rules take every core (threads: workflow.cores) so
# nothing else runs beside them and their timings stay clean. Without root or namespace
# support (or with live.enabled false) live_run writes tables that say "skipped: <reason>",
# the metrics table stays empty and the live claims stay pending.
# --------------------------------------------------------------------------------------

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
    for name in ["steps", "transfers", "traced", "summary", "grpc_order"]
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
        grpc_order=LIVE_TABLES["grpc_order"],
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
        "python -m commsched.tictac.experiments.live --config-json '{params.cfg}' "
        "--traces {input.traces} --workdir {params.workdir} "
        "--steps {output.steps} --transfers {output.transfers} --traced {output.traced} "
        "--summary {output.summary} --grpc-order {output.grpc_order} "
        "--metrics {output.metrics} > {log} 2>&1"


rule live_figure:
    """Step-time CDF, throughput gain (measured and predicted), prediction vs measurement,
    and the transfer timeline of one traced step, from the live tables."""
    input:
        nb="notebooks/live.ipynb",
        summary=LIVE_TABLES["summary"],
        steps=LIVE_TABLES["steps"],
        transfers=LIVE_TABLES["transfers"],
    output:
        nb=report("results/notebooks/live_{name}.ipynb", category="Notebooks"),
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
