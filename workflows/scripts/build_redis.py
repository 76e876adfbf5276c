"""Rules build_redis_baseline and build_redis_slimio: thin wrapper over slimio_repro.build.redis.build_redis."""
import json
from pathlib import Path

from slimio_repro.build import redis as build_redis
from slimio_repro.smk import logged

out_dir = Path(snakemake.output.server).parent.parent
with logged(snakemake.log[0]):
    record = build_redis.build_redis(snakemake.params.system, snakemake.wildcards.version,
                                     Path(snakemake.input[0]),
                                     out_dir, snakemake.params.jobs or snakemake.threads,
                                     Path(snakemake.log[0] + ".make"))
    print(json.dumps(record, indent=2))
