"""Parsers, on outputs captured from real runs (tests/fixtures/cells/*: Redis 7.0.15 with the
patched redis-benchmark on an ext4 loop image, tiny scale)."""

import json
import shutil

import pandas as pd
import pytest

from conftest import CELL_FIXTURES, FIXTURES
from slimio_repro.agent import layout
from slimio_repro.agent import benchmark
from slimio_repro.parse import record as parse
from slimio_repro import paths
from slimio_repro.agent import redislog

PERIODICAL = CELL_FIXTURES / "bare-baseline-redis-benchmark-periodical-r1"
ALWAYS = CELL_FIXTURES / "bare-baseline-redis-benchmark-always-r1"


def test_benchmark_summary_and_exact_p999():
    out = benchmark.parse((PERIODICAL / layout.RAW_BENCHMARK).read_text())
    assert out["test"] == "SET"
    assert out["requests_completed"] == 40000
    assert out["clients"] == 50 and out["payload_bytes"] == 4096
    assert out["rps"] == pytest.approx(44004.40)
    assert out["p999_ms"] == pytest.approx(14.063)
    assert out["p99_ms"] <= out["p999_ms"] <= out["max_ms"]


def test_benchmark_intervals_are_timestamped_and_ordered():
    out = benchmark.parse((ALWAYS / layout.RAW_BENCHMARK).read_text())
    times = [i["t_unix_s"] for i in out["intervals"]]
    assert len(times) >= 3
    assert times == sorted(times)
    assert all(i["rps"] >= 0 for i in out["intervals"])  # 0.0 before clients connect
    assert max(i["rps"] for i in out["intervals"]) > 0


def test_unpatched_benchmark_output_is_refused():
    text = (PERIODICAL / layout.RAW_BENCHMARK).read_text()
    stock = "\n".join(l for l in text.splitlines() if "p99.9" not in l)
    with pytest.raises(benchmark.BenchmarkError, match="patched redis-benchmark"):
        benchmark.parse(stock)


def test_unfinished_benchmark_output_is_refused():
    text = (PERIODICAL / layout.RAW_BENCHMARK).read_text()
    head = "\n".join(text.splitlines()[:3])
    with pytest.raises(benchmark.BenchmarkError, match="did not finish"):
        benchmark.parse(head)


def test_redis_log_snapshots():
    snaps = redislog.snapshots((ALWAYS / layout.RAW_REDIS_LOG).read_text())
    kinds = [s["kind"] for s in snaps]
    assert kinds == ["wal_snapshot", "wal_snapshot", "on_demand_snapshot"]
    assert all(s["ok"] and 0 < s["duration_s"] < 60 for s in snaps)
    assert all(a["end_unix_s"] <= b["start_unix_s"] for a, b in zip(snaps, snaps[1:]))


def test_redis_log_tells_the_discard_bound_from_a_snapshot_and_times_the_child():
    """A real SlimIO log (captured): a BGSAVE to the device, then one into the discard sink
    (slimio-snapshot-sink discard), which is the bound, not an On-Demand-Snapshot."""
    log = (FIXTURES / "redislog" / "slimio-bgsave-then-discard.log").read_text()
    real, bound = redislog.snapshots(log)
    assert real["kind"] == "on_demand_snapshot" and "bytes" not in real
    assert bound["kind"] == "snapshot_bound" and bound["bytes"] == 82299518
    # The parent saw each child's end in its next serverCron; the child's last line is it.
    assert real["duration_s"] == pytest.approx(0.399)
    assert real["child_duration_s"] == pytest.approx(0.299)
    assert bound["duration_s"] == pytest.approx(0.190)
    assert bound["child_duration_s"] == pytest.approx(0.177)


def test_redis_log_gives_the_time_a_slimio_child_waited_for_its_ring():
    """A real SlimIO log (captured from a build that times the wait): the child's line says how long
    it blocked on the ring; an older build's says nothing, and nothing is made up."""
    log = (FIXTURES / "redislog" / "slimio-bgsave-wait.log").read_text()
    (snap,) = redislog.snapshots(log)
    assert snap["kind"] == "on_demand_snapshot" and snap["slimio_wait_s"] == 0.032
    assert snap["child_duration_s"] == pytest.approx(0.218)
    old = (FIXTURES / "redislog" / "slimio-bgsave-then-discard.log").read_text()
    assert all("slimio_wait_s" not in e for e in redislog.snapshots(old))


