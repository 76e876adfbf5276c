"""End-to-end: the real pipeline on this machine at tiny scale (real Redis, real
redis-benchmark, real ext4 on a loop device). Needs root."""

import json
import os
import re
import shlex
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from conftest import (REPO, SIDE_BY_SIDE, TINY, VENV_BIN, plan_of, require_root, snakemake,
                      start_redis)
from slimio_repro.plan import Cell, RedisBenchmark
from slimio_repro.agent import layout
from slimio_repro.agent import benchmark
from slimio_repro.agent import cell_runner as cell
from slimio_repro.agent import fsimage
from slimio_repro.plan import sizing as cells
from slimio_repro import plan as configmod
from slimio_repro import paths
from slimio_repro.claims import catalog as claims_catalog
from test_report import check_report

pytestmark = pytest.mark.e2e

# TINY (conftest) is long enough (~5-10 s per cell here) for the sampler to see both phases.
BASELINE_ONLY = "matrix={testbeds: [bare], repetitions: 1, systems: [baseline]}"


def test_patched_benchmark_sends_exact_width_keys(redis_bin, tmp_path):
    server = start_redis(redis_bin, tmp_path)
    port = server.port
    try:
        cmd = benchmark.command(redis_bin, port, RedisBenchmark(
            clients=10, requests=3000, keyspace=500, value_size_bytes=100,
            key_size_bytes=8, pipeline=4, threads=0, on_demand_snapshot=False))
        benchmark.run(cmd, tmp_path / "b.tsv", tmp_path / "b.err", 120)
        out = benchmark.parse((tmp_path / "b.tsv").read_text())
        assert out["requests_completed"] == 3000 and out["p999_ms"] > 0
        keys = list(server.client().scan_iter(count=1000))
        assert 0 < len(keys) <= 500
        assert all(len(k) == 8 and k.isdigit() and int(k) < 500 for k in keys)
        assert len(server.client().get(keys[0])) == 100
        too_big = subprocess.run(
            [str(redis_bin / "redis-benchmark"), "-p", str(port), "-t", "set", "-n", "1",
             "-r", "1000000000", "--key-width", "8"], capture_output=True, text=True)
        assert too_big.returncode == 1 and "does not fit in --key-width 8" in too_big.stderr
    finally:
        server.shutdown()


def test_failed_cell_leaves_no_result_and_rerun_redoes_it(redis_bin, tmp_path):
    require_root()
    overrides = {"results_dir": str(tmp_path),
                 "matrix": {"testbeds": ["bare"], "systems": ["baseline"]},
                 "workloads": {"redis-benchmark": {"requests": 2000, "keyspace": 500,
                                                   "timeout_s": 0.001}}}
    plan = plan_of(overrides)
    c = Cell("bare", "baseline", "redis-benchmark", "periodical", 1)
    out = paths.Paths(plan.results_dir, plan.build_dir).cell_raw(c)
    with pytest.raises(benchmark.BenchmarkError, match="timeout_s"):
        cell.run(plan.cell(c), out)
    assert not out.exists()
    partial = out.with_name(out.name + ".partial")
    assert not (partial / "fs.img").exists()
    assert str(partial) not in Path("/proc/mounts").read_text()
    overrides["workloads"]["redis-benchmark"]["timeout_s"] = 600
    again = plan_of(overrides).cell(c)
    assert again.sha256() == plan.cell(c).sha256(), "a timeout must not make a cell stale"
    cell.run(again, out)
    assert (out / layout.RAW_COMPLETE).exists() and not partial.exists()
    with pytest.raises(cell.CellError, match="refusing to overwrite"):
        cell.run(again, out)


def make_reproduce(*config: str) -> subprocess.CompletedProcess:
    """`make reproduce` (the ci profile, which is bare) with ``config`` as its --config, and
    the host's set-up left out (-o host-ready: this host is set up, and the playbook is not
    what is tested here)."""
    args = "--config " + " ".join(map(shlex.quote, config))
    return subprocess.run(["make", "-o", "host-ready", "reproduce", f"VENV={VENV_BIN.parent}",
                           "PROFILE=ci", f"SNAKEMAKE_ARGS={args}"], cwd=REPO,
                          capture_output=True, text=True)


