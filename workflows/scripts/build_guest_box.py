"""Rule build_guest_box: thin wrapper over slimio_repro.box.build."""
import json
from pathlib import Path

from slimio_repro.testbed import box
from slimio_repro.smk import logged

with logged(snakemake.log[0]):
    builds = [Path(s).parents[1] for s in snakemake.input.servers]
    fio_build = Path(snakemake.input.fio).parents[1]
    ycsb_build = Path(snakemake.input.ycsb).parent
    print(json.dumps(box.build(Path(snakemake.output.box), builds, fio_build, ycsb_build,
                               snakemake.params.disk_size_mb, Path(snakemake.log[1])),
                     indent=2))
