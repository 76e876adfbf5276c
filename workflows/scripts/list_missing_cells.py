"""Rule list_missing_cells: thin wrapper over slimio_repro.run.finished.write."""
from slimio_repro.run import finished
from slimio_repro.smk import logged

with logged(snakemake.log[0]):
    print(finished.write(snakemake.params.missing, snakemake.output.missing))
    for cell in snakemake.params.missing:
        print(f"left out: {cell['cell_id']} (its log: {cell['log']})")
