"""Your own workload: Chakra execution traces through TicTac and PACE (issue 28).

Every `*.et` under config `chakra.dir` (recursively; one rank per file) is imported into
an op graph (`commsched trace import-chakra`, one summary line with what could not be
mapped in its log), then run through the TicTac models sweep (tictac section's settings:
random baseline vs TIC and TAC, Figs. 11 and 13 columns) and PACE's Table II analog and
plan (pace section's settings). Target `chakra`; with `chakra.dir` empty (the default)
there is nothing to do and nothing is added to `all`. Include after tictac.smk and
pace.smk (it uses their settings).
"""

from pathlib import Path

CHAKRA_DIR = config.get("chakra", {}).get("dir", "")
CHAKRA_NAMES = (
    sorted(str(p.relative_to(CHAKRA_DIR))[: -len(".et")]
           for p in Path(CHAKRA_DIR).rglob("*.et"))
    if CHAKRA_DIR else []
)
CHAKRA_GRAPH = "results/chakra/traces/{name}.json.gz"
CHAKRA_GRAPHS = expand(CHAKRA_GRAPH, name=CHAKRA_NAMES)
CHAKRA_OUTPUTS = (
    [
        "results/tables/chakra_tictac_models.csv",
        "results/tables/chakra_pace_table2.csv",
        *expand("results/chakra/plans/{name}.json", name=CHAKRA_NAMES),
    ]
    if CHAKRA_NAMES else []
)

ALL_TARGETS.extend(CHAKRA_OUTPUTS)


rule chakra:
    """Target: the TicTac table, PACE's table and one PACE plan per imported trace."""
    input:
        CHAKRA_OUTPUTS,


rule chakra_import:
    """One Chakra ET -> op graph in the traced-graph format."""
    input:
        et=f"{CHAKRA_DIR}/{{name}}.et",
    output:
        graph=CHAKRA_GRAPH,
    log:
        "logs/chakra/import_{name}.log",
    conda:
        CONDA_ENV
    shell:
        "commsched trace import-chakra {input.et} -o {output.graph} > {log} 2>&1"


rule chakra_tictac:
    """TicTac's models sweep (baseline, TIC, TAC) on every imported trace."""
    input:
        traces=CHAKRA_GRAPHS,
    output:
        table="results/tables/chakra_tictac_models.csv",
    params:
        cfg=TICTAC_CONFIG_JSON,
    log:
        "logs/chakra/tictac.log",
    conda:
        CONDA_ENV
    shell:
        "python -m commsched.tictac.experiments.sweeps models --config-json '{params.cfg}' "
        "--traces {input.traces} --table {output.table} > {log} 2>&1"


rule chakra_pace_table:
    """PACE's Table II analog (parameters, all-reduce and compute ops, tensor sizes)."""
    input:
        traces=CHAKRA_GRAPHS,
    output:
        table="results/tables/chakra_pace_table2.csv",
        metrics="results/chakra/pace_table2_metrics.csv",
    log:
        "logs/chakra/pace_table.log",
    conda:
        CONDA_ENV
    shell:
        "python -m commsched.pace.experiments.model table --traces {input.traces} "
        "--table {output.table} --metrics {output.metrics} > {log} 2>&1"


rule chakra_pace_plan:
    """PACE's all-reduce plan of one imported trace (commsched pace plan)."""
    input:
        trace=CHAKRA_GRAPH,
    output:
        plan="results/chakra/plans/{name}.json",
    params:
        workers=PACE["workers"],
        bandwidth=PACE["bandwidth_gbps"],
        slot=PACE["slot_ms"],
        cost=PACE["cost"],
        latency=PACE["latency_us"],
        scale=PACE["compute_scale"],
    log:
        "logs/chakra/plan_{name}.log",
    conda:
        CONDA_ENV
    shell:
        "commsched pace plan {input.trace} --workers {params.workers} "
        "--bandwidth {params.bandwidth} --slot {params.slot} --cost {params.cost} "
        "--latency-us {params.latency} --compute-scale {params.scale} -o {output.plan} "
        "> {log} 2>&1"
