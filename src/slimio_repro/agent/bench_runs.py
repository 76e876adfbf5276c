"""The bench: a quick, interleaved side-by-side of the systems under each logging policy.

``slimio-repro bench`` (:mod:`slimio_repro.run.bench`) runs this on the host (bare testbed)
or inside one VM (vm testbed). Each *run* is one system under one policy: fresh storage (a
fresh file-system image on bare; the namespace formatted again for the system in the VM),
a server with the cell's configuration, a warm-up of ``warmup_requests`` SETs (not
measured), then the measured redis-benchmark, then shutdown. Runs are interleaved: every
round runs each policy's systems back to back, in an order rotated by one each round, so
that a slow spell of a shared machine falls on every system alike and each round gives
one ratio per pair measured minutes apart at most.

No rewrite runs during a bench: the plan's rewrite trigger is above the WAL a run writes
(:func:`slimio_repro.plan.bench_plans`), so what the SETs measure is the WAL path alone,
the paper's WAL-only phase. Each run records Redis's own count of rewrites, so a run where
one happened anyway is visible. After the SETs (unless ``--wal-only``) each run takes an
On-Demand-Snapshot and recovers from its storage, and measures their bounds beside them
(:func:`run_one`, :mod:`.inmemory`). The snapshot is taken ``snapshots`` times, each beside
its bound, and the run keeps the medians (:func:`snapshot_phase`).

Standard library and redis-py only, like the rest of this sub-package.
"""

from __future__ import annotations

import dataclasses
import errno
import json
import os
import select
import shutil
import signal
import statistics
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path

from . import (benchmark, fsimage, inmemory, layout, provenance, redislog, roofline, slimio,
               vmstorage)
from ..plan.cellplan import CellPlan, on_file_system
from .provision import MOUNT_OPTIONS, mkfs_options
from .server import RedisServer, free_port, render_conf
from .vmstorage import mounted, run_tool

RUNS_FILE = "runs.jsonl"


class BenchRunError(RuntimeError):
    pass


def order(systems: list[str], round_index: int) -> list[str]:
    """The systems of round ``round_index`` (from 0): rotated by one each round."""
    k = round_index % len(systems)
    return systems[k:] + systems[:k]


def schedule(plans: list[CellPlan], rounds: int) -> list[tuple[int, str, CellPlan]]:
    """Every run of the bench, in the order it runs: (round, policy block, plan). The bound
    (no policy) runs in every policy's block, so that its ratios are taken beside each."""
    systems = list(dict.fromkeys(p.cell.system for p in plans))
    policies = list(dict.fromkeys(p.cell.policy for p in plans if p.persists))
    by = {(p.cell.system, p.cell.policy): p for p in plans}
    out = []
    for r in range(rounds):
        for policy in policies:
            for system in order(systems, r):
                plan = by.get((system, policy)) or next(
                    p for p in plans if p.cell.system == system and not p.persists)
                out.append((r, policy, plan))
    return out


@contextmanager
def storage(plan: CellPlan, scratch: Path):
    """A run's storage: (the data directory's parent, SlimIO's device or None, a function
    that drops what the page cache holds of it, for a recovery from a cold cache).

    bare: a fresh file-system image, as a cell gets. vm: the guest's namespace, made what
    the system needs: its file system made afresh and mounted (baseline, nopersist), or the
    raw namespace with every signature and any earlier SlimIO layout wiped (SlimIO formats
    it)."""
    if plan.cell.testbed == "bare":
        with fsimage.fresh_image(scratch / "fs.img", scratch / "mnt", plan.bare.filesystem,
                                 plan.sizing.image_size_bytes, plan.bare.direct_io) as fs:
            yield fs.data_parent, (fs.slimio_device if plan.is_slimio else None), fs.remount
        return
    vm = plan.vm
    ns, mountpoint = vm.namespace, Path(vm.mountpoint)
    if mounted(ns):
        run_tool(["umount", ns])
    if on_file_system(plan.cell.system):
        run_tool([f"mkfs.{vm.filesystem}", *mkfs_options(vm.filesystem), ns])
        mountpoint.mkdir(parents=True, exist_ok=True)
        def mount():
            run_tool(["mount", "-t", vm.filesystem, "-o", MOUNT_OPTIONS, ns, str(mountpoint)])

        def remount():
            run_tool(["umount", ns])
            mount()
        mount()
        try:
            yield mountpoint, None, remount
        finally:
            run_tool(["umount", ns])
        return
    # No signature for SlimIO to refuse: the file system's (wipefs), and an earlier run's
    # SlimIO layout, whose metadata records are the namespace's first LBAs (libblkid does
    # not know them).
    run_tool(["wipefs", "-a", ns])
    run_tool(["dd", "if=/dev/zero", f"of={ns}", "bs=1M", "count=1", "oflag=direct",
              "status=none"])
    # SlimIO reads its device with O_DIRECT or passthru: no page cache to drop.
    yield scratch, Path(vm.passthru_device if plan.slimio.backend == "nvme" else ns), \
        lambda: None


