"""Free space, checked at planning: the plan's estimate of what each cell writes
(plan/space.py), `snakemake -n` refusing a run its file systems cannot hold (one message per
directory, naming it, its file system, the bytes needed and free), and each cell's own check
before it writes anything (agent/diskspace.py)."""

import contextlib
import dataclasses
import json
import os
import re
import subprocess
import tempfile
from pathlib import Path

import pytest

from conftest import FIXTURES, plan_of, require_root, snakemake
from slimio_repro import paths
from slimio_repro import plan as planmod
from slimio_repro.agent import cell_runner, diskspace
from slimio_repro.plan import CellPlan, space

GIB = 1 << 30
RAW_SIZES = FIXTURES / "raw_sizes.json"
# The model's estimate of a raw directory against the measured one (du -sB1): never less,
# and at most this many times more.
RAW_FACTOR = 3
# Its estimate of what a vm cell writes to its namespace against what the device received.
STORAGE_FACTOR = 3


@contextlib.contextmanager
def _tmpfs(size: str):
    """A real file system (tmpfs) of ``size`` that libvirt's QEMU could reach, unmounted
    after (a tmpfs takes memory only for what it holds)."""
    require_root()
    mount = Path(tempfile.mkdtemp(prefix="slimio-space-", dir="/var/tmp"))
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount)],
                   check=True)
    mount.chmod(0o755)
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=True)
        mount.rmdir()


@pytest.fixture
def small_fs():
    """64 MiB: too small for a smoke run."""
    with _tmpfs("64m") as mount:
        yield mount


@pytest.fixture
def large_fs():
    """Room for any smoke run."""
    with _tmpfs("64g") as mount:
        yield mount


def overrides(fs: Path, build: Path) -> dict:
    return {"results_dir": str(fs / "results"), "build_dir": str(build),
            "testbeds": {"vm": {"work_dir": str(fs / "vm")}}}


def dry_run(fs: Path, build: Path):
    return snakemake("-n", "--nolock", "--cores", "2", "reproduce",
                     "--configfile", "config/profiles/smoke.yaml",
                     "--config", f"results_dir={fs / 'results'}", f"build_dir={build}",
                     f"testbeds={{vm: {{work_dir: {fs / 'vm'}}}}}")


MESSAGE = re.compile(
    r"^\s*(?P<key>\S+) (?P<dir>\S+) \(not there yet: checked at (?P<at>\S+)\): the run writes "
    r"(?P<own>[\d.]+) GiB there .*?, (?P<total>[\d.]+) GiB in all on its file system "
    r"\((?P<fs>\S+) mounted at (?P<mount>\S+)\), which has (?P<free>[\d.]+) GiB free: "
    r"free space there, point (?P=key) at a larger file system .*or run a smaller profile$",
    re.M)


def test_smoke_dry_run_on_a_small_file_system_is_refused_naming_need_and_free(small_fs,
                                                                               tmp_path):
    proc = dry_run(small_fs, tmp_path / "b")
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    found = {m["key"]: m for m in MESSAGE.finditer(out)}
    assert set(found) == {"results_dir", "testbeds.vm.work_dir"}, out
    # What the plan says the run needs there (no box built: the measured box sizes).
    needs = {n.key: n for n in space.run_needs(
        plan_of(overrides(small_fs, tmp_path / "b"),
                [paths.CONFIG_DIR / "profiles" / "smoke.yaml"]), pool=None)}
    st = os.statvfs(small_fs)
    free = st.f_bavail * st.f_frsize
    for key, m in found.items():
        assert m["dir"] == str(needs[key].directory) and m["at"] == str(small_fs)
        assert (m["fs"], m["mount"]) == ("tmpfs", str(small_fs))
        # Both directories share the file system: each message counts both.
        assert float(m["own"]) == pytest.approx(needs[key].bytes / GIB, abs=0.005)
        assert float(m["total"]) == pytest.approx(
            sum(n.bytes for n in needs.values()) / GIB, abs=0.005)
        assert float(m["free"]) == pytest.approx(free / GIB, abs=0.005)
    # The largest cell's NVMe backing file is most of it, and more than the file system.
    assert "its NVMe backing file" in found["testbeds.vm.work_dir"].group(0)
    assert needs["testbeds.vm.work_dir"].bytes > free
    assert not (small_fs / "results").exists() and not (small_fs / "vm").exists()


def test_smoke_dry_run_with_room_is_planned(large_fs, tmp_path):
    proc = dry_run(large_fs, tmp_path / "b")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert re.search(r"^run_cell\s+\d+$", proc.stdout, re.M)


