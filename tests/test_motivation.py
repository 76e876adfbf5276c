"""The paper's motivation (Table 1, Table 2, Figure 2): the motivation cells' plan, their
parse on raw directories captured from real motivation cells in the VM
(tests/fixtures/motivation/: the smoke profile's cells, perf script output included), the
tables' and figure's shapes on those records, and the modelled "under GC" scenario against
what a fresh and an aged device must do. The cells themselves run in test_vm_e2e.py."""

import gzip
import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from slimio_repro import paths, plan as planmod
from slimio_repro.motivation import outputs as agg
from slimio_repro.plan import CellPlan
from slimio_repro.parse.record import ParseError
from slimio_repro.parse.motivation_records import parse_motivation_cell

FIXTURES = Path(__file__).parent / "fixtures" / "motivation"
RAW = {s: FIXTURES / f"vm-{s}-motivation-r1" for s in ("baseline", "baseline-ext4", "slimio")}
TABLE1 = sorted(FIXTURES.glob("vm-*-redis-benchmark-periodical-r*.json"))


def smoke(**overrides) -> dict:
    config = planmod.load([paths.CONFIG_DIR / "config.yaml",
                           paths.CONFIG_DIR / "profiles" / "smoke.yaml"])
    for key, value in overrides.items():
        config[key] = {**config[key], **value}
    return config


def test_the_plan_has_table1s_and_the_motivation_cells():
    p = planmod.make(smoke(), check_sources=False)
    assert [c.id for c in p.extra_cells] == ["vm-baseline-ext4-redis-benchmark-periodical-r1",
                                             "vm-baseline-ext4-redis-benchmark-periodical-r2"]
    # The F2FS cells of Table 1 are the matrix's own (one plan, one raw directory).
    assert {c.id for c in p.table1_cells} - {c.id for c in p.extra_cells} <= \
        {c.id for c in p.cells}
    ext4 = p.cell("vm-baseline-ext4-redis-benchmark-periodical-r1")
    f2fs = p.cell("vm-baseline-redis-benchmark-periodical-r1")
    assert (ext4.vm.filesystem, f2fs.vm.filesystem) == ("ext4", "f2fs")
    # Nothing but the file system (and the system's name) differs between the two.
    assert ext4.workload == f2fs.workload and ext4.sizing == f2fs.sizing
    ids = [c.id for c in p.motivation_cells]
    assert ids == [f"vm-{s}-motivation-r{r}" for s in ("baseline", "baseline-ext4", "slimio")
                   for r in (1, 2)]
    slimio = p.cell("vm-slimio-motivation-r1")
    m = slimio.motivation
    assert m.wal_requests == 2 * slimio.workload.requests and m.perf_frequency_hz == 499
    # No WAL-Snapshot may start in a motivation cell: its whole WAL stays below 5/8 of the
    # region, where SlimIO would start one.
    wal = (slimio.workload.requests + m.wal_requests) * 4096
    assert wal < slimio.slimio.wal_size_bytes * 5 / 8
    assert slimio.vm.roofline.enabled is False
    assert not p.motivation_in_reproduce
    # A motivation cell's plan round-trips (the guest reads it back from JSON).
    assert CellPlan.from_json(slimio.to_json()) == slimio


def test_a_matrix_cells_hash_does_not_see_the_motivation_field():
    p = planmod.make(smoke(), check_sources=False)
    cell = p.cells[0]
    assert "motivation" not in cell.stale_fields()
    assert "motivation" in p.motivation_cells[0].stale_fields()


def test_the_motivation_needs_the_vm_testbed():
    p = planmod.make(smoke(matrix={"testbeds": ["bare"], "systems": ["baseline", "slimio"]}),
                     check_sources=False)
    assert p.motivation_cells == () and p.table1_cells == ()
    assert "add vm to matrix.testbeds" in p.motivation_unavailable


def test_an_explicit_wal_region_too_small_for_the_motivation_is_refused():
    # Where the run includes the motivation, the plan stops, naming the keys...
    with pytest.raises(planmod.ConfigError, match=r"motivation: .* lower motivation"):
        planmod.make(smoke(slimio={"wal_size_mb": 400}, motivation={"in_reproduce": True}),
                     check_sources=False)
    # ... and where it does not, only `snakemake motivation` is refused (with the same words).
    p = planmod.make(smoke(slimio={"wal_size_mb": 400}), check_sources=False)
    assert p.motivation_cells == () and "lower motivation" in p.motivation_unavailable
    # A derived region grows with the writes, up to the device's capacity (8 GiB in smoke).
    with pytest.raises(planmod.ConfigError, match=r"needs a \d+ MiB device .* qemu-fdp-smoke"):
        planmod.make(smoke(motivation={"in_reproduce": True, "wal_requests": 2_000_000}),
                     check_sources=False)


