"""A booted guest kept for the next cell (``testbeds.vm.reuse_guest``), its namespace made
blank again in between.

Under TCG a cell's boot (Vagrant, the guest's kernel and systemd, SSH) costs more than many
a smoke cell's workload (docs/explanation/pipeline.md has the times). With ``reuse_guest`` a
cell that succeeded leaves its guest running, *parked*, for the next cell of the same run on
the same machine (same box, device profile, accelerator, CPU and size:
:func:`vm.guest_key`), which resets it (:func:`reset`) instead of booting. Every cell still
starts from a device in the same state:

* the namespace reads as zeros and holds no block: the host truncates its backing file to
  nothing and back to the namespace's size (what a new VM gets), and the guest drops its
  cached blocks of it (``blockdev --flushbufs``; nothing has it mounted);
* every reclaim unit handle points at an empty reclaim unit (``nvme fdp update`` of each
  placement id whose unit is not: its available media writes are the whole unit again);
* nothing of the earlier cell runs or is traced, its file system is unmounted (a motivation
  cell leaves it mounted), and its files are gone;
* the FDP statistics are lifetime counters (no command resets them, on QEMU as on a real
  drive): the reset records the host bytes written at that point, and the cell's
  provisioning refuses the namespace if they grew since (``--blank-at``).

The reset checks each of these and records them (``guest.reset`` in the cell's
provenance); a guest that fails any check is destroyed and the cell boots its own. A cell
that fails destroys its guest as before.

Only where a next cell can take it: cells of a local Snakemake (a SLURM job's node runs one
cell and its Snakemake ends with it), and only QEMU's device (FEMU's FTL keeps its mapping,
wear and garbage-collection state in its own memory, which nothing resets). A parked guest is
named in a lease held by the Snakemake that runs the cells (:mod:`.leases`): the run's end
(``onsuccess``/``onerror``) destroys it, and if that Snakemake is killed the next run's
start or ``slimio-repro doctor`` does. The guest itself powers off after
:data:`IDLE_POWEROFF_S` without a cell.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import socket
import subprocess
import time
from dataclasses import replace
from pathlib import Path

from ..plan import CellPlan
from ..testbed import vm as vmmod
from . import leases

# A parked guest powers itself off after this long without a cell (a Snakemake killed
# before it could destroy it leaves no guest burning CPU).
IDLE_POWEROFF_S = 1800
IDLE_UNIT = "slimio-repro-idle"
PARKED = "parked.json"
# What a parked guest's lease names as its cell.
KEPT_GUEST = "(kept guest)"
# The most a tidy or a reset may take in the guest (each takes 2-3 s under TCG here).
GUEST_COMMAND_S = 120
# Processes of a cell that must not outlive it in the guest.
CELL_PROCESSES = ("redis-server", "redis-benchmark", "java", "fio", "perf")


def why_fresh(plan: CellPlan) -> str | None:
    """Why ``plan``'s guest cannot be kept for a next cell (None: it can)."""
    if not plan.vm.reuse_guest:
        return "testbeds.vm.reuse_guest is false"
    if not plan.vm.keeps_guest:
        return (f"the device profile {plan.vm.device.name} is {plan.vm.device.emulator}'s, "
                "whose FTL state nothing resets")
    if "SLURM_JOB_ID" in os.environ:
        return "a SLURM job runs one cell"
    if leases.driver(os.getpid()) is None:
        return "no Snakemake runs the cells"
    return None


def guests_for(plan: CellPlan, box_file: Path) -> vmmod.FreshGuests:
    """The guests ``plan``'s cell may use: kept ones, unless :func:`why_fresh` says why
    not."""
    return vmmod.FreshGuests() if why_fresh(plan) else KeptGuests(box_file)


def guest_dir(plan: CellPlan, out_dir: Path, box_file: Path) -> Path:
    """The kept guest's directory: named after the run and the machine (so its domain is
    found by doctor like a cell's)."""
    key = vmmod.guest_key(plan, box_file)[:12]
    return vmmod.work_dir(plan.vm.work_dir) / vmmod.cell_vm_name(
        out_dir.resolve().parent.parent, f"guest-{key}")


