"""The device roofline: fio's command line, and the parser on fio's real JSON report.

The fixture is real output of the pipeline's fio 3.41 (rule build_fio), the roofline job's
options with ioengine=psync on a regular file: io_uring_cmd needs an NVMe char device, which
only the guest has.
"""

import json
import os
import stat
from pathlib import Path

import pytest

from slimio_repro.agent import layout
from slimio_repro.agent import fdp
from slimio_repro import paths
from slimio_repro.agent import roofline

VM_FIXTURES = Path(__file__).parent / "fixtures" / "vm"
FIO_REPORT = VM_FIXTURES / "fio-roofline.json"
JOB = dict(size_bytes=64 << 20, block_size_bytes=128 << 10, iodepth=8)


def _status_order() -> list[int]:
    """The fixture namespace's placement ids in RUH status order (what fio's index means)."""
    return [d["placement_id"] for d in
            fdp.parse_status_descriptors((VM_FIXTURES / "fdp-status.json").read_text())]


def test_command_without_placement():
    cmd = roofline.fio_command("/opt/fio", "/dev/ng0n1", placement_id=None,
                               output_json="/tmp/o.json", **JOB)
    assert cmd == ["/opt/fio", "--name=roofline", "--filename=/dev/ng0n1",
                   "--ioengine=io_uring_cmd", "--cmd_type=nvme", "--pi_act=0", "--rw=write",
                   f"--bs={128 << 10}", "--iodepth=8", f"--size={64 << 20}", "--offset=0",
                   "--numjobs=1", "--group_reporting", "--output-format=json",
                   "--output=/tmp/o.json"]
    assert not any(a.startswith("--fdp") for a in cmd)


def test_command_with_placement_passes_fio_the_index_of_the_id():
    # fio's fdp_pli is an index into the RUH status list: id 5 at position 1 is index 1.
    cmd = roofline.fio_command("fio", "/dev/ng1n2", placement_id=5, placement_ids=[7, 5, 3],
                               output_json="o.json", **JOB)
    assert cmd[-2:] == ["--fdp=1", "--fdp_pli=1"]
    in_order = _status_order()
    cmd = roofline.fio_command("fio", "/dev/ng0n1", placement_id=in_order[3],
                               placement_ids=in_order, output_json="o.json", **JOB)
    assert cmd[-1] == "--fdp_pli=3"


def test_placement_id_outside_the_namespace_is_refused_naming_the_valid_ones():
    with pytest.raises(ValueError, match=r"placement id 9 .* \[0, 1, 2\]"):
        roofline.fio_command("fio", "/dev/ng0n1", placement_id=9, placement_ids=[0, 1, 2],
                             output_json="o.json", **JOB)
    with pytest.raises(ValueError, match="needs placement_ids"):
        roofline.fio_command("fio", "/dev/ng0n1", placement_id=0, output_json="o.json", **JOB)


@pytest.mark.parametrize("device", ["/dev/nvme0n1", "/dev/ng0", "ng0n1", "/dev/ng0n1p1",
                                    "/tmp/file", "/dev/ng0n1/../sda"])
def test_a_device_that_is_not_a_passthru_char_device_is_refused(device):
    with pytest.raises(ValueError, match=f"device {device!r} is not an NVMe passthru"):
        roofline.fio_command("fio", device, placement_id=None, output_json="o.json", **JOB)


@pytest.mark.parametrize("key,value", [("size_bytes", 0), ("block_size_bytes", -4096),
                                       ("iodepth", 1.5), ("size_bytes", 1000)])
def test_bad_job_sizes_are_named(key, value):
    with pytest.raises(ValueError, match=f"{key} {value}|{key} must be"):
        roofline.fio_command("fio", "/dev/ng0n1", placement_id=None, output_json="o.json",
                             **dict(JOB, **{key: value}))


