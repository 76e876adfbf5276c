"""The pipeline's own fault campaign (``slimio-repro pipeline-faults``): a tiny matrix run by
Snakemake, and in each round one fault at a random moment, then the rerun a user would make
(``make reproduce``'s: ``slimio-repro doctor --fix``, then Snakemake), checked.

Faults (:data:`KINDS`): SIGKILL or SIGTERM to Snakemake (an OOM kill or a lost session; a
stop), SIGINT to Snakemake (Ctrl-C), SIGKILL or SIGTERM to a cell's process, SIGKILL to a vm
cell's QEMU, the file system under ``testbeds.vm.work_dir`` filled up while a vm cell writes
its NVMe image, and a guest that never answers SSH (its first boot, SSH masked).

Each round first removes one finished cell (the one the fault will hit), so that it must
run, and takes the tree hash of every other finished cell. After the fault and the rerun it
checks that

* the rerun completed the matrix (every cell finished, exit 0);
* only the removed cell ran again, and every other cell's files are byte-identical;
* nothing leaked: no lease, process, libvirt domain or volume, VM directory, mount, loop
  device, ``.partial`` directory or Snakemake lock (:func:`.leases.leftovers`) of the
  campaign's own run (what another checkout's pipeline beside it holds is not the
  campaign's to judge or remove);
* the faulted run's messages name what happened (kept in the round's record).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .. import paths
from ..agent import layout
from ..testbed import vm as vmmod
from . import leases

KINDS = ["sigkill-snakemake", "sigterm-snakemake", "sigint-snakemake", "sigkill-cell",
         "sigterm-cell", "sigkill-qemu", "disk-full", "mute-guest"]
# Kinds that need a vm cell to hit.
VM_KINDS = {"sigkill-qemu", "disk-full", "mute-guest"}


def matrix(testbeds: list[str]) -> list[str]:
    """The campaign's matrix (--config values): two systems, one workload and policy, one
    repetition, on ``testbeds``: two cells per testbed."""
    return [f"matrix={{testbeds: [{', '.join(testbeds)}], systems: [baseline, slimio], "
            "workloads: [redis-benchmark], policies: [always], repetitions: 1}"]
# Seconds into a cell that a fault may land at (uniformly): a vm cell takes 45-60 s here
# under TCG, a bare one 5-10 s.
WINDOW_S = {"vm": 45.0, "bare": 6.0}
# The share of the faults that may hit either testbed which hit a vm cell: a vm round costs
# about three bare ones, and the kinds that only vm cells have already hit them.
VM_SHARE = 0.25
# The campaign's boot stall deadline: a guest that never answers costs this much; the
# boots here took 17-48 s.
BOOT_STALL_S = 90


def tree_sha256(directory: Path) -> str:
    """A hash of every file's relative path and bytes under ``directory``."""
    h = hashlib.sha256()
    for f in sorted(p for p in directory.rglob("*") if p.is_file()):
        h.update(str(f.relative_to(directory)).encode() + b"\0")
        h.update(hashlib.sha256(f.read_bytes()).digest())
    return h.hexdigest()


def finished(results: Path) -> dict[str, str]:
    """Finished cells (their completion marker written) and their tree hashes."""
    raw = results / "raw"
    return {d.name: tree_sha256(d) for d in sorted(raw.glob("*"))
            if d.is_dir() and (d / layout.RAW_COMPLETE).exists()} if raw.is_dir() else {}


@dataclass
class Round:
    number: int
    kind: str
    cell: str
    delay_s: float
    hit: bool = False
    fault_note: str = ""
    faulted_exit: int | None = None
    completed_in_faulted_run: bool = False
    rerun_exit: int | None = None
    rerun_s: float = 0.0
    ran_again: list[str] = field(default_factory=list)
    changed_finished: list[str] = field(default_factory=list)
    leaks: list[str] = field(default_factory=list)
    doctor: list[str] = field(default_factory=list)
    messages: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return (self.rerun_exit == 0 and not self.leaks and not self.changed_finished
                and set(self.ran_again) <= {self.cell})


