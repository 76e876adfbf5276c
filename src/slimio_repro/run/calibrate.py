"""How long a profile's run takes on this host: ``slimio-repro calibrate`` (``make calibrate``).

:data:`CALIBRATION_CELLS` run here, each in a VM booted for it: two of the smoke profile's
baseline cells, one of each workload and policy (redis-benchmark's SETs with an fsync per
write, then its snapshots; YCSB's JVM, load and run with an fsync a second): 91 s of their
own work after two boots on the reference host. What the reference run's cells of the same
sets did, over what they did here (the cells' own phases, not the testbed's: the reference
has one boot, too few to compare with), is this host's speed.
:func:`slimio_repro.plan.estimate_run` then schedules the profile's run on this host at that
speed (one node, Snakemake running the cells, the builds cached), calibrated on the
reference run's cells and Snakemake log: the expected wall time and its interval. The speed
divides the parsing, tables and report and Snakemake's own time too, since this host runs
them as well.

The interval also carries the calibration's own noise: a cell's own work varies from one
repetition to the next by a factor of lognormal spread :func:`cell_noise` (measured on the
reference run's pairs of repetitions), so the speed, a work-weighted mean of two cells, has
:func:`speed_log_sd`. The interval runs from the estimate's 5th percentile at the speed
1.645 of those above to its 95th at 1.645 below. The host's drift between the calibration
and the run is not in it.

The reference (:data:`paths.SMOKE_REFERENCE`) is a smoke run of one host (its CPU is in every
cell's provenance), captured by tests/fixtures/estimate/capture.py. The result is written to
``<build_dir>/calibration.json``.
"""

from __future__ import annotations

import dataclasses
import json
import math
import shutil
import statistics
from datetime import datetime, timezone
from pathlib import Path

from .. import paths
from .. import plan as planmod
from ..agent import layout, provenance

# The cells that measure this host do the kind of work the smoke run does: a third of it
# redis-benchmark's and two thirds YCSB's, half of it under Always-Log, nine tenths of it in
# cells that write to the emulated device. So the baseline on F2FS, both workloads and both
# policies (docs/tutorial/first-run.md has how its predictions fell, beside the
# no-persistence cells' on the same runs).
CALIBRATION_CELLS = ("vm-baseline-redis-benchmark-always-r1",
                     "vm-baseline-ycsb-a-periodical-r1")
SMOKE_PROFILE = paths.CONFIG_DIR / "profiles" / "smoke.yaml"
# A two-sided 90 % interval of a normal variable: +-1.645 standard deviations.
Z90 = 1.645


class CalibrationError(RuntimeError):
    pass


def calibration_plans(build_dir: Path, out: Path) -> list[planmod.CellPlan]:
    """:data:`CALIBRATION_CELLS`' plans: the smoke profile's, their results under ``out``,
    each VM booted for its cell (not kept)."""
    config = planmod.load([paths.CONFIG_DIR / "config.yaml", SMOKE_PROFILE],
                          {"results_dir": str(out), "build_dir": str(build_dir)})
    plan = planmod.make(config)
    cells = [plan.cell(c) for c in CALIBRATION_CELLS]
    return [dataclasses.replace(c, vm=dataclasses.replace(c.vm, reuse_guest=False))
            for c in cells]


def reference_model(reference: Path = paths.SMOKE_REFERENCE) -> planmod.Model:
    measured, _ = planmod.measured_cells(reference)
    if not measured:
        raise CalibrationError(f"{reference} has no measured cell to compare with")
    return planmod.Model(measured)


def own_work_s(phases_s: dict[str, float]) -> float:
    """A cell's own work: its phases less the testbed's (boot, provision, guest overhead,
    teardown)."""
    return sum(v for p, v in phases_s.items() if p not in planmod.TESTBED_PHASES)


def reference_work_s(cell_plan: planmod.CellPlan, model: planmod.Model) -> float:
    """What the reference host's cells of ``cell_plan``'s set did of its own work (mean)."""
    return float(model.cell(cell_plan).group_s.mean())


def speed_of(cell_plans: list[planmod.CellPlan], phases: list[dict[str, float]],
             model: planmod.Model) -> float:
    """How many times faster this host did ``cell_plans``' own work (each one's ``phases``
    less the testbed's) than the reference host did their sets'."""
    work = [own_work_s(p) for p in phases]
    for plan, w, p in zip(cell_plans, work, phases):
        if not w > 0:
            raise CalibrationError(f"{plan.id} recorded no time in its own phases "
                                   f"({', '.join(sorted(p)) or 'none'})")
    return sum(reference_work_s(c, model) for c in cell_plans) / sum(work)


def cell_noise(model: planmod.Model) -> float:
    """The standard deviation of the log of a cell's own work between repetitions of its
    set, from the sets ``model`` measured twice or more: of log(r_a / r_b) over each set's
    pairs, over the square root of 2 (two cells' noise in each ratio)."""
    logs = []
    for cells in model.sets.values():
        work = sorted((m.plan.cell.rep, own_work_s(m.phases_s)) for m in cells)
        logs += [math.log(a / b) for (_, a), (_, b) in zip(work, work[1:]) if a > 0 and b > 0]
    if len(logs) < 2:
        raise CalibrationError("the reference has too few sets measured twice to tell how "
                               "much a cell's work varies")
    return statistics.stdev(logs) / math.sqrt(2)


def speed_log_sd(cell_plans: list[planmod.CellPlan], model: planmod.Model) -> float:
    """The standard deviation of the log of :func:`speed_of`: each cell's own work a
    lognormal sample of spread :func:`cell_noise`, weighted (to first order) by its share of
    the reference's work."""
    ref = [reference_work_s(c, model) for c in cell_plans]
    return cell_noise(model) * math.sqrt(sum((r / sum(ref)) ** 2 for r in ref))


