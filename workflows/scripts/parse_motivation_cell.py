"""Rule parse_motivation_cell: thin wrapper over slimio_repro.parse.motivation_records."""
import json
from pathlib import Path

from slimio_repro.parse.motivation_records import parse_motivation_cell
from slimio_repro.smk import logged

with logged(snakemake.log[0]):
    record = parse_motivation_cell(Path(snakemake.input.raw))
    Path(snakemake.output.record).write_text(json.dumps(record, indent=2) + "\n")
    print(json.dumps(record, indent=2))
