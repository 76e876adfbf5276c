"""Rule run_cell: thin wrapper over slimio_repro.run.run_cell, given the cell's plan.

Says on the terminal and in <results>/logs/progress.log which cell runs, how many are done
and the time left (slimio_repro.run.progress)."""
from pathlib import Path

from slimio_repro import plan as planmod
from slimio_repro import run
from slimio_repro.run import leases, progress
from slimio_repro.smk import exit_on_sigterm, logged

plan = snakemake.params.plan
raw = Path(snakemake.output.raw)
matrix = planmod.make(snakemake.config, check_sources=False).matrix
with progress.Reporter(matrix, raw.parent, plan.id, raw.parent.parent / "logs" / "progress.log"):
    # scancel or a time limit (SIGTERM) still tears the cell down: no half-written cell.
    with logged(snakemake.log[0], snakemake.resources.attempt), exit_on_sigterm():
        if plan.sha256() != snakemake.params.plan_sha256:
            raise RuntimeError(f"cell {plan.id}: its plan changed between planning and running")
        box = Path(snakemake.input.box) if plan.cell.testbed == "vm" else None
        attempt = snakemake.resources.attempt
        print(f"=== attempt {attempt} of cell {plan.id}")
        # What an earlier attempt left is removed first; what this one holds is named in
        # its lease until it has removed it (run/leases.py).
        with leases.held(plan, raw):
            print(run.run_cell(plan, raw, box, attempt=attempt))