def test_a_failed_cell_leaves_the_rest_reported_and_only_it_runs_again(redis_bin, tmp_path):
    """One cell of `make reproduce` fails for real: the run goes on past it, the tables,
    verdicts and report are made from the other cell and name the failed one with its log,
    the claims that needed it say so, the target fails, and nothing records the cell as
    done: the next run, the cause removed, runs that cell alone."""
    import yaml
    require_root()
    results = tmp_path / "results"
    claims = tmp_path / "claims.yaml"
    rate = {"kind": "absolute", "direction": "equal", "testbed": "bare", "paper_value": 1e5,
            "tolerance": {"rule": "absolute", "value": 1e9, "reason": "a band for the test"},
            "source": "paper", "where": "test", "quote": "q"}
    claims.write_text(yaml.safe_dump({"claims": [
        {**rate, "id": "tiny-bound-rate", "measure": {"term": {
            "metric": "rps_avg", "system": "nopersist", "workload": "redis-benchmark"}}},
        {**rate, "id": "tiny-baseline-rate", "measure": {"term": {
            "metric": "rps_avg", "system": "baseline", "workload": "redis-benchmark",
            "policy": "periodical"}}}]}))
    run = [f"results_dir={results}", f"claims={{file: {claims}}}",
           "matrix={testbeds: [bare], systems: [baseline, nopersist], "
           "workloads: [redis-benchmark], policies: [periodical], repetitions: 1}",
           "workloads={redis-benchmark: {requests: 30000, keyspace: 6000}}",
           "server={sampler_interval_s: 0.25}"]
    # The failure, through a documented knob: server.snapshot_timeout_s, so short that the
    # baseline's On-Demand-Snapshot (BGSAVE after the workload) is still running when it is
    # first looked at. The bound takes no snapshot and finishes. The knob is operational
    # (no part of a cell's plan hash): removing it makes no finished cell stale.
    failing = make_reproduce(*run[:-1], "server={sampler_interval_s: 0.25, "
                                        "snapshot_timeout_s: 0.000001}")
    out = failing.stdout + failing.stderr
    assert failing.returncode != 0, out[-3000:]
    bad = "bare-baseline-redis-benchmark-periodical-r1"
    good = "bare-nopersist-redis-benchmark-none-r1"
    assert "reproduce: a job failed; making what the cells that finished allow" in out
    assert not (results / "raw" / bad).exists(), "a failed cell must not look done"
    assert str(results) not in Path("/proc/mounts").read_text(), "the failed cell's file " \
        "system is still mounted"
    assert (results / "raw" / good / layout.RAW_COMPLETE).exists()
    log = results / paths.CELL_LOG_PATTERN.format(**configmod.Cell.from_id(bad).wildcards())
    assert "(server.snapshot_timeout_s)" in log.read_text()
    # The tables and verdicts of the cell that finished ...
    assert list(pd.read_csv(results / paths.CELLS_TABLE).cell_id) == [good]
    assert (results / "tables" / "table3_redis_benchmark.md").exists()
    verdicts = pd.read_csv(results / paths.VERDICT_FILES["csv"]).set_index("claim_id")
    assert verdicts.loc["tiny-baseline-rate", "verdict"] == "not judged: cells failed"
    assert verdicts.loc["tiny-baseline-rate", "missing_cells"] == bad
    assert verdicts.loc["tiny-bound-rate", "verdict"] == "undecided"   # n = 1
    assert pd.isna(verdicts.loc["tiny-bound-rate", "missing_cells"])
    # ... the end-of-run summary and the report name the failed cell and its log.
    assert f"1 cell of this run did not finish" in failing.stdout
    assert f"    {log}\n" in failing.stdout
    page = (results / paths.REPORT).read_text()
    assert 'id="partial-run"' in page and f'id="missing-{bad}"' in page
    rel = log.relative_to(results).as_posix()
    assert f'Log: <a href="{rel}">{rel}</a>' in page
    assert "(server.snapshot_timeout_s)" in page[page.index(f'id="missing-{bad}"'):]
    assert f'<a href="raw/{bad}.partial/">' in page

    # The cause removed: the failed cell alone runs, and the run is whole again.
    planned = snakemake("-n", "--cores", "all", "reproduce", "--configfile",
                        "config/profiles/ci.yaml", "--config", *run)
    assert re.search(r"^run_cell\s+1$", planned.stdout, re.M), planned.stdout
    assert re.findall(r"^\s+output: \S*/raw/(\S+)$", planned.stdout, re.M) == [bad]
    # The list of missing cells is made again (its params changed), and what reads it.
    for rule in ("list_missing_cells", "judge_claims", "render_report"):
        assert re.search(rf"^{rule}\s+1$", planned.stdout, re.M), rule
    finished_at = (results / "raw" / good).stat().st_mtime
    again = make_reproduce(*run)
    assert again.returncode == 0, (again.stdout + again.stderr)[-3000:]
    assert (results / "raw" / good).stat().st_mtime == finished_at
    assert sorted(pd.read_csv(results / paths.CELLS_TABLE).cell_id) == [bad, good]
    verdicts = pd.read_csv(results / paths.VERDICT_FILES["csv"]).set_index("claim_id")
    assert verdicts.loc["tiny-baseline-rate", "verdict"] == "undecided"
    assert verdicts["missing_cells"].isna().all()
    assert 'id="partial-run"' not in (results / paths.REPORT).read_text()
    assert "did not finish" not in again.stdout


