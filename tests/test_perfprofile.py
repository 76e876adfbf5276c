"""The snapshot process's CPU attribution (Table 2's rule) on profiles captured from real
BGSAVE children (tests/fixtures/perf/capture-bare.sh: stock Redis writing its RDB to ext4,
``perf record -g -e cpu-clock``, the child's samples by ``perf script``) and on small
profiles whose answer is known by construction."""

from pathlib import Path

import pytest

from slimio_repro.parse import perfprofile as pp

FIXTURES = Path(__file__).parent / "fixtures" / "perf"


def block(pid: int, period: int, *frames: str) -> str:
    """One sample as `perf script` prints it (leaf first)."""
    lines = [f"redis-server {pid}/{pid} 100.000001:     {period} cpu-clock: "]
    lines += [f"\tffffffff81000000 {f}+0x1f ([kernel.kallsyms])" for f in frames]
    return "\n".join(lines) + "\n\n"


WRITE = ("entry_SYSCALL_64_after_hwframe", "do_syscall_64", "ksys_write", "vfs_write")


def test_the_rule_on_a_profile_built_by_hand():
    text = (
        # the file system's write path: its write_iter's callees, the copy among them
        block(7, 1000, "copy_folio_from_iter_atomic", "generic_perform_write",
              "f2fs_buffered_write_iter", "f2fs_file_write_iter", *reversed(WRITE))
        + block(7, 1000, "f2fs_write_begin", "generic_perform_write",
                "f2fs_file_write_iter", *reversed(WRITE))
        # the kernel I/O path outside the file system (the block layer under fsync counts
        # to the file system only when one of its functions is on the stack)
        + block(7, 1000, "blk_mq_submit_bio", "submit_bio", "__x64_sys_fdatasync",
                "do_syscall_64")
        # in-memory work: a copy-on-write fault, user code
        + block(7, 3000, "do_wp_page", "handle_mm_fault", "exc_page_fault")
        + block(7, 4000, "lzf_compress")
        # another process: left out when the pid is given
        + block(8, 9000, "f2fs_write_begin", *reversed(WRITE)))
    samples = pp.parse(text)
    assert [s.pid for s in samples] == [7, 7, 7, 7, 7, 8]
    assert samples[0].frames[0] == "copy_folio_from_iter_atomic"   # offsets stripped
    a = pp.attribute(samples, "f2fs", pid=7)
    assert a.samples == 5 and a.total_s == pytest.approx(10e-6)
    assert a.io_path_s == pytest.approx(3e-6) and a.fs_write_s == pytest.approx(2e-6)
    assert a.fs_copy_s == pytest.approx(1e-6)
    assert (a.fs_write_share, a.fs_control_share, a.io_path_share) == \
        pytest.approx((0.2, 0.1, 0.3))
    assert a.in_memory_s == pytest.approx(7e-6)
    # The same stacks under another file system's rule: none of it is ext4's.
    assert pp.attribute(samples, "ext4", pid=7).fs_write_s == 0
    assert pp.attribute(samples, "f2fs").samples == 6


@pytest.mark.parametrize("fixture, fs", [
    ("bgsave-ext4-snapshot-only", "ext4"),      # this host, a loop device
    ("bgsave-ext4-snapshot-wal", "ext4"),
    ("vm-bgsave-ext4-snapshot-only", "ext4"),   # the VM, the emulated namespace (TCG)
    ("vm-bgsave-f2fs-snapshot-only", "f2fs"),
    ("vm-bgsave-f2fs-snapshot-wal", "f2fs"),
])
def test_a_real_bgsave_child(fixture, fs):
    text = (FIXTURES / f"{fixture}.perf.txt").read_text()
    samples = pp.parse(text)
    headers = [line for line in text.splitlines() if line.endswith("cpu-clock: ")]
    assert len(samples) == len(headers) > 200
    assert len({s.pid for s in samples}) == 1          # the child only
    a = pp.attribute(samples, fs)
    assert a.total_s == pytest.approx(sum(s.period for s in samples) * 1e-9)
    # Counted again without the module: a sample block that names a write or sync system
    # call and a function of the file system.
    names = {"ext4": (" ext4_", " jbd2_"), "f2fs": (" f2fs_",)}[fs]
    blocks = [b for b in text.split("\n\n") if b.strip()]
    by_hand = sum(1 for b in blocks
                  if any(f" {c}" in b for c in ("ksys_write ", "__x64_sys_sync_file_range ",
                                                "__x64_sys_fsync ", "__x64_sys_fdatasync "))
                  and any(n in b for n in names))
    assert a.fs_write_s == pytest.approx(by_hand * samples[0].period * 1e-9)
    # Stock Redis writes its RDB with write() (and sync_file_range every 32 MB): a real
    # share of the child's CPU is the file system's write path, and nearly all its kernel
    # I/O path is.
    assert 0.1 < a.fs_write_share <= a.io_path_share < 0.5
    assert a.fs_write_s > 0.9 * a.io_path_s
    assert a.fs_copy_s < a.fs_write_s
    other = {"ext4": "f2fs", "f2fs": "ext4"}[fs]
    assert pp.attribute(samples, other).fs_write_s < 0.05 * a.fs_write_s


def test_bad_input_names_the_line_and_the_choices():
    with pytest.raises(pp.PerfProfileError, match="line 4 is neither"):
        pp.parse(block(7, 10, "f") + "garbage here\n")
    with pytest.raises(pp.PerfProfileError, match="no samples"):
        pp.parse("\n\n")
    samples = pp.parse(block(7, 10, "f2fs_write_begin", *reversed(WRITE)))
    with pytest.raises(pp.PerfProfileError, match="'xfs'.*ext4, f2fs"):
        pp.attribute(samples, "xfs")
    with pytest.raises(pp.PerfProfileError, match=r"no samples of pid 9 .*\[7\]"):
        pp.attribute(samples, "f2fs", pid=9)


def test_slimios_child_writes_through_passthru_with_no_file_system():
    """SlimIO's snapshot child in the same VM (tests/fixtures/perf/capture-vm.py): its
    buffers go to the namespace by NVMe passthru, so no sample is in a file system, and its
    ring's submissions are too cheap to be sampled; its completion thread is sampled too."""
    samples = pp.parse((FIXTURES / "vm-bgsave-slimio-snapshot-only.perf.txt").read_text())
    assert len(samples) > 100 and len({s.tid for s in samples}) == 2
    for fs in ("f2fs", "ext4"):
        a = pp.attribute(samples, fs)
        assert a.fs_write_s == 0 and a.io_path_share < 0.05
