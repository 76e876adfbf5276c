"""The inside of a VM cell: the guest's NVMe namespace, its FDP log pages and its trace.

A VM cell runs the same :func:`slimio_repro.cell.run` as the bare testbed, inside the guest
(the host side, :mod:`slimio_repro.vm`, brings the VM up and copies this package in). What
differs is the storage: instead of a loop-mounted image, the cell uses the namespace of the
emulated NVMe SSD that the cell's first stage (:mod:`.provision`) prepared for its system
(and a bare cell on a named device its real namespace the same way: :mod:`.nameddevice`):

* baseline: F2FS on ``/dev/nvme0n1``, mounted at the provisioned mount point, I/O scheduler
  ``none`` (as in the paper);
* slimio, slimio-nofdp: the raw namespace (nothing mounted), written by SlimIO's nvme
  backend through the namespace's generic char device (``/dev/ng0n1``, passthru), or by its
  file backend through the block device; Redis's own small files live on the guest's root
  disk.

Device bytes: passthru commands bypass the block layer's I/O accounting (6.12), so with FDP
the cell's device write counter is the FDP statistics' host bytes written, for every system
alike (the trace showed them equal to the block layer's count for F2FS).

Around the cell, :class:`DeviceMonitor` reads the FDP statistics log page (``nvme fdp
stats``, JSON) before and after and records every NVMe command the guest kernel submits to
the namespace (tracefs event ``nvme/nvme_setup_cmd``, which passthru commands go through
too) into a gzip-compressed trace. Standard library only: the guest has python3 and nothing
else from PyPI except redis-py.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import time
from pathlib import Path

from . import fdp, fsimage, layout
from . import roofline as rooflinemod
from ..plan.cellplan import NamedDevice, Placement, Vm, on_file_system

TRACEFS = Path("/sys/kernel/tracing")
TRACE_EVENT = "nvme/nvme_setup_cmd"
# Discard bios with their sector ranges (the NVMe event prints a DSM's range count only):
# F2FS's and mkfs's discards, replayed by the FTL model. Filtered in the kernel to discards.
DISCARD_EVENT = "block/block_bio_queue"
DISCARD_FILTER = 'rwbs ~ "*D*"'
# SlimIO (passthru, no bio) writes its deallocations here (slimio-trace-marker).
TRACE_MARKER = TRACEFS / "trace_marker"
# Per-CPU ring buffer for the trace. trace_pipe is drained by `cat` while the cell runs; the
# buffer only has to absorb bursts. Overruns are counted and recorded (per_cpu/*/stats).
TRACE_BUFFER_KIB = 65536
# The file-system I/O of the root disk (virtio) is not traced: the event is nvme-only.


class GuestError(RuntimeError):
    pass


def run_tool(cmd: list[str]) -> str:
    """Run a guest tool; its stdout, or a GuestError naming the command and its error."""
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    except FileNotFoundError as exc:
        raise GuestError(f"`{cmd[0]}` is not installed in the guest: rebuild the box "
                         "(testbed/box/packages.txt)") from exc
    if proc.returncode != 0:
        raise GuestError(f"`{' '.join(cmd)}` failed ({proc.returncode}): "
                         f"{(proc.stderr or proc.stdout).strip()}")
    return proc.stdout


def _findmnt(target: Path) -> dict | None:
    proc = subprocess.run(["findmnt", "--json", "--mountpoint", str(target)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        return None
    return json.loads(proc.stdout)["filesystems"][0]


def fdp_stats(settings: Vm | NamedDevice) -> str:
    """``nvme fdp stats -o json`` of the endurance group (the FDP statistics log page)."""
    return run_tool(["nvme", "fdp", "stats", settings.controller, "-e",
                 str(settings.endurance_group), "-o", "json"])


class GuestStorage:
    """The namespace as provisioned for the cell's system (see the module docstring)."""

    def __init__(self, settings: Vm | NamedDevice, system: str, scratch: Path,
                 slimio_backend: str | None = None):
        self.settings = settings
        self.namespace = settings.namespace
        self.block_device = self.namespace
        # SlimIO's device is the raw namespace: its char device for passthru (nvme backend),
        # its block device for the file backend.
        self.passthru = slimio_backend == "nvme"
        self.slimio_device = Path(settings.passthru_device if self.passthru
                                  else self.namespace)
        if self.passthru and not self.slimio_device.is_char_device():
            raise GuestError(f"{self.slimio_device} (testbeds.vm.passthru_device) is not a "
                             f"char device in the guest: is it {self.namespace}'s generic "
                             "device? (ls -l /dev/ng*)")
        self.system = system
        self.fstype = settings.filesystem
        if on_file_system(system):
            self.mountpoint = Path(settings.mountpoint)
            found = _findmnt(self.mountpoint)
            if found is None or found["source"] != self.namespace \
                    or found["fstype"] != self.fstype:
                raise GuestError(
                    f"{self.mountpoint} is not {self.namespace} mounted as {self.fstype} "
                    f"(found {found}); provision the guest for system baseline first "
                    "(python3 -m slimio_repro.agent provision)")
            self.mount_options = found["options"]
            self.data_parent = self.mountpoint
        else:
            if mounted(self.namespace):
                raise GuestError(f"{self.namespace} is mounted; system {system} needs the raw "
                                 "namespace: provision the guest for it")
            self.mountpoint = None
            self.mount_options = None
            self.data_parent = scratch

    def write_bytes(self) -> int:
        """Bytes written to the namespace so far: FDP host bytes written when the device has
        FDP (counts passthru too), else the block layer's count."""
        if self.settings.fdp:
            return fdp.parse_stats(fdp_stats(self.settings))["host_bytes_written"]
        return fsimage.block_stat(self.block_device)[1]

    def read_bytes(self) -> int | None:
        """Bytes read from the namespace so far; None with passthru, which the block layer
        does not count (SlimIO reports its own reads: INFO slimio_recovery_device_bytes)."""
        if self.passthru:
            return None
        return fsimage.block_stat(self.block_device)[0]

    def release(self) -> None:
        """Unmount the file system, if any: the cell is done with the namespace."""
        if self.mountpoint is not None and _findmnt(self.mountpoint) is not None:
            run_tool(["umount", str(self.mountpoint)])

    def remount(self) -> None:
        """Unmount and mount again, so that the next reads come from the device."""
        if self.mountpoint is None:
            # SlimIO reads with O_DIRECT; only the page cache of the root disk could matter.
            Path("/proc/sys/vm/drop_caches").write_text("3\n")
            return
        run_tool(["umount", str(self.mountpoint)])
        run_tool(["mount", "-t", self.fstype, "-o", self.mount_options, self.namespace,
              str(self.mountpoint)])

    def describe(self) -> dict:
        name = Path(self.namespace).name
        queue = Path(f"/sys/block/{name}/queue")
        out = {"testbed": "vm" if isinstance(self.settings, Vm) else "bare",
               "namespace": self.namespace, "system": self.system,
               "slimio_device": str(self.slimio_device) if self.mountpoint is None else None,
               "namespace_bytes": int(Path(f"/sys/block/{name}/size").read_text()) * 512,
               "logical_block_size_bytes": int((queue / "logical_block_size").read_text()),
               "scheduler": (queue / "scheduler").read_text().strip(),
               "write_cache": (queue / "write_cache").read_text().strip()}
        out["filesystem"] = self.fstype if self.mountpoint is not None else "raw"
        if self.mountpoint is not None:
            out["mount_options"] = self.mount_options
            out["findmnt"] = json.loads(run_tool(["findmnt", "--json", str(self.mountpoint)]))
        return out


