"""Rule run_cell: thin wrapper over slimio_repro.cell.run."""
from pathlib import Path

from slimio_repro import cell, cells
from slimio_repro.smk import logged

wc = snakemake.wildcards
c = cells.Cell(wc.testbed, wc.system, wc.workload, wc.policy, int(wc.rep))
with logged(snakemake.log[0]):
    print(cell.run(c, dict(snakemake.config), Path(snakemake.output.raw),
                   Path(snakemake.input.server).parent))
