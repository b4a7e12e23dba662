"""EchelonFlow core facts: Table 1 from the arrangement functions, Fig. 2 per scheduler, and
every EchelonFlow scheduler's optimality gap against the exact solver (small instances)."""

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
        "python -m commsched.experiments.echelon_core --seed {params.seed} "
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
        nb="results/notebooks/echelon_core.ipynb",
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
