"""The bare testbed on a named NVMe namespace (testbeds.bare.device), for real: this machine
has no NVMe SSD, so one of our VMs stands in for the machine that has one. Its emulated FDP
namespace (QEMU, the default device profile) is the user's SSD; the cell's code runs in the
guest exactly as on bare metal (``python3 -m slimio_repro.agent run-cell`` with a bare plan,
made on this host from the facts the guest read of its device). Covered: the refusals at
planning and before the first write (a foreign file system, the override, a mounted device,
a partition table, the root disk, another device than the one planned), then a baseline cell
(F2FS made on the namespace), a slimio cell (passthru with FDP placement) and a baseline-ext4
cell (EXT4 made on it), parsed here into records with the device's FDP statistics, trace and
roofline. Needs root, libvirt and Vagrant (make setup-host)."""

import json
import os
import shlex
import subprocess
import tarfile
from dataclasses import replace
from pathlib import Path

import pytest

from conftest import built_box
from slimio_repro import paths
from slimio_repro.agent import layout, nameddevice
from slimio_repro.parse import parse_cell
from slimio_repro.testbed import vm

pytestmark = pytest.mark.e2e

NAMESPACE = "/dev/nvme0n1"
BASELINE = "bare-baseline-redis-benchmark-periodical-r1"
SLIMIO = "bare-slimio-redis-benchmark-periodical-r1"
EXT4 = "bare-baseline-ext4-redis-benchmark-periodical-r1"
TINY_BARE = {
    "matrix": {"testbeds": ["bare"], "systems": ["baseline", "baseline-ext4", "slimio"],
               "policies": ["periodical"], "repetitions": 1},
    "workloads": {"redis-benchmark": {"requests": 6000, "keyspace": 2000}},
    "server": {"sampler_interval_s": 0.25},
    "testbeds": {"bare": {"device": NAMESPACE, "filesystem": "f2fs",
                          "roofline": {"size_mb": 64}}},
}


class Guest:
    """The stand-in machine: a VM with the default device profile's FDP namespace."""

    def __init__(self, machine: vm.RunningVm):
        self.machine = machine

    def sh(self, command: str, check: bool = True) -> subprocess.CompletedProcess:
        return self.machine.ssh(f"sudo sh -c {shlex.quote(command)}", check=check,
                                timeout=600)

    def guest(self, args: str, extra: dict[str, bytes] | None = None,
              timeout: float = 1800) -> tuple[int, str]:
        proc = vm.guest_python(self.machine, args, extra or {}, timeout)
        return proc.returncode, proc.stdout.decode(errors="replace")

    def check_device(self, device: str = NAMESPACE, i_own: str | None = None,
                     state: str | None = None) -> tuple[int, dict]:
        """check-device's report; with ``state``, also kept as a fixture of that state
        (tests/fixtures/nameddevice/capture.sh sets CAPTURE_DIR)."""
        rc, out = self.guest(f"check-device --device {device}"
                             + (f" --i-own-this-device {i_own}" if i_own else ""))
        assert rc in (0, 2), out
        if state and os.environ.get("CAPTURE_DIR"):
            Path(os.environ["CAPTURE_DIR"], f"{state}.json").write_text(out)
        return rc, json.loads(out)

    def facts(self) -> nameddevice.Facts:
        return nameddevice.Facts.from_dict(self.check_device()[1]["facts"])

    def host_bytes_written(self) -> int:
        out = self.sh("nvme fdp stats /dev/nvme0 -e 1 -o json").stdout
        return int(json.loads(out)["hbmw"])

    def signature(self) -> str:
        return self.sh(f"blkid -p -o value -s TYPE {NAMESPACE}", check=False).stdout \
            .decode().strip()

    def run_cell(self, plan, out_dir) -> tuple[int, str]:
        raw = f"{vm.GUEST_CELLS_DIR}/raw/{plan.id}"
        rc, out = self.guest(f"run-cell --plan-json {vm.GUEST_REPO_DIR}/{layout.RAW_PLAN} "
                             f"--out {raw}",
                             {layout.RAW_PLAN: vm.guest_plan(plan).to_json().encode()})
        if rc == 0:
            with open(out_dir.with_suffix(".tar"), "wb") as fh:
                self.machine.ssh(f"sudo tar -C {raw} -cf - .", stdout=fh)
            with tarfile.open(out_dir.with_suffix(".tar")) as tar:
                tar.extractall(out_dir, filter="data")
        return rc, out


