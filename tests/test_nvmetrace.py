"""nvme_setup_cmd trace parser, on a trace captured in a guest (kernel 6.12, QEMU NVMe with
FDP, f2fs + dd + one ``nvme io-passthru`` write with placement id 2; 4096-byte LBAs).

Expected numbers were counted by hand from the fixture: 16 writes (6 dd writes of len=127,
i.e. 128 blocks, plus 10 small f2fs/kworker/passthru writes of 16 blocks in all = 784 blocks),
6 dd reads of 128 blocks, 1 flush, 1 FUA write (ctrl=0x4000)."""

import gzip
import json
import re
import shutil
import subprocess
import sys

import pytest

from conftest import CELL_FIXTURES, FIXTURES
from slimio_repro.agent import layout
from slimio_repro.parse import nvmetrace
from slimio_repro.parse.nvmetrace import NvmeCommand, TraceError

TRACE = FIXTURES / "vm" / "nvme-trace-f2fs-passthru.txt"
LBA = 4096
DD_WRITE = ("              dd-766     [000] .....   149.081148: nvme_setup_cmd: nvme0: "
            "disk=nvme0c0n1, qid=1, cmdid=40980, nsid=1, flags=0x0, meta=0x0, "
            "cmd=(nvme_cmd_write slba=74754, len=127, ctrl=0x0, dsmgmt=0, reftag=0)")


def test_dd_write_line_is_decoded():
    cmd = nvmetrace.parse_line(DD_WRITE)
    assert cmd == NvmeCommand(
        timestamp_s=149.081148, task="dd", cpu=0, disk="nvme0c0n1", qid=1, cid=40980, nsid=1,
        opcode="nvme_cmd_write", slba=74754, blocks=128, dtype=0, dspec=0, fua=False, pid=766,
        controller="nvme0", ctrl=0)
    assert cmd.placement_id is None


# Dataset Management as drivers/nvme/host/trace.c prints it (nvme_trace_dsm): the range
# count, 0-based, and the attributes (4 = deallocate), not the ranges.
DSM = ("     f2fs_discard-259:0-251 [001] .....    53.164403: nvme_setup_cmd: nvme0: "
       "disk=nvme0n1, qid=2, cmdid=45120, nsid=1, flags=0x0, meta=0x0, "
       "cmd=(nvme_cmd_dsm nr=2, attributes=4)")


def test_dsm_line_gives_its_range_count_and_no_range():
    cmd = nvmetrace.parse_line(DSM)
    assert (cmd.opcode, cmd.dsm_ranges, cmd.slba, cmd.blocks) == ("nvme_cmd_dsm", 3, None, None)
    with pytest.raises(TraceError, match="nr=, attributes="):
        nvmetrace.parse_line(DSM.replace("nr=2, attributes=4", "ranges=?"))


def test_non_event_lines_are_skipped():
    assert nvmetrace.parse_line("IO Command Write is Success and result: 0x00000000") is None
    assert nvmetrace.parse_line("# entries-in-buffer/entries-written: 23/23   #P:2") is None
    assert nvmetrace.parse_line("") is None


def test_fixture_commands():
    cmds = list(nvmetrace.iter_commands(TRACE))
    assert len(cmds) == 23
    writes = [c for c in cmds if c.opcode == "nvme_cmd_write"]
    assert len(writes) == 16

    passthru = [c for c in writes if c.task == "nvme"]
    assert len(passthru) == 1
    p = passthru[0]
    assert (p.slba, p.blocks, p.dtype, p.dspec, p.placement_id) == (1000, 1, 2, 2, 2)
    assert p.pid == 770 and p.qid == 1 and not p.fua

    dd_writes = [c for c in writes if c.task == "dd"]
    assert len(dd_writes) == 6
    assert all(c.placement_id is None and c.blocks == 128 for c in dd_writes)
    assert [c.slba for c in dd_writes] == [74754 + 128 * i for i in range(6)]

    # Task names with dashes and colons keep everything before the last "-PID".
    assert {c.task for c in cmds} == {"dd", "kworker/0:1H", "kworker/u9:3", "f2fs_ckpt-259:1",
                                      "kworker/1:1H", "nvme"}
    ckpt = [c for c in cmds if c.task == "f2fs_ckpt-259:1"]
    assert {c.pid for c in ckpt} == {706} and {c.cpu for c in ckpt} == {1}

    fua = [c for c in cmds if c.fua]
    assert [(c.opcode, c.slba, c.blocks) for c in fua] == [("nvme_cmd_write", 1026, 1)]

    flush = [c for c in cmds if c.opcode == "nvme_cmd_flush"]
    assert len(flush) == 1
    assert (flush[0].slba, flush[0].blocks, flush[0].dtype, flush[0].fua) == (
        None, None, None, False)

    reads = [c for c in cmds if c.opcode == "nvme_cmd_read"]
    assert len(reads) == 6 and all(c.blocks == 128 and c.qid == 2 for c in reads)


