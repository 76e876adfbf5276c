"""The bare testbed on an NVMe namespace the user named (``testbeds.bare.device``).

Instead of a loop-mounted image, a bare cell can run on a real SSD's namespace, as a vm cell
runs on its emulated one: SlimIO's ``nvme`` backend writes its generic char device
(``/dev/ngXnY``, io_uring passthru) with FDP placement where the device has FDP enabled, the
baseline runs on ``testbeds.bare.filesystem`` made on the namespace, and the cell records the
FDP statistics before and after, the NVMe command trace and the device roofline
(:class:`vmstorage.DeviceMonitor`, :func:`vmstorage.roofline`).

The framework never writes to a device the user did not name, and never to one that holds
something the user did not give up. :func:`problems` refuses, at planning time (the plan
stage calls it) and again in the cell before its first write:

* a path that is not an NVMe namespace (a partition, another kind of disk, nothing);
* a namespace that holds the root file system, is mounted or used as swap, or is held by
  device mapper or MD: always (unmount it first; the root disk never);
* a namespace that holds a file system or a partition table, unless
  ``testbeds.bare.i_own_this_device`` names the same device. A file system this framework
  made itself (labelled :data:`OWN_LABEL`, by a previous cell on this device) is not
  refused;
* in the cell, a namespace that is not the one planned (its ``wwid``): a cell that lands on
  another machine never writes that machine's disk of the same name.

:func:`gather` reads the facts (sysfs, blkid's probe, lsblk, nvme-cli), :func:`problems`
judges them (pure, tested on captured outputs), :func:`prepare` acts. Standard library only:
it runs where the cell runs, and in the VM test that stands in for a real SSD.
"""

from __future__ import annotations

import json
import os
import platform
import re
import subprocess
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from . import fdp, layout
from .provision import CTRATT_FDPS, MKFS_FORCE, MOUNT_OPTIONS, mkfs_options
from ..plan.cellplan import NamedDevice, Slimio, is_slimio, on_file_system
from .vmstorage import GuestError, run_tool

# The label of the file systems the baseline's cells make on the device: a signature with
# it was left by a cell of this framework, and the next cell may format over it.
OWN_LABEL = "slimio-repro"
LABEL_OPTION = {"f2fs": "-l", "ext4": "-L"}
NAMESPACE_NAME = re.compile(r"nvme(?P<ctrl>\d+)n(?P<ns>\d+)")
# What the root file system's mount point looks like in lsblk's MOUNTPOINTS.
ROOT = "/"


@dataclass(frozen=True)
class Facts:
    """What the named device is, read before anything is written (:func:`gather`)."""
    device: str                      # as named
    path: str                        # the device node it resolves to
    exists: bool
    is_block: bool
    is_partition: bool
    namespace: bool                  # named like an NVMe namespace (nvmeXnY)
    size_bytes: int | None
    logical_block_size_bytes: int | None
    wwid: str | None
    fstype: str                      # blkid's probe of the device itself
    label: str
    pttype: str
    probe_error: str                 # why blkid could not probe it (then nothing is known)
    # lsblk's tree under the device: its partitions and holders, and every mount point
    # (file systems and [SWAP]) of the device and of them.
    children: tuple[dict, ...]
    mountpoints: tuple[str, ...]
    controller: str | None
    passthru_device: str | None
    passthru_is_char: bool
    ctratt: int | None
    serial: str | None
    model: str | None
    endurance_group: int | None
    # Placement ids the namespace may use (nvme fdp status); empty without FDP enabled.
    fdp_placement_ids: tuple[int, ...]
    fdp_error: str                   # why FDP is not usable, when it is not
    filesystems_available: tuple[str, ...]

    @property
    def fdp(self) -> bool:
        return bool((self.ctratt or 0) & CTRATT_FDPS) and bool(self.fdp_placement_ids)

    def as_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "Facts":
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in data.items()})


def _run(cmd: list[str]) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    except FileNotFoundError as exc:
        raise GuestError(f"`{cmd[0]}` is not installed: the bare testbed on a device needs "
                         "util-linux and nvme-cli (make setup-host)") from exc


def blkid_probe(path: str) -> dict[str, str]:
    """libblkid's low-level probe of ``path`` (``blkid -p``: the device itself, not the
    cache): TYPE, LABEL, PTTYPE..., empty when it finds no signature."""
    proc = _run(["blkid", "-p", "-o", "export", path])
    if proc.returncode == 2 and not proc.stderr.strip():
        return {}
    if proc.returncode != 0:
        raise GuestError(f"`blkid -p {path}` failed ({proc.returncode}): {proc.stderr.strip()}"
                         " (reading a device needs root)")
    return dict(line.split("=", 1) for line in proc.stdout.splitlines() if "=" in line)


