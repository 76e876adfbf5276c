"""Tables 3, 4 and 5 of the paper (CSV + Markdown + LaTeX) from the records, with notes derived
from the records they summarize (testbeds, storage, placement, device counters), so they
cannot disagree with the numbers above them.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ..labels import POLICY_LABEL, SYSTEM_LABEL
from ..plan import NOPERSIST
from .formats import latex, markdown
from .ratios import REFERENCE_SYSTEM
from .reference import paper_markdown, paper_rows
from .summary import distinct, numeric, summarize, system_order


# Table 3 of the paper: (column in our records, header in the paper, decimals).
TABLE3_COLUMNS = [
    ("rps_wal_only", "WAL Only RPS", 1),
    ("mem_wal_only_peak_gb", "WAL Only Mem Usage (GB)", 3),
    ("rps_wal_snapshot", "WAL&Snapshot RPS", 1),
    ("mem_wal_snapshot_peak_gb", "WAL&Snapshot Mem Usage (GB)", 3),
    ("rps_avg", "Average RPS", 1),
    ("snapshot_time_s", "Snapshot time (sec)", 3),
    ("set_p999_ms", "SET p999 (ms)", 3),
    ("waf", "SSD WAF (device)", 2),
    ("waf_modelled", "SSD WAF (modelled)", 3),
]
# Table 4 of the paper (YCSB-A): Table 3's columns without WAF, with GET p999.
TABLE4_COLUMNS = TABLE3_COLUMNS[:7] + [("get_p999_ms", "GET p999 (ms)", 3)]
TABLE5_COLUMNS = [
    ("recovery_time_s", "Recovery Time (sec)", 3),
    ("recovery_mb_s", "Recovery I/O Throughput (MB/s)", 1),
]
EXTRA_COLUMNS = ["wal_snapshot_time_s", "on_demand_snapshot_time_s", "wal_snapshot_count",
                 "server_set_p999_ms", "device_write_bytes_total", "recovery_bytes",
                 "slimio_recovery_time_s", "slimio_recovery_mb_s", "fdp_host_bytes_written",
                 "fdp_media_bytes_written", "fdp_media_bytes_erased", "device_gc_rounds"]
TABLE4_EXTRA_COLUMNS = ["wal_snapshot_time_s", "wal_snapshot_count", "server_set_p999_ms",
                        "server_get_p999_ms", "set_p99_ms", "get_p99_ms", "load_rps",
                        "load_duration_s", "workload_duration_s", "device_write_bytes_total",
                        "fdp_host_bytes_written", "waf"]


def write_table(cells: pd.DataFrame, workload: str, columns, name: str, title: str,
                notes: list[str], out_dir: Path, extra: list[str] = EXTRA_COLUMNS) -> pd.DataFrame:
    sel = cells[cells.workload == workload]
    metrics = [m for m, _, _ in columns] + [m for m in extra if m not in
                                            {c for c, _, _ in columns}]
    summary = summarize(sel, metrics)
    out_dir.mkdir(parents=True, exist_ok=True)
    summary.to_csv(out_dir / f"{name}.csv", index=False)
    (out_dir / f"{name}.md").write_text(markdown(summary, columns, title, notes)
                                        + paper_markdown(name, columns))
    (out_dir / f"{name}.tex").write_text(latex(summary, columns, title))
    return summary


def _placement(g: pd.DataFrame) -> str:
    """What the NVMe command traces of these cells say about placement ('' if not traced)."""
    ids = {i for v in distinct(g, "nvme_trace_placement_ids") for i in v.split(";")}
    if not ids:
        return ""
    placed = sorted(ids - {"none"}, key=lambda i: (len(i), i))
    if not placed:
        text = "no placement id on any write in the NVMe trace"
    else:
        text = f"placement ids in the NVMe trace: {', '.join(placed)}"
        if "none" in ids:
            text += " (and writes without one)"
    ok = g["nvme_trace_placement_ok"].dropna() if "nvme_trace_placement_ok" in g else []
    if len(ok):
        bad = g.loc[ok.index[~ok.astype(bool)], "cell_id"]
        text += ("; every write carried the placement id expected for its region"
                 f" ({len(ok)} of {len(ok)} cells)" if bad.empty else
                 f"; NOT every write carried the placement id expected for its region in "
                 f"{len(bad)} of {len(ok)} cells: {', '.join(bad)}")
    return text


def storage_notes(cells: pd.DataFrame) -> list[str]:
    """One line per (testbed, system): where its WAL and snapshots went, from its records."""
    notes = []
    groups = sorted(cells.groupby(["testbed", "system"]),
                    key=lambda kv: (kv[0][0], system_order(kv[0][1])))
    for (testbed, system), g in groups:
        fs = ", ".join(distinct(g, "filesystem")) or "an unrecorded file system"
        if system == REFERENCE_SYSTEM:
            what = f"stock Redis, AOF and RDB files on {fs}"
        elif system == NOPERSIST:
            what = (f"stock Redis with AOF and snapshots off (it writes nothing), its data "
                    f"directory on {fs}; one set of cells serves every policy")
        else:
            parts = []
            for backend in distinct(g, "slimio_backend"):
                sub = g[g.slimio_backend.astype(str) == backend]
                device = ", ".join(distinct(sub, "slimio_device")) or "an unrecorded device"
                if backend == "nvme":
                    parts.append(f"NVMe passthru (io_uring commands) on {device}")
                elif backend == "file":
                    on = f", a file on {fs}" if fs != "raw" else ""
                    parts.append(f"file backend (io_uring, O_DIRECT) on {device}{on}")
                else:
                    parts.append(f"backend {backend!r} on {device}")
            what = ("WAL and snapshots through " + " and ".join(parts) if parts
                    else f"SlimIO's backend not recorded (file system: {fs})")
        placement = _placement(g)
        notes.append(f"{SYSTEM_LABEL.get(system, system)} ({testbed}, {len(g)} cells): {what}"
                     + (f"; {placement}" if placement else "") + ".")
    return notes


def waf_notes(cells: pd.DataFrame) -> list[str]:
    """Where the SSD WAF column comes from and what it can show on the device measured."""
    notes = []
    measured = cells[numeric(cells, "waf").notna()]
    if len(measured):
        notes.append(
            "SSD WAF = media bytes written / host bytes written during the cell, from the "
            "device's FDP statistics log page (its endurance group); both counters and the "
            "media bytes erased are in the CSV (fdp_media_bytes_written, "
            "fdp_host_bytes_written, fdp_media_bytes_erased).")
        erased = numeric(measured, "fdp_media_bytes_erased")
        if erased.notna().all() and (erased == 0).all():
            notes.append(
                "No cell erased any media (fdp_media_bytes_erased = 0 in every cell with a WAF): "
                "the device ran no garbage collection. QEMU's FDP emulation (the smoke and ci "
                "profiles' device) has none, so its WAF is 1.00 up to rounding by construction; "
                "the excess in the third decimal is QEMU's accounting: when a write fills the "
                "rest of a reclaim unit, QEMU counts that part a second time as media bytes "
                "written (hw/nvme/ctrl.c, nvme_do_write_fdp -> nvme_update_ruh).")
        elif (erased > 0).any():
            notes.append(
                f"The device erased media (fdp_media_bytes_erased > 0) in {(erased > 0).sum()} "
                f"of {len(measured)} cells with a WAF: garbage collection ran there.")
        else:
            notes.append("Media bytes erased is missing from some cells with a WAF: whether "
                         "the device ran garbage collection is not recorded for them.")
        paper = {r["policy"]: r["waf"] for r in paper_rows("table3_redis_benchmark")
                 if r["system"] == REFERENCE_SYSTEM and r.get("waf") is not None}
        if paper:
            quoted = " and ".join(f"{w:.2f} ({POLICY_LABEL.get(p, p)})" for p, w in paper.items())
            notes.append(f"The paper's baseline WAF of {quoted} comes from FEMU, which models "
                         "garbage collection; a device without it cannot show that difference.")
    if "bare" in set(cells.testbed):
        notes.append("SSD WAF is n/a on the bare testbed: it needs the FDP statistics log of "
                     "the VM's emulated device.")
    return notes
