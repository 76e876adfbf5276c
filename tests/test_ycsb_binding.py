"""Our YCSB binding (ycsb-bindings/): its JUnit suite, run by Maven against a real
redis-server (the baseline build), in a copy of the module so the repository gets no target/;
and the pipeline's build of it (rule build_ycsb_binding), whose classpath runs YCSB's client.
Every JUnit test must run and pass: a skipped one fails here."""

import json
import shutil
import subprocess
import xml.etree.ElementTree as ET

import pytest

from conftest import start_redis
from slimio_repro import paths
from slimio_repro.build import ycsb_binding as ycsbbuild
from slimio_repro.agent import ycsb_client as ycsb
from slimio_repro.plan.cellplan import YcsbA

JUNIT_CLASSES = {"KeyCodecTest", "RedisStringClientTest", "YcsbClientEndToEndTest"}


def test_junit_suite_passes_against_a_real_redis_server(redis_bin, tmp_path):
    src = tmp_path / "ycsb-bindings"
    shutil.copytree(paths.YCSB_BINDINGS_DIR, src, ignore=shutil.ignore_patterns("target"))
    proc = subprocess.run(["mvn", "-B", "test", f"-Dredis.server={redis_bin / 'redis-server'}"],
                          cwd=src, capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
    reports = sorted((src / "redis-string" / "target" / "surefire-reports").glob("TEST-*.xml"))
    suites = [ET.parse(r).getroot() for r in reports]
    assert {s.get("name").rsplit(".", 1)[1] for s in suites} == JUNIT_CLASSES
    totals = {k: sum(int(s.get(k)) for s in suites)
              for k in ("tests", "failures", "errors", "skipped")}
    assert totals["tests"] >= 32, totals
    assert totals["failures"] == totals["errors"] == totals["skipped"] == 0, totals


@pytest.fixture(scope="module")
def ycsb_build(tmp_path_factory):
    out = tmp_path_factory.mktemp("ycsb") / "0.17.0"
    out.mkdir()
    record = ycsbbuild.build(out, out.parent / "maven.log")
    return out, record


def test_build_records_the_pinned_jars_and_runs_the_client(ycsb_build, redis_bin, tmp_path):
    out, record = ycsb_build
    assert record["ycsb_core_version"] == "0.17.0" == ycsbbuild.pinned_version()
    pins = ycsbbuild.pins()
    assert record["jars"][f"jedis-{pins['jedis.version']}.jar"]
    assert "core-0.17.0.jar" in record["jars"] and "HdrHistogram-2.1.4.jar" in record["jars"]
    assert not [j for j in record["jars"] if j.startswith(("junit", "hamcrest"))], \
        "test jars must not reach the client's classpath"
    assert json.loads((out / "build.json").read_text()) == record
    assert not (out / "src").exists(), "the Maven tree is removed after the build"
    assert record["java"].startswith("openjdk version")

    # The classpath and workload file it leaves run YCSB's real client against a real server.
    server = start_redis(redis_bin, tmp_path)
    port = server.port
    workload = YcsbA(records=500, operations=2000, threads=4, key_size_bytes=8,
                     value_size_bytes=100, jvm_heap_mb=256, on_demand_snapshot=False)
    try:
        for phase in ycsb.PHASES:
            cmd = ycsb.command(out, phase, port, workload, tmp_path / f"{phase}-")
            ycsb.run(cmd, tmp_path / f"{phase}.out", tmp_path / f"{phase}.tsv", 300, phase)
        cli = server.client()
        keys = list(cli.scan_iter(count=1000))
        assert len(keys) == 500 and all(len(k) == 8 and k.isdigit() for k in keys)
        assert {cli.strlen(k) for k in keys[:50]} == {100}
    finally:
        server.shutdown()
    run = ycsb.parse_summary((tmp_path / "run.out").read_text())
    ops = run["operations"]
    assert ops["READ"]["operations"] + ops["UPDATE"]["operations"] == 2000
    assert ops["READ"]["return_OK"] == ops["READ"]["operations"]
    assert ops["UPDATE"]["p99_9_us"] >= ops["UPDATE"]["p99_us"] > 0
    assert (tmp_path / "run-READ.hdr").stat().st_size > 0


def test_build_without_maven_names_the_setup(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ycsbbuild.YcsbError, match="make setup-host"):
        ycsbbuild.build(tmp_path / "out", tmp_path / "log")