class KeptGuests(vmmod.FreshGuests):
    """Guests kept between the cells of one run (see the module's doc)."""

    def __init__(self, box_file: Path):
        self.box_file = box_file

    def vm_dir(self, plan: CellPlan, out_dir: Path) -> Path:
        d = guest_dir(plan, out_dir, self.box_file)
        _lease_names(d)
        return d

    def adopt(self, plan: CellPlan, vm_dir: Path, log: Path):
        parked = vm_dir / PARKED
        if not parked.exists():
            return None
        record = json.loads(parked.read_text())
        parked.unlink()
        (leases.LEASE_DIR / f"{vm_dir.name}.json").unlink(missing_ok=True)
        vm = vmmod.RunningVm(vm_dir, json.loads((vm_dir / "vm.json").read_text()), log,
                             multiplex=True)
        vm.domain = record["domain"]
        with open(log, "a") as fh:
            fh.write(f"# the guest booted by cell {record['booted_by']} at "
                     f"{record['booted_utc']}, kept after cell {record['last_cell']}\n")
        state = leases.domain_state(vm.domain)
        try:
            found = reset(vm, plan) if state == "running" else {
                "problems": [f"its domain is {state or 'gone'} (it powers off after "
                             f"{IDLE_POWEROFF_S} s without a cell)"]}
        except (vmmod.VmError, subprocess.TimeoutExpired) as exc:
            found = {"problems": [str(exc)]}
        found["unmounted"] = record.get("unmounted", [])
        if found["problems"]:
            with open(log, "a") as fh:
                fh.write("# not reused (booting a fresh VM): "
                         + "; ".join(found["problems"]) + "\n")
            return None
        return vm, {"kept": True, "cell": record["cells"] + 1,
                    "booted_by": record["booted_by"], "booted_utc": record["booted_utc"],
                    "reset": found}

    def park(self, vm: vmmod.RunningVm, plan: CellPlan, record: dict) -> bool:
        """Tidy the guest after its cell (:func:`tidy`) and arm its idle power-off, then leave
        it running for the next cell, named in a lease its Snakemake holds."""
        driver = leases.driver(os.getpid())
        if driver is None:
            return False
        try:
            tidied = tidy(vm, plan)
        except (vmmod.VmError, subprocess.TimeoutExpired) as exc:
            tidied = {"problems": [str(exc)]}
        if tidied["problems"]:
            with open(vm.log, "a") as fh:
                fh.write("# not kept: " + "; ".join(tidied["problems"]) + "\n")
            return False
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        (vm.dir / PARKED).write_text(json.dumps(
            {"domain": vm.domain, "booted_by": record["booted_by"],
             "booted_utc": record["booted_utc"], "last_cell": plan.id, "cells": record["cell"],
             "unmounted": tidied["unmounted"],
             "parked_utc": now},
            indent=2) + "\n")
        lease = leases.Lease(
            id=vm.dir.name, cell=KEPT_GUEST, host=socket.gethostname(), pid=driver[0],
            pid_start=driver[1], driver_pid=driver[0], driver_start=driver[1], partial="",
            vm_dir=str(vm.dir), domain=vm.domain, started_utc=now)
        leases.write(lease)
        return True


def _lease_names(vm_dir: Path) -> None:
    """The running cell's lease names the guest it will use (before it is touched): what
    stops the cell then destroys that guest, as it would the cell's own VM."""
    lid = os.environ.get(leases.CELL_ENV)
    path = leases.LEASE_DIR / f"{lid}.json"
    if lid is None or not path.exists():
        return
    lease = leases.Lease.read(path)
    leases.write(replace(lease, vm_dir=str(vm_dir), domain=vmmod.domain_name(vm_dir)))


def _held(ns: str) -> str:
    """Shell that prints running=NAME for each cell process still running and mounted=PATH
    for each mount of ``ns``."""
    return (f"for p in {' '.join(CELL_PROCESSES)}; do pgrep -x $p >/dev/null && "
            f"echo running=$p; done; findmnt -n -o TARGET -S {ns} | sed 's/^/mounted=/'; ")


def _problems(lines: list[str]) -> list[str]:
    return [f"{line.split('=', 1)[1]} still {line.split('=', 1)[0]} after the last cell"
            for line in lines if line.startswith(("running=", "mounted="))]


def tidy(vm: vmmod.RunningVm, plan: CellPlan) -> dict:
    """After a cell that succeeded: nothing of it may run; its file system is unmounted (a
    motivation cell leaves it mounted), its tracing off, its files removed; the guest's
    idle power-off armed. Returns ``problems`` (empty: the guest can be kept) and what was
    ``unmounted``."""
    ns = plan.vm.namespace
    out = vm.ssh(
        f"for m in $(findmnt -n -o TARGET -S {ns}); do sudo umount $m && echo unmounted=$m; "
        f"done; {_held(ns)}"
        "for e in /sys/kernel/tracing/events/nvme/enable /sys/kernel/tracing/events/block/"
        "enable; do [ -e $e ] && echo 0 | sudo tee $e >/dev/null; done; "
        f"sudo rm -rf {vmmod.GUEST_CELLS_DIR} {shlex.quote(plan.vm.guest_scratch_dir)} && "
        f"sudo systemd-run --unit={IDLE_UNIT} --on-active={IDLE_POWEROFF_S} "
        "systemctl poweroff >/dev/null 2>&1 && echo armed=yes", check=False,
        timeout=GUEST_COMMAND_S)
    lines = out.stdout.decode(errors="replace").splitlines()
    problems = _problems(lines)
    if "armed=yes" not in lines:
        problems.append("the guest's idle power-off could not be armed: "
                        + out.stderr.decode(errors="replace").strip()[-300:])
    return {"problems": problems,
            "unmounted": [line.split("=", 1)[1] for line in lines
                          if line.startswith("unmounted=")]}