def test_redis_log_gives_a_slimio_childs_cpu_seconds():
    """Real SlimIO logs (captured on bare from a build that reports its children's CPU): a BGSAVE to
    the device file, then one into the discard sink; each child's last line gives its CPU
    seconds, all its threads' and the serialising thread's. With slimio-sqpoll no (the
    project's configuration) the two children did about the same work; with the server's
    default, yes, the kernel's submission-polling thread (a thread of the child) spun for
    the whole snapshot: all threads' CPU about twice the serialising thread's. Older
    builds' lines give none, and none is made up."""
    log = (FIXTURES / "redislog" / "slimio-bgsave-cpu.log").read_text()
    real, bound = redislog.snapshots(log)
    assert real["kind"] == "on_demand_snapshot" and real["slimio_wait_s"] == 0.002
    assert (real["slimio_cpu_s"], real["slimio_thread_cpu_s"]) == (0.097, 0.087)
    assert bound["kind"] == "snapshot_bound" and bound["bytes"] == 27420887
    assert (bound["slimio_cpu_s"], bound["slimio_thread_cpu_s"]) == (0.088, 0.084)
    assert bound["child_duration_s"] == pytest.approx(0.089)     # from the fork
    sq = (FIXTURES / "redislog" / "slimio-bgsave-cpu-sqpoll.log").read_text()
    real, bound = redislog.snapshots(sq)
    assert real["slimio_cpu_s"] > 1.9 * real["slimio_thread_cpu_s"]
    assert bound["slimio_cpu_s"] < 1.1 * bound["slimio_thread_cpu_s"]
    for old in ("slimio-bgsave-wait.log", "slimio-bgsave-then-discard.log"):
        events = redislog.snapshots((FIXTURES / "redislog" / old).read_text())
        assert events and all("slimio_cpu_s" not in e for e in events)


def test_redis_log_failed_rewrite_is_reported_not_counted():
    log = ("1:M 21 Nov 2026 01:22:36.967 * Background append only file rewriting started by "
           "pid 2\n1:M 21 Nov 2026 01:22:38.000 # Background AOF rewrite terminated with "
           "error\n")
    (snap,) = redislog.snapshots(log)
    assert snap["ok"] is False and snap["duration_s"] == pytest.approx(1.033)


def test_redis_log_load_times():
    loads = redislog.load_times((PERIODICAL / layout.RAW_RECOVERY_LOG).read_text())
    assert loads["append only file"] == pytest.approx(0.111)
    assert any(k.startswith("base file") for k in loads)


def test_phase_stats_splits_by_sampler_flags():
    samples = pd.DataFrame({
        "t_unix_s": [0.0, 1.0, 2.0, 3.0, 4.0],
        "total_commands_processed": [0, 100, 150, 200, 300],
        "rdb_bgsave_in_progress": [0, 0, 0, 0, 0],
        "aof_rewrite_in_progress": [0, 0, 1, 0, 0],
        "server_rss_bytes": [10, 20, 30, 40, 50],
        "child_rss_bytes": [0, 0, 25, 0, 0],
    })
    out = parse.phase_stats(samples, 0.0, 4.0)
    # (1,2] and (2,3] touch the flagged sample: 100 commands in 2 s; the rest 200 in 2 s.
    assert out["rps_wal_snapshot"] == pytest.approx(50.0)
    assert out["rps_wal_only"] == pytest.approx(100.0)
    assert out["mem_wal_snapshot_peak_bytes"] == 55
    assert out["mem_wal_only_peak_bytes"] == 50


def test_parse_cell_record(fixture_cell):
    record, series = parse.parse_cell(fixture_cell)
    assert record["cell_id"] == fixture_cell.name
    assert record["policy"] == "periodical" and record["filesystem"] == "ext4"
    assert record["rps_avg"] > 0 and record["set_p999_ms"] > 0
    assert record["wal_snapshot_count"] == 2 and record["on_demand_snapshot_count"] == 1
    assert record["snapshot_time_s"] > 0
    assert record["recovery_verified"] is True
    assert record["recovery_mb_s"] == pytest.approx(
        record["recovery_bytes"] / 1e6 / record["recovery_time_s"])
    assert record["device_write_bytes_total"] >= record["device_write_bytes_workload"] > 0
    json.dumps(record)  # the record is plain JSON
    assert {"t_s", "client_rps", "mem_bytes"} <= set(series.columns)
    assert (series.t_s.diff().dropna() >= 0).all()


def test_incomplete_cell_is_refused(fixture_cell):
    (fixture_cell / layout.RAW_COMPLETE).unlink()
    with pytest.raises(parse.ParseError, match="not a complete cell"):
        parse.parse_cell(fixture_cell)


# System slimio: the SlimIO file-backend cell captured by tests/fixtures/capture.py.
SLIMIO = CELL_FIXTURES / "bare-slimio-redis-benchmark-periodical-r1"


def test_slimio_recovery_log_line():
    log = (SLIMIO / layout.RAW_RECOVERY_LOG).read_text()
    assert "SlimIO recovery: loaded 32650479 bytes in 0.097 seconds (336.1 MB/s)" in log
    assert redislog.slimio_recovery(log) == {"bytes": 32650479, "secs": 0.097, "mbps": 336.1,
                                             "wait_s": None}
    assert redislog.slimio_recovery("7:M 21 Nov 2026 01:22:39.900 * Ready\n") is None