def cell_phases(raw: Path) -> dict[str, float]:
    try:
        prov = json.loads((raw / layout.RAW_PROVENANCE).read_text())
    except (OSError, ValueError) as exc:
        raise CalibrationError(f"{raw}: cannot read {layout.RAW_PROVENANCE} ({exc})") from None
    return dict(prov.get("phases_s") or {})


def predict(config: dict, speed: float, reference: Path = paths.SMOKE_REFERENCE,
            host: planmod.Host | None = None, draws: int = 1000) -> planmod.Estimate:
    """The run of ``config`` on this host (one node, Snakemake running the cells, the builds
    cached) at ``speed`` times the reference host's: its cells, and what runs beside them here
    (the parsing, the FTL model, the tables and report, Snakemake's own time)."""
    host = host or planmod.Host.this()
    cluster = planmod.Cluster(name="this host", nodes=1, cpus=host.cpus,
                              memory_mb=host.memory_mb, kvm=host.accel_verdict == "kvm",
                              speed=speed, host_speed=speed, executor="local")
    try:
        return planmod.estimate_run(config, cluster, reference, builds=False, draws=draws)
    except planmod.EstimateError as exc:
        raise CalibrationError(
            f"{exc}. The reference ({reference}) has the smoke profile's vm cells only: for "
            "another matrix, give `slimio-repro estimate --cluster config/clusters/this-host"
            ".yaml --speed S --calibrate RESULTS_DIR` a run that measured its cells") from None


def run(config: dict, build_dir: Path, reference: Path = paths.SMOKE_REFERENCE,
        measured: list[Path] | None = None, draws: int = 1000) -> dict:
    """Run the calibration cells here (or take ``measured``, finished runs of them: their
    raw directories, named after the cells), write ``build_dir``/calibration.json and return
    it."""
    from . import leases, run_cell
    model = reference_model(reference)
    work_dir = build_dir / "calibration"
    plans = calibration_plans(build_dir, work_dir / "results")
    if measured:
        by_name = {Path(m).name: Path(m) for m in measured}
        missing = [p.id for p in plans if p.id not in by_name]
        if missing:
            raise CalibrationError(f"--measured has no raw directory of {', '.join(missing)} "
                                   f"(the calibration cells are {', '.join(CALIBRATION_CELLS)})")
        raws = [by_name[p.id] for p in plans]
    else:
        box = build_dir / paths.BOX_PATTERN
        if not box.is_file():
            raise CalibrationError(f"no guest box at {box}: build it first (`make "
                                   f"calibrate` does: snakemake --cores all {box})")
        raws = []
        for cell_plan in plans:
            raw = paths.Paths(work_dir / "results", build_dir).cell_raw(cell_plan.cell)
            shutil.rmtree(raw, ignore_errors=True)
            with leases.held(cell_plan, raw):
                run_cell(cell_plan, raw, box)
            raws.append(raw)
    phases = [cell_phases(r) for r in raws]
    speed = speed_of(plans, phases, model)
    e = predict(config, speed, reference, draws=draws)
    sd = speed_log_sd(plans, model)
    lo = predict(config, speed * math.exp(Z90 * sd), reference, draws=draws).interval_s[0]
    hi = predict(config, speed * math.exp(-Z90 * sd), reference, draws=draws).interval_s[1]
    record = {
        "utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "host": provenance.node_class(provenance.host()),
        "calibration_cells": {
            p.id: {"total_s": round(sum(ph.values()), 1),
                   "own_work_s": round(own_work_s(ph), 1),
                   "reference_own_work_s": round(reference_work_s(p, model), 1)}
            for p, ph in zip(plans, phases)},
        "reference": str(reference.relative_to(paths.REPO_ROOT)
                         if reference.is_relative_to(paths.REPO_ROOT) else reference),
        "reference_host": sorted({m.node_class for m in model.cells if m.node_class}),
        "speed": round(speed, 3),
        "speed_log_sd": round(sd, 3),
        "profile": e.profile,
        "predicted_s": round(e.makespan_s, 1),
        "interval_s": [round(lo, 1), round(hi, 1)],
        "cells": len(e.cells),
    }
    build_dir.mkdir(parents=True, exist_ok=True)
    (build_dir / paths.CALIBRATION_FILE).write_text(json.dumps(record, indent=1) + "\n")
    return record


def summary(record: dict) -> str:
    lo, hi = record["interval_s"]
    cells = record["calibration_cells"]
    here = sum(c["own_work_s"] for c in cells.values())
    there = sum(c["reference_own_work_s"] for c in cells.values())
    return (f"calibration: {len(cells)} cells' own work took {here:.1f} s here against "
            f"{there:.1f} s on the reference host "
            f"({'; '.join(record['reference_host']) or 'unrecorded'}): speed "
            f"{record['speed']:.2f} (x/ {math.exp(record['speed_log_sd']):.2f}, one "
            f"standard deviation)\n"
            f"predicted: profile {record['profile']}, {record['cells']} cells, builds cached, "
            f"on this host ({record['host']}): {record['predicted_s'] / 60:.1f} min "
            f"({lo / 60:.1f}-{hi / 60:.1f})\n")


def load(build_dir: Path) -> dict | None:
    """The last calibration of ``build_dir`` (None if there is none)."""
    f = build_dir / paths.CALIBRATION_FILE
    try:
        return json.loads(f.read_text())
    except (OSError, ValueError):
        return None
