"""Rule run_cell: thin wrapper over slimio_repro.run.run_cell, given the cell's plan."""
from pathlib import Path

from slimio_repro import run
from slimio_repro.smk import logged

plan = snakemake.params.plan
with logged(snakemake.log[0]):
    if plan.sha256() != snakemake.params.plan_sha256:
        raise RuntimeError(f"cell {plan.id}: its plan changed between planning and running")
    box = Path(snakemake.input.box) if plan.cell.testbed == "vm" else None
    print(run.run_cell(plan, Path(snakemake.output.raw), box))
