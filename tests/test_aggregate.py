"""Tables from tidy records: n, mean and spread per group, Markdown in the paper's shape."""

import json

import pytest

from conftest import CELL_FIXTURES
from slimio_repro import aggregate
from slimio_repro.bound import BOUND_METRIC
from slimio_repro.parse import record as parse


@pytest.fixture
def records(tmp_path):
    files = []
    # The baseline cells (side_by_side adds the slimio ones), two repetitions with different
    # numbers each.
    for raw in sorted(CELL_FIXTURES.glob("bare-baseline-*")):
        files += _reps(raw, tmp_path)
    return files


def test_table3_has_n_mean_and_spread(records, tmp_path):
    out = tmp_path / "tables"
    aggregate.write_all(records, out)
    table = __import__("pandas").read_csv(out / "table3_redis_benchmark.csv")
    assert set(table.policy) == {"periodical", "always"}
    row = table[table.policy == "periodical"].iloc[0]
    assert row.n == 2 and row.rps_avg_n == 2
    base = row.rps_avg_mean / 1.5
    assert row.rps_avg_min == pytest.approx(base) and row.rps_avg_max == pytest.approx(2 * base)
    assert row.rps_avg_std > 0
    md = (out / "table3_redis_benchmark.md").read_text()
    assert "| Periodical-Log | Baseline | bare | 2 |" in md
    assert "| Always-Log | Baseline | bare | 2 |" in md
    assert "±" in md and "SSD WAF" in md
    assert "## The paper's numbers" in md and "| Periodical-Log | SlimIO | 75,675.7 |" in md
    t5 = (out / "table5_recovery.md").read_text()
    assert t5.count("| Baseline |") == 3  # two of ours (one per policy) and the paper's


def test_latex_table_is_a_booktabs_tabular(records, tmp_path):
    aggregate.write_all(records, tmp_path)
    tex = (tmp_path / "table3_redis_benchmark.tex").read_text()
    assert tex.count(r"\begin{tabular}") == 1 and r"\bottomrule" in tex
    body = [l for l in tex.splitlines() if l.startswith(("Periodical-Log", "Always-Log"))]
    assert len(body) == 2
    assert all(l.count(" & ") == 12 and l.endswith(r"\\") for l in body)
    assert r"$\pm$" in tex and "SET p999 (ms)" in tex


def _reps(raw, tmp_path) -> list:
    """The record of the captured cell ``raw`` as two repetitions (rps_avg x1 and x2)."""
    record, _ = parse.parse_cell(raw)
    files = []
    for rep in (1, 2):
        r = dict(record, rep=rep, rps_avg=record["rps_avg"] * rep)
        f = tmp_path / f"{r['cell_id']}-{rep}.json"
        f.write_text(json.dumps(r))
        files.append(f)
    return files


@pytest.fixture
def side_by_side(records, tmp_path):
    """The baseline cells and the captured SlimIO cells (file backend), two repetitions each."""
    files = list(records)
    for raw in sorted(CELL_FIXTURES.glob("bare-slimio-*")):
        files += _reps(raw, tmp_path)
    return files


def _mean(files, system, policy, workload, metric):
    """The mean of ``metric`` over the records of one group, read here from the files."""
    values = [r[metric] for r in map(lambda f: json.loads(f.read_text()), files)
              if (r["system"], r["policy"], r["workload"]) == (system, policy, workload)
              and r.get(metric) is not None]
    return (sum(values) / len(values), len(values)) if values else (None, 0)


def test_tables_have_slimio_rows(side_by_side, tmp_path):
    aggregate.write_all(side_by_side, tmp_path / "t")
    md = (tmp_path / "t" / "table3_redis_benchmark.md").read_text()
    for policy in ("Periodical-Log", "Always-Log"):
        assert f"| {policy} | Baseline | bare | 2 |" in md
        assert f"| {policy} | SlimIO | bare | 2 |" in md
    t5 = __import__("pandas").read_csv(tmp_path / "t" / "table5_recovery.csv")
    assert set(t5.system) == {"baseline", "slimio"}


