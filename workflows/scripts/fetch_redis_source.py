"""Rule fetch_redis_source: thin wrapper over slimio_repro.sources.fetch."""
import json
from pathlib import Path

from slimio_repro.build import sources
from slimio_repro.smk import logged

with logged(snakemake.log[0]):
    print(json.dumps(sources.fetch(snakemake.wildcards.version, Path(snakemake.output[0]),
                                   snakemake.params.dirs), indent=2))
