"""Turn one raw cell directory into a tidy record (JSON) and a time series (CSV).

Phases follow the sampler's flags: an interval between two INFO samples belongs to the
WAL&Snapshot phase when a snapshot (AOF rewrite or BGSAVE) was in progress at either end,
to the WAL-only phase otherwise. Only intervals inside the workload window count.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pandas as pd

from ..agent import benchmark, fdp, femulog, layout, redislog, ycsb_client
from ..plan import CellPlan, is_slimio
from ..agent import phases as cellphases
from ..agent import provenance
from . import nvmetrace

GB = 1e9
MB = 1e6


class ParseError(ValueError):
    pass


def _json(raw: Path, name: str):
    try:
        return json.loads((raw / name).read_text())
    except FileNotFoundError:
        raise ParseError(f"{raw} has no {name}: is it a complete cell directory?") from None


def phase_stats(samples: pd.DataFrame, start: float, end: float) -> dict:
    """RPS and peak memory per phase from the sampler's rows within [start, end]."""
    s = samples[(samples.t_unix_s >= start) & (samples.t_unix_s <= end)].sort_values("t_unix_s")
    # A snapshot runs while Redis says so or while its fork child exists: the sampler can
    # see the child (its pid and RSS) before INFO reports the rewrite or BGSAVE in progress,
    # and that sample's memory is the snapshot's, not the WAL-only phase's.
    child = s.child_rss_bytes.fillna(0) > 0
    s = s.assign(snapshot=(s.rdb_bgsave_in_progress.astype(bool)
                           | s.aof_rewrite_in_progress.astype(bool) | child),
                 mem_bytes=s.server_rss_bytes + s.child_rss_bytes)
    dt = s.t_unix_s.diff()
    dcmd = s.total_commands_processed.diff()
    in_snapshot = s.snapshot | s.snapshot.shift(1, fill_value=False)
    out = {}
    for phase, mask in (("wal_only", ~in_snapshot), ("wal_snapshot", in_snapshot)):
        mask = mask & dt.notna()
        secs = float(dt[mask].sum())
        out[f"rps_{phase}"] = float(dcmd[mask].sum()) / secs if secs > 0 else None
        out[f"{phase}_duration_s"] = round(secs, 3)
        sel = s.snapshot if phase == "wal_snapshot" else ~s.snapshot
        out[f"mem_{phase}_peak_bytes"] = int(s.mem_bytes[sel].max()) if sel.any() else None
    out["samples_in_workload"] = len(s)
    out["max_sample_gap_s"] = float(dt.max()) if len(s) > 1 else None
    return out


def server_latency_p999_ms(info: dict, command: str = "set") -> float | None:
    """Server-side p99.9 of ``command`` from INFO latencystats (cross-check of the client)."""
    stats = info.get(f"latency_percentiles_usec_{command}")
    return stats["p99.9"] / 1000 if isinstance(stats, dict) and "p99.9" in stats else None


def info_fields(text: str) -> dict:
    """``field:value`` lines of a raw INFO reply; numbers as numbers, section headers skipped."""
    out = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or ":" not in line:
            continue
        key, value = line.split(":", 1)
        for kind in (int, float):
            try:
                out[key] = kind(value)
                break
            except ValueError:
                continue
        else:
            out[key] = value
    return out


SLIMIO_RECOVERY_FIELDS = ("slimio_recovery_time_s", "slimio_recovery_bytes",
                          "slimio_recovery_mbps")