def test_ratios_are_ratios_of_means_with_n(side_by_side, tmp_path):
    pd = __import__("pandas")
    aggregate.write_all(side_by_side, tmp_path / "t")
    for name, columns in (("table3_ratios", aggregate.ratios.TABLE3_RATIO_COLUMNS),
                          ("table5_ratios", aggregate.ratios.TABLE5_RATIO_COLUMNS)):
        table = pd.read_csv(tmp_path / "t" / f"{name}.csv")
        assert len(table) == 2 * len(columns)  # per policy, per metric
        assert set(table.system) == {"slimio"} and set(table.policy) == {"periodical",
                                                                         "always"}
        for _, row in table.iterrows():
            system, n = _mean(side_by_side, "slimio", row.policy, "redis-benchmark", row.metric)
            base, base_n = _mean(side_by_side, "baseline", row.policy, "redis-benchmark",
                                 row.metric)
            assert (row.system_n, row.baseline_n) == (n, base_n)
            if system is None or base is None:
                # e.g. WAF (no FDP statistics on bare), or a cell with no WAL-only interval:
                # no mean, no ratio, but the row is there.
                assert pd.isna(row.ratio_to_baseline)
                continue
            assert row.ratio_to_baseline == pytest.approx(system / base)
            assert n == base_n == 2
    md = (tmp_path / "t" / "table3_ratios.md").read_text()
    assert "| Periodical-Log | SlimIO | bare | Average RPS (rps_avg) | higher |" in md
    row = next(l for l in md.splitlines() if "(rps_avg)" in l and "Periodical" in l)
    system, _ = _mean(side_by_side, "slimio", "periodical", "redis-benchmark", "rps_avg")
    base, _ = _mean(side_by_side, "baseline", "periodical", "redis-benchmark", "rps_avg")
    assert row.split("|")[8].strip() == f"{system / base:.3f}"
    assert row.split("|")[9].strip() == f"{55042.87 / 47993.20:.3f}"  # the paper's ratio
    t5 = (tmp_path / "t" / "table5_ratios.md").read_text()
    assert f"{44.12 / 55.38:.3f}" in t5  # the paper's Table 5 has no policy


def test_ratios_without_a_second_system_say_so(records, tmp_path):
    aggregate.write_all(records, tmp_path / "t")
    assert "No system to compare with the baseline" in (
        tmp_path / "t" / "table3_ratios.md").read_text()
    assert __import__("pandas").read_csv(tmp_path / "t" / "table3_ratios.csv").empty


# The vm testbed with all three systems. Synthetic records in the shape parse.parse_cell
# writes for a vm cell (field names and units as in results/cells/vm-*.json), with round numbers
# so that every mean, ratio and note below can be checked by hand.
VM_SYSTEMS = {
    "baseline": dict(filesystem="f2fs", nvme_trace_placement_ids="none"),
    "slimio": dict(filesystem="raw", slimio_backend="nvme", slimio_device="/dev/ng0n1",
                   nvme_trace_placement_ids="1;2;3", nvme_trace_placement_ok=True),
    "slimio-nofdp": dict(filesystem="raw", slimio_backend="nvme", slimio_device="/dev/ng0n1",
                         nvme_trace_placement_ids="none", nvme_trace_placement_ok=True),
}
RPS = {"baseline": 1000.0, "slimio": 1500.0, "slimio-nofdp": 1200.0}
WAF = {"baseline": 1.004, "slimio": 1.002, "slimio-nofdp": 1.001}


