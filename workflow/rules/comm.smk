"""Communication model and views: all-reduce measurement and fit (PACE Fig. 3 analog),
gradient tensor sizes (PACE Fig. 4 analog), parameter-server and all-reduce views of the
committed traces (TicTac Sec. 2.3, PACE Sec. IV-A)."""


from snakemake.exceptions import WorkflowError

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
        "python -m commsched.experiments.allreduce_bench measure --workers {params.workers} "
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
        "python -m commsched.experiments.allreduce_fit --measurement {input.measurement} "
        "--summary {output.summary} --fit {output.fit} --metrics {output.metrics} "
        "{params.ols} > {log} 2>&1"


rule comm_allreduce_figure:
    """Plot all-reduce time vs size, log-log, with the fitted line (PACE Fig. 3 analog)."""
    input:
        nb="notebooks/allreduce_fit.ipynb",
        summary=COMM_SUMMARY,
        fit=COMM_FIT,
    output:
        nb="results/notebooks/allreduce_fit.ipynb",
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
        "python -m commsched.experiments.grad_sizes --traces {input.traces} "
        "--table {output.table} --metrics {output.metrics} > {log} 2>&1"


rule comm_grad_sizes_figure:
    """Plot the CDF of gradient tensor sizes per model (PACE Fig. 4 analog)."""
    input:
        nb="notebooks/grad_sizes.ipynb",
        table=COMM_GRAD_TABLE,
    output:
        nb="results/notebooks/grad_sizes.ipynb",
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
        "python -m commsched.experiments.view_summary --views {input.views} "
        "--table {output.table} > {log} 2>&1"
