"""Rule model_ftl_sequence: thin wrapper over slimio_repro.ftl.replay_sequence."""
import json
from pathlib import Path

from slimio_repro import ftl
from slimio_repro.smk import logged

with logged(snakemake.log[0]):
    result = ftl.replay_sequence([Path(p) for p in snakemake.input.raw], snakemake.params.model,
                                 snakemake.params.sweep)
    Path(snakemake.output.result).write_text(json.dumps(result, indent=2) + "\n")
    print(ftl.render(result))
    print(ftl.render(result["placement_ignored"]))