def mounted(device: str) -> bool:
    """Whether ``device`` is mounted anywhere."""
    proc = subprocess.run(["findmnt", "--source", device], capture_output=True, text=True)
    return proc.returncode == 0


class DeviceMonitor:
    """FDP statistics before/after and the NVMe command trace of one cell."""

    def __init__(self, settings: Vm | NamedDevice, raw_dir: Path):
        self.settings = settings
        self.namespace = settings.namespace
        self.controller = settings.controller
        self.endurance_group = settings.endurance_group
        self.fdp = settings.fdp
        self.raw_dir = raw_dir
        self._cat: subprocess.Popen | None = None
        self._trace_file = raw_dir / "nvme-trace.txt"
        self._trace_filter = f"ctrl_id == {int(self.controller.removeprefix('/dev/nvme'))}"

    def fdp_stats(self) -> str:
        return fdp_stats(self.settings)

    def start(self) -> None:
        """FDP statistics before, and the trace on. (Provisioning identified the device:
        :mod:`.provision` keeps nvme-cli's Identify Namespace, configurations and status.)"""
        if self.fdp:
            (self.raw_dir / layout.RAW_FDP_STATS_BEFORE).write_text(self.fdp_stats())
        self._trace_on()

    def stop(self) -> None:
        self._trace_off()
        if self.fdp:
            (self.raw_dir / layout.RAW_FDP_STATS_AFTER).write_text(self.fdp_stats())
            (self.raw_dir / layout.RAW_FDP_STATUS_AFTER).write_text(run_tool(
                ["nvme", "fdp", "status", self.namespace, "-o", "json"]))

    def cancel(self) -> None:
        try:
            self._trace_off()
        except (GuestError, OSError):
            pass

    # tracefs -----------------------------------------------------------------------------
    def _trace_on(self) -> None:
        if not (TRACEFS / "events").is_dir():
            run_tool(["mount", "-t", "tracefs", "nodev", str(TRACEFS)])
        event = TRACEFS / "events" / TRACE_EVENT
        if not event.is_dir():
            raise GuestError(f"the guest kernel has no tracefs event {TRACE_EVENT}")
        # The namespace's controller only (a host may have other NVMe disks).
        (event / "filter").write_text(self._trace_filter + "\n")
        (TRACEFS / "tracing_on").write_text("0\n")
        (TRACEFS / "buffer_size_kb").write_text(f"{TRACE_BUFFER_KIB}\n")
        (TRACEFS / "trace").write_text("\n")  # clear
        (event / "enable").write_text("1\n")
        discard = TRACEFS / "events" / DISCARD_EVENT
        if not discard.is_dir():
            raise GuestError(f"the guest kernel has no tracefs event {DISCARD_EVENT}")
        (discard / "filter").write_text(DISCARD_FILTER + "\n")
        (discard / "enable").write_text("1\n")
        (TRACEFS / "tracing_on").write_text("1\n")
        out = open(self._trace_file, "wb")
        self._cat = subprocess.Popen(["cat", str(TRACEFS / "trace_pipe")], stdout=out)
        out.close()

    @staticmethod
    def _unread_events() -> int:
        return sum(int(line.split(":", 1)[1])
                   for stats in (TRACEFS / "per_cpu").glob("cpu*/stats")
                   for line in stats.read_text().splitlines() if line.startswith("entries:"))

    def _trace_off(self) -> None:
        if self._cat is None:
            return
        (TRACEFS / "tracing_on").write_text("0\n")
        # Let `cat` drain what is left in the buffer (each CPU's stats count the events not
        # yet read), and write it out, then stop it.
        size = -1
        for _ in range(400):
            now = self._trace_file.stat().st_size
            if now == size and not self._unread_events():
                break
            size = now
            time.sleep(0.05)
        self._cat.terminate()
        self._cat.wait()
        self._cat = None
        (TRACEFS / "events" / TRACE_EVENT / "enable").write_text("0\n")
        (TRACEFS / "events" / TRACE_EVENT / "filter").write_text("0\n")
        (TRACEFS / "events" / DISCARD_EVENT / "enable").write_text("0\n")
        stats = {}
        for cpu_stats in sorted((TRACEFS / "per_cpu").glob("cpu*/stats")):
            fields = dict(line.split(":", 1) for line in cpu_stats.read_text().splitlines()
                          if ":" in line)
            stats[cpu_stats.parent.name] = {k.strip(): v.strip() for k, v in fields.items()}
        lost = sum(int(s.get("overrun", 0)) for s in stats.values())
        (self.raw_dir / layout.RAW_TRACE_STATS).write_text(json.dumps(
            {"event": TRACE_EVENT, "events": [TRACE_EVENT, DISCARD_EVENT, "ftrace/print"],
             "discard_filter": DISCARD_FILTER, "filter": self._trace_filter,
             "namespace_dev": _dev_number(self.namespace),
             "buffer_size_kib": TRACE_BUFFER_KIB,
             "events_lost": lost, "per_cpu": stats,
             "trace_text_bytes": self._trace_file.stat().st_size}, indent=2) + "\n")
        with open(self._trace_file, "rb") as src, \
                gzip.open(self.raw_dir / layout.RAW_TRACE, "wb", compresslevel=6) as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
        self._trace_file.unlink()