def run_one(plan: CellPlan, warmup_requests: int, scratch: Path,
            persistence_phases: bool = True, fio_bin: str | None = None,
            profile: Path | None = None, snapshots: int = 1) -> dict:
    """One run (see the module docstring); its files stay in ``scratch``.

    With ``persistence_phases``, the measured SETs are followed by the snapshot and recovery
    phases and their no-I/O bounds (:mod:`.inmemory`): an On-Demand-Snapshot (BGSAVE; the
    bound's goes into memory), a restart on the same storage (the recovery; the bound loads
    its RDB from memory), and for a system that persists, its own log loaded from memory by
    stock Redis. Each load is checked against the dataset's DEBUG DIGEST and size. A SlimIO
    run then measures its device's sequential read and write rates with fio (``fio_bin``;
    the device bounds of a recovery and a snapshot). The snapshot phase runs ``snapshots``
    times (:func:`snapshot_phase`).

    With ``profile``, perf samples the server (every thread) during the measured SETs and
    its report goes to that file (:func:`profiled`)."""
    bin_dir = Path(plan.redis_bin_dir)
    scratch.mkdir(parents=True)
    commands: list = []
    timeout = plan.server.snapshot_timeout_s
    with storage(plan, scratch) as (data_parent, device, remount), \
            inmemory.memory_dir("slimio-bench-") as mem:
        # The bound keeps its data directory in memory: its BGSAVE and its RDB's load touch
        # no device (the snapshot's no-I/O bound is the slimio run's BGSAVE into nothing).
        data_dir = (data_parent if plan.persists else mem) / "data"
        data_dir.mkdir()
        block = ""
        if plan.is_slimio:
            slimio.prepare(bin_dir / layout.SLIMIO_ADMIN, device, plan.slimio, commands,
                           scratch)
            block = slimio.conf_block(plan.slimio, device)
        port = free_port()
        conf, log = scratch / layout.RAW_REDIS_CONF, scratch / layout.RAW_REDIS_LOG
        render_conf(conf, port=port, data_dir=data_dir, log_file=log,
                    appendfsync=plan.sizing.appendfsync, appendonly=plan.persists,
                    auto_aof_rewrite_percentage=plan.sizing.auto_aof_rewrite_percentage,
                    auto_aof_rewrite_min_size=plan.sizing.auto_aof_rewrite_min_size_bytes,
                    slimio_block=block)
        server = RedisServer(bin_dir, conf, port, log)
        server.start(plan.server.start_timeout_s)
        extra: dict = {}
        warmup_s = 0.0
        try:
            if warmup_requests:
                warm = dataclasses.replace(plan.workload, requests=warmup_requests)
                w = benchmark.run(benchmark.command(bin_dir, port, warm),
                                  scratch / "warmup.tsv", scratch / "warmup.err",
                                  plan.workload.timeout_s)
                warmup_s = round(w["end_unix_s"] - w["start_unix_s"], 6)
            cmd = benchmark.command(bin_dir, port, plan.workload)
            out = scratch / layout.RAW_BENCHMARK
            with profiled(server.pid, scratch, profile):
                t = benchmark.run(cmd, out, scratch / layout.RAW_BENCHMARK_ERR,
                                  plan.workload.timeout_s)
            got = benchmark.parse(out.read_text())
            persistence = server.client().info("persistence")
            slim = server.client().info("slimio") if plan.is_slimio else {}
            if persistence_phases:
                server.wait_idle(timeout)
                extra.update(snapshot_phase(plan, server, log, data_dir, timeout, snapshots))
                before = dataset(server)
            server.shutdown()
        finally:
            server.kill()
        if persistence_phases:
            if plan.recovery.cold_cache:
                remount()       # as a cell's recovery: from the device, not the page cache
            extra.update(recoveries(plan, bin_dir, conf, port, scratch, data_dir, device,
                                    mem, before, timeout))
            if plan.is_slimio and fio_bin:
                extra.update(device_rates(plan, fio_bin, device, scratch, extra))
                if plan.sizing.appendfsync == "always" and slim.get("slimio_wal_batches"):
                    extra.update(durable_write_bound(
                        plan, fio_bin, device, scratch, int(slim["slimio_wal_bytes"]),
                        int(slim["slimio_wal_batches"]),
                        warmup_requests + plan.workload.requests))
    return {"rps": got["rps"], "requests_completed": got["requests_completed"],
            "duration_s": got["duration_s"], "warmup_wall_s": warmup_s,
            "avg_ms": got["avg_ms"],
            "p99_ms": got["p99_ms"], "p999_ms": got["p999_ms"],
            "aof_rewrites": int(persistence.get("aof_rewrites", 0)),
            "slimio_wal_lag_waits": slim.get("slimio_wal_lag_waits"),
            "slimio_wal_batches": slim.get("slimio_wal_batches"),
            "slimio_wal_bytes": slim.get("slimio_wal_bytes"),
            "slimio_wal_full_refusals": slim.get("slimio_wal_full_refusals"),
            "slimio_crc32c": slim.get("slimio_crc32c"),
            **{f"slimio_crc32c_mb_s_{name}": rate
               for name, rate in (slim.get("slimio_crc32c_mb_s") or {}).items()},
            "start_unix_s": t["start_unix_s"], "end_unix_s": t["end_unix_s"],
            **wal_timeline(slim), **extra, "argv": cmd}