def test_a_build_alone_is_not_checked(small_fs, tmp_path):
    proc = snakemake("-n", "--nolock", "--cores", "2", "build_redis",
                     "--config", f"results_dir={small_fs / 'results'}",
                     f"build_dir={tmp_path / 'b'}", f"testbeds={{vm: {{work_dir: {small_fs}}}}}")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def fixture_cells():
    data = json.loads(RAW_SIZES.read_text())
    for cell_id, measured in sorted(data["cells"].items()):
        set_plan = CellPlan.from_dict(data["plans"][cell_id.rsplit("-r", 1)[0]])
        rep = int(cell_id.rsplit("-r", 1)[1])
        yield (dataclasses.replace(set_plan, cell=dataclasses.replace(set_plan.cell, rep=rep)),
               measured)


def test_the_raw_directory_model_is_within_a_factor_of_real_cells():
    """Every cell of the smoke run captured in tests/fixtures/raw_sizes.json (by
    tests/fixtures/raw_sizes.py): the model's raw directory is at least what du measured,
    and at most RAW_FACTOR times it; its trace's text at least what the guest wrote."""
    cells = list(fixture_cells())
    assert len(cells) >= 20
    ratios = {}
    for plan, measured in cells:
        assert plan.id == plan.cell.id
        predicted = space.raw_bytes(plan)
        ratios[plan.id] = predicted / measured["du_bytes"]
        assert space.trace_text_bytes(plan) >= measured["trace_text_bytes"], plan.id
    low = {k: round(r, 2) for k, r in ratios.items() if not 1 <= r <= RAW_FACTOR}
    assert not low, low


def test_the_namespace_model_covers_what_real_cells_wrote():
    """A vm cell's nvme.img holds what its namespace received (mkfs, the workload: the
    device's write_bytes_at_shutdown) and the roofline after it: the model's estimate is at
    least that and at most STORAGE_FACTOR times it."""
    config = planmod.load([paths.CONFIG_DIR / "config.yaml"])
    bad = {}
    for plan, measured in fixture_cells():
        config = {**config, "workloads": {**config["workloads"], plan.cell.workload: {
            **config["workloads"][plan.cell.workload],
            **{k: v for k, v in dataclasses.asdict(plan.workload).items()
               if k in ("requests", "keyspace", "records", "operations")}}}}
        roofline = plan.vm.roofline.size_mb << 20 if plan.vm.roofline.enabled else 0
        wrote = measured["device_write_bytes"] + roofline
        ratio = space.storage_bytes(config, plan) / wrote
        if not 1 <= ratio <= STORAGE_FACTOR:
            bad[plan.id] = round(ratio, 2)
    assert not bad, bad


def test_every_cell_of_a_plan_carries_its_estimate_and_it_does_not_make_cells_stale():
    plan = plan_of()
    cell = plan.cell("vm-baseline-ycsb-a-always-r1")
    d = cell.disk
    assert 0 < d.raw_bytes < d.guest_bytes and 0 < d.storage_bytes <= \
        cell.vm.device.capacity_bytes
    assert "disk" not in cell.stale_fields()
    assert CellPlan.from_json(cell.to_json()) == cell
    # A plan written before the estimate existed still loads, and is not checked.
    old = cell.to_dict()
    del old["disk"]
    assert CellPlan.from_dict(old).disk is None
    assert diskspace.cell_needs(CellPlan.from_dict(old), Path("/nonexistent/raw/x")) == []
    # The bound writes no WAL and no snapshot: its namespace holds F2FS's metadata only.
    bound = plan.cell("vm-nopersist-redis-benchmark-none-r1")
    assert bound.disk.storage_bytes == space.fs_metadata_bytes(
        "f2fs", bound.vm.device.capacity_bytes)
    # A FEMU profile keeps its device in host RAM: no backing file.
    femu = plan_of({"testbeds": {"vm": {"device_profile": "femu-fdp-gc"}}},
                   ).cell("vm-baseline-redis-benchmark-periodical-r1")
    assert femu.disk.storage_bytes == 0
    # A bare cell's image, at most its size.
    bare = plan_of({"matrix": {"testbeds": ["bare"], "systems": ["baseline", "slimio"]}})
    for c in bare.cells:
        assert 0 < c.disk.storage_bytes <= c.sizing.image_size_bytes and c.disk.guest_bytes == 0


