"""Rule parse_cell: thin wrapper over slimio_repro.parse.write."""
import json
from pathlib import Path

from slimio_repro import parse
from slimio_repro.smk import logged

with logged(snakemake.log[0]):
    record = parse.write(Path(snakemake.input.raw), Path(snakemake.output.record),
                         Path(snakemake.output.timeseries))
    print(json.dumps(record, indent=2))