def wal_timeline(info: dict) -> dict:
    """Where a SlimIO run's WAL batches spent their time (warm-up included), from INFO
    slimio where the build has the counters: ms per batch its data waited between its first
    append and the batch's submission (``wal_batch_queue_ms``: behind the batch in flight,
    or gathering), ms per batch from submission to the last part's completion
    (``wal_batch_device_ms``), and, under Always-Log's group commit, ms per held reply from
    its batch becoming durable (and its event-loop epoch closed) to the event loop sending
    it on (``reply_release_lag_ms``); the share of batches submitted beside another
    (``wal_overlapped_share``) and of the WAL's bytes that are pad (``wal_pad_share``)."""
    out = {}
    batches = int(info.get("slimio_wal_batches") or 0)
    if batches and "slimio_wal_batch_device_us" in info:
        out["wal_batch_queue_ms"] = int(info["slimio_wal_batch_queue_us"]) / batches / 1000
        out["wal_batch_device_ms"] = int(info["slimio_wal_batch_device_us"]) / batches / 1000
    if batches and "slimio_wal_batches_overlapped" in info:
        # Always-Log: the share of batches that went beside another, and of the WAL's
        # bytes that are pad (slimio_wal.h: a batch ends on a block boundary).
        out["wal_overlapped_share"] = int(info["slimio_wal_batches_overlapped"]) / batches
        pad = int(info["slimio_wal_pad_bytes"])
        out["wal_pad_share"] = pad / ((int(info.get("slimio_wal_bytes") or 0) + pad) or 1)
    released = int(info.get("slimio_reply_releases") or 0)
    if released and "slimio_reply_release_lag_us" in info:
        out["reply_release_lag_ms"] = int(info["slimio_reply_release_lag_us"]) / released / 1000
    return out


# perf's software clock (no PMU under TCG, nor in every VM), about 1 kHz per CPU, every
# CPU, no call graphs (Redis is built without frame pointers, and they would add to what
# perf costs the run). Three reports: the server's (the share of its samples per thread,
# object and symbol), the whole machine's per command, where the idle task (swapper)
# shows how much of the CPUs the run left unused (a run that is waiting, not computing),
# and the whole machine's CPU time per command, object and symbol (PERF_REPORT_MACHINE),
# which the bench adds up per SET (run.bench's accounting).
# A profiled run's rate carries perf's cost: take ratios from a bench without --profile.
PERF_RECORD = ["perf", "record", "-a", "-e", "cpu-clock", "-F", "999", "--quiet"]
# The process report sorts by thread ("pid": tid:comm) first: perf report merges samples
# with equal sort keys into one entry and keeps the thread filter's verdict of the first, so
# under "comm,dso,sym" another process of the same name running the same code (a second
# Python) takes all of the filtered process's samples, or gives it all of its own (perf 6.1).
PERF_REPORT = ["perf", "report", "--stdio", "--sort", "pid,dso,sym",
               "--percent-limit", "0.5", "--percentage", "relative"]