def test_a_busy_image_is_unmounted_by_stopping_what_holds_it(tmp_path):
    """scancel sends SIGTERM to every process of a job at once: a server's fork child can
    outlive the server and hold the cell's file system while the cell tears down."""
    require_root()
    holder = None
    with fsimage.fresh_image(tmp_path / "fs.img", tmp_path / "mnt", "ext4", 64 << 20,
                             True) as fs:
        (fs.mountpoint / "data").write_bytes(b"x" * 4096)
        holder = subprocess.Popen(["sleep", "300"], cwd=fs.mountpoint,
                                  start_new_session=True)
        assert fsimage.holders(fs.mountpoint) == [holder.pid]
    assert holder.wait(timeout=10) == -9
    assert str(tmp_path / "mnt") not in Path("/proc/mounts").read_text()
    assert not (tmp_path / "fs.img").exists()


def reproduce_tiny(results: Path, matrix: str) -> pd.DataFrame:
    """`snakemake reproduce` at tiny scale into results; returns Table 3 (CSV)."""
    require_root()
    proc = snakemake("--cores", "all", "reproduce", "--config", f"results_dir={results}",
                     matrix, *TINY)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return pd.read_csv(results / "tables" / "table3_redis_benchmark.csv")


@pytest.mark.nightly
def test_smoke_pipeline_end_to_end(redis_bin, tmp_path):
    """The baseline alone through the bare pipeline: its tables, records, provenance and
    figures, and what makes its cells stale. Nightly: test_slimio_pipeline_end_to_end runs
    the same pipeline over the baseline's cells too, beside SlimIO's."""
    results = tmp_path / "results"
    table = reproduce_tiny(results, BASELINE_ONLY)
    assert set(table.policy) == {"periodical", "always"}
    for _, row in table.iterrows():
        assert row.n == 1
        assert row.rps_avg_mean > 0 and row.rps_wal_only_mean > 0
        assert row.set_p999_ms_mean > 0
        assert row.snapshot_time_s_mean > 0 and row.wal_snapshot_count_mean >= 1
        assert row.mem_wal_only_peak_gb_mean > 0
    md = (results / "tables" / "table3_redis_benchmark.md").read_text()
    assert "| Periodical-Log | Baseline | bare | 1 |" in md

    ycsb_table = pd.read_csv(results / "tables" / "table4_ycsb_a.csv")
    assert set(ycsb_table.policy) == {"periodical", "always"}
    for _, row in ycsb_table.iterrows():
        assert row.n == 1 and row.rps_avg_mean > 0 and row.rps_wal_only_mean > 0
        assert row.set_p999_ms_mean > 0 and row.get_p999_ms_mean > 0
        assert row.snapshot_time_s_mean > 0 and row.wal_snapshot_count_mean >= 1
    assert "| Periodical-Log | Baseline | bare | 1 |" in (
        results / "tables" / "table4_ycsb_a.md").read_text()

    records = sorted((results / "cells").glob("*.json"))
    assert len(records) == 4
    for record_file in records:
        record = json.loads(record_file.read_text())
        assert record["recovery_verified"] is True, record_file
        assert record["recovery_time_s"] > 0 and record["recovery_mb_s"] > 0
        # The paper takes an On-Demand-Snapshot after redis-benchmark, not after YCSB-A.
        assert record["on_demand_snapshot_count"] == (record["workload"] == "redis-benchmark")
        raw = results / "raw" / record["cell_id"]
        prov = json.loads((raw / layout.RAW_PROVENANCE).read_text())
        assert prov["redis_build"]["source_sha256"].startswith("4b1dc4ee")
        assert prov["redis_build"]["benchmark_patch_series_sha256"]
        assert prov["storage"]["filesystem"] == "ext4" and prov["git"]["commit"]
        assert prov["storage"]["loop_direct_io_effective"] is True
        assert not list(raw.glob("*.img")), "the file-system image must not be kept"
    for ext in ("png", "pdf"):
        assert len(list((results / "figures" / "runtime_rps").glob(f"*.{ext}"))) == 4
    # Figures 4 and 5 compare the baseline with SlimIO: no such figure without SlimIO.
    assert not list((results / "figures").glob("fig[45]_*"))

    again = snakemake("-n", "--cores", "all", "reproduce", "--config",
                      f"results_dir={results}", BASELINE_ONLY, *TINY)
    assert "Nothing to be done" in again.stdout + again.stderr

    # Each cell keeps the plan it ran with; changing one workload's parameter makes exactly
    # that workload's cells stale, and the dry run says why.
    plan = json.loads((results / "raw" / "bare-baseline-ycsb-a-always-r1" / "plan.json")
                      .read_text())
    assert plan["workload"]["records"] == 20000 and plan["cell"]["policy"] == "always"
    changed = [t.replace("requests: 300000", "requests: 300001") for t in TINY]
    rerun = snakemake("-n", "--cores", "all", "run_matrix", "--config",
                      f"results_dir={results}", BASELINE_ONLY, *changed)
    out = rerun.stdout + rerun.stderr
    assert rerun.returncode == 0, out
    assert re.search(r"^run_cell\s+2$", out, re.M), out
    assert "Params have changed since last execution" in out
    planned = set(re.findall(r"^\s+output: \S*/raw/(bare-\S+-r1)$", out, re.M))
    assert planned == {"bare-baseline-redis-benchmark-periodical-r1",
                       "bare-baseline-redis-benchmark-always-r1"}, planned


