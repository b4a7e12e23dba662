"""EchelonFlow (HotNets 2022): core facts, multi-tenant evaluation, Varys' FB2010 replay, live.

One section per experiment; each appends its final outputs to ALL_TARGETS and its
metrics table to METRICS_TABLES (common.smk)."""

import json


# --------------------------------------------------------------------------------------
# EchelonFlow core facts: Table 1 from the arrangement functions, Fig. 2 per scheduler, and
# every EchelonFlow scheduler's optimality gap against the exact solver (small instances).
# --------------------------------------------------------------------------------------

ECHELON_CORE_TABLE1 = "results/tables/echelon_table1.csv"
ECHELON_CORE_FIG2 = "results/tables/echelon_core_fig2.csv"
ECHELON_CORE_GAPS = "results/tables/echelon_core_gaps.csv"
ECHELON_CORE_METRICS = "results/metrics/echelon_core.csv"
ECHELON_CORE_FIGURES = multiext("results/figures/echelon_core", ".pdf", ".png")

ALL_TARGETS.extend([ECHELON_CORE_TABLE1, ECHELON_CORE_METRICS, *ECHELON_CORE_FIGURES])
METRICS_TABLES.append(ECHELON_CORE_METRICS)


rule echelon_core:
    """Target: Table 1, Fig. 2 per scheduler, optimality gaps, their metrics and figure."""
    input:
        ECHELON_CORE_TABLE1,
        ECHELON_CORE_METRICS,
        ECHELON_CORE_FIGURES,


rule echelon_core_run:
    """Regenerate Table 1, run Fig. 2 under every scheduler, solve random small instances
    exactly (MILP, HiGHS) beside every scheduler."""
    output:
        table1=ECHELON_CORE_TABLE1,
        fig2=ECHELON_CORE_FIG2,
        gaps=ECHELON_CORE_GAPS,
        metrics=ECHELON_CORE_METRICS,
    params:
        seed=config["echelon_core"]["seed"],
        instances=config["echelon_core"]["instances"],
        hosts=config["echelon_core"]["hosts"],
        groups=config["echelon_core"]["groups"],
        flows_per_group=config["echelon_core"]["flows_per_group"],
    log:
        "logs/echelon/core.log",
    benchmark:
        "logs/echelon/core.benchmark.tsv"
    conda:
        CONDA_ENV
    shell:
        "python -m commsched.echelon.experiments.core --seed {params.seed} "
        "--instances {params.instances} --hosts {params.hosts} --groups {params.groups} "
        "--flows-per-group {params.flows_per_group} --table1 {output.table1} "
        "--fig2 {output.fig2} --gaps {output.gaps} --metrics {output.metrics} > {log} 2>&1"


rule echelon_core_figure:
    """Plot Fig. 2's finish times per scheduler and the optimality ratios per scheduler."""
    input:
        nb="notebooks/echelon_core.ipynb",
        fig2=ECHELON_CORE_FIG2,
        gaps=ECHELON_CORE_GAPS,
    output:
        nb=report("results/notebooks/echelon_core.ipynb", category="Notebooks"),
        pdf=ECHELON_CORE_FIGURES[0],
        png=report(
            ECHELON_CORE_FIGURES[1],
            caption="../report/echelon_core.rst",
            category="EchelonFlow",
        ),
    log:
        "logs/echelon/core_figure.log",
    conda:
        CONDA_ENV
    shell:
        "papermill {input.nb} {output.nb} -p fig2 {input.fig2} -p gaps {input.gaps} "
        "-p figure {output.pdf} > {log} 2>&1"


# --------------------------------------------------------------------------------------
# EchelonFlow, the evaluation the paper lacks: a multi-tenant cluster of DP (all-reduce
# and PS), GPipe, tensor-parallel and FSDP jobs from our traces on an oversubscribed
# two-tier fabric, every configured flow scheduler on the same scenarios.
# --------------------------------------------------------------------------------------

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
        "python -m commsched.echelon.experiments.eval run --config-json '{params.cfg}' "
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
        "python -m commsched.echelon.experiments.eval metrics --jobs-table {input.jobs} "
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
        nb=report("results/notebooks/echelon_eval_{kind}.ipynb", category="Notebooks"),
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


# --------------------------------------------------------------------------------------
# EchelonFlow's Coflow sanity check: Varys' FB2010 trace replay (SIGCOMM 2014, Sec. 7)
# under per-flow fairness, FIFO and SEBF + MADD, with CCT CDFs and improvement factors.
# --------------------------------------------------------------------------------------

