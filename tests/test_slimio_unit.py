"""SlimIO's C unit tests (on-device format, metadata, WAL framing and generation chain,
failpoints), built with -Wall -Werror and run plain and under AddressSanitizer + UBSan; and
slimio-admin (format, inspect, export, dump-wal) on device files. Slot and WAL content is
put on the device by tests/slimio_fixture_writer.c through the real format code, from
bytes made here or by a real redis-server."""

import json
import os
import random
import re
import subprocess

import pytest

from slimio_repro import paths
from slimio_repro.agent.server import RedisServer, free_port, render_conf
from conftest import first_data, resp


@pytest.mark.parametrize("target", ["test", "test-asan"])
def test_slimio_c_unit_tests(target, tmp_path):
    proc = subprocess.run(
        ["make", "-C", str(paths.REPO_ROOT / "redis-slimio"), target,
         f"BUILD_DIR={tmp_path}"], capture_output=True, text=True)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    m = re.search(r"^(\d+) passed, (\d+) failed$", proc.stdout, re.M)
    assert m and int(m.group(1)) >= 35 and m.group(2) == "0", out[-4000:]
    assert "AddressSanitizer" not in out and "runtime error" not in out


@pytest.fixture(scope="module")
def admin(tmp_path_factory):
    """slimio-admin, built next to the fixture writer."""
    out = tmp_path_factory.mktemp("slimio-admin")
    proc = subprocess.run(["make", "-C", str(paths.REPO_ROOT / "redis-slimio"), "admin",
                           "fixture-writer", f"BUILD_DIR={out}"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out / "slimio-admin"


@pytest.fixture(scope="module")
def writer(admin):
    """tests/slimio_fixture_writer.c: writes slots and WAL generations without Redis."""
    return admin.parent / "slimio_fixture_writer"


def run_admin(admin, *args):
    return subprocess.run([str(admin), *args], capture_output=True, text=True)


def run_bytes(admin, *args):
    """slimio-admin with its stdout as bytes (dump-wal --output -)."""
    return subprocess.run([str(admin), *args], capture_output=True)


def write_fixture(writer, dev, *args):
    proc = subprocess.run([str(writer), "--device", str(dev), *map(str, args)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def new_device(tmp_path, writer, name="dev.img", size_mib=64):
    """A device file formatted with an 8 MiB WAL and three 16 MiB slots."""
    dev = tmp_path / name
    with open(dev, "wb") as fh:
        fh.truncate(size_mib << 20)
    write_fixture(writer, dev, "--format", 8, 16)
    return dev


def inspect(admin, dev):
    proc = run_admin(admin, "inspect", "--device", str(dev), "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def commands(size, tag, rng):
    """SET commands of exactly size bytes in all (the last value is padded to fit)."""
    out = resp("SELECT", 0)
    i = 0
    while size - len(out) > 300:
        out += resp("SET", f"{tag}:{i}", rng.randbytes(rng.randrange(1, 200)))
        i += 1
    for pad in range(size):     # the last command's value length, digits included
        last = resp("SET", f"{tag}:last", b"v" * pad)
        if len(out) + len(last) == size:
            return out + last
    raise AssertionError(f"cannot make {size} bytes of commands")


PAYLOAD = 4096 - 32     # WAL payload bytes per 4096-byte block


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


def filled_device(path, mib):
    """A device file whose every block holds data (as a used device would)."""
    with open(path, "wb") as fh:
        for _ in range(mib):
            fh.write(b"\xab" * (1 << 20))


@pytest.mark.parametrize("deallocate", [True, False])
def test_admin_format_deallocates_wal_and_slots_and_marks_the_trace(admin, tmp_path,
                                                                     deallocate):
    dev, marker = tmp_path / "dev.img", tmp_path / "trace_marker"
    filled_device(dev, 64)
    marker.touch()
    proc = run_admin(admin, "format", "--device", str(dev), "--wal-mib", "8", "--slot-mib",
                     "16", "--trace-marker", str(marker),
                     *([] if deallocate else ["--no-deallocate"]))
    assert proc.returncode == 0, proc.stderr
    info = json.loads(run_admin(admin, "inspect", "--device", str(dev), "--json").stdout)
    wal_start, lbas = info["wal"]["start_lba"], info["wal"]["lbas"] + 3 * info["slots"][0]["lbas"]
    assert wal_start == 256 and info["slots"][0]["start_lba"] == wal_start + info["wal"]["lbas"]
    if deallocate:
        assert marker.read_text() == f"slimio_dealloc slba={wal_start} nlb={lbas} why=format\n"
        assert f"deallocated {lbas} LBAs ({lbas * 4096 >> 20} MiB) from LBA {wal_start} in " \
               f"1 command(s)" in proc.stdout
        nxt = first_data(dev, wal_start * 4096)
        assert nxt is None or nxt >= (wal_start + lbas) * 4096
    else:
        assert marker.read_text() == ""
        assert "deallocated nothing (--no-deallocate)" in proc.stdout
        assert first_data(dev, wal_start * 4096) == wal_start * 4096
    assert first_data(dev, 0) == 0                  # the metadata stays


def test_admin_format_refuses_a_trace_marker_it_cannot_open(admin, tmp_path):
    dev = tmp_path / "dev.img"
    filled_device(dev, 64)
    missing = tmp_path / "no-tracefs" / "trace_marker"
    proc = run_admin(admin, "format", "--device", str(dev), "--wal-mib", "8", "--slot-mib",
                     "16", "--trace-marker", str(missing))
    assert proc.returncode == 1 and str(missing) in proc.stderr
    assert dev.read_bytes()[:8192] == b"\xab" * 8192     # nothing written


# Signatures made by e2fsprogs and util-linux (host packages). minix, bfs and the MBR with
# an empty table are ones the hand-written table before libblkid did not know.
SIGNATURES = {
    "ext4": (["mkfs.ext4", "-q", "-F"], "an ext4 file system (libblkid: TYPE=ext4)"),
    "minix": (["mkfs.minix"], "a minix file system (libblkid: TYPE=minix)"),
    "bfs": (["mkfs.bfs"], "a bfs file system (libblkid: TYPE=bfs)"),
    "swap": (["mkswap", "-q"], "a swap"),
    "gpt": (None, "a gpt partition table (libblkid: PTTYPE=gpt)"),
}


@pytest.mark.parametrize("kind", sorted(SIGNATURES))
def test_admin_refuses_a_signature_and_leaves_it_intact(admin, tmp_path, kind):
    """Every signature libblkid knows is refused (the maintained prober, not a hand-written
    table), named as libblkid names it, and the device is left as it was."""
    dev = tmp_path / f"{kind}.img"
    with open(dev, "wb") as fh:
        fh.truncate(64 << 20)
    cmd, message = SIGNATURES[kind]
    if cmd:
        subprocess.run(cmd + [str(dev)], check=True, capture_output=True)
    else:
        subprocess.run(["sfdisk", "-q", str(dev)], input="label: gpt\n,8M\n", text=True,
                       check=True)
    before = dev.read_bytes()[:1 << 20]
    proc = run_admin(admin, "format", "--device", str(dev), "--wal-mib", "8", "--slot-mib", "8")
    assert proc.returncode == 1 and f"carries {message}" in proc.stderr, proc.stderr
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


def test_admin_export_round_trips_slots_found_by_role_or_number(admin, writer, tmp_path):
    rng = random.Random(7)
    dev = new_device(tmp_path, writer)
    big = b"REDIS0010" + rng.randbytes((9 << 20) + 123)     # more than two 4 MiB reads
    small = b"REDIS0009" + rng.randbytes(5000)
    (tmp_path / "big.rdb").write_bytes(big)
    (tmp_path / "small.rdb").write_bytes(small)
    write_fixture(writer, dev, "--roles", "reserve,on-demand,wal-snapshot",
                  "--slot", 2, tmp_path / "big.rdb", "--slot", 1, tmp_path / "small.rdb")
    proc = run_admin(admin, "export", "--device", dev, "--slot", "wal-snapshot",
                     "--output", tmp_path / "ws.rdb")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "ws.rdb").read_bytes() == big
    assert re.search(rf"slot 2 \(wal-snapshot\) .*: {len(big)} bytes, CRC32C [0-9a-f]{{8}} ok, "
                     r".* MB/s", proc.stdout), proc.stdout
    proc = run_admin(admin, "export", "--device", dev, "--slot", "1", "--output",
                     tmp_path / "od.rdb")
    assert proc.returncode == 0, proc.stderr
    assert "slot 1 (on-demand)" in proc.stdout
    assert (tmp_path / "od.rdb").read_bytes() == small
    assert not list(tmp_path.glob("*.partial"))
    info = inspect(admin, dev)
    assert [(s["role"], s["valid"], s["length_bytes"]) for s in info["slots"]] == [
        ("reserve", False, 0), ("on-demand", True, len(small)), ("wal-snapshot", True, len(big))]


def test_admin_export_refuses_a_corrupted_slot_and_leaves_no_file(admin, writer, tmp_path):
    dev = new_device(tmp_path, writer)
    data = b"REDIS0010" + random.Random(3).randbytes(3 << 20)
    (tmp_path / "snap.rdb").write_bytes(data)
    write_fixture(writer, dev, "--slot", 0, tmp_path / "snap.rdb")
    start = inspect(admin, dev)["slots"][0]["start_lba"] * 4096
    with open(dev, "r+b") as fh:        # one flipped bit in the middle of the snapshot
        fh.seek(start + len(data) // 2)
        byte = fh.read(1)[0]
        fh.seek(start + len(data) // 2)
        fh.write(bytes([byte ^ 0x10]))
    out = tmp_path / "out.rdb"
    proc = run_admin(admin, "export", "--device", dev, "--slot", "wal-snapshot",
                     "--output", out)
    assert proc.returncode == 1
    assert "refusing to export slot 0 (wal-snapshot)" in proc.stderr
    assert "CRC32C mismatch" in proc.stderr
    assert not out.exists() and not (tmp_path / "out.rdb.partial").exists()


def test_admin_export_refusals(admin, writer, tmp_path):
    dev = new_device(tmp_path, writer)
    (tmp_path / "snap.rdb").write_bytes(b"REDIS0010-first")
    write_fixture(writer, dev, "--slot", 2, tmp_path / "snap.rdb")
    out = tmp_path / "out.rdb"
    # an empty slot: named with its role
    proc = run_admin(admin, "export", "--device", dev, "--slot", "reserve", "--output", out)
    assert proc.returncode == 1 and "slot 1 (reserve)" in proc.stderr
    assert "holds no valid snapshot" in proc.stderr and not out.exists()
    # a bad --slot value, before the device is even opened
    for bad in ("3", "snapshot", ""):
        proc = run_admin(admin, "export", "--device", tmp_path / "missing", "--slot", bad,
                         "--output", out)
        assert proc.returncode == 2, proc.stderr
        assert "--slot wants wal-snapshot, reserve, on-demand or a slot number 0, 1, 2; got " \
               f"'{bad}'" in proc.stderr
    # an existing output is kept unless --force
    out.write_bytes(b"keep me")
    proc = run_admin(admin, "export", "--device", dev, "--slot", "on-demand", "--output", out)
    assert proc.returncode == 1 and "refusing to overwrite" in proc.stderr
    assert "--force" in proc.stderr and out.read_bytes() == b"keep me"
    proc = run_admin(admin, "export", "--device", dev, "--slot", "on-demand", "--output", out,
                     "--force")
    assert proc.returncode == 0, proc.stderr
    assert out.read_bytes() == b"REDIS0010-first"
    assert not (tmp_path / "out.rdb.partial").exists()


def test_admin_dump_wal_follows_the_chain_through_an_unlisted_generation(admin, writer,
                                                                        tmp_path):
    rng = random.Random(11)
    dev = new_device(tmp_path, writer)
    wal_lbas = inspect(admin, dev)["wal"]["lbas"]
    # gen 4 wraps around the end of the WAL region and ends in a partial tail; gen 5 (not in
    # the metadata, as after a failed rewrite) ends exactly on a block; gen 6 is the current.
    gens = {4: commands(2 * PAYLOAD + 700, "a", rng), 5: commands(3 * PAYLOAD, "b", rng),
            6: commands(PAYLOAD + 333, "c", rng)}
    for g, data in gens.items():
        (tmp_path / f"gen{g}.aof").write_bytes(data)
    write_fixture(writer, dev, "--wal-offset", wal_lbas - 2, "--gen", 4, tmp_path / "gen4.aof",
                  "--gen-unlisted", 5, tmp_path / "gen5.aof", "--gen", 6, tmp_path / "gen6.aof")
    everything = gens[4] + gens[5] + gens[6]

    info = inspect(admin, dev)
    chain = info["wal_chain"]
    assert [(c["gen"], c["blocks"], c["bytes"], c["listed"], c["gap_before"]) for c in chain] == [
        (4, 3, len(gens[4]), True, False), (5, 3, len(gens[5]), False, False),
        (6, 2, len(gens[6]), True, False)]
    wal_start = info["wal"]["start_lba"]
    assert [c["start_lba"] for c in chain] == [wal_start + wal_lbas - 2, wal_start + 1,
                                               wal_start + 4]
    assert [c["stop"] for c in chain] == ["ok", "block of another WAL generation", "ok"]
    assert [g["gen"] for g in info["wal_generations"]] == [4, 6]
    assert info["wal"]["live_bytes"] == len(everything)
    assert info["wal"]["used_lbas"] == 8 and info["wal"]["free_lbas"] == wal_lbas - 8
    assert info["wal"]["chain_end"] == {"gen": 7, "start_lba": wal_start + 6,
                                        "reason": "bad magic"}
    text = run_admin(admin, "inspect", "--device", dev).stdout
    assert re.search(r"gen 5 +LBA \d+ +3 blocks +%d bytes +chained" % len(gens[5]), text), text

    # no WAL-Snapshot: from the oldest live generation, through the unlisted one
    out = tmp_path / "all.aof"
    proc = run_admin(admin, "dump-wal", "--device", dev, "--output", out)
    assert proc.returncode == 0, proc.stderr
    assert out.read_bytes() == everything
    assert "from generation 4 (the oldest live generation)" in proc.stdout
    assert re.search(r"gen 4 .*3 blocks .*stop: ok \(partial tail\)", proc.stdout)
    assert re.search(r"gen 5 .*chained .*stop: block of another WAL generation", proc.stdout)
    assert f"wrote {len(everything)} bytes of AOF from 3 generations" in proc.stdout
    assert not (tmp_path / "all.aof.partial").exists()
    # --from-gen names a listed generation; stdout carries the stream, stderr the report
    proc = run_bytes(admin, "dump-wal", "--device", dev, "--output", "-", "--from-gen", "6")
    assert proc.returncode == 0 and proc.stdout == gens[6]
    assert b"gen 6 " in proc.stderr
    proc = run_admin(admin, "dump-wal", "--device", dev, "--output", tmp_path / "x.aof",
                     "--from-gen", "5")
    assert proc.returncode == 1 and "generation 5 is not a live WAL generation" in proc.stderr
    assert "(live: 4 6)" in proc.stderr and not (tmp_path / "x.aof").exists()
    # an existing output is kept unless --force
    proc = run_admin(admin, "dump-wal", "--device", dev, "--output", out, "--from-gen", "6")
    assert proc.returncode == 1 and "refusing to overwrite" in proc.stderr
    assert out.read_bytes() == everything

    # a WAL-Snapshot that replays from the unlisted generation 5
    (tmp_path / "snap.rdb").write_bytes(b"REDIS0010")
    write_fixture(writer, dev, "--slot", 0, tmp_path / "snap.rdb", "--snapshot-wal-gen", 5)
    proc = run_admin(admin, "dump-wal", "--device", dev, "--output", out, "--force")
    assert proc.returncode == 0, proc.stderr
    assert out.read_bytes() == gens[5] + gens[6]
    assert "from generation 5 (the WAL-Snapshot's first generation to replay)" in proc.stdout
    assert re.search(r"gen 4 .*skipped", proc.stdout)


def test_admin_wal_chain_reaches_an_empty_current_generation_and_reports_a_gap(admin, writer,
                                                                              tmp_path):
    rng = random.Random(5)
    dev = new_device(tmp_path, writer)
    one, two = commands(PAYLOAD + 10, "a", rng), commands(2 * PAYLOAD + 99, "b", rng)
    (tmp_path / "one.aof").write_bytes(one)
    (tmp_path / "two.aof").write_bytes(two)
    (tmp_path / "empty.aof").write_bytes(b"")
    # Just after a rotation: the current generation 2 is listed but holds no block yet.
    write_fixture(writer, dev, "--gen", 1, tmp_path / "one.aof", "--gen", 2,
                  tmp_path / "empty.aof")
    info = inspect(admin, dev)
    assert [(c["gen"], c["blocks"], c["listed"], c["gap_before"]) for c in info["wal_chain"]] \
        == [(1, 2, True, False), (2, 0, True, False)]
    assert [g["gen"] for g in info["wal_generations"]] == [1, 2]
    assert info["wal"]["used_lbas"] == 2 and info["wal"]["live_bytes"] == len(one)
    # Generation 2 (unlisted) between the listed 1 and 3 is lost: its first block is damaged.
    write_fixture(writer, dev, "--gen", 1, tmp_path / "one.aof", "--gen-unlisted", 2,
                  tmp_path / "two.aof", "--gen", 3, tmp_path / "one.aof")
    info = inspect(admin, dev)
    gen2 = info["wal_chain"][1]["start_lba"]
    with open(dev, "r+b") as fh:
        fh.seek(gen2 * 4096 + 100)
        fh.write(b"\xff")
    info = inspect(admin, dev)
    assert [(c["gen"], c["blocks"], c["gap_before"]) for c in info["wal_chain"]] == [
        (1, 2, False), (3, 2, True)]
    out = tmp_path / "gap.aof"
    proc = run_admin(admin, "dump-wal", "--device", dev, "--output", out)
    assert proc.returncode == 0, proc.stderr
    assert out.read_bytes() == one + one
    assert "warning: generation 3 does not start where generation 1 ends" in proc.stderr
    assert "(with gaps: see the warnings)" in proc.stdout


def test_admin_dump_wal_of_a_device_without_wal_is_empty(admin, writer, tmp_path):
    dev = new_device(tmp_path, writer)
    info = inspect(admin, dev)
    assert info["wal_chain"] == [] and info["wal"]["chain_end"] is None
    assert info["wal"]["used_lbas"] == 0 and info["wal"]["free_lbas"] == info["wal"]["lbas"]
    proc = run_admin(admin, "dump-wal", "--device", dev, "--output", tmp_path / "empty.aof")
    assert proc.returncode == 0 and "no live WAL generation" in proc.stdout
    assert (tmp_path / "empty.aof").read_bytes() == b""


def test_admin_export_and_dump_of_real_redis_files_pass_redis_check(admin, writer, redis_bin,
                                                                    tmp_path):
    """An RDB and an AOF written by a real redis-server, put on the device as a WAL-Snapshot
    and three WAL generations (the middle one unlisted), come back byte for byte and pass
    the stock redis-check-rdb and redis-check-aof."""
    data = tmp_path / "data"
    data.mkdir()
    port = free_port()
    render_conf(tmp_path / "redis.conf", port=port, data_dir=data,
                log_file=tmp_path / "redis.log", appendfsync="always",
                auto_aof_rewrite_percentage=0, auto_aof_rewrite_min_size=64 << 20)
    server = RedisServer(redis_bin, tmp_path / "redis.conf", port, tmp_path / "redis.log")
    server.start(60)
    try:
        cli = server.client()
        (incr,) = (data / "appendonlydir").glob("*.incr.aof")
        cuts = []
        for batch in range(3):      # appendfsync always: in the file before the reply
            for i in range(200):
                cli.set(f"key:{batch}:{i}", f"value-{i}" * (i % 7 + 1))
            cli.hset(f"hash:{batch}", mapping={"a": batch, "b": "x" * 50})
            cli.rpush(f"list:{batch}", *range(20))
            cuts.append(incr.stat().st_size)
        cli.save()
    finally:
        server.shutdown()
    rdb = (data / "dump.rdb").read_bytes()
    aof = incr.read_bytes()
    assert rdb.startswith(b"REDIS") and len(aof) == cuts[-1]
    parts = [aof[:cuts[0]], aof[cuts[0]:cuts[1]], aof[cuts[1]:]]
    for k, part in enumerate(parts):
        (tmp_path / f"gen{k}.aof").write_bytes(part)
    dev = new_device(tmp_path, writer)
    write_fixture(writer, dev, "--slot", 0, data / "dump.rdb", "--snapshot-wal-gen", 1,
                  "--gen", 1, tmp_path / "gen0.aof", "--gen-unlisted", 2, tmp_path / "gen1.aof",
                  "--gen", 3, tmp_path / "gen2.aof")

    exported = tmp_path / "exported.rdb"
    proc = run_admin(admin, "export", "--device", dev, "--slot", "wal-snapshot",
                     "--output", exported)
    assert proc.returncode == 0, proc.stderr
    assert exported.read_bytes() == rdb
    check = subprocess.run([str(redis_bin / "redis-check-rdb"), str(exported)],
                           capture_output=True, text=True)
    assert check.returncode == 0 and "RDB looks OK" in check.stdout, check.stdout

    dumped = tmp_path / "dumped.aof"
    proc = run_admin(admin, "dump-wal", "--device", dev, "--output", dumped)
    assert proc.returncode == 0, proc.stderr
    assert "from 3 generations" in proc.stdout
    assert dumped.read_bytes() == aof
    check = subprocess.run([str(redis_bin / "redis-check-aof"), str(dumped)],
                           capture_output=True, text=True)
    assert check.returncode == 0 and "is valid" in check.stdout, check.stdout
