"""PACE's model and optimal schedule (issue 9): Table II analog and tensor sizes of the
paper's four models (config pace.traces), agreement of the three schedulers (exact, sound
LP, the paper's LP (14)) on every traced training iteration and on random problems, and
one PACE plan (balanced fusion + optimal preemptive schedule) per pace trace. Target
`pace_model` (about 30 s on 2 cores)."""

import json

PACE = config["pace"]
PACE_CONFIG_JSON = json.dumps(PACE, sort_keys=True)
PACE_TRACES = expand(f"{TRACE_DIR}/{{name}}.json.gz", name=PACE["traces"])
# The solvers are compared on every traced training iteration, not only the paper's models.
PACE_SOLVER_TRACES = expand(f"{TRACE_DIR}/{{name}}.json.gz",
                            name=[t for t in config["trace"]["traces"] if "-train-" in t])
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
    """Table II analog (parameters, all-reduce and compute ops) and gradient tensor sizes."""
    input:
        traces=PACE_TRACES,
    output:
        table=PACE_TABLE2,
        metrics=PACE_TABLE2_METRICS,
    log:
        "logs/pace/table2.log",
    conda:
        CONDA_ENV
    shell:
        "python -m commsched.experiments.pace_model table --traces {input.traces} "
        "--table {output.table} --metrics {output.metrics} > {log} 2>&1"


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
        "python -m commsched.experiments.pace_model solvers --config-json '{params.cfg}' "
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
