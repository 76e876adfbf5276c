"""Rule build_ycsb_binding: thin wrapper over slimio_repro.build.ycsb_binding.build."""
import json
from pathlib import Path

from slimio_repro.build import ycsb_binding
from slimio_repro.smk import logged

with logged(snakemake.log[0]):
    record = ycsb_binding.build(Path(snakemake.output.record).parent, Path(snakemake.log[0] + ".maven"))
    print(json.dumps(record, indent=2))
