"""Systems slimio and slimio-nofdp: their device, the admin tool, their redis.conf block.

On the bare testbed the SlimIO device of a cell is a file (``slimio.dev``) in the cell's own
fresh file-system image: the `file` backend writes it with io_uring and O_DIRECT, so the WAL
and snapshots reach the same loop device and backing storage as the baseline's files do. In
the vm testbed it is the raw namespace: its generic char device (``/dev/ng0n1``) for the
`nvme` backend (passthru, FDP placement per data kind), its block device for `file`.
The pipeline formats it with ``slimio-admin format`` (which records the placement ids)
before the server starts, and the server runs with ``slimio-format never``: it must find
exactly that layout.
"""

from __future__ import annotations

import json
import mmap
import os
import subprocess
from pathlib import Path

from . import layout
from ..plan.cellplan import Slimio

MIB = 1024 * 1024


class SlimioError(RuntimeError):
    pass


def deallocates(device: Path) -> bool:
    """Whether SlimIO deallocates on ``device``: on a block or NVMe device, yes (as mkfs
    discards); on a regular file (the bare testbed's stand-in for a raw LBA space), no.

    An SSD's deallocation costs its next write of those LBAs nothing. A file's (a punched
    hole) costs that write a block allocation, and a durable write a journal commit as
    well: measured on this host (redis-benchmark, 50 clients, 4 KiB SETs, a file on ext4
    on a loop device), SlimIO ran at 30.7 k SET/s under Always-Log and 52.4 k under
    Periodical-Log on a deallocated WAL region against 37.8 k and 59.7 k on a written one.
    Nothing on the bare testbed reads the deallocated ranges (no device trace, no FTL
    model), so the file keeps its blocks written, as :func:`create_device` made them.
    """
    return not device.is_file()


def conf_block(s: Slimio, device: Path, trace_marker: Path | None = None) -> str:
    """The slimio-* lines of redis.conf (all immutable; SlimIO works with appendonly yes).

    The WAL, slot and LBA sizes are only used when the server formats; with
    ``slimio-format never`` they document the layout slimio-admin wrote. SlimIO deallocates
    what it frees (the old WAL, the demoted slot); with ``trace_marker`` (a vm cell: tracefs's
    trace_marker) it writes each deallocated range into the cell's device trace.
    """
    p = s.placement_ids
    lines = [
        f"slimio-device {device}",
        f"slimio-backend {s.backend}",
        "slimio-format never",
        f"slimio-wal-size {s.wal_size_bytes}",
        f"slimio-slot-size {s.slot_size_bytes}",
        f"slimio-lba-size {s.lba_size_bytes}",
        f"slimio-sqpoll {'yes' if s.sqpoll else 'no'}",
        f"slimio-group-commit {'yes' if s.group_commit else 'no'}",
        f"slimio-ring-entries {s.ring_entries}",
        f"slimio-wal-buffer-size {s.wal_buffer_size_mb}mb",
        f"slimio-readahead-size {s.readahead_size_mb}mb",
        f"slimio-placement-wal {p.wal}",
        f"slimio-placement-wal-snapshot {p.wal_snapshot}",
        f"slimio-placement-on-demand {p.on_demand}",
        f"slimio-load-snapshot {s.load_snapshot}",
        f"slimio-deallocate {'yes' if deallocates(device) else 'no'}",
    ]
    if trace_marker is not None:
        lines.append(f"slimio-trace-marker {trace_marker}")
    return "\n".join(lines) + "\n"


def create_device(path: Path, size_bytes: int) -> None:
    """Create the device file with every block written (zeros, O_DIRECT, then fsync).

    A raw device has no unallocated blocks. A merely fallocated file would make each first
    write to a block convert an unwritten extent, and each durable write commit that
    conversion in the file system's journal: measured on this host with dd, 4 KiB O_DIRECT
    O_DSYNC writes took 332 us into fallocated blocks against 78 us into written ones, and
    Always-Log SlimIO ran at 21 k instead of 28 k SET/s. Writing the file once makes the
    file backend behave like the raw LBA space it stands for.
    """
    if path.exists():
        raise SlimioError(f"{path} already exists; refusing to reuse a SlimIO device")
    chunk = 4 * MIB
    buf = mmap.mmap(-1, chunk)          # page-aligned and zeroed, as O_DIRECT needs
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_DIRECT, 0o600)
    try:
        left = size_bytes
        while left:
            n = os.write(fd, memoryview(buf)[:min(chunk, left)])
            left -= n
        os.fsync(fd)
    except OSError as exc:
        raise SlimioError(f"cannot write the {size_bytes >> 20} MiB SlimIO device {path}: "
                          f"{exc}; raise testbeds.bare.image_size_mb or set it to null") from None
    finally:
        os.close(fd)
        buf.close()


