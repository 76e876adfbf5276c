"""SlimIO's C unit tests (on-device format, metadata, WAL framing, failpoints), built with
-Wall -Werror and run plain and under AddressSanitizer + UBSan."""

import re
import subprocess

import pytest

from slimio_repro import paths


@pytest.mark.parametrize("target", ["test", "test-asan"])
def test_slimio_c_unit_tests(target, tmp_path):
    proc = subprocess.run(
        ["make", "-C", str(paths.REPO_ROOT / "redis-slimio"), target,
         f"BUILD_DIR={tmp_path}"], capture_output=True, text=True)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    m = re.search(r"^(\d+) passed, (\d+) failed$", proc.stdout, re.M)
    assert m and int(m.group(1)) >= 18 and m.group(2) == "0", out[-4000:]
    assert "AddressSanitizer" not in out and "runtime error" not in out


@pytest.fixture(scope="module")
def admin(tmp_path_factory):
    out = tmp_path_factory.mktemp("slimio-admin")
    proc = subprocess.run(["make", "-C", str(paths.REPO_ROOT / "redis-slimio"), "admin",
                           f"BUILD_DIR={out}"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out / "slimio-admin"


def run_admin(admin, *args):
    return subprocess.run([str(admin), *args], capture_output=True, text=True)


def test_admin_formats_a_file_and_inspects_it(admin, tmp_path):
    import json
    dev = tmp_path / "dev.img"
    with open(dev, "wb") as fh:
        fh.truncate(64 << 20)
    proc = run_admin(admin, "format", "--device", str(dev), "--wal-mib", "8", "--slot-mib", "16")
    assert proc.returncode == 0, proc.stderr
    info = json.loads(run_admin(admin, "inspect", "--device", str(dev), "--json").stdout)
    assert info["lba_size"] == 4096 and info["meta_seq"] == 1
    assert [s["role"] for s in info["slots"]] == ["wal-snapshot", "reserve", "on-demand"]
    assert info["wal"]["lbas"] * 4096 >= 8 << 20 and info["wal_generations"] == []
    again = run_admin(admin, "format", "--device", str(dev), "--wal-mib", "8", "--slot-mib", "16")
    assert again.returncode == 1 and "already holds a SlimIO layout" in again.stderr
    assert json.loads(run_admin(admin, "inspect", "--device", str(dev), "--json").stdout
                      )["format_id"] == info["format_id"]


def test_admin_refuses_a_file_system_and_leaves_it_intact(admin, tmp_path):
    dev = tmp_path / "ext4.img"
    with open(dev, "wb") as fh:
        fh.truncate(64 << 20)
    subprocess.run(["mkfs.ext4", "-q", "-F", str(dev)], check=True)
    before = dev.read_bytes()[:1 << 20]
    proc = run_admin(admin, "format", "--device", str(dev), "--wal-mib", "8", "--slot-mib", "8")
    assert proc.returncode == 1 and "carries an ext2/3/4 file system" in proc.stderr
    assert dev.read_bytes()[:1 << 20] == before
    forced = run_admin(admin, "format", "--device", str(dev), "--wal-mib", "8",
                       "--slot-mib", "8", "--force")
    assert forced.returncode == 0, forced.stderr


def test_admin_refuses_a_device_too_small_naming_sizes(admin, tmp_path):
    dev = tmp_path / "small.img"
    with open(dev, "wb") as fh:
        fh.truncate(16 << 20)
    proc = run_admin(admin, "format", "--device", str(dev), "--wal-mib", "8", "--slot-mib", "8")
    assert proc.returncode == 1
    assert "has 4096 LBAs of 4096 bytes (16 MiB) but the layout needs" in proc.stderr


def test_admin_needs_an_explicit_existing_device(admin, tmp_path):
    assert run_admin(admin, "inspect").returncode == 2
    proc = run_admin(admin, "inspect", "--device", str(tmp_path / "missing"))
    assert proc.returncode == 1 and "cannot open SlimIO device" in proc.stderr
    blank = tmp_path / "blank.img"
    with open(blank, "wb") as fh:
        fh.truncate(8 << 20)
    proc = run_admin(admin, "inspect", "--device", str(blank))
    assert proc.returncode == 1 and "no SlimIO metadata" in proc.stderr
