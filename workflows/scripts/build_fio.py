"""Rule build_fio: thin wrapper over slimio_repro.fio.build."""
import json
from pathlib import Path

from slimio_repro.build import fio
from slimio_repro.smk import logged

with logged(snakemake.log[0]):
    record = fio.build(snakemake.wildcards.version, Path(snakemake.output.fio).parents[1],
                       snakemake.threads, Path(snakemake.log[0] + ".make"))
    print(json.dumps(record, indent=2))
