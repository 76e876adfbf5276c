"""`slimio-repro calibrate`: this host's speed from two cells, and the smoke run it predicts.

The reference (results/reference/smoke-run) is a real smoke run with kept guests: one cell
booted its VM, the 21 others took it over with their namespace made blank.
"""

import dataclasses
import json
import math
import subprocess
import sys

import numpy as np
import pytest

from conftest import REPO
from slimio_repro import paths, plan as planmod
from slimio_repro.plan import estimate
from slimio_repro.plan.checks import Host
from slimio_repro.run import calibrate
from test_estimate import smoke_config

REFERENCE = paths.SMOKE_REFERENCE
# The reference run's host, as the plan's checks see it.
REFERENCE_HOST = Host(cpus=2, memory_mb=24105, kvm_device=True, accel_verdict="tcg")


def reference_run() -> dict:
    return json.loads((REFERENCE / "run.json").read_text())


def cell_seconds(e: estimate.Estimate) -> float:
    return sum(p.end - p.start for p in e.cells)


def test_the_reference_run_is_predicted_from_its_own_cells_within_5_percent():
    """At speed 1 the prediction is the reference run's own (in sample): what is checked is
    the rest, one booted cell and 21 that take over its guest (their testbed phases those of
    the kept cells: 8-11 s, not a boot's 38-43 s), the parsing, tables and report."""
    run = reference_run()
    e = calibrate.predict(smoke_config(), 1.0, REFERENCE, REFERENCE_HOST, draws=200)
    assert sorted(p.job.name for p in e.cells) == run["cells"]
    assert abs(e.makespan_s - run["wall_s"]) <= 0.05 * run["wall_s"], \
        (e.makespan_s, run["wall_s"])
    booted = [p for p in e.cells if not p.job.kept_guest]
    assert len(booted) == 1


def test_a_host_half_as_fast_takes_twice_as_long():
    """One host runs it all: at half the speed the cells' own time doubles, and so does what
    runs beside them (Snakemake's time on each cell's job, about 1 s in the reference's log,
    its start, the parsing, tables and report), so the whole run takes twice as long."""
    fast = calibrate.predict(smoke_config(), 1.0, REFERENCE, REFERENCE_HOST, draws=20)
    slow = calibrate.predict(smoke_config(), 0.5, REFERENCE, REFERENCE_HOST, draws=20)
    own = sum(p.job.model.mean_s for p in fast.cells)
    assert 0 < cell_seconds(fast) - own < len(fast.cells) * 2.0
    assert cell_seconds(slow) == pytest.approx(2 * cell_seconds(fast), rel=1e-9)
    rest = fast.makespan_s - cell_seconds(fast)
    assert rest > 30, rest      # the parsing, tables and report: about a minute here
    assert slow.makespan_s == pytest.approx(2 * fast.makespan_s, rel=1e-9)
    assert slow.interval_s[0] == pytest.approx(2 * fast.interval_s[0], rel=1e-9)


def test_the_speed_is_the_reference_sets_work_over_the_work_measured_here():
    """The cells' own phases (not the testbed's: a boot here against the reference's one
    boot would weigh one noisy sample): 1.25 times the reference's work is speed 0.8,
    whatever the boots took; the cells count by their work."""
    model = calibrate.reference_model(REFERENCE)
    plans = calibrate.calibration_plans(REPO / "build", REPO / "results")
    refs = [model.cell(p) for p in plans]
    phases = []
    for ref in refs:
        ph = {p: 1.25 * v for p, v in ref.phase_mean_s.items()
              if p not in estimate.TESTBED_PHASES}
        phases.append({**ph, "boot": 1000.0, "teardown": 50.0})
    assert calibrate.speed_of(plans, phases, model) == pytest.approx(0.8)
    # The YCSB cell at the reference's pace, the redis-benchmark cell twice as slow.
    work = [r.group_s.mean() for r in refs]
    phases = [{"workload": 2 * work[0]}, {"workload": work[1]}]
    assert calibrate.speed_of(plans, phases, model) == pytest.approx(
        sum(work) / (2 * work[0] + work[1]))
    assert work[1] > work[0]        # YCSB's cell does most of the calibration's work
    with pytest.raises(calibrate.CalibrationError, match="no time in its own phases"):
        calibrate.speed_of(plans, [{"boot": 30.0}, phases[1]], model)


