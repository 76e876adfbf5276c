"""The bench (slimio-repro bench): its plans, its schedule, its ratios; and a real bare run."""

import json
import os
import re
import statistics
import subprocess
from pathlib import Path

import pytest

from conftest import VENV_BIN
from slimio_repro import paths
from slimio_repro import plan as planmod
from slimio_repro.agent import bench_runs as guest_bench
from slimio_repro.plan import sizing
from slimio_repro.run import bench


@pytest.fixture
def config():
    return planmod.load([paths.CONFIG_DIR / "config.yaml"])


def _plans(config, testbed="bare", systems=("nopersist", "baseline", "slimio"),
           requests=20_000, warmup=2_000):
    return planmod.bench_plans(config, testbed, list(systems), ["periodical", "always"],
                               requests, warmup)


def test_bench_plans_measure_the_wal_path_alone(config):
    """No rewrite (the trigger is above the WAL of warm-up plus measurement), no SlimIO
    early rewrite (5/8 of its region is above the trigger), no snapshot, no recovery."""
    plans = _plans(config)
    assert sorted((p.cell.system, p.cell.policy) for p in plans) == sorted(
        [("nopersist", "none")] + [(s, p) for s in ("baseline", "slimio")
                                   for p in ("periodical", "always")])
    wal = 22_000 * sizing.aof_bytes_per_set(8, 4096)
    for p in plans:
        assert p.workload.requests == 20_000 and not p.workload.on_demand_snapshot
        assert not p.recovery.enabled
        assert p.sizing.auto_aof_rewrite_min_size_bytes > wal
        if p.is_slimio:
            assert p.slimio.wal_size_bytes * 5 / 8 > p.sizing.auto_aof_rewrite_min_size_bytes


def test_vm_bench_plans_have_no_roofline_and_include_slimio_nofdp(config):
    plans = _plans(config, "vm", bench.DEFAULT_SYSTEMS["vm"], 1000, 100)
    assert {p.cell.system for p in plans} == set(bench.DEFAULT_SYSTEMS["vm"])
    assert all(not p.vm.roofline.enabled for p in plans)
    # Every system under both policies: the matrix's restriction of slimio-nofdp to
    # Figure 4's periodical cells (matrix.only) is not the bench's.
    assert config["matrix"]["only"]["slimio-nofdp"]["policies"] == ["periodical"]
    assert {p.cell.policy for p in plans if p.cell.system == "slimio-nofdp"} == \
        {"periodical", "always"}


def test_schedule_interleaves_and_rotates(config):
    """Each round runs every system once per policy block, the bound included, in an
    order rotated by one per round."""
    plans = _plans(config)
    todo = guest_bench.schedule(plans, 3)
    assert len(todo) == 3 * 2 * 3
    blocks = [(r, block) for r, block, _ in todo]
    assert blocks == [(r, b) for r in range(3) for b in ("periodical", "always")
                      for _ in range(3)]
    first = [p.cell.system for r, b, p in todo if b == "periodical"]
    assert first[:3] == ["nopersist", "baseline", "slimio"]
    assert first[3:6] == ["baseline", "slimio", "nopersist"]
    assert first[6:9] == ["slimio", "nopersist", "baseline"]
    for r, block, p in todo:
        assert p.cell.policy == (block if p.persists else "none")


def test_ratios_are_per_round_then_median_and_spread():
    runs = []
    for k, (np_, base, slim) in enumerate([(100, 50, 60), (110, 55, 44), (90, 45, 90)]):
        for system, rps in (("nopersist", np_), ("baseline", base), ("slimio", slim)):
            runs.append({"round": k, "policy_block": "always", "system": system, "rps": rps})
    rows = {r["ratio"]: r for r in bench._ratio_rows(runs)}
    assert rows["slimio / baseline"]["values"] == pytest.approx([1.2, 0.8, 2.0])
    assert rows["slimio / baseline"]["median"] == pytest.approx(1.2)
    assert (rows["slimio / baseline"]["min"], rows["slimio / baseline"]["max"]) == \
        pytest.approx((0.8, 2.0))
    assert rows["baseline / nopersist"]["median"] == pytest.approx(0.5)
    assert "slimio-nofdp / baseline" not in rows


