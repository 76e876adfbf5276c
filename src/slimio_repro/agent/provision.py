"""Provision a cell's VM: check the guest and its NVMe device, prepare the namespace.

The first stage of a vm cell, run inside the guest by the same ``run-cell`` that runs the
cell (one SSH round trip, no per-step connection). It

1. checks that the guest is what the host booted: the box's identity (the hash of its
   inputs, baked into the box as :data:`layout.BOX_ID_FILE`) and the kernel the box was
   built with, both passed by the host;
2. identifies the device and checks it against the cell's device profile: the namespace is a
   block device, its LBA size, the controller's FDP support (Identify Controller CTRATT bit
   19), and with FDP the configuration (reclaim groups, handles, reclaim unit size) and the
   namespace's handle status; nvme-cli's JSON of these goes into the cell's raw directory;
   and a cell's namespace must never have been written since it was made blank (its FDP
   statistics' host bytes written are what they were then: 0 when the host made its backing
   file for this VM, the count at the reset for a guest kept from an earlier cell);
3. prepares the namespace for the cell's system: I/O scheduler ``none`` (as in the paper),
   then F2FS made and mounted for the baseline (only on a blank namespace, or one that
   already holds F2FS), or the raw namespace for SlimIO (refused if mounted or carrying any
   file-system signature: SlimIO writes raw LBAs).

Every check that fails is named in one error. Idempotent: on a provisioned guest it changes
nothing (``changed`` is empty). It only ever touches the namespace the plan names.

:func:`gather` reads the facts (sysfs, nvme-cli, blkid, findmnt), :func:`problems` judges
them (pure, tested on captured outputs), :func:`prepare` acts.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path

from . import fdp, layout
from ..plan.cellplan import Vm, on_file_system
from .vmstorage import GuestError, fdp_stats, run_tool

# Identify Controller CTRATT bit 19: Flexible Data Placement supported.
CTRATT_FDPS = 1 << 19
# The baseline's F2FS (and baseline-ext4's EXT4): mounted noatime (like the bare testbed's
# ext4); mkfs's force option (-f, -F) is only ever used on a namespace that is blank or
# already of that file system.
MOUNT_OPTIONS = "noatime"
MKFS_FORCE = {"f2fs": ("-f",), "ext4": ("-F", "-q")}


def mkfs_options(filesystem: str) -> tuple[str, ...]:
    return MKFS_FORCE.get(filesystem, ())


@dataclass(frozen=True)
class GuestFacts:
    """What the guest and its namespace are, as read before anything is changed."""
    box_id: str | None
    kernel: str
    namespace: str
    namespace_is_block: bool
    logical_block_size_bytes: int | None
    ctratt: int | None
    fdp_configs: tuple[dict, ...]
    fdp_placement_ids: tuple[int, ...]
    # The FDP statistics' host bytes written so far (None without FDP): 0 on a namespace
    # nothing has written since it was created.
    fdp_host_bytes_written: int | None
    scheduler: str | None
    fstype: str
    mounted_at: str


def _sysfs(namespace: str, name: str) -> str | None:
    try:
        return (Path("/sys/block") / Path(namespace).name / "queue" / name).read_text().strip()
    except OSError:
        return None


def gather(settings: Vm, raw_dir: Path | None = None) -> GuestFacts:
    """Read the facts; with ``raw_dir``, keep nvme-cli's JSON there (Identify Namespace, and
    with FDP the configurations and the handle status)."""
    ns = settings.namespace
    is_block = Path(ns).is_block_device()
    box_id = layout.BOX_ID_FILE.read_text().strip() if layout.BOX_ID_FILE.is_file() else None
    lba = _sysfs(ns, "logical_block_size")
    ctratt = configs = status = written = None
    if is_block:
        ctratt = json.loads(run_tool(["nvme", "id-ctrl", settings.controller, "-o",
                                      "json"]))["ctratt"]
        if raw_dir is not None:
            (raw_dir / layout.RAW_NVME_ID_NS).write_text(
                run_tool(["nvme", "id-ns", ns, "-o", "json"]))
        if settings.fdp and ctratt & CTRATT_FDPS:
            configs = run_tool(["nvme", "fdp", "configs", settings.controller, "-e",
                                str(settings.endurance_group), "-o", "json"])
            status = run_tool(["nvme", "fdp", "status", ns, "-o", "json"])
            written = fdp.parse_stats(fdp_stats(settings))["host_bytes_written"]
            if raw_dir is not None:
                (raw_dir / layout.RAW_FDP_CONFIGS).write_text(configs)
                (raw_dir / layout.RAW_FDP_STATUS).write_text(status)
    blkid = subprocess.run(["blkid", "-p", "-o", "value", "-s", "TYPE", ns],
                           capture_output=True, text=True) if is_block else None
    if blkid is not None and blkid.returncode not in (0, 2):
        raise GuestError(f"`blkid -p {ns}` failed ({blkid.returncode}): {blkid.stderr.strip()}")
    mounted = subprocess.run(["findmnt", "-n", "-o", "TARGET", "--source", ns],
                             capture_output=True, text=True) if is_block else None
    return GuestFacts(
        box_id=box_id, kernel=platform.release(), namespace=ns, namespace_is_block=is_block,
        logical_block_size_bytes=int(lba) if lba else None, ctratt=ctratt,
        fdp_configs=tuple(fdp.parse_configs(configs)) if configs else (),
        fdp_placement_ids=tuple(fdp.parse_status(status)) if status else (),
        fdp_host_bytes_written=written,
        scheduler=_sysfs(ns, "scheduler"),
        fstype=blkid.stdout.strip() if blkid is not None else "",
        mounted_at=mounted.stdout.strip() if mounted is not None else "")


def problems(facts: GuestFacts, settings: Vm, system: str, expect_box_id: str | None,
             expect_kernel: str | None, blank_at: int | None = None) -> list[str]:
    """Everything wrong with the guest or its device for ``system``, each named (empty: go).
    ``blank_at`` (a cell's): the host bytes written in the namespace's FDP statistics when it
    was made blank; any more and it was written since."""
    out = []
    profile = settings.device
    if expect_box_id is not None and facts.box_id != expect_box_id:
        found = facts.box_id or f"(none: no {layout.BOX_ID_FILE})"
        out.append(f"the guest is box {found}, but the host booted box {expect_box_id}: "
                   "rebuild the box "
                   "(`snakemake --cores all build_guest_box`) or remove stale Vagrant boxes "
                   "(`vagrant box list`)")
    if expect_kernel is not None and facts.kernel != expect_kernel:
        out.append(f"the guest runs kernel {facts.kernel}, but the box was built with "
                   f"{expect_kernel}")
    if not facts.namespace_is_block:
        out.append(f"{facts.namespace} is not a block device in the guest: the VM has no "
                   "emulated NVMe namespace (check the device profile and the QEMU arguments "
                   "in vm.json)")
        return out
    if facts.logical_block_size_bytes != profile.lba_size_bytes:
        out.append(f"{facts.namespace} has {facts.logical_block_size_bytes}-byte LBAs; the "
                   f"device profile {profile.name} asks for {profile.lba_size_bytes}")
    has_fdp = bool((facts.ctratt or 0) & CTRATT_FDPS)
    if has_fdp != profile.fdp:
        out.append(f"the controller's FDP support (CTRATT bit 19) is {has_fdp}, but the "
                   f"device profile {profile.name} says fdp: {profile.fdp}")
    if profile.fdp and has_fdp:
        want = profile.reported_fdp_config()
        got = {k: facts.fdp_configs[0][k] for k in want} if facts.fdp_configs else None
        if got != want:
            out.append(f"the device's FDP configuration {got} does not match the device "
                       f"profile {profile.name} ({want})")
        if len(facts.fdp_placement_ids) != profile.reclaim_unit_handles:
            out.append(f"{facts.namespace} may use placement ids "
                       f"{list(facts.fdp_placement_ids)}, but the device profile has "
                       f"{profile.reclaim_unit_handles} handles (fdp.ruhs of the namespace)")
    if blank_at is not None and (facts.fdp_host_bytes_written or 0) != blank_at:
        out.append(f"{facts.namespace} has been written before the cell "
                   f"({facts.fdp_host_bytes_written} host bytes in its FDP statistics, "
                   f"{blank_at} when it was made blank): a cell starts on a namespace "
                   "never written since it was made blank")
    if on_file_system(system):
        if facts.fstype not in ("", settings.filesystem):
            out.append(f"{facts.namespace} carries a {facts.fstype} signature; the baseline "
                       f"only formats a blank namespace or keeps an existing "
                       f"{settings.filesystem}. Use a fresh VM (the pipeline makes one per cell)")
    else:
        if facts.mounted_at:
            out.append(f"{facts.namespace} is mounted at {facts.mounted_at}; {system} needs "
                       "the raw namespace. Use a fresh VM")
        if facts.fstype:
            out.append(f"{facts.namespace} carries a {facts.fstype} signature, and SlimIO "
                       "writes raw LBAs. Use a fresh VM (the pipeline makes one per cell)")
    return out


def prepare(facts: GuestFacts, settings: Vm, system: str) -> list[str]:
    """Make the namespace what ``system`` needs; return the commands that changed something."""
    ns, changed = facts.namespace, []
    scheduler = Path("/sys/block") / Path(ns).name / "queue" / "scheduler"
    if facts.scheduler is not None and "[none]" not in facts.scheduler:
        scheduler.write_text("none\n")
        changed.append(f"echo none > {scheduler}")
    if not on_file_system(system):
        return changed
    if facts.fstype == "":
        cmd = [f"mkfs.{settings.filesystem}", *mkfs_options(settings.filesystem), ns]
        run_tool(cmd)
        changed.append(" ".join(cmd))
    mountpoint = Path(settings.mountpoint)
    if not mountpoint.is_dir():
        mountpoint.mkdir(parents=True, mode=0o755)
        changed.append(f"mkdir -p {mountpoint}")
    if facts.mounted_at != str(mountpoint):
        cmd = ["mount", "-t", settings.filesystem, "-o", MOUNT_OPTIONS, ns, str(mountpoint)]
        run_tool(cmd)
        changed.append(" ".join(cmd))
    return changed


def provision(settings: Vm, system: str, raw_dir: Path | None = None,
              expect_box_id: str | None = None, expect_kernel: str | None = None,
              blank_at: int | None = None, before_changes=None) -> dict:
    """Check, then prepare (see the module docstring); the record goes to ``raw_dir``.
    ``blank_at`` (a cell's: 0 in a fresh VM): refuse a namespace written since it was made
    blank, when its FDP statistics counted ``blank_at`` host bytes. ``before_changes`` is
    called once the checks passed and before anything is written (a cell starts its device
    trace there, so that the trace holds every write the namespace ever received)."""
    if os.geteuid() != 0:
        raise GuestError("provisioning the guest's namespace needs root (run it with sudo)")
    facts = gather(settings, raw_dir)
    found = problems(facts, settings, system, expect_box_id, expect_kernel, blank_at)
    if found:
        raise GuestError("the guest is not ready for a " + system + " cell:\n- "
                         + "\n- ".join(found))
    if before_changes is not None:
        before_changes()
    record = {"system": system, "facts": asdict(facts), "changed": prepare(facts, settings,
                                                                           system)}
    if raw_dir is not None:
        (raw_dir / layout.RAW_PROVISION).write_text(json.dumps(record, indent=2) + "\n")
    return record