PERF_REPORT_SYSTEM = ["perf", "report", "--stdio", "--sort", "comm", "--percent-limit", "0.5"]
# Every entry, with the clock's nanoseconds (period) and samples, fields split by ";"
# (:func:`machine_profile` reads it). No filter, so no entry is merged across a filter.
PERF_REPORT_MACHINE = ["perf", "report", "--stdio", "--sort", "comm,dso,sym",
                       "--fields", "period,sample,comm,dso,sym", "--field-separator", ";",
                       "--percent-limit", "0"]
MACHINE_PROFILE = "{stem}-machine.json"


def machine_profile(text: str) -> list[dict]:
    """The entries of a :data:`PERF_REPORT_MACHINE` report: per command, object and symbol,
    the CPU time perf's clock sampled (``ns``, the sum of the samples' periods) and the
    samples. A kernel symbol (perf's ``[k]``) has ``kernel`` true. Header lines (``#``) are
    skipped; any other line that is not five fields is an error naming it."""
    rows = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        fields = [f.strip() for f in line.split(";")]
        if len(fields) != 5 or not (fields[0].isdigit() and fields[1].isdigit()):
            raise BenchRunError(f"line {n} of perf report is not period;samples;command;"
                                f"object;symbol: {line[:200]!r}")
        period, samples, comm, dso, sym = fields
        kind, _, name = sym.partition(" ")
        rows.append({"comm": comm, "dso": dso, "sym": name if kind in ("[k]", "[.]") else sym,
                     "kernel": kind == "[k]", "ns": int(period), "samples": int(samples)})
    return rows


