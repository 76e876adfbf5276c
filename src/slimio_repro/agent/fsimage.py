"""A fresh file system on a loop-attached image file that the pipeline itself created.

The framework never writes to a device the user did not name: on the bare testbed the only
block device it touches is the loop device it attaches to its own image file, inside the
cell's own directory, and detaches again.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path

from . import layout

MKFS_OPTIONS = {
    # Initialise inode tables and the journal now: lazy init would write in the background
    # during the measurement.
    "ext4": ["mkfs.ext4", "-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0"],
}
MOUNT_OPTIONS = {"ext4": "noatime"}


class FsImageError(RuntimeError):
    pass


def _run(cmd: list[str]) -> str:
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise FsImageError(f"`{' '.join(cmd)}` failed ({proc.returncode}): {proc.stderr.strip()}")
    return proc.stdout.strip()


def block_stat(dev: str) -> tuple[int, int]:
    """(bytes read, bytes written) of a block device so far (/sys/block/<dev>/stat, sectors
    of 512 B)."""
    fields = Path(f"/sys/block/{Path(dev).name}/stat").read_text().split()
    return int(fields[2]) * 512, int(fields[6]) * 512


def holders(mountpoint: Path) -> list[int]:
    """Processes with their directory, root, an open file or a mapped file on the file system
    mounted at ``mountpoint`` (what makes umount say "target is busy")."""
    dev = os.stat(mountpoint).st_dev
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            links = [proc / "cwd", proc / "root", proc / "exe", *(proc / "fd").iterdir(),
                     *(proc / "map_files").iterdir()]
        except OSError:
            continue        # it exited, or is a kernel thread
        for link in links:
            try:
                if os.stat(link).st_dev == dev:
                    found.append(int(proc.name))
                    break
            except OSError:
                continue
    return found


def unmount(mountpoint: Path, timeout_s: float = 30) -> None:
    """Unmount the cell's own file system. Where a process still holds it (a server's fork
    child outlives a server that a SIGTERM or a kill stopped: scancel sends SIGTERM to every
    process of the job at once), that process is the cell's: it is killed, then umount is
    tried again, for up to ``timeout_s``. A busy file system that no process shows is tried
    again too: a process that is exiting has no open files left in /proc, but the kernel
    releases them a moment later (seen: a scancel'd cell's umount failed while its Redis was
    shutting down, and no holder was found)."""
    deadline = time.monotonic() + timeout_s
    while True:
        proc = subprocess.run(["umount", str(mountpoint)], capture_output=True, text=True)
        if proc.returncode == 0:
            return
        mounted = os.path.ismount(mountpoint)
        pids = holders(mountpoint) if mounted else []
        if not mounted or time.monotonic() > deadline:
            raise FsImageError(f"`umount {mountpoint}` failed ({proc.returncode}): "
                               f"{proc.stderr.strip()}" + (f"; held by pids {pids}" if pids
                                                           else ""))
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.2)


class FsImage:
    """An image file with a file system, attached to a loop device and mounted."""

    def __init__(self, image: Path, mountpoint: Path, fstype: str, size_bytes: int,
                 direct_io: bool):
        if fstype not in MKFS_OPTIONS:
            raise FsImageError(f"file system {fstype!r} is not supported on the bare testbed; "
                               f"choose one of {', '.join(MKFS_OPTIONS)}")
        self.image, self.mountpoint, self.fstype = image, mountpoint, fstype
        self.size_bytes, self.direct_io = size_bytes, direct_io
        self.loop_dev: str | None = None

    def create(self) -> None:
        if self.image.exists():
            raise FsImageError(f"{self.image} already exists; refusing to overwrite it")
        with open(self.image, "xb") as fh:
            fh.truncate(self.size_bytes)
        _run(MKFS_OPTIONS[self.fstype] + [str(self.image)])

    def attach(self) -> None:
        cmd = ["losetup", "--find", "--show"]
        if self.direct_io:
            cmd.append("--direct-io=on")
        self.loop_dev = _run(cmd + [str(self.image)])
        self.mountpoint.mkdir(parents=True, exist_ok=True)
        try:
            _run(["mount", "-t", self.fstype, "-o", MOUNT_OPTIONS[self.fstype],
                  self.loop_dev, str(self.mountpoint)])
        except FsImageError:
            self.detach()
            raise

    def detach(self) -> None:
        if self.loop_dev is None:
            return
        if os.path.ismount(self.mountpoint):
            unmount(self.mountpoint)
        _run(["losetup", "--detach", self.loop_dev])
        self.loop_dev = None

    @property
    def block_device(self) -> str | None:
        return self.loop_dev

    @property
    def data_parent(self) -> Path:
        """Where the cell's data directory and SlimIO device file go."""
        return self.mountpoint

    @property
    def slimio_device(self) -> Path:
        """A slimio cell's SlimIO device: a file in the image, next to the data directory."""
        return self.mountpoint / layout.SLIMIO_DEVICE_FILE

    def write_bytes(self) -> int:
        return block_stat(self.loop_dev)[1]

    def read_bytes(self) -> int:
        return block_stat(self.loop_dev)[0]

    def remount(self) -> None:
        """Unmount and mount again: the next reads come from the device, not the page cache."""
        self.detach()
        self.attach()

    def describe(self) -> dict:
        out = {"filesystem": self.fstype, "image_size_bytes": self.size_bytes,
               "mkfs": MKFS_OPTIONS[self.fstype], "mount_options": MOUNT_OPTIONS[self.fstype],
               "loop_direct_io": self.direct_io, "backing_file": str(self.image)}
        if self.loop_dev:
            out["loop_device"] = self.loop_dev
            # What the kernel actually does (it falls back to buffered I/O if it must).
            dio = Path(f"/sys/block/{Path(self.loop_dev).name}/loop/dio")
            out["loop_direct_io_effective"] = dio.read_text().strip() == "1"
            out["findmnt"] = json.loads(_run(["findmnt", "--json", str(self.mountpoint)]))
        backing = _run(["findmnt", "--json", "--target", str(self.image.parent)])
        out["backing_filesystem"] = json.loads(backing)["filesystems"][0]
        return out


@contextmanager
def fresh_image(image: Path, mountpoint: Path, fstype: str, size_bytes: int, direct_io: bool):
    """Create, attach and mount an image; always unmount, detach and delete it afterwards."""
    fs = FsImage(image, mountpoint, fstype, size_bytes, direct_io)
    fs.create()
    try:
        fs.attach()
        yield fs
    finally:
        fs.detach()
        image.unlink(missing_ok=True)


def cleanup_stale(directory: Path) -> None:
    """Unmount and detach whatever an interrupted cell left under ``directory``."""
    for line in Path("/proc/mounts").read_text().splitlines():
        mnt = line.split()[1].replace("\\040", " ")
        if mnt.startswith(str(directory) + os.sep):
            subprocess.run(["umount", "-l", mnt], check=False)
    out = subprocess.run(["losetup", "--list", "--noheadings", "--output", "NAME,BACK-FILE"],
                         capture_output=True, text=True).stdout
    for line in out.splitlines():
        parts = line.split(None, 1)
        if len(parts) == 2 and parts[1].startswith(str(directory) + os.sep):
            subprocess.run(["losetup", "--detach", parts[0]], check=False)
