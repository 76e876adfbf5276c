"""A motivation cell: the paper's §3.1 scenarios (Figure 2, Table 2) on one system, in its VM.

The cell's storage and server are a Periodical-Log cell's (its system's file system, or
SlimIO's device), with no WAL-Snapshot (the rewrite trigger is off): the snapshots measured
are On-Demand-Snapshots (BGSAVE), as in the paper's scenarios. The workload's SETs fill the
dataset, then:

* **Snapshot only**: a BGSAVE with no writes arriving;
* **Snapshot & WAL**: redis-benchmark sends ``wal_requests`` SETs; after ``lead_s`` of them
  (the WAL-only rate) a BGSAVE runs while they go on, and the client is stopped when it
  ends, so writes arrive during the whole snapshot (the record says if they did not);
* **ideal** (SlimIO only): a BGSAVE into SlimIO's discard sink, the same serialisation with
  no I/O: the in-memory-only rate the paper's Figure 2b calls ideal.

Each of the first two runs under ``perf record`` (software clock, call graphs, the server
and the fork child it makes); the child's samples are kept as ``perf script`` text
(``perf-<scenario>.txt.gz``), which the host attributes (:mod:`slimio_repro.parse.perfprofile`).
A second ``perf record -a`` takes every context switch and wakeup meanwhile; those naming
the child's threads are kept (``sched-<scenario>.txt.gz``): when the child was off its CPU,
blocked (in I/O, or asleep) or waiting for a CPU (:mod:`slimio_repro.parse.schedtrace`).
``scenarios.json`` holds per scenario the snapshot's times and bytes (from the server log,
:func:`.redislog.snapshots`), the child's pid, and the WAL's bytes and the server's commands
at the snapshot's start and end (INFO), from which the host forms the WAL's rates. The
"under GC" scenario is not run here: QEMU's device has no GC, so the host models it from
these numbers (:mod:`slimio_repro.motivation`).

Standard library and redis-py only, like the rest of this sub-package.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

from . import benchmark, layout, provenance, provision, redislog, slimio, vmstorage
from .cell_runner import CellError, storage
from ..plan.cellplan import CellPlan
from .phases import Phases
from .server import RedisServer, free_port, render_conf

SCENARIOS = ("snapshot-only", "snapshot-wal")
IDEAL = "ideal"
SCENARIOS_FILE = "scenarios.json"
PERF_FILE = "perf-{scenario}.txt.gz"
# What perf script prints per sample (parse.perfprofile reads these fields).
PERF_FIELDS = "comm,pid,tid,time,period,event,ip,sym,dso"
SCHED_FILE = "sched-{scenario}.txt.gz"
# What perf script prints per scheduler event (parse.schedtrace reads these).
SCHED_FIELDS = "time,event,trace"
CHILD_RE = re.compile(r"Background saving started by pid (\d+)")


def perf_record(pid: int, frequency_hz: int, data: Path) -> subprocess.Popen:
    """perf samples process ``pid`` and the children it forks from now on (software clock:
    no PMU under TCG, nor in every VM; call graphs by frame pointer)."""
    return subprocess.Popen(["perf", "record", "-q", "-g", "-e", "cpu-clock", "-F",
                             str(frequency_hz), "-p", str(pid), "-o", str(data)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def sched_record(data: Path) -> subprocess.Popen:
    """perf records every context switch and wakeup of the machine (a task's switch-in and
    its wakeup happen in another task's context, so a per-process recording misses them):
    when the snapshot's threads were off their CPU, and why (Figure 2a's waiting time)."""
    return subprocess.Popen(["perf", "record", "-q", "-a", "-e", "sched:sched_switch", "-e",
                             "sched:sched_wakeup", "-o", str(data)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def sched_script(data: Path, pid: int, out_gz: Path) -> int:
    """The scheduler events naming process ``pid``'s threads (``pid=`` in the tracepoint's
    text), gzipped; their count. The child's threads' ids follow its pid (SlimIO's child
    starts one more), so the events of ids pid..pid+7 are kept."""
    proc = subprocess.run(["perf", "script", "-i", str(data), "-F", SCHED_FIELDS],
                          capture_output=True, timeout=900)
    if proc.returncode != 0:
        raise CellError(f"perf script (sched) failed ({proc.returncode}): "
                        f"{proc.stderr.decode(errors='replace').strip()[-500:]}")
    ids = re.compile(rb"pid=(" + b"|".join(str(pid + i).encode() for i in range(8)) + rb")\b")
    kept = [line for line in proc.stdout.splitlines() if ids.search(line)]
    with gzip.open(out_gz, "wb") as fh:
        fh.write(b"\n".join(kept) + b"\n")
    return len(kept)


def perf_events_open(perf_pid: int) -> int:
    """How many perf events process ``perf_pid`` holds open (its fds on perf_event)."""
    fd_dir = Path(f"/proc/{perf_pid}/fd")
    count = 0
    for fd in fd_dir.iterdir() if fd_dir.exists() else ():
        try:
            if "perf_event" in os.readlink(fd):
                count += 1
        except OSError:
            pass
    return count


def wait_attached(rec: subprocess.Popen, timeout_s: float = 60) -> None:
    """Wait until perf has opened its events on every thread (their count holds still for
    half a second): a fork before that is not followed. perf's start under TCG takes
    seconds the first time (a fixed sleep of 1 s lost the first snapshot's child)."""
    deadline = time.monotonic() + timeout_s
    last, stable_since = -1, time.monotonic()
    while time.monotonic() < deadline:
        if rec.poll() is not None:
            raise CellError(f"perf record exited ({rec.returncode}): "
                            f"{rec.stderr.read().decode(errors='replace').strip()[-500:]}")
        n = perf_events_open(rec.pid)
        if n != last:
            last, stable_since = n, time.monotonic()
        elif n > 0 and time.monotonic() - stable_since >= 0.5:
            return
        time.sleep(0.05)
    raise CellError(f"perf record opened no events within {timeout_s:.0f} s")


def perf_stop(rec: subprocess.Popen, data: Path) -> None:
    rec.send_signal(signal.SIGINT)
    _, err = rec.communicate(timeout=300)
    if rec.returncode not in (0, -signal.SIGINT) or not data.is_file():
        raise CellError(f"perf record failed ({rec.returncode}): "
                        f"{err.decode(errors='replace').strip()[-500:]}")


def perf_script(data: Path, pid: int, out_gz: Path) -> int:
    """The samples of process ``pid`` (the snapshot child) as text, gzipped; their count."""
    proc = subprocess.run(["perf", "script", "-i", str(data), "--pid", str(pid), "-F",
                           PERF_FIELDS], capture_output=True, timeout=900)
    if proc.returncode != 0:
        raise CellError(f"perf script failed ({proc.returncode}): "
                        f"{proc.stderr.decode(errors='replace').strip()[-500:]}")
    with gzip.open(out_gz, "wb") as fh:
        fh.write(proc.stdout)
    return proc.stdout.count(b"cpu-clock")


def wal_bytes(server: RedisServer, is_slimio: bool) -> int:
    """The WAL's bytes so far: SlimIO's WAL payload, or the AOF's size."""
    if is_slimio:
        return int(server.client().info("slimio")["slimio_wal_bytes"])
    return int(server.client().info("persistence")["aof_current_size"])


def counters(server: RedisServer, is_slimio: bool) -> dict:
    return {"unix_s": time.time(), "wal_bytes": wal_bytes(server, is_slimio),
            "commands": int(server.client().info("stats")["total_commands_processed"])}


def child_pid(log_text: str) -> int:
    found = CHILD_RE.findall(log_text)
    if not found:
        raise CellError("the server log names no BGSAVE child")
    return int(found[-1])


def snapshot(server: RedisServer, log: Path, partial: Path, scenario: str, plan: CellPlan,
             ended=None) -> dict:
    """One BGSAVE under perf; its times, bytes and child from the log, its child's samples
    (``ended`` is called as soon as the BGSAVE ended; what it returns is recorded)."""
    m = plan.motivation
    data = partial / f"perf-{scenario}.data"
    sched = partial / f"sched-{scenario}.data"
    rec = perf_record(server.pid, m.perf_frequency_hz, data)
    extra = {}
    try:
        srec = sched_record(sched)
        try:
            wait_attached(rec)
            wait_attached(srec)
            before = counters(server, plan.is_slimio)
            server.bgsave(plan.server.snapshot_timeout_s)
            after = counters(server, plan.is_slimio)
            if ended is not None:
                extra = ended()
        finally:
            perf_stop(srec, sched)
    finally:
        perf_stop(rec, data)
    text = log.read_text()
    event = [e for e in redislog.snapshots(text) if e["kind"] == "on_demand_snapshot"][-1]
    pid = child_pid(text)
    samples = perf_script(data, pid, partial / PERF_FILE.format(scenario=scenario))
    events = sched_script(sched, pid, partial / SCHED_FILE.format(scenario=scenario))
    data.unlink()
    sched.unlink()
    out = {"scenario": scenario, "child_pid": pid, "child_samples": samples,
           "sched_events": events,
           "duration_s": event.get("child_duration_s", event["duration_s"]),
           "parent_duration_s": event["duration_s"],
           "start_unix_s": event["start_unix_s"], "end_unix_s": event["end_unix_s"],
           "snapshot_bytes": snapshot_bytes(server, plan), "at_start": before,
           "at_end": after, **extra}
    for key in ("slimio_wait_s", "slimio_cpu_s", "slimio_thread_cpu_s"):
        if key in event:
            out[key] = event[key]
    return out


def snapshot_bytes(server: RedisServer, plan: CellPlan) -> int:
    if plan.is_slimio:
        return int(server.client().info("slimio")["slimio_last_snapshot_bytes"])
    return (Path(server.client().config_get("dir")["dir"]) / "dump.rdb").stat().st_size


def run(plan: CellPlan, out_dir: Path, expect_box_id: str | None = None,
        expect_kernel: str | None = None, blank_at: int = 0) -> Path:
    """Run the motivation cell ``plan`` describes; write its raw directory ``out_dir``
    (``<out_dir>.partial`` until it completed; never overwritten). ``blank_at``: as for a
    matrix cell (:func:`.cell_runner.run`)."""
    if plan.motivation is None:
        raise CellError(f"{plan.id} is not a motivation cell (its plan has no motivation)")
    workload = plan.workload
    out_dir, bin_dir = out_dir.resolve(), Path(plan.redis_bin_dir).resolve()
    if plan.cell.testbed != "vm" or not vmstorage.inside_guest(plan.vm):
        raise CellError(f"motivation cell {plan.id} runs inside its VM (perf in the guest, "
                        "the emulated namespace): run it through the pipeline (snakemake "
                        "motivation), which starts the VM")
    if out_dir.exists():
        raise CellError(f"{out_dir} already exists; refusing to overwrite a finished cell "
                        "(delete it to run the cell again)")
    if shutil.which("perf") is None:
        raise CellError("perf is not installed in this guest: rebuild the guest box "
                        "(testbed/box/packages.txt lists linux-perf)")
    partial = out_dir.with_name(out_dir.name + ".partial")
    if partial.exists():
        shutil.rmtree(partial)
    partial.mkdir(parents=True)
    (partial / layout.RAW_PLAN).write_text(plan.to_json())
    prov = {"cell_id": plan.id, "cell": plan.cell.wildcards(), "profile": plan.profile,
            "plan_sha256": plan.sha256(), "utc_start": provenance.utc_now(),
            "host": provenance.host(), "git": None, "tools": provenance.tools(bin_dir),
            "redis_build": json.loads((bin_dir.parent / "build.json").read_text())}
    phases = Phases()
    with phases.phase("provision"):
        prov["provision"] = provision.provision(plan.vm, plan.cell.system, partial,
                                                expect_box_id, expect_kernel,
                                                blank_at=blank_at)
    commands: list = []
    results: dict = {"system": plan.cell.system, "filesystem": None, "scenarios": {}}
    with storage(plan, partial) as fs:
        prov["storage"] = fs.describe()
        results["filesystem"] = prov["storage"].get("filesystem")
        data_dir = fs.data_parent / "data"
        data_dir.mkdir()
        block = ""
        if plan.is_slimio:
            prov["storage"]["slimio"] = slimio.prepare(
                bin_dir / layout.SLIMIO_ADMIN, fs.slimio_device, plan.slimio, commands, partial)
            block = slimio.conf_block(plan.slimio, fs.slimio_device)
        port = free_port()
        conf, log = partial / layout.RAW_REDIS_CONF, partial / layout.RAW_REDIS_LOG
        # No WAL-Snapshot: the scenarios' snapshots are the On-Demand-Snapshots alone.
        render_conf(conf, port=port, data_dir=data_dir, log_file=log,
                    appendfsync=plan.sizing.appendfsync, appendonly=True,
                    auto_aof_rewrite_percentage=0,
                    auto_aof_rewrite_min_size=plan.sizing.auto_aof_rewrite_min_size_bytes,
                    slimio_block=block)
        server = RedisServer(bin_dir, conf, port, log)
        commands.append({"what": "server", "argv": server.command})
        try:
            with phases.phase("server_start"):
                server.start(plan.server.start_timeout_s)
            with phases.phase("workload"):
                cmd = benchmark.command(bin_dir, port, workload)
                commands.append({"what": "fill", "argv": cmd})
                results["fill"] = benchmark.run(cmd, partial / "fill.tsv",
                                                partial / "fill.err", workload.timeout_s)
                server.wait_idle(plan.server.snapshot_timeout_s)
                results["dbsize"] = server.client().dbsize()
            with phases.phase("snapshots"):
                results["scenarios"]["snapshot-only"] = snapshot(
                    server, log, partial, "snapshot-only", plan)
            with phases.phase("snapshots"):
                results["scenarios"]["snapshot-wal"] = snapshot_with_writes(
                    server, log, partial, plan, bin_dir, port, commands)
            if plan.is_slimio:
                with phases.phase("snapshots"):
                    slimio.discard_bgsave(server, plan.server.snapshot_timeout_s)
                    bound = [e for e in redislog.snapshots(log.read_text())
                             if e["kind"] == "snapshot_bound"][-1]
                    results["scenarios"][IDEAL] = {
                        "scenario": IDEAL,
                        "duration_s": bound.get("child_duration_s", bound["duration_s"]),
                        "snapshot_bytes": bound["bytes"]}
            with phases.phase("shutdown"):
                server.shutdown()
        finally:
            server.kill()
    results["commands"] = commands
    (partial / SCENARIOS_FILE).write_text(json.dumps(results, indent=2) + "\n")
    prov["utc_end"] = provenance.utc_now()
    prov["phases_s"] = phases.as_dict()
    (partial / layout.RAW_PROVENANCE).write_text(json.dumps(prov, indent=2) + "\n")
    partial.rename(out_dir)
    return out_dir


def snapshot_with_writes(server: RedisServer, log: Path, partial: Path, plan: CellPlan,
                         bin_dir: Path, port: int, commands: list) -> dict:
    """Snapshot & WAL: redis-benchmark writes; over ``lead_s`` of them the WAL-only rate is
    counted, then a BGSAVE runs under perf; the client is stopped once it ended."""
    m = plan.motivation
    writes = dataclasses.replace(plan.workload, requests=m.wal_requests)
    cmd = benchmark.command(bin_dir, port, writes)
    commands.append({"what": "writes during the snapshot", "argv": cmd})
    with open(partial / "writes.out", "wb") as out:
        client = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
        try:
            time.sleep(0.5)         # the clients have connected
            lead = counters(server, plan.is_slimio)
            time.sleep(m.lead_s)
            lead_end = counters(server, plan.is_slimio)
            got = snapshot(server, log, partial, "snapshot-wal", plan, ended=lambda: {
                "writes_running_at_end": client.poll() is None})
            got["lead"], got["lead_end"] = lead, lead_end
        finally:
            if client.poll() is None:
                client.send_signal(signal.SIGINT)
            try:
                client.wait(timeout=60)
            except subprocess.TimeoutExpired:
                client.kill()
                client.wait()
    server.wait_idle(plan.server.snapshot_timeout_s)
    if not got["writes_running_at_end"]:
        raise CellError(
            f"the Snapshot & WAL scenario's {m.wal_requests} SETs ended before its snapshot "
            f"did (it ran {got['duration_s']:.1f} s, after {m.lead_s} s of writes and perf's "
            "start), so part of it had no writes arriving: raise motivation.wal_requests")
    return got
