"""commsched pipeline: every figure and every reproduced claim.

Run `make reproduce` (= `snakemake --cores all all` with profiles/default).
Each area has its rules in workflow/rules/<area>.smk and appends its final outputs to
ALL_TARGETS (defined in common.smk); `all` also writes the claims table.
"""


configfile: "config/config.yaml"


include: "workflow/rules/common.smk"
include: "workflow/rules/trace.smk"
include: "workflow/rules/toys.smk"
include: "workflow/rules/tictac_bruteforce.smk"
include: "workflow/rules/tictac.smk"
include: "workflow/rules/comm.smk"
include: "workflow/rules/live.smk"
include: "workflow/rules/pace.smk"
include: "workflow/rules/pace_sim.smk"
include: "workflow/rules/pace_live.smk"
include: "workflow/rules/placement.smk"
include: "workflow/rules/echelon_core.smk"
include: "workflow/rules/echelon_eval.smk"
include: "workflow/rules/echelon_replay.smk"
include: "workflow/rules/echelon_live.smk"
include: "workflow/rules/claims.smk"


rule all:
    input:
        ALL_TARGETS,
        "results/claims.md",
    default_target: True
