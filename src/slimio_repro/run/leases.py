"""What a running cell holds on its host, written down before it takes it, so that whatever
stops the cell (its exit, an exception, SIGTERM, SIGINT, or a SIGKILL that runs no clean-up)
leaves nothing that the next run or ``slimio-repro doctor`` cannot find and remove.

A cell's lease (``LEASE_DIR/<lease id>.json``) names the process that runs the cell, the
Snakemake that started it, and every resource the cell may create:

* its VM (a vm cell): the VM directory under ``testbeds.vm.work_dir`` and the libvirt
  domain and root-disk volume named after it (``testbed.vm.cell_vm_name``: the run and the
  cell);
* its ``.partial`` raw directory, with a bare cell's file-system image, loop device and
  mount inside it;
* its processes: every process the cell starts (Vagrant, SSH, redis-server, the clients)
  inherits :data:`CELL_ENV` = the lease id in its environment, also after its parent died.

A lease is *live* while its process runs and the Snakemake that started it (if any) does;
*orphaned* when the process runs on without its Snakemake (Snakemake was SIGKILLed: its
jobs live on); *dead* when the process is gone. :func:`sweep` stops orphans (SIGTERM, which
runs their own clean-up, then SIGKILL) and removes what dead leases name; a cell sweeps its
own lease's leftovers before it starts, a run's start sweeps every lease of its host, and
``slimio-repro doctor`` lists (``--fix``: removes) them and what no lease names: libvirt
domains and volumes with the cells' prefix, loop devices and mounts in ``.partial``
directories, tagged processes, and a Snakemake lock no running Snakemake holds.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from .. import paths
from ..agent import fsimage
from ..plan import CellPlan
from ..testbed import vm as vmmod

LEASE_DIR = Path(paths.LEASE_DIR)
CELL_ENV = paths.CELL_ENV
# Seconds an orphaned cell gets for its own clean-up after SIGTERM (destroying a VM takes
# 2-3 s under TCG here), before SIGKILL.
ORPHAN_GRACE_S = 60


def _stat(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (field 3 on), or None when no
    such process exists."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    return stat.rsplit(")", 1)[1].split()


def _start_time(pid: int) -> int | None:
    """The process's start time (clock ticks since boot), which tells a process from a
    later one that reuses its id; None when no such process exists."""
    fields = _stat(pid)
    return int(fields[19]) if fields else None


def _parent(pid: int) -> int | None:
    fields = _stat(pid)
    return int(fields[1]) if fields else None


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(
            errors="replace").strip()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return ""


def _is_snakemake(pid: int) -> bool:
    """Whether the process is Snakemake (``snakemake ...``, ``python .../bin/snakemake``
    or ``python -m snakemake``), not merely a command line that names a path in
    ``.snakemake/``."""
    return any(Path(arg).name == "snakemake" for arg in _cmdline(pid).split()[:3])


def driver(pid: int) -> tuple[int, int] | None:
    """The nearest Snakemake among ``pid``'s ancestors: (pid, start time), or None."""
    p = _parent(pid)
    while p and p > 1:
        if _is_snakemake(p):
            return p, _start_time(p)
        p = _parent(p)
    return None


class LeaseError(RuntimeError):
    pass


@dataclass(frozen=True)
class Lease:
    id: str
    cell: str
    host: str
    pid: int
    pid_start: int
    driver_pid: int | None
    driver_start: int | None
    partial: str
    vm_dir: str | None
    domain: str | None
    started_utc: str

    @property
    def path(self) -> Path:
        return LEASE_DIR / f"{self.id}.json"

    def state(self) -> str:
        """live, orphaned or dead (see the module's doc)."""
        if _start_time(self.pid) != self.pid_start:
            return "dead"
        if self.driver_pid is not None and _start_time(self.driver_pid) != self.driver_start:
            return "orphaned"
        return "live"

    @classmethod
    def read(cls, path: Path) -> "Lease":
        return cls(**json.loads(path.read_text()))


def lease_id(plan: CellPlan, out_dir: Path) -> str:
    """The run and the cell: the cell's VM name (testbed.vm.cell_vm_name) also for bare."""
    return vmmod.cell_vm_name(out_dir.resolve().parent.parent, plan.id)