def test_calibrate_on_measured_cells_writes_the_speed_and_the_prediction(tmp_path):
    """The command on cells that already ran (--measured): the reference's own calibration
    cells, whose work is within their sets' two repetitions (speed near 1)."""
    measured = [REFERENCE / "raw" / c for c in calibrate.CALIBRATION_CELLS]
    proc = subprocess.run(
        [sys.executable, "-m", "slimio_repro", "calibrate", "--build-dir", str(tmp_path),
         "--draws", "50", *[w for m in measured for w in ("--measured", str(m))]],
        cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    record = json.loads((tmp_path / paths.CALIBRATION_FILE).read_text())
    assert set(record["calibration_cells"]) == set(calibrate.CALIBRATION_CELLS)
    assert record["profile"] == "smoke" and 0.9 < record["speed"] < 1.1, record
    lo, hi = record["interval_s"]
    assert lo <= record["predicted_s"] <= hi and record["cells"] == 22
    # The speed's own noise (a 5 % log spread here) widens the interval beyond the
    # reference cells' spread alone (0.9 min wide at one speed).
    assert 0.03 < record["speed_log_sd"] < 0.1 and hi - lo > 0.1 * record["predicted_s"]
    assert "speed" in proc.stdout and "predicted: profile smoke, 22 cells" in proc.stdout
    assert calibrate.load(tmp_path) == record
    # One cell's run is not enough: the command names the other.
    one = subprocess.run(
        [sys.executable, "-m", "slimio_repro", "calibrate", "--build-dir", str(tmp_path / "x"),
         "--measured", str(measured[0])], cwd=REPO, capture_output=True, text=True)
    assert one.returncode != 0 and calibrate.CALIBRATION_CELLS[1] in one.stderr


def test_calibrate_without_a_box_says_how_to_build_it(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "slimio_repro", "calibrate", "--build-dir", str(tmp_path)],
        cwd=REPO, capture_output=True, text=True)
    assert proc.returncode != 0
    assert "no guest box at" in proc.stderr and "make calibrate" in proc.stderr
    assert not (tmp_path / paths.CALIBRATION_FILE).exists()


def test_a_profile_the_reference_did_not_measure_is_refused_with_what_to_do():
    with pytest.raises(calibrate.CalibrationError, match="slimio-repro estimate --cluster"):
        calibrate.predict(planmod.load([paths.CONFIG_DIR / "config.yaml",
                                        paths.CONFIG_DIR / "profiles" / "ci.yaml"]),
                          1.0, REFERENCE, REFERENCE_HOST, draws=10)


def test_a_cells_noise_is_recovered_from_its_sets_repetitions():
    """Known truth: every set of the reference measured 40 times, each cell's own work its
    set's mean times a lognormal factor of spread 0.2; the estimate from consecutive
    repetitions is 0.2 within 10 %."""
    rng = np.random.default_rng(7)
    model = calibrate.reference_model(REFERENCE)
    cells = []
    for members in model.sets.values():
        m = members[0]
        for rep in range(1, 41):
            plan = dataclasses.replace(m.plan, cell=dataclasses.replace(m.plan.cell, rep=rep))
            cells.append(dataclasses.replace(
                m, plan=plan, phases_s={"workload": 20.0 * math.exp(rng.normal(0, 0.2)),
                                        "boot": 30.0}))
    assert calibrate.cell_noise(estimate.Model(cells)) == pytest.approx(0.2, rel=0.10)


def test_the_speeds_spread_is_what_its_cells_noise_gives():
    """Simulation with a known speed (1.3) and noise (the reference's): the calibration's
    speed, drawn 20000 times, has the log spread :func:`calibrate.speed_log_sd` says
    (within 5 %), and is unbiased in the log (within 1 %)."""
    rng = np.random.default_rng(11)
    model = calibrate.reference_model(REFERENCE)
    plans = calibrate.calibration_plans(REPO / "build", REPO / "results")
    ref = np.array([calibrate.reference_work_s(p, model) for p in plans])
    sigma = calibrate.cell_noise(model)
    measured = ref / 1.3 * np.exp(rng.normal(0, sigma, (20000, len(ref))))
    logs = np.log(ref.sum() / measured.sum(axis=1))
    assert logs.std() == pytest.approx(calibrate.speed_log_sd(plans, model), rel=0.05)
    assert logs.mean() == pytest.approx(math.log(1.3), abs=0.01)