class Campaign:
    def __init__(self, out: Path, configfiles: list[str], seed: int, work_dir: Path,
                 snakemake: str, testbeds: list[str], vm_share: float = VM_SHARE):
        self.out, self.results = out, out / "results"
        self.configfiles, self.rng = configfiles, random.Random(seed)
        self.work_dir, self.snakemake = work_dir, snakemake
        self.matrix, self.vm_share = matrix(testbeds), vm_share
        self.log_dir = out / "logs"
        self.log_dir.mkdir(parents=True, exist_ok=True)

    # -- running the pipeline ----------------------------------------------------------
    def command(self) -> list[str]:
        cfg = [a for f in self.configfiles for a in ("--configfile", f)]
        return [self.snakemake, "--cores", str(os.cpu_count()), "run_matrix",
                "--rerun-incomplete", *cfg, "--config", f"results_dir={self.results}",
                f"testbeds={{vm: {{work_dir: {self.work_dir}, boot_stall_s: {BOOT_STALL_S}}}}}",
                *self.matrix]

    def start(self, log: Path, env: dict | None = None) -> subprocess.Popen:
        full_env = dict(os.environ, SLURM_CONF="/dev/null", **(env or {}))
        full_env["PATH"] = f"{Path(sys.executable).parent}:{full_env['PATH']}"
        with open(log, "w") as fh:
            return subprocess.Popen(self.command(), cwd=paths.REPO_ROOT, env=full_env,
                                    stdout=fh, stderr=subprocess.STDOUT,
                                    start_new_session=True)

    def leftovers(self) -> list[leases.Leftover]:
        """What the campaign's own run left (not another checkout's pipeline beside it)."""
        return leases.leftovers([self.work_dir], [self.results], [paths.REPO_ROOT],
                                own_runs_only=True)

    def rerun(self, log: Path) -> tuple[int, list[str]]:
        """What `make reproduce` does after an interruption: doctor --fix, then Snakemake."""
        found = self.leftovers()
        if found:
            leases.fix(found)
        proc = self.start(log)
        return proc.wait(timeout=3600), [f"{f.kind}: {f.what}" for f in found]

    def complete(self) -> None:
        code, _ = self.rerun(self.log_dir / "initial.log")
        if code != 0:
            raise RuntimeError(f"the campaign's first run failed: see {self.log_dir}/initial.log")

    # -- one round -------------------------------------------------------------------------
    def round(self, number: int, kind: str) -> Round:
        cells = sorted(finished(self.results))
        vm_cells = [c for c in cells if c.startswith("vm-")]
        on_vm = kind in VM_KINDS or (vm_cells and self.rng.random() < self.vm_share)
        cell = self.rng.choice(vm_cells if on_vm else
                               [c for c in cells if not c.startswith("vm-")] or cells)
        testbed = cell.split("-", 1)[0]
        r = Round(number, kind, cell, round(self.rng.uniform(0, WINDOW_S[testbed]), 2))
        before = finished(self.results)
        # The cell the fault hits must run: as if it had not yet.
        shutil.rmtree(self.results / "raw" / cell)
        del before[cell]
        lid = vmmod.cell_vm_name(self.results, cell)
        env = {vmmod.MUTE_BOOTS_ENV: "1"} if kind == "mute-guest" else None
        log = self.log_dir / f"round{number:03d}-{kind}.log"
        filler = self.work_dir / "filler"
        proc = self.start(log, env)
        try:
            r.hit, r.fault_note = self._fault(proc, kind, lid, r.delay_s, filler)
            try:
                r.faulted_exit = proc.wait(timeout=1800)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                r.faulted_exit = proc.wait()
                r.fault_note += "; the faulted run did not end in 30 min and was killed"
        finally:
            filler.unlink(missing_ok=True)     # the user frees the space
        r.completed_in_faulted_run = r.faulted_exit == 0
        r.messages = _messages(log, self.results, cell)
        t0 = time.monotonic()
        r.rerun_exit, r.doctor = self.rerun(self.log_dir / f"round{number:03d}-rerun.log")
        r.rerun_s = round(time.monotonic() - t0, 1)
        after = finished(self.results)
        r.ran_again = sorted(c for c in after if c not in before)
        r.changed_finished = sorted(c for c in before if after.get(c) != before[c])
        r.leaks = [f"{f.kind}: {f.what}" for f in self.leftovers()]
        if set(after) != set(cells):
            r.leaks.append(f"unfinished cells: {sorted(set(cells) - set(after))}")
        return r

    def _fault(self, proc: subprocess.Popen, kind: str, lid: str, delay_s: float,
               filler: Path) -> tuple[bool, str]:
        """Wait until the cell ``lid`` runs (its lease is written), ``delay_s`` more, then
        inject ``kind``. Returns whether it hit the running cell, and what was done."""
        lease_file = leases.LEASE_DIR / f"{lid}.json"
        deadline = time.monotonic() + 900
        while not lease_file.exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                return False, "the cell never started"
            time.sleep(0.2)
        if kind == "mute-guest":
            return True, "the cell's first boot masks SSH"
        if kind in ("sigkill-qemu", "disk-full"):
            # From the moment the guest runs the cell (its domain's QEMU up, SSH answered).
            domain = vmmod.domain_name(Path(lid))
            while not _guest_runs(self.results, lid.split("-", 2)[2]):
                if proc.poll() is not None or not lease_file.exists():
                    return False, "the cell ended before its guest ran"
                time.sleep(0.5)
        time.sleep(delay_s)
        if not lease_file.exists():
            return False, "the cell ended before the fault"
        lease = leases.Lease.read(lease_file)
        if kind.endswith("-snakemake"):
            sig = {"sigkill": signal.SIGKILL, "sigterm": signal.SIGTERM,
                   "sigint": signal.SIGINT}[kind.split("-")[0]]
            os.kill(proc.pid, sig)
            return True, f"{sig.name} to Snakemake ({proc.pid})"
        if kind.endswith("-cell"):
            sig = signal.SIGKILL if kind.startswith("sigkill") else signal.SIGTERM
            os.kill(lease.pid, sig)
            return True, f"{sig.name} to the cell's process ({lease.pid})"
        if kind == "sigkill-qemu":
            pids = subprocess.run(["pgrep", "-f", f"guest={domain}"], capture_output=True,
                                  text=True).stdout.split()
            for pid in pids:
                os.kill(int(pid), signal.SIGKILL)
            return bool(pids), f"SIGKILL to QEMU ({', '.join(pids) or 'not found'})"
        if kind == "disk-full":
            free = os.statvfs(self.work_dir).f_bavail * os.statvfs(self.work_dir).f_frsize
            subprocess.run(["fallocate", "-l", str(free), str(filler)], check=False)
            return True, f"filled {self.work_dir} ({free / 2**30:.2f} GiB)"
        raise ValueError(kind)


