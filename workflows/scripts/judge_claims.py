"""Rule judge_claims: thin wrapper over slimio_repro.claims.judge_run."""
from pathlib import Path

from slimio_repro import claims
from slimio_repro.run import finished
from slimio_repro.smk import logged

with logged(snakemake.log[0]):
    # The motivation's records join the run's where it is part of the run (the paper
    # profile); rule judge_motivation_claims judges the motivation's claims on its own.
    extra = tuple(Path(f) for f in snakemake.input.get("motivation", []))
    # The cells left out (config finished_cells_only), their logs as the run names them.
    missing = finished.read(snakemake.input.missing)
    written = claims.judge_run(Path(snakemake.input.records), Path(snakemake.input.claims),
                               Path(snakemake.output.csv).parent, extra,
                               snakemake.params.get("prefix"),
                               snakemake.params.get("looks"), snakemake.params.get("repetitions"),
                               missing)
    print(written["summary"].read_text())