def _lsblk_tree(path: str) -> tuple[tuple[dict, ...], tuple[str, ...]]:
    """The device's children (partitions, holders) and the mount points of it and them."""
    proc = _run(["lsblk", "--json", "--output", "PATH,TYPE,FSTYPE,MOUNTPOINTS", path])
    if proc.returncode != 0:
        raise GuestError(f"`lsblk {path}` failed ({proc.returncode}): {proc.stderr.strip()}")
    children, mounts = [], []

    def walk(node: dict, depth: int) -> None:
        mounts.extend(m for m in node.get("mountpoints") or () if m)
        if depth:
            children.append({"path": node["path"], "type": node["type"],
                             "fstype": node.get("fstype") or ""})
        for child in node.get("children") or ():
            walk(child, depth + 1)
    for top in json.loads(proc.stdout)["blockdevices"]:
        walk(top, 0)
    return tuple(children), tuple(dict.fromkeys(mounts))


def _filesystems_available() -> tuple[str, ...]:
    """The file systems of :data:`MKFS_FORCE` this kernel mounts and whose mkfs is here."""
    known = {line.split()[-1] for line in Path("/proc/filesystems").read_text().splitlines()}
    out = []
    for fs in MKFS_FORCE:
        kernel = fs in known or _run(["modinfo", "-F", "name", fs]).returncode == 0
        if kernel and any(Path(d, f"mkfs.{fs}").exists()
                          for d in ("/usr/sbin", "/sbin", "/usr/bin", "/bin")):
            out.append(fs)
    return tuple(out)


def gather(device: str) -> Facts:
    """Read the facts of ``device`` (reads only; needs root for blkid and nvme-cli)."""
    path = os.path.realpath(device)
    exists = os.path.exists(path)
    name = Path(path).name
    sysfs = Path("/sys/class/block") / name
    is_block = exists and Path(path).is_block_device()
    m = NAMESPACE_NAME.fullmatch(name)
    facts = dict(device=device, path=path, exists=exists, is_block=is_block,
                 is_partition=(sysfs / "partition").exists(), namespace=m is not None,
                 size_bytes=None, logical_block_size_bytes=None, wwid=None, fstype="",
                 label="", pttype="", probe_error="", children=(), mountpoints=(), controller=None,
                 passthru_device=None, passthru_is_char=False, ctratt=None, serial=None,
                 model=None, endurance_group=None, fdp_placement_ids=(), fdp_error="",
                 filesystems_available=_filesystems_available())
    if not is_block:
        return Facts(**facts)
    try:
        probe, probe_error = blkid_probe(path), ""
    except GuestError as exc:
        probe, probe_error = {}, str(exc)
    children, mounts = _lsblk_tree(path)
    facts.update(size_bytes=int((sysfs / "size").read_text()) * 512,
                 logical_block_size_bytes=int((sysfs / "queue" / "logical_block_size")
                                              .read_text()),
                 wwid=(sysfs / "wwid").read_text().strip() if (sysfs / "wwid").exists()
                 else None,
                 fstype=probe.get("TYPE", ""), label=probe.get("LABEL", ""),
                 pttype=probe.get("PTTYPE", ""), probe_error=probe_error, children=children,
                 mountpoints=mounts)
    if m is None:
        return Facts(**facts)
    controller = f"/dev/nvme{m['ctrl']}"
    passthru = f"/dev/ng{m['ctrl']}n{m['ns']}"
    facts.update(controller=controller, passthru_device=passthru,
                 passthru_is_char=Path(passthru).is_char_device())
    ctrl = json.loads(run_tool(["nvme", "id-ctrl", controller, "-o", "json"]))
    ns = json.loads(run_tool(["nvme", "id-ns", path, "-o", "json"]))
    facts.update(ctratt=ctrl["ctratt"], serial=str(ctrl.get("sn", "")).strip(),
                 model=str(ctrl.get("mn", "")).strip(), endurance_group=ns.get("endgid"))
    if ctrl["ctratt"] & CTRATT_FDPS:
        status = _run(["nvme", "fdp", "status", path, "-o", "json"])
        if status.returncode == 0:
            facts["fdp_placement_ids"] = tuple(fdp.parse_status(status.stdout))
        else:
            facts["fdp_error"] = ("FDP is not enabled in its endurance group "
                                  f"(`nvme fdp status` says: {status.stderr.strip()})")
    else:
        facts["fdp_error"] = "its controller does not support FDP (CTRATT bit 19 is clear)"
    return Facts(**facts)


def owned(facts: Facts, i_own_this_device: str | None) -> bool:
    """Whether ``i_own_this_device`` names the device (the same node, however spelt)."""
    return i_own_this_device is not None and \
        os.path.realpath(i_own_this_device) == facts.path


