"""Whether the file systems a cell writes to can hold what it writes.

The plan estimates what each cell writes (:class:`~slimio_repro.plan.cellplan.Disk`,
:mod:`slimio_repro.plan.space`) and, where Snakemake plans, refuses a run whose directories
cannot hold it. Each cell checks its own needs again, with the same message, on the host that
runs it and before it writes anything (the disks there may have filled since, and on a
cluster its node's work_dir and libvirt pool are not the submit host's): a bare cell in
:func:`.cell_runner.run`, a vm cell in :func:`slimio_repro.testbed.vm.run_in_vm`.

A :class:`Need` is bytes that go into a directory. Directories on one file system add their
needs; a directory that does not exist yet is checked where it would be made, at its
nearest existing parent. What counts as free is what an unprivileged user may still write
(``statvfs``' f_bavail: libvirt's QEMU writes the NVMe backing file as its own user).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ..plan.cellplan import CellPlan

GIB = 1 << 30
MIB = 1 << 20
# A VM directory besides the NVMe backing file, the box's kernel and initrd and raw.tar:
# Vagrant's state, vm.json, the Vagrantfile and the console log (12 KiB measured, `du -sB1`
# of a cell's directory under /var/tmp/slimio-repro/vm without those files).
VM_DIR_BYTES = 4 * MIB

# The settings that name each directory, and what else to do than free space there.
RESULTS, WORK_DIR, POOL = "results_dir", "testbeds.vm.work_dir", "testbeds.vm.storage_pool"
ADVICE = {
    RESULTS: "point results_dir at a larger file system (--config results_dir=DIR)",
    WORK_DIR: "point testbeds.vm.work_dir at a larger file system (a directory libvirt's "
              "QEMU can reach, e.g. under /var/tmp)",
    POOL: "name a libvirt storage pool on a larger file system in testbeds.vm.storage_pool "
          "(`virsh pool-list`; `virsh vol-list POOL` shows what this one holds)",
}


class SpaceError(RuntimeError):
    pass


@dataclass(frozen=True)
class Need:
    """``bytes`` that go into ``directory``, which the setting ``key`` names."""
    key: str
    directory: Path
    bytes: int
    # What they are, for the message.
    what: str


def gib(n: int) -> str:
    return f"{n / GIB:.2f} GiB"


def nearest_existing(path: Path) -> Path:
    path = Path(os.path.abspath(path))
    while not path.exists():
        path = path.parent
    return path


def mount_point(path: Path) -> Path:
    """The mount point of the file system ``path`` (an existing path) is on."""
    path = Path(os.path.realpath(path))
    dev = path.stat().st_dev
    while path != path.parent and path.parent.stat().st_dev == dev:
        path = path.parent
    return path


def fs_type(mount: Path) -> str:
    """The type of the file system mounted at ``mount`` (the last mount there wins)."""
    found = "unknown"
    try:
        for line in Path("/proc/self/mounts").read_text().splitlines():
            fields = line.split()
            if len(fields) > 2 and fields[1].replace("\\040", " ") == str(mount):
                found = fields[2]
    except OSError:
        pass
    return found


def free_bytes(path: Path) -> int:
    """What an unprivileged user may still write on the file system of ``path``."""
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def shortfalls(needs: list[Need], who: str = "the run") -> list[str]:
    """One message per directory whose file system cannot hold what ``who`` writes to it
    and to every other directory of ``needs`` on the same file system."""
    needs = [n for n in needs if n.bytes > 0]
    groups: dict[int, list[tuple[Need, Path]]] = {}
    for n in needs:
        at = nearest_existing(n.directory)
        groups.setdefault(at.stat().st_dev, []).append((n, at))
    out = []
    for group in groups.values():
        at = group[0][1]
        total, free = sum(n.bytes for n, _ in group), free_bytes(at)
        if total <= free:
            continue
        mount = mount_point(at)
        fs = f"{fs_type(mount)} mounted at {mount}"
        for n, where in group:
            made = "" if where == Path(os.path.abspath(n.directory)) else \
                f" (not there yet: checked at {where})"
            others = "".join(f" and {gib(m.bytes)} under {m.key} {m.directory}"
                             for m, _ in group if m is not n)
            out.append(
                f"{n.key} {n.directory}{made}: {who} writes {gib(n.bytes)} there ({n.what})"
                f"{others}, {gib(total)} in all on its file system ({fs}), which has "
                f"{gib(free)} free: free space there, {ADVICE[n.key]}, or run a smaller "
                "profile")
    return out


def check(needs: list[Need], who: str = "the run") -> None:
    found = shortfalls(needs, who)
    if found:
        raise SpaceError("\n".join(found))


def vm_dir_contents(nvme_bytes: int) -> str:
    nvme = f"its NVMe backing file, {gib(nvme_bytes)} of it written, " if nvme_bytes else ""
    return f"{nvme}the box's kernel and initrd and the tar of its raw directory"


def cell_needs(plan: CellPlan, out_dir: Path, work_dir: Path | None = None,
               pool_dir: Path | None = None, boot_bytes: int = 0,
               box_volume_bytes: int = 0) -> list[Need]:
    """What the cell ``plan`` writes, and where: its raw directory ``out_dir`` (a bare cell's
    image in it too); a vm cell's VM directory under ``work_dir`` (with the box's kernel and
    initrd, ``boot_bytes``) and its guest's root-disk overlay in the libvirt pool's
    ``pool_dir`` (with the box volume, ``box_volume_bytes``, when it is not there yet). None
    for a plan made before the plan estimated it."""
    d = plan.disk
    if d is None:
        return []
    # results_dir, where the raw directory is results_dir/raw/<cell id>.
    results = Path(out_dir).parent
    results = results.parent if results.name == "raw" else results
    if plan.cell.testbed == "bare":
        image = " and its file-system image" if d.storage_bytes else ""
        return [Need(RESULTS, results, d.raw_bytes + d.storage_bytes,
                     f"cell {plan.id}'s raw directory{image}")]
    needs = [Need(RESULTS, results, d.raw_bytes, f"cell {plan.id}'s raw directory")]
    if work_dir is not None:
        needs.append(Need(WORK_DIR, Path(work_dir),
                          d.storage_bytes + d.raw_bytes + boot_bytes + VM_DIR_BYTES,
                          f"cell {plan.id}'s VM directory: {vm_dir_contents(d.storage_bytes)}"))
    if pool_dir is not None:
        box = " and the box volume it is made from" if box_volume_bytes else ""
        needs.append(Need(POOL, Path(pool_dir), d.guest_bytes + box_volume_bytes,
                          f"cell {plan.id}'s guest root-disk overlay{box}"))
    return needs


def check_cell(plan: CellPlan, out_dir: Path, **host) -> None:
    """Refuse to start the cell ``plan`` when a file system it writes cannot hold it
    (:func:`cell_needs`; ``host``: its keyword arguments)."""
    check(cell_needs(plan, out_dir, **host), f"cell {plan.id}")
