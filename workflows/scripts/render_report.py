"""Rule render_report: thin wrapper over slimio_repro.report.write_for_rule (the rule's
inputs are what the run should have made)."""
from slimio_repro import report
from slimio_repro.smk import logged

with logged(snakemake.log[0]):
    report.write_for_rule(snakemake.output.report, snakemake.params.made_by)
