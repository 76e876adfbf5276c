"""Run the (patched) redis-benchmark and parse what it prints.

redis-benchmark prints its per-interval throughput as carriage-return separated progress
records. The runner timestamps each record as it arrives and stores them verbatim, one per
line, as ``<unix time>\\t<record>`` (benchmark.stdout.tsv): the raw output plus the one thing
the tool does not print, the wall-clock time.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path

INTERVAL_RE = re.compile(
    r"^(?P<title>[A-Z]+): rps=(?P<rps>[-\d.na]+) \(overall: (?P<overall>[-\d.na]+)\) "
    r"avg_msec=(?P<avg>[-\d.na]+) \(overall: (?P<overall_avg>[-\d.na]+)\)$")


class BenchmarkError(RuntimeError):
    pass


def command(bin_dir: Path, port: int, workload) -> list[str]:
    cmd = [str(bin_dir / "redis-benchmark"), "-h", "127.0.0.1", "-p", str(port),
           "-t", "set",
           "-c", str(workload.clients),
           "-n", str(workload.requests),
           "-r", str(workload.keyspace),
           "-d", str(workload.value_size_bytes),
           "--key-width", str(workload.key_size_bytes),
           "-P", str(workload.pipeline)]
    if workload.threads:
        cmd += ["--threads", str(workload.threads)]
    return cmd


def run(cmd: list[str], out_tsv: Path, err_path: Path, timeout_s: float) -> dict:
    """Run ``cmd``; write timestamped records to ``out_tsv``; return start/end times."""
    return run_timestamped(cmd, out_tsv, err_path, timeout_s, "redis-benchmark",
                           "workloads.redis-benchmark.timeout_s")


def run_timestamped(cmd: list[str], tsv_path: Path, other_path: Path, timeout_s: float,
                    what: str, timeout_key: str, stamp: str = "stdout",
                    error: type[Exception] | None = None) -> dict:
    """Run ``cmd``. Each record of its ``stamp`` stream (stdout or stderr; records end at CR
    or LF) goes to ``tsv_path`` as ``<unix time>\t<record>`` when it arrives; the other
    stream goes to ``other_path`` verbatim. Kill it after ``timeout_s`` (``timeout_key`` is
    the setting to name). Returns the start and end times; raises ``error`` (BenchmarkError
    by default) naming ``what`` if it fails."""
    error = error or BenchmarkError
    started = time.time()
    deadline = time.monotonic() + timeout_s
    with open(tsv_path, "w") as out, open(other_path, "w") as other:
        pipes = {"stdout": other, "stderr": other}
        pipes[stamp] = subprocess.PIPE
        proc = subprocess.Popen(cmd, stdout=pipes["stdout"], stderr=pipes["stderr"], bufsize=0)
        stream = proc.stdout if stamp == "stdout" else proc.stderr
        pending = b""
        while True:
            chunk = os.read(stream.fileno(), 65536)
            now = time.time()
            if not chunk:
                break
            pending += chunk
            *records, pending = re.split(rb"[\r\n]", pending)
            for rec in records:
                text = rec.decode(errors="replace").rstrip()
                if text:
                    out.write(f"{now:.3f}\t{text}\n")
            if time.monotonic() > deadline:
                proc.kill()
                proc.wait()
                raise error(f"{what} ran longer than {timeout_s} s ({timeout_key})")
        if pending.strip():
            out.write(f"{time.time():.3f}\t{pending.decode(errors='replace').rstrip()}\n")
        rc = proc.wait()
    ended = time.time()
    if rc != 0:
        tail = (other_path.read_text() if stamp == "stdout" else tsv_path.read_text())
        raise error(f"{what} exited with {rc}: {tail.strip()[-500:]}")
    return {"start_unix_s": started, "end_unix_s": ended}


def _num(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return None if value != value else value  # NaN -> None


def parse(tsv_text: str) -> dict:
    """Parse a benchmark.stdout.tsv: intervals, summary throughput and latencies."""
    intervals, lines = [], []
    for row in tsv_text.splitlines():
        t, _, text = row.partition("\t")
        m = INTERVAL_RE.match(text.strip())
        if m:
            rps = _num(m["rps"])
            if rps is not None:
                intervals.append({"t_unix_s": float(t), "rps": rps,
                                  "avg_ms": _num(m["avg"])})
        else:
            lines.append(text)
    body = "\n".join(lines)
    out: dict = {"intervals": intervals}
    m = re.search(r"====== (\S+) ======", body)
    out["test"] = m.group(1) if m else None
    m = re.search(r"(\d+) requests completed in ([\d.]+) seconds", body)
    if not m:
        raise BenchmarkError("no '... requests completed in ... seconds' line: "
                             "the benchmark did not finish")
    out["requests_completed"], out["duration_s"] = int(m.group(1)), float(m.group(2))
    m = re.search(r"throughput summary: ([\d.]+) requests per second", body)
    out["rps"] = float(m.group(1))
    m = re.search(r"latency summary \(msec\):\s*\n\s*avg\s+min\s+p50\s+p95\s+p99\s+max\s*\n"
                  r"\s*([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)", body)
    if not m:
        raise BenchmarkError("no latency summary in the benchmark output")
    for key, value in zip(("avg_ms", "min_ms", "p50_ms", "p95_ms", "p99_ms", "max_ms"),
                          m.groups()):
        out[key] = float(value)
    m = re.search(r"latency p99\.9 \(msec\): ([\d.]+)", body)
    if not m:
        raise BenchmarkError("no 'latency p99.9 (msec)' line: is this the patched "
                             "redis-benchmark (redis-baseline/patches)?")
    out["p999_ms"] = float(m.group(1))
    m = re.search(r"(\d+) parallel clients", body)
    out["clients"] = int(m.group(1)) if m else None
    m = re.search(r"(\d+) bytes payload", body)
    out["payload_bytes"] = int(m.group(1)) if m else None
    return out