def vm_record(system: str, policy: str, rep: int, **fields) -> dict:
    host = 400_000_000
    record = {
        "cell_id": f"vm-{system}-redis-benchmark-{policy}-r{rep}", "testbed": "vm",
        "system": system, "workload": "redis-benchmark", "policy": policy, "rep": rep,
        "profile": "smoke", "redis_version": "7.0.15",
        "rps_wal_only": RPS[system] * 1.2, "rps_wal_snapshot": RPS[system] * 0.6,
        "rps_avg": RPS[system] * rep, "snapshot_time_s": 3.0, "set_p999_ms": 40.0,
        "mem_wal_only_peak_gb": 0.11, "mem_wal_snapshot_peak_gb": 0.22,
        "recovery_time_s": 2.0, "recovery_mb_s": 45.0,
        "waf": WAF[system], "fdp_host_bytes_written": host,
        "fdp_media_bytes_written": int(host * WAF[system]), "fdp_media_bytes_erased": 0,
        # Rep 1: 100 MB/s against fio's 400; rep 2: 200 against 500 (ratios 0.25 and 0.4).
        "on_demand_snapshot_bytes": 80_000_000, "on_demand_snapshot_time_s": 0.8 / rep,
        "on_demand_snapshot_mb_s": 100.0 * rep, "roofline_seq_write_mb_s": 300.0 + 100 * rep,
        "roofline_block_size_bytes": 131072, "roofline_iodepth": 16,
        "snapshots": [{"kind": "wal_snapshot", "start_s": 1.0, "end_s": 2.0, "ok": True}],
        **VM_SYSTEMS[system],
    }
    record.update(fields)
    return record


def write_records(records: list[dict], directory) -> list:
    directory.mkdir(parents=True, exist_ok=True)
    files = []
    for r in records:
        f = directory / f"{r['cell_id']}.json"
        f.write_text(json.dumps(r))
        files.append(f)
    return files


@pytest.fixture
def vm_records(tmp_path):
    return write_records([vm_record(s, p, rep) for s in VM_SYSTEMS
                          for p in ("periodical", "always") for rep in (1, 2)],
                         tmp_path / "cells")


def test_three_systems_give_three_rows_per_policy_baseline_first(vm_records, tmp_path):
    pd = __import__("pandas")
    aggregate.write_all(vm_records, tmp_path / "t")
    for name in ("table3_redis_benchmark", "table5_recovery"):
        table = pd.read_csv(tmp_path / "t" / f"{name}.csv")
        assert len(table) == 6 and set(table.system) == set(VM_SYSTEMS)
    md = (tmp_path / "t" / "table3_redis_benchmark.md").read_text()
    rows = [l.split(" | ")[:2] for l in md.splitlines() if " | vm | " in l]
    assert rows == [[f"| {p}", s] for p in ("Periodical-Log", "Always-Log")
                    for s in ("Baseline", "SlimIO", "SlimIO w/o FDP")]
    # SSD WAF column: mean of two equal repetitions, two decimals, spread 0; the modelled
    # WAF beside it is n/a without the FTL stage's results.
    row = next(l for l in md.splitlines() if l.startswith("| Periodical-Log | Baseline | vm"))
    assert row.endswith("| 1.00 ± 0.00 | n/a |")
    t3 = pd.read_csv(tmp_path / "t" / "table3_redis_benchmark.csv")
    assert (t3.fdp_media_bytes_erased_mean == 0).all() and (t3.waf_n == 2).all()
    assert "| Always-Log | SlimIO w/o FDP | vm | 2 |" in (
        tmp_path / "t" / "table5_recovery.md").read_text()


def test_waf_notes_on_the_vm_testbed_only(vm_records, tmp_path):
    aggregate.write_all(vm_records, tmp_path / "t")
    md = (tmp_path / "t" / "table3_redis_benchmark.md").read_text()
    assert "from the device's FDP statistics log page" in md
    assert "fdp_media_bytes_erased = 0 in every cell" in md
    assert "WAF is 1.00 up to rounding by construction" in md
    assert "baseline WAF of 1.14 (Periodical-Log) and 1.24 (Always-Log) comes from FEMU" in md
    assert "n/a on the bare testbed" not in md


def test_waf_notes_name_erasures_and_the_bare_testbed(vm_records, records, tmp_path):
    erased = vm_record("baseline", "always", 3, fdp_media_bytes_erased=4096)
    files = vm_records + records + write_records([erased], tmp_path / "more")
    aggregate.write_all(files, tmp_path / "t")
    md = (tmp_path / "t" / "table3_redis_benchmark.md").read_text()
    assert "erased media (fdp_media_bytes_erased > 0) in 1 of 13 cells" in md
    assert "up to rounding by construction" not in md
    assert "SSD WAF is n/a on the bare testbed" in md
    # Bare records carry no WAF: only the bare note, none about the FDP log.
    aggregate.write_all(records, tmp_path / "bare")
    bare = (tmp_path / "bare" / "table3_redis_benchmark.md").read_text()
    assert "SSD WAF is n/a on the bare testbed" in bare and "FDP statistics log page" not in bare