def format_command(admin: Path, device: Path, s: Slimio,
                   trace_marker: Path | None = None) -> list[str]:
    """slimio-admin format (it deallocates the WAL region and the slots first, as mkfs
    discards a device; each range goes to ``trace_marker`` when given), except on a regular
    file (:func:`deallocates`)."""
    return [str(admin), "format", "--device", str(device),
            "--wal-mib", str(s.wal_size_bytes // MIB),
            "--slot-mib", str(s.slot_size_bytes // MIB),
            "--lba-size", str(s.lba_size_bytes),
            "--placement-wal", str(s.placement_ids.wal),
            "--placement-wal-snapshot", str(s.placement_ids.wal_snapshot),
            "--placement-on-demand", str(s.placement_ids.on_demand)] + \
        (["--trace-marker", str(trace_marker)] if trace_marker is not None else []) + \
        ([] if deallocates(device) else ["--no-deallocate"])


def device_command(admin: Path, device: Path, lba_size: int) -> list[str]:
    return [str(admin), "device", "--device", str(device), "--lba-size", str(lba_size)]


def inspect_command(admin: Path, device: Path, lba_size: int) -> list[str]:
    return [str(admin), "inspect", "--device", str(device), "--lba-size", str(lba_size),
            "--json"]


def run_admin(cmd: list[str], out: Path | None = None, err: Path | None = None) -> str:
    """Run slimio-admin; keep its stdout/stderr in ``out``/``err``; fail naming both."""
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if out is not None:
        out.write_text(proc.stdout)
    if err is not None:
        err.write_text(proc.stderr)
    if proc.returncode != 0:
        raise SlimioError(f"`{' '.join(cmd)}` failed ({proc.returncode}): "
                          f"{proc.stderr.strip()[-500:]}")
    return proc.stdout


def inspect(admin: Path, device: Path, lba_size: int, dest: Path) -> dict:
    """``slimio-admin inspect --json`` into ``dest``; return it parsed."""
    text = run_admin(inspect_command(admin, device, lba_size))
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SlimioError(f"slimio-admin inspect printed no JSON ({exc}): {text[:300]!r}") \
            from None
    dest.write_text(json.dumps(data, indent=2) + "\n")
    return data


def discard_bgsave(server, timeout_s: float) -> None:
    """The snapshot's no-I/O bound: a BGSAVE with slimio-snapshot-sink discard (SlimIO's
    child serialises the dataset exactly as for its On-Demand-Snapshot and keeps nothing;
    its log line marks it, :func:`.redislog.snapshots` times it). The sink is set back to
    the device at once: Redis counts a discarded BGSAVE as a save."""
    cli = server.client()
    cli.config_set("slimio-snapshot-sink", "discard")
    try:
        server.bgsave(timeout_s)
    finally:
        cli.config_set("slimio-snapshot-sink", "device")


def prepare(admin: Path, device: Path, s: Slimio, commands: list, raw_dir: Path,
            trace_marker: Path | None = None) -> dict:
    """Create (a file) or check (a block or NVMe char device) and format a cell's SlimIO
    device, recording the placement ids of ``s``.

    A device is the raw namespace the guest was provisioned with for the cell; it must be
    large enough, and slimio-admin refuses it if it carries any signature, or placement ids
    the device does not have.
    Keeps the tool's output in ``raw_dir``, appends the commands to ``commands`` and returns
    the device's description for provenance.
    """
    lba = s.lba_size_bytes
    if not (device.is_block_device() or device.is_char_device()):
        create_device(device, s.device_bytes)
    # What SlimIO finds on the device (for NVMe: nsid, write cache, FDP, placement ids).
    cmd = device_command(admin, device, lba)
    commands.append({"what": "slimio-device", "argv": cmd})
    found = json.loads(run_admin(cmd, raw_dir / layout.RAW_SLIMIO_DEVICE))
    have = found["lbas"] * found["lba_size"]
    if have < s.device_bytes:
        raise SlimioError(f"{device} has {have >> 20} MiB; the cell's layout needs "
                          f"{s.device_bytes >> 20} MiB: enlarge the device "
                          "profile's capacity or lower slimio.wal_size_mb/slot_size_mb")
    cmd = format_command(admin, device, s, trace_marker)
    commands.append({"what": "slimio-format", "argv": cmd})
    run_admin(cmd, raw_dir / layout.RAW_SLIMIO_FORMAT_OUT, raw_dir / layout.RAW_SLIMIO_FORMAT_ERR)
    commands.append({"what": "slimio-inspect", "argv": inspect_command(admin, device, lba)})
    formatted = inspect(admin, device, lba, raw_dir / layout.RAW_SLIMIO_INSPECT_BEFORE)
    return {"backend": s.backend, "device_file": str(device),
            "device_bytes": have, "lba_size_bytes": lba, "device": found,
            "placement_ids": s.placement_ids.as_dict(),
            "format_id": formatted.get("format_id"),
            "wal_size_bytes": s.wal_size_bytes,
            "slot_size_bytes": s.slot_size_bytes}