def test_slimio_pipeline_end_to_end(tiny_bare_run, tmp_path):
    """Both systems side by side at tiny scale, and the no-persistence bound (the session's
    tiny bare run, conftest.TINY): SlimIO's cells run, recover from its device and verify,
    the ratio tables compare them, and every RPS ratio has the bound's ceiling."""
    results = tiny_bare_run.results
    table = pd.read_csv(results / "tables" / "table3_redis_benchmark.csv")
    assert set(zip(table.system, table.policy)) == {
        (s, p) for s in ("baseline", "slimio") for p in ("periodical", "always")} | {
        ("nopersist", "none")}
    for _, row in table[table.system == "slimio"].iterrows():
        assert row.n == 1 and row.rps_avg_mean > 0 and row.set_p999_ms_mean > 0
        assert row.snapshot_time_s_mean > 0 and row.wal_snapshot_count_mean >= 1
    md = (results / "tables" / "table3_redis_benchmark.md").read_text()
    assert "| Periodical-Log | SlimIO | bare | 1 |" in md
    for name, metrics in (("table3_ratios", 9), ("table4_ratios", 8), ("table5_ratios", 2)):
        ratios = pd.read_csv(results / "tables" / f"{name}.csv")
        assert len(ratios) == 2 * metrics, name  # both policies, every metric
        # SSD WAF needs the vm testbed's FDP log (and the modelled one its NVMe trace): their
        # rows are there, with no ratio.
        waf = ratios.metric.isin(["waf", "waf_modelled"])
        assert ratios[waf].ratio_to_baseline.isna().all() and (ratios[waf].system_n == 0).all()
        ratios = ratios[~waf]
        assert (ratios.system == "slimio").all() and (ratios.ratio_to_baseline > 0).all()
        assert (ratios.system_n == 1).all() and (ratios.baseline_n == 1).all()
        rps = ratios[ratios.metric.str.startswith("rps_")]
        if name != "table5_ratios":
            assert len(rps) == 2 * 3 and (rps.bound_n == 1).all(), name
            # On bare, the bound (nothing persisted) is at least about as fast as the
            # baseline; noise can put it a little below.
            assert (rps.bound_to_baseline > 0.5).all() and (rps.system_fraction_of_bound > 0).all()
    bound = results / "raw" / "bare-nopersist-redis-benchmark-none-r1"
    assert "appendonly no" in (bound / layout.RAW_REDIS_CONF).read_text()
    assert json.loads((bound / layout.RAW_DEVICE_STATS).read_text())["data_dir_bytes"] == 0
    assert not (bound / layout.RAW_RECOVERY).exists()

    slimio_records = sorted((results / "cells").glob("bare-slimio-redis-benchmark-*.json"))
    assert len(slimio_records) == 2
    for record_file in slimio_records:
        record = json.loads(record_file.read_text())
        assert record["recovery_verified"] is True, record_file
        assert record["recovery_time_s"] > 0 and record["on_demand_snapshot_count"] == 1
        assert record["slimio_recovery_bytes"] == record["recovery_bytes"] > 0
        assert record["slimio_recovery_time_s"] > 0 and record["slimio_recovery_mb_s"] > 0
        # The snapshot's no-I/O bound: a second BGSAVE into SlimIO's discard sink, of the
        # same dataset (about the bytes the On-Demand-Snapshot wrote), not counted as one.
        assert 0 < record["snapshot_bound_s"] and 0 < record["on_demand_snapshot_child_s"]
        assert abs(record["snapshot_bound_bytes"] - record["on_demand_snapshot_bytes"]) < \
            0.01 * record["on_demand_snapshot_bytes"]
        raw = results / "raw" / record["cell_id"]
        conf = (raw / layout.RAW_REDIS_CONF).read_text()
        assert "slimio-format never" in conf and "slimio-backend file" in conf
        assert (raw / layout.RAW_SLIMIO_INFO_END).read_text().startswith("# ")
        formatted = json.loads((raw / layout.RAW_SLIMIO_INSPECT_BEFORE).read_text())
        after = json.loads((raw / layout.RAW_SLIMIO_INSPECT_AFTER).read_text())
        assert formatted["wal_generations"] == [] and after["wal_generations"]
        assert after["format_id"] == formatted["format_id"]
        assert {s["role"] for s in after["slots"] if s["valid"]} >= {"wal-snapshot",
                                                                     "on-demand"}
        device = json.loads((raw / layout.RAW_DEVICE_STATS).read_text())
        assert device["data_dir_bytes"] < 1 << 20, "SlimIO must not write the AOF or RDB files"
        prov = json.loads((raw / layout.RAW_PROVENANCE).read_text())
        assert prov["redis_build"]["slimio_patch_series"] == "7.0"
        assert prov["redis_build"]["slimio_patch_lines_touched"]["total"] > 0
        assert prov["storage"]["slimio"]["device_bytes"] == record["slimio_device_bytes"]
        assert not list(raw.glob("*.img")) and not list(raw.glob("*.dev"))
    assert (results / "figures" / "fig5_runtime_rps.png").stat().st_size > 1000
    roof = (results / "tables" / "roofline.md").read_text()
    assert "| Snapshot time / bound |" in roof and "slimio-snapshot-sink discard" in roof

    ycsb_records = sorted((results / "cells").glob("bare-*-ycsb-a-*.json"))
    assert len(ycsb_records) == 5   # two systems x two policies, and the bound
    for record_file in ycsb_records:
        record = json.loads(record_file.read_text())
        if record["system"] == "nopersist":
            assert "recovery_verified" not in record and record["load_records"] == 20000
        else:
            assert record["recovery_verified"] is True and record["recovery_dbsize"] == 20000
        assert record["load_records"] == 20000 and record["requests_completed"] == 100000
        assert record["get_operations"] + record["set_operations"] == 100000
        assert 0.45 < record["set_operations"] / 100000 < 0.55
        assert record["ycsb_client_host"] == "host" and record["ycsb_core_version"] == "0.17.0"
        assert record["ycsb_status_intervals"] >= 1 and record["on_demand_snapshot_count"] == 0
        raw = results / "raw" / record["cell_id"]
        for hdr in ("ycsb-load-INSERT.hdr", "ycsb-run-READ.hdr", "ycsb-run-UPDATE.hdr"):
            assert (raw / hdr).stat().st_size > 0, hdr
        argv = [c["argv"] for c in json.loads((raw / layout.RAW_COMMANDS).read_text())
                if c["what"] == "ycsb run"][0]
        assert "site.ycsb.db.redisstring.RedisStringClient" in argv
    ycsb_ratios = pd.read_csv(results / "tables" / "table4_ratios.csv")
    assert set(ycsb_ratios.metric) >= {"get_p999_ms", "set_p999_ms", "rps_avg"}

    # The claims judged on this run (bare: the vm and model claims say which cells they need)
    # and the report, opened in headless Chromium.
    verdicts = pd.read_csv(results / paths.VERDICT_FILES["csv"])
    assert len(verdicts) == len(claims_catalog.load())
    vm_claim = verdicts[verdicts.claim_id == "t3-rps-wal-only-periodical-32pct"].iloc[0]
    assert vm_claim.verdict == "not testable here" and "matrix.testbeds" in vm_claim.reason
    check_report(results, tmp_path / "report.png", ["fig5_runtime_rps", "waf_sensitivity"])