def test_storage_notes_come_from_the_records(vm_records, records, tmp_path):
    file_backend = vm_record("slimio", "periodical", 1, testbed="bare", filesystem="ext4",
                             cell_id="bare-slimio-redis-benchmark-periodical-r1",
                             slimio_backend="file", slimio_device="/mnt/cell/slimio.dev",
                             nvme_trace_placement_ids=None, nvme_trace_placement_ok=None)
    old = {k: v for k, v in vm_record("slimio", "always", 9).items()
           if k not in ("slimio_backend", "slimio_device", "nvme_trace_placement_ok")}
    old["testbed"], old["cell_id"] = "old", "old-slimio-redis-benchmark-always-r9"
    wrong = vm_record("slimio", "always", 3, nvme_trace_placement_ok=False,
                      cell_id="vm-slimio-redis-benchmark-always-r3")
    files = vm_records + records + write_records([file_backend, old, wrong], tmp_path / "more")
    aggregate.write_all(files, tmp_path / "t")
    notes = [l for l in (tmp_path / "t" / "table3_redis_benchmark.md").read_text().splitlines()
             if l.startswith("- ")]
    assert "- Baseline (vm, 4 cells): stock Redis, AOF and RDB files on f2fs; no placement id " \
           "on any write in the NVMe trace." in notes
    assert "- SlimIO (vm, 5 cells): WAL and snapshots through NVMe passthru (io_uring commands) " \
           "on /dev/ng0n1; placement ids in the NVMe trace: 1, 2, 3; NOT every write carried " \
           "the placement id expected for its region in 1 of 5 cells: " \
           "vm-slimio-redis-benchmark-always-r3." in notes
    assert "- SlimIO w/o FDP (vm, 4 cells): WAL and snapshots through NVMe passthru (io_uring " \
           "commands) on /dev/ng0n1; no placement id on any write in the NVMe trace; every " \
           "write carried the placement id expected for its region (4 of 4 cells)." in notes
    assert "- SlimIO (bare, 1 cells): WAL and snapshots through file backend (io_uring, " \
           "O_DIRECT) on /mnt/cell/slimio.dev, a file on ext4." in notes
    assert "- Baseline (bare, 4 cells): stock Redis, AOF and RDB files on ext4." in notes
    assert any(n.startswith("- SlimIO (old, 1 cells): SlimIO's backend not recorded "
                            "(file system: raw); placement ids in the NVMe trace: 1, 2, 3.")
               for n in notes)
    assert not any("file backend" in n for n in notes if "(vm," in n)


def test_roofline_table_divides_each_snapshot_by_its_own_fio_run(vm_records, records, tmp_path):
    pd = __import__("pandas")
    aggregate.write_all(vm_records + records, tmp_path / "t")
    table = pd.read_csv(tmp_path / "t" / "roofline.csv")
    assert len(table) == 3 * 2 + 2  # vm: three systems x two policies; bare: two policies
    row = table[(table.system == "slimio") & (table.policy == "periodical")
                & (table.testbed == "vm")].iloc[0]
    assert row.on_demand_snapshot_mb_s_mean == pytest.approx(150.0)
    assert row.roofline_seq_write_mb_s_mean == pytest.approx(450.0)
    # Per cell 100/400 = 0.25 and 200/500 = 0.4: mean 0.325 (not 150/450 = 0.333).
    assert row.snapshot_roofline_ratio_n == 2
    assert row.snapshot_roofline_ratio_mean == pytest.approx(0.325)
    assert row.snapshot_roofline_ratio_std == pytest.approx((0.4 - 0.25) / 2 ** 0.5)
    assert row.roofline_block_size_bytes_mean == 131072 and row.roofline_iodepth_mean == 16
    md = (tmp_path / "t" / "roofline.md").read_text()
    assert "| Periodical-Log | SlimIO | vm | 2 | 150.0 ± 70.7 | 450.0 ± 70.7 | 0.325 ± 0.106 |" \
        in md
    # The bare records have a snapshot throughput but no fio roofline: n/a, not an error.
    (bare,) = [l for l in md.splitlines() if l.startswith("| Periodical-Log | Baseline | bare |")]
    snapshot, _ = _mean(records, "baseline", "periodical", "redis-benchmark",
                        "on_demand_snapshot_mb_s")
    assert bare == (f"| Periodical-Log | Baseline | bare | 2 | {snapshot:.1f} ± 0.0 | n/a | n/a "
                    "| n/a | n/a |")
    assert "sequential-write job through NVMe passthru" in md
    assert "block size 128 KiB, iodepth 16" in md


