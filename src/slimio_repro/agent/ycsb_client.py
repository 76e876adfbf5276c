"""YCSB workload A through our own binding (ycsb-bindings/): command lines, runs, parsers.

The binding (``site.ycsb.db.redisstring.RedisStringClient``) stores each record as one Redis
string under a key of exactly ``redis.keylength`` bytes: reads are GET, updates and inserts
SET. YCSB's core (``site.ycsb:core``, pinned in ycsb-bindings/pom.xml) drives it. A cell runs
two phases, each one JVM: ``load`` (the records, INSERT = SET) and ``run`` (the operations,
READ = GET and UPDATE = SET at 50:50).

What a phase leaves in the cell's raw directory (:mod:`.layout`):

* ``ycsb-<phase>.stdout.txt``: YCSB's summary, ``[OPERATION], metric, value`` lines (run time,
  throughput, and per operation count, latencies in us, p99.9 from its HdrHistogram);
* ``ycsb-<phase>.stderr.tsv``: its status lines (``-s``, every ``status.interval`` s), each with
  the wall-clock time it arrived: the runtime throughput series;
* ``ycsb-<phase>-<OPERATION>.hdr``: the HdrHistogram interval logs behind those percentiles.
"""

from __future__ import annotations

import re
from pathlib import Path

from . import benchmark

BINDING_CLASS = "site.ycsb.db.redisstring.RedisStringClient"
WORKLOAD_FILE = "workloads/workloada.properties"
PHASES = ("load", "run")
# What each YCSB operation is in Redis, through our binding.
OPERATION_COMMAND = {"READ": "GET", "UPDATE": "SET", "INSERT": "SET"}


class YcsbError(RuntimeError):
    pass


def command(ycsb_dir: Path, phase: str, port: int, workload, hdr_prefix: Path,
            java: str = "java") -> list[str]:
    """YCSB's command line for ``phase`` (load or run) of workload A against 127.0.0.1:port.

    The workload file holds workload A and the paper's sizes; ``workload`` (the config's
    ``workloads.ycsb-a``) overrides the sizes with ``-p`` (later properties win in YCSB).
    """
    if phase not in PHASES:
        raise ValueError(f"YCSB phase {phase!r}: expected one of {', '.join(PHASES)}")
    cmd = [java, *workload.jvm_options]
    if workload.jvm_heap_mb:
        cmd.append(f"-Xmx{workload.jvm_heap_mb}m")
    cmd += ["-cp", f"{ycsb_dir / 'lib'}/*", "site.ycsb.Client",
            "-load" if phase == "load" else "-t",
            "-db", BINDING_CLASS,
            "-P", str(ycsb_dir / WORKLOAD_FILE),
            "-s",
            "-threads", str(workload.threads),
            "-p", f"recordcount={workload.records}",
            "-p", f"operationcount={workload.operations}",
            "-p", f"fieldlength={workload.value_size_bytes}",
            "-p", f"redis.keylength={workload.key_size_bytes}",
            "-p", "redis.host=127.0.0.1",
            "-p", f"redis.port={port}",
            "-p", "status.interval=1",
            "-p", "measurementtype=hdrhistogram",
            "-p", "hdrhistogram.percentiles=50,95,99,99.9,99.99",
            "-p", "hdrhistogram.fileoutput=true",
            "-p", f"hdrhistogram.output.path={hdr_prefix}"]
    return cmd


def run(cmd: list[str], stdout_path: Path, status_tsv: Path, timeout_s: float,
        phase: str) -> dict:
    """Run one phase; its status lines (stderr) are timestamped as they arrive."""
    return benchmark.run_timestamped(cmd, status_tsv, stdout_path, timeout_s,
                                     f"YCSB's {phase} phase", "workloads.ycsb-a.timeout_s",
                                     stamp="stderr", error=YcsbError)


# The operations each phase runs (YCSB's CLEANUP section, one per thread, is not one of them).
PHASE_OPERATIONS = {"load": ("INSERT",), "run": ("READ", "UPDATE")}


def verify(summary: dict, phase: str, expected: int, source: str) -> None:
    """Refuse a phase that did not run all its operations with status OK.

    YCSB 0.17.0 exits 0 even when the binding's init() fails (then no operation runs) and
    when an operation throws, so its exit code proves nothing: the counts do. A GET that
    found nothing (NOT_FOUND) means a record was lost, so only OK passes.
    """
    ops = summary["operations"]
    failed = sorted(op for op in ops if op.endswith("-FAILED"))
    done = sum(ops.get(op, {}).get("operations", 0) for op in PHASE_OPERATIONS[phase])
    not_ok = {f"{op} {k[len('return_'):]}": v for op in PHASE_OPERATIONS[phase]
              for k, v in ops.get(op, {}).items()
              if k.startswith("return_") and k != "return_OK" and v}
    if failed or not_ok or done != expected:
        raise YcsbError(
            f"{source}: YCSB's {phase} phase completed {done} of {expected} operations"
            + (f"; not OK: {not_ok}" if not_ok else "")
            + (f"; failed: {', '.join(failed)}" if failed else "")
            + " (see its stdout and stderr next to it: a binding that cannot connect or "
              "refuses its properties makes YCSB exit 0 without operations)")


