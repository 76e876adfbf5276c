"""Uniform random overwrites of the guest's namespace: the write pattern whose garbage
collection has a closed form (:mod:`slimio_repro.ftl.theory`), for holding an emulated SSD's
FTL (FEMU's) against the FTL model (``slimio-repro gc-check``).

Runs inside the guest, as root, on a namespace provisioned for raw use (it must be blank).
Three fio jobs on the block device, with O_DIRECT and no placement directive (so every write
goes to handle 0), under the cell's NVMe trace:

1. ``fill``: the first ``utilization`` of the namespace written once, sequentially;
2. ``warm``: ``warm_drive_writes`` x the namespace's capacity of 4 KiB writes at uniformly
   random offsets in that range, until GC reaches its steady state;
3. ``measure``: ``measure_drive_writes`` x capacity more of them.

The device's FDP statistics are read before the first job and after each one
(``overwrite.json``), so each phase's host and media bytes are the differences; the trace
holds every command, in order (``nvme-trace.txt.gz``).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from . import fdp, layout, vmstorage
from ..plan.cellplan import CellPlan
from .provision import provision
from .roofline import RooflineError, parse_rate

PAGE_BYTES = 4096
FILL_BLOCK_BYTES = 128 << 10
IODEPTH = 16
RESULT = "overwrite.json"
PHASES = ("fill", "warm", "measure")


def jobs(namespace: str, capacity_bytes: int, utilization: float, warm_drive_writes: float,
         measure_drive_writes: float, seed: int) -> list[tuple[str, list[str]]]:
    """The fio arguments (after the binary) of the three phases; ValueError naming a bad
    value."""
    if not 0.05 <= utilization <= 0.95:
        raise ValueError(f"utilization {utilization!r} must be in [0.05, 0.95]: the share "
                         "of the namespace holding live data")
    for name, v in (("warm_drive_writes", warm_drive_writes),
                    ("measure_drive_writes", measure_drive_writes)):
        if not 0 < v <= 100:
            raise ValueError(f"{name} {v!r} must be in (0, 100]")
    live = int(capacity_bytes * utilization) // FILL_BLOCK_BYTES * FILL_BLOCK_BYTES
    common = [f"--filename={namespace}", "--ioengine=io_uring", "--direct=1",
              f"--iodepth={IODEPTH}", "--offset=0", f"--size={live}", "--numjobs=1",
              "--group_reporting", "--output-format=json"]
    out = [("fill", ["--name=fill", *common, "--rw=write", f"--bs={FILL_BLOCK_BYTES}"])]
    for i, (name, dw) in enumerate((("warm", warm_drive_writes),
                                    ("measure", measure_drive_writes))):
        io = int(capacity_bytes * dw) // PAGE_BYTES * PAGE_BYTES
        out.append((name, [f"--name={name}", *common, "--rw=randwrite", f"--bs={PAGE_BYTES}",
                           f"--io_size={io}", "--norandommap", "--randrepeat=0",
                           f"--randseed={seed + i}"]))
    return out


def run(plan: CellPlan, out_dir: Path, utilization: float, warm_drive_writes: float,
        measure_drive_writes: float, seed: int, fio_bin: str = layout.GUEST_FIO,
        expect_box_id: str | None = None, expect_kernel: str | None = None) -> dict:
    """Provision the namespace (the box the host booted, a namespace never written, raw),
    run the phases under the trace, write ``out_dir``; the summary (also
    ``overwrite.json``)."""
    settings = plan.vm
    if not settings.fdp:
        raise vmstorage.GuestError(f"device profile {settings.device.name} has no FDP: the "
                                   "check reads the device's FDP statistics")
    out_dir.mkdir(parents=True)
    (out_dir / layout.RAW_PLAN).write_text(plan.to_json())
    provision(settings, "slimio", out_dir, expect_box_id, expect_kernel, blank_at=0)
    monitor = vmstorage.DeviceMonitor(settings, out_dir)
    phases = jobs(settings.namespace, settings.device.capacity_bytes, utilization,
                  warm_drive_writes, measure_drive_writes, seed)
    stats = []
    summary = {"namespace": settings.namespace, "capacity_bytes": settings.device.capacity_bytes,
               "utilization": utilization, "warm_drive_writes": warm_drive_writes,
               "measure_drive_writes": measure_drive_writes, "seed": seed,
               "page_bytes": PAGE_BYTES, "phases": []}
    monitor.start()
    try:
        stats.append(fdp.parse_stats(monitor.fdp_stats(), "FDP statistics before"))
        summary["before"] = stats[0]
        for name, args in phases:
            report = out_dir / f"fio-{name}.json"
            cmd = [fio_bin, *args, f"--output={report}"]
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode != 0:
                raise RooflineError(f"`{' '.join(cmd)}` failed ({proc.returncode}): "
                                    f"{proc.stderr.strip()[-500:]}")
            stats.append(fdp.parse_stats(monitor.fdp_stats(), f"FDP statistics after {name}"))
            rate = parse_rate(report.read_text(), "write")
            summary["phases"].append({
                "phase": name, "command": cmd, "fio_bytes": rate["bytes"],
                "runtime_s": rate["runtime_s"], "mb_s": rate["mb_s"],
                **{f"{k}_after": v for k, v in stats[-1].items()}})
    except BaseException:
        monitor.cancel()
        raise
    monitor.stop()
    (out_dir / RESULT).write_text(json.dumps(summary, indent=2) + "\n")
    return summary
