"""Every table of a run (rule aggregate_tables): the paper's Tables 3-5 and their ratios, the
roofline, the timing, the FTL model's WAF and its sweep, and the per-cell CSV.
"""

from __future__ import annotations

from pathlib import Path

from ..plan import NOPERSIST
from .ftl_tables import load_ftl, write_ftl, write_sweep
from .paper_tables import (TABLE3_COLUMNS, TABLE4_COLUMNS, TABLE4_EXTRA_COLUMNS, TABLE5_COLUMNS,
                           storage_notes, waf_notes, write_table)
from .ratios import TABLE3_RATIO_COLUMNS, TABLE4_RATIO_COLUMNS, TABLE5_RATIO_COLUMNS, write_ratios
from .roofline_table import write_roofline
from .summary import distinct, load_records
from .timing import write_timing


def write_all(record_files: list[Path], out_dir: Path, ftl_files: list[Path] = ()) -> None:
    cells = load_records(record_files)
    ftl_cells, sequences = load_ftl(list(ftl_files))
    if len(ftl_cells):
        cells = cells.merge(ftl_cells, on="cell_id", how="left")
    out_dir.mkdir(parents=True, exist_ok=True)
    cells.to_csv(out_dir / "cells.csv", index=False)
    phases = ("Phases are taken from the INFO sampler's rdb_bgsave_in_progress / "
              "aof_rewrite_in_progress flags; Mem Usage is the peak RSS of the server plus its "
              "fork child in that phase (GB = 10^9 bytes).")
    snapshot_time = ("Snapshot time is the mean over all WAL-Snapshots and On-Demand-Snapshots "
                     "(from the server log, ms resolution).")
    run = (f"Testbed(s): {', '.join(distinct(cells, 'testbed'))}; profile: "
           f"{', '.join(distinct(cells, 'profile'))}; Redis "
           f"{', '.join(distinct(cells, 'redis_version'))}.")
    bench_cells = cells[cells.workload == "redis-benchmark"]
    waf = waf_notes(bench_cells)
    t3 = write_table(cells, "redis-benchmark", TABLE3_COLUMNS, "table3_redis_benchmark",
                     "Table 3: Overall evaluation with the redis-benchmark workload",
                     [run] + storage_notes(bench_cells) + [phases, snapshot_time] + waf,
                     out_dir)
    paper_note = ("Paper's ratio: the same ratio from the paper's Table 3/5 (FEMU FDP SSD, "
                  "28 M SETs x 5), for comparison only; the paper has no SlimIO w/o FDP row.")
    write_ratios(t3, TABLE3_RATIO_COLUMNS, "table3_ratios",
                 "Table 3 ratios: each system over the baseline (redis-benchmark)",
                 "table3_redis_benchmark", [phases, snapshot_time] + waf + [paper_note], out_dir)
    t5_notes = [
        "Recovery time is Redis's own 'DB loaded from append only file' time after a remount "
        "(cold page cache), for every system; throughput is what was loaded over that time "
        "(MB = 10^6 bytes): the AOF's files (base + increments) for the baseline, the bytes "
        "SlimIO read from its device (snapshot slot + WAL, INFO slimio_recovery_bytes) for "
        "SlimIO and SlimIO w/o FDP.",
        "The CSV also has SlimIO's own measurement of its device reads "
        "(slimio_recovery_time_s, slimio_recovery_mb_s as INFO slimio reports them).",
    ]
    # Written even with recovery disabled (then every value is n/a): the rule promises it.
    # The no-persistence bound has nothing to recover.
    t5 = write_table(cells[cells.system != NOPERSIST], "redis-benchmark", TABLE5_COLUMNS,
                     "table5_recovery",
                     "Table 5: Recovery evaluation (redis-benchmark cells)",
                     t5_notes + [run] + storage_notes(bench_cells[bench_cells.system
                                                                  != NOPERSIST]), out_dir)
    write_ratios(t5, TABLE5_RATIO_COLUMNS, "table5_ratios",
                 "Table 5 ratios: each system over the baseline (recovery, redis-benchmark)",
                 "table5_recovery", [t5_notes[0], paper_note], out_dir)
    ycsb_cells = cells[cells.workload == "ycsb-a"]
    latency = ("SET p999 and GET p999 are YCSB's per-operation 99.9th percentiles of the run "
               "phase (UPDATE = SET, READ = GET through our binding) from its HdrHistogram "
               "(us resolution, shown in ms); Average RPS is YCSB's run-phase throughput; the "
               "CSV also has the server's own p99.9 (INFO latencystats) as a cross-check.")
    client = ("YCSB client: " + ", ".join(distinct(ycsb_cells, "ycsb_client_host")) +
              " (guest = in the cell's VM beside the server, over loopback; host = on the "
              "machine of a bare cell); YCSB core "
              + ", ".join(distinct(ycsb_cells, "ycsb_core_version")) + ", "
              + ", ".join(distinct(ycsb_cells, "java_version")) + ".") \
        if len(ycsb_cells) else "No YCSB-A cell in this run: add ycsb-a to matrix.workloads."
    t4_notes = [run] + storage_notes(ycsb_cells) + [
        phases, "Each cell loads the records (YCSB's load phase), then runs the operations; "
        "the columns measure the run phase.", snapshot_time, latency, client]
    t4 = write_table(cells, "ycsb-a", TABLE4_COLUMNS, "table4_ycsb_a",
                     "Table 4: Overall evaluation with the YCSB-A workload", t4_notes, out_dir,
                     TABLE4_EXTRA_COLUMNS)
    write_ratios(t4, TABLE4_RATIO_COLUMNS, "table4_ratios",
                 "Table 4 ratios: each system over the baseline (YCSB-A)", "table4_ycsb_a",
                 [phases, snapshot_time, latency, client,
                  "Paper's ratio: the same ratio from the paper's Table 4 (FEMU FDP SSD, 9 M "
                  "records, 115 M operations, one run), for comparison only."], out_dir)
    write_roofline(cells, out_dir)
    write_timing(cells, out_dir)
    write_ftl(cells, sequences, out_dir)
    write_sweep(sequences, out_dir)
