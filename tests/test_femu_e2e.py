"""The artifact's FEMU for real: the setup role's build (`make test` enables host_femu), a VM
with its FDP SSD (femu-fdp-gc), and one SlimIO cell through passthru with FDP placement,
under TCG on machines without a working KVM (femu/patches make that possible). Needs root,
libvirt, Vagrant and the FEMU build (make setup-host SETUP_ARGS='-e host_femu_enabled=true')."""

import json
import subprocess
from pathlib import Path

import pytest

from conftest import require_root, snakemake
from slimio_repro import paths
from slimio_repro.guest import fdp, layout
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
    assert record["roofline_placement_id"] == 2 and record["roofline_seq_write_mb_s"] > 0

    raw = results / "raw" / CELL
    # FEMU's own output (its FTL thread, later its GC lines) is kept with the cell.
    emulator = (raw / "vm" / vm.EMULATOR_LOG).read_text()
    assert "femu_mode=6" in emulator and "msftl_thread start" in emulator
    assert emulator.count(vm.QEMU_LOG_START) == 1
    found = json.loads((raw / layout.RAW_SLIMIO_DEVICE).read_text())
    assert found["fdp_enabled"] is True and found["placement_ids"] == list(range(8))
    configs = fdp.parse_configs((raw / layout.RAW_FDP_CONFIGS).read_text())
    profile = load_device_profile(PROFILE)
    got = {k: configs[0][k] for k in profile.reported_fdp_config()}
    assert got == profile.reported_fdp_config() == {
        "reclaim_unit_handles": 8, "reclaim_groups": 1, "reclaim_unit_size_bytes": 1360}
