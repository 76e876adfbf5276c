"""The artifact's FEMU for real: the setup role's build (`make test` enables host_femu), a VM
with its FDP SSD (femu-fdp-gc), and one SlimIO cell through passthru with FDP placement,
under TCG on machines without a working KVM (femu/patches make that possible). Needs root,
libvirt, Vagrant and the FEMU build (make setup-host SETUP_ARGS='-e host_femu_enabled=true')."""

import json
import subprocess
from pathlib import Path

import pytest

from conftest import VENV_BIN, require_root, snakemake
from slimio_repro import paths
from slimio_repro.agent import fdp, layout
from slimio_repro.plan.device import load_device_profile
from slimio_repro.testbed import vm

pytestmark = pytest.mark.e2e

CELL = "vm-slimio-redis-benchmark-periodical-r1"
PROFILE = "femu-fdp-gc"


def _domains() -> set[str]:
    out = subprocess.run(["virsh", "-c", "qemu:///system", "list", "--all", "--name"],
                         capture_output=True, text=True, check=True).stdout
    return {d for d in out.split() if d}


def test_a_slimio_cell_runs_on_the_artifacts_femu(tmp_path):
    """SlimIO formats FEMU's namespace, places its WAL and snapshots by handle (the trace
    checks every write), recovers, and fio measures the roofline; the device FEMU reports is
    the geometry its options build (FEMU's FDP log page: 8 handles, its 1360 NAND blocks
    where the reclaim unit size belongs), and the VM is gone afterwards."""
    require_root()
    if not Path(paths.FEMU_EMULATOR).exists():
        pytest.fail(f"{paths.FEMU_EMULATOR} is missing: `make test` builds it (host_femu); "
                    "run make setup-host SETUP_ARGS='-e host_femu_enabled=true'")
    work = vm.DEFAULT_WORK_DIR / CELL
    if work.exists():
        vm.destroy_stale(work)
    before = _domains()
    results = tmp_path / "results"
    proc = snakemake("--cores", "all", f"{results}/cells/{CELL}.json", "--config",
                     f"results_dir={results}",
                     "matrix={testbeds: [vm], systems: [slimio], policies: [periodical], "
                     "repetitions: 1}",
                     "workloads={redis-benchmark: {requests: 6000, keyspace: 2000}}",
                     f"testbeds={{vm: {{device_profile: {PROFILE}, roofline: {{size_mb: 64}}}}}}")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert not _domains() - before, "the FEMU cell's VM was left behind"

    record = json.loads((results / "cells" / f"{CELL}.json").read_text())
    assert (record["device_model"], record["slimio_backend"]) == ("femu", "nvme")
    assert record["recovery_verified"] is True and record["rps_wal_only"] > 0
    assert record["nvme_trace_placement_ok"] is True
    assert record["nvme_trace_wal_placement_ids"] == "1"
    assert record["nvme_trace_snapshots_placement_ids"] == "2;3"
    assert record["nvme_trace_events_lost"] == 0 and record["nvme_trace_write_bytes"] > 0
    # FEMU's FDP statistics (femu/patches/0004) count exactly the bytes the guest wrote; a
    # cell this small leaves the device far from GC.
    assert record["fdp_host_bytes_written"] == record["nvme_trace_write_bytes"]
    assert record["fdp_media_bytes_written"] == record["fdp_host_bytes_written"]
    assert record["waf"] == 1.0
    assert record["roofline_placement_id"] == 2 and record["roofline_seq_write_mb_s"] > 0

    raw = results / "raw" / CELL
    # FEMU's own output (its FTL thread, later its GC lines) is kept with the cell.
    emulator = (raw / layout.RAW_EMULATOR_LOG).read_text()
    assert "femu_mode=6" in emulator and "msftl_thread start" in emulator
    assert emulator.count(vm.QEMU_LOG_START) == 1
    found = json.loads((raw / layout.RAW_SLIMIO_DEVICE).read_text())
    assert found["fdp_enabled"] is True and found["placement_ids"] == list(range(8))
    configs = fdp.parse_configs((raw / layout.RAW_FDP_CONFIGS).read_text())
    profile = load_device_profile(PROFILE)
    got = {k: configs[0][k] for k in profile.reported_fdp_config()}
    assert got == profile.reported_fdp_config() == {
        "reclaim_unit_handles": 8, "reclaim_groups": 1, "reclaim_unit_size_bytes": 1360}


def test_femus_garbage_collection_is_the_models_and_desnoyers(tmp_path):
    """On FEMU's FTL, uniform random 4 KiB overwrites of 60 % of the namespace make it
    collect garbage (one fill, then 1.5 drive writes). Replayed from the guest's trace, the
    model collects as many reclaim units and copies as many pages (within 2 %); the device's
    steady-state WAF is Desnoyers' closed form at the over-provisioning FEMU's GC leaves the
    live data (within 6 %); the device counts exactly the bytes the trace holds."""
    require_root()
    snakemake("--cores", "all", f"build/{paths.BOX_PATTERN}", check=True)  # usually built
    before = _domains()
    out = tmp_path / "gc-check"
    proc = subprocess.run(
        [str(VENV_BIN / "slimio-repro"), "gc-check", "--device-profile",
         PROFILE, "--warm-drive-writes", "1", "--measure-drive-writes", "0.5", "--out",
         str(out)], capture_output=True, text=True, cwd=paths.REPO_ROOT)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert not _domains() - before, "the GC check's VM was left behind"
    s = json.loads((out / "summary.json").read_text())
    assert s["host_pages_equal"] is True
    w = s["whole_run"]
    assert w["device_gc_rounds"] > 100, "FEMU did not collect garbage"
    assert abs(w["model_gc_rounds"] - w["device_gc_rounds"]) <= 0.02 * w["device_gc_rounds"]
    assert abs(s["gc_pages_model_vs_device"]) <= 0.02
    assert abs(s["measure_waf_model_vs_device"]) <= 0.02
    assert w["model_erased_bytes"] == pytest.approx(w["device_erased_bytes"], rel=0.02)
    measured = s["device"][-1]
    assert measured["waf"] > 1.3
    assert abs(s["measure_waf_device_vs_theory"]) <= 0.06, s["theory"]
