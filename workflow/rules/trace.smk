"""Traced models (issue 3): TensorFlow traces of the model zoo and TicTac's model table.

With trace.retrace false (the default) the pipeline reads the committed traces under
data/traces/ and the committed model counts data/models/counts.json and never imports
TensorFlow. With trace.retrace true, rule trace re-traces every configured trace into
results/traces/ and rule trace_counts recounts the models; TRACE_DIR names the directory
the other areas should read traces from (<TRACE_DIR>/<model>-<mode>-b<batch>.json.gz).
"""

TRACE = config["trace"]
TRACE_DIR = "results/traces" if TRACE["retrace"] else "data/traces"
TRACE_COUNTS = (
    "results/models/counts.json" if TRACE["retrace"] else "data/models/counts.json"
)
TRACE_FILES = expand("{dir}/{name}.json.gz", dir=TRACE_DIR, name=TRACE["traces"])
TRACE_TABLE = "results/tables/model_table.csv"
TRACE_METRICS = "results/metrics/model_table.csv"
TRACE_GPUS = 1 if TRACE["device"] == "gpu" else 0

ALL_TARGETS.append(TRACE_TABLE)
METRICS_TABLES.append(TRACE_METRICS)
if TRACE["retrace"]:
    ALL_TARGETS.extend(TRACE_FILES)


rule trace_all:
    """Target: the model table and (when re-tracing) every configured trace."""
    input:
        TRACE_TABLE,
        TRACE_FILES if TRACE["retrace"] else [],


rule trace:
    """Trace one iteration of a model with TensorFlow (commsched trace)."""
    output:
        graph="results/traces/{model}-{mode}-b{batch}.json.gz",
        raw="results/traces/raw/{model}-{mode}-b{batch}.raw.json.gz",
    wildcard_constraints:
        model="[a-z0-9_]+",
        mode="train|infer",
        batch="[0-9]+",
    params:
        warmup=TRACE["warmup"],
        iters=TRACE["iterations"],
        intra=TRACE["intra_threads"],
        inter=TRACE["inter_threads"],
        device=TRACE["device"],
        coverage=TRACE["min_coverage"],
        seed=TRACE["seed"],
    threads: TRACE["intra_threads"]  # one trace at a time per 2 cores: times stay clean
    resources:
        gpu=TRACE_GPUS,
        mem_mb=4000,
    log:
        "logs/trace/{model}-{mode}-b{batch}.log",
    conda:
        CONDA_ENV
    shell:
        "commsched trace --model {wildcards.model} --mode {wildcards.mode} "
        "--batch {wildcards.batch} --warmup {params.warmup} --iters {params.iters} "
        "--intra-threads {params.intra} --inter-threads {params.inter} "
        "--device {params.device} --min-coverage {params.coverage} --seed {params.seed} "
        "--out {output.graph} --raw-out results/traces/raw > {log} 2>&1"


rule trace_counts:
    """Count every zoo model's parameters and ops (TicTac Table 1 columns) with TensorFlow."""
    output:
        counts="results/models/counts.json",
    params:
        models=" ".join(TRACE["count_models"]),
    threads: TRACE["intra_threads"]
    log:
        "logs/trace/counts.log",
    conda:
        CONDA_ENV
    shell:
        "commsched trace --count {params.models} --out {output.counts} > {log} 2>&1"


rule trace_model_table:
    """TicTac's Table 1 for our zoo beside the paper's values (no TensorFlow)."""
    input:
        counts=TRACE_COUNTS,
        paper="papers/model_table.yaml",
    output:
        table=TRACE_TABLE,
        metrics=TRACE_METRICS,
    log:
        "logs/trace/model_table.log",
    conda:
        CONDA_ENV
    shell:
        "python -m commsched.tictac.experiments.model_table --counts {input.counts} "
        "--paper {input.paper} --table {output.table} --metrics {output.metrics} "
        "> {log} 2>&1"
