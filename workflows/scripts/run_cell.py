"""Rule run_cell: thin wrapper over slimio_repro.cell.run (bare) and vm.run_cell (vm)."""
from pathlib import Path

from slimio_repro import cell, cells, vm
from slimio_repro.smk import logged

wc = snakemake.wildcards
c = cells.Cell(wc.testbed, wc.system, wc.workload, wc.policy, int(wc.rep))
with logged(snakemake.log[0]):
    if c.testbed == "vm":
        print(vm.run_cell(c, dict(snakemake.config), Path(snakemake.output.raw),
                          Path(snakemake.input.box)))
    else:
        print(cell.run(c, dict(snakemake.config), Path(snakemake.output.raw),
                       Path(snakemake.input.server).parent))