def test_read_with_limited_retry_and_dsm_hints_has_no_placement():
    line = ("  fio-1 [001] ..... 5.000001: nvme_setup_cmd: nvme0: disk=nvme0c0n1, qid=2, "
            "cmdid=1, nsid=1, flags=0x0, meta=0x0, cmd=(nvme_cmd_read slba=8, len=7, "
            "ctrl=0x8000, dsmgmt=7, reftag=0)")
    cmd = nvmetrace.parse_line(line)
    assert (cmd.blocks, cmd.dtype, cmd.dspec, cmd.fua, cmd.placement_id) == (8, 0, 0, False, None)


def test_fua_placement_write_and_task_with_spaces_and_parentheses():
    line = ("   (udev-worker) x-681 [001] d..1. 12.5: nvme_setup_cmd: nvme1: disk=nvme1n1, "
            "qid=3, cmdid=7, nsid=1, flags=0x0, meta=0x0, cmd=(nvme_cmd_write slba=0, len=0, "
            "ctrl=0x4020, dsmgmt=458752, reftag=0)")
    cmd = nvmetrace.parse_line(line)
    assert (cmd.task, cmd.pid, cmd.timestamp_s) == ("(udev-worker) x", 681, 12.5)
    assert (cmd.fua, cmd.dtype, cmd.dspec, cmd.placement_id) == (True, 2, 7, 7)


def test_admin_command_has_no_disk():
    line = ("   nvme-800 [000] ..... 1.0: nvme_setup_cmd: nvme0: qid=0, cmdid=12, nsid=1, "
            "flags=0x0, meta=0x0, cmd=(nvme_admin_get_log_page cdw10=20 00 ff 00 00 00 00 00 "
            "00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00)")
    cmd = nvmetrace.parse_line(line)
    assert (cmd.qid, cmd.disk, cmd.opcode, cmd.slba) == (0, "", "nvme_admin_get_log_page", None)


def test_summary_of_fixture():
    s = nvmetrace.summarize(TRACE, LBA)
    json.dumps(s)  # JSON-serialisable
    assert s["commands"] == s["trace_events"] == 23
    assert s["commands_per_opcode"] == {"nvme_cmd_flush": 1, "nvme_cmd_read": 6,
                                        "nvme_cmd_write": 16}
    assert s["write_bytes"] == 784 * LBA
    assert s["read_bytes"] == 6 * 128 * LBA
    assert s["bytes_per_opcode"] == {"nvme_cmd_read": 768 * LBA, "nvme_cmd_write": 784 * LBA}
    assert s["writes_per_placement_id"] == {
        "none": {"write_commands": 15, "write_bytes": 783 * LBA},
        "2": {"write_commands": 1, "write_bytes": 1 * LBA}}
    assert s["fua_write_commands"] == 1
    assert s["flush_commands"] == 1
    assert s["first_timestamp_s"] == 149.081148
    assert s["last_timestamp_s"] == 149.374557
    assert s["duration_s"] == pytest.approx(0.293409)
    assert (s["write_lba_min"], s["write_lba_end_exclusive"]) == (1000, 75394 + 128)
    assert (s["trace_entries_in_buffer"], s["trace_entries_written"],
            s["trace_entries_lost"]) == (23, 23, 0)
    assert s["disks_seen"] == ["nvme0c0n1"]