def slimio_recovery(raw: Path) -> dict:
    """What SlimIO read from its device to recover: INFO slimio, checked against its log line."""
    try:
        info = info_fields((raw / layout.RAW_SLIMIO_INFO_RECOVERY).read_text())
    except FileNotFoundError:
        raise ParseError(f"{raw} has no {layout.RAW_SLIMIO_INFO_RECOVERY}: a slimio cell with "
                         "recovery must keep INFO slimio of the recovered server") from None
    missing = [f for f in SLIMIO_RECOVERY_FIELDS if f not in info]
    if missing:
        raise ParseError(f"{raw / layout.RAW_SLIMIO_INFO_RECOVERY} lacks {', '.join(missing)}: "
                         "did the server recover from its SlimIO device?")
    line = redislog.slimio_recovery((raw / layout.RAW_RECOVERY_LOG).read_text())
    if line is None:
        raise ParseError(f"{raw / layout.RAW_RECOVERY_LOG} has no 'SlimIO recovery: loaded ...' "
                         "line: did the server recover from its SlimIO device?")
    if line["bytes"] != info["slimio_recovery_bytes"]:
        raise ParseError(f"{raw}: INFO slimio says slimio_recovery_bytes="
                         f"{info['slimio_recovery_bytes']} but the recovery log says "
                         f"{line['bytes']} bytes; the SlimIO server contradicts itself")
    return {"slimio_recovery_time_s": float(info["slimio_recovery_time_s"]),
            "slimio_recovery_bytes": int(info["slimio_recovery_bytes"]),
            "slimio_recovery_mb_s": float(info["slimio_recovery_mbps"]),
            # The loader's wait for the device (None in logs older than the field).
            "slimio_recovery_wait_s": line["wait_s"]}


def device_records(raw: Path, lba_size_bytes: int, slimio_storage: dict | None = None) -> dict:
    """A cell on an NVMe namespace (vm, or bare on a device): the FDP statistics delta, the NVMe command trace's summary, the placement
    check of a SlimIO cell's trace, and the device roofline.

    WAF = media / host bytes written over the cell (FDP statistics log page). QEMU's NVMe
    emulation has no garbage collection, so there it is ~1.0 by construction; FEMU's is not.
    ``slimio_storage`` is the cell's provenance ``storage.slimio`` (placement ids); with it,
    every traced write is checked against the placement its LBA region expects
    (:func:`nvmetrace.check_placement`): ``nvme_trace_placement_ok``.
    """
    out: dict = {}
    before, after = raw / layout.RAW_FDP_STATS_BEFORE, raw / layout.RAW_FDP_STATS_AFTER
    if before.exists() and after.exists():
        delta = fdp.stats_delta(fdp.parse_stats(before.read_text(), str(before)),
                                fdp.parse_stats(after.read_text(), str(after)))
        out.update({"fdp_host_bytes_written": delta["host_bytes_written"],
                    "fdp_media_bytes_written": delta["media_bytes_written"],
                    "fdp_media_bytes_erased": delta["media_bytes_erased"],
                    "waf": delta["waf"]})
    trace = raw / layout.RAW_TRACE
    if trace.exists():
        summary = nvmetrace.summarize(trace, lba_size_bytes)
        stats = _json(raw, layout.RAW_TRACE_STATS)
        by_pid = summary["writes_per_placement_id"]
        out.update({
            "nvme_trace_write_commands": summary["write_commands"],
            "nvme_trace_write_bytes": summary["write_bytes"],
            "nvme_trace_read_bytes": summary["read_bytes"],
            "nvme_trace_flush_commands": summary["flush_commands"],
            "nvme_trace_fua_write_commands": summary["fua_write_commands"],
            "nvme_trace_events_lost": stats["events_lost"] + summary["trace_pipe_lost_events"],
            # Placement ids the writes carried ("none" = no FDP directive), and their bytes.
            "nvme_trace_placement_ids": ";".join(sorted(by_pid)),
            **{f"nvme_trace_write_bytes_pid_{pid}": v["write_bytes"]
               for pid, v in sorted(by_pid.items())},
        })
        inspect_after = raw / layout.RAW_SLIMIO_INSPECT_AFTER
        if slimio_storage and "placement_ids" in slimio_storage and inspect_after.exists():
            check = nvmetrace.check_placement(
                trace, nvmetrace.slimio_regions(_json(raw, layout.RAW_SLIMIO_INSPECT_AFTER),
                                                slimio_storage["placement_ids"]),
                lba_size_bytes)
            out["nvme_trace_placement_ok"] = check["ok"]
            out["nvme_trace_placement_mismatched_writes"] = check["mismatched_writes"]
            for region, per_pid in check["write_bytes_per_region"].items():
                out[f"nvme_trace_{region}_write_bytes"] = sum(per_pid.values())
                out[f"nvme_trace_{region}_placement_ids"] = ";".join(sorted(per_pid))
    if (raw / layout.RAW_ROOFLINE).exists():
        roof = _json(raw, layout.RAW_ROOFLINE)
        out.update({"roofline_seq_write_mb_s": roof["seq_write_mb_s"],
                    "roofline_seq_write_bytes": roof["seq_write_bytes"],
                    "roofline_block_size_bytes": roof["block_size_bytes"],
                    "roofline_iodepth": roof["iodepth"],
                    "roofline_placement_id": roof["placement_id"],
                    "roofline_fio_version": roof["fio_version"]})
    return out