@contextlib.contextmanager
def held(plan: CellPlan, out_dir: Path):
    """Hold the cell's lease while the block runs: what an earlier attempt of this cell left
    (its process, VM, mounts) is removed first; the lease is written before anything is
    created and removed after everything is, with every process that carries it."""
    out_dir = out_dir.resolve()
    lid = lease_id(plan, out_dir)
    stale = LEASE_DIR / f"{lid}.json"
    if stale.exists():
        earlier = Lease.read(stale)
        if earlier.state() == "live":
            raise LeaseError(f"cell {plan.id} of {out_dir.parent.parent} already runs (process "
                             f"{earlier.pid}, since {earlier.started_utc}): one run at a time "
                             "per results directory")
        clean(earlier, stop_orphan=True)
    vm_dir = domain = None
    if plan.cell.testbed == "vm":
        vm_dir = vmmod.work_dir(plan.vm.work_dir) / lid
        domain = vmmod.domain_name(vm_dir)
    snakemake = driver(os.getpid())
    lease = Lease(id=lid, cell=plan.id, host=socket.gethostname(), pid=os.getpid(),
                  pid_start=_start_time(os.getpid()),
                  driver_pid=snakemake[0] if snakemake else None,
                  driver_start=snakemake[1] if snakemake else None,
                  partial=str(out_dir.with_name(out_dir.name + ".partial")),
                  vm_dir=str(vm_dir) if vm_dir else None, domain=domain,
                  started_utc=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    write(lease)
    previous = os.environ.get(CELL_ENV)
    os.environ[CELL_ENV] = lid
    try:
        yield lease
    finally:
        if previous is None:
            os.environ.pop(CELL_ENV, None)
        else:
            os.environ[CELL_ENV] = previous
        # The cell cleaned up after itself; a process of it that outlived it does not stay.
        stop_processes(tagged_processes(lid))
        lease.path.unlink(missing_ok=True)


def write(lease: Lease) -> None:
    """Write (or replace) ``lease``'s file, whole or not at all."""
    LEASE_DIR.mkdir(parents=True, exist_ok=True)
    tmp = lease.path.with_suffix(".tmp")
    tmp.write_text(json.dumps(asdict(lease), indent=2) + "\n")
    tmp.rename(lease.path)


def tagged_processes(lid: str | None = None) -> dict[int, str]:
    """Processes with :data:`CELL_ENV` in their environment (= ``lid`` when given): pid ->
    the lease id, this process excluded."""
    out = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            env = (proc / "environ").read_bytes().split(b"\0")
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
        for var in env:
            if var.startswith(CELL_ENV.encode() + b"="):
                tag = var.split(b"=", 1)[1].decode(errors="replace")
                if lid is None or tag == lid:
                    out[int(proc.name)] = tag
    return out


def stop_processes(pids, grace_s: float = 10) -> None:
    """SIGTERM, then SIGKILL after ``grace_s``, each of ``pids`` still running."""
    pids = {p: _start_time(p) for p in pids}
    for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5)):
        alive = {p: t for p, t in pids.items() if t is not None and _start_time(p) == t}
        for p in alive:
            with contextlib.suppress(ProcessLookupError):
                os.kill(p, sig)
        deadline = time.monotonic() + wait
        while alive and time.monotonic() < deadline:
            alive = {p: t for p, t in alive.items() if _start_time(p) == t}
            time.sleep(0.2)
        if not alive:
            return
        pids = alive


def clean(lease: Lease, stop_orphan: bool) -> list[str]:
    """Remove what ``lease`` names; an orphaned cell is stopped first (with
    ``stop_orphan``; otherwise it is left alone with its lease). Returns what was done."""
    done = []
    state = lease.state()
    if state == "live":
        return done
    if state == "orphaned":
        if not stop_orphan:
            return done
        stop_processes([lease.pid], grace_s=ORPHAN_GRACE_S)
        done.append(f"stopped orphaned cell process {lease.pid} ({lease.cell})")
    procs = tagged_processes(lease.id)
    if procs:
        stop_processes(procs)
        done.append(f"stopped {len(procs)} process(es) of {lease.cell}: "
                    f"{', '.join(map(str, sorted(procs)))}")
    if lease.vm_dir:
        vmmod.close_mux(Path(lease.vm_dir))
    if lease.domain and domain_exists(lease.domain):
        with contextlib.suppress(vmmod.VmError):
            vmmod.remove_domain(lease.domain)
        done.append(f"removed libvirt domain {lease.domain} and its root disk")
    if lease.vm_dir and Path(lease.vm_dir).exists():
        shutil.rmtree(lease.vm_dir, ignore_errors=True)
        done.append(f"removed {lease.vm_dir}")
    partial = Path(lease.partial) if lease.partial else None   # a kept guest's has none
    if partial is not None and partial.exists():
        fsimage.cleanup_stale(partial)
        shutil.rmtree(partial, ignore_errors=True)
        done.append(f"removed {partial} (unmounted, loop devices detached)")
    lease.path.unlink(missing_ok=True)
    return done