def _plans(facts, **bare):
    from slimio_repro import plan as planmod
    overrides = {**TINY_BARE, "testbeds": {"bare": {**TINY_BARE["testbeds"]["bare"], **bare}}}
    cfg = planmod.load([paths.CONFIG_DIR / "config.yaml"], overrides)
    return planmod.make(cfg, device_facts=facts)


@pytest.fixture(scope="module")
def guest(tmp_path_factory):
    from slimio_repro import plan as planmod
    cfg, box_file = built_box()
    base = planmod.make(cfg).cell("vm-slimio-redis-benchmark-periodical-r1")
    stand_in = replace(base, cell=replace(base.cell, rep=98))
    vm_dir = vm.DEFAULT_WORK_DIR / stand_in.id
    if vm_dir.exists():
        vm.destroy_stale(vm_dir)
    vm_dir.mkdir(parents=True)
    vm_dir.chmod(0o755)
    machine = vm.make_vm(stand_in, vm_dir, box_file, tmp_path_factory.mktemp("vagrant")
                         / "vagrant.log")
    try:
        machine.up()
        yield Guest(machine)
    finally:
        try:
            machine.destroy()
        finally:
            if vm_dir.exists():
                vm.destroy_stale(vm_dir)


def test_a_named_device_is_refused_unless_blank_owned_and_unused_then_cells_run_on_it(
        guest, tmp_path):
    from slimio_repro.plan import ConfigError

    # A blank namespace: nothing refuses it, and the plan reads it as it is (FDP, handles).
    rc, blank = guest.check_device(state="blank")
    assert rc == 0 and blank["problems"] == [], blank
    facts = nameddevice.Facts.from_dict(blank["facts"])
    assert facts.fdp and len(facts.fdp_placement_ids) >= 3 and facts.wwid
    plan = _plans(facts)
    named = plan.cell(BASELINE).bare.device
    assert (named.namespace, named.passthru_device, named.controller, named.fdp) == \
        (NAMESPACE, "/dev/ng0n1", "/dev/nvme0", True)
    assert plan.cell(SLIMIO).slimio.backend == "nvme"

    # A file system the framework did not make: refused at planning, and by the cell before
    # its first write (the device's FDP statistics count no byte more, the file system is
    # still there).
    guest.sh(f"mkfs.ext4 -q -F {NAMESPACE}")
    rc, report = guest.check_device(state="ext4")
    assert rc == 2 and any("ext4 file system" in p and "i_own_this_device" in p
                           for p in report["problems"]), report
    with pytest.raises(ConfigError, match=r"holds a ext4 file system.*i_own_this_device"):
        _plans(guest.facts())
    written = guest.host_bytes_written()
    rc, out = guest.run_cell(plan.cell(BASELINE), tmp_path / BASELINE)
    assert rc == 2 and "refusing to write /dev/nvme0n1" in out and "ext4" in out, out
    assert guest.host_bytes_written() == written and guest.signature() == "ext4"

    # i_own_this_device naming another device is no permission.
    with pytest.raises(ConfigError, match="i_own_this_device is /dev/nvme1n1, which is not"):
        _plans(guest.facts(), i_own_this_device="/dev/nvme1n1")

    # Mounted: refused even with the override.
    guest.sh(f"mkdir -p /mnt/user && mount {NAMESPACE} /mnt/user")
    rc, report = guest.check_device(i_own=NAMESPACE, state="mounted")
    assert rc == 2 and any("mounted at /mnt/user" in p for p in report["problems"]), report
    owned_plan = _plans(nameddevice.Facts.from_dict(blank["facts"]),
                        i_own_this_device=NAMESPACE)
    rc, out = guest.run_cell(owned_plan.cell(BASELINE), tmp_path / "mounted")
    assert rc == 2 and "mounted at /mnt/user" in out, out
    guest.sh("umount /mnt/user")

    # The root disk: never, whatever the override says.
    root_disk = "/dev/" + guest.sh("lsblk -ndo PKNAME $(findmnt -no SOURCE /) || "
                                   "findmnt -no SOURCE /").stdout.decode().split()[0] \
        .removeprefix("/dev/")
    rc, report = guest.check_device(root_disk, i_own=root_disk, state="root")
    assert rc == 2 and any("root file system" in p for p in report["problems"]), report

    # Another device than the one planned (a cell sent to a machine whose disk has the same
    # name): refused.
    moved = replace(owned_plan.cell(BASELINE), bare=replace(
        owned_plan.cell(BASELINE).bare,
        device=replace(owned_plan.cell(BASELINE).bare.device, wwid="eui.0000000000000001")))
    rc, out = guest.run_cell(moved, tmp_path / "moved")
    assert rc == 2 and "is not the device the cell was planned for" in out, out

    # With the override the baseline's cell formats over the user's ext4: F2FS, labelled as
    # the framework's, then a complete cell with the device's records.
    owned_plan = _plans(guest.facts(), i_own_this_device=NAMESPACE)
    rc, out = guest.run_cell(owned_plan.cell(BASELINE), tmp_path / BASELINE)
    assert rc == 0, out[-4000:]
    raw = tmp_path / BASELINE
    provision = json.loads((raw / layout.RAW_PROVISION).read_text())
    changed = [c for c in provision["changed"] if not c.startswith("echo none")]
    assert changed[:2] == [f"wipefs --all {NAMESPACE}",
                           f"mkfs.f2fs -f -l slimio-repro {NAMESPACE}"], provision
    record, _ = parse_cell(raw)
    assert record["testbed"] == "bare" and record["filesystem"] == "f2fs"
    assert record["device_model"] == "nvme-ssd" and record["recovery_verified"]
    assert record["fdp_host_bytes_written"] >= record["nvme_trace_write_bytes"] > 0
    assert record["waf"] == pytest.approx(1.0, abs=0.01)      # QEMU: no GC
    assert record["nvme_trace_events_lost"] == 0
    assert record["roofline_seq_write_mb_s"] > 0

    # What it left is the framework's own (or blank after the roofline): a slimio cell
    # planned without the override runs over it, through passthru with FDP placement.
    rc, report = guest.check_device(state="after-baseline")
    assert rc == 0, report
    rc, out = guest.run_cell(plan.cell(SLIMIO), tmp_path / SLIMIO)
    assert rc == 0, out[-4000:]
    record, _ = parse_cell(tmp_path / SLIMIO)
    assert record["slimio_backend"] == "nvme" and record["slimio_device"] == "/dev/ng0n1"
    assert record["nvme_trace_placement_ok"] and record["recovery_verified"]
    assert record["nvme_trace_placement_ids"] != "none"

    # EXT4 on the same namespace (baseline-ext4), over what SlimIO left.
    rc, out = guest.run_cell(plan.cell(EXT4), tmp_path / EXT4)
    assert rc == 0, out[-4000:]
    record, _ = parse_cell(tmp_path / EXT4)
    assert record["filesystem"] == "ext4" and record["recovery_verified"]
    assert record["fdp_host_bytes_written"] >= record["nvme_trace_write_bytes"] > 0
    provision = json.loads((tmp_path / EXT4 / layout.RAW_PROVISION).read_text())
    assert f"mkfs.ext4 -F -q -L slimio-repro {NAMESPACE}" in provision["changed"]

    # A partition table: refused without the override.
    # (The whole first sector: libblkid takes an MBR whose other entries hold SlimIO's bytes
    # for no partition table.)
    mbr = ("bytes(446) + bytes([0, 0, 2, 0, 0x83, 0, 0, 0]) + (256).to_bytes(4, 'little') + "
           "(16384).to_bytes(4, 'little') + bytes(48) + bytes([0x55, 0xaa])")
    guest.sh(f"wipefs --all {NAMESPACE} && python3 -c \"d = open('{NAMESPACE}', 'r+b'); "
             f"d.write({mbr}); d.close()\"")
    rc, report = guest.check_device(state="dos")
    assert rc == 2 and any("dos partition table" in p for p in report["problems"]), report