ECHELON_REPLAY = config["echelon_replay"]
ECHELON_REPLAY_TABLE = "results/tables/echelon_replay_{scheduler}.csv"
ECHELON_REPLAY_TABLES = expand(ECHELON_REPLAY_TABLE, scheduler=ECHELON_REPLAY["schedulers"])
ECHELON_REPLAY_METRICS = "results/metrics/echelon_replay.csv"
ECHELON_REPLAY_BINS = "results/tables/echelon_replay_bins.csv"
ECHELON_REPLAY_FIGURES = expand(
    "results/figures/echelon_replay.{ext}", ext=["pdf", "png"]
)

ALL_TARGETS.extend(ECHELON_REPLAY_FIGURES)
METRICS_TABLES.append(ECHELON_REPLAY_METRICS)


rule echelon_replay:
    """Target: the FB2010 replay figure and its metrics."""
    input:
        ECHELON_REPLAY_FIGURES,
        ECHELON_REPLAY_METRICS,


rule echelon_replay_run:
    """Replay the Coflow trace under one scheduler: one CCT row per Coflow."""
    input:
        trace=ECHELON_REPLAY["trace"],
    output:
        table=ECHELON_REPLAY_TABLE,
    params:
        rate=ECHELON_REPLAY["port_rate_gbps"] * 1e9 / 8,
    log:
        "logs/echelon/replay_{scheduler}.log",
    benchmark:
        "results/benchmarks/echelon_replay_{scheduler}.tsv"
    wildcard_constraints:
        scheduler="fair|fair-ports|fifo|sebf|sebf-static",
    conda:
        CONDA_ENV
    shell:
        "commsched echelon replay {input.trace} --scheduler {wildcards.scheduler} "
        "--port-rate {params.rate} -o {output.table} > {log} 2>&1"


rule echelon_replay_metrics:
    """Average / p95 CCTs, sebf's improvement factors, Varys' four Coflow bins."""
    input:
        tables=ECHELON_REPLAY_TABLES,
    output:
        metrics=ECHELON_REPLAY_METRICS,
        bins=ECHELON_REPLAY_BINS,
    params:
        pairs=" ".join(
            f"{s}={t}" for s, t in zip(ECHELON_REPLAY["schedulers"], ECHELON_REPLAY_TABLES)
        ),
    log:
        "logs/echelon/replay_metrics.log",
    conda:
        CONDA_ENV
    shell:
        "python -m commsched.echelon.experiments.replay metrics --tables {params.pairs} "
        "--metrics {output.metrics} --bins {output.bins} > {log} 2>&1"


rule echelon_replay_figure:
    """CCT CDF per scheduler and sebf's factor of improvement per Varys bin (Figs. 9-10-like)."""
    input:
        nb="notebooks/echelon_replay.ipynb",
        tables=ECHELON_REPLAY_TABLES,
        bins=ECHELON_REPLAY_BINS,
    output:
        nb=report("results/notebooks/echelon_replay.ipynb", category="Notebooks"),
        pdf="results/figures/echelon_replay.pdf",
        png=report(
            "results/figures/echelon_replay.png",
            caption="../report/echelon_replay.rst",
            category="EchelonFlow",
        ),
    params:
        pairs=",".join(
            f"{s}={t}" for s, t in zip(ECHELON_REPLAY["schedulers"], ECHELON_REPLAY_TABLES)
        ),
    log:
        "logs/echelon/replay_figure.log",
    conda:
        CONDA_ENV
    shell:
        "papermill {input.nb} {output.nb} -p tables {params.pairs} -p bins {input.bins} "
        "-p figure {output.pdf} > {log} 2>&1"


# --------------------------------------------------------------------------------------
# EchelonFlow live (issue 23): real pipeline, FSDP and data-parallel PyTorch jobs share the
# oversubscribed core of an emulated two-rack cluster; every policy (kernel sharing, per-flow
# fair, Varys, the EchelonFlow readings) is enforced there with htb classes and u32 filters by
# a controller that calls the simulator's schedulers; the coupled compute + flow simulator
# predicts each job's completion time.
#
# echelon_live_run brings up the cluster (network namespaces cs-ecl*, tbf host links, htb core),
# runs every policy `repeats` times, tears everything down and writes the tables;
# echelon_live_figure draws them. The run takes every core (threads: workflow.cores) so nothing
# runs beside it. Without root, without htb/u32 (or with echelon_live.enabled false) the tables
# say "skipped: <reason>", the metrics table stays empty and the echelon-live claims stay pending.
# --------------------------------------------------------------------------------------

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
        "results/benchmarks/echelon_live_run.tsv"
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
