"""A motivation cell's raw directory (:mod:`slimio_repro.agent.motivation_cells`) as one record.

Per scenario (``snapshot_only``, ``snapshot_wal``; metric names ``mot_<scenario>_...``):

* ``time_s``: the snapshot's duration (BGSAVE to the child's last log line), ``bytes`` what
  it wrote and ``write_mb_s`` their rate (Figure 2b's snapshot throughput);
* from the child's CPU profile (:mod:`.perfprofile`): ``cpu_s`` its sampled CPU time (all
  its threads; ``other_threads_cpu_s`` that of all but its main one: SlimIO's completion
  thread); of its main thread, which serialises the snapshot, ``in_memory_s`` the part
  outside the kernel I/O path, ``kernel_io_s`` the part inside it, ``offcpu_s`` the rest of
  the duration (the thread waiting: on the device, the page cache's writeback, locks, or a
  CPU), Figure 2a's three parts; ``kernel_io_share_pct`` the kernel I/O path's share of the
  duration (§3.1.1: "15 % of the snapshot duration");
* from the scheduler's events (:mod:`.schedtrace`), the main thread's off-CPU time by why:
  ``blocked_io_s`` (uninterruptible sleep: I/O, the device's time as the thread sees it),
  ``asleep_s`` (other sleeps: locks) and ``cpu_wait_s`` (runnable, waiting for a CPU);
  ``fs_write_path_cpu_pct`` the file system's write path over the child's CPU (Table 2) and
  ``fs_control_cpu_pct`` the same without the data copy;
* Snapshot & WAL only: the WAL's rate (MB/s) and the server's commands per second before
  the snapshot (``mot_wal_write_mb_s_before_snapshot``, ``mot_rps_before_snapshot``) and
  during it (``..._during_snapshot``), and whether writes arrived until its end
  (``mot_writes_covered_snapshot``).

A SlimIO cell also has ``mot_ideal_*``: its BGSAVE into the discard sink (no I/O).
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from ..agent import layout, motivation_cells
from . import perfprofile, schedtrace
from .record import ParseError, run_environment

MB = 1e6


def metric_prefix(scenario: str) -> str:
    return "mot_" + scenario.replace("-", "_")


def _rate(a: dict, b: dict, key: str) -> float | None:
    dt = b["unix_s"] - a["unix_s"]
    return (b[key] - a[key]) / dt if dt > 0 else None


def parse_motivation_cell(raw: Path) -> dict:
    raw = Path(raw)
    for name in (layout.RAW_PROVENANCE, motivation_cells.SCENARIOS_FILE):
        if not (raw / name).is_file():
            raise ParseError(f"{raw} is not a complete motivation cell (no {name})")
    prov = json.loads((raw / layout.RAW_PROVENANCE).read_text())
    got = json.loads((raw / motivation_cells.SCENARIOS_FILE).read_text())
    fs = got.get("filesystem") or "raw"
    device = json.loads((raw / layout.RAW_PLAN).read_text())["vm"]["device"]
    record = {"cell_id": prov["cell_id"], **prov["cell"], "profile": prov["profile"],
              **run_environment(prov), "filesystem": fs, "dbsize": got.get("dbsize"),
              "device_capacity_bytes": device["capacity_gib"] << 30,
              "device_ru_bytes": (device["reclaim_unit_size_mib"] or 64) << 20,
              "phases_s": prov.get("phases_s", {})}
    for scenario in motivation_cells.SCENARIOS:
        s = got["scenarios"][scenario]
        pre = metric_prefix(scenario)
        perf = raw / motivation_cells.PERF_FILE.format(scenario=scenario)
        text = gzip.decompress(perf.read_bytes())
        try:
            samples = perfprofile.parse(text.decode(errors="replace"))
            kind = fs if fs in perfprofile.FS_PREFIXES else "raw"
            att = perfprofile.attribute(samples, kind, s["child_pid"])
            # The time split follows the child's main thread, which serialises the
            # snapshot (SlimIO's child has a second one that completes and checksums).
            main = perfprofile.attribute(samples, kind, s["child_pid"], s["child_pid"])
        except perfprofile.PerfProfileError as exc:
            raise ParseError(f"{raw}: the {scenario} profile: {exc}") from None
        duration = s["duration_s"]
        sched = raw / motivation_cells.SCHED_FILE.format(scenario=scenario)
        if sched.is_file():     # cells recorded before the scheduler's events were
            try:
                off = schedtrace.off_cpu(gzip.decompress(sched.read_bytes()).decode(
                    errors="replace"), s["child_pid"])
            except schedtrace.SchedTraceError as exc:
                raise ParseError(f"{raw}: the {scenario} scheduler trace: {exc}") from None
            record.update({f"{pre}_blocked_io_s": off.io_s,
                           f"{pre}_asleep_s": off.asleep_s,
                           f"{pre}_cpu_wait_s": off.runqueue_s,
                           f"{pre}_switches": off.switches})
        record.update({
            f"{pre}_time_s": duration,
            f"{pre}_bytes": s["snapshot_bytes"],
            f"{pre}_write_mb_s": s["snapshot_bytes"] / duration / MB if duration else None,
            f"{pre}_samples": att.samples,
            f"{pre}_cpu_s": att.total_s,
            f"{pre}_other_threads_cpu_s": att.total_s - main.total_s,
            f"{pre}_in_memory_s": main.in_memory_s,
            f"{pre}_kernel_io_s": main.io_path_s,
            f"{pre}_offcpu_s": max(0.0, duration - main.total_s),
            f"{pre}_kernel_io_share_pct": 100 * main.io_path_s / duration if duration else None,
            f"{pre}_fs_write_path_cpu_pct": 100 * att.fs_write_share,
            f"{pre}_fs_control_cpu_pct": 100 * att.fs_control_share,
        })
        if scenario == "snapshot-wal":
            lead, lead_end, start, end = s["lead"], s["lead_end"], s["at_start"], s["at_end"]
            for when, (a, b) in (("before", (lead, lead_end)), ("during", (start, end))):
                wal = _rate(a, b, "wal_bytes")
                record[f"mot_wal_write_mb_s_{when}_snapshot"] = wal / MB if wal else wal
                record[f"mot_rps_{when}_snapshot"] = _rate(a, b, "commands")
            record["mot_writes_covered_snapshot"] = bool(s["writes_running_at_end"])
    ideal = got["scenarios"].get(motivation_cells.IDEAL)
    if ideal:
        record.update({"mot_ideal_time_s": ideal["duration_s"],
                       "mot_ideal_bytes": ideal["snapshot_bytes"],
                       "mot_ideal_mb_s": (ideal["snapshot_bytes"] / ideal["duration_s"] / MB
                                          if ideal["duration_s"] else None)})
    return record