def test_gzip_trace_gives_the_same_summary(tmp_path):
    gz = tmp_path / "trace.txt.gz"
    with open(TRACE, "rb") as src, gzip.open(gz, "wb") as dst:
        shutil.copyfileobj(src, dst)
    plain, packed = nvmetrace.summarize(TRACE, LBA), nvmetrace.summarize(gz, LBA)
    assert packed.pop("trace_path") == str(gz)
    plain.pop("trace_path")
    assert packed == plain


def test_disk_filter_accepts_path_and_head_names():
    assert nvmetrace.summarize(TRACE, LBA, disk="nvme0c0n1")["commands"] == 23
    assert nvmetrace.summarize(TRACE, LBA, disk="nvme0n1")["commands"] == 23
    other = nvmetrace.summarize(TRACE, LBA, disk="nvme1n1")
    assert other["commands"] == other["write_bytes"] == 0
    assert other["trace_events"] == 23 and other["disks_seen"] == ["nvme0c0n1"]
    assert other["duration_s"] is None and other["writes_per_placement_id"] == {}


def test_header_lost_entries_and_trace_pipe_lost_events(tmp_path):
    text = TRACE.read_text().replace("entries-written: 23/23", "entries-written: 23/30")
    trace = tmp_path / "t.txt"
    trace.write_text(text + "CPU:1 [LOST 5 EVENTS]\n")
    s = nvmetrace.summarize(trace, LBA)
    assert (s["trace_entries_written"], s["trace_entries_lost"]) == (30, 7)
    assert s["trace_pipe_lost_events"] == 5


def test_trace_pipe_capture_has_no_header(tmp_path):
    trace = tmp_path / "pipe.txt"
    trace.write_text(DD_WRITE + "\n")
    s = nvmetrace.summarize(trace, LBA)
    assert s["write_bytes"] == 128 * LBA
    assert s["trace_entries_in_buffer"] is None and s["trace_entries_lost"] is None


def test_malformed_event_line_names_its_line_number(tmp_path):
    lines = TRACE.read_text().splitlines()
    assert lines[19].lstrip().startswith("kworker/0:1H-69")
    lines[19] = lines[19].replace(", len=2,", ", len=two,")
    bad = tmp_path / "bad.txt"
    bad.write_text("\n".join(lines) + "\n")
    with pytest.raises(TraceError, match=r"bad\.txt:20: .*len=two"):
        list(nvmetrace.iter_commands(bad))
    with pytest.raises(TraceError, match=r":20: "):
        nvmetrace.summarize(bad, LBA)


def test_truncated_event_line_is_refused():
    with pytest.raises(TraceError, match="line 7: "):
        nvmetrace.parse_line(DD_WRITE[:120], line_number=7)


def test_bad_lba_size_is_refused():
    with pytest.raises(ValueError, match="lba_size_bytes=0"):
        nvmetrace.summarize(TRACE, 0)


def test_cli_prints_json():
    proc = subprocess.run([sys.executable, "-m", "slimio_repro.parse.nvmetrace", "summarize",
                           str(TRACE), "--lba-size", "4096"],
                          capture_output=True, text=True, check=True)
    assert json.loads(proc.stdout) == nvmetrace.summarize(TRACE, LBA)


# A whole SlimIO cell in the VM (nvme backend, FDP, placement wal=1, wal_snapshot=3,
# on_demand=2), captured by tests/fixtures/capture.py: its gzip trace and its layout. The
# expectations are counted here from the trace's lines with a regex of their own.
SLIMIO_FDP = CELL_FIXTURES / "vm-slimio-redis-benchmark-periodical-r1"
SLIMIO_TRACE = SLIMIO_FDP / layout.RAW_TRACE
PAPER_IDS = {"wal": 1, "wal_snapshot": 3, "on_demand": 2}
WRITE = re.compile(r"disk=nvme0n1, .*cmd=\(nvme_cmd_write slba=(\d+), len=(\d+), "
                   r"ctrl=(0x[0-9a-f]+), dsmgmt=(\d+),")


def _layout() -> dict:
    return json.loads((SLIMIO_FDP / layout.RAW_SLIMIO_INSPECT_AFTER).read_text())


