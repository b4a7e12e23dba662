"""PACE (INFOCOM 2020): communication model and views, model and solvers, simulation, live DDP.

One section per experiment; each appends its final outputs to ALL_TARGETS and its
metrics table to METRICS_TABLES (common.smk)."""

from snakemake.exceptions import WorkflowError
import json


# --------------------------------------------------------------------------------------
# Communication model and views: all-reduce measurement and fit (PACE Fig. 3 analog),
# gradient tensor sizes (PACE Fig. 4 analog), parameter-server and all-reduce views of the
# committed traces (TicTac Sec. 2.3, PACE Sec. IV-A).
# --------------------------------------------------------------------------------------

COMM = config["comm"]

# The committed measurement, or a fresh one when comm.remeasure is true.
COMM_MEASURED = "results/tables/allreduce_measured.csv"
COMM_MEASUREMENT = COMM_MEASURED if COMM["remeasure"] else COMM["measurement"]
COMM_SUMMARY = "results/tables/allreduce_summary.csv"
COMM_FIT = "results/tables/allreduce_fit.csv"
COMM_FIT_METRICS = "results/metrics/comm_allreduce.csv"
COMM_FIT_FIGURES = multiext("results/figures/allreduce_fit", ".pdf", ".png")

# Every configured trace (trace.traces, read from TRACE_DIR); train ones for Fig. 4.
COMM_TRACES = sorted(TRACE["traces"])
COMM_TRAIN = [t for t in COMM_TRACES if "-train-" in t]
if not COMM_TRAIN:
    raise WorkflowError("comm: trace.traces names no training trace (needed for Fig. 4)")
COMM_GRAD_TABLE = "results/tables/grad_sizes.csv"
COMM_GRAD_METRICS = "results/metrics/comm_grad_sizes.csv"
COMM_GRAD_FIGURES = multiext("results/figures/grad_sizes", ".pdf", ".png")
COMM_VIEWS = expand("results/views/{trace}-ps.json", trace=COMM_TRACES) + expand(
    "results/views/{trace}-allreduce.json", trace=COMM_TRAIN
)
COMM_VIEW_TABLE = "results/tables/view_summary.csv"

ALL_TARGETS.extend([*COMM_FIT_FIGURES, *COMM_GRAD_FIGURES, COMM_VIEW_TABLE])
METRICS_TABLES.extend([COMM_FIT_METRICS, COMM_GRAD_METRICS])


rule comm:
    """Target: every output of the communication area."""
    input:
        COMM_FIT_FIGURES,
        COMM_FIT_METRICS,
        COMM_GRAD_FIGURES,
        COMM_GRAD_METRICS,
        COMM_VIEW_TABLE,


rule comm_allreduce_measure:
    """Measure all-reduce time vs tensor size between local TensorFlow processes."""
    output:
        table=COMM_MEASURED,
    params:
        workers=" ".join(str(w) for w in COMM["measure"]["workers"]),
        min_bytes=COMM["measure"]["min_bytes"],
        max_bytes=COMM["measure"]["max_bytes"],
        points=COMM["measure"]["points"],
        reps=COMM["measure"]["reps"],
        timeout=COMM["measure"]["timeout_s"],
    log:
        "logs/comm/allreduce_measure.log",
    conda:
        CONDA_ENV
    shell:
        "python -m commsched.pace.experiments.allreduce_bench measure --workers {params.workers} "
        "--min-bytes {params.min_bytes} --max-bytes {params.max_bytes} "
        "--points {params.points} --reps {params.reps} --timeout {params.timeout} "
        "-o {output.table} > {log} 2>&1"


rule comm_allreduce_fit:
    """Fit PACE's linear all-reduce model a + b*s to the measurement."""
    input:
        measurement=COMM_MEASUREMENT,
    output:
        summary=COMM_SUMMARY,
        fit=COMM_FIT,
        metrics=COMM_FIT_METRICS,
    params:
        ols="" if COMM["fit_relative"] else "--ols",
    log:
        "logs/comm/allreduce_fit.log",
    conda:
        CONDA_ENV
    shell:
        "python -m commsched.pace.experiments.allreduce_fit --measurement {input.measurement} "
        "--summary {output.summary} --fit {output.fit} --metrics {output.metrics} "
        "{params.ols} > {log} 2>&1"


rule comm_allreduce_figure:
    """Plot all-reduce time vs size, log-log, with the fitted line (PACE Fig. 3 analog)."""
    input:
        nb="notebooks/allreduce_fit.ipynb",
        summary=COMM_SUMMARY,
        fit=COMM_FIT,
    output:
        nb=report("results/notebooks/allreduce_fit.ipynb", category="Notebooks"),
        pdf=COMM_FIT_FIGURES[0],
        png=report(COMM_FIT_FIGURES[1], caption="../report/allreduce_fit.rst",
                   category="Communication model"),
    log:
        "logs/comm/allreduce_figure.log",
    conda:
        CONDA_ENV
    shell:
        "papermill {input.nb} {output.nb} -p summary {input.summary} -p fit {input.fit} "
        "-p figure {output.pdf} > {log} 2>&1"