LATENCY_METRICS = {"AverageLatency(us)": "avg_us", "MinLatency(us)": "min_us",
                   "MaxLatency(us)": "max_us"}
SUMMARY_RE = re.compile(r"^\[(?P<op>[A-Z][A-Z_-]*)\], (?P<metric>[^,]+), (?P<value>\S+)\s*$")


def _number(text: str) -> float | int | None:
    try:
        value = float(text)
    except ValueError:
        return None
    if value != value:  # NaN: YCSB prints it for an operation it never timed
        return None
    return int(value) if value.is_integer() and "." not in text and "E" not in text else value


def parse_summary(text: str, source: str = "YCSB output") -> dict:
    """YCSB's summary: ``{"overall": {...}, "operations": {OP: {...}}}``.

    Per operation: ``operations``, ``avg_us``, ``min_us``, ``max_us``, ``p<N>_us`` for each
    percentile printed (``p99.9`` -> ``p99_9_us``), and ``return_<STATUS>`` counts.
    """
    overall: dict = {}
    ops: dict = {}
    for line in text.splitlines():
        m = SUMMARY_RE.match(line.strip())
        if not m:
            continue
        op, metric, value = m["op"], m["metric"].strip(), _number(m["value"])
        if op == "OVERALL":
            key = {"RunTime(ms)": "runtime_ms", "Throughput(ops/sec)": "throughput_ops_s"}.get(metric)
            if key:
                overall[key] = value
            continue
        if op not in OPERATION_COMMAND and not op.endswith("-FAILED") and op != "CLEANUP":
            continue
        d = ops.setdefault(op, {})
        pm = re.fullmatch(r"([\d.]+)(?:th|st|nd|rd)?PercentileLatency\(us\)", metric)
        if metric == "Operations":
            d["operations"] = value
        elif metric in LATENCY_METRICS:
            d[LATENCY_METRICS[metric]] = value
        elif pm:
            d[f"p{pm.group(1).replace('.', '_')}_us"] = value
        elif metric.startswith("Return="):
            d[f"return_{metric.split('=', 1)[1]}"] = value
    if "runtime_ms" not in overall or "throughput_ops_s" not in overall:
        raise YcsbError(f"{source} has no [OVERALL], RunTime(ms) / Throughput(ops/sec) lines: "
                        "the YCSB phase did not finish")
    return {"overall": overall, "operations": ops}


STATUS_RE = re.compile(
    r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d:\d{3} (?P<elapsed>\d+) sec: (?P<ops>\d+) operations;"
    r"(?: (?P<rate>\S+) current ops/sec;)?(?P<rest>.*)$")
STATUS_OP_RE = re.compile(r"\[(?P<op>[A-Z][A-Z_-]*): Count=(?P<count>\d+)(?P<fields>[^\]]*)\]")


def parse_status(tsv_text: str) -> list[dict]:
    """The status lines of a phase (stderr.tsv): one interval per line, with the wall-clock
    time it arrived, YCSB's elapsed seconds, cumulative operations, the interval's ops/sec
    and, per operation, its count and p99.9 (us) in that interval."""
    out = []
    for row in tsv_text.splitlines():
        t, _, text = row.partition("\t")
        m = STATUS_RE.match(text.strip())
        if not m:
            continue
        rate = _number(m["rate"]) if m["rate"] else None
        rec = {"t_unix_s": float(t), "elapsed_s": int(m["elapsed"]),
               "operations": int(m["ops"]), "ops_per_s": rate}
        for om in STATUS_OP_RE.finditer(m["rest"]):
            rec[f"{om['op'].lower()}_count"] = int(om["count"])
            fm = re.search(r"99\.9=([\d.]+)", om["fields"])
            avg = re.search(r"Avg=([\d.]+|NaN)", om["fields"])
            rec[f"{om['op'].lower()}_p999_us"] = float(fm.group(1)) if fm else None
            rec[f"{om['op'].lower()}_avg_us"] = _number(avg.group(1)) if avg else None
        out.append(rec)
    return out


def test_started(tsv_text: str) -> float | None:
    """When YCSB printed "Starting test." (its client threads start right after): the wall
    time the phase's operations begin, after the JVM's start-up and the workload's setup."""
    for row in tsv_text.splitlines():
        t, _, text = row.partition("\t")
        if text.strip() == "Starting test.":
            return float(t)
    return None


def intervals(status: list[dict]) -> list[dict]:
    """Runtime throughput for the time series and figures: per status line, its time, the
    interval's ops/sec, and the mean latency of its operations in ms (count-weighted)."""
    out = []
    for s in status:
        if s["ops_per_s"] is None:
            continue
        total = weighted = 0.0
        for op in OPERATION_COMMAND:
            n, avg = s.get(f"{op.lower()}_count"), s.get(f"{op.lower()}_avg_us")
            if n and avg is not None:
                total += n
                weighted += n * avg
        out.append({"t_unix_s": s["t_unix_s"], "rps": float(s["ops_per_s"]),
                    "avg_ms": weighted / total / 1000 if total else None})
    return out