def ours(facts: Facts) -> bool:
    """A file system a cell of this framework made (and nothing else on the device)."""
    return bool(facts.fstype) and facts.label == OWN_LABEL and not facts.pttype \
        and not facts.children


def problems(facts: Facts, i_own_this_device: str | None, system: str | None = None,
             filesystem: str | None = None, slimio: Slimio | None = None,
             planned: NamedDevice | None = None) -> list[str]:
    """Everything that forbids writing the device, each named with what to do (empty: go).
    With ``system``, also what that system needs of it (``filesystem`` for the baseline's,
    ``slimio`` for SlimIO's layout and placement); with ``planned``, that it is the device
    the plan was made for."""
    dev = facts.device
    key = "testbeds.bare.device"
    if not facts.exists:
        return [f"{key} {dev} does not exist on {platform.node()}: name the NVMe namespace the "
                "cells may overwrite (`nvme list`), and run the pipeline on the machine "
                "that holds it"]
    if not facts.is_block:
        return [f"{key} {dev} is not a block device: name an NVMe namespace (/dev/nvmeXnY)"]
    out = []
    if facts.is_partition:
        out.append(f"{key} {dev} is a partition: name the whole NVMe namespace "
                   "(/dev/nvmeXnY); SlimIO writes its LBAs from 0")
    elif not facts.namespace:
        out.append(f"{key} {dev} ({facts.path}) is not an NVMe namespace (/dev/nvmeXnY): "
                   "SlimIO writes NVMe passthru commands with FDP placement")
    if ROOT in facts.mountpoints:
        out.append(f"{dev} holds this machine's root file system: the framework never "
                   "writes it; name another namespace")
    elif facts.mountpoints:
        mounts = [m for m in facts.mountpoints if m != "[SWAP]"]
        undo = "; ".join([f"umount {m}" for m in mounts]
                         + (["swapoff " + dev] if "[SWAP]" in facts.mountpoints else []))
        out.append(f"{dev} is in use (mounted at {', '.join(facts.mountpoints)}): `{undo}` "
                   "first (an interrupted cell leaves its file system mounted in its "
                   "<cell>.partial/mnt); the framework never writes a device in use, "
                   "even one testbeds.bare.i_own_this_device names")
    held = [c for c in facts.children if c["type"] != "part"]
    if held:
        out.append(f"{dev} is held by {', '.join(c['path'] + ' (' + c['type'] + ')' for c in held)}"
                   ": remove those first (dmsetup, mdadm); the framework never writes a "
                   "device in use")
    if out and (facts.is_partition or not facts.namespace):
        return out
    if i_own_this_device is not None and not owned(facts, i_own_this_device):
        out.append(f"testbeds.bare.i_own_this_device is {i_own_this_device}, which is not "
                   f"{key} {dev}: it must name the same device")
    if facts.probe_error:
        out.append(f"what {dev} holds cannot be read ({facts.probe_error}): the framework "
                   "does not write a device it cannot probe")
    contents = []
    if facts.fstype and not ours(facts):
        contents.append(f"a {facts.fstype} file system"
                        + (f" labelled {facts.label!r}" if facts.label else ""))
    if facts.pttype:
        contents.append(f"a {facts.pttype} partition table")
    parts = [c["path"] for c in facts.children if c["type"] == "part"]
    if parts:
        contents.append(f"partitions ({', '.join(parts)})")
    if contents and not owned(facts, i_own_this_device):
        out.append(f"{dev} holds {' and '.join(contents)}, which its cells would overwrite. "
                   "If it may all be lost, set testbeds.bare.i_own_this_device: "
                   f"{dev}; else name an empty namespace")
    if planned is not None and facts.wwid != planned.wwid:
        out.append(f"{dev} is not the device the cell was planned for (wwid {planned.wwid}, "
                   f"here {facts.wwid}): run the cell on the machine that planned it")
    if system is None:
        return out
    if on_file_system(system) and filesystem not in facts.filesystems_available:
        out.append(f"testbeds.bare.filesystem {filesystem} cannot be made and mounted here "
                   f"(this kernel and its mkfs tools offer {list(facts.filesystems_available)}):"
                   " install its tools (f2fs-tools, e2fsprogs) or choose one of those")
    if is_slimio(system) and slimio is not None:
        if slimio.backend == "nvme" and not facts.passthru_is_char:
            out.append(f"{facts.passthru_device}, {dev}'s generic char device, is missing: "
                       "SlimIO's nvme backend needs it (kernel 5.19 or later, "
                       "CONFIG_NVME_CORE)")
        if facts.logical_block_size_bytes != slimio.lba_size_bytes:
            out.append(f"{dev} has {facts.logical_block_size_bytes}-byte LBAs and "
                       f"slimio.lba_size is {slimio.lba_size_bytes}: set it to the "
                       "namespace's (or reformat the namespace: nvme format --lbaf)")
        if facts.size_bytes is not None and slimio.device_bytes > facts.size_bytes:
            out.append(f"SlimIO's layout needs {slimio.device_bytes >> 20} MiB and {dev} has "
                       f"{facts.size_bytes >> 20} MiB: lower slimio.wal_size_mb/slot_size_mb")
        pids = sorted({p for p in asdict(slimio.placement_ids).values() if p >= 0})
        if pids and not facts.fdp:
            out.append(f"system {system} places its writes by FDP (placement ids {pids}) and "
                       f"{dev} cannot: {facts.fdp_error}. Run slimio-nofdp instead, or "
                       "enable FDP on the device")
        elif pids and pids[-1] >= len(facts.fdp_placement_ids):
            out.append(f"system {system} uses placement ids {pids} and {dev} has "
                       f"{len(facts.fdp_placement_ids)}: lower slimio.placement")
    return out