def test_info_fields_of_a_raw_info_reply():
    text = (SLIMIO / layout.RAW_SLIMIO_INFO_RECOVERY).read_text()
    got = parse.info_fields(text)
    assert got["slimio_recovery_bytes"] == 32650479 and got["slimio_backend"] == "file"
    assert got["slimio_recovery_time_s"] == pytest.approx(0.097)
    assert "# SlimIO" not in got and len(got) == text.count(":")


@pytest.fixture
def slimio_cell(tmp_path):
    """A copy of the captured slimio cell (the tests may not modify the committed one)."""
    dst = tmp_path / SLIMIO.name
    shutil.copytree(SLIMIO, dst)
    return dst


def test_slimio_cell_without_its_recovery_line_is_refused(slimio_cell):
    log = (slimio_cell / layout.RAW_RECOVERY_LOG).read_text()
    (slimio_cell / layout.RAW_RECOVERY_LOG).write_text(log.replace("SlimIO recovery", "x"))
    with pytest.raises(parse.ParseError, match="has no 'SlimIO recovery: loaded"):
        parse.parse_cell(slimio_cell)


def test_slimio_cell_whose_log_and_info_disagree_is_refused(slimio_cell):
    info = (slimio_cell / layout.RAW_SLIMIO_INFO_RECOVERY).read_text()
    assert "slimio_recovery_bytes:32650479" in info
    (slimio_cell / layout.RAW_SLIMIO_INFO_RECOVERY).write_text(
        info.replace("slimio_recovery_bytes:32650479", "slimio_recovery_bytes:32650000"))
    with pytest.raises(parse.ParseError, match="contradicts itself"):
        parse.parse_cell(slimio_cell)


def test_slimio_cell_without_info_slimio_is_refused(slimio_cell):
    (slimio_cell / layout.RAW_SLIMIO_INFO_RECOVERY).unlink()
    with pytest.raises(parse.ParseError, match="info-slimio-after-recovery.txt"):
        parse.parse_cell(slimio_cell)


# A cell made before plan.json existed (the walking skeleton's, with effective-config.json):
# stored runs of that age still parse, with their settings from that file.
LEGACY = FIXTURES / "legacy" / "bare-baseline-redis-benchmark-periodical-r1"


def test_a_cell_from_before_the_plan_parses_from_its_effective_config():
    assert not (LEGACY / layout.RAW_PLAN).exists()
    effective = json.loads((LEGACY / layout.RAW_CONFIG).read_text())
    record, _ = parse.parse_cell(LEGACY)
    assert record["requests"] == effective["config"]["workloads"]["redis-benchmark"]["requests"]
    assert record["keyspace"] == effective["config"]["workloads"]["redis-benchmark"]["keyspace"]
    assert record["auto_aof_rewrite_min_size_bytes"] == \
        effective["derived"]["auto_aof_rewrite_min_size_bytes"]
    assert record["requests_completed"] == 40000 and record["recovery_verified"] is True


def test_a_fork_child_seen_before_info_flags_it_counts_as_snapshot():
    """Captured in a real bare slimio ycsb-a cell (nightly run, rep 3): the sampler saw the
    rewrite child's pid and RSS one sample before INFO set aof_rewrite_in_progress; that
    sample's memory (server + child) belongs to the snapshot phase, not to WAL-only."""
    samples = pd.DataFrame({
        "t_unix_s": [1795527046.675, 1795527047.179, 1795527047.674, 1795527048.174],
        "total_commands_processed": [170206, 174995, 179874, 184600],
        "rdb_bgsave_in_progress": [0, 0, 0, 0],
        "aof_rewrite_in_progress": [0, 0, 1, 0],
        "server_rss_bytes": [147558400, 147558400, 147578880, 147578880],
        "child_rss_bytes": [0, 137801728, 142049280, 0],
    })
    out = parse.phase_stats(samples, 1795527046.0, 1795527049.0)
    assert out["mem_wal_only_peak_bytes"] == 147578880
    assert out["mem_wal_snapshot_peak_bytes"] == 147578880 + 142049280


def test_slimio_recovery_line_with_and_without_the_wait():
    new = ("1:M 25 Nov 2026 01:26:59.883 * SlimIO recovery: loaded 683265023 bytes in 0.706 "
           "seconds (968.0 MB/s): snapshot slot -1, 1 WAL generation(s) with 683265023 bytes, "
           "692060160 bytes read from the device, 0.232 seconds waiting for it\n")
    got = redislog.slimio_recovery(new)
    assert got == {"bytes": 683265023, "secs": 0.706, "mbps": 968.0, "wait_s": 0.232}
    old = (FIXTURES / "redislog" / "slimio-bgsave-then-discard.log").read_text()
    assert redislog.slimio_recovery(old)["wait_s"] is None
