"""commsched pipeline: every figure and every reproduced claim.

Run `make reproduce` (= `snakemake --cores all all` with profiles/default).
Each work has its rules in workflow/rules/<work>.smk (tictac, pace, echelon, placement;
traces in trace.smk) and appends its final outputs to
ALL_TARGETS (defined in common.smk); `all` also writes the claims table.
"""


configfile: "config/config.yaml"


report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/trace.smk"
include: "workflow/rules/tictac.smk"
include: "workflow/rules/pace.smk"
include: "workflow/rules/placement.smk"
include: "workflow/rules/echelon.smk"
include: "workflow/rules/chakra.smk"
include: "workflow/rules/claims.smk"


rule all:
    input:
        # under --report only what exists (common.smk)
        [p for p in [*ALL_TARGETS, "results/claims.md"] if not REPORTING or os.path.exists(p)],
    default_target: True