def benchmark_records(raw: Path, settings: dict) -> tuple[dict, list[dict]]:
    """redis-benchmark's numbers (SET only) and its per-interval throughput."""
    bench = benchmark.parse((raw / layout.RAW_BENCHMARK).read_text())
    return {
        "clients": settings["clients"], "requests": settings["requests"],
        "keyspace": settings["keyspace"],
        "requests_completed": bench["requests_completed"],
        "workload_duration_s": bench["duration_s"],
        "rps_avg": bench["rps"],
        "set_p999_ms": bench["p999_ms"], "set_p99_ms": bench["p99_ms"],
        "set_avg_ms": bench["avg_ms"], "set_max_ms": bench["max_ms"],
    }, bench["intervals"]


def _ms(us) -> float | None:
    return us / 1000 if us is not None else None


def ycsb_records(raw: Path, settings: dict,
                 prov: dict) -> tuple[dict, list[dict], float | None]:
    """YCSB-A's numbers: the run phase's throughput and per-operation latencies (GET = READ,
    SET = UPDATE, from YCSB's HdrHistogram), the load phase's, the run phase's status
    intervals, and when its operations began (:func:`ycsb_client.test_started`). A phase with any operation that did not return OK is refused: a GET that
    finds no value means the load or the server lost a record."""
    phases = {}
    for phase in ycsb_client.PHASES:
        path = raw / layout.RAW_YCSB_STDOUT.format(phase=phase)
        expected = settings["records"] if phase == "load" else settings["operations"]
        try:
            phases[phase] = ycsb_client.parse_summary(path.read_text(), str(path))
            ycsb_client.verify(phases[phase], phase, expected, str(path))
        except FileNotFoundError:
            raise ParseError(f"{raw} has no {path.name}: is it a complete ycsb-a cell?") \
                from None
        except ycsb_client.YcsbError as exc:
            raise ParseError(str(exc)) from None
    run, load = phases["run"]["operations"], phases["load"]["operations"]
    get, put, ins = run.get("READ", {}), run.get("UPDATE", {}), load.get("INSERT", {})
    done = get.get("operations", 0) + put.get("operations", 0)
    status_text = (raw / layout.RAW_YCSB_STATUS.format(phase="run")).read_text()
    status = ycsb_client.parse_status(status_text)
    info = _json(raw, layout.RAW_INFO_END)
    return {
        "clients": settings["threads"], "requests": settings["operations"],
        "keyspace": settings["records"],
        "requests_completed": done,
        "workload_duration_s": phases["run"]["overall"]["runtime_ms"] / 1000,
        "rps_avg": phases["run"]["overall"]["throughput_ops_s"],
        "get_operations": get.get("operations", 0), "set_operations": put.get("operations", 0),
        "set_p999_ms": _ms(put.get("p99_9_us")), "set_p99_ms": _ms(put.get("p99_us")),
        "set_avg_ms": _ms(put.get("avg_us")), "set_max_ms": _ms(put.get("max_us")),
        "get_p999_ms": _ms(get.get("p99_9_us")), "get_p99_ms": _ms(get.get("p99_us")),
        "get_avg_ms": _ms(get.get("avg_us")), "get_max_ms": _ms(get.get("max_us")),
        "server_get_p999_ms": server_latency_p999_ms(info, "get"),
        "load_records": ins["operations"],
        "load_duration_s": phases["load"]["overall"]["runtime_ms"] / 1000,
        "load_rps": phases["load"]["overall"]["throughput_ops_s"],
        "load_set_p999_ms": _ms(ins.get("p99_9_us")),
        "ycsb_status_intervals": len(status),
        "ycsb_client_host": prov["ycsb"]["client_host"],
        "ycsb_core_version": prov["ycsb"]["build"]["ycsb_core_version"],
        "java_version": prov["ycsb"]["java"],
    }, ycsb_client.intervals(status), ycsb_client.test_started(status_text)


