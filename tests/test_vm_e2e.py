"""The vm testbed for real: Vagrant + libvirt bring up a VM (TCG on machines without a
working KVM) with QEMU's emulated NVMe FDP SSD, provision-guest.yml makes F2FS on its
namespace, and one tiny baseline cell runs in the guest. The VM is destroyed at the end,
also when the cell fails. Needs root, libvirt and Vagrant (make setup-host)."""

import json
import subprocess

import pytest

from conftest import require_root, snakemake
from slimio_repro import fdp, guest, nvmetrace, paths, vm

pytestmark = pytest.mark.e2e

CELL = "vm-baseline-redis-benchmark-periodical-r1"
TINY_VM = ["matrix={testbeds: [vm], systems: [baseline], policies: [periodical], "
           "repetitions: 1}",
           "workloads={redis-benchmark: {requests: 6000, keyspace: 2000}}",
           "server={sampler_interval_s: 0.25}"]


def _domains() -> list[str]:
    out = subprocess.run(["virsh", "-c", "qemu:///system", "list", "--all", "--name"],
                         capture_output=True, text=True, check=True).stdout
    return [d for d in out.split() if d]


@pytest.fixture
def vm_work():
    """The cell's VM directory (the default work dir: pytest's tmp_path is not searchable
    by libvirt's QEMU user); whatever a failure left there is destroyed afterwards."""
    work = vm.DEFAULT_WORK_DIR / CELL
    if work.exists():
        vm._destroy_stale(work)
    yield work
    if work.exists():
        vm._destroy_stale(work)
    for name in _domains():
        if name.startswith(f"{CELL}_"):
            subprocess.run(["virsh", "-c", "qemu:///system", "destroy", name],
                           capture_output=True)
            subprocess.run(["virsh", "-c", "qemu:///system", "undefine", name,
                            "--remove-all-storage"], capture_output=True)


def test_baseline_cell_runs_in_a_vm_with_fdp_stats_and_trace(tmp_path, vm_work):
    require_root()
    results = tmp_path / "results"
    before = set(_domains())
    proc = snakemake("--cores", "all", f"{results}/cells/{CELL}.json", "--config",
                     f"results_dir={results}", *TINY_VM)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]

    # The VM is gone, and so is its directory with the NVMe backing file.
    assert not [d for d in _domains() if d.startswith(f"{CELL}_")]
    assert set(_domains()) <= before
    assert not vm_work.exists()

    raw = results / "raw" / CELL
    record = json.loads((results / "cells" / f"{CELL}.json").read_text())
    assert record["recovery_verified"] is True and record["filesystem"] == "f2fs"
    prov = json.loads((raw / paths.RAW_PROVENANCE).read_text())
    assert prov["storage"]["scheduler"].startswith("[none]")
    assert prov["storage"]["namespace"] == "/dev/nvme0n1"
    assert prov["vm"]["accel"] == vm.accelerator("auto")["accel"]
    assert prov["vm"]["device_profile"]["fdp"] is True
    assert prov["tools"]["kernel"].startswith("6.12"), "the box's backports kernel"
    timings = prov["vm"]["timings_s"]
    assert timings["vagrant_up_s"] > 0 and timings["guest_cell_s"] > 0

    # The FDP statistics advanced by what the guest wrote.
    delta = fdp.stats_delta(
        fdp.parse_stats((raw / guest.RAW_FDP_STATS_BEFORE).read_text()),
        fdp.parse_stats((raw / guest.RAW_FDP_STATS_AFTER).read_text()))
    assert delta["host_bytes_written"] > 6000 * 4096, "at least the AOF's SETs"
    assert delta["media_bytes_written"] >= delta["host_bytes_written"]
    assert fdp.parse_configs((raw / guest.RAW_FDP_CONFIGS).read_text())[0][
        "reclaim_unit_handles"] == 8

    # The trace parses, lost nothing, and accounts for exactly the bytes the device counted.
    summary = nvmetrace.summarize(raw / guest.RAW_TRACE, 4096)
    assert json.loads((raw / guest.RAW_TRACE_STATS).read_text())["events_lost"] == 0
    assert summary["write_bytes"] == delta["host_bytes_written"]
    assert summary["flush_commands"] > 0, "F2FS's fsyncs reach the device as flushes"
    assert set(summary["writes_per_placement_id"]) == {"none"}, "F2FS sends no placement"
    assert record["waf"] == pytest.approx(delta["waf"])
    assert record["nvme_trace_write_bytes"] == summary["write_bytes"]
    for name in ("vagrant.log", "provision.log", "console.log", "vm.json",
                 "guest-run-cell.log"):
        assert (raw / "vm" / name).stat().st_size > 0, name