def test_snapshot_and_recovery_ratios_take_their_bounds_from_the_same_round():
    """The snapshot's no-I/O bound is the slimio run's BGSAVE into nothing; a recovery's own
    bound is the same run's log loaded from memory."""
    runs = []
    for k, scale in enumerate([1.0, 2.0]):       # a slow round moves every run alike
        runs += [
            {"round": k, "policy_block": "always", "system": "nopersist", "rps": 100,
             "aof_rewrites": 0,
             "snapshot_s": 1.2 * scale, "recovery_s": 0.5 * scale},
            {"round": k, "policy_block": "always", "system": "baseline", "rps": 50,
             "aof_rewrites": 0,
             "snapshot_s": 2.0 * scale, "recovery_s": 1.5 * scale,
             "recovery_bound_s": 1.0 * scale},
            {"round": k, "policy_block": "always", "system": "slimio", "rps": 60,
             "aof_rewrites": 0,
             "snapshot_s": 1.1 * scale, "snapshot_bound_s": 1.0 * scale,
             "recovery_s": 0.9 * scale, "recovery_bound_s": 0.75 * scale}]
    rows = {(r["metric"], r["ratio"]): r for r in bench._ratio_rows(runs)}
    nothing = "no-I/O bound (BGSAVE into nothing)"
    assert rows[("snapshot time", f"slimio / {nothing}")]["values"] == pytest.approx([1.1, 1.1])
    assert rows[("snapshot time", f"baseline / {nothing}")]["median"] == pytest.approx(2.0)
    assert rows[("snapshot time", "slimio / baseline")]["median"] == pytest.approx(0.55)
    assert rows[("recovery time", "slimio / its log loaded from memory")]["median"] == \
        pytest.approx(1.2)
    assert rows[("recovery time", "baseline / the RDB loaded from memory")]["median"] == \
        pytest.approx(3.0)
    assert rows[("recovery time", "slimio / baseline")]["median"] == pytest.approx(0.6)
    # The bound has no log of its own, and nothing is divided by a missing number.
    assert ("recovery time", "nopersist / its log loaded from memory") not in rows
    md = bench.markdown(bench._with_rates(runs), list(rows.values()), bench._rate_rows(runs),
                        "about")
    assert "## Ratios of snapshot time (lower is better" in md
    assert "| always | slimio / baseline | 2 | 0.600 | 0.600-0.600 |" in md


def test_always_log_is_held_against_one_durable_write_of_its_mean_batch(config, monkeypatch,
                                                                       tmp_path):
    """The bound's arithmetic: the mean batch's WAL blocks plus the tail block it rewrites,
    written durably one at a time; the run's SETs per batch over fio's mean latency."""
    from slimio_repro.agent import roofline
    seen = {}

    def fake_measure(fio_bin, target, rw, out_json, **kw):
        seen.update(kw, target=target, rw=rw)
        return {"lat_mean_ms": 2.0}
    monkeypatch.setattr(roofline, "measure_rate", fake_measure)
    plan = next(p for p in _plans(config, systems=("slimio",)) if p.cell.policy == "always")
    # 5,000 batches of 10,000 bytes: 3 blocks of 4,064 payload bytes, and the tail's.
    got = guest_bench.durable_write_bound(plan, "fio", Path("/dev/ng0n1"), tmp_path,
                                          50_000_000, 5_000, 100_000)
    assert seen["block_size_bytes"] == 4 * 4096 and seen["iodepth"] == 1
    assert seen["durable"] is True and seen["rw"] == "write"
    assert got["sets_per_batch"] == 20 and got["durable_write_ms"] == 2.0
    assert got["durable_write_bound_rps"] == pytest.approx(20 / 0.002)
    # With the bound's 10,000 SET/s beside it: 0.1 ms of server per SET, and 2 ms of device
    # per 20 SETs, in turn: 5,000 SET/s.
    runs = [{"round": 0, "policy_block": "always", "system": "nopersist", "rps": 10_000.0},
            {"round": 0, "policy_block": "always", "system": "slimio", "rps": 4_000.0,
             "durable_write_bound_rps": got["durable_write_bound_rps"]}]
    rows = {r["ratio"]: r for r in bench._ratio_rows(bench._with_rates(runs))}
    assert rows["slimio / one durable write per batch"]["median"] == pytest.approx(0.4)
    assert rows["slimio / nopersist plus one durable write per batch"]["median"] == \
        pytest.approx(0.8)