rule comm_grad_sizes:
    """List the gradient tensors (and fused all-reduces) of every training trace."""
    input:
        traces=expand(f"{TRACE_DIR}/{{trace}}.json.gz", trace=COMM_TRAIN),
    output:
        table=COMM_GRAD_TABLE,
        metrics=COMM_GRAD_METRICS,
    log:
        "logs/comm/grad_sizes.log",
    conda:
        CONDA_ENV
    shell:
        "python -m commsched.pace.experiments.grad_sizes --traces {input.traces} "
        "--table {output.table} --metrics {output.metrics} > {log} 2>&1"


rule comm_grad_sizes_figure:
    """Plot the CDF of gradient tensor sizes per model (PACE Fig. 4 analog)."""
    input:
        nb="notebooks/grad_sizes.ipynb",
        table=COMM_GRAD_TABLE,
    output:
        nb=report("results/notebooks/grad_sizes.ipynb", category="Notebooks"),
        pdf=COMM_GRAD_FIGURES[0],
        png=report(COMM_GRAD_FIGURES[1], caption="../report/grad_sizes.rst",
                   category="Communication model"),
    log:
        "logs/comm/grad_sizes_figure.log",
    conda:
        CONDA_ENV
    shell:
        "papermill {input.nb} {output.nb} -p table {input.table} -p figure {output.pdf} "
        "> {log} 2>&1"


rule comm_view_ps:
    """Derive the parameter-server worker partition of a trace (TicTac Sec. 2.3)."""
    input:
        trace=f"{TRACE_DIR}/{{trace}}.json.gz",
    output:
        view="results/views/{trace}-ps.json",
    params:
        servers=COMM["views"]["servers"],
        sharding=COMM["views"]["sharding"],
        link=COMM["views"]["link"],
    log:
        "logs/comm/view_ps_{trace}.log",
    conda:
        CONDA_ENV
    shell:
        "commsched view ps {input.trace} -o {output.view} --servers {params.servers} "
        "--sharding {params.sharding} --link {params.link} > {log} 2>&1"


rule comm_view_allreduce:
    """Derive the all-reduce DAG of a training trace (PACE Sec. IV-A), ring model."""
    input:
        trace=f"{TRACE_DIR}/{{trace}}.json.gz",
    output:
        view="results/views/{trace}-allreduce.json",
    params:
        workers=COMM["views"]["ring_workers"],
        link=COMM["views"]["link"],
    log:
        "logs/comm/view_allreduce_{trace}.log",
    conda:
        CONDA_ENV
    shell:
        "commsched view allreduce {input.trace} -o {output.view} "
        "--workers {params.workers} --link {params.link} > {log} 2>&1"


rule comm_view_summary:
    """Simulate every view (validated schedules): ops, traffic, makespan, overlap."""
    input:
        views=COMM_VIEWS,
    output:
        table=COMM_VIEW_TABLE,
    log:
        "logs/comm/view_summary.log",
    conda:
        CONDA_ENV
    shell:
        "python -m commsched.views.summary --views {input.views} "
        "--table {output.table} > {log} 2>&1"


# --------------------------------------------------------------------------------------
# PACE's model and optimal schedule (issue 9): Table II analog and tensor sizes of the
# paper's four models (config pace.traces), agreement of the three schedulers (exact, sound
# LP, the paper's LP (14)) on every traced training iteration and on random problems, and
# one PACE plan (balanced fusion + optimal preemptive schedule) per pace trace. Target
# `pace_model` (about 30 s on 2 cores).
# --------------------------------------------------------------------------------------

PACE = config["pace"]
PACE_CONFIG_JSON = json.dumps(PACE, sort_keys=True)
PACE_TRACES = expand(f"{TRACE_DIR}/{{name}}.json.gz", name=PACE["traces"])
# The solvers are compared on every traced training iteration, not only the paper's models.
PACE_SOLVER_TRACES = expand(f"{TRACE_DIR}/{{name}}.json.gz",
                            name=[t for t in config["trace"]["traces"] if "-train-" in t])
# sockeye's Seq2Seq and Transformer training symbols (MXNet JSON, scripts/sockeye_symbols.py):
# Table II's counts on the paper's own graphs, beside our traced Keras models.
PACE_SYMBOLS = ["data/models/sockeye/seq2seq_sockeye.json.gz",
                "data/models/sockeye/transformer_sockeye.json.gz"]
PACE_TABLE2 = "results/tables/pace_table2.csv"
PACE_TABLE2_METRICS = "results/metrics/pace_model.csv"
PACE_SOLVERS = "results/tables/pace_solvers.csv"
PACE_SOLVERS_METRICS = "results/metrics/pace_solvers.csv"
PACE_PLANS = expand("results/pace/plans/{name}.json", name=PACE["traces"])

