"""What the bare testbed refuses of a named NVMe namespace (agent/nameddevice.py), judged on
check-device reports of a real emulated FDP namespace in each state (captured in a VM by
tests/fixtures/nameddevice/capture.sh), and the plan made from them."""

import json
from dataclasses import replace

import pytest

from conftest import FIXTURES, plan_of
from slimio_repro import plan as planmod
from slimio_repro import paths
from slimio_repro.agent import nameddevice

STATES = FIXTURES / "nameddevice"
DEVICE = "/dev/nvme0n1"


def facts(state: str) -> nameddevice.Facts:
    return nameddevice.Facts.from_dict(json.loads((STATES / f"{state}.json").read_text())
                                       ["facts"])


def bare_plan(state: str, **bare):
    cfg = planmod.load([paths.CONFIG_DIR / "config.yaml"], {
        "matrix": {"testbeds": ["bare"],
                   "systems": ["baseline", "slimio", "slimio-nofdp", "nopersist"],
                   "policies": ["periodical"]},
        "testbeds": {"bare": {"device": DEVICE, "filesystem": "f2fs", **bare}}})
    return planmod.make(cfg, device_facts=facts(state))


def test_the_captured_reports_are_what_the_guest_judged():
    """The fixtures' own verdicts (made in the guest) are the pure function's here."""
    for report in sorted(STATES.glob("*.json")):
        data = json.loads(report.read_text())
        f = nameddevice.Facts.from_dict(data["facts"])
        assert nameddevice.problems(f, None) == data["problems"] \
            or report.stem in ("mounted", "root"), report.name   # those two asked with i_own


def test_a_blank_fdp_namespace_plans_every_system_on_it():
    f = facts("blank")
    assert nameddevice.problems(f, None) == []
    plan = bare_plan("blank")
    slimio = plan.cell("bare-slimio-redis-benchmark-periodical-r1")
    nofdp = plan.cell("bare-slimio-nofdp-redis-benchmark-periodical-r1")
    base = plan.cell("bare-baseline-redis-benchmark-periodical-r1")
    assert slimio.slimio.backend == nofdp.slimio.backend == "nvme"
    assert base.bare.device.filesystem == "f2fs" and base.sizing.image_size_bytes is None
    assert slimio.bare.device.fdp and slimio.bare.device.wwid == f.wwid
    # The roofline's fio is a build the cell needs; the bound measures no roofline.
    assert any(n.startswith("fio/") for n in slimio.needs)
    bound = plan.cell("bare-nopersist-redis-benchmark-none-r1")
    assert not bound.bare.device.roofline.enabled


def test_a_foreign_file_system_is_refused_unless_owned():
    f = facts("ext4")
    found = nameddevice.problems(f, None)
    assert len(found) == 1 and "holds a ext4 file system" in found[0] \
        and f"i_own_this_device: {DEVICE}" in found[0]
    assert nameddevice.problems(f, DEVICE) == []
    with pytest.raises(planmod.ConfigError, match="testbeds.bare.device: the bare cells cannot "
                       "run on /dev/nvme0n1:\n- /dev/nvme0n1 holds a ext4 file system"):
        bare_plan("ext4")
    bare_plan("ext4", i_own_this_device=DEVICE)
    # Naming another device is no permission.
    assert any("which is not testbeds.bare.device" in p
               for p in nameddevice.problems(f, "/dev/nvme1n1"))


def test_a_partition_table_is_refused_unless_owned():
    f = facts("dos")
    assert f.pttype == "dos"
    assert any("dos partition table" in p for p in nameddevice.problems(f, None))
    assert nameddevice.problems(f, DEVICE) == []


def test_a_mounted_device_and_the_root_disk_are_refused_even_when_owned():
    mounted = facts("mounted")
    assert any("mounted at /mnt/user" in p for p in nameddevice.problems(mounted, DEVICE))
    root = facts("root")
    found = nameddevice.problems(root, root.device)
    assert any("root file system" in p for p in found)


def test_what_a_cell_left_is_the_frameworks_own():
    f = facts("after-baseline")
    assert nameddevice.problems(f, None) == []
    # A file system labelled as the framework's is its own; the same with another label is not.
    own = replace(facts("ext4"), label=nameddevice.OWN_LABEL)
    assert nameddevice.problems(own, None) == []
    assert nameddevice.problems(replace(own, label="home"), None) != []


def test_what_a_system_needs_of_the_device():
    f = facts("blank")
    slimio = bare_plan("blank").cell("bare-slimio-redis-benchmark-periodical-r1").slimio
    assert nameddevice.problems(f, None, "slimio", "f2fs", slimio) == []
    no_fdp = replace(f, fdp_placement_ids=(), fdp_error="FDP is not enabled")
    assert any("places its writes by FDP" in p and "slimio-nofdp" in p
               for p in nameddevice.problems(no_fdp, None, "slimio", "f2fs", slimio))
    nofdp = replace(slimio, placement_ids=replace(slimio.placement_ids, wal=-1,
                                                   wal_snapshot=-1, on_demand=-1))
    assert nameddevice.problems(no_fdp, None, "slimio-nofdp", "f2fs", nofdp) == []
    assert any("512-byte LBAs" in p for p in nameddevice.problems(
        replace(f, logical_block_size_bytes=512), None, "slimio", "f2fs", slimio))
    assert any("lower slimio.wal_size_mb" in p for p in nameddevice.problems(
        replace(f, size_bytes=64 << 20), None, "slimio", "f2fs", slimio))
    assert any("filesystem xfs cannot be made" in p
               for p in nameddevice.problems(f, None, "baseline", "xfs"))


def test_a_cell_refuses_another_device_than_the_one_planned():
    f = facts("blank")
    planned = bare_plan("blank").cell("bare-baseline-redis-benchmark-periodical-r1").bare.device
    assert nameddevice.problems(f, None, planned=planned) == []
    moved = replace(f, wwid="eui.0000000000000001")
    assert any("not the device the cell was planned for" in p
               for p in nameddevice.problems(moved, None, planned=planned))