def test_parse_a_real_baseline_motivation_cell():
    r = parse_motivation_cell(RAW["baseline"])
    assert (r["system"], r["filesystem"], r["accel"]) == ("baseline", "f2fs", "tcg")
    for pre in ("mot_snapshot_only", "mot_snapshot_wal"):
        assert r[f"{pre}_samples"] > 100
        # Figure 2a's parts add up to the snapshot's duration (the off-CPU part is the rest).
        parts = r[f"{pre}_in_memory_s"] + r[f"{pre}_kernel_io_s"] + r[f"{pre}_offcpu_s"]
        assert parts == pytest.approx(r[f"{pre}_time_s"], rel=0.01)
        assert r[f"{pre}_other_threads_cpu_s"] == pytest.approx(0, abs=0.05)
        assert 0 < r[f"{pre}_fs_control_cpu_pct"] <= r[f"{pre}_fs_write_path_cpu_pct"] < 100
        assert r[f"{pre}_write_mb_s"] == pytest.approx(
            r[f"{pre}_bytes"] / r[f"{pre}_time_s"] / 1e6)
    assert r["mot_wal_write_mb_s_before_snapshot"] > 0
    assert r["mot_wal_write_mb_s_during_snapshot"] > 0
    assert r["mot_writes_covered_snapshot"] is True
    # The scheduler's events account for the time the samples leave off the CPU: with the
    # client and the server beside it on two vCPUs, the child waits for a CPU.
    for pre in ("mot_snapshot_only", "mot_snapshot_wal"):
        off = r[f"{pre}_blocked_io_s"] + r[f"{pre}_asleep_s"] + r[f"{pre}_cpu_wait_s"]
        assert r[f"{pre}_switches"] > 0
        assert off == pytest.approx(r[f"{pre}_offcpu_s"], abs=0.25)
    assert r["mot_snapshot_wal_cpu_wait_s"] > r["mot_snapshot_only_cpu_wait_s"]
    assert "mot_ideal_mb_s" not in r


def test_slimio_has_no_file_system_in_its_snapshot_child_and_an_ideal():
    r = parse_motivation_cell(RAW["slimio"])
    assert r["filesystem"] == "raw"
    # Its child's second thread (completions, checksums) is sampled too, outside the split.
    assert r["mot_snapshot_only_other_threads_cpu_s"] > 0
    parts = sum(r[f"mot_snapshot_only_{k}_s"] for k in ("in_memory", "kernel_io", "offcpu"))
    assert parts == pytest.approx(r["mot_snapshot_only_time_s"], rel=0.01)
    assert r["mot_snapshot_only_fs_write_path_cpu_pct"] == 0
    assert r["mot_ideal_mb_s"] > 0 and r["mot_ideal_bytes"] > 0


def test_a_cell_without_its_profile_is_refused(tmp_path):
    raw = tmp_path / "cell"
    shutil.copytree(RAW["baseline"], raw)
    (raw / "perf-snapshot-wal.txt.gz").write_bytes(gzip.compress(b""))
    with pytest.raises(ParseError, match="the snapshot-wal profile: no samples"):
        parse_motivation_cell(raw)
    (raw / "scenarios.json").unlink()
    with pytest.raises(ParseError, match="not a complete motivation cell"):
        parse_motivation_cell(raw)


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    out = tmp_path_factory.mktemp("motivation")
    records = []
    for system, raw in RAW.items():
        f = out / f"{system}.json"
        f.write_text(json.dumps(parse_motivation_cell(raw)))
        records.append(f)
    written = agg.write_all(records, TABLE1, out)
    return out, written


def test_table1_has_both_file_systems_and_phases_beside_the_paper(outputs):
    out, _ = outputs
    t = pd.read_csv(out / "tables" / "table1_snapshot_impact.csv")
    assert list(zip(t.file_system, t.phase)) == [("F2FS", "wal_only"), ("F2FS", "wal_snapshot"),
                                                 ("EXT4", "wal_only"), ("EXT4", "wal_snapshot")]
    assert (t.n >= 1).all() and (t.rps_mean > 0).all() and (t.peak_memory_gb_mean > 0).all()
    snap = t[t.phase == "wal_snapshot"].set_index("file_system")
    assert snap.loc["F2FS", "paper_rps_change_pct"] == pytest.approx(-29.70, abs=0.01)
    assert snap.loc["EXT4", "paper_rps_change_pct"] == pytest.approx(-27.94, abs=0.01)
    md = (out / "tables" / "table1_snapshot_impact.md").read_text()
    assert "| EXT4 | Snapshot&WAL |" in md and "42,885.10" in md


def test_table2_has_each_system_and_scenario_and_the_papers_f2fs(outputs):
    out, _ = outputs
    t = pd.read_csv(out / "tables" / "table2_fs_write_path_cpu.csv")
    assert set(zip(t.system, t.scenario)) == {(s, c) for s in RAW
                                              for c in ("snapshot_only", "snapshot_wal")}
    f2fs = t[t.system == "baseline"].set_index("scenario")
    assert f2fs.loc["snapshot_only", "paper_f2fs_pct"] == 11.53
    assert f2fs.loc["snapshot_wal", "paper_f2fs_pct"] == 13.61
    assert (f2fs.fs_write_path_cpu_pct_mean > 0).all()
    assert (t[t.system == "slimio"].fs_write_path_cpu_pct_mean == 0).all()
    assert t[t.system == "slimio"].paper_f2fs_pct.isna().all()


