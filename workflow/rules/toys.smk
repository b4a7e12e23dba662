"""TicTac Sec. 6 toys: Par-N and Seq-N under random recv orders vs the best order."""

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
        "python -m commsched.experiments.toys --graphs {input.graphs} "
        "--random-orders {params.random_orders} --seed {params.seed} "
        "--table {output.table} --metrics {output.metrics} > {log} 2>&1"


rule toys_figure:
    """Plot the makespan distribution of Par-N vs Seq-N, normalised by the best order."""
    input:
        nb="notebooks/toys.ipynb",
        table=TOYS_TABLE,
    output:
        nb="results/notebooks/toys.ipynb",
        pdf=TOYS_FIGURES[0],
        png=report(TOYS_FIGURES[1], caption="../report/toys.rst", category="TicTac toys"),
    log:
        "logs/toys/figure.log",
    conda:
        CONDA_ENV
    shell:
        "papermill {input.nb} {output.nb} -p table {input.table} "
        "-p figure {output.pdf} > {log} 2>&1"
