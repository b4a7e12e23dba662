rule claims:
    """Judge papers/claims/*.yaml against every metrics table."""
    input:
        claims=sorted(glob.glob("papers/claims/*.yaml")),
        metrics=METRICS_TABLES,
    output:
        md="results/claims.md",
        csv=report("results/claims.csv", caption="../report/claims.rst", category="Claims"),
    log:
        "logs/claims.log",
    conda:
        CONDA_ENV
    shell:
        "commsched claims --claims {input.claims} --metrics {input.metrics} "
        "--md {output.md} --csv {output.csv} > {log} 2>&1"