def test_a_profile_samples_the_process_with_perf_and_reports_its_symbols(tmp_path,
                                                                        monkeypatch):
    """The bench's --profile on a real process: perf's software clock samples a busy
    Python for half a second, and the report holds its samples, per thread and symbol, and
    none of a twin (a second Python running the same loop, as the other test worker may
    be). The block is sampled from its start however long perf takes to start (here 2 s
    more, as on a busy host)."""
    import shutil
    import sys
    import time as _time
    slow = tmp_path / "slow-perf"
    slow.mkdir()
    (slow / "perf").write_text('#!/bin/sh\n[ "$1" = record ] && sleep 2\n'
                               f'exec {shutil.which("perf")} "$@"\n')
    (slow / "perf").chmod(0o755)
    monkeypatch.setenv("PATH", f"{slow}:{os.environ['PATH']}")
    busy, twin = (subprocess.Popen([sys.executable, "-c", "while True: pass"])
                  for _ in range(2))
    try:
        report = tmp_path / "profiles" / "run-0.txt"
        with guest_bench.profiled(busy.pid, tmp_path, report):
            _time.sleep(0.5)
    finally:
        for p in (busy, twin):
            p.kill()
            p.wait()
    text = report.read_text()
    by_pid = subprocess.run(["perf", "report", "--stdio", "-n", "--sort", "pid", "-i",
                             str(tmp_path / "perf.data")], capture_output=True, text=True).stdout
    samples = {int(pid): int(n) for n, pid in
               re.findall(r"^\s+[\d.]+%\s+(\d+)\s+(\d+):", by_pid, re.M)}
    assert samples.get(busy.pid, 0) > 100 and samples.get(twin.pid, 0) > 100, by_pid
    rows = re.findall(r"^\s+[\d.]+%\s+(\d+):(\S+)\s+(\S+)", text, re.M)
    assert rows and all(int(tid) == busy.pid for tid, _, _ in rows), f"{text}\n{by_pid}"
    assert any(comm.startswith("python") and "python" in dso for _, comm, dso in rows), text
    assert f"# Samples: {samples[busy.pid]} " in text, f"{text}\n{by_pid}"
    # The whole machine's samples per command, from a recording of every CPU (which CPUs
    # sample while idle depends on the kernel: a VM's guest shows swapper, this host not).
    system = (tmp_path / "profiles" / "run-0-system.txt").read_text()
    commands = re.findall(r"^\s+[\d.]+%\s+(\S+)\s*$", system, re.M)
    assert commands and any(c.startswith("python") for c in commands), system
    header = subprocess.run(["perf", "report", "--header-only", "-i",
                             str(tmp_path / "perf.data")], capture_output=True, text=True).stdout
    assert re.search(r"# cmdline : \S*perf record -a ", header), header
    # Nothing is recorded without a report to write.
    with guest_bench.profiled(busy.pid, tmp_path / "none", None):
        pass
    assert not (tmp_path / "none").exists()


def test_the_machine_profile_gives_a_process_the_cpu_time_the_kernel_counted(tmp_path):
    """The accounting's source against the kernel's own count: a process that burns CPU
    for about 0.6 s under a name of its own, profiled from before its start to after its
    end; perf's whole-machine report per command, object and symbol gives it the CPU time
    its rusage says, within a tenth (999 Hz: about 600 samples)."""
    import sys
    burn = ("import time\nopen('/proc/self/comm', 'w').write('slimio-burn')\n"
            "t = time.process_time()\nwhile time.process_time() - t < 0.6: pass\n")
    report = tmp_path / "profiles" / "run-0.txt"
    with guest_bench.profiled(os.getpid(), tmp_path, report):
        child = subprocess.Popen([sys.executable, "-c", burn])
        _, status, usage = os.wait4(child.pid, 0)
    assert status == 0
    counted = usage.ru_utime + usage.ru_stime
    doc = json.loads(report.with_name("run-0-machine.json").read_text())
    assert doc["report"] == guest_bench.PERF_REPORT_MACHINE
    mine = [r for r in doc["rows"] if r["comm"] == "slimio-burn"]
    sampled = sum(r["ns"] for r in mine) / 1e9
    assert counted > 0.55 and sampled == pytest.approx(counted, rel=0.1), (sampled, counted)
    assert any("python" in r["dso"] and not r["kernel"] for r in mine), mine
    assert all(set(r) == {"comm", "dso", "sym", "kernel", "ns", "samples"} and r["samples"] > 0
               for r in doc["rows"])
    # The same report's text, parsed again, and a line that is not perf's is named.
    text = subprocess.run([*guest_bench.PERF_REPORT_MACHINE, "-i", str(tmp_path / "perf.data")],
                          capture_output=True, text=True, check=True).stdout
    assert guest_bench.machine_profile(text) == doc["rows"]
    with pytest.raises(guest_bench.BenchRunError, match="line 2 of perf report .*'oops'"):
        guest_bench.machine_profile("# header\noops\n")