def domain_state(domain: str) -> str | None:
    """libvirt's state of ``domain`` (``running``, ``shut off``, ...), None when there is no
    such domain."""
    proc = subprocess.run(["virsh", "-c", "qemu:///system", "domstate", domain],
                          capture_output=True, text=True)
    return proc.stdout.strip() if proc.returncode == 0 else None


def domain_exists(domain: str) -> bool:
    return domain_state(domain) is not None


def leases() -> list[Lease]:
    """This host's leases."""
    if not LEASE_DIR.is_dir():
        return []
    host = socket.gethostname()
    out = []
    for path in sorted(LEASE_DIR.glob("*.json")):
        with contextlib.suppress(ValueError, TypeError, FileNotFoundError):
            lease = Lease.read(path)
            if lease.host == host:
                out.append(lease)
    return out


def sweep(stop_orphans: bool = True) -> list[str]:
    """Clean every dead (and, with ``stop_orphans``, orphaned) lease of this host."""
    done = []
    for lease in leases():
        done += clean(lease, stop_orphan=stop_orphans)
    return done


# `slimio-repro doctor` ----------------------------------------------------------------------
@dataclass(frozen=True)
class Leftover:
    """Something an interrupted run left: what it is, and the command that removes it."""
    kind: str
    what: str
    remedy: str


def _lines(cmd: list[str]) -> list[str]:
    proc = subprocess.run(cmd, capture_output=True, text=True)
    return [line.strip() for line in proc.stdout.splitlines() if line.strip()] \
        if proc.returncode == 0 else []