def test_parse_of_real_fio_output_matches_what_fio_printed():
    text = FIO_REPORT.read_text()
    job = json.loads(text)["jobs"][0]
    summary = roofline.parse(text)
    assert summary == {
        "seq_write_bytes": 67108864,
        "seq_write_runtime_s": job["write"]["runtime"] / 1000,
        "seq_write_mb_s": job["write"]["bw_bytes"] / 1e6,
        "seq_write_iops": job["write"]["iops"],
        "fio_version": "fio-3.41",
        "block_size_bytes": 131072,
        "iodepth": 1,
        "placement_id": None,
        "fdp_placement_index": None,
    }
    # Against fio's other fields, not the ones the parser reads: the job's size option, its
    # KiB counters, its I/O count at the job's block size.
    options = job["job options"]
    assert summary["seq_write_bytes"] == int(options["size"]) == job["write"]["io_kbytes"] * 1024
    assert summary["block_size_bytes"] == int(options["bs"])
    assert job["write"]["total_ios"] * summary["block_size_bytes"] == summary["seq_write_bytes"]
    assert summary["seq_write_mb_s"] == pytest.approx(job["write"]["bw"] * 1024 / 1e6, rel=1e-5)
    # fio's bandwidth is its bytes over its runtime (ms resolution).
    assert summary["seq_write_mb_s"] == pytest.approx(
        summary["seq_write_bytes"] / summary["seq_write_runtime_s"] / 1e6, rel=1e-6)
    assert summary["seq_write_iops"] == pytest.approx(
        summary["seq_write_bytes"] / 131072 / summary["seq_write_runtime_s"], rel=1e-6)


def _report(**job_changes) -> str:
    data = json.loads(FIO_REPORT.read_text())
    for key, value in job_changes.items():
        if key == "options":
            data["jobs"][0]["job options"].update(value)
        elif key == "write":
            data["jobs"][0]["write"].update(value)
        else:
            data["jobs"][0][key] = value
    return json.dumps(data)


def test_parse_names_the_placement_id_of_fios_index():
    # fio's JSON names the option by its canonical name, plids (fdp_pli is its alias).
    text = _report(options={"fdp": "1", "plids": "2"})
    summary = roofline.parse(text, placement_ids=[4, 6, 8])
    assert summary["placement_id"] == 8 and summary["fdp_placement_index"] == 2
    with pytest.raises(ValueError, match="pass placement_ids"):
        roofline.parse(text)


def test_parse_tolerates_notes_before_the_json():
    assert roofline.parse("note: both iodepth >= 1 and synchronous I/O engine are selected\n"
                          + FIO_REPORT.read_text())["seq_write_bytes"] == 67108864


def test_a_job_with_an_error_is_refused():
    with pytest.raises(ValueError, match=r"failed with error 5 \(Input/output error\)"):
        roofline.parse(_report(error=5))


def test_a_job_that_wrote_nothing_is_refused():
    with pytest.raises(ValueError, match="wrote 0 bytes"):
        roofline.parse(_report(write={"io_bytes": 0, "bw_bytes": 0, "iops": 0.0}))
    with pytest.raises(ValueError, match="in 0 ms"):
        roofline.parse(_report(write={"runtime": 0}))


@pytest.fixture
def char_device(monkeypatch, tmp_path) -> str:
    """/dev/ng0n1, seen by roofline.run as a char device (the host has no such namespace)."""
    real_stat = os.stat
    fake = os.stat_result((stat.S_IFCHR | 0o600,) + tuple(real_stat(tmp_path))[1:])
    monkeypatch.setattr(roofline.os, "stat",
                        lambda p: fake if p == "/dev/ng0n1" else real_stat(p))
    return "/dev/ng0n1"


def test_run_writes_fios_report_and_the_summary(tmp_path, monkeypatch, char_device):
    """run() with fio replaced by a script that writes the captured report where told."""
    fake = tmp_path / "fio"
    fake.write_text("#!/bin/sh\nfor a; do case $a in --output=*) cp \"$REPORT\" "
                    "\"${a#--output=}\";; esac; done\n")
    fake.chmod(0o755)
    monkeypatch.setenv("REPORT", str(FIO_REPORT))
    out = tmp_path / "raw"
    summary = roofline.run(str(fake), "/dev/ng0n1", out, **JOB)
    assert (out / layout.RAW_FIO_ROOFLINE).read_text() == FIO_REPORT.read_text()
    record = json.loads((out / layout.RAW_ROOFLINE).read_text())
    assert record["command"][0] == str(fake) and "--filename=/dev/ng0n1" in record["command"]
    assert {k: record[k] for k in summary} == summary and record["device"] == "/dev/ng0n1"


def test_run_reports_fios_failure(tmp_path, char_device):
    fake = tmp_path / "fio"
    fake.write_text("#!/bin/sh\necho 'fio: ruh info failed for /dev/ng0n1 (22)' >&2\nexit 1\n")
    fake.chmod(0o755)
    with pytest.raises(roofline.RooflineError, match=r"fio exited 1: fio: ruh info failed"):
        roofline.run(str(fake), "/dev/ng0n1", tmp_path / "raw", **JOB)


def test_run_refuses_a_missing_device(tmp_path):
    with pytest.raises(roofline.RooflineError, match="device /dev/ng97n1: No such file"):
        roofline.run("fio", "/dev/ng97n1", tmp_path, **JOB)


