"""Rule run_motivation_cell: thin wrapper over slimio_repro.run.run_cell, given the cell's
plan (a motivation cell: testbed.vm runs agent.motivation_cells in its VM)."""
from pathlib import Path

from slimio_repro import run
from slimio_repro.smk import exit_on_sigterm, logged

plan = snakemake.params.plan
raw = Path(snakemake.output.raw)
with logged(snakemake.log[0]), exit_on_sigterm():
    if plan.sha256() != snakemake.params.plan_sha256:
        raise RuntimeError(f"cell {plan.id}: its plan changed between planning and running")
    print(run.run_cell(plan, raw, Path(snakemake.input.box)))
