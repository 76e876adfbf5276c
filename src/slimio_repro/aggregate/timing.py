"""Where a cell's time goes, phase by phase (results/tables/timing).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ..agent import phases as cellphases
from ..labels import SYSTEM_LABEL
from .summary import numeric, summarize, system_order


TIMING_GROUP = ["testbed", "system", "workload"]


def write_timing(cells: pd.DataFrame, out_dir: Path) -> pd.DataFrame:
    """results/tables/timing.{csv,md}: where the cells' time went, per system and workload.

    One row per (testbed, system, workload) over its policies and repetitions: n, and each
    phase's mean, std, min and max in seconds (the phases the cells recorded, in the order
    they run), then the cell's total. Cells made before phases were recorded count in n_total
    only where they have a total.
    """
    phase_cols = [f"phase_{k}_s" for k in cellphases.ORDER]
    present = [c for c in phase_cols if c in cells and numeric(cells, c).notna().any()]
    summary = summarize(cells, present + ["cell_total_s"], TIMING_GROUP)
    if len(summary):
        summary = summary.assign(_s=summary.system.map(system_order)).sort_values(
            ["testbed", "workload", "_s"]).drop(columns="_s")
    out_dir.mkdir(parents=True, exist_ok=True)
    summary.to_csv(out_dir / "timing.csv", index=False)
    headers = ["Testbed", "System", "Workload", "n"] + \
        [m[len("phase_"):-len("_s")] for m in present] + ["total (min-max)"]
    lines = ["# Where the time goes: seconds per cell, by phase", "",
             "| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    for _, r in summary.iterrows():
        cells_ = [r.testbed, SYSTEM_LABEL.get(r.system, r.system), r.workload, str(r.n)]
        cells_ += ["n/a" if pd.isna(r[f"{m}_mean"]) else f"{r[f'{m}_mean']:.1f}"
                   for m in present]
        t = "cell_total_s"
        cells_.append("n/a" if pd.isna(r[f"{t}_mean"]) else
                      f"{r[f'{t}_mean']:.1f} ({r[f'{t}_min']:.1f}-{r[f'{t}_max']:.1f})")
        lines.append("| " + " | ".join(cells_) + " |")
    total = numeric(cells, "cell_total_s").dropna()
    lines += ["", "Mean seconds per cell over its policies and repetitions (std, min and max "
              "per phase are in timing.csv). Phases: boot (vagrant up of the cell's VM, or "
              "the reset of a guest kept from the last cell), "
              "provision (the guest checked, the namespace prepared for the system), "
              "device_prepare (the cell's storage; SlimIO's format), server_start, "
              "load (YCSB's load phase), workload, snapshots (the wait for WAL-Snapshots "
              "still running and the On-Demand-Snapshot), shutdown (INFO, dataset "
              "fingerprint, shutdown), recovery, trace_fdp (NVMe command trace and FDP "
              "statistics), roofline (fio on the namespace), guest_overhead (the rest of "
              "the guest run: the code and plan copied in, its Python's start), copy_back, "
              "teardown (VM destroyed or kept for the next cell, storage removed).",
              f"All {len(total)} cells with a total: {total.sum() / 60:.1f} min of cell time."
              if len(total) else "No cell recorded its time."]
    (out_dir / "timing.md").write_text("\n".join(lines) + "\n")
    return summary