def test_decide_runs_the_repetitions_an_undecided_claim_needs(redis_bin, slimio_bin, tmp_path):
    """A real run at n = 2, a claim whose band's edge sits inside its interval (undecided),
    then `slimio-repro decide`: it plans the repetitions the claim names, runs them as new
    -rN cells through the pipeline (the first two untouched), and judges the claim again at
    the second look's confidence."""
    import yaml
    from slimio_repro.claims import catalog, judge, stats
    require_root()
    results = tmp_path / "results"
    cfg = tmp_path / "tiny.yaml"
    cfg.write_text(yaml.safe_dump({
        "server": {"sampler_interval_s": 0.25},
        "workloads": {"redis-benchmark": {"requests": 300000, "keyspace": 57000}},
        "matrix": {"testbeds": ["bare"], "systems": ["slimio"], "repetitions": 2,
                   "workloads": ["redis-benchmark"], "policies": ["periodical"]}}))
    proc = snakemake("--cores", "all", "reproduce", "--configfile", str(cfg), "--config",
                     f"results_dir={results}")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    first = {p.name: p.stat().st_mtime for p in (results / "raw").iterdir()}
    assert set(first) == {"bare-slimio-redis-benchmark-periodical-r1",
                          "bare-slimio-redis-benchmark-periodical-r2"}

    # The claim: SlimIO's mean WAL-only rate in a band whose lower edge lies inside the
    # interval at n = 2 and outside the one 6 repetitions would give (at 97.5 %); its upper
    # edge is far.
    records = pd.read_csv(results / paths.CELLS_TABLE)
    rps = records["rps_wal_only"].to_numpy(float)
    iv = stats.interval(lambda m: m["x"], [stats.Group(("x",), rps[:, None])],
                        log_scale=False)
    gap = (iv.high - iv.value + stats.half_width_at(iv, 6, 0.975)) / 2
    wide = 10 * iv.value
    claims = tmp_path / "claims.yaml"
    claims.write_text(yaml.safe_dump({"claims": [{
        "id": "tiny-slimio-rate", "source": "paper", "where": "test", "quote": "q",
        "kind": "absolute", "measure": {"term": {
            "metric": "rps_wal_only", "system": "slimio", "workload": "redis-benchmark",
            "policy": "periodical"}},
        "paper_value": float(iv.value - gap + wide), "direction": "equal", "testbed": "bare",
        "tolerance": {"rule": "absolute", "value": float(wide),
                      "reason": "a band for the test"}}]}))
    before = judge.judge(catalog.load(claims)[0], records)
    assert before.verdict == judge.UNDECIDED and 2 < before.needed_n <= 6, before.reason
    want = before.needed_n
    cli = [str(VENV_BIN / "slimio-repro"), "decide", str(results), "--budget", "30m",
           "--configfile", str(cfg), "--claims", str(claims), "--max-looks", "1"]
    done = subprocess.run(cli, capture_output=True, text=True, cwd=REPO,
                          env={**os.environ, "PATH": f"{VENV_BIN}:{os.environ['PATH']}",
                               "SLURM_CONF": "/dev/null"})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert f"look 1: {want - 2} more cells" in done.stdout, done.stdout

    looks = yaml.safe_load((results / "claims" / "decide.yaml").read_text())["matrix"]["looks"]
    assert looks == [{"bare-slimio-redis-benchmark-periodical": want}]
    raw = {p.name: p.stat().st_mtime for p in (results / "raw").iterdir()}
    assert set(raw) == {f"bare-slimio-redis-benchmark-periodical-r{r}"
                        for r in range(1, want + 1)}
    assert all(raw[name] == t for name, t in first.items()), "a finished cell ran again"
    verdict = json.loads((results / paths.VERDICT_FILES["json"]).read_text())["verdicts"][0]
    assert verdict["n"] == want and verdict["confidence_level"] == pytest.approx(0.975)
    assert verdict["history"].startswith("n=2: undecided") and f"; n={want}: " in verdict["history"]
    assert (results / paths.REPORT).exists()
