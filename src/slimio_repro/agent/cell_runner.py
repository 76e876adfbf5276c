"""Run one cell of the matrix and write its raw directory.

On the bare testbed this runs on the host, on a fresh loop-mounted file-system image, or on
the NVMe namespace ``testbeds.bare.device`` names (:mod:`.nameddevice`). On the vm testbed
the same function runs inside the cell's own VM (started by :mod:`.vm`), on the emulated
NVMe namespace the guest was provisioned with (:mod:`.provision`). On a namespace it also
records the device's FDP statistics, NVMe command trace and roofline.

A cell is self-contained: it gets its own storage, server, port and output
directory, so it can run on any node. Everything is written under ``<raw>.partial`` and
renamed to ``<raw>`` only when the cell completed, so an interrupted or failed cell leaves
nothing that looks like a result, and a rerun redoes exactly that cell.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import time
from contextlib import contextmanager
from pathlib import Path

from . import (benchmark, diskspace, fsimage, layout, nameddevice, provenance, provision,
               redislog, slimio, vmstorage, ycsb_client)
from .phases import Phases
from ..plan.cellplan import Cell, CellPlan
from .sampler import Sampler
from .server import RedisServer, free_port, render_conf


class CellError(RuntimeError):
    pass


def _write_json(path: Path, data) -> None:
    path.write_text(json.dumps(data, indent=2, sort_keys=False) + "\n")


def sampled_keys(cell: Cell, workload, count: int) -> list[str]:
    """Keys compared value by value after recovery; deterministic per cell. Both workloads
    name their keys by number, zero-padded to the key size (redis-benchmark's patched
    --key-width, the YCSB binding's redis.keylength with ordered record numbers)."""
    rng = random.Random(cell.id)
    space = workload.distinct_keys
    n = min(count, space)
    width = workload.key_size_bytes
    return [str(k).zfill(width) for k in sorted(rng.sample(range(space), n))]


def fingerprint(client, keys: list[str]) -> dict:
    """DEBUG DIGEST, DBSIZE and value hashes of ``keys``: what recovery must reproduce."""
    values = {}
    for k in keys:
        v = client.execute_command("GET", k)
        values[k] = None if v is None else hashlib.sha256(v.encode()).hexdigest()
    return {"digest": client.execute_command("DEBUG", "DIGEST"),
            "dbsize": client.dbsize(), "sampled_values_sha256": values}


def _dir_bytes(directory: Path) -> int:
    return sum(p.stat().st_size for p in directory.rglob("*") if p.is_file())


def run(plan: CellPlan, out_dir: Path, expect_box_id: str | None = None,
        expect_kernel: str | None = None, attempt: int = 1, blank_at: int = 0) -> Path:
    """Run the cell ``plan`` describes; write its raw directory ``out_dir`` (never overwritten).

    A vm cell first provisions its guest (:mod:`.provision`), which checks that the guest is
    the box ``expect_box_id`` with kernel ``expect_kernel`` (what the host booted), that its
    device is the one the plan's profile describes, and that its namespace was not written
    since it was made blank (its FDP statistics' host bytes then: ``blank_at``)."""
    cell, workload, server_plan = plan.cell, plan.workload, plan.server
    # Absolute paths: redis-server changes into its data directory before opening its log.
    out_dir, bin_dir = out_dir.resolve(), Path(plan.redis_bin_dir).resolve()
    if cell.testbed == "vm" and not vmstorage.inside_guest(plan.vm):
        raise CellError(f"cell {cell.id} runs inside its VM, and this machine has no "
                        f"{plan.vm.namespace}: run it through the "
                        "pipeline (snakemake), which starts the VM")
    if out_dir.exists():
        raise CellError(f"{out_dir} already exists; refusing to overwrite a finished cell "
                        "(delete it to run the cell again)")
    if not (bin_dir / "redis-server").is_file():
        raise CellError(f"{bin_dir} has no redis-server: build it first "
                        "(`snakemake --cores all build_redis`)")
    is_slimio = plan.is_slimio
    admin = bin_dir / layout.SLIMIO_ADMIN
    if is_slimio and not admin.is_file():
        raise CellError(f"{bin_dir} has no {layout.SLIMIO_ADMIN}: is it a slimio build? "
                        "Build it with `snakemake --cores all build_redis`")
    ycsb_dir = None
    if cell.workload == "ycsb-a":
        ycsb_dir = Path(plan.ycsb_dir)
        if not (ycsb_dir / "build.json").is_file():
            raise CellError(f"{ycsb_dir} has no build.json: build the YCSB binding first "
                            "(`snakemake --cores all build_ycsb`)")
    partial = out_dir.with_name(out_dir.name + ".partial")
    if partial.exists():
        fsimage.cleanup_stale(partial)
        shutil.rmtree(partial)
    if cell.testbed == "bare":     # its disks hold what it writes (a vm cell's host checked)
        diskspace.check_cell(plan, out_dir)
    partial.mkdir(parents=True)
    (partial / layout.RAW_PLAN).write_text(plan.to_json())
    prov = {"cell": cell.wildcards(), "cell_id": cell.id, "profile": plan.profile,
            "plan_sha256": plan.sha256(), "attempt": attempt,
            "utc_start": provenance.utc_now(), "host": provenance.host(),
            # The node (and SLURM job) it ran on; in a VM, the host's (testbed.vm).
            "node": provenance.node() if cell.testbed == "bare" else None,
            # A vm cell's guest has a copy of the sources, not the checkout: the host records
            # its git state (testbed.vm).
            "git": provenance.git() if cell.testbed == "bare" else None,
            "tools": provenance.tools(bin_dir),
            "redis_build": json.loads((bin_dir.parent / "build.json").read_text())}
    if ycsb_dir is not None:
        # The client runs where the server runs (in the guest on the vm testbed, as the
        # paper's clients did), over loopback.
        prov["ycsb"] = {"build": json.loads((ycsb_dir / "build.json").read_text()),
                        "java": provenance.java(),
                        "client_host": "guest" if cell.testbed == "vm" else "host",
                        "workload_file": str(ycsb_dir / ycsb_client.WORKLOAD_FILE)}
    commands, events, device = [], {}, {}
    servers: list[RedisServer] = []
    keys = sampled_keys(cell, workload, plan.recovery.sampled_keys)

    def start_server(conf_name: str, log_name: str) -> RedisServer:
        block = slimio.conf_block(plan.slimio, device_file, trace_marker) \
            if is_slimio else ""
        render_conf(partial / conf_name, port=port, data_dir=data_dir,
                    log_file=partial / log_name, appendfsync=plan.sizing.appendfsync,
                    appendonly=plan.persists,
                    auto_aof_rewrite_percentage=plan.sizing.auto_aof_rewrite_percentage,
                    auto_aof_rewrite_min_size=plan.sizing.auto_aof_rewrite_min_size_bytes,
                    slimio_block=block)
        server = RedisServer(bin_dir, partial / conf_name, port, partial / log_name)
        servers.append(server)
        commands.append({"what": conf_name, "argv": server.command})
        server.start(server_plan.start_timeout_s)
        return server

    sampler = monitor = None
    named = plan.bare.device if plan.bare is not None else None
    # The NVMe namespace the cell runs on (vm, or bare on a named device); None: an image.
    nvme = plan.vm if cell.testbed == "vm" else named
    if named is not None:
        nvme = named = nameddevice.with_mountpoint(named, partial / "mnt")
    # SlimIO writes each range it deallocates into the device trace (passthru bypasses the
    # block layer, whose discard events carry F2FS's ranges).
    trace_marker = vmstorage.TRACE_MARKER if nvme is not None else None
    phases = Phases()
    phase = phases.phase
    if nvme is not None:
        # The device trace and the FDP statistics start after provisioning's checks and
        # before its first write (mkfs), so they hold every write the namespace received.
        monitor = vmstorage.DeviceMonitor(nvme, partial)

        trace_on_s = []

        def trace_on():
            t0 = time.monotonic()
            monitor.start()
            trace_on_s.append(time.monotonic() - t0)
        try:
            with phase("provision"):
                if named is not None:
                    prov["provision"] = nameddevice.provision(
                        named, cell.system, plan.slimio, Path(named.mountpoint), partial,
                        before_changes=trace_on)
                else:
                    prov["provision"] = provision.provision(
                        plan.vm, cell.system, partial, expect_box_id, expect_kernel,
                        blank_at=blank_at, before_changes=trace_on)
        except BaseException:
            monitor.cancel()
            if named is not None and os.path.ismount(named.mountpoint):
                fsimage.unmount(Path(named.mountpoint))
            raise
        # Starting the trace is its own phase, not provisioning's.
        phases.add("trace_fdp", sum(trace_on_s))
        phases.add("provision", -sum(trace_on_s))
    t_storage = time.monotonic()
    with storage(plan, partial) as fs:
        try:
            # The storage itself (a fresh image on bare) is made on entering the block.
            phases.add("device_prepare", time.monotonic() - t_storage)
            with phase("device_prepare"):
                prov["storage"] = fs.describe()
                data_dir = fs.data_parent / "data"
                data_dir.mkdir()
                device_file = fs.slimio_device
                if is_slimio:
                    prov["storage"]["slimio"] = slimio.prepare(
                        admin, device_file, plan.slimio, commands, partial, trace_marker)
                port = free_port()
            device["write_bytes_at_start"] = fs.write_bytes()
            with phase("server_start"):
                server = start_server(layout.RAW_REDIS_CONF, layout.RAW_REDIS_LOG)
                sampler = Sampler(port, server.pid, partial / layout.RAW_SAMPLER,
                                  server_plan.sampler_interval_s)
                sampler.start()
            if ycsb_dir is not None:
                events.update(run_ycsb(ycsb_dir, port, workload, partial, commands,
                                       fs, device, phase))
            else:
                with phase("workload"):
                    cmd = benchmark.command(bin_dir, port, workload)
                    commands.append({"what": "workload", "argv": cmd})
                    events["workload"] = benchmark.run(
                        cmd, partial / layout.RAW_BENCHMARK,
                        partial / layout.RAW_BENCHMARK_ERR, workload.timeout_s)
            device["write_bytes_after_workload"] = fs.write_bytes()
            with phase("snapshots"):
                server.wait_idle(server_plan.snapshot_timeout_s)
                events["snapshots_idle_unix_s"] = time.time()
                if workload.on_demand_snapshot:
                    t0 = time.time()
                    server.bgsave(server_plan.snapshot_timeout_s)
                    events["on_demand_snapshot"] = {"start_unix_s": t0,
                                                    "end_unix_s": time.time()}
                    # Its size: the RDB file, or the On-Demand slot SlimIO just promoted.
                    events["on_demand_snapshot"]["bytes"] = (
                        int(server.client().info("slimio")["slimio_last_snapshot_bytes"])
                        if is_slimio else (data_dir / "dump.rdb").stat().st_size)
                    if cell.system == "slimio":
                        # The snapshot's no-I/O bound (the tables hold every system's
                        # snapshot against it): the same BGSAVE serialised into nothing.
                        t0 = time.time()
                        slimio.discard_bgsave(server, server_plan.snapshot_timeout_s)
                        events["snapshot_bound"] = {"start_unix_s": t0,
                                                    "end_unix_s": time.time()}
            with phase("shutdown"):
                sampler.stop()
                cli = server.client()
                _write_json(partial / layout.RAW_INFO_END, cli.info("everything"))
                if is_slimio:
                    (partial / layout.RAW_SLIMIO_INFO_END).write_text(
                        server.info_raw("slimio"))
                before = fingerprint(cli, keys)
                server.shutdown()
                device["write_bytes_at_shutdown"] = fs.write_bytes()
                if is_slimio:
                    # What the recovery starts from: the slots and live WAL generations.
                    slimio.inspect(admin, device_file, plan.slimio.lba_size_bytes,
                                   partial / layout.RAW_SLIMIO_INSPECT_AFTER)
            if plan.recovery.enabled:
                with phase("recovery"):
                    _write_json(partial / layout.RAW_RECOVERY,
                                recover(fs, data_dir, plan, before, keys, start_server,
                                        partial))
            if monitor is not None:
                with phase("trace_fdp"):
                    monitor.stop()
            device["block_device"] = fs.block_device
            device["data_dir_bytes"] = _dir_bytes(data_dir)
            if is_slimio:
                device["slimio_device_bytes"] = prov["storage"]["slimio"]["device_bytes"]
            if nvme is not None and nvme.roofline.enabled:
                with phase("roofline"):
                    # Last: it overwrites the namespace, whose trace and statistics are
                    # closed.
                    fs.release()
                    prov["roofline"] = vmstorage.roofline(
                        nvme, partial, plan.slimio.placement_ids if is_slimio else None,
                        commands, fio_bin=named.fio_bin if named is not None
                        else layout.GUEST_FIO)
            t_teardown = time.monotonic()
        except BaseException:
            # Stop what runs on the file system, so that it can be unmounted.
            if sampler is not None:
                sampler.cancel()
            if monitor is not None:
                monitor.cancel()
            for s in servers:
                s.kill()
            raise
    phases.add("teardown", time.monotonic() - t_teardown)
    device["write_bytes_workload"] = (device["write_bytes_after_workload"]
                                      - device["write_bytes_at_start"])
    device["write_bytes_total"] = (device["write_bytes_at_shutdown"]
                                   - device["write_bytes_at_start"])
    prov["utc_end"] = provenance.utc_now()
    prov["phases_s"] = phases.as_dict()
    prov["redis_log_version"] = redislog.version((partial / layout.RAW_REDIS_LOG).read_text())
    _write_json(partial / layout.RAW_COMMANDS, commands)
    _write_json(partial / layout.RAW_EVENTS, events)
    _write_json(partial / layout.RAW_DEVICE_STATS, device)
    _write_json(partial / layout.RAW_PROVENANCE, prov)
    # The mount point is empty by now (rmdir, never rmtree: a file system still mounted
    # there fails the cell instead of being emptied); a named device's scratch holds the
    # SlimIO cell's own small files.
    if (partial / "mnt").is_dir():
        (partial / "mnt").rmdir()
    if (partial / "scratch").is_dir():
        shutil.rmtree(partial / "scratch")
    (partial / layout.RAW_COMPLETE).write_text(prov["utc_end"] + "\n")
    partial.rename(out_dir)
    return out_dir


def run_ycsb(ycsb_dir: Path, port: int, workload, partial: Path, commands: list,
             fs, device: dict, timed) -> dict:
    """YCSB-A's load phase (the records), then its run phase (the operations), each one JVM
    against the cell's server, each timed by ``timed`` (:meth:`Phases.phase`) as the cell's
    load and workload. Returns their events; the run phase is the cell's workload."""
    events = {}
    for phase in ycsb_client.PHASES:
        name = "load" if phase == "load" else "workload"
        with timed(name):
            cmd = ycsb_client.command(ycsb_dir, phase, port, workload,
                               partial / layout.RAW_YCSB_HDR_PREFIX.format(phase=phase))
            commands.append({"what": f"ycsb {phase}", "argv": cmd})
            stdout = partial / layout.RAW_YCSB_STDOUT.format(phase=phase)
            events[name] = ycsb_client.run(
                cmd, stdout, partial / layout.RAW_YCSB_STATUS.format(phase=phase),
                workload.timeout_s, phase)
            ycsb_client.verify(ycsb_client.parse_summary(stdout.read_text(), str(stdout)), phase,
                        workload.records if phase == "load" else workload.operations,
                        str(stdout))
        if phase == "load":
            device["write_bytes_after_load"] = fs.write_bytes()
    return events


@contextmanager
def storage(plan: CellPlan, partial: Path):
    """The cell's storage: a fresh image (bare), or the provisioned namespace (vm, or bare
    on a named device, whose file system is unmounted when the cell leaves it)."""
    backend = plan.slimio.backend if plan.is_slimio else None
    if plan.bare is not None and plan.bare.device is not None:
        device = nameddevice.with_mountpoint(plan.bare.device, partial / "mnt")
        scratch = partial / "scratch"
        scratch.mkdir()
        try:
            yield vmstorage.GuestStorage(device, plan.cell.system, scratch, backend)
        finally:
            if os.path.ismount(device.mountpoint):
                fsimage.unmount(Path(device.mountpoint))
        return
    if plan.cell.testbed == "bare":
        with fsimage.fresh_image(partial / "fs.img", partial / "mnt", plan.bare.filesystem,
                                 plan.sizing.image_size_bytes, plan.bare.direct_io) as fs:
            yield fs
        return
    scratch = Path(plan.vm.guest_scratch_dir) / plan.id
    if scratch.exists():
        shutil.rmtree(scratch)
    scratch.mkdir(parents=True)
    try:
        yield vmstorage.GuestStorage(plan.vm, plan.cell.system, scratch, backend)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def recover(fs, data_dir: Path, plan: CellPlan, before: dict, keys: list[str],
            start_server, partial: Path) -> dict:
    """Restart on the same data (same configuration), time the load and verify the dataset."""
    if plan.recovery.cold_cache:
        fs.remount()
    aof_bytes = _dir_bytes(data_dir / "appendonlydir")
    read_before = fs.read_bytes()
    server = start_server("redis-recovery.conf", layout.RAW_RECOVERY_LOG)
    wall = server.ready_at - server.started_at
    read_after = fs.read_bytes()
    read_bytes = None if read_before is None else read_after - read_before
    cli = server.client()
    after = fingerprint(cli, keys)
    _write_json(partial / layout.RAW_INFO_RECOVERY, cli.info("everything"))
    if plan.is_slimio:
        # slimio_recovery_time_s, _bytes, _mbps: what SlimIO read from its device.
        (partial / layout.RAW_SLIMIO_INFO_RECOVERY).write_text(server.info_raw("slimio"))
    server.shutdown()
    loads = redislog.load_times((partial / layout.RAW_RECOVERY_LOG).read_text())
    mismatched = sorted(k for k in keys if before["sampled_values_sha256"][k]
                        != after["sampled_values_sha256"][k])
    return {
        "cold_cache": plan.recovery.cold_cache,
        "startup_wall_s": round(wall, 3),
        "load_time_s": loads.get("append only file"),
        "load_times_by_file_s": loads,
        "aof_bytes": aof_bytes,
        "device_read_bytes": read_bytes,
        "digest_before": before["digest"], "digest_after": after["digest"],
        "dbsize_before": before["dbsize"], "dbsize_after": after["dbsize"],
        "sampled_keys": len(keys), "sampled_mismatches": mismatched,
        "verified": (before["digest"] == after["digest"]
                     and before["dbsize"] == after["dbsize"] and not mismatched),
    }