@contextmanager
def profiled(pid: int, scratch: Path, report: Path | None):
    """perf samples every CPU while the block runs; the share of process ``pid``'s samples
    per thread, object and symbol is written to ``report``, the machine's per command
    (``report``'s name with ``-system``) beside it, and the machine's CPU time per command,
    object and symbol as JSON (:data:`MACHINE_PROFILE`, :func:`machine_profile`). Nothing
    without ``report``."""
    if report is None:
        yield
        return
    data = scratch / "perf.data"
    ctl, ack = scratch / "perf-ctl.fifo", scratch / "perf-ack.fifo"
    for fifo in (ctl, ack):
        fifo.unlink(missing_ok=True)
        os.mkfifo(fifo)
    # Held open for reading first: perf opens the ack FIFO write-only at its start.
    ack_fd = os.open(ack, os.O_RDONLY | os.O_NONBLOCK)
    rec = subprocess.Popen([*PERF_RECORD, "--delay=-1", "--control", f"fifo:{ctl},{ack}",
                            "-o", str(data)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        _enable(rec, ctl, ack_fd)
        yield
    finally:
        os.close(ack_fd)
        if rec.poll() is None:
            rec.send_signal(signal.SIGINT)
        _, err = rec.communicate(timeout=120)
    if rec.returncode not in (0, -signal.SIGINT) or not data.is_file():
        raise BenchRunError(f"perf record -a failed ({rec.returncode}): "
                         f"{err.decode(errors='replace').strip()[-500:]}")
    report.parent.mkdir(parents=True, exist_ok=True)
    for cmd, out in (([*PERF_REPORT, "--pid", str(pid)], report),
                     (PERF_REPORT_SYSTEM, report.with_name(f"{report.stem}-system.txt")),
                     (PERF_REPORT_MACHINE, None)):
        proc = subprocess.run([*cmd, "-i", str(data)], capture_output=True, text=True,
                              timeout=600)
        if proc.returncode != 0:
            raise BenchRunError(f"perf report failed: {proc.stderr.strip()[-500:]}")
        if out is None:
            rows = machine_profile(proc.stdout)
            report.with_name(MACHINE_PROFILE.format(stem=report.stem)).write_text(
                json.dumps({"report": PERF_REPORT_MACHINE, "rows": rows}) + "\n")
        else:
            out.write_text(proc.stdout)


def _enable(rec: subprocess.Popen, ctl: Path, ack_fd: int, timeout_s: float = 60) -> None:
    """Turn on the sampling of ``rec`` (a perf record started with its events disabled) and
    return once perf says they are on: the block is profiled from its first instruction,
    however long perf takes to start (0.4 s on an idle host here, over 1.5 s on a busy one)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:        # perf opens the control FIFO once it is set up
            ctl_fd = os.open(ctl, os.O_WRONLY | os.O_NONBLOCK)
            break
        except OSError as e:
            if e.errno != errno.ENXIO:
                raise
        if rec.poll() is not None:
            raise BenchRunError(f"perf record failed ({rec.returncode}): "
                                f"{rec.stderr.read().decode(errors='replace').strip()[-500:]}")
        if time.monotonic() > deadline:
            raise BenchRunError(f"perf record did not start within {timeout_s:.0f} s")
        time.sleep(0.01)
    try:
        os.write(ctl_fd, b"enable\n")
    finally:
        os.close(ctl_fd)
    ready, _, _ = select.select([ack_fd], [], [], max(0.0, deadline - time.monotonic()))
    if not ready or not os.read(ack_fd, 16).startswith(b"ack"):
        raise BenchRunError(f"perf record did not enable its events within {timeout_s:.0f} s")


def one_snapshot(plan: CellPlan, server: RedisServer, log: Path, data_dir: Path,
                 timeout: float) -> dict:
    """An On-Demand-Snapshot (BGSAVE), timed from the server log; in a SlimIO run, followed
    by its no-I/O bound (:func:`snapshot_bound`)."""
    server.bgsave(timeout)
    snap = [e for e in redislog.snapshots(log.read_text())
            if e["kind"] == "on_demand_snapshot"][-1]
    out = {"snapshot_s": snap.get("child_duration_s", snap["duration_s"])}
    if "slimio_wait_s" in snap:
        out["snapshot_wait_s"] = snap["slimio_wait_s"]
    if "slimio_cpu_s" in snap:
        out["snapshot_cpu_s"] = snap["slimio_cpu_s"]
        out["snapshot_thread_cpu_s"] = snap["slimio_thread_cpu_s"]
    out["snapshot_bytes"] = (
        int(server.client().info("slimio")["slimio_last_snapshot_bytes"])
        if plan.is_slimio else (data_dir / "dump.rdb").stat().st_size)
    if plan.is_slimio:
        out.update(snapshot_bound(server, log, timeout))
    return out


def snapshot_phase(plan: CellPlan, server: RedisServer, log: Path, data_dir: Path,
                   timeout: float, snapshots: int) -> dict:
    """The snapshot phase: ``snapshots`` snapshots of the same dataset one after another (in
    a SlimIO run each beside its bound). Each field is the median over them, and
    ``snapshot_each`` keeps every one. A snapshot's time moves by tens of percent from one
    to the next on a shared host, and under TCG its bound as much; the medians of a few,
    each pair seconds apart, move less."""
    each = [one_snapshot(plan, server, log, data_dir, timeout) for _ in range(snapshots)]
    out = {k: each[-1][k] if k.endswith("_bytes") else statistics.median(e[k] for e in each)
           for k in each[0]}
    out["snapshot_each"] = each
    return out


def snapshot_bound(server: RedisServer, log: Path, timeout: float) -> dict:
    """The snapshot's no-I/O bound, in a SlimIO run: a second BGSAVE with
    slimio-snapshot-sink discard (the same serialisation into nothing), timed like the
    real one from the server log."""
    slimio.discard_bgsave(server, timeout)
    bound = [e for e in redislog.snapshots(log.read_text()) if e["kind"] == "snapshot_bound"]
    if not bound:
        raise BenchRunError(f"{log} has no BGSAVE into SlimIO's discard sink")
    b = bound[-1]
    out = {"snapshot_bound_s": b.get("child_duration_s", b["duration_s"]),
           "snapshot_bound_bytes": b["bytes"]}
    if "slimio_cpu_s" in b:
        out["snapshot_bound_cpu_s"] = b["slimio_cpu_s"]
    return out


# fio's queue depth for the device rates: more than SlimIO keeps in flight (3 read-ahead
# chunks, slimio_snap.c PF_BUFS - 1), so that the rate is the device's, not the queue's.
RATE_IODEPTH = 8
RATE_BLOCK_BYTES = 4 << 20


def _one_command(plan: CellPlan, device: Path, block_bytes: int) -> int:
    """``block_bytes``, or less where the device is a passthru char device: passthru does
    not split a command, so fio's blocks are no larger than the device takes."""
    if plan.cell.testbed == "vm" and str(device).startswith("/dev/ng"):
        return min(block_bytes, vmstorage.max_command_bytes(plan.vm.namespace))
    return block_bytes


def device_rates(plan: CellPlan, fio_bin: str, device: Path, scratch: Path,
                 got: dict) -> dict:
    """Sequential read, then write, of the run's SlimIO device with fio, each as many bytes
    as the recovery read and the snapshot wrote (rounded up to whole blocks). Last in the
    run: the write overwrites the device's start."""
    bs = _one_command(plan, device, RATE_BLOCK_BYTES)
    out = {}
    for rw, size in (("read", got["recovery_bound_input_bytes"]),
                     ("write", got["snapshot_bytes"])):
        size = max(bs, -(-size // bs) * bs)
        rate = roofline.measure_rate(fio_bin, str(device), rw, scratch / f"fio-{rw}.json",
                                     size_bytes=size, block_size_bytes=bs,
                                     iodepth=RATE_IODEPTH)
        out[f"device_{rw}_mb_s"] = rate["mb_s"]
    out["device_rate_block_bytes"] = bs
    return out


# SlimIO's WAL block header (redis-slimio/README.md: 32 bytes per LBA).
WAL_BLOCK_HEADER_BYTES = 32
DURABLE_WRITES = 200


def durable_write_bound(plan: CellPlan, fio_bin: str, device: Path, scratch: Path,
                        wal_bytes: int, batches: int, sets: int) -> dict:
    """Always-Log's reference from the device: a client's SET is answered only once the
    batch holding it is durable; with one batch in flight at a time a rate is at most the
    SETs of a mean batch per durable write of that batch (SlimIO keeps two in flight under
    Always-Log, so it may pass this serial reference). fio writes ``DURABLE_WRITES``
    blocks of the mean batch's size (its WAL blocks, and the partial tail block each batch
    rewrites) one at a time, durably (FUA through passthru, O_DSYNC on a file); the bound
    is the run's SETs per batch over fio's mean latency. ``wal_bytes``, ``batches`` and
    ``sets`` count the whole run (warm-up included)."""
    lba = plan.slimio.lba_size_bytes
    payload = lba - WAL_BLOCK_HEADER_BYTES
    # A batch larger than one passthru command: SlimIO splits it at the same limit and
    # submits its parts together.
    bs = _one_command(plan, device, (-(-(wal_bytes // batches) // payload) + 1) * lba)
    got = roofline.measure_rate(fio_bin, str(device), "write", scratch / "fio-durable.json",
                                size_bytes=bs * DURABLE_WRITES, block_size_bytes=bs,
                                iodepth=1, durable=True)
    sets_per_batch = sets / batches
    return {"durable_write_bytes": bs, "durable_write_ms": got["lat_mean_ms"],
            "sets_per_batch": round(sets_per_batch, 2),
            "durable_write_bound_rps": sets_per_batch / (got["lat_mean_ms"] / 1000)}


def dataset(server: RedisServer) -> dict:
    cli = server.client()
    return {"digest": cli.execute_command("DEBUG", "DIGEST"), "dbsize": cli.dbsize()}


def _check(server: RedisServer, before: dict, what: str) -> None:
    after = dataset(server)
    server.shutdown()
    if after != before:
        raise BenchRunError(f"{what} did not restore the dataset: {before} before, {after} "
                         f"after; see {server.log_file}")


def recoveries(plan: CellPlan, bin_dir: Path, conf: Path, port: int, scratch: Path,
               data_dir: Path, device: Path | None, mem: Path, before: dict,
               timeout: float) -> dict:
    """The run's recovery (a restart with its own configuration on its own storage), then,
    for a system that persists, the same input loaded from memory (:mod:`.inmemory`)."""
    log = scratch / layout.RAW_RECOVERY_LOG
    conf_text = conf.read_text().replace(str(scratch / layout.RAW_REDIS_LOG), str(log))
    rconf = scratch / "redis-recovery.conf"
    rconf.write_text(conf_text)
    server = RedisServer(bin_dir, rconf, port, log)
    out: dict = {}
    try:
        server.start(timeout)
        text = log.read_text()
        loads = redislog.load_times(text)
        out["recovery_s"] = loads.get("append only file" if plan.persists else "disk")
        rec = redislog.slimio_recovery(text)
        if rec is not None:
            out["slimio_recovery_bytes"] = rec["bytes"]
            out["slimio_recovery_wait_s"] = rec["wait_s"]
        _check(server, before, "the recovery")
    finally:
        server.kill()
    if not plan.persists:
        return out
    bound_dir = mem / "bound"
    bound_dir.mkdir()
    if plan.is_slimio:
        got = inmemory.slimio_aof_dir(bin_dir / layout.SLIMIO_ADMIN, device,
                                      plan.slimio.lba_size_bytes, bound_dir, scratch)
        out["recovery_bound_input_bytes"] = got["base_bytes"] + got["log_bytes"]
    else:
        out["recovery_bound_input_bytes"] = inmemory.copy_aof_dir(
            data_dir / inmemory.AOF_DIR, bound_dir)
    server, out["recovery_bound_s"] = inmemory.load(bin_dir, bound_dir, True, scratch,
                                                    "bound", timeout)
    try:
        _check(server, before, "loading the log from memory")
    finally:
        server.kill()
    return out


def run(plans: list[CellPlan], rounds: int, warmup_requests: int, out_dir: Path,
        say=print, persistence_phases: bool = True, fio_bin: str | None = None,
        profile: bool = False, snapshots: int = 1) -> list[dict]:
    """Every run of :func:`schedule`; one JSON line per run in ``out_dir``/runs.jsonl, and
    the host (or guest) it ran on in ``out_dir``/where.json. A run's own files are kept
    only when it fails (``out_dir``/failed-<n>/). With ``profile``, each run's perf report
    is ``out_dir``/profiles/run-<n>-<system>-<policy>.txt."""
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "where.json").write_text(json.dumps(
        {"host": provenance.host(), "tools": provenance.tools(Path(plans[0].redis_bin_dir)),
         "utc_start": provenance.utc_now()}, indent=2) + "\n")
    runs = []
    todo = schedule(plans, rounds)
    for i, (r, block, plan) in enumerate(todo):
        scratch = out_dir / f"run-{i}"
        t0 = time.monotonic()
        try:
            report = (out_dir / "profiles" / f"run-{i}-{plan.cell.system}-{block}.txt"
                      if profile else None)
            got = run_one(plan, warmup_requests, scratch, persistence_phases, fio_bin, report,
                          snapshots)
        except Exception as exc:
            shutil.move(scratch, out_dir / f"failed-{i}")
            raise BenchRunError(f"run {i} ({plan.cell.system}, {plan.cell.policy}) failed: {exc}; "
                             f"its files are in {out_dir / f'failed-{i}'}") from exc
        shutil.rmtree(scratch, ignore_errors=True)
        row = {"run": i, "round": r, "policy_block": block, "system": plan.cell.system,
               "policy": plan.cell.policy,
               "testbed": plan.cell.testbed, "requests": plan.workload.requests,
               "warmup_requests": warmup_requests, "wall_s": round(time.monotonic() - t0, 3),
               **got}
        runs.append(row)
        with open(out_dir / RUNS_FILE, "a") as fh:
            fh.write(json.dumps(row) + "\n")
        say(f"[{i + 1}/{len(todo)}] round {r + 1} {block:<10} "
            f"{plan.cell.system:<13} {got['rps']:>10,.0f} SET/s"
            + (f"  snapshot {got['snapshot_s']:.3f} s, recovery {got['recovery_s']:.3f} s"
               if "snapshot_s" in got else "")
            + (f" (from memory {got['recovery_bound_s']:.3f} s)"
               if "recovery_bound_s" in got else "")
            + (f"  ({got['aof_rewrites']} rewrites!)" if got["aof_rewrites"] else ""))
    return runs