def _machine(rows):
    return {"report": guest_bench.PERF_REPORT_MACHINE,
            "rows": [{"comm": c, "dso": d, "sym": s, "kernel": d == "[kernel.kallsyms]",
                      "ns": int(us * 1e3 * SETS), "samples": 1} for c, d, s, us in rows]}


SETS = 1000


def test_the_accounting_adds_up_each_runs_cpu_per_set_by_where_it_went(tmp_path):
    """A known truth: two rounds of nopersist and slimio whose profiles put known us per
    SET in each group; the tables give each group's mean, each pair's difference, and the
    symbols' differences, whose lines add up to the busy CPU's difference exactly."""
    base = [("redis-server", "redis-server", "processCommand", 50.0),
            ("redis-server", "libc.so.6", "__memmove_avx_unaligned_erms", 5.0),
            ("redis-server", "[kernel.kallsyms]", "tcp_sendmsg", 40.0),
            ("redis-benchmark", "redis-benchmark", "writeHandler", 60.0),
            ("kworker/0:1", "[kernel.kallsyms]", "process_one_work", 2.0),
            ("swapper", "[kernel.kallsyms]", "pv_native_safe_halt", 30.0)]
    extra = {0: [("redis-server", "redis-server", "crc32cSw", 6.0),
                 ("redis-server", "libc.so.6", "__memmove_avx_unaligned_erms", 1.0),
                 ("redis-server", "[kernel.kallsyms]", "nvme_submit_cmds", 3.0),
                 ("iou-wrk-1234", "[kernel.kallsyms]", "io_wq_worker", 2.0)],
             1: [("redis-server", "redis-server", "crc32cSw", 4.0),
                 ("redis-server", "[kernel.kallsyms]", "nvme_submit_cmds", 5.0)]}
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    runs = []
    for k in (0, 1):
        for i, (system, rows) in enumerate((("nopersist", base), ("slimio", base + extra[k]))):
            n = 2 * k + i
            runs.append({"run": n, "round": k, "policy_block": "periodical", "system": system,
                         "requests_completed": SETS, "host_vcpu_us_per_set": 200.0 + i})
            (profiles / f"run-{n}-{system}-periodical-machine.json").write_text(
                json.dumps(_machine(rows)))
    rows = bench.accounting(runs, profiles)
    got = {(r["round"], r["system"], r["group"]): r["us_per_set"] for r in rows}
    slimio_code, redis_code, libc, kernel = (g for g, _ in bench.ACCOUNT_GROUPS[:4])
    assert got[0, "slimio", slimio_code] == pytest.approx(6.0)
    assert got[0, "slimio", redis_code] == pytest.approx(50.0)
    assert got[0, "slimio", libc] == pytest.approx(6.0)
    assert got[0, "slimio", kernel] == pytest.approx(45.0)      # io_uring's worker too
    assert got[0, "nopersist", bench.IDLE_GROUP] == pytest.approx(30.0)
    assert got[0, "nopersist", bench.BUSY] == pytest.approx(157.0)     # all but idle
    assert got[1, "slimio", bench.BUSY] == pytest.approx(166.0)
    assert got[1, "slimio", bench.HOST_VCPU] == 201.0
    md = "\n".join(bench.accounting_lines(rows))
    # Means over the rounds: SlimIO's code 5.0 us per SET, the kernel's 5.0 more (io_uring's
    # worker in one round), the busy CPUs (12 + 9) / 2 = 10.5 more.
    assert f"| {slimio_code} | 0.0 | 5.0 | +5.0 |" in md, md
    assert f"| {kernel} | 40.0 | 45.0 | +5.0 |" in md, md
    assert f"| {bench.BUSY} | 157.0 | 167.5 | +10.5 |" in md, md
    assert f"| {bench.HOST_VCPU} | 200.0 | 201.0 | +1.0 |" in md, md
    assert f"| {slimio_code} | crc32cSw (redis-server) | +5.0 |" in md
    assert f"| {kernel} | nvme_submit_cmds ([kernel.kallsyms]) | +4.0 |" in md
    assert f"| {libc} | __memmove_avx_unaligned_erms (libc.so.6) | +0.5 |" in md
    assert "processCommand" not in md.split("symbols whose")[1]     # no difference: not listed
    assert "| | **all CPUs, busy** | **+10.5** |" in md
    listed = [float(x) for x in re.findall(r"^\| [^|]*\| [^|*]+ \| ([+-][\d.]+) \|$", md, re.M)]
    assert sum(listed) == pytest.approx(10.5), md
    # With fewer symbols listed than differ, the rest is one line and the sum still holds.
    top = bench.TOP_SYMBOLS
    bench.TOP_SYMBOLS = 2
    try:
        md = "\n".join(bench.accounting_lines(rows))
    finally:
        bench.TOP_SYMBOLS = top
    assert "| | the other 2 symbols | +1.5 |" in md, md


