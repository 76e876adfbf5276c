"""Where a VM's host CPU goes: its vCPUs, or QEMU's emulation of its devices.

Under TCG, QEMU runs each vCPU in its own host thread ("CPU 0/TCG", ...) and emulates the
devices in others: the main loop (the NVMe controller's command handling), the thread pool
that does the backing file's I/O ("worker"), RCU. On a 2-core host they share the same two
cores, so whatever the emulated SSD costs the host is taken from the guest's CPUs; on real
hardware the SSD's controller does that work. :class:`HostCpuSampler` reads every QEMU thread's
CPU time from ``/proc/PID/task/*/stat`` a few times a second (no tool needed: the kernel
keeps the counts), and :func:`cores` turns the samples into cores used over a window.
"""

from __future__ import annotations

import csv
import os
import re
import threading
import time
from pathlib import Path

CLK_TCK = os.sysconf("SC_CLK_TCK")
# QEMU names its vCPU threads "CPU <n>/<accelerator>" (qemu_thread_create in
# accel/tcg/tcg-accel-ops-mttcg.c and accel/kvm/kvm-accel-ops.c); every other thread is
# emulation (the main loop, the block layer's thread pool "worker", "call_rcu", ...).
VCPU_THREAD = re.compile(r"^CPU \d+/(TCG|KVM)$")


class HostCpuError(RuntimeError):
    pass


def thread_class(comm: str) -> str:
    """``vcpu`` for a QEMU vCPU thread's name, ``emulation`` for any other."""
    return "vcpu" if VCPU_THREAD.match(comm) else "emulation"


def qemu_pid(domain: str, run_dir: Path = Path("/run/libvirt/qemu")) -> int:
    """The pid of libvirt's QEMU for ``domain`` (libvirt writes it next to the domain's
    runtime state)."""
    pid_file = run_dir / f"{domain}.pid"
    try:
        return int(pid_file.read_text().strip())
    except (OSError, ValueError) as exc:
        raise HostCpuError(f"no QEMU pid for domain {domain} in {pid_file}: {exc}") from exc


# The row of the whole process (every thread's CPU, also of threads that have ended, such
# as the thread pool's idle workers): tid 0; the row of the whole host (every CPU's busy
# time, from /proc/stat): tid -1.
PROCESS, HOST = 0, -1


def parse_stat(stat: str) -> tuple[str, float]:
    """A ``/proc/.../stat`` line: (name, user plus system CPU seconds)."""
    # pid (comm) state ...: comm may hold spaces and parentheses, so split at the last ")"
    comm = stat[stat.index("(") + 1:stat.rindex(")")]
    fields = stat[stat.rindex(")") + 2:].split()
    utime, stime = int(fields[11]), int(fields[12])   # stat fields 14 and 15
    return comm, (utime + stime) / CLK_TCK


def host_busy_s(proc_stat: str) -> float:
    """The host's busy CPU seconds so far, every CPU: /proc/stat's first line less its idle
    and iowait (the guest time columns are already in user and nice)."""
    ticks = [int(v) for v in proc_stat.splitlines()[0].split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = ticks[:8]
    return (user + nice + system + irq + softirq + steal) / CLK_TCK


def read_threads(pid: int, proc: Path = Path("/proc")) -> dict[int, tuple[str, float]]:
    """Every thread of ``pid``: tid -> (name, CPU seconds so far); the process as a whole
    under tid :data:`PROCESS`, the host's busy time under :data:`HOST`."""
    out = {HOST: ("host", host_busy_s((proc / "stat").read_text())),
           PROCESS: parse_stat((proc / str(pid) / "stat").read_text())}
    for task in (proc / str(pid) / "task").iterdir():
        try:
            out[int(task.name)] = parse_stat((task / "stat").read_text())
        except OSError:
            continue            # the thread ended between the listing and the read
    return out


class HostCpuSampler:
    """Samples QEMU's threads every ``interval_s`` into ``path`` (CSV: unix_s, tid, comm,
    cpu_s; tid 0 = the whole process) until :meth:`stop`."""

    def __init__(self, pid: int, path: Path, interval_s: float = 0.25):
        self.pid, self.path, self.interval_s = pid, path, interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> "HostCpuSampler":
        self._thread.start()
        return self

    def _run(self) -> None:
        with open(self.path, "w", newline="") as fh:
            out = csv.writer(fh)
            out.writerow(["unix_s", "tid", "comm", "cpu_s"])
            while True:
                now = time.time()
                try:
                    threads = read_threads(self.pid)
                except OSError:
                    return      # QEMU exited
                for tid, (comm, cpu_s) in sorted(threads.items()):
                    out.writerow([f"{now:.3f}", tid, comm, f"{cpu_s:.2f}"])
                fh.flush()
                if self._stop.wait(self.interval_s):
                    return

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


def load(path: Path) -> dict[float, dict[int, tuple[str, float]]]:
    """A :class:`HostCpuSampler`'s CSV: sample time -> tid -> (name, CPU seconds)."""
    samples: dict[float, dict[int, tuple[str, float]]] = {}
    with open(path, newline="") as fh:
        for row in csv.DictReader(fh):
            samples.setdefault(float(row["unix_s"]), {})[int(row["tid"])] = (
                row["comm"], float(row["cpu_s"]))
    return samples


def cores(samples: dict[float, dict[int, tuple[str, float]]], start: float,
          end: float) -> dict[str, float] | None:
    """Host cores used over [start, end] by QEMU's vCPU threads (``vcpu``), by the rest of
    QEMU (``emulation``) and by everything else on the host (``other``): CPU seconds between
    the last sample at or before ``start`` and the first at or after ``end``, over the time
    between those two samples. None when the samples do not cover the window."""
    times = sorted(samples)
    before = [t for t in times if t <= start]
    after = [t for t in times if t >= end]
    if not before or not after or after[0] <= before[-1]:
        return None
    t0, t1 = before[-1], after[0]
    if any(k not in samples[t] for k in (PROCESS, HOST) for t in (t0, t1)):
        return None

    def delta(tid: int) -> float:
        # A thread born in the window started from nothing.
        return samples[t1][tid][1] - samples[t0].get(tid, ("", 0.0))[1]
    vcpu = sum(delta(tid) for tid, (comm, _) in samples[t1].items()
               if tid > PROCESS and thread_class(comm) == "vcpu")
    span = t1 - t0
    # The rest of the process: every other thread, those that ended in the window too; the
    # rest of the host: everything but this QEMU.
    return {"vcpu": vcpu / span, "emulation": (delta(PROCESS) - vcpu) / span,
            "other": (delta(HOST) - delta(PROCESS)) / span}
