"""Rule judge_claims: thin wrapper over slimio_repro.claims.judge_run."""
from pathlib import Path

from slimio_repro import claims
from slimio_repro.smk import logged

with logged(snakemake.log[0]):
    written = claims.judge_run(Path(snakemake.input.records), Path(snakemake.input.claims),
                               Path(snakemake.output.csv).parent)
    print(written["summary"].read_text())
