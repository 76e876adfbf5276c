"""Snapshot and load events from a redis-server log file (millisecond timestamps)."""

from __future__ import annotations

import re
from datetime import datetime

LINE_RE = re.compile(r"^(?P<pid>\d+):(?P<role>[MCSX]) (?P<ts>\d{1,2} \w{3} \d{4} "
                     r"\d{2}:\d{2}:\d{2}\.\d{3}) (?P<level>[.\-*#]) (?P<msg>.*)$")

# (kind, edge) by message prefix.
EVENTS = [
    ("Background append only file rewriting started", "wal_snapshot", "start"),
    ("Background AOF rewrite finished successfully", "wal_snapshot", "end"),
    ("Background AOF rewrite terminated with error", "wal_snapshot", "fail"),
    ("Background AOF rewrite terminated by signal", "wal_snapshot", "fail"),
    ("Background saving started", "on_demand_snapshot", "start"),
    ("Background saving terminated with success", "on_demand_snapshot", "end"),
    ("Background saving error", "on_demand_snapshot", "fail"),
    ("Background saving terminated by signal", "on_demand_snapshot", "fail"),
]
# SlimIO's BGSAVE into the discard sink (slimio-snapshot-sink discard): the no-I/O bound.
DISCARD_RE = re.compile(r"SlimIO: On-Demand snapshot of (?P<bytes>\d+) bytes serialised into the "
                        r"discard sink in (?P<secs>[\d.]+) seconds")
# Both SlimIO child lines end with the child's CPU seconds: every thread's, then the
# serialising thread's.
SLIMIO_CPU_RE = re.compile(r"; CPU (?P<cpu>[\d.]+) seconds \(this thread (?P<thread>[\d.]+)\)$")
# The fork child's line after SlimIO wrote a snapshot into its slot, as SlimIO's builds
# end it: the seconds it blocked on the ring (for a buffer written and checksummed, then
# for the flush).
SLIMIO_WAIT_RE = re.compile(r"SlimIO: \S+ snapshot of \d+ bytes written to slot \d+ in .*, "
                            r"(?P<wait>[\d.]+) seconds waiting for the ring(;|$)")
LOAD_RE = re.compile(r"DB loaded from (?P<what>append only file|disk|base file \S+|incr file \S+)"
                     r": (?P<secs>[\d.]+) seconds")


def parse_time(ts: str) -> float:
    """Redis logs local time with millisecond precision."""
    return datetime.strptime(ts, "%d %b %Y %H:%M:%S.%f").timestamp()


def lines(text: str):
    for raw in text.splitlines():
        m = LINE_RE.match(raw)
        if m:
            yield m


def snapshots(text: str) -> list[dict]:
    """Completed and failed snapshots, in order: kind, start/end unix time, duration.

    A BGSAVE that SlimIO serialised into its discard sink (its child says so) is not an
    On-Demand-Snapshot but the snapshot's no-I/O bound: kind ``snapshot_bound``, with the
    bytes it serialised.

    ``child_duration_s``: from the start to the fork child's last line (its end, to the
    millisecond). The parent notices a child's exit only in serverCron (every 100 ms at
    Redis's default hz 10), so ``duration_s`` carries up to 100 ms of that wait.

    ``slimio_wait_s``: the seconds a SlimIO child blocked on its ring (the rest of its time
    it serialised and copied into its buffers), where its build logs them.
    ``slimio_cpu_s`` and ``slimio_thread_cpu_s``: its CPU seconds, all its threads' (the
    serialising one, the ring's completion thread, which checksums, and io_uring's workers)
    and the serialising thread's, where its build logs them."""
    out, open_by_kind, discarded, child_pid, child_last = [], {}, None, None, None
    waited = cpu = None
    for m in lines(text):
        dm = DISCARD_RE.search(m["msg"])
        if dm:
            discarded = int(dm["bytes"])
        if m["role"] == "C" and m["pid"] == child_pid:
            child_last = parse_time(m["ts"])
            wm = SLIMIO_WAIT_RE.search(m["msg"])
            if wm:
                waited = float(wm["wait"])
            cm = SLIMIO_CPU_RE.search(m["msg"])
            if cm:
                cpu = (float(cm["cpu"]), float(cm["thread"]))
        if m["role"] != "M":
            continue
        for prefix, kind, edge in EVENTS:
            if m["msg"].startswith(prefix):
                t = parse_time(m["ts"])
                if edge == "start":
                    open_by_kind[kind] = t
                    pm = re.search(r"by pid (\d+)", m["msg"])
                    child_pid, child_last = (pm.group(1) if pm else None), None
                    waited = cpu = None
                elif kind in open_by_kind:
                    start = open_by_kind.pop(kind)
                    event = {"kind": kind, "start_unix_s": start, "end_unix_s": t,
                             "duration_s": round(t - start, 3), "ok": edge == "end"}
                    if child_last is not None:
                        event["child_duration_s"] = round(child_last - start, 3)
                    if waited is not None:
                        event["slimio_wait_s"] = waited
                    if cpu is not None:
                        event["slimio_cpu_s"], event["slimio_thread_cpu_s"] = cpu
                    if kind == "on_demand_snapshot" and discarded is not None:
                        event.update(kind="snapshot_bound", bytes=discarded)
                        discarded = None
                    out.append(event)
                break
    return out


def load_times(text: str) -> dict:
    """Seconds Redis reports for loading its data, by what it loaded."""
    out = {}
    for m in lines(text):
        lm = LOAD_RE.search(m["msg"])
        if lm:
            out[lm["what"]] = float(lm["secs"])
    return out


SLIMIO_RECOVERY_RE = re.compile(r"SlimIO recovery: loaded (?P<bytes>\d+) bytes in "
                                r"(?P<secs>[\d.]+) seconds \((?P<mbps>[\d.]+) MB/s\)"
                                r"(?:.*, (?P<wait>[\d.]+) seconds waiting for it)?")


def slimio_recovery(text: str) -> dict | None:
    """SlimIO's own recovery line (the last one): bytes it read from its device, seconds, MB/s
    and the seconds its loader waited for the device, else None."""
    out = None
    for m in lines(text):
        sm = SLIMIO_RECOVERY_RE.search(m["msg"])
        if sm:
            out = {"bytes": int(sm["bytes"]), "secs": float(sm["secs"]),
                   "mbps": float(sm["mbps"]),
                   "wait_s": float(sm["wait"]) if sm["wait"] else None}
    return out


def version(text: str) -> str | None:
    m = re.search(r"Redis version=(\S+?),", text)
    return m.group(1) if m else None
