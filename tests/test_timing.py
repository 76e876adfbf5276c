"""Where a cell's time goes: the phase timer, the records' phase columns, the timing table and
the progress lines of a run."""

import io
import json
import time

import pandas as pd
import pytest

from slimio_repro.aggregate import timing
from slimio_repro.agent import layout, phases
from slimio_repro.plan.cellplan import Cell
from slimio_repro.parse import record as parse
from slimio_repro.run import progress


def test_phases_keep_their_order_and_add_up():
    p = phases.Phases()
    with p.phase("workload"):
        time.sleep(0.02)
    p.add("trace_fdp", 0.5)
    with p.phase("server_start"):
        pass
    p.add("trace_fdp", 0.25)
    got = p.as_dict()
    # In the order cells run them, whatever order they were timed in.
    assert list(got) == ["server_start", "workload", "trace_fdp"]
    assert got["trace_fdp"] == 0.75 and got["workload"] >= 0.02
    assert p.total() == pytest.approx(sum(got.values()), abs=0.002)
    with pytest.raises(ValueError, match="unknown phase 'warmup'"):
        p.add("warmup", 1)


def test_a_phase_that_raises_is_still_timed():
    p = phases.Phases()
    with pytest.raises(RuntimeError), p.phase("recovery"):
        raise RuntimeError("server refused to start")
    assert "recovery" in p.as_dict()


def test_records_have_every_phase_column():
    prov = {"phases_s": {"boot": 12.5, "workload": 10.0, "teardown": 2.5},
            "cell_total_s": 26.0}
    got = parse.phase_times(prov)
    assert set(got) == {f"phase_{k}_s" for k in phases.ORDER} | {"cell_total_s"}
    assert got["phase_boot_s"] == 12.5 and got["phase_load_s"] is None
    assert got["cell_total_s"] == 26.0
    # A bare cell records no total: the sum of its phases; a cell made before phases: None.
    assert parse.phase_times({"phases_s": {"workload": 1.5, "recovery": 0.5}})[
        "cell_total_s"] == 2.0
    assert parse.phase_times({})["cell_total_s"] is None


def record(system, workload, policy, rep, boot, work, total):
    return {"cell_id": f"vm-{system}-{workload}-{policy}-r{rep}", "testbed": "vm",
            "system": system, "workload": workload, "policy": policy, "rep": rep,
            "phase_boot_s": boot, "phase_workload_s": work, "phase_load_s": None,
            "cell_total_s": total}


def test_timing_table_summarises_phases_per_system_and_workload(tmp_path):
    cells = pd.DataFrame([
        record("baseline", "redis-benchmark", "periodical", 1, 12.0, 10.0, 40.0),
        record("baseline", "redis-benchmark", "always", 1, 14.0, 14.0, 44.0),
        record("slimio", "redis-benchmark", "periodical", 1, 13.0, 9.0, 38.0),
        record("slimio", "ycsb-a", "always", 1, 15.0, 30.0, 70.0),
        record("slimio", "ycsb-a", "always", 2, 11.0, 28.0, 66.0),
    ])
    summary = timing.write_timing(cells, tmp_path)
    rows = {(r.system, r.workload): r for r in summary.itertuples()}
    base = rows[("baseline", "redis-benchmark")]
    assert base.n == 2 and base.phase_boot_s_mean == 13.0 and base.cell_total_s_max == 44.0
    assert base.phase_workload_s_std == pytest.approx(2 ** 0.5 * 2)
    ycsb = rows[("slimio", "ycsb-a")]
    assert ycsb.cell_total_s_mean == 68.0 and ycsb.cell_total_s_min == 66.0
    # A phase no cell had (load is None everywhere) is not a column of the table.
    assert "phase_load_s_mean" not in summary
    md = (tmp_path / "timing.md").read_text()
    assert "| vm | Baseline | redis-benchmark | 2 | 13.0 | 12.0 | 42.0 (40.0-44.0) |" in md
    assert "All 5 cells with a total: 4.3 min of cell time." in md
    assert list(pd.read_csv(tmp_path / "timing.csv").system) == list(summary.system)


def write_cell(raw_dir, cell: Cell, total: float | None, complete: bool = True):
    d = raw_dir / cell.id
    d.mkdir(parents=True)
    prov = {"phases_s": {"workload": 1.0}} if total is None else {"cell_total_s": total}
    (d / layout.RAW_PROVENANCE).write_text(json.dumps(prov))
    if complete:
        (d / layout.RAW_COMPLETE).write_text("done\n")


def test_progress_estimates_the_time_left_from_the_cells_done(tmp_path):
    cells = [Cell("vm", s, w, "periodical", 1) for s in ("baseline", "slimio")
             for w in ("redis-benchmark", "ycsb-a")]
    write_cell(tmp_path, cells[0], 40.0)                 # baseline redis-benchmark: done
    write_cell(tmp_path, cells[1], 80.0)                 # baseline ycsb-a: done
    write_cell(tmp_path, cells[2], 99.0, complete=False)  # an interrupted cell is not done
    est = progress.estimate(cells, tmp_path, cells[2].id)
    assert (est["index"], est["total"], est["done"], est["to_run"]) == (3, 4, 2, 2)
    # slimio redis-benchmark (this one) at 40 s, slimio ycsb-a at 80 s.
    assert est["left_s"] == 120.0
    line = progress.starting_line(cells[2].id, est)
    assert line == ("[cell 3/4] vm-slimio-redis-benchmark-periodical-r1: starting; 2 done, "
                    "2 to run; about 2 min left (from 2 cells' times)")


def test_progress_before_any_cell_finished_says_so(tmp_path):
    cells = [Cell("vm", "baseline", "redis-benchmark", p, 1) for p in ("periodical", "always")]
    est = progress.estimate(cells, tmp_path, cells[0].id)
    assert est["left_s"] is None
    assert "no cell has finished yet" in progress.starting_line(cells[0].id, est)


def test_progress_goes_to_the_terminal_and_the_log(tmp_path):
    cells = [Cell("vm", "baseline", "redis-benchmark", "periodical", 1)]
    out, log = io.StringIO(), tmp_path / "logs" / "progress.log"
    with progress.Reporter(cells, tmp_path / "raw", cells[0].id, log, stream=out):
        pass
    with pytest.raises(KeyError):
        with progress.Reporter(cells, tmp_path / "raw", cells[0].id, log, stream=out):
            raise KeyError("boom")
    lines = log.read_text().splitlines()
    assert out.getvalue().splitlines() == lines and len(lines) == 4
    assert lines[1].endswith("vm-baseline-redis-benchmark-periodical-r1: done in 0 s")
    assert lines[3].endswith("failed after 0 s (KeyError)")