def _dev_number(namespace: str) -> str:
    """``MAJ,MIN`` of the namespace's block device, as block trace events print it."""
    return (Path("/sys/block") / Path(namespace).name / "dev").read_text().strip() \
        .replace(":", ",")


def max_command_bytes(namespace: str) -> int:
    """The largest passthru command SlimIO issues on ``namespace`` (slimio_nvme.c): 1 MiB,
    the queue's max_hw_sectors_kb and max_segments pages at most, as a power of two."""
    queue = Path("/sys/block") / Path(namespace).name / "queue"
    limit = min(1 << 20, int((queue / "max_hw_sectors_kb").read_text()) * 1024,
                int((queue / "max_segments").read_text()) * 4096)
    return 1 << (limit.bit_length() - 1)


def roofline(settings: Vm | NamedDevice, raw_dir: Path, placement: Placement | None, commands: list,
             fio_bin: str = layout.GUEST_FIO) -> dict:
    """Measure the device roofline (config testbeds.vm.roofline, or testbeds.bare.roofline
    on a named device) into ``raw_dir`` with ``fio_bin``.

    The cell's On-Demand placement id when its system uses one (SlimIO with FDP), else no
    placement. OVERWRITES the start of the namespace: run it when the cell is done with it.
    """
    job = settings.roofline
    pid = placement.on_demand if placement is not None else -1
    status = raw_dir / layout.RAW_FDP_STATUS
    order = [d["placement_id"] for d in fdp.parse_status_descriptors(status.read_text())] \
        if settings.fdp and status.exists() else []
    summary = rooflinemod.run(fio_bin, settings.passthru_device, raw_dir,
                              size_bytes=job.size_mb << 20,
                              block_size_bytes=max_command_bytes(settings.namespace),
                              iodepth=job.iodepth, placement_id=pid if pid >= 0 else None,
                              placement_ids=order)
    record = json.loads((raw_dir / layout.RAW_ROOFLINE).read_text())
    commands.append({"what": "roofline", "argv": record["command"]})
    return summary


def inside_guest(settings: Vm) -> bool:
    """True inside a guest booted from the pipeline's box that has the cell's namespace.

    The namespace alone is not enough: a host may have a real /dev/nvme0n1, and a vm cell
    formats the namespace it finds.
    """
    return layout.BOX_MARKER.is_dir() and os.path.exists(settings.namespace)