def phase_times(prov: dict) -> dict:
    """Where the cell's time went (provenance ``phases_s``): ``phase_<name>_s`` for every
    phase in :data:`cellphases.ORDER` (None where the cell had no such phase) and
    ``cell_total_s`` (the vm testbed's wall time from boot to teardown; the sum of the
    phases on bare). Cells made before phases were recorded have None throughout."""
    got = prov.get("phases_s")
    out = {f"phase_{k}_s": (got or {}).get(k) for k in cellphases.ORDER}
    total = prov.get("cell_total_s")
    if total is None and got:
        total = round(sum(got.values()), 3)
    out["cell_total_s"] = total
    return out


def settings(raw: Path, workload: str) -> tuple[dict, dict]:
    """The cell's workload settings and derived numbers: from its plan (``plan.json``), or,
    for cells made before the plan existed, from ``effective-config.json``."""
    if (raw / layout.RAW_PLAN).exists():
        plan = CellPlan.from_json((raw / layout.RAW_PLAN).read_text())
        derived = {"auto_aof_rewrite_min_size_bytes":
                   plan.sizing.auto_aof_rewrite_min_size_bytes,
                   **(plan.slimio.layout() if plan.slimio else {})}
        return dataclasses.asdict(plan.workload), derived
    eff = _json(raw, layout.RAW_CONFIG)
    return eff["config"]["workloads"][workload], eff["derived"]


# The device model of a bare cell on testbeds.bare.device: a real NVMe SSD.
NAMED_DEVICE_MODEL = "nvme-ssd"


def run_environment(prov: dict) -> dict:
    """Where the cell ran, for judging which claims it can speak to: the accelerator (native on
    bare; kvm or tcg in a VM: absolute numbers only transfer from native or KVM), the device
    model (the emulator of the vm testbed's SSD, whose garbage collection decides what its WAF
    can show; on bare a loop-mounted image, or :data:`NAMED_DEVICE_MODEL`) and the physical
    host (ratios are only formed
    between cells of alike hosts)."""
    vm = prov.get("vm")
    host = vm["host"] if vm else prov["host"]
    # The node and its SLURM job (cells recorded before nodes were: the host, no job).
    node = (vm or prov).get("node") or {"class": provenance.node_class(host), "slurm": None}
    slurm = node["slurm"] or {}
    return {
        "accel": vm["accel"] if vm else "native",
        "device_model": (vm["device_profile"]["emulator"] if vm else
                         NAMED_DEVICE_MODEL if prov["storage"].get("namespace") else
                         "loop-image"),
        "host_name": host["hostname"],
        "host_cpu_model": host["cpu_model"],
        "node_class": node["class"],
        "slurm_job_id": slurm.get("job_id"),
        "slurm_cluster": slurm.get("cluster"),
    }


