"""YCSB-A's command lines and parsers, on real output of YCSB 0.17.0 with our binding: a bare
cell captured by the pipeline (tests/fixtures/cells/bare-baseline-ycsb-a-periodical-r1) and
a load phase whose binding refused its properties (tests/fixtures/ycsb/)."""

from pathlib import Path

import pytest

from conftest import CELL_FIXTURES
from slimio_repro.agent import layout
from slimio_repro.plan import sizing as cells
from slimio_repro.parse import record as parse
from slimio_repro import paths
from slimio_repro.agent import ycsb_client as ycsb
from slimio_repro.plan import YcsbA

CELL = CELL_FIXTURES / "bare-baseline-ycsb-a-periodical-r1"
REFUSED = Path(__file__).parent / "fixtures" / "ycsb" / "refused-load.stdout.txt"
WORKLOAD_SETTINGS = {"records": 20000, "operations": 150000, "threads": 8, "key_size_bytes": 8,
            "value_size_bytes": 2048, "jvm_heap_mb": None, "timeout_s": 60,
            "on_demand_snapshot": False}
WORKLOAD = YcsbA(**WORKLOAD_SETTINGS)


def test_command_overrides_the_workload_files_sizes(tmp_path):
    cmd = ycsb.command(tmp_path, "run", 6400, YcsbA(**dict(WORKLOAD_SETTINGS, jvm_heap_mb=512)),
                       tmp_path / "ycsb-run-")
    assert cmd[:4] == ["java", "-Xmx512m", "-cp", f"{tmp_path}/lib/*"]
    assert cmd[4:8] == ["site.ycsb.Client", "-t", "-db", ycsb.BINDING_CLASS]
    props = dict(cmd[i + 1].split("=", 1) for i, a in enumerate(cmd) if a == "-p")
    assert props["recordcount"] == "20000" and props["operationcount"] == "150000"
    assert props["fieldlength"] == "2048" and props["redis.keylength"] == "8"
    assert props["redis.port"] == "6400" and props["hdrhistogram.fileoutput"] == "true"
    assert "99.9" in props["hdrhistogram.percentiles"].split(",")
    assert cmd[cmd.index("-threads") + 1] == "8"
    assert cmd[cmd.index("-P") + 1] == f"{tmp_path}/{ycsb.WORKLOAD_FILE}"
    load = ycsb.command(tmp_path, "load", 6400, WORKLOAD, tmp_path / "x-")
    assert "-load" in load and "-t" not in load and not any(a.startswith("-Xmx") for a in load)
    # The JVM's options come first, before the heap and the class path.
    tuned = ycsb.command(tmp_path, "load", 6400, YcsbA(**dict(
        WORKLOAD_SETTINGS, jvm_heap_mb=512, jvm_options=("-XX:TieredStopAtLevel=1",
                                                         "-XX:+UseSerialGC"))), tmp_path / "x-")
    assert tuned[:5] == ["java", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xmx512m", "-cp"]
    with pytest.raises(ValueError, match="'warmup'"):
        ycsb.command(tmp_path, "warmup", 6400, WORKLOAD, tmp_path / "x-")


def test_the_workload_file_is_workload_a_at_the_papers_sizes():
    props = dict(line.split("=", 1) for line in
                 (paths.YCSB_BINDINGS_DIR / ycsb.WORKLOAD_FILE).read_text().splitlines()
                 if line.strip() and not line.startswith("#"))
    assert (props["readproportion"], props["updateproportion"]) == ("0.5", "0.5")
    assert props["requestdistribution"] == "zipfian" and props["insertorder"] == "ordered"
    assert (props["recordcount"], props["operationcount"], props["threadcount"]) == \
        ("9000000", "115000000", "8")
    assert (props["fieldcount"], props["fieldlength"], props["redis.keylength"]) == \
        ("1", "2048", "8")
    assert float(props["updateproportion"]) == cells.YCSB_A_UPDATE_PROPORTION


def test_run_summary_per_operation():
    out = ycsb.parse_summary((CELL / "ycsb-run.stdout.txt").read_text())
    assert out["overall"]["runtime_ms"] > 0 and out["overall"]["throughput_ops_s"] > 0
    ops = out["operations"]
    assert set(ops) == {"READ", "UPDATE", "CLEANUP"}
    assert ops["READ"]["operations"] + ops["UPDATE"]["operations"] == 150000
    for op in ("READ", "UPDATE"):
        d = ops[op]
        assert d["return_OK"] == d["operations"]
        assert d["min_us"] <= d["p50_us"] <= d["p99_us"] <= d["p99_9_us"] <= d["max_us"]
        assert d["avg_us"] > 0 and isinstance(d["p99_9_us"], int)
    ycsb.verify(out, "run", 150000, "fixture")
    with pytest.raises(ycsb.YcsbError, match="completed 150000 of 150001"):
        ycsb.verify(out, "run", 150001, "fixture")


def test_load_summary_and_the_refused_binding():
    load = ycsb.parse_summary((CELL / "ycsb-load.stdout.txt").read_text())
    assert load["operations"]["INSERT"]["operations"] == 20000
    ycsb.verify(load, "load", 20000, "fixture")
    # YCSB exits 0 when the binding refuses its properties: only the counts tell.
    refused = ycsb.parse_summary(REFUSED.read_text())
    assert "INSERT" not in refused["operations"]
    with pytest.raises(ycsb.YcsbError, match="completed 0 of 2000 operations.*exit 0"):
        ycsb.verify(refused, "load", 2000, str(REFUSED))


def test_summary_of_an_unfinished_phase_is_refused():
    with pytest.raises(ycsb.YcsbError, match="did not finish"):
        ycsb.parse_summary("[READ], Operations, 10\n", "truncated")


def test_not_found_reads_are_refused():
    out = ycsb.parse_summary((CELL / "ycsb-run.stdout.txt").read_text()
                             + "[READ], Return=NOT_FOUND, 3\n")
    with pytest.raises(ycsb.YcsbError, match="READ NOT_FOUND': 3"):
        ycsb.verify(out, "run", 150000, "fixture")


def test_status_lines_give_the_runtime_throughput():
    status = ycsb.parse_status((CELL / "ycsb-run.stderr.tsv").read_text())
    assert len(status) >= 3
    # The first line (0 operations, no rate) is kept but has no throughput.
    assert status[0]["operations"] == 0 and status[0]["ops_per_s"] is None
    assert [s["elapsed_s"] for s in status] == sorted(s["elapsed_s"] for s in status)
    assert status[-1]["operations"] == 150000
    timed = [s for s in status if s["ops_per_s"] is not None]
    assert all(s["read_count"] >= 0 and s["update_p999_us"] > 0 for s in timed
               if s.get("update_count"))
    series = ycsb.intervals(status)
    assert len(series) == len(timed) and all(i["rps"] > 0 for i in series)
    assert all(0 < i["avg_ms"] < 1000 for i in series if i["avg_ms"] is not None)


def test_the_run_phase_starts_when_ycsb_starts_its_threads():
    text = (CELL / "ycsb-run.stderr.tsv").read_text()
    started = ycsb.test_started(text)
    first_status = float(text.splitlines()[[i for i, l in enumerate(text.splitlines())
                                            if " sec: " in l][0]].split("\t")[0])
    assert started is not None and started <= first_status
    assert ycsb.test_started("1.0\tYCSB Client 0.17.0\n") is None


def test_status_line_oddities():
    tsv = "\n".join([
        "1.0\t2026-11-21 08:10:19:773 0 sec: 10 operations; \u221e current ops/sec; est "
        "completion in 0 second [READ: Count=32, Max=7275, Min=48, Avg=600.41, 90=2079, "
        "99=7275, 99.9=7275, 99.99=7275] ",
        "2.0\tDBWrapper: report latency for each error is false",
        "3.0\t2026-11-21 08:10:20:700 1 sec: 19011 operations; 19001 current ops/sec; est "
        "completion in 5 second [READ: Count=9522, Max=7371, Min=10, Avg=47.27, 90=86, 99=292, "
        "99.9=2365, 99.99=5179] [UPDATE: Count=9311, Max=8215, Min=13, Avg=56.54, 90=98, "
        "99=266, 99.9=3675, 99.99=4791] "])
    status = ycsb.parse_status(tsv)
    assert [s["ops_per_s"] for s in status] == [None, 19001]
    assert status[1]["update_p999_us"] == 3675 and status[1]["read_count"] == 9522
    (only,) = ycsb.intervals(status)
    assert only["t_unix_s"] == 3.0 and only["rps"] == 19001
    assert only["avg_ms"] == pytest.approx((9522 * 47.27 + 9311 * 56.54) / 18833 / 1000)


def test_parsed_cell_has_table4s_columns():
    record, series = parse.parse_cell(CELL)
    assert record["workload"] == "ycsb-a" and record["requests_completed"] == 150000
    assert record["get_operations"] + record["set_operations"] == 150000
    for column in ("rps_wal_only", "rps_avg", "set_p999_ms", "get_p999_ms", "snapshot_time_s",
                   "mem_wal_only_peak_gb", "load_rps"):
        assert record[column] > 0, column
    assert record["ycsb_client_host"] == "host" and record["on_demand_snapshot_count"] == 0
    assert record["keyspace"] == 20000 and record["clients"] == 8
    assert record["recovery_verified"] is True
    assert len(series) >= 2 and (series.client_rps > 0).all()


def test_cell_with_a_lost_record_is_refused(tmp_path):
    import shutil
    raw = tmp_path / CELL.name
    shutil.copytree(CELL, raw)
    out = raw / layout.RAW_YCSB_STDOUT.format(phase="run")
    out.write_text(out.read_text().replace("[READ], Return=OK", "[READ], Return=NOT_FOUND"))
    with pytest.raises(parse.ParseError, match="NOT_FOUND"):
        parse.parse_cell(raw)


def test_the_java_version_recorded_is_what_java_says_without_starting_a_jvm():
    # A cell records the client's Java from the runtime's release file (a JVM's start is
    # about 1.4 s under TCG); it must read as `java -version`'s own first line.
    import shutil
    import subprocess
    from slimio_repro.agent import provenance
    if shutil.which("java") is None:
        pytest.fail("java is not installed: `make setup-host` installs it (YCSB's client)")
    said = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr
    assert provenance.java() == said.splitlines()[0].strip()