def test_roofline_stays_standard_library_only():
    """The guest has python3 and redis-py only: no yaml, pandas or other PyPI imports."""
    import ast
    tree = ast.parse(Path(roofline.__file__).read_text())
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import)
                for a in n.names}
    imported |= {n.module.split(".")[0] for n in ast.walk(tree)
                 if isinstance(n, ast.ImportFrom) and n.module and n.level == 0}
    assert imported <= {"__future__", "json", "os", "re", "stat", "subprocess", "collections",
                        "pathlib"}, imported


RATE_READ = Path(__file__).parent / "fixtures" / "fio" / "device-rate-read.json"


def test_rate_command_uses_passthru_on_a_char_device_and_o_direct_on_a_file():
    nvme = roofline.rate_command("fio", "/dev/ng0n1", "read", size_bytes=1 << 20,
                                 block_size_bytes=1 << 19, iodepth=8, output_json="o.json")
    assert "--ioengine=io_uring_cmd" in nvme and "--cmd_type=nvme" in nvme
    assert "--rw=read" in nvme and "--direct=1" not in nvme
    f = roofline.rate_command("fio", "/var/tmp/slimio.dev", "write", size_bytes=1 << 20,
                              block_size_bytes=1 << 20, iodepth=8, output_json="o.json")
    assert "--ioengine=io_uring" in f and "--direct=1" in f and "--rw=write" in f
    with pytest.raises(ValueError, match="'randread'"):
        roofline.rate_command("fio", "/dev/ng0n1", "randread", size_bytes=1 << 20,
                              block_size_bytes=1 << 20, iodepth=1, output_json="o.json")
    with pytest.raises(ValueError, match="not a multiple"):
        roofline.rate_command("fio", "/dev/ng0n1", "read", size_bytes=3 << 19,
                              block_size_bytes=1 << 20, iodepth=1, output_json="o.json")


DURABLE_WRITE = Path(__file__).parent / "fixtures" / "fio" / "device-durable-write.json"


def test_durable_writes_are_fua_through_passthru_and_o_dsync_on_a_file():
    nvme = roofline.rate_command("fio", "/dev/ng0n1", "write", size_bytes=1 << 20,
                                 block_size_bytes=1 << 18, iodepth=1, output_json="o.json",
                                 durable=True)
    assert "--writefua=1" in nvme and "--sync=dsync" not in nvme
    f = roofline.rate_command("fio", "/var/tmp/slimio.dev", "write", size_bytes=1 << 20,
                              block_size_bytes=1 << 18, iodepth=1, output_json="o.json",
                              durable=True)
    assert "--sync=dsync" in f and "--direct=1" in f and "--writefua=1" not in f
    plain = roofline.rate_command("fio", "/dev/ng0n1", "write", size_bytes=1 << 20,
                                  block_size_bytes=1 << 18, iodepth=1, output_json="o.json")
    assert "--writefua=1" not in plain
    with pytest.raises(ValueError, match="only writes are durable"):
        roofline.rate_command("fio", "/dev/ng0n1", "read", size_bytes=1 << 20,
                              block_size_bytes=1 << 18, iodepth=1, output_json="o.json",
                              durable=True)


def test_parse_rate_of_a_real_durable_write_job():
    """fio 3.41's report of 50 O_DSYNC, O_DIRECT writes of 12 KiB at queue depth 1 on a
    file in this host's /var/tmp (captured with roofline.measure_rate(durable=True))."""
    got = roofline.parse_rate(DURABLE_WRITE.read_text(), "write")
    assert got["bytes"] == 50 * 12288
    assert got["lat_mean_ms"] == pytest.approx(3.5931, abs=1e-4)
    # One at a time: the rate is the block over the mean latency (fio's clock, 1 %).
    assert got["mb_s"] == pytest.approx(12288 / 1e6 / (got["lat_mean_ms"] / 1000), rel=0.05)


def test_parse_rate_of_a_real_read_job():
    """fio 3.41's report of a 64 MiB O_DIRECT read on this host (captured)."""
    got = roofline.parse_rate(RATE_READ.read_text(), "read")
    assert got["bytes"] == 64 << 20 and got["runtime_s"] == pytest.approx(0.050)
    assert got["mb_s"] == pytest.approx(1342.177280)
    assert got["fio_version"] == "fio-3.41"
    with pytest.raises(ValueError, match="write job moved 0 bytes"):
        roofline.parse_rate(RATE_READ.read_text(), "write")