def test_a_snapshot_is_held_against_the_slower_of_its_two_bounds():
    """The no-I/O rate is the group's slimio cells' BGSAVE into nothing; a cell's bound time
    is the longer of its bytes at that rate and at its own fio rate (worked by hand)."""
    pd = __import__("pandas")
    base = {"testbed": "vm", "workload": "redis-benchmark", "policy": "always"}
    cells = pd.DataFrame([
        # slimio: 100 MB into nothing in 0.5 s and 0.25 s: 200 and 400 MB/s, mean 300.
        {**base, "system": "slimio", "snapshot_bound_bytes": 100e6, "snapshot_bound_s": 0.5,
         "on_demand_snapshot_bytes": 90e6, "roofline_seq_write_mb_s": 3000.0,
         "on_demand_snapshot_child_s": 0.45},
        {**base, "system": "slimio", "snapshot_bound_bytes": 100e6, "snapshot_bound_s": 0.25,
         "on_demand_snapshot_bytes": 90e6, "roofline_seq_write_mb_s": 3000.0,
         "on_demand_snapshot_child_s": 0.6},
        # baseline: 120 MB; its device (60 MB/s) is slower than the no-I/O rate: 2 s.
        {**base, "system": "baseline", "on_demand_snapshot_bytes": 120e6,
         "roofline_seq_write_mb_s": 60.0, "on_demand_snapshot_child_s": 3.0},
        # another policy has no slimio cell: no bound, not an error.
        {**base, "policy": "periodical", "system": "baseline",
         "on_demand_snapshot_bytes": 120e6, "roofline_seq_write_mb_s": 60.0,
         "on_demand_snapshot_child_s": 3.0},
    ])
    got = aggregate.roofline_table.snapshot_bounds(cells)
    assert list(got.snapshot_bound_mb_s[:3]) == pytest.approx([300.0] * 3)
    assert list(got.snapshot_floor_s[:3]) == pytest.approx([0.3, 0.3, 2.0])
    assert list(got.snapshot_bound_ratio[:3]) == pytest.approx([1.5, 2.0, 1.5])
    assert pd.isna(got.snapshot_bound_ratio.iloc[3])


def test_roofline_without_fio_says_so(records, tmp_path):
    aggregate.write_all(records, tmp_path / "t")
    md = (tmp_path / "t" / "roofline.md").read_text()
    assert "No cell has a fio roofline" in md and "block size" not in md