ALL_TARGETS.extend([PACE_TABLE2, PACE_SOLVERS, *PACE_PLANS])
METRICS_TABLES.extend([PACE_TABLE2_METRICS, PACE_SOLVERS_METRICS])


rule pace_model:
    """Target: PACE's Table II analog, solver agreement and plans."""
    input:
        PACE_TABLE2,
        PACE_TABLE2_METRICS,
        PACE_SOLVERS,
        PACE_SOLVERS_METRICS,
        PACE_PLANS,


rule pace_table2:
    """Table II analog (parameters, all-reduce and compute ops) and gradient tensor sizes,
    and Table II's counts on sockeye's MXNet symbols."""
    input:
        traces=PACE_TRACES,
        symbols=PACE_SYMBOLS,
    output:
        table=PACE_TABLE2,
        metrics=PACE_TABLE2_METRICS,
    log:
        "logs/pace/table2.log",
    conda:
        CONDA_ENV
    shell:
        "python -m commsched.pace.experiments.model table --traces {input.traces} "
        "--symbols {input.symbols} --table {output.table} --metrics {output.metrics} "
        "> {log} 2>&1"


rule pace_solvers:
    """Exact solver vs sound LP vs LP (14) on every trace (unfused and fused) and on random
    problems small enough for LP (14)."""
    input:
        traces=PACE_SOLVER_TRACES,
    output:
        table=PACE_SOLVERS,
        metrics=PACE_SOLVERS_METRICS,
    params:
        cfg=PACE_CONFIG_JSON,
    log:
        "logs/pace/solvers.log",
    conda:
        CONDA_ENV
    shell:
        "python -m commsched.pace.experiments.model solvers --config-json '{params.cfg}' "
        "--traces {input.traces} --table {output.table} --metrics {output.metrics} "
        "> {log} 2>&1"


rule pace_plan:
    """PACE's all-reduce plan of one trace (commsched pace plan)."""
    input:
        trace=f"{TRACE_DIR}/{{name}}.json.gz",
    output:
        plan="results/pace/plans/{name}.json",
    params:
        workers=PACE["workers"],
        bandwidth=PACE["bandwidth_gbps"],
        slot=PACE["slot_ms"],
        cost=PACE["cost"],
        latency=PACE["latency_us"],
        scale=PACE["compute_scale"],
    log:
        "logs/pace/plan_{name}.log",
    conda:
        CONDA_ENV
    shell:
        "commsched pace plan {input.trace} --workers {params.workers} "
        "--bandwidth {params.bandwidth} --slot {params.slot} --cost {params.cost} "
        "--latency-us {params.latency} --compute-scale {params.scale} -o {output.plan} "
        "> {log} 2>&1"


# --------------------------------------------------------------------------------------
# PACE Sec. VI in simulation: every all-reduce policy on traced models (Figs. 2, 8-10).
# --------------------------------------------------------------------------------------

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
        "python -m commsched.pace.experiments.sim fig2 --table {output.table} > {log} 2>&1"


rule pace_sim_run:
    """Simulate one experiment (workers: Fig. 8, bandwidth: Fig. 9, usage: Fig. 10, scale:
    the compute-scale sweep) for every model and policy of the config."""
    input:
        traces=expand(f"{TRACE_DIR}/{{name}}.json.gz", name=PACE_SIM_TRACES),
        calibration=PACE_SIM["calibration"],
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
        "python -m commsched.pace.experiments.sim {wildcards.experiment} "
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
        "python -m commsched.pace.experiments.sim metrics --tables fig2={input.fig2} "
        "workers={input.workers} bandwidth={input.bandwidth} usage={input.usage} "
        "scale={input.scale} --metrics {output.metrics} > {log} 2>&1"


rule pace_sim_speed_figure:
    """Figs. 8 and 9 and the compute-scale sweep: training speed of every policy."""
    input:
        nb="notebooks/pace_speed.ipynb",
        table=PACE_SIM_TABLE,
    output:
        nb=report("results/notebooks/pace_sim_{experiment}.ipynb", category="Notebooks"),
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
        nb=report("results/notebooks/pace_sim_usage.ipynb", category="Notebooks"),
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


# --------------------------------------------------------------------------------------
# Live all-reduce scheduling (issue 10): PACE and its baselines in PyTorch DDP training.
#
# pace_live_run brings up the emulated cluster (network namespaces, tbf-shaped links, no
# servers), runs every policy in n_workers gloo workers (commsched.pace.live.ddp), tears
# everything down, and puts the simulator's prediction from the same trace and plan beside
# each measurement; pace_live_figure draws measured vs simulated step times and the link
# utilisation timelines. The run takes every core (threads: workflow.cores) so nothing runs
# beside it. Without root or namespace support (or with pace_live.enabled false) the tables
# say "skipped: <reason>", the metrics table stays empty and the pace-live claims stay pending.
# --------------------------------------------------------------------------------------

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
        "python -m commsched.pace.experiments.live --config-json '{params.cfg}' "
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
        nb=report("results/notebooks/pace_live_{name}.ipynb", category="Notebooks"),
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
