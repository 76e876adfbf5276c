"""Rule render_report: thin wrapper over slimio_repro.report.write."""
from pathlib import Path

from slimio_repro import report
from slimio_repro.smk import logged

with logged(snakemake.log[0]):
    out = Path(snakemake.output.report)
    print(report.write(out.parent, out))