def parse_cell(raw: Path) -> tuple[dict, pd.DataFrame]:
    raw = Path(raw)
    if not (raw / layout.RAW_COMPLETE).exists():
        raise ParseError(f"{raw} is not a complete cell (no {layout.RAW_COMPLETE})")
    prov = _json(raw, layout.RAW_PROVENANCE)
    workload_cfg, derived = settings(raw, prov["cell"]["workload"])
    events = _json(raw, layout.RAW_EVENTS)
    device = _json(raw, layout.RAW_DEVICE_STATS)
    samples = pd.read_csv(raw / layout.RAW_SAMPLER)
    log = (raw / layout.RAW_REDIS_LOG).read_text()
    snaps = redislog.snapshots(log)
    w0, w1 = events["workload"]["start_unix_s"], events["workload"]["end_unix_s"]
    if prov["cell"]["workload"] == "ycsb-a":
        client, intervals, started = ycsb_records(raw, workload_cfg, prov)
        # The run phase starts when YCSB starts its client threads, not when its JVM does:
        # under TCG the JVM takes seconds to get there, which are no part of the workload.
        w0 = started or w0
    else:
        client, intervals = benchmark_records(raw, workload_cfg)

    wal = [s for s in snaps if s["kind"] == "wal_snapshot" and s["ok"]]
    od = [s for s in snaps if s["kind"] == "on_demand_snapshot" and s["ok"]]
    bound = [s for s in snaps if s["kind"] == "snapshot_bound" and s["ok"]]
    ok_durations = [s["duration_s"] for s in wal + od]
    od_bytes = events.get("on_demand_snapshot", {}).get("bytes")
    slim_storage = prov["storage"].get("slimio")
    record = {
        "cell_id": prov["cell_id"], **prov["cell"], "profile": prov["profile"],
        "filesystem": prov["storage"].get("filesystem"),
        # SlimIO systems: the backend (nvme = passthru, file = io_uring + O_DIRECT) and device.
        "slimio_backend": slim_storage["backend"] if slim_storage else None,
        "slimio_device": slim_storage["device_file"] if slim_storage else None,
        "redis_version": prov["redis_build"]["redis_version"],
        **run_environment(prov),
        "key_size_bytes": workload_cfg["key_size_bytes"],
        "value_size_bytes": workload_cfg["value_size_bytes"],
        **client,
        **phase_stats(samples, w0, w1),
        "wal_snapshot_count": len(wal),
        "wal_snapshot_time_s": (sum(s["duration_s"] for s in wal) / len(wal)) if wal else None,
        "on_demand_snapshot_count": len(od),
        "on_demand_snapshot_time_s": od[-1]["duration_s"] if od else None,
        "on_demand_snapshot_bytes": od_bytes,
        "on_demand_snapshot_mb_s": (od_bytes / MB / od[-1]["duration_s"]
                                    if od and od_bytes and od[-1]["duration_s"] else None),
        "snapshot_time_s": sum(ok_durations) / len(ok_durations) if ok_durations else None,
        # From the fork to the child's last log line (the parent notices the end up to a
        # serverCron later), and SlimIO's BGSAVE into nothing, timed alike: the no-I/O bound.
        "on_demand_snapshot_child_s": od[-1].get("child_duration_s") if od else None,
        "snapshot_bound_s": bound[-1].get("child_duration_s") if bound else None,
        "snapshot_bound_bytes": bound[-1]["bytes"] if bound else None,
        "failed_snapshot_count": sum(not s["ok"] for s in snaps),
        "server_set_p999_ms": server_latency_p999_ms(_json(raw, layout.RAW_INFO_END)),
        "device_write_bytes_workload": device["write_bytes_workload"],
        "device_write_bytes_total": device["write_bytes_total"],
        "auto_aof_rewrite_min_size_bytes": derived["auto_aof_rewrite_min_size_bytes"],
        # System slimio: the layout it formatted (WAL, slot, LBA and device sizes).
        **{k: v for k, v in derived.items() if k.startswith("slimio_")},
        # Needs a device with an FDP log (device_records); none on an image.
        "waf": None,
        "utc_start": prov["utc_start"], "utc_end": prov["utc_end"],
        "git_commit": prov["git"]["commit"], "git_dirty": prov["git"]["dirty"],
    }
    for phase in ("wal_only", "wal_snapshot"):
        peak = record[f"mem_{phase}_peak_bytes"]
        record[f"mem_{phase}_peak_gb"] = peak / GB if peak is not None else None
    if prov["cell"]["testbed"] == "vm" or prov["storage"].get("namespace"):
        record.update(device_records(raw, prov["storage"]["logical_block_size_bytes"],
                                     slim_storage))
        # FEMU prints a line per GC round (QEMU collects no garbage: None).
        emulator = raw / layout.RAW_EMULATOR_LOG
        record["device_gc_rounds"] = (
            femulog.gc_rounds(emulator.read_text(errors="replace"))["gc_rounds"]
            if record["device_model"] == "femu" and emulator.exists() else None)
    if (raw / layout.RAW_RECOVERY).exists():
        rec = _json(raw, layout.RAW_RECOVERY)
        load = rec["load_time_s"]
        # What the server loaded: the AOF's files (base + increments) for the baseline, what
        # SlimIO read from its device (the snapshot slot + the WAL) for slimio.
        loaded = rec["aof_bytes"]
        if is_slimio(prov["cell"]["system"]):
            slim = slimio_recovery(raw)
            record.update(slim)
            loaded = slim["slimio_recovery_bytes"]
        record.update({
            "recovery_time_s": load, "recovery_wall_s": rec["startup_wall_s"],
            "recovery_bytes": loaded,
            "recovery_mb_s": loaded / MB / load if load else None,
            "recovery_device_read_bytes": rec["device_read_bytes"],
            "recovery_verified": rec["verified"], "recovery_dbsize": rec["dbsize_after"],
        })
    record.update(phase_times(prov))
    # The workload's snapshots (the figures shade them); the bound's BGSAVE into nothing is
    # a measurement taken after them, in snapshot_bound_s.
    record["snapshots"] = [{"kind": s["kind"], "start_s": round(s["start_unix_s"] - w0, 3),
                            "end_s": round(s["end_unix_s"] - w0, 3), "ok": s["ok"]}
                           for s in snaps if s["kind"] != "snapshot_bound"]
    return record, timeseries(intervals, samples, w0)


def timeseries(intervals: list[dict], samples: pd.DataFrame, t0: float) -> pd.DataFrame:
    """Client per-interval RPS, joined with the nearest earlier sampler row."""
    client = pd.DataFrame(intervals, columns=["t_unix_s", "rps", "avg_ms"])
    s = samples.sort_values("t_unix_s").assign(
        mem_bytes=samples.server_rss_bytes + samples.child_rss_bytes)
    s = s[["t_unix_s", "mem_bytes", "aof_rewrite_in_progress", "rdb_bgsave_in_progress",
           "instantaneous_ops_per_sec"]]
    merged = pd.merge_asof(client.sort_values("t_unix_s"), s, on="t_unix_s",
                           direction="backward")
    merged.insert(0, "t_s", (merged.t_unix_s - t0).round(3))
    return merged.rename(columns={"rps": "client_rps", "avg_ms": "client_avg_ms",
                                  "instantaneous_ops_per_sec": "server_ops_per_sec"})


def write(raw: Path, record_path: Path, series_path: Path) -> dict:
    record, series = parse_cell(raw)
    record_path.parent.mkdir(parents=True, exist_ok=True)
    record_path.write_text(json.dumps(record, indent=2) + "\n")
    series.to_csv(series_path, index=False)
    return record