def leftovers(work_dirs: list[Path], results_dirs: list[Path],
              snakemake_dirs: list[Path], own_runs_only: bool = False) -> list[Leftover]:
    """Everything an interrupted run left on this host that no live cell holds. With
    ``own_runs_only``, only what the runs into ``results_dirs`` left: leases, VMs and tagged
    processes of other runs (another checkout's pipeline running beside them) are not
    counted."""
    found = []
    live = [lease for lease in leases() if lease.state() == "live"]
    live_ids = {lease.id for lease in live}
    # A live cell's VM may be a guest kept from an earlier cell: named in its lease.
    live_vms = live_ids | {Path(lease.vm_dir).name for lease in live if lease.vm_dir}
    # Every lease, VM and tagged process is named after its run (testbed.vm.cell_vm_name).
    prefixes = tuple(vmmod.run_vm_prefix(r) for r in results_dirs) if own_runs_only \
        else (vmmod.CELL_VM_PREFIX,)
    for lease in leases():
        state = lease.state()
        if state != "live" and lease.id.startswith(prefixes):
            found.append(Leftover("lease", f"{state} cell {lease.cell} (process {lease.pid}, "
                                  f"lease {lease.path})", "slimio-repro doctor --fix"))
    virsh = ["virsh", "-c", "qemu:///system"]
    domains = [d for d in _lines(virsh + ["list", "--all", "--name"]) if d.startswith(prefixes)]
    for d in domains:
        if d.removesuffix("_default") not in live_vms:
            found.append(Leftover("domain", d, f"virsh -c qemu:///system destroy {d}; "
                                  f"virsh -c qemu:///system undefine {d} "
                                  "--remove-all-storage"))
    for pool in _lines(virsh + ["pool-list", "--name"]):
        listing = subprocess.run(virsh + ["vol-list", "--pool", pool], capture_output=True,
                                 text=True).stdout
        for vol in vmmod.volume_names(listing):
            owner = vol.split(".", 1)[0]
            if vol.startswith(prefixes) and owner not in domains:
                found.append(Leftover("volume", f"{vol} (pool {pool})",
                                      f"virsh -c qemu:///system vol-delete {vol} "
                                      f"--pool {pool}"))
    for work in work_dirs:
        for d in sorted(work.glob(f"{vmmod.CELL_VM_PREFIX}*")) if work.is_dir() else []:
            if d.name not in live_vms and d.name.startswith(prefixes):
                found.append(Leftover("vm-dir", str(d), f"rm -rf {d}"))
    # Mounts and loop devices in the given runs' partial cells (another checkout's run is
    # not this doctor's to judge).
    live_partials = tuple(lease.partial + os.sep for lease in live if lease.partial)
    raws = tuple(str(r.resolve() / "raw") + os.sep for r in results_dirs)

    def leaked(path: str) -> bool:
        return path.startswith(raws) and ".partial/" in path and \
            not path.startswith(live_partials)

    for line in Path("/proc/mounts").read_text().splitlines():
        mnt = line.split()[1].replace("\\040", " ")
        if leaked(mnt):
            found.append(Leftover("mount", mnt, f"umount -l {mnt}"))
    for line in _lines(["losetup", "--list", "--noheadings", "--output", "NAME,BACK-FILE"]):
        parts = line.split(None, 1)
        if len(parts) == 2 and leaked(parts[1]):
            found.append(Leftover("loop", f"{parts[0]} ({parts[1]})",
                                  f"losetup --detach {parts[0]}"))
    for pid, tag in sorted(tagged_processes().items()):
        if tag not in live_ids and tag.startswith(prefixes):
            found.append(Leftover("process", f"{pid} of cell {tag}: {_cmdline(pid)[:120]}",
                                  f"kill {pid}"))
    for results in results_dirs:
        raw = results / "raw"
        for d in sorted(raw.glob("*.partial")) if raw.is_dir() else []:
            if str(d.resolve()) + os.sep not in live_partials:
                found.append(Leftover("partial", str(d), f"rm -rf {d}"))
    for wd in snakemake_dirs:
        locks = sorted((wd / ".snakemake" / "locks").glob("*.lock"))
        if locks and not _snakemake_runs_in(wd):
            found.append(Leftover("lock", f"{wd / '.snakemake' / 'locks'} ({len(locks)} "
                                  "lock files; no Snakemake runs in "
                                  f"{wd})", f"cd {wd} && snakemake --unlock --cores 1"))
    return found


def _snakemake_runs_in(directory: Path) -> bool:
    """Whether a Snakemake process works in ``directory`` (then its lock is its own)."""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            if _is_snakemake(int(proc.name)) and \
                    Path(os.readlink(proc / "cwd")) == directory.resolve():
                return True
    return False


# The order fix removes leftovers in: processes before the mounts they hold, mounts before
# their loop devices, domains before their volumes.
FIX_ORDER = ["lease", "process", "domain", "volume", "vm-dir", "mount", "loop", "partial",
             "lock"]


def fix(found: list[Leftover]) -> None:
    """Remove ``found``: leases first (each with what it names), then the rest."""
    sweep(stop_orphans=True)
    for item in sorted(found, key=lambda f: FIX_ORDER.index(f.kind)):
        if item.kind == "lease":
            continue
        if item.kind == "process":
            stop_processes([int(item.what.split()[0])])
        elif item.kind == "lock":
            for lock in Path(item.what.split(" (")[0]).glob("*.lock"):
                lock.unlink(missing_ok=True)
        elif item.kind == "domain":
            with contextlib.suppress(vmmod.VmError):
                vmmod.remove_domain(item.what)
        elif item.kind == "mount":
            subprocess.run(["umount", "-l", item.what], check=False)
        elif item.kind == "loop":
            # A file system on it that was lazily unmounted lives on while a process of the
            # dead cell uses it: stop that process, and the loop device goes with it.
            loop = item.what.split()[0]
            with contextlib.suppress(OSError):
                stop_processes(fsimage.device_holders(os.stat(loop).st_rdev))
            subprocess.run(item.remedy.split(), check=False, capture_output=True)
        elif item.kind == "volume":
            subprocess.run(item.remedy.split(), check=False, capture_output=True)
        elif item.kind in ("vm-dir", "partial"):
            path = Path(item.what)
            if item.kind == "partial":
                fsimage.cleanup_stale(path)
            shutil.rmtree(path, ignore_errors=True)
