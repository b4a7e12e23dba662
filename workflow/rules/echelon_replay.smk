"""EchelonFlow's Coflow sanity check: Varys' FB2010 trace replay (SIGCOMM 2014, Sec. 7)
under per-flow fairness, FIFO and SEBF + MADD, with CCT CDFs and improvement factors."""

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
        scheduler="fair|fair-ports|fifo|sebf",
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
        "python -m commsched.experiments.echelon_replay metrics --tables {params.pairs} "
        "--metrics {output.metrics} --bins {output.bins} > {log} 2>&1"


rule echelon_replay_figure:
    """CCT CDF per scheduler and sebf's factor of improvement per Varys bin (Figs. 9-10-like)."""
    input:
        nb="notebooks/echelon_replay.ipynb",
        tables=ECHELON_REPLAY_TABLES,
        bins=ECHELON_REPLAY_BINS,
    output:
        nb="results/notebooks/echelon_replay.ipynb",
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
