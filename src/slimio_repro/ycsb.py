"""YCSB workload A through our own binding (ycsb-bindings/): build, command lines, parsers.

The binding (``site.ycsb.db.redisstring.RedisStringClient``) stores each record as one Redis
string under a key of exactly ``redis.keylength`` bytes: reads are GET, updates and inserts
SET. YCSB's core (``site.ycsb:core``, pinned in ycsb-bindings/pom.xml) drives it. A cell runs
two phases, each one JVM: ``load`` (the records, INSERT = SET) and ``run`` (the operations,
READ = GET and UPDATE = SET at 50:50).

What a phase leaves in the cell's raw directory (:mod:`.paths`):

* ``ycsb-<phase>.stdout.txt``: YCSB's summary, ``[OPERATION], metric, value`` lines (run time,
  throughput, and per operation count, latencies in us, p99.9 from its HdrHistogram);
* ``ycsb-<phase>.stderr.tsv``: its status lines (``-s``, every ``status.interval`` s), each with
  the wall-clock time it arrived: the runtime throughput series;
* ``ycsb-<phase>-<OPERATION>.hdr``: the HdrHistogram interval logs behind those percentiles.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import time
import xml.etree.ElementTree as ET
from pathlib import Path

from . import benchmark, paths

BINDING_CLASS = "site.ycsb.db.redisstring.RedisStringClient"
BINDING_MODULE = "redis-string"
WORKLOAD_FILE = "workloads/workloada.properties"
PHASES = ("load", "run")
# What each YCSB operation is in Redis, through our binding.
OPERATION_COMMAND = {"READ": "GET", "UPDATE": "SET", "INSERT": "SET"}
POM_NS = {"m": "http://maven.apache.org/POM/4.0.0"}


class YcsbError(RuntimeError):
    pass


def pins(pom: Path = paths.YCSB_POM) -> dict:
    """The versions ycsb-bindings/pom.xml pins (its <properties>), e.g. ycsb.version."""
    root = ET.parse(pom).getroot()
    props = root.find("m:properties", POM_NS)
    out = {el.tag.split("}", 1)[1]: (el.text or "").strip() for el in props}
    out["binding.version"] = root.find("m:version", POM_NS).text.strip()
    return out


def pinned_version() -> str:
    """YCSB's core version, which names the build directory (build/ycsb/<version>)."""
    return pins()["ycsb.version"]


def build_dir(config: dict) -> Path:
    """Where the binding is built (and baked into the box under the same relative path)."""
    return paths.Paths.from_config(config).ycsb_build(pinned_version())


def source_files() -> list[Path]:
    """The binding's sources, poms and workload files: a change rebuilds it."""
    return sorted(p for p in paths.YCSB_BINDINGS_DIR.rglob("*")
                  if p.is_file() and "target" not in p.relative_to(paths.YCSB_BINDINGS_DIR).parts)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def build(out_dir: Path, log_path: Path) -> dict:
    """Build the binding out of tree into ``out_dir``: ``lib/`` (the binding's jar, YCSB's
    core and every runtime jar, from Maven Central at the pom's pinned versions),
    ``workloads/`` and ``build.json`` (versions, jars and their sha256), written last.

    The JUnit tests need a redis-server and run in the test suite (tests/test_ycsb_binding.py),
    not here.
    """
    from . import build as buildmod  # host only: it needs PyYAML, which the guest lacks
    if shutil.which("mvn") is None or shutil.which("java") is None:
        raise YcsbError("building ycsb-bindings needs Maven and a JDK (mvn, java on PATH): "
                        "run `make setup-host` (the setup playbook installs them)")
    out_dir = out_dir.resolve()
    src, lib = out_dir / "src", out_dir / "lib"
    for d in (src, lib, out_dir / "workloads", out_dir / "build.json"):
        if d.is_dir():
            shutil.rmtree(d)
        elif d.exists():
            d.unlink()
    shutil.copytree(paths.YCSB_BINDINGS_DIR, src,
                    ignore=shutil.ignore_patterns("target"))
    t0 = time.monotonic()
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "w") as log:
        buildmod.run_logged(["mvn", "-B", "-DskipTests", "package"], src, log, YcsbError)
    target = src / BINDING_MODULE / "target"
    jars = sorted(target.glob("*.jar")) + sorted((target / "dependency").glob("*.jar"))
    jars = [j for j in jars if not j.name.endswith(("-sources.jar", "-javadoc.jar"))]
    names = {j.name for j in jars}
    p = pins()
    core = f"core-{p['ycsb.version']}.jar"
    if core not in names or not any(n.startswith("redis-string-binding-") for n in names):
        raise YcsbError(f"the Maven build left no {core} or binding jar in {target}; "
                        f"see {log_path}")
    lib.mkdir()
    for j in jars:
        shutil.copy2(j, lib / j.name)
    shutil.copytree(src / "workloads", out_dir / "workloads")
    record = {
        "ycsb_core_version": p["ycsb.version"],
        "binding_version": p["binding.version"],
        "binding_class": BINDING_CLASS,
        "pins": p,
        "jars": {j.name: _sha256(lib / j.name) for j in jars},
        "workload_file_sha256": _sha256(out_dir / WORKLOAD_FILE),
        "maven": buildmod.tool_version(["mvn", "-B", "--version"]),
        "java": buildmod.tool_version(["java", "-version"]),
        "build_time_s": round(time.monotonic() - t0, 1),
    }
    shutil.rmtree(src)
    (out_dir / "build.json").write_text(json.dumps(record, indent=2) + "\n")
    return record


def command(ycsb_dir: Path, phase: str, port: int, workload: dict, hdr_prefix: Path,
            java: str = "java") -> list[str]:
    """YCSB's command line for ``phase`` (load or run) of workload A against 127.0.0.1:port.

    The workload file holds workload A and the paper's sizes; ``workload`` (the config's
    ``workloads.ycsb-a``) overrides the sizes with ``-p`` (later properties win in YCSB).
    """
    if phase not in PHASES:
        raise ValueError(f"YCSB phase {phase!r}: expected one of {', '.join(PHASES)}")
    cmd = [java]
    if workload["jvm_heap_mb"]:
        cmd.append(f"-Xmx{workload['jvm_heap_mb']}m")
    cmd += ["-cp", f"{ycsb_dir / 'lib'}/*", "site.ycsb.Client",
            "-load" if phase == "load" else "-t",
            "-db", BINDING_CLASS,
            "-P", str(ycsb_dir / WORKLOAD_FILE),
            "-s",
            "-threads", str(workload["threads"]),
            "-p", f"recordcount={workload['records']}",
            "-p", f"operationcount={workload['operations']}",
            "-p", f"fieldlength={workload['value_size_bytes']}",
            "-p", f"redis.keylength={workload['key_size_bytes']}",
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
