"""Rule motivation_outputs: thin wrapper over slimio_repro.motivation.write_all."""
from pathlib import Path

from slimio_repro import motivation
from slimio_repro.smk import logged

with logged(snakemake.log[0]):
    written = motivation.write_all([Path(f) for f in snakemake.input.motivation],
                                   [Path(f) for f in snakemake.input.table1],
                                   Path(snakemake.output.records).parent.parent,
                                   snakemake.config["ftl"]["model"],
                                   snakemake.config["motivation"]["gc_utilization"])
    for path in written:
        print(path)
