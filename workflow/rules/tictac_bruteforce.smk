"""TicTac TIC and TAC against the best recv order: brute force over all orders of small graphs."""

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
        "python -m commsched.experiments.tictac_bruteforce --sizes {params.sizes} "
        "--instances {params.instances} --channels {params.channels} "
        "--two-stage-instances {params.two_stage} --seed {params.seed} "
        "--table {output.table} --metrics {output.metrics} > {log} 2>&1"
