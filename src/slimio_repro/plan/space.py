"""What a run writes to the host's disks, and whether they can hold it.

Each cell's plan carries an estimate of what it writes (:class:`~.cellplan.Disk`, made by
:func:`disk_of` from the sizing facts of :mod:`.sizing`):

* its storage's backing file: a vm cell's NVMe namespace is a sparse ``nvme.img`` in its VM
  directory (``testbeds.vm.work_dir``), so it takes what the cell writes to the namespace
  (the file system's metadata, the WAL, the snapshots, the roofline), at most the device's
  capacity (a FEMU profile keeps the device in host RAM: nothing); a bare cell's image file,
  in its raw directory's ``.partial``, takes its file system's metadata and what the cell
  writes, at most the image's size;
* its raw directory (under ``results_dir``, and as ``raw.tar`` in the VM directory on its
  way back from the guest), from measured sizes of real raw directories;
* a vm cell's guest root disk, a qcow2 overlay of the box volume in the libvirt pool
  (``testbeds.vm.storage_pool``), which grows by what the guest writes to it: the raw
  directory as it grows there, with the NVMe trace's text before it is compressed.

Cells run one at a time on a host (each takes the whole node), so the VM directory and the
pool need what the largest single cell needs (the pool also the box volume, ~0.8 GB, until
it is uploaded), while ``results_dir`` must hold every cell of the run not yet finished (a
cell whose raw directory exists needs nothing) with its records, and the largest bare
cell's image. :func:`check_space` refuses at planning a run whose directories cannot
(:mod:`slimio_repro.agent.diskspace` checks and words it); each cell checks its own needs
again when it starts (:func:`check_vm_cell_space` for a vm cell). On a cluster the work_dir and
the pool are on the node that runs a cell, not where Snakemake plans: planning checks
``results_dir`` only, and each cell checks the rest on its node.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import replace
from pathlib import Path
from xml.etree import ElementTree

from .. import paths
from ..agent import diskspace
from .cellplan import CellPlan, Disk
from .config import ConfigError
from . import sizing

MIB, GIB = 1 << 20, 1 << 30

# The model's constants. The raw directories measured: the 62 cells of a smoke run (vm
# testbed, TCG), /work/run/results/raw, captured by
#   .venv/bin/python tests/fixtures/raw_sizes.py /work/run/results/raw
# into tests/fixtures/raw_sizes.json (du -sB1 of each raw directory, its NVMe trace's size as
# text and compressed, its device's writes), which tests/test_space.py holds the model to.
#
# A raw directory without its NVMe trace (du -sB1 less nvme-trace.txt.gz): at most 212 KiB
# for redis-benchmark (163,840-217,088 B), 308 KiB for YCSB-A (192,512-315,392 B: its
# histograms and status lines).
RAW_BASE_BYTES = {"redis-benchmark": 256 << 10, "ycsb-a": 384 << 10}
# What grows with the run's length (sampler.csv, the clients' status lines), per SET sent:
# at most 2.2 B in the smoke run under TCG (3-6 k SET/s; faster hosts write less per SET).
RAW_BYTES_PER_SET = 1
# The NVMe trace as text, per SET the cell sends (nvme-trace-stats.json's trace_text_bytes
# over the plan's expected_sets), at most: redis-benchmark 10.6 B (periodical), 40.5 B
# (always); YCSB-A 34.0 B, 242.0 B (its 8 threads' writes are fsynced apart). The bound
# writes no WAL: its trace is provisioning's, at most 35.8 KB (TRACE_FIXED_TEXT_BYTES).
TRACE_TEXT_BYTES_PER_SET = {("redis-benchmark", "periodical"): 12,
                            ("redis-benchmark", "always"): 48,
                            ("ycsb-a", "periodical"): 40, ("ycsb-a", "always"): 256}
TRACE_FIXED_TEXT_BYTES = 64 << 10
# The trace's text over nvme-trace.txt.gz's allocated bytes: at least 8.7 (15-17 for the
# larger traces).
TRACE_GZIP_RATIO = 8
# A cell's records and logs beside its raw directory (results/cells, results/logs, its
# runtime figure): 86 KB a cell in that run (du -sB1 /work/run/results/{cells,logs,
# figures/runtime_rps}, 5,353,472 B for 62 cells).
RECORDS_BYTES_PER_CELL = 128 << 10
# The run's tables, figures, claims, FTL replays and report: 1.7 MB in that run.
RUN_OUTPUTS_BYTES = 8 * MIB
# Under Always-Log a SET may be fsynced alone, and each fsync writes the file's partial last
# block again and the file system's node block, on F2FS (log-structured) each time to new
# blocks: one block per SET beyond the WAL (measured, device-stats.json's
# write_bytes_at_shutdown, always over periodical: YCSB-A 3.9 KB per SET, redis-benchmark's
# 50 clients 0.5 KB). ext4 writes them in place and into its journal, which its metadata
# counts (fs_metadata_bytes); SlimIO's Always-Log pads its batches' tail blocks, counted the
# same way here.
FSYNC_BYTES_PER_SET = 4096
# What the storage receives beyond that payload (the file system's node and checkpoint
# blocks; SlimIO's block headers, metadata and tail blocks each flush writes again): up to 9 %
# (device-stats.json's write_bytes_at_shutdown less provisioning's over the payload: SlimIO's
# YCSB-A cells under Periodical-Log 74.8 MB for 68.5 MB; F2FS's 2.4 % at most).
WRITE_MARGIN = 1.25
# What the guest writes to its root disk besides the cell's raw directory (its journal, the
# code the host copies in, a motivation cell's perf data, the qcow2 overlay's own tables):
# an allowance, not measured (the overlay is deleted with the VM).
GUEST_BASE_BYTES = 256 * MIB
# The box's kernel and initrd (copied into each VM directory) and its volume in the pool, when
# the box is not built yet: 18,354,999 B and 832,176,128 B for the box of commit 18200f4
# (build/box/slimio-guest.box.{vmlinuz,initrd}; `ls -ls` of the pool's volume).
BOOT_FILES_BYTES = 32 * MIB
BOX_VOLUME_BYTES = GIB
# vagrant-libvirt's name for a box's volume contains this (testbed/vm.py, box_volume).
BOX_VOLUME_MARK = "{sha12}_vagrant_box_image_"


def fs_metadata_bytes(filesystem: str, size: int) -> int:
    """What making and mounting the file system writes on a device or image of ``size``
    bytes. F2FS: 21 MB on the smoke profile's 8 GiB namespace (the bound's
    write_bytes_at_shutdown, which is all provisioning's); ext4 (mkfs.ext4 -E
    lazy_itable_init=0,lazy_journal_init=0, as fsimage and provision make it; du -B1 of a
    fresh image): 8.8 MB for 256 MiB, 34 MB for 1 GiB, 69 MB for 4 GiB, 139 MB for 16 GiB
    (its journal), and on a device its inode tables (1/64) too."""
    if filesystem == "f2fs":
        return size // 256 + 16 * MIB
    return size // 28 + 8 * MIB


def written_bytes(config: dict, plan: CellPlan) -> int:
    """What the cell's server writes to its storage: the WAL, every snapshot (the
    WAL-Snapshots Redis's trigger starts, counted with instant rewrites, which start the
    most; the On-Demand-Snapshot; a motivation cell's two), and under Always-Log a block per
    SET for its fsync (:data:`FSYNC_BYTES_PER_SET`; none on ext4), with
    :data:`WRITE_MARGIN`. SlimIO overwrites its layout in place: at most its device. The bound
    writes nothing."""
    if not plan.persists:
        return 0
    workload, s = plan.cell.workload, plan.sizing
    starts = sizing.rewrite_starts(config, workload, s.auto_aof_rewrite_min_size_bytes, 0.0)
    snapshots = sum(sizing.dataset_bytes_after(config, workload, at) for at in starts)
    snapshots += s.expected_dataset_bytes * (int(plan.workload.on_demand_snapshot)
                                             + (2 if plan.motivation is not None else 0))
    in_place = not plan.is_slimio and _filesystem(plan) == "ext4"
    fsyncs = s.expected_sets * FSYNC_BYTES_PER_SET \
        if s.appendfsync == "always" and not in_place else 0
    out = int((s.expected_wal_bytes + snapshots + fsyncs) * WRITE_MARGIN)
    return min(out, plan.slimio.device_bytes) if plan.is_slimio else out


def _filesystem(plan: CellPlan) -> str:
    """The file system of the cell's storage (a bare cell's image: ext4)."""
    return plan.vm.filesystem if plan.vm is not None else plan.bare.filesystem


def trace_text_bytes(plan: CellPlan) -> int:
    """The NVMe trace's text (a vm cell, or a bare one on a named device)."""
    if plan.vm is None and (plan.bare is None or plan.bare.device is None):
        return 0
    rate = TRACE_TEXT_BYTES_PER_SET.get((plan.cell.workload, plan.cell.policy), 0) \
        if plan.persists else 0
    return TRACE_FIXED_TEXT_BYTES + plan.sizing.expected_sets * rate