def _writes() -> list[tuple[int, int, str]]:
    """(first LBA, blocks, placement key) of every write: DTYPE 2 (data placement) is bits
    4-7 of the trace's ctrl (CDW12 >> 16), DSPEC the high half of dsmgmt (CDW13)."""
    out = []
    with gzip.open(SLIMIO_TRACE, "rt") as fh:
        for line in fh:
            m = WRITE.search(line)
            if m:
                slba, n, ctrl, dsm = int(m[1]), int(m[2]) + 1, int(m[3], 16), int(m[4])
                out.append((slba, n, str(dsm >> 16) if (ctrl >> 4) & 0xF == 2 else "none"))
    return out


def _region(lba: int) -> str:
    wal, slots = _layout()["wal"], _layout()["slots"]
    if lba < wal["start_lba"]:
        return "metadata"
    if lba < wal["start_lba"] + wal["lbas"]:
        return "wal"
    if min(s["start_lba"] for s in slots) <= lba < max(s["start_lba"] + s["lbas"] for s in slots):
        return "snapshots"
    return "outside"


def test_slimio_regions_follow_the_layout():
    wal, slots = _layout()["wal"], _layout()["slots"]
    regions = nvmetrace.slimio_regions(_layout(), PAPER_IDS)
    assert [(r["region"], r["start_lba"], r["end_lba"], r["allowed"]) for r in regions] == [
        ("metadata", 0, wal["start_lba"], ["none"]),
        ("wal", wal["start_lba"], slots[0]["start_lba"], ["1"]),
        ("snapshots", slots[0]["start_lba"], slots[2]["start_lba"] + slots[2]["lbas"],
         ["2", "3"])]
    assert wal["start_lba"] + wal["lbas"] == slots[0]["start_lba"]
    none = nvmetrace.slimio_regions(_layout(), {k: -1 for k in PAPER_IDS})
    assert all(r["allowed"] == ["none"] for r in none)


def test_placement_check_confirms_each_region_carries_its_id():
    writes = _writes()
    check = nvmetrace.check_placement(SLIMIO_TRACE,
                                      nvmetrace.slimio_regions(_layout(), PAPER_IDS), 4096)
    assert check["ok"] and check["mismatched_writes"] == 0
    per = check["write_bytes_per_region"]
    expected = {}
    for lba, blocks, key in writes:
        by_key = expected.setdefault(_region(lba), {})
        by_key[key] = by_key.get(key, 0) + blocks * 4096
    assert per == expected
    assert set(per) == {"metadata", "wal", "snapshots"}
    assert set(per["metadata"]) == {"none"} and set(per["wal"]) == {"1"}
    assert set(per["snapshots"]) == {"2", "3"}, "WAL-Snapshots and the On-Demand-Snapshot"


def test_placement_check_names_writes_with_the_wrong_id():
    writes = _writes()
    # The same trace judged as a slimio-nofdp cell: every WAL and snapshot write is wrong.
    check = nvmetrace.check_placement(SLIMIO_TRACE, nvmetrace.slimio_regions(
        _layout(), {k: -1 for k in PAPER_IDS}), 4096)
    placed = [w for w in writes if _region(w[0]) in ("wal", "snapshots")]
    assert not check["ok"] and check["mismatched_writes"] == len(placed) > 0
    assert {e["region"] for e in check["mismatch_examples"]} <= {"wal", "snapshots"}
    # The WAL's and the On-Demand-Snapshot's ids swapped: the WAL's writes (id 1, 2 expected)
    # and the On-Demand-Snapshot's (id 2, 1 or 3 expected) are wrong, the WAL-Snapshots' not.
    swapped = nvmetrace.check_placement(SLIMIO_TRACE, nvmetrace.slimio_regions(
        _layout(), {"wal": 2, "wal_snapshot": 3, "on_demand": 1}), 4096)
    wrong = [w for w in writes if (_region(w[0]), w[2]) in (("wal", "1"), ("snapshots", "2"))]
    assert swapped["mismatched_writes"] == len(wrong) > 0
    small = dict(_layout(), wal=dict(_layout()["wal"], lbas=1))  # WAL writes past its end
    outside = nvmetrace.check_placement(SLIMIO_TRACE, nvmetrace.slimio_regions(small, PAPER_IDS),
                                        4096)
    assert "outside" in outside["write_bytes_per_region"] and not outside["ok"]