def test_finished_cells_need_nothing_and_builds_run_no_cell(tmp_path):
    plan = plan_of({"results_dir": str(tmp_path / "results")})
    needs = space.run_needs(plan, pool=None)
    assert [n.key for n in needs] == ["results_dir", "testbeds.vm.work_dir"]
    results = needs[0].bytes
    first = plan.cells[0]
    (tmp_path / "results" / "raw" / first.id).mkdir(parents=True)
    assert space.run_needs(plan, pool=None)[0].bytes == \
        results - first.disk.raw_bytes - space.RECORDS_BYTES_PER_CELL
    for c in plan.cells:
        (tmp_path / "results" / "raw" / c.id).mkdir(exist_ok=True)
    assert space.run_needs(plan, pool=None) == []
    assert space.cells_of_run(plan, ["build_redis", "build_guest_box"]) == []
    assert space.cells_of_run(plan, [str(plan.build_dir / paths.BOX_PATTERN)]) == []
    assert [c.id for c in space.cells_of_run(plan, [f"results/raw/{first.id}"])] == [first.id]
    assert len(space.cells_of_run(plan, [])) == len(plan.cells)
    motivation = space.cells_of_run(plan, ["motivation"])
    assert {c.id for c in motivation} == {c.id for c in (*plan.table1_cells,
                                                         *plan.motivation_cells)}


def test_directories_on_one_file_system_add_their_needs(tmp_path):
    st = os.statvfs(tmp_path)
    free = st.f_bavail * st.f_frsize
    half = diskspace.Need("results_dir", tmp_path / "a" / "b", free // 2 + 1, "half")
    other = diskspace.Need("testbeds.vm.work_dir", tmp_path / "vm", free // 2 + 1, "other")
    assert diskspace.shortfalls([half]) == []
    found = diskspace.shortfalls([half, other])
    assert len(found) == 2
    assert found[0].startswith(f"results_dir {tmp_path / 'a' / 'b'} (not there yet: checked "
                               f"at {tmp_path}): the run writes")
    assert f"under testbeds.vm.work_dir {tmp_path / 'vm'}" in found[0]


def test_a_bare_cell_checks_its_disk_before_it_writes_anything(small_fs, tmp_path):
    plan = plan_of({"matrix": {"testbeds": ["bare"], "systems": ["baseline"]}}).cell(
        "bare-baseline-redis-benchmark-periodical-r1")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "redis-server").touch()
    plan = dataclasses.replace(plan, redis_bin_dir=str(bin_dir))
    out_dir = small_fs / "raw" / plan.id
    with pytest.raises(diskspace.SpaceError) as err:
        cell_runner.run(plan, out_dir)
    assert str(err.value).startswith(f"results_dir {small_fs}: cell {plan.id} writes ")
    assert f"(cell {plan.id}'s raw directory and its file-system image)" in str(err.value)
    assert list(small_fs.iterdir()) == []


def test_a_vm_cell_checks_its_work_dir_before_it_writes_anything(small_fs, tmp_path,
                                                                  monkeypatch):
    plan = plan_of().cell("vm-slimio-redis-benchmark-always-r1")
    monkeypatch.setattr(space, "pool_dir", lambda name: None)
    with pytest.raises(diskspace.SpaceError) as err:
        planmod.check_vm_cell_space(plan, tmp_path / "raw" / plan.id, small_fs / "vm",
                                    tmp_path / "no-box" / "slimio-guest.box")
    (line,) = str(err.value).splitlines()
    assert line.startswith(f"testbeds.vm.work_dir {small_fs / 'vm'} (not there yet: "
                           f"checked at {small_fs}): cell {plan.id} writes")
    assert "its NVMe backing file" in line and "tmpfs mounted at" in line
    assert list(small_fs.iterdir()) == []


def test_the_pool_path_and_the_box_volume(tmp_path):
    xml = ("<pool type='dir'><name>default</name><target><path>/var/lib/libvirt/images"
           "</path></target></pool>")
    assert space.pool_path_of(xml) == Path("/var/lib/libvirt/images")
    assert space.pool_path_of("not xml") is None
    assert space.pool_path_of("<pool type='rbd'><name>x</name></pool>") is None
    box = tmp_path / "box" / "slimio-guest.box"
    assert space.box_bytes(box, None) == (space.BOOT_FILES_BYTES, space.BOX_VOLUME_BYTES)
    box.parent.mkdir()
    (box.parent / "k").write_bytes(b"k" * 100)
    (box.parent / "i").write_bytes(b"i" * 50)
    box.with_suffix(".json").write_text(json.dumps(
        {"kernel_file": "k", "initrd_file": "i", "inputs_sha256": "ab" * 32,
         "box_bytes": 1000}))
    pool = tmp_path / "pool"
    pool.mkdir()
    assert space.box_bytes(box, pool) == (150, 1000)
    (pool / f"slimio-repro-{'ab' * 6}_vagrant_box_image_0_17_box.img").touch()
    assert space.box_bytes(box, pool) == (150, 0)
