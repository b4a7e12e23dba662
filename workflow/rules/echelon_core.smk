"""EchelonFlow core facts: Table 1 from the arrangement functions, Fig. 2 per scheduler, and
every EchelonFlow scheduler's optimality gap against the exact solver (small instances)."""

ECHELON_CORE_TABLE1 = "results/tables/echelon_table1.csv"
ECHELON_CORE_FIG2 = "results/tables/echelon_core_fig2.csv"
ECHELON_CORE_GAPS = "results/tables/echelon_core_gaps.csv"
ECHELON_CORE_METRICS = "results/metrics/echelon_core.csv"

ALL_TARGETS.extend(
    [ECHELON_CORE_TABLE1, ECHELON_CORE_FIG2, ECHELON_CORE_GAPS, ECHELON_CORE_METRICS]
)
METRICS_TABLES.append(ECHELON_CORE_METRICS)


rule echelon_core:
    """Target: Table 1, Fig. 2 per scheduler, optimality gaps, and their metrics."""
    input:
        ECHELON_CORE_TABLE1,
        ECHELON_CORE_FIG2,
        ECHELON_CORE_GAPS,
        ECHELON_CORE_METRICS,


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