def test_figure2_and_the_records_for_the_claims(outputs):
    out, written = outputs
    for ext in ("png", "pdf", "caption.txt"):
        assert (out / "figures" / f"fig2_snapshot_analysis.{ext}").stat().st_size > 0
    caption = (out / "figures" / "fig2_snapshot_analysis.caption.txt").read_text()
    assert "MODELLED" in caption and "discard sink" in caption
    rec = pd.read_csv(out / "tables" / "motivation_cells.csv")
    # Table 1's cells and the motivation cells, one row each, for the claims' judge.
    assert len(rec) == len(TABLE1) + len(RAW)
    mot = rec[rec.cell_id.str.contains("-motivation-")]
    assert mot.mot_snapshot_only_vs_ideal_pct.between(1, 200).all()
    assert (mot.mot_gc_waf_modelled > 1).all()
    assert (mot.mot_snapshot_wal_gc_modelled_time_s >= mot.mot_snapshot_wal_time_s).all()


def test_the_gc_model_adds_nothing_on_a_fresh_device_and_what_theory_says_on_an_aged_one():
    from slimio_repro.ftl.model import FEMU_OP, Device, Geometry
    from slimio_repro.ftl.theory import greedy_uniform_waf
    geo = Geometry(user_bytes=256 << 20, op=FEMU_OP, ru_bytes=4 << 20, handles=1,
                   placement=False)
    fresh = Device(geo, "greedy").write_sequential(0, geo.user_pages // 2)
    assert fresh.waf == 1.0
    # Greedy GC on uniformly random live data: Desnoyers' closed form at alpha = flash over
    # live data. The snapshot's sequential bytes onto that steady state pay about as much.
    for utilization in (0.6, 0.9):
        aged = agg.aged_waf(256 << 20, 4 << 20, 32 << 20, "greedy", utilization)
        theory = greedy_uniform_waf((1 + FEMU_OP) / utilization)
        assert aged == pytest.approx(theory, rel=0.2), (utilization, aged, theory)
    # FEMU's model keeps a quarter of the flash free, so it amplifies more than greedy.
    assert agg.aged_waf(256 << 20, 4 << 20, 32 << 20, "femu-fdp", 0.9) > \
        agg.aged_waf(256 << 20, 4 << 20, 32 << 20, "greedy", 0.9)


def test_a_run_without_the_motivation_is_told_where_its_claims_are_judged(fixture_results):
    from slimio_repro.claims import catalog, judge
    claims = {c.id: c for c in catalog.load()}
    records = pd.read_csv(fixture_results / paths.CELLS_TABLE)
    for cid in ("mot-t1-ext4-rps-drop-28pct", "mot-t2-f2fs-cpu-grows-with-wal"):
        v = judge.judge(claims[cid], records)
        assert v.verdict == judge.UNTESTABLE and "make motivation" in v.reason, (cid, v.reason)


def sched_line(t: float, event: str, **f) -> str:
    """One event as `perf script -F time,event,trace` prints it."""
    if event == "sched_switch":
        trace = (f"prev_comm=x prev_pid={f['prev']} prev_prio=120 prev_state={f['state']} "
                 f"==> next_comm=y next_pid={f['next']} next_prio=120")
    else:
        trace = f"comm=x pid={f['pid']} prio=120 target_cpu=001"
    return f"  {t:.6f}: sched:{event}: {trace}"


def test_off_cpu_time_split_by_why_on_a_trace_built_by_hand():
    from slimio_repro.parse import schedtrace
    text = "\n".join([
        # blocked in I/O 1.0-1.3, woken, waits 0.05 for a CPU
        sched_line(1.0, "sched_switch", prev=7, state="D", next=0),
        sched_line(1.3, "sched_wakeup", pid=7),
        sched_line(1.35, "sched_switch", prev=0, state="R", next=7),
        # preempted 2.0-2.2: all of it waiting for a CPU
        sched_line(2.0, "sched_switch", prev=7, state="R+", next=9),
        sched_line(2.2, "sched_switch", prev=9, state="S", next=7),
        # asleep on a lock 3.0-3.1, then 0.02 to run
        sched_line(3.0, "sched_switch", prev=7, state="S", next=0),
        sched_line(3.1, "sched_wakeup", pid=7),
        sched_line(3.12, "sched_switch", prev=0, state="R", next=7),
        # another thread's events count for nothing here
        sched_line(4.0, "sched_switch", prev=9, state="D", next=0),
        sched_line(4.5, "sched_switch", prev=0, state="R", next=9),
    ])
    off = schedtrace.off_cpu(text, 7)
    assert off.switches == 3
    assert off.io_s == pytest.approx(0.3) and off.asleep_s == pytest.approx(0.1)
    assert off.runqueue_s == pytest.approx(0.05 + 0.2 + 0.02)
    with pytest.raises(schedtrace.SchedTraceError, match="line 1"):
        schedtrace.off_cpu("not a trace", 7)
