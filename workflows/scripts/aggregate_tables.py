"""Rule aggregate_tables: thin wrapper over slimio_repro.aggregate.write_all."""
from pathlib import Path

from slimio_repro import aggregate
from slimio_repro.smk import logged

with logged(snakemake.log[0]):
    aggregate.write_all([Path(f) for f in snakemake.input.records], Path(snakemake.params.out_dir),
                        [Path(f) for f in snakemake.input.ftl])