def settings(facts: Facts, i_own_this_device: str | None, filesystem: str, roofline,
             fio_bin: str) -> NamedDevice:
    """The plan's view of the device (what the cells need of it)."""
    return NamedDevice(namespace=facts.path, passthru_device=facts.passthru_device,
                       controller=facts.controller, endurance_group=facts.endurance_group or 1,
                       fdp=facts.fdp, wwid=facts.wwid, serial=facts.serial, model=facts.model,
                       filesystem=filesystem, roofline=roofline, fio_bin=fio_bin,
                       i_own_this_device=i_own_this_device)


def mkfs_command(filesystem: str, path: str) -> list[str]:
    return [f"mkfs.{filesystem}", *mkfs_options(filesystem), LABEL_OPTION[filesystem],
            OWN_LABEL, path]


def provision(device: NamedDevice, system: str, slimio: Slimio | None, mountpoint: Path,
              raw_dir: Path | None = None, before_changes=None) -> dict:
    """Check the device again (refusing as at planning, and a device that is not the one
    planned), then prepare it for ``system``: I/O scheduler ``none``, existing signatures
    wiped (only where :func:`problems` let them be overwritten), and for a file-system
    system the file system made (labelled :data:`OWN_LABEL`) and mounted at
    ``mountpoint``. ``before_changes`` is called once the checks passed, before the first
    write. The record goes to ``raw_dir``."""
    if os.geteuid() != 0:
        raise GuestError(f"writing {device.namespace} needs root")
    facts = gather(device.namespace)
    found = problems(facts, device.i_own_this_device, system, device.filesystem, slimio,
                     planned=device)
    if found:
        raise GuestError(f"refusing to write {device.namespace} for a {system} cell:\n- "
                         + "\n- ".join(found))
    if raw_dir is not None:
        # nvme-cli's own JSON of the namespace, and with FDP its configuration and handle
        # status (the roofline takes its placement index from the status).
        (raw_dir / layout.RAW_NVME_ID_NS).write_text(
            run_tool(["nvme", "id-ns", facts.path, "-o", "json"]))
        if facts.fdp:
            (raw_dir / layout.RAW_FDP_CONFIGS).write_text(run_tool(
                ["nvme", "fdp", "configs", facts.controller, "-e",
                 str(facts.endurance_group or 1), "-o", "json"]))
            (raw_dir / layout.RAW_FDP_STATUS).write_text(
                run_tool(["nvme", "fdp", "status", facts.path, "-o", "json"]))
    if before_changes is not None:
        before_changes()
    changed = []
    scheduler = Path("/sys/block") / Path(facts.path).name / "queue" / "scheduler"
    if scheduler.exists() and "[none]" not in scheduler.read_text():
        scheduler.write_text("none\n")
        changed.append(f"echo none > {scheduler}")
    if facts.fstype or facts.pttype:
        cmd = ["wipefs", "--all", facts.path]
        run_tool(cmd)
        changed.append(" ".join(cmd))
    if on_file_system(system):
        cmd = mkfs_command(device.filesystem, facts.path)
        run_tool(cmd)
        changed.append(" ".join(cmd))
        mountpoint.mkdir(parents=True, exist_ok=True)
        cmd = ["mount", "-t", device.filesystem, "-o", MOUNT_OPTIONS, facts.path,
               str(mountpoint)]
        run_tool(cmd)
        changed.append(" ".join(cmd))
    record = {"system": system, "facts": facts.as_dict(), "changed": changed}
    if raw_dir is not None:
        (raw_dir / layout.RAW_PROVISION).write_text(json.dumps(record, indent=2) + "\n")
    return record


def with_mountpoint(device: NamedDevice, mountpoint: Path) -> NamedDevice:
    """The device's settings for one cell, whose file system is mounted at ``mountpoint``."""
    return replace(device, mountpoint=str(mountpoint))