def _guest_runs(results: Path, cell: str) -> bool:
    """Whether the cell's VM has booted (a boot attempt that came up, in its records)."""
    log = results / "raw" / f"{cell}.partial" / "vm" / "vagrant.log"
    try:
        return "'outcome': 'up'" in log.read_text(errors="replace")
    except FileNotFoundError:
        return False


def _messages(log: Path, results: Path, cell: str) -> list[str]:
    """The faulted run's error lines, and the cell log's last error line."""
    lines = [line.strip() for line in log.read_text(errors="replace").splitlines()
             if line.lstrip().lower().startswith(("error", "left by"))
             or "Error in rule" in line]
    cell_log = results / "logs" / "run_cell" / f"{cell}.log"
    if cell_log.exists():
        errs = [line for line in cell_log.read_text(errors="replace").splitlines()
                if line.startswith("error:") or "Error:" in line]
        lines += errs[-1:]
    return lines[:8]


def run(out: Path, configfiles: list[str], faults: int, seed: int, work_dir: Path,
        snakemake: str, kinds: list[str] = KINDS,
        testbeds: list[str] = ("vm", "bare"), vm_share: float = VM_SHARE) -> list[Round]:
    """``faults`` rounds, kinds in turn (shuffled per cycle; a kind named twice comes twice
    per cycle), each checked, on a matrix of ``testbeds``, ``vm_share`` of the faults that
    may hit either testbed on a vm cell; the records in ``out``/rounds.jsonl and the table
    in ``out``/summary.md."""
    if "vm" not in testbeds and set(kinds) & VM_KINDS:
        raise ValueError(f"faults {', '.join(sorted(set(kinds) & VM_KINDS))} hit vm cells: "
                         "add the vm testbed")
    campaign = Campaign(out, configfiles, seed, work_dir, snakemake, list(testbeds),
                        vm_share)
    campaign.complete()
    rounds = []
    order = []
    with open(out / "rounds.jsonl", "a") as fh:
        for n in range(1, faults + 1):
            if not order:
                order = list(kinds)
                campaign.rng.shuffle(order)
            r = campaign.round(n, order.pop())
            rounds.append(r)
            fh.write(json.dumps(asdict(r)) + "\n")
            fh.flush()
            print(f"round {n}: {r.kind} on {r.cell} at +{r.delay_s} s: "
                  f"{'ok' if r.ok else 'FAILED'} ({r.fault_note}; rerun {r.rerun_s} s)",
                  flush=True)
    (out / "summary.md").write_text(summary(rounds))
    return rounds


