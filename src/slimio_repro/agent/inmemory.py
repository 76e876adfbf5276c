"""The no-I/O bound of a recovery: the same load with memory for a device.

A recovery cannot be faster than Redis parsing what it loads. That is measured here with
the storage taken out: the directory it reads is on tmpfs (``/dev/shm``), so every read is
a copy within memory. (A snapshot's no-I/O bound is SlimIO's BGSAVE into its
discard sink, ``slimio-snapshot-sink discard``: a BGSAVE into tmpfs is none, since tmpfs
allocates and copies every page in line, and SlimIO's real snapshot beat it on bare. The
no-persistence server keeps its data directory here all the same, so that its BGSAVE and
its RDB's load touch no device.)

* The recovery bounds: loading from memory what a recovery loads. For the bound itself, the
  RDB that BGSAVE just wrote (the most compact form of the dataset). For a system, its own
  log as it is on its storage, copied into memory first: the baseline's AOF directory, or
  SlimIO's WAL-Snapshot slot and live WAL (``slimio-admin export`` and ``dump-wal``, which
  check the slot's CRC32C and every WAL block), made into an AOF directory of stock Redis,
  which the system's own build then loads without SlimIO. The time Redis reports for it is
  what that recovery costs with no I/O at all.

Standard library only, like the rest of this sub-package.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path

from . import redislog, slimio
from .server import RedisServer, free_port, render_conf

MEMORY_ROOT = Path("/dev/shm")
AOF_DIR = "appendonlydir"
BASE_FILE = "appendonly.aof.1.base.rdb"
INCR_FILE = "appendonly.aof.1.incr.aof"
MANIFEST = "appendonly.aof.manifest"


class InMemoryError(RuntimeError):
    pass


def fs_type(path: Path) -> str:
    """The type of the file system ``path`` is on (the longest mount point above it)."""
    path = Path(os.path.realpath(path))
    best, kind = "", "unknown"
    for line in Path("/proc/self/mounts").read_text().splitlines():
        fields = line.split()
        if len(fields) < 3:
            continue
        point = fields[1].replace("\\040", " ")
        if (str(path) == point or str(path).startswith(point.rstrip("/") + "/")) \
                and len(point) > len(best):
            best, kind = point, fields[2]
    return kind


@contextmanager
def memory_dir(prefix: str, root: Path = MEMORY_ROOT):
    """A fresh directory on tmpfs (removed afterwards); refuses a root that is not tmpfs."""
    kind = fs_type(root)
    if kind != "tmpfs":
        raise InMemoryError(f"{root} is on {kind}, not tmpfs: the no-I/O bounds need a "
                            "directory in memory (mount a tmpfs there)")
    path = Path(tempfile.mkdtemp(prefix=prefix, dir=root))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def write_manifest(aof_dir: Path, base: bool) -> None:
    """Redis 7's multi-part AOF manifest: the base RDB (when there is one), then the log."""
    lines = [f"file {BASE_FILE} seq 1 type b"] if base else []
    lines.append(f"file {INCR_FILE} seq 1 type i")
    (aof_dir / MANIFEST).write_text("\n".join(lines) + "\n")


def newest_incr(aof_dir: Path) -> Path | None:
    """The incremental AOF that Redis appends to: the manifest's ``type i`` file of the highest
    seq (lines such as "file appendonly.aof.9.incr.aof seq 9 type i"); None without one."""
    manifest = aof_dir / MANIFEST
    if not manifest.exists():
        return None
    incr = [f.split() for f in manifest.read_text().splitlines()]
    incr = [f for f in incr if len(f) == 6 and f[0] == "file" and f[5] == "i"]
    return aof_dir / max(incr, key=lambda f: int(f[3]))[1] if incr else None


def copy_aof_dir(src: Path, dest_parent: Path) -> int:
    """The baseline's AOF directory, copied into memory; returns its bytes."""
    dest = dest_parent / AOF_DIR
    shutil.copytree(src, dest)
    return sum(p.stat().st_size for p in dest.iterdir())


def slimio_aof_dir(admin: Path, device: Path, lba_size: int, dest_parent: Path,
                   raw_dir: Path) -> dict:
    """SlimIO's recovery input as a stock AOF directory in ``dest_parent``: its WAL-Snapshot
    slot (when valid) as the base, its live WAL from that snapshot's generation as the log.
    Returns what went in (bytes of each; the layout as inspect saw it is in ``raw_dir``)."""
    found = slimio.inspect(admin, device, lba_size, raw_dir / "slimio-inspect-bound.json")
    aof = dest_parent / AOF_DIR
    aof.mkdir()
    snap = next((s for s in found["slots"] if s["role"] == "wal-snapshot" and s["valid"]),
                None)
    base = aof / BASE_FILE
    if snap is not None:
        slimio.run_admin([str(admin), "export", "--device", str(device), "--slot",
                          "wal-snapshot", "--output", str(base), "--lba-size", str(lba_size)])
    slimio.run_admin([str(admin), "dump-wal", "--device", str(device), "--output",
                      str(aof / INCR_FILE), "--lba-size", str(lba_size)])
    write_manifest(aof, snap is not None)
    return {"base_bytes": base.stat().st_size if snap is not None else 0,
            "log_bytes": (aof / INCR_FILE).stat().st_size}


def load(bin_dir: Path, data_dir: Path, appendonly: bool, raw_dir: Path, name: str,
         timeout_s: float) -> tuple[RedisServer, float]:
    """Start a stock server (no SlimIO) on ``data_dir`` (in memory) and let it load; returns
    the running server and the seconds Redis reports for the load. The caller checks the
    dataset and shuts it down."""
    port = free_port()
    conf, log = raw_dir / f"redis-{name}.conf", raw_dir / f"redis-{name}.log"
    render_conf(conf, port=port, data_dir=data_dir, log_file=log, appendfsync="everysec",
                appendonly=appendonly, auto_aof_rewrite_percentage=0,
                auto_aof_rewrite_min_size=1 << 40)
    server = RedisServer(bin_dir, conf, port, log)
    server.start(timeout_s)
    loads = redislog.load_times(log.read_text())
    what = "append only file" if appendonly else "disk"
    if what not in loads:
        server.kill()
        raise InMemoryError(f"{log} reports no load from {what!r}: the server loaded "
                            f"nothing from {data_dir}")
    return server, loads[what]


__all__ = ["InMemoryError", "MEMORY_ROOT", "copy_aof_dir", "fs_type", "load",
           "memory_dir", "newest_incr", "slimio_aof_dir", "write_manifest"]