def reset(vm: vmmod.RunningVm, plan: CellPlan) -> dict:
    """Make a kept guest's namespace blank again (see the module's doc) and check it, and
    that nothing of the last cell holds it; return what was found: ``problems`` (empty:
    ready), the backing file's allocated bytes, the handles' available media writes, and
    ``fdp_host_bytes_written``."""
    settings, profile = plan.vm, plan.vm.device
    image = vm.dir / "nvme.img"
    ns = settings.namespace
    os.truncate(image, 0)
    os.truncate(image, profile.capacity_bytes)
    fdp_shell = ""
    unit = (profile.reclaim_unit_size_mib << 20) // profile.lba_size_bytes if profile.fdp else 0
    if profile.fdp:
        status = f"sudo nvme fdp status {ns} -o json | tr -d ' \\n'"
        # Each handle whose unit is not empty gets a new one (updating all takes 1.1 s).
        fdp_shell = (
            f"for p in $({status} | grep -o '\"pid\":[0-9]*,[^}}]*\"ruamw\":[0-9]*' | "
            f"awk -F'[:,]' '$NF != {unit} {{print $2}}'); do sudo nvme fdp update {ns} "
            "--namespace-id=1 --pids=$p >/dev/null || echo update-failed=$p; done; "
            f"echo status=$({status}); "
            f"echo stats=$(sudo nvme fdp stats {ns} -e {settings.endurance_group} -o json "
            "| tr -d ' \\n'); ")
    out = vm.ssh(
        f"sudo systemctl stop {IDLE_UNIT}.timer 2>/dev/null; {_held(ns)}"
        f"sudo blockdev --flushbufs {ns} && {fdp_shell}"
        f"echo signature=$(sudo blkid -p -o value -s TYPE {ns}); "
        f"echo zeros=$(sudo cmp -s -n 1048576 {ns} /dev/zero && echo yes); "
        "echo 'slimio-repro: namespace reset for the next cell' | sudo tee /dev/kmsg "
        ">/dev/null", check=False, timeout=GUEST_COMMAND_S)
    lines = out.stdout.decode(errors="replace").splitlines()
    problems = _problems(lines)
    facts = dict(line.split("=", 1) for line in lines if "=" in line)
    found = {"image_allocated_bytes": os.stat(image).st_blocks * 512,
             "image_bytes": os.stat(image).st_size}
    if out.returncode != 0:
        problems.append(f"the reset in the guest failed ({out.returncode}): "
                        + out.stderr.decode(errors="replace").strip()[-500:])
    if found["image_allocated_bytes"] or found["image_bytes"] != profile.capacity_bytes:
        problems.append(f"{image} holds {found['image_allocated_bytes']} bytes "
                        f"({found['image_bytes']} long) after its truncation")
    if facts.get("signature"):
        problems.append(f"{ns} still shows a {facts['signature']} signature")
    if facts.get("zeros") != "yes":
        problems.append(f"{ns}'s first MiB does not read as zeros")
    problems += [f"nvme fdp update of placement id {line.split('=', 1)[1]} failed"
                 for line in lines if line.startswith("update-failed=")]
    if profile.fdp:
        with contextlib.suppress(ValueError, KeyError):
            ruamw = [h["ruamw"] for h in json.loads(facts["status"])["ruhss"]]
            found["ruamw"] = ruamw
            found["fdp_host_bytes_written"] = int(json.loads(facts["stats"])["hbmw"])
        if found.get("ruamw") != [unit] * profile.reclaim_unit_handles:
            problems.append(f"the handles' available media writes are {found.get('ruamw')}, "
                            f"not an empty {unit}-block unit each")
        if "fdp_host_bytes_written" not in found:
            problems.append("no FDP statistics were read")
    else:
        found["fdp_host_bytes_written"] = 0
    found["problems"] = problems
    return found


def release(driver_pid: int | None = None) -> list[str]:
    """Destroy the guests parked by the Snakemake ``driver_pid`` (default: this process;
    ``onsuccess``/``onerror`` call it in Snakemake's own)."""
    driver_pid = os.getpid() if driver_pid is None else driver_pid
    done = []
    for lease in leases.leases():
        if lease.cell == KEPT_GUEST and lease.pid == driver_pid:
            with contextlib.suppress(vmmod.VmError):
                vmmod.destroy_stale(Path(lease.vm_dir))
            lease.path.unlink(missing_ok=True)
            done.append(f"destroyed the kept guest {lease.domain}")
    return done


__all__ = ["why_fresh", "guests_for", "release", "reset", "KeptGuests"]