def test_the_no_io_bounds_refuse_a_directory_that_is_not_in_memory():
    from slimio_repro.agent import inmemory
    assert inmemory.fs_type(inmemory.MEMORY_ROOT) == "tmpfs"
    with inmemory.memory_dir("t-") as mem:
        assert inmemory.fs_type(mem) == "tmpfs" and mem.is_dir()
    assert not mem.exists()
    # /proc is never tmpfs; the refusal comes before anything is created there.
    with pytest.raises(inmemory.InMemoryError, match="/proc is on proc, not tmpfs"):
        with inmemory.memory_dir("t-", root=Path("/proc")):
            pass


@pytest.mark.parametrize("kw, message", [
    (dict(rounds=0), "--rounds 0"),
    (dict(requests=0), "--requests 0"),
    (dict(snapshots=0), "--snapshots 0: take at least 1"),
    (dict(systems=["nopersist"]), "at least one system that persists"),
    (dict(fio_bin=Path("/nonexistent/fio")), "build_fio_pinned` \\(or pass --wal-only"),
])
def test_bad_options_are_refused_before_anything_runs(tmp_path, kw, message):
    args = dict(out_dir=tmp_path / "b", systems=["baseline"], rounds=1, requests=10, warmup=0)
    args.update(kw)
    with pytest.raises(bench.BenchError, match=message):
        bench.check(**args)


def test_a_profile_without_perf_is_refused_naming_the_fix(tmp_path, monkeypatch):
    monkeypatch.setattr(bench.shutil, "which", lambda name: None)
    with pytest.raises(bench.BenchError, match="--profile needs perf.*make setup-host"):
        bench.check(tmp_path / "out", ["slimio"], 1, 10, 0, perf_needed=True)
    bench.check(tmp_path / "out", ["slimio"], 1, 10, 0, perf_needed=False)


def test_an_existing_result_is_never_overwritten(tmp_path):
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "bench.md").write_text("earlier")
    proc = subprocess.run([str(VENV_BIN / "slimio-repro"), "bench", "--out",
                           str(tmp_path / "b")], capture_output=True, text=True)
    assert proc.returncode == 2 and "never overwrites a result" in proc.stderr
    assert (tmp_path / "b" / "bench.md").read_text() == "earlier"


def test_a_wal_too_small_for_the_bench_is_named_at_planning_time(config):
    config["slimio"]["wal_size_mb"] = 8
    plans = _plans(config)      # the bench sizes the WAL region itself
    assert all(p.slimio.wal_size_bytes > 8 << 20 for p in plans if p.is_slimio)


