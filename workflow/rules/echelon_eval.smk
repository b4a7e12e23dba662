"""EchelonFlow, the evaluation the paper lacks: a multi-tenant cluster of DP (all-reduce
and PS), GPipe, tensor-parallel and FSDP jobs from our traces on an oversubscribed
two-tier fabric, every configured flow scheduler on the same scenarios."""

import json

ECHELON_EVAL = config["echelon_eval"]
# The whole section goes to the driver; a changed setting re-runs the tables.
ECHELON_EVAL_CONFIG_JSON = json.dumps(ECHELON_EVAL, sort_keys=True)
ECHELON_EVAL_JOBS = "results/tables/echelon_eval_jobs.csv"
ECHELON_EVAL_ITERATIONS = "results/tables/echelon_eval_iterations.csv"
ECHELON_EVAL_METRICS = "results/metrics/echelon_eval.csv"
ECHELON_EVAL_FIGURES = expand(
    "results/figures/echelon_eval_{kind}.{ext}", kind=["iterations", "ratios", "sweep"], ext=["pdf", "png"]
)

ALL_TARGETS.extend(ECHELON_EVAL_FIGURES)
METRICS_TABLES.append(ECHELON_EVAL_METRICS)


rule echelon_eval:
    """Target: the EchelonFlow cluster evaluation's figures and metrics."""
    input:
        ECHELON_EVAL_FIGURES,
        ECHELON_EVAL_METRICS,


rule echelon_eval_run:
    """Every scenario (jobs x oversubscription x seed) under every configured scheduler:
    per-job and per-iteration tables (iteration time, JCT, tardiness)."""
    input:
        traces=expand(
            f"{TRACE_DIR}/{{name}}.json.gz",
            name=sorted({m["trace"] for m in ECHELON_EVAL["mix"]}),
        ),
    output:
        jobs=ECHELON_EVAL_JOBS,
        iterations=ECHELON_EVAL_ITERATIONS,
    params:
        cfg=ECHELON_EVAL_CONFIG_JSON,
    log:
        "logs/echelon_eval/run.log",
    conda:
        CONDA_ENV
    shell:
        "python -m commsched.experiments.echelon_eval run --config-json '{params.cfg}' "
        "--traces {input.traces} --jobs-table {output.jobs} "
        "--iterations-table {output.iterations} > {log} 2>&1"


rule echelon_eval_metrics:
    """Headline numbers for the claims: iteration-time ratios between schedulers per
    paradigm, mean JCT and tardiness."""
    input:
        jobs=ECHELON_EVAL_JOBS,
        iterations=ECHELON_EVAL_ITERATIONS,
    output:
        metrics=ECHELON_EVAL_METRICS,
    log:
        "logs/echelon_eval/metrics.log",
    conda:
        CONDA_ENV
    shell:
        "python -m commsched.experiments.echelon_eval metrics --jobs-table {input.jobs} "
        "--iterations-table {input.iterations} --metrics {output.metrics} > {log} 2>&1"


rule echelon_eval_figure:
    """iterations: iteration-time and JCT distributions per paradigm and scheduler; ratios: mean
    iteration time over fair sharing's per paradigm and scenario; sweep: slowdown and
    total tardiness against load and oversubscription."""
    input:
        nb="notebooks/echelon_eval.ipynb",
        jobs=ECHELON_EVAL_JOBS,
        iterations=ECHELON_EVAL_ITERATIONS,
    output:
        nb="results/notebooks/echelon_eval_{kind}.ipynb",
        pdf="results/figures/echelon_eval_{kind}.pdf",
        png=report(
            "results/figures/echelon_eval_{kind}.png",
            caption="../report/echelon_eval.rst",
            category="EchelonFlow evaluation",
        ),
    log:
        "logs/echelon_eval/figure_{kind}.log",
    wildcard_constraints:
        kind="iterations|ratios|sweep",
    conda:
        CONDA_ENV
    shell:
        "papermill {input.nb} {output.nb} -p jobs {input.jobs} -p iterations {input.iterations} "
        "-p figure {output.pdf} -p kind {wildcards.kind} > {log} 2>&1"
