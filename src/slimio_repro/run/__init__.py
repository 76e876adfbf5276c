"""The run stage (driven by workflows/rules/run.smk): one cell, from its plan, on its testbed.

A bare cell runs here, on this host (:func:`slimio_repro.agent.run_cell`); a vm cell in a
VM (:func:`slimio_repro.testbed.vm.run_cell`), booted for it or kept from the run's last
cell (:mod:`.guests`), which runs the same guest code inside.
"""

from __future__ import annotations

from pathlib import Path

from ..agent import run_cell as run_here

from ..plan import CellPlan
from ..testbed import vm
from . import bench, calibrate, faults, finished, guests, leases


def run_cell(plan: CellPlan, out_dir: Path, box: Path | None = None, attempt: int = 1) -> Path:
    """Run the cell ``plan`` describes into ``out_dir``; a vm cell needs the guest ``box``.
    ``attempt`` (Snakemake's, 1 for the first) goes into the cell's provenance."""
    if plan.cell.testbed == "vm":
        if box is None:
            raise ValueError(f"cell {plan.id} runs in a VM: it needs the guest box")
        return vm.run_cell(plan, out_dir, box, attempt=attempt,
                           guests=guests.guests_for(plan, box))
    return run_here(plan, out_dir, attempt=attempt)


__all__ = ["bench", "calibrate", "faults", "finished", "guests", "leases", "run_cell"]