def test_ratios_include_slimio_without_fdp_and_waf(vm_records, tmp_path):
    pd = __import__("pandas")
    aggregate.write_all(vm_records, tmp_path / "t")
    table = pd.read_csv(tmp_path / "t" / "table3_ratios.csv")
    assert set(table.system) == {"slimio", "slimio-nofdp"}
    assert len(table) == 2 * 2 * len(aggregate.ratios.TABLE3_RATIO_COLUMNS)  # systems x policies
    waf = table[table.metric == "waf"].set_index(["system", "policy"]).ratio_to_baseline
    assert waf[("slimio-nofdp", "always")] == pytest.approx(1.001 / 1.004)
    assert waf[("slimio", "periodical")] == pytest.approx(1.002 / 1.004)
    rps = table[table.metric == "rps_avg"].set_index(["system", "policy"]).ratio_to_baseline
    assert rps[("slimio-nofdp", "periodical")] == pytest.approx(1.2)
    md = (tmp_path / "t" / "table3_ratios.md").read_text()
    assert "| Periodical-Log | SlimIO w/o FDP | vm | SSD WAF (device) (waf) | lower | 1.004 (2) " \
           "| 1.001 (2) | 0.997 | - |" in md
    assert f"| Periodical-Log | SlimIO | vm | SSD WAF (device) (waf) | lower | 1.004 (2) | 1.002 (2) " \
           f"| 0.998 | {1.00 / 1.14:.3f} |" in md
    # The baseline's rows come first among a policy's, then SlimIO, then SlimIO w/o FDP.
    systems = [l.split(" | ")[1] for l in md.splitlines() if l.startswith("| Periodical-Log")]
    assert systems == ["SlimIO"] * 9 + ["SlimIO w/o FDP"] * 9
    t5 = pd.read_csv(tmp_path / "t" / "table5_ratios.csv")
    assert set(t5.system) == {"slimio", "slimio-nofdp"}


def test_runtime_rps_figures_need_all_their_systems():
    from slimio_repro.plan import Cell
    cells = [Cell(t, s, "redis-benchmark", p, r) for t in ("bare", "vm")
             for s in ("slimio", "baseline") for p in ("always", "periodical") for r in (1, 2)]
    assert aggregate.runtime_rps_figure_cells(cells, "fig4_runtime_rps") == []
    fig5 = aggregate.runtime_rps_figure_cells(cells, "fig5_runtime_rps")
    assert [(c.testbed, c.system, c.policy, c.rep) for c in fig5] == [
        ("bare", "baseline", "periodical", 1), ("bare", "slimio", "periodical", 1),
        ("vm", "baseline", "periodical", 1), ("vm", "slimio", "periodical", 1)]
    # slimio-nofdp on one testbed only: Figure 4 draws that testbed alone.
    cells.append(Cell("vm", "slimio-nofdp", "redis-benchmark", "periodical", 1))
    fig4 = aggregate.runtime_rps_figure_cells(cells, "fig4_runtime_rps")
    assert [c.id for c in fig4] == ["vm-baseline-redis-benchmark-periodical-r1",
                                    "vm-slimio-nofdp-redis-benchmark-periodical-r1"]
    only_always = [c for c in cells if c.policy == "always"]
    assert aggregate.runtime_rps_figure_cells(only_always, "fig5_runtime_rps") == []
    # As an input function: the files in panel order, or an error naming what is missing.
    files = aggregate.runtime_rps_figure_inputs(cells, "fig4_runtime_rps", "{testbed}-{system}",
                                                "{system}-r{rep}.csv")
    assert files == {"records": ["vm-baseline", "vm-slimio-nofdp"],
                     "timeseries": ["baseline-r1.csv", "slimio-nofdp-r1.csv"]}
    with pytest.raises(ValueError, match=r"no such cell of slimio-nofdp: add it to matrix\.sys"):
        aggregate.runtime_rps_figure_inputs(cells[:-1], "fig4_runtime_rps", "", "")
    apart = [Cell("bare", "baseline", "redis-benchmark", "periodical", 1),
             Cell("vm", "slimio-nofdp", "redis-benchmark", "periodical", 1)]
    with pytest.raises(ValueError, match=r"no testbed of the matrix has all of them"):
        aggregate.runtime_rps_figure_inputs(apart, "fig4_runtime_rps", "", "")


