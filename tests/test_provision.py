"""A vm cell's provisioning judges the guest and its device (agent.provision.problems) on the
facts read in a real guest: nvme-cli's FDP configuration and handle status captured from
QEMU's emulated FDP SSD (tests/fixtures/cells/vm-slimio-...), and each kind of mismatch is
named. The whole path (gather, prepare: mkfs.f2fs, mount, scheduler) runs in every VM cell of
tests/test_vm_e2e.py."""

import dataclasses

import pytest

from conftest import CELL_FIXTURES, cell_plan
from slimio_repro.agent import fdp, layout, provision

VM_CELL = CELL_FIXTURES / "vm-slimio-redis-benchmark-periodical-r1"
BOX_ID = "e7b64aedc0b3" + "0" * 52
KERNEL = "6.12.95+deb12-amd64"


def captured_facts(**changes) -> provision.GuestFacts:
    """The facts of a fresh guest as nvme-cli printed them in the captured VM cell."""
    facts = provision.GuestFacts(
        box_id=BOX_ID, kernel=KERNEL, namespace="/dev/nvme0n1", namespace_is_block=True,
        logical_block_size_bytes=4096, ctratt=provision.CTRATT_FDPS | 0x10,
        fdp_configs=tuple(fdp.parse_configs((VM_CELL / layout.RAW_FDP_CONFIGS).read_text())),
        fdp_placement_ids=tuple(fdp.parse_status((VM_CELL / layout.RAW_FDP_STATUS).read_text())),
        fdp_host_bytes_written=0, scheduler="[none] mq-deadline", fstype="", mounted_at="")
    return dataclasses.replace(facts, **changes)


@pytest.fixture(scope="module")
def vm_settings():
    return cell_plan("vm-slimio-redis-benchmark-periodical-r1").vm


def test_the_captured_device_is_the_smoke_profile(vm_settings):
    for system in ("baseline", "slimio", "slimio-nofdp"):
        assert provision.problems(captured_facts(), vm_settings, system, BOX_ID, KERNEL) == []


@pytest.mark.parametrize("changes, system, named", [
    ({"box_id": "0" * 64}, "slimio", "host booted box " + BOX_ID),
    ({"box_id": None}, "slimio", "no /opt/slimio-repro/box-id"),
    ({"kernel": "6.1.0-28-amd64"}, "baseline", "box was built with " + KERNEL),
    ({"namespace_is_block": False}, "slimio", "is not a block device"),
    ({"logical_block_size_bytes": 512}, "slimio", "512-byte LBAs"),
    ({"ctratt": 0x10}, "slimio", "CTRATT bit 19) is False"),
    ({"fdp_placement_ids": (0, 1, 2, 3)}, "slimio", "placement ids [0, 1, 2, 3]"),
    ({"fstype": "ext4"}, "baseline", "carries a ext4 signature"),
    ({"fstype": "f2fs"}, "slimio", "SlimIO writes raw LBAs"),
    ({"mounted_at": "/mnt/x"}, "slimio-nofdp", "is mounted at /mnt/x"),
])
def test_each_mismatch_is_named(vm_settings, changes, system, named):
    found = provision.problems(captured_facts(**changes), vm_settings, system, BOX_ID, KERNEL)
    assert len(found) == 1 and named in found[0], found


def test_the_fdp_configuration_is_checked_against_the_profile(vm_settings):
    """A device with 4 handles of 128 MiB (nvme-cli's JSON edited) is not the smoke profile."""
    configs = (VM_CELL / layout.RAW_FDP_CONFIGS).read_text().replace(
        '"nruh":8', '"nruh":4').replace('"runs":67108864', '"runs":134217728')
    facts = captured_facts(fdp_configs=tuple(fdp.parse_configs(configs)))
    found = provision.problems(facts, vm_settings, "slimio", BOX_ID, KERNEL)
    assert len(found) == 1 and "'reclaim_unit_handles': 4" in found[0]
    assert "134217728" in found[0] and "67108864" in found[0]


def test_a_cell_refuses_a_namespace_written_before(vm_settings):
    """A cell starts on a namespace never written since it was made blank (a new device: 0
    host bytes; a kept guest's: the count at its reset); by hand, an F2FS made before is
    kept."""
    facts = captured_facts(fdp_host_bytes_written=21028864, fstype="f2fs")
    found = provision.problems(facts, vm_settings, "baseline", BOX_ID, KERNEL, blank_at=0)
    assert len(found) == 1 and "21028864 host bytes" in found[0]
    found = provision.problems(facts, vm_settings, "baseline", BOX_ID, KERNEL,
                               blank_at=21028864 - 4096)
    assert len(found) == 1 and "21024768 when it was made blank" in found[0]
    assert provision.problems(facts, vm_settings, "baseline", BOX_ID, KERNEL,
                              blank_at=21028864) == []
    assert provision.problems(facts, vm_settings, "baseline", BOX_ID, KERNEL) == []


def test_an_existing_f2fs_is_kept_for_the_baseline(vm_settings):
    """Provisioning twice is idempotent: the baseline keeps an F2FS it finds."""
    assert provision.problems(captured_facts(fstype="f2fs", mounted_at=vm_settings.mountpoint),
                              vm_settings, "baseline", BOX_ID, KERNEL) == []


def test_without_expectations_only_the_device_is_checked(vm_settings):
    """`guest provision` by hand names no box: the box and kernel are not judged."""
    facts = captured_facts(box_id=None, kernel="anything")
    assert provision.problems(facts, vm_settings, "slimio", None, None) == []
