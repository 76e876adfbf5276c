"""The pipeline survives its own faults: a boot that hangs is retried inside the cell; a
cell, Snakemake or QEMU killed leaves nothing that the next run (or `slimio-repro doctor`)
does not remove; the rerun redoes only the interrupted cell and leaves the finished ones
byte-identical (src/slimio_repro/run/faults.py, the campaign `slimio-repro pipeline-faults`
runs at scale)."""

from __future__ import annotations

import json

import pytest

from conftest import REPO, built_box, require_root, snakemake
from slimio_repro.agent import layout
from slimio_repro.claims.decide import find_snakemake
from slimio_repro.run import faults, leases
from slimio_repro.testbed import vm as vmmod

pytestmark = pytest.mark.e2e

CELL = "vm-nopersist-redis-benchmark-none-r1"


def test_a_hung_boot_is_retried_and_the_cell_completes(tmp_path):
    """The first boot stops in the initramfs (the console says so at once), the second
    never answers SSH (SSH masked: only the boot_stall_s deadline sees it), the third boots:
    the cell completes, its provenance names every attempt, the hung boots' consoles are
    kept, and nothing is left behind."""
    require_root()
    built_box()
    results = tmp_path / "results"
    stall_s = 75
    proc = snakemake("--cores", "all", str(results / "raw" / CELL), "--config",
                     f"results_dir={results}", f"testbeds={{vm: {{boot_stall_s: {stall_s}}}}}",
                     env={vmmod.HANG_BOOTS_ENV: "1", vmmod.MUTE_BOOTS_ENV: "1"})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    raw = results / "raw" / CELL
    assert (raw / layout.RAW_COMPLETE).exists()
    prov = json.loads((raw / layout.RAW_PROVENANCE).read_text())
    attempts = prov["vm"]["boot_attempts"]
    assert [a["outcome"] for a in attempts] == ["hung", "hung", "up"], attempts
    assert "initramfs" in attempts[0]["reason"] and attempts[0]["s"] < stall_s, attempts
    assert f"no SSH after {stall_s} s" in attempts[1]["reason"], attempts
    assert stall_s <= attempts[1]["s"] < stall_s + 30, attempts
    # Retried inside the cell, not by Snakemake (each attempt's log is in the cell's log).
    assert prov["attempt"] == 1, proc.stderr[-5000:]
    assert {"console-attempt1.log", "console-attempt2.log", "console.log"} <= \
        {p.name for p in (raw / "vm").iterdir()}
    assert "(initramfs)" in (raw / "vm" / "console-attempt1.log").read_text(errors="replace")
    left = leases.leftovers([vmmod.work_dir(None)], [results], [], own_runs_only=True)
    assert left == [], left


def test_boot_stall_must_be_below_the_boot_timeout(tmp_path):
    proc = snakemake("-n", "--cores", "1", "--config", f"results_dir={tmp_path}",
                     "testbeds={vm: {boot_stall_s: 900, boot_timeout_s: 900}}")
    assert proc.returncode != 0
    assert "testbeds.vm.boot_stall_s: 900 s is not below boot_timeout_s" in \
        proc.stdout + proc.stderr


def test_bare_faults_rerun_only_the_interrupted_cell_and_leave_nothing(tmp_path):
    """A small campaign on the bare testbed: Snakemake SIGKILLed (its cell runs on,
    orphaned, until the next run's doctor stops it), a cell SIGKILLed (Snakemake retries
    it), a cell SIGTERMed (it cleans up and Snakemake retries it)."""
    require_root()
    out = tmp_path / "campaign"
    rounds = faults.run(out, [str(REPO / "config" / "profiles" / "smoke.yaml")], 3, 7,
                        vmmod.work_dir(None), find_snakemake(),
                        ["sigkill-snakemake", "sigkill-cell", "sigterm-cell"], ["bare"])
    assert len(rounds) == 3
    for r in rounds:
        assert r.ok, r
    by_kind = {r.kind: r for r in rounds}
    # Killed cells are retried within the run; a killed Snakemake's run is not complete.
    for kind in ("sigkill-cell", "sigterm-cell"):
        if by_kind[kind].hit:
            assert by_kind[kind].completed_in_faulted_run, by_kind[kind]
    summary = (out / "summary.md").read_text()
    assert summary.splitlines()[-1].startswith("| all | 3 |"), summary
