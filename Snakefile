# SlimIO reproduction pipeline: entry point only.
#
#   snakemake --cores all reproduce                                  # smoke profile
#   snakemake --cores all reproduce --configfile config/profiles/ci.yaml
#
# The stages live in workflows/rules/*.smk; the logic in the slimio_repro Python package.
from snakemake.utils import min_version

min_version("9.0")


configfile: "config/config.yaml"


include: "workflows/rules/common.smk"
include: "workflows/rules/build.smk"
include: "workflows/rules/testbed.smk"
include: "workflows/rules/run.smk"
include: "workflows/rules/parse.smk"
include: "workflows/rules/ftl.smk"
include: "workflows/rules/aggregate.smk"
include: "workflows/rules/motivation.smk"
include: "workflows/rules/claims.smk"
include: "workflows/rules/report.smk"
include: "workflows/rules/crash.smk"


onstart:
    # What interrupted runs left on this host (their cells' VMs, mounts, processes).
    sweep_leftovers()


onsuccess:
    release_kept_guests()
    print_claims_summary()


onerror:
    release_kept_guests()


rule reproduce:
    """Everything: build, run every cell of the matrix, parse, the FTL model, tables and figures,
    the claims' verdicts and the report."""
    input:
        tables=TABLE_OUTPUTS,
        figures=FIGURE_OUTPUTS,
        ftl=FTL_OUTPUTS,
        claims=CLAIMS_OUTPUTS,
        report=results(pathsmod.REPORT),
        # Tables 1-2 and Figure 2, where the profile says motivation.in_reproduce (the
        # paper's); otherwise `snakemake motivation`.
        motivation=MOTIVATION_OUTPUTS if PLAN.motivation_in_reproduce else [],
    default_target: True