def raw_bytes(plan: CellPlan) -> int:
    return (RAW_BASE_BYTES[plan.cell.workload] + plan.sizing.expected_sets * RAW_BYTES_PER_SET
            + trace_text_bytes(plan) // TRACE_GZIP_RATIO)


def storage_bytes(config: dict, plan: CellPlan) -> int:
    """The bytes of the cell's storage's backing file on the host (see :class:`Disk`)."""
    written = written_bytes(config, plan)
    if plan.vm is not None:
        device = plan.vm.device
        if device.emulator == "femu":
            return 0
        meta = 0 if plan.is_slimio else fs_metadata_bytes(_filesystem(plan),
                                                          device.capacity_bytes)
        roofline = plan.vm.roofline.size_mb * MIB if plan.vm.roofline.enabled else 0
        return min(device.capacity_bytes, meta + written + roofline)
    if plan.bare.device is not None:
        return 0
    image = plan.sizing.image_size_bytes
    return min(image, fs_metadata_bytes("ext4", image) + written)


def disk_of(config: dict, plan: CellPlan) -> Disk:
    """What the cell ``plan`` (made from ``config``) writes to the host's disks."""
    raw = raw_bytes(plan)
    guest = 0
    if plan.vm is not None:
        root = config["testbeds"]["vm"]["box_disk_size_mb"] * MIB
        guest = min(root, GUEST_BASE_BYTES + raw + trace_text_bytes(plan))
    return Disk(storage_bytes=storage_bytes(config, plan), raw_bytes=raw, guest_bytes=guest)


def with_disk(config: dict, plan: CellPlan) -> CellPlan:
    return replace(plan, disk=disk_of(config, plan))


# The host ----------------------------------------------------------------------------------
def pool_dir(pool: str) -> Path | None:
    """The directory of libvirt storage pool ``pool`` (``virsh pool-dumpxml``), or None
    when libvirt does not say (not running here, no such pool, not a directory pool)."""
    try:
        proc = subprocess.run(["virsh", "-c", "qemu:///system", "pool-dumpxml", pool],
                              capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if proc.returncode != 0:
        return None
    return pool_path_of(proc.stdout)


def pool_path_of(xml: str) -> Path | None:
    """A pool's ``<target><path>`` in ``virsh pool-dumpxml``'s output."""
    try:
        path = ElementTree.fromstring(xml).findtext("target/path")
    except ElementTree.ParseError:
        return None
    return Path(path) if path else None


def box_bytes(box_file: Path, pool: Path | None) -> tuple[int, int]:
    """(the box's kernel and initrd, its volume unless ``pool`` holds it already) in bytes,
    from the box's record next to ``box_file``; the measured sizes before it is built."""
    record_file = Path(box_file).with_suffix(".json")
    if not record_file.is_file():
        return BOOT_FILES_BYTES, BOX_VOLUME_BYTES
    record = json.loads(record_file.read_text())
    boot = 0
    for name in ("kernel_file", "initrd_file"):
        f = Path(box_file).with_name(record[name])
        boot += f.stat().st_size if f.is_file() else BOOT_FILES_BYTES // 2
    mark = BOX_VOLUME_MARK.format(sha12=record["inputs_sha256"][:12])
    uploaded = pool is not None and pool.is_dir() and \
        any(mark in f.name for f in pool.iterdir())
    return boot, 0 if uploaded else record.get("box_bytes", BOX_VOLUME_BYTES)


def check_vm_cell_space(plan: CellPlan, out_dir: Path, work_dir: Path, box_file: Path) -> None:
    """A vm cell's own check, on the host that runs it, before it writes anything: its VM
    directory under ``work_dir``, its raw directory ``out_dir`` and its guest's overlay in the
    libvirt pool can hold what it writes (raises :class:`diskspace.SpaceError`)."""
    pool = pool_dir(plan.vm.storage_pool)
    boot, volume = box_bytes(box_file, pool)
    diskspace.check_cell(plan, out_dir, work_dir=work_dir, pool_dir=pool, boot_bytes=boot,
                         box_volume_bytes=volume)


# The run -----------------------------------------------------------------------------------
# Targets that run no cell: the builds, the box, the crash campaign.
NO_CELL_RULES = ("fetch_redis_source", "build_", "crash_campaign")


def cells_of_run(plan, targets=()) -> list[CellPlan]:
    """The cells a run of ``targets`` (Snakemake's; none: the default, reproduce) may run:
    those of a named raw directory; none for a build or the crash campaign; the motivation's
    for a motivation target; the matrix's otherwise (with the motivation's where reproduce
    runs it)."""
    everything = {c.id: c for c in (*plan.cells, *plan.table1_cells, *plan.motivation_cells)}
    matrix = [*plan.cells, *plan.extra_cells] if plan.motivation_in_reproduce \
        else list(plan.cells)
    with_motivation = [*matrix, *plan.motivation_cells] if plan.motivation_in_reproduce \
        else matrix
    motivation = [*plan.table1_cells, *plan.motivation_cells]
    out = {}
    for target in targets or ("reproduce",):
        name = Path(target).name
        if name in everything and Path(target).parent.name == "raw":
            chosen = [everything[name]]
        elif target.startswith(NO_CELL_RULES) or _under(target, plan.build_dir) \
                or _under(target, plan.results_dir / "crash"):
            chosen = []
        elif "motivation" in target:
            chosen = motivation
        elif target == "reproduce":
            chosen = with_motivation
        else:
            chosen = matrix
        out.update((c.id, c) for c in chosen)
    return list(out.values())


def _under(target: str, directory: Path) -> bool:
    p = Path(target)
    p = p if p.is_absolute() else paths.REPO_ROOT / p
    return Path(os.path.abspath(p)).is_relative_to(directory)


def run_needs(plan, targets=(), on_cluster: bool = False,
              pool: Path | None | str = "ask") -> list[diskspace.Need]:
    """What a run of ``targets`` writes under results_dir, the work_dir and the libvirt pool
    (``pool``: its directory, None for none; by default libvirt is asked). ``on_cluster``:
    results_dir only (the cells check the rest on their nodes)."""
    cells = cells_of_run(plan, targets)
    todo = [c for c in cells if c.disk is not None
            and not (plan.results_dir / "raw" / c.id).exists()]
    if not todo:
        return []
    images = [c.disk.storage_bytes for c in todo if c.cell.testbed == "bare"]
    results = (sum(c.disk.raw_bytes + RECORDS_BYTES_PER_CELL for c in todo)
               + max(images, default=0) + RUN_OUTPUTS_BYTES)
    done = len(cells) - len(todo)
    needs = [diskspace.Need(
        diskspace.RESULTS, plan.results_dir, results,
        f"the raw directories and records of the {len(todo)} cells not yet finished"
        + (f" ({done} are)" if done else "")
        + (", the largest bare cell's image" if any(images) else "")
        + " and the run's tables, figures and report")]
    vms = [c for c in todo if c.vm is not None]
    if not vms or on_cluster:
        return needs
    vm = vms[0].vm
    work = Path(vm.work_dir or paths.VM_WORK_DIR)
    work = work if work.is_absolute() else paths.REPO_ROOT / work
    if pool == "ask":
        pool = pool_dir(vm.storage_pool)
    boot, volume = box_bytes(plan.build_dir / paths.BOX_PATTERN, pool)
    largest = max(vms, key=lambda c: c.disk.storage_bytes + c.disk.raw_bytes)
    d = largest.disk
    needs.append(diskspace.Need(
        diskspace.WORK_DIR, work, d.storage_bytes + d.raw_bytes + boot + diskspace.VM_DIR_BYTES,
        f"one VM directory at a time, the largest cell {largest.id}'s: "
        + diskspace.vm_dir_contents(d.storage_bytes)))
    if pool is not None:
        guest = max(vms, key=lambda c: c.disk.guest_bytes)
        needs.append(diskspace.Need(
            diskspace.POOL, pool, guest.disk.guest_bytes + volume,
            f"one guest's root-disk overlay at a time, the largest cell {guest.id}'s"
            + (", and the box volume (uploaded once)" if volume else "")))
    return needs


def check_space(plan, targets=(), on_cluster: bool = False) -> None:
    """Refuse a run whose directories cannot hold what it writes (:func:`run_needs`), one
    line per directory (:class:`ConfigError`)."""
    found = diskspace.shortfalls(run_needs(plan, targets, on_cluster))
    if found:
        raise ConfigError("\n".join(found))
