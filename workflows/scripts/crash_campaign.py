"""Rule crash_campaign: thin wrapper over slimio_repro.crash.run_configured."""
from pathlib import Path

from slimio_repro import crash
from slimio_repro.smk import logged

with logged(snakemake.log[0]):
    summary = crash.run_configured(snakemake.config, Path(snakemake.output.summary).parent)
    print((Path(snakemake.output.summary).parent / "summary.md").read_text())
    if not crash.passed(summary):
        raise SystemExit("the crash campaign found problems: see "
                         f"{Path(snakemake.output.summary).parent}/summary.md and failures/")
