"""The snapshot roofline: each snapshot's time against what the device allows
(results/tables/roofline).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from .formats import markdown
from .summary import distinct, numeric, summarize


# The device bound of a snapshot: the On-Demand-Snapshot's throughput against fio's
# sequential-write bandwidth through passthru on the same device in the same VM. The ratio is
# taken per cell (the snapshot and the fio run it is divided by share one VM), then averaged.
ROOFLINE_COLUMNS = [
    ("on_demand_snapshot_mb_s", "On-Demand-Snapshot (MB/s)", 1),
    ("roofline_seq_write_mb_s", "fio sequential write (MB/s)", 1),
    ("snapshot_roofline_ratio", "Snapshot / fio", 3),
    ("snapshot_bound_mb_s", "No-I/O bound (MB/s)", 1),
    ("snapshot_bound_ratio", "Snapshot time / bound", 3),
]
ROOFLINE_EXTRA_COLUMNS = ["on_demand_snapshot_bytes", "on_demand_snapshot_time_s",
                          "on_demand_snapshot_child_s", "snapshot_floor_s",
                          "roofline_block_size_bytes", "roofline_iodepth"]


def _bytes_text(value: str) -> str:
    n = int(float(value))
    for unit, size in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size and n % size == 0:
            return f"{n // size} {unit}"
    return f"{n} B"


def roofline_notes(cells: pd.DataFrame) -> list[str]:
    block = [_bytes_text(v) for v in distinct(cells, "roofline_block_size_bytes")]
    depth = [str(int(float(v))) for v in distinct(cells, "roofline_iodepth")]
    notes = [
        "On-Demand-Snapshot: the size of the cell's last On-Demand-Snapshot (BGSAVE) over its "
        "time from the server log (on_demand_snapshot_bytes, on_demand_snapshot_time_s in the "
        "CSV; MB = 10^6 bytes). That time includes the fork and the RDB serialization, not "
        "only the device writes.",
    ]
    if numeric(cells, "roofline_seq_write_mb_s").notna().any():
        notes.append(
            "fio: one sequential-write job through NVMe passthru (ioengine=io_uring_cmd on the "
            "namespace's char device) on the same device, in the same VM as the cell; block "
            f"size {', '.join(block) or 'not recorded'}, iodepth "
            f"{', '.join(depth) or 'not recorded'} (roofline_block_size_bytes, "
            "roofline_iodepth in the CSV); MB = 10^6 bytes: what the device takes from the "
            "guest when nothing but sequential writes is asked of it.")
    else:
        notes.append("No cell has a fio roofline (roofline_seq_write_mb_s): it is measured in "
                     "the VM of a vm-testbed cell.")
    notes.append(
        "Snapshot / fio: per cell, the snapshot's MB/s over the fio MB/s measured in the same "
        "VM (the fraction of the device bound reached), then mean ± sd over the cells. n/a "
        "where a cell lacks either number (the bare testbed has no passthru device for fio).")
    notes.append(
        "No-I/O bound: each slimio cell takes a second BGSAVE after its On-Demand-Snapshot "
        "with slimio-snapshot-sink discard: the same fork, iteration, encoding, compression "
        "and RDB checksum, into a sink that keeps nothing. Its MB/s (snapshot_bound_bytes / "
        "snapshot_bound_s) is averaged per testbed, workload and policy; every system's "
        "cells of that group snapshot the same workload's dataset. Snapshot time / bound: "
        "the cell's snapshot time, from the fork to the child's last log line "
        "(on_demand_snapshot_child_s; the parent notices the end up to 100 ms later), over "
        "the longer of its bytes at the no-I/O rate and at its fio rate (snapshot_floor_s): "
        "1.0 is the fastest the dataset and the device allow.")
    return notes


def snapshot_bounds(sel: pd.DataFrame) -> pd.DataFrame:
    """Each cell's snapshot against its bound (the lower of two rates).

    The no-I/O rate is SlimIO's BGSAVE into nothing (snapshot_bound_bytes over
    snapshot_bound_s, in the slimio cells), averaged per (testbed, workload, policy): every
    system's cells of that group snapshot the same workload's dataset. A cell's bound time is
    the longer of its snapshot's bytes at that rate and at its own fio write rate; its
    snapshot time (fork to the child's end, on_demand_snapshot_child_s) over it is
    snapshot_bound_ratio: 1.0 is as fast as physically possible.
    """
    sel = sel.copy()
    MB = 1e6
    rate = numeric(sel, "snapshot_bound_bytes") / MB / numeric(sel, "snapshot_bound_s")
    sel["_rate"] = rate.where(rate > 0)
    per_group = sel.groupby(["testbed", "workload", "policy"])["_rate"].transform("mean")
    sel["snapshot_bound_mb_s"] = per_group
    nbytes = numeric(sel, "on_demand_snapshot_bytes") / MB
    fio = numeric(sel, "roofline_seq_write_mb_s")
    floor = nbytes / per_group
    device = nbytes / fio.where(fio > 0)
    # Without the no-I/O rate there is no bound; without fio (bare) the no-I/O one alone.
    sel["snapshot_floor_s"] = floor.where(~(device > floor), device)
    sel["snapshot_bound_ratio"] = numeric(sel, "on_demand_snapshot_child_s") / \
        sel["snapshot_floor_s"]
    return sel.drop(columns="_rate")


def write_roofline(cells: pd.DataFrame, out_dir: Path) -> pd.DataFrame:
    """results/tables/roofline.{csv,md}: the On-Demand-Snapshot against fio and against its
    no-I/O bound, per group."""
    sel = snapshot_bounds(cells[cells.workload == "redis-benchmark"])
    fio = numeric(sel, "roofline_seq_write_mb_s")
    sel["snapshot_roofline_ratio"] = numeric(sel, "on_demand_snapshot_mb_s") / fio.where(fio > 0)
    summary = summarize(sel, [m for m, _, _ in ROOFLINE_COLUMNS] + ROOFLINE_EXTRA_COLUMNS)
    summary.to_csv(out_dir / "roofline.csv", index=False)
    (out_dir / "roofline.md").write_text(markdown(
        summary, ROOFLINE_COLUMNS,
        "Snapshot roofline: On-Demand-Snapshot throughput against fio on the same device",
        roofline_notes(sel)))
    return summary
