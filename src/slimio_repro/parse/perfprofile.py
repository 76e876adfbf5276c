"""Where a snapshot process's CPU goes, from ``perf script`` (Table 2, Figure 2a).

The paper's Table 2 gives "the CPU cycle utilization by the snapshot process within the file
system" (F2FS: 11.53 % Snapshot-only, 13.61 % Snapshot&WAL). Here the snapshot (fork child)
process is sampled with call graphs (``perf record -g -e cpu-clock``: a software clock,
since a guest has no PMU), and each sample is attributed by its kernel call chain. The rule:

* **kernel I/O path**: the sample's stack holds a system call that writes or syncs data
  (:data:`IO_SYSCALLS`: write, pwrite, writev, sync_file_range, fsync, fdatasync, and
  io_uring_enter, SlimIO's submission), or the kernel's writeback of it on the process's
  behalf inside one of them;
* **file system's write path** (Table 2): a kernel-I/O-path sample whose stack holds a
  function of the file system (:data:`FS_PREFIXES`: ``f2fs_`` for F2FS; ``ext4_`` and
  ``jbd2_`` for EXT4), counted inclusively: the generic page-cache code and the copy from
  user memory that the file system's ``write_iter`` calls are its write path's cost too,
  since they run because the snapshot goes through it;
* **of which data copy**: a file-system-write-path sample whose leaf (the sampled function)
  copies the data (:data:`COPY_FUNCTIONS`); the rest is the path's control work, which
  is what the paper's text says the share is ("the control path rather than ... actual data
  write operations"), so both are reported;
* everything else is the snapshot's in-memory work (iterating, encoding, compressing,
  copy-on-write faults, ``madvise``) or other system calls.

Samples are weighted by their period (nanoseconds of the clock), so a profile taken at any
rate gives the same shares.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# System calls through which a snapshot's data reaches storage (x86-64 entry points and the
# generic ones below them; both appear, depending on the kernel's inlining).
IO_SYSCALLS = frozenset({
    "ksys_write", "__x64_sys_write", "ksys_pwrite64", "__x64_sys_pwrite64",
    "__x64_sys_writev", "__x64_sys_pwritev", "__x64_sys_pwritev2",
    "__x64_sys_sync_file_range", "ksys_sync_file_range",
    "__x64_sys_fsync", "__x64_sys_fdatasync", "do_fsync",
    "__x64_sys_io_uring_enter", "__do_sys_io_uring_enter",
})
# "raw": no file system (SlimIO's passthru device): nothing is a file system's write path.
FS_PREFIXES = {"f2fs": ("f2fs_",), "ext4": ("ext4_", "jbd2_"), "raw": ()}
# Functions that move the snapshot's bytes themselves (user memory into the page cache).
COPY_FUNCTIONS = frozenset({
    "copy_user_enhanced_fast_string", "copy_user_generic_string",
    "copy_user_generic_unrolled", "rep_movs_alternative", "copy_folio_from_iter_atomic",
    "copy_page_from_iter_atomic", "_copy_from_iter", "__memcpy", "memcpy_orig",
    "memcpy", "copyin",
})

# "comm pid/tid [cpu] time: period event:" (perf script -F comm,pid,tid,time,period,event,...)
_HEADER = re.compile(r"^(?P<comm>.+?)\s+(?P<pid>\d+)/(?P<tid>\d+)\s+(?:\[\d+\]\s+)?"
                     r"(?P<time>\d+\.\d+):\s+(?P<period>\d+)\s+(?P<event>[\w:-]+):")
# "\t addr sym+off (dso)" or "\t addr sym (dso)"
_FRAME = re.compile(r"^\s+[0-9a-f]+\s+(?P<sym>.+?)(?:\+0x[0-9a-f]+)?\s+\((?P<dso>.*)\)$")


class PerfProfileError(ValueError):
    pass


@dataclass(frozen=True)
class Sample:
    pid: int
    tid: int
    period: int
    frames: tuple[str, ...]     # leaf first


@dataclass(frozen=True)
class Attribution:
    """A process's sampled CPU time (seconds, from the samples' periods) by where it went."""
    samples: int
    total_s: float
    io_path_s: float            # kernel I/O path (write/sync system calls)
    fs_write_s: float           # ... of which the file system's write path (inclusive)
    fs_copy_s: float            # ... of which the data copy

    @property
    def fs_write_share(self) -> float:
        """Table 2's number: the file system's write path over all the process's CPU."""
        return self.fs_write_s / self.total_s if self.total_s else 0.0

    @property
    def fs_control_share(self) -> float:
        """The same without the data copy: the path's control work."""
        return (self.fs_write_s - self.fs_copy_s) / self.total_s if self.total_s else 0.0

    @property
    def io_path_share(self) -> float:
        return self.io_path_s / self.total_s if self.total_s else 0.0

    @property
    def in_memory_s(self) -> float:
        """Everything outside the kernel I/O path: the snapshot's in-memory work."""
        return self.total_s - self.io_path_s


def parse(text: str) -> list[Sample]:
    """The samples of ``perf script`` output (with call graphs: ``perf record -g``)."""
    out: list[Sample] = []
    head = None
    frames: list[str] = []

    def flush() -> None:
        if head is not None:
            out.append(Sample(int(head["pid"]), int(head["tid"]), int(head["period"]),
                              tuple(frames)))

    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        m = _HEADER.match(line)
        if m:
            flush()
            head, frames = m, []
            continue
        f = _FRAME.match(line)
        if f is None or head is None:
            raise PerfProfileError(
                f"line {n} is neither a sample header nor a call-chain frame of `perf script` "
                f"output (-F comm,pid,tid,time,period,event,ip,sym,dso): {line[:120]!r}")
        frames.append(f["sym"])
    flush()
    if not out:
        raise PerfProfileError("no samples: was the profile recorded with perf record -g, and "
                               "did the process run while it recorded?")
    return out


def attribute(samples: list[Sample], fs: str, pid: int | None = None,
              tid: int | None = None) -> Attribution:
    """Attribute ``samples`` (of process ``pid``, or all; of its thread ``tid`` alone, if
    given) by :mod:`the rule above <slimio_repro.parse.perfprofile>` for file system ``fs``
    (a key of FS_PREFIXES)."""
    try:
        prefixes = FS_PREFIXES[fs]
    except KeyError:
        raise PerfProfileError(f"file system {fs!r}: the attribution knows "
                               f"{', '.join(sorted(FS_PREFIXES))}") from None
    chosen = [s for s in samples if (pid is None or s.pid == pid)
              and (tid is None or s.tid == tid)]
    if not chosen:
        raise PerfProfileError(f"no samples of pid {pid} (the profile has pids "
                               f"{sorted({s.pid for s in samples})})")
    total = io = fs_write = fs_copy = 0
    for s in chosen:
        total += s.period
        if not any(f in IO_SYSCALLS for f in s.frames):
            continue
        io += s.period
        if any(f.startswith(prefixes) for f in s.frames):
            fs_write += s.period
            if s.frames and s.frames[0] in COPY_FUNCTIONS:
                fs_copy += s.period
    ns = 1e-9
    return Attribution(samples=len(chosen), total_s=total * ns, io_path_s=io * ns,
                       fs_write_s=fs_write * ns, fs_copy_s=fs_copy * ns)