@pytest.mark.slow
def test_bare_bench_runs_every_system_and_writes_its_tables(redis_bin, slimio_bin, fio_bin,
                                                            tmp_path):
    """A real bench on this host at tiny scale: every run of the schedule, no rewrite, the
    ratio table with both policies, the provenance."""
    out = tmp_path / "bench"
    proc = subprocess.run([str(VENV_BIN / "slimio-repro"), "bench", "--rounds", "2",
                           "--requests", "4000", "--warmup", "400", "--profile",
                           "--snapshots", "2", "--out", str(out)],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    runs = [json.loads(line) for line in (out / "runs.jsonl").read_text().splitlines()]
    assert len(runs) == 2 * 2 * 3
    assert all(r["requests_completed"] == 4000 and r["rps"] > 0 for r in runs)
    assert all(r["aof_rewrites"] == 0 for r in runs)
    md = (out / "bench.md").read_text()
    assert md in proc.stdout and "[12/12] round 2 always" in proc.stdout
    for policy in ("periodical", "always"):
        assert f"| {policy} | slimio / baseline | 2 |" in md
        assert f"| {policy} | slimio / nopersist | 2 |" in md
        assert f"| {policy} | slimio / no-I/O bound (BGSAVE into nothing) | 2 |" in md
        assert f"| {policy} | slimio / its log loaded from memory | 2 |" in md
    # Every run took its snapshot and recovered it (each load checked by DEBUG DIGEST),
    # and each system loaded its own log from memory; the bound's data stayed in memory.
    for r in runs:
        assert r["snapshot_s"] > 0 and r["snapshot_bytes"] > 0 and r["recovery_s"] >= 0
        assert ("recovery_bound_s" in r) == (r["system"] != "nopersist")
        assert ("snapshot_bound_s" in r) == (r["system"] == "slimio")
    # Two snapshots per run, each SlimIO one beside its own bound; the run keeps their
    # medians.
    for r in runs:
        each = r["snapshot_each"]
        assert len(each) == 2, r
        assert r["snapshot_s"] == statistics.median(e["snapshot_s"] for e in each)
        if r["system"] == "slimio":
            assert r["snapshot_bound_s"] == statistics.median(
                e["snapshot_bound_s"] for e in each)
            assert r["snapshot_thread_cpu_s"] == statistics.median(
                e["snapshot_thread_cpu_s"] for e in each)
    assert "snapshot_each" not in (out / "runs.csv").read_text().splitlines()[0]
    slim = [r for r in runs if r["system"] == "slimio"]
    # Under Always-Log each slimio run is held against one durable write per batch.
    for r in slim:
        assert ("durable_write_bound_rps" in r) == (r["policy"] == "always")
    assert "| always | slimio / one durable write per batch | 2 |" in md
    assert "| always | slimio / nopersist plus one durable write per batch | 2 |" in md
    # Into nothing, the same dataset serialises to about the bytes SlimIO wrote.
    assert all(abs(r["snapshot_bound_bytes"] - r["snapshot_bytes"]) < 0.01 * r["snapshot_bytes"]
               for r in slim)
    # Each child's CPU seconds: the serialising thread's are part of all its threads', and
    # neither exceeds what the child's wall time allows on this host's CPUs.
    cpus = os.cpu_count()
    for r in slim:
        assert 0 < r["snapshot_thread_cpu_s"] <= r["snapshot_cpu_s"] <= \
            r["snapshot_s"] * cpus + 0.01, r
        assert 0 < r["snapshot_bound_cpu_s"] <= r["snapshot_bound_s"] * cpus + 0.01, r
    assert "| always | slimio CPU / no-I/O bound's CPU | 2 |" in md
    assert "| always | slimio serialising thread's CPU / no-I/O bound's CPU | 2 |" in md
    # The WAL's batches: queued and device time per batch in every slimio run, and under
    # Always-Log's group commit each held reply's wait for the loop. With at most two
    # batches in flight, their device times add up to at most twice the time the clients
    # wrote: the batches counted are the warm-up's and the run's, and each client's wall
    # time bounds its writing (its summary's seconds have two decimals: 0.05-0.08 s here).
    for r in slim:
        assert r["warmup_wall_s"] > 0, r
        wall_s = r["warmup_wall_s"] + r["end_unix_s"] - r["start_unix_s"]
        per_batch_s = wall_s / (r["slimio_wal_batches"] or 1)
        assert 0 < r["wal_batch_device_ms"] and r["wal_batch_queue_ms"] >= 0, r
        assert ("reply_release_lag_ms" in r) == (r["policy"] == "always"), r
        if r["policy"] == "always":
            assert r["wal_batch_device_ms"] / 1000 < 2 * per_batch_s, r
            assert 0 < r["wal_pad_share"] < 0.5 and 0 <= r["wal_overlapped_share"] <= 1, r
        else:
            assert r["wal_pad_share"] == 0 and r["wal_overlapped_share"] == 0, r
    # --profile: each run's server sampled by perf during its SETs (4,000 SETs: a tenth of
    # a second, a few dozen samples).
    profiles = sorted(p for p in (out / "profiles").glob("run-*.txt")
                      if not p.stem.endswith("-system"))
    assert len(profiles) == len(runs)
    assert all(p.with_name(f"{p.stem}-system.txt").is_file() for p in profiles)
    for p in profiles:
        text = p.read_text()
        samples = int(re.search(r"# Samples: (\d+)", text)[1])
        assert samples > 0 and "redis-server" in text and "cpu-clock" in text, p.name
    prov = json.loads((out / "provenance.json").read_text())
    assert prov["git"]["commit"] and len(prov["plans"]) == 5 and prov["profile"] is True
    assert prov["snapshots_per_run"] == 2
    assert prov["where"]["tools"]["redis-server"] and prov["where"]["host"]["cpu_model"]


def test_cpu_per_set_sees_through_the_hosts_noise_that_moves_the_rates():
    """A known truth: slimio costs 100 us of vCPU per SET and the baseline 125 us, each
    with 10 us of device emulation; in each round the host lends each run a different share
    of its cores, so the rates' ratio wanders while the CPU per SET, taken from the host's
    samples of the same runs, gives 1.25 in every round."""
    cost = {"baseline": (125e-6, 10e-6), "slimio": (100e-6, 10e-6)}
    lent = [(1.9, 1.2), (1.0, 1.8), (1.5, 1.5)]   # per round: the baseline's, slimio's cores
    runs, samples, t, cpu, host = [], {}, 1000.0, {1: 0.0, 2: 0.0, 0: 0.0}, 0.0
    for k, shares in enumerate(lent):
        for system, cores in zip(("baseline", "slimio"), shares):
            vcpu, emul = cost[system]
            rps = cores / (vcpu + emul)          # CPU-bound: the cores over the CPU per SET
            seconds = 10.0
            sets = rps * seconds
            samples[t] = {-1: ("host", host), 0: ("q", cpu[0]),
                          1: ("CPU 0/TCG", cpu[1]), 2: ("CPU 1/TCG", cpu[2])}
            cpu[1] += sets * vcpu / 2
            cpu[2] += sets * vcpu / 2
            cpu[0] += sets * (vcpu + emul)
            host += sets * (vcpu + emul) + 0.3 * seconds
            runs.append({"round": k, "policy_block": "periodical", "system": system,
                         "rps": rps, "requests_completed": sets,
                         "start_unix_s": t + 5.0, "end_unix_s": t + 5.0 + seconds})
            t += seconds
            samples[t] = {-1: ("host", host), 0: ("q", cpu[0]),
                          1: ("CPU 0/TCG", cpu[1]), 2: ("CPU 1/TCG", cpu[2])}
    bench.with_host_cpu(runs, samples, guest_offset_s=5.0)
    assert [r["host_vcpu_us_per_set"] for r in runs] == pytest.approx([125, 100] * 3)
    assert [r["host_qemu_us_per_set"] for r in runs] == pytest.approx([135, 110] * 3)
    rows = {(r["metric"], r["ratio"]): r for r in bench._ratio_rows(runs)}
    rate = rows[("SET/s", "slimio / baseline")]
    vcpu = rows[("SETs per vCPU second", "slimio / baseline")]
    qemu = rows[("SETs per QEMU CPU second", "slimio / baseline")]
    assert vcpu["values"] == pytest.approx([1.25] * 3)
    assert qemu["values"] == pytest.approx([135 / 110] * 3)
    assert bench.spread(rate) > 1.0 and bench.spread(vcpu) == pytest.approx(0)
    md = "\n".join(bench.spread_lines(list(rows.values())))
    # Each round's rate ratio is slimio's cores over the baseline's times 135 / 110.
    assert rate["values"] == pytest.approx([1.2 / 1.9 * 135 / 110, 1.8 * 135 / 110, 135 / 110])
    assert "| periodical | slimio / baseline | 1.227 (0.775-2.209), 117% | 1.250 " \
           "(1.250-1.250), 0% | 1.227 (1.227-1.227), 0% |" in md, md