def test_table4_from_ycsb_cells(side_by_side, tmp_path):
    """Table 4 (YCSB-A) has the paper's columns, rows only from ycsb-a cells, and ratios."""
    pd = __import__("pandas")
    aggregate.write_all(side_by_side, tmp_path / "t")
    md = (tmp_path / "t" / "table4_ycsb_a.md").read_text()
    header = md.splitlines()[2]
    assert header.endswith("| SET p999 (ms) | GET p999 (ms) |") and "SSD WAF" not in header
    assert "| Periodical-Log | Baseline | bare | 2 |" in md
    assert "| Periodical-Log | SlimIO | bare | 2 |" in md
    assert "| Always-Log |" not in md.split("## The paper's numbers")[0]  # no such ycsb cell
    assert "9 M records, 115 M operations" in md and "| Always-Log | SlimIO | 12,536.9 |" in md
    assert "YCSB client: host" in md and "READ = GET" in md
    table = pd.read_csv(tmp_path / "t" / "table4_ycsb_a.csv")
    assert set(table.workload) == {"ycsb-a"} and (table.get_p999_ms_mean > 0).all()
    ratios = pd.read_csv(tmp_path / "t" / "table4_ratios.csv").set_index("metric")
    for metric in ("set_p999_ms", "get_p999_ms", "rps_avg"):
        system, _ = _mean(side_by_side, "slimio", "periodical", "ycsb-a", metric)
        base, _ = _mean(side_by_side, "baseline", "periodical", "ycsb-a", metric)
        assert ratios.loc[metric, "ratio_to_baseline"] == pytest.approx(system / base)
    assert "waf" not in ratios.index
    rmd = (tmp_path / "t" / "table4_ratios.md").read_text()
    # The paper's own GET p999 ratio under Periodical-Log: 0.577 / 0.673.
    assert f"| {0.577 / 0.673:.3f} |" in rmd
    # Table 3 is unchanged by the ycsb cells: only redis-benchmark rows.
    assert set(pd.read_csv(tmp_path / "t" / "table3_redis_benchmark.csv").workload) == \
        {"redis-benchmark"}


def test_the_bound_gives_every_rps_ratio_its_ceiling(side_by_side, tmp_path):
    """With the no-persistence cells (captured: stock Redis, AOF off), each RPS ratio row
    carries the bound's mean and n, the bound over the baseline (the most any system can
    gain) and the system's fraction of the bound; the bound has no ratio row of its own and
    no Table 5 row (nothing to recover)."""
    pd = __import__("pandas")
    bound = _reps(CELL_FIXTURES / "bare-nopersist-redis-benchmark-none-r1", tmp_path)
    aggregate.write_all(side_by_side + bound, tmp_path / "t")
    table = pd.read_csv(tmp_path / "t" / "table3_ratios.csv")
    assert set(table.system) == {"slimio"} and set(table.policy) == {"periodical", "always"}
    for _, row in table.iterrows():
        if row.metric not in BOUND_METRIC:
            assert pd.isna(row.bound_mean) and pd.isna(row.bound_to_baseline)
            continue
        top, n = _mean(bound, "nopersist", "none", "redis-benchmark",
                       BOUND_METRIC[row.metric])
        base, _ = _mean(side_by_side, "baseline", row.policy, "redis-benchmark", row.metric)
        system, _ = _mean(side_by_side, "slimio", row.policy, "redis-benchmark", row.metric)
        assert row.bound_n == n == 2 and row.bound_mean == pytest.approx(top)
        if base is not None:
            assert row.bound_to_baseline == pytest.approx(top / base)
        if system is not None:
            assert row.system_fraction_of_bound == pytest.approx(system / top)
    md = (tmp_path / "t" / "table3_ratios.md").read_text()
    assert "| Bound (n) | Bound / Baseline | System / Bound |" in md
    assert f"| {top:,.1f} (2) |" in md
    t3 = (tmp_path / "t" / "table3_redis_benchmark.md").read_text()
    assert "| No persistence | No persistence (bound) | bare | 2 |" in t3
    assert "AOF and snapshots off (it writes nothing)" in t3
    t5 = pd.read_csv(tmp_path / "t" / "table5_recovery.csv")
    assert "nopersist" not in set(t5.system)


def test_without_the_bound_the_ceiling_columns_are_empty(side_by_side, tmp_path):
    pd = __import__("pandas")
    aggregate.write_all(side_by_side, tmp_path / "t")
    table = pd.read_csv(tmp_path / "t" / "table3_ratios.csv")
    assert table.bound_mean.isna().all() and table.bound_to_baseline.isna().all()
