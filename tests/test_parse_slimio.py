"""A raw SlimIO cell (file backend, bare testbed), captured by tests/fixtures/capture.py from a
real run, parsed: each record field is checked against the raw files read here with their
own formats (Redis's log lines, redis-benchmark's summary, INFO, the plan), not with the
parser's helpers."""

import gzip
import json
import re
from datetime import datetime
from statistics import mean

import pytest

from conftest import CELL_FIXTURES
from slimio_repro.parse import record as parse

RAW = CELL_FIXTURES / "bare-slimio-redis-benchmark-periodical-r1"
# Redis's log line: "<pid>:<role> <day> <mon> <year> <hh:mm:ss.mmm> <level> <message>".
LOG_LINE = re.compile(r"^(\d+):([MC]) (\d+ \w+ \d+ [\d:.]+) [.*#-] (.*)$")


def log_events(name: str) -> list[tuple[datetime, str]]:
    out = []
    for line in (RAW / name).read_text().splitlines():
        m = LOG_LINE.match(line)
        if m:
            out.append((datetime.strptime(m[3], "%d %b %Y %H:%M:%S.%f"), m[4]))
    return out


@pytest.fixture(scope="module")
def record():
    rec, series = parse.parse_cell(RAW)
    assert len(series) > 0
    return rec


def test_the_fixture_is_a_slimio_file_backend_cell(record):
    info = (RAW / "info-slimio-after-workload.txt").read_text()
    assert "slimio_backend:file" in info.splitlines()
    assert record["system"] == "slimio" and record["slimio_backend"] == "file"
    assert record["testbed"] == "bare" and record["waf"] is None, "no FDP device on bare"


def test_sizes_are_the_plans(record):
    plan = json.loads((RAW / "plan.json").read_text())
    assert record["slimio_wal_size_bytes"] == plan["slimio"]["wal_size_bytes"]
    assert record["slimio_slot_size_bytes"] == plan["slimio"]["slot_size_bytes"]
    assert record["slimio_device_bytes"] == plan["slimio"]["device_bytes"]
    assert record["auto_aof_rewrite_min_size_bytes"] == \
        plan["sizing"]["auto_aof_rewrite_min_size_bytes"]
    # The layout SlimIO reports (INFO slimio) is the plan's: slots of the planned size.
    info = dict(line.split(":", 1) for line in
                (RAW / "info-slimio-after-workload.txt").read_text().splitlines() if ":" in line)
    assert int(info["slimio_slot_lbas"]) * 4096 == plan["slimio"]["slot_size_bytes"]


def test_the_workload_is_what_redis_benchmark_printed(record):
    text = (RAW / "benchmark.stdout.tsv").read_text()
    done = re.search(r"(\d+) requests completed in ([\d.]+) seconds", text)
    rps = re.search(r"throughput summary: ([\d.]+) requests per second", text)
    assert record["requests_completed"] == int(done[1]) == 40000
    assert record["rps_avg"] == float(rps[1])


def test_wal_snapshots_are_redis_logs_rewrites(record):
    events = log_events("redis.log")
    started = [t for t, msg in events if msg.startswith("Background append only file "
                                                         "rewriting started")]
    finished = [t for t, msg in events if msg == "Background AOF rewrite finished successfully"]
    assert len(started) == len(finished) == record["wal_snapshot_count"] == 2
    durations = [(e - s).total_seconds() for s, e in zip(started, finished)]
    assert record["wal_snapshot_time_s"] == pytest.approx(mean(durations), abs=0.002)
    kinds = [s["kind"] for s in record["snapshots"]]
    assert kinds == ["wal_snapshot", "wal_snapshot", "on_demand_snapshot"]
    # Each WAL-Snapshot went to a slot through SlimIO, not to an AOF base file.
    written = [msg for _, msg in events if re.match(r"SlimIO: wal-snapshot snapshot of \d+ "
                                                    r"bytes written to slot \d", msg)]
    assert len(written) == 2


def test_on_demand_snapshot_is_the_bgsave_slimio_wrote(record):
    events = json.loads((RAW / "events.json").read_text())
    log = (RAW / "redis.log").read_text()
    size = int(re.search(r"SlimIO: on-demand snapshot of (\d+) bytes written", log)[1])
    assert record["on_demand_snapshot_count"] == 1
    assert record["on_demand_snapshot_bytes"] == events["on_demand_snapshot"]["bytes"] == size
    window = events["on_demand_snapshot"]["end_unix_s"] - events["on_demand_snapshot"][
        "start_unix_s"]
    assert record["on_demand_snapshot_time_s"] <= window + 0.01


def test_recovery_is_slimios_own_report(record):
    line = re.search(r"SlimIO recovery: loaded (\d+) bytes in ([\d.]+) seconds \(([\d.]+) MB/s\)"
                     r": snapshot slot (\d), (\d+) WAL generation", (RAW / "redis-recovery.log")
                     .read_text())
    assert record["slimio_recovery_bytes"] == record["recovery_bytes"] == int(line[1])
    assert record["slimio_recovery_time_s"] == float(line[2])
    assert record["slimio_recovery_mb_s"] == float(line[3])
    info = json.loads((RAW / "info-after-recovery.json").read_text())
    assert record["recovery_dbsize"] == info["db0"]["keys"] == 7948
    recovery = json.loads((RAW / "recovery.json").read_text())
    assert record["recovery_verified"] is recovery["verified"] is True
    assert recovery["digest_before"] == recovery["digest_after"]


# The same system in the VM (nvme backend through /dev/ng0n1, FDP placement wal=1,
# wal_snapshot=3, on_demand=2), captured by tests/fixtures/capture.py.
VM_RAW = CELL_FIXTURES / "vm-slimio-redis-benchmark-periodical-r1"


def test_vm_cell_device_numbers_are_nvme_clis_and_the_traces():
    record, _ = parse.parse_cell(VM_RAW)
    assert record["slimio_backend"] == "nvme" and record["slimio_device"] == "/dev/ng0n1"
    # nvme-cli's FDP statistics log (decimal strings, bytes), before and after the cell.
    before = json.loads((VM_RAW / "fdp-stats-before.json").read_text())
    after = json.loads((VM_RAW / "fdp-stats-after.json").read_text())
    host = int(after["hbmw"]) - int(before["hbmw"])
    media = int(after["mbmw"]) - int(before["mbmw"])
    assert record["fdp_host_bytes_written"] == host and record["fdp_media_bytes_written"] == media
    assert record["waf"] == pytest.approx(media / host)
    # Every byte the device counted as written is a write command in the trace.
    lengths = [int(m[1]) + 1 for m in re.finditer(
        r"disk=nvme0n1, .*cmd=\(nvme_cmd_write slba=\d+, len=(\d+),",
        gzip.open(VM_RAW / "nvme-trace.txt.gz", "rt").read())]
    assert record["nvme_trace_write_commands"] == len(lengths)
    assert record["nvme_trace_write_bytes"] == sum(lengths) * 4096 == host
    assert record["nvme_trace_placement_ok"] is True
    assert record["nvme_trace_wal_placement_ids"] == "1"
    assert record["nvme_trace_snapshots_placement_ids"] == "2;3"