def summary(rounds: list[Round]) -> str:
    """The table by kind: faults, hits, runs that finished by themselves (a retry), reruns
    completed, cells that ran again beyond the faulted one, finished cells changed, leaks."""
    head = ("| fault | rounds | hit the cell | completed by its own retry | rerun completed "
            "| other cells ran again | finished cells changed | leaks |\n"
            "|---|---|---|---|---|---|---|---|\n")
    rows = []
    for kind in sorted({r.kind for r in rounds}):
        rs = [r for r in rounds if r.kind == kind]
        rows.append(f"| {kind} | {len(rs)} | {sum(r.hit for r in rs)} | "
                    f"{sum(r.completed_in_faulted_run for r in rs)} | "
                    f"{sum(r.rerun_exit == 0 for r in rs)} | "
                    f"{sum(bool(set(r.ran_again) - {r.cell}) for r in rs)} | "
                    f"{sum(bool(r.changed_finished) for r in rs)} | "
                    f"{sum(bool(r.leaks) for r in rs)} |")
    total = (f"| all | {len(rounds)} | {sum(r.hit for r in rounds)} | "
             f"{sum(r.completed_in_faulted_run for r in rounds)} | "
             f"{sum(r.rerun_exit == 0 for r in rounds)} | "
             f"{sum(bool(set(r.ran_again) - {r.cell}) for r in rounds)} | "
             f"{sum(bool(r.changed_finished) for r in rounds)} | "
             f"{sum(bool(r.leaks) for r in rounds)} |")
    return head + "\n".join(rows + [total]) + "\n"


class WorkFs:
    """A small ext4 file system of its own for the campaign's testbeds.vm.work_dir (the
    disk-full fault fills it, not the host's), loop-mounted at ``mountpoint``."""

    def __init__(self, image: Path, mountpoint: Path, size_gib: float):
        self.image, self.mountpoint, self.size_gib = image, mountpoint, size_gib

    def __enter__(self) -> Path:
        self.mountpoint.mkdir(parents=True, exist_ok=True)
        with open(self.image, "wb") as fh:
            fh.truncate(int(self.size_gib * 2**30))
        subprocess.run(["mkfs.ext4", "-q", "-F", str(self.image)], check=True)
        subprocess.run(["mount", "-o", "loop", str(self.image), str(self.mountpoint)],
                       check=True)
        os.chmod(self.mountpoint, 0o755)
        return self.mountpoint

    def __exit__(self, *exc) -> None:
        subprocess.run(["umount", str(self.mountpoint)], check=False)
        self.image.unlink(missing_ok=True)
