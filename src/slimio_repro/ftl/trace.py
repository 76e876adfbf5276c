"""A cell's device trace as the FTL model replays it: writes with their placement, the
ranges deallocated, and the commands that reach an FTL without moving data.

The guest records one tracefs stream per cell (``nvme-trace.txt.gz``, see
:mod:`slimio_repro.guest.vmstorage`) with three kinds of events, in time order:

* ``nvme_setup_cmd``: every NVMe command on the namespace. Writes give slba, length, DTYPE
  and DSPEC; a Dataset Management command only its range count (``nr``, 0-based): the
  kernel's trace does not print the ranges;
* ``block_bio_queue`` with a ``D`` in its rwbs: a discard bio of the kernel's block layer
  (F2FS, mkfs), with its sector range (512-byte sectors) on device ``MAJ,MIN``; these
  become DSM commands, whose ranges they are;
* ``tracing_mark_write: slimio_dealloc slba=S nlb=N why=W``: SlimIO writes this line into
  ``trace_marker`` just before it deallocates LBAs ``S .. S+N-1`` through passthru (which
  bypasses the block layer, so no bio event exists for it).

Write Zeroes with the DEAC bit (CDW12 bit 25, ``ctrl & 0x200``) deallocates too.
Flushes do not reach an FTL and are dropped. Admin commands and other disks are ignored.
"""

from __future__ import annotations

import gzip
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from . import engine as e

# Categories of a traced command (Ops.cmd).
CMD_WRITE = 0
CMD_DEALLOC = 1        # a deallocated range (bio discard, SlimIO marker)
CMD_READ = 2
CMD_DSM = 3
CMD_WRITE_ZEROES = 4
CMD_NAMES = {CMD_WRITE: "write", CMD_DEALLOC: "deallocate range", CMD_READ: "read",
             CMD_DSM: "dataset management", CMD_WRITE_ZEROES: "write zeroes"}

CTRL_DEAC = 0x0200
SECTOR_BYTES = 512

_NVME = re.compile(
    r" (?P<ts>\d+\.\d+): nvme_setup_cmd: nvme\d+: disk=(?P<disk>[^,]+), qid=\d+, cmdid=\d+, "
    r"nsid=\d+, flags=0x[0-9a-f]+, meta=0x[0-9a-f]+, cmd=\((?P<op>\w+)(?: (?P<args>.*))?\)")
_RW = re.compile(r"slba=(\d+), len=(\d+), ctrl=0x([0-9a-f]+), dsmgmt=(\d+)")
_DSM = re.compile(r"nr=(\d+), attributes=(\d+)")
_MARK = re.compile(r" (?P<ts>\d+\.\d+): tracing_mark_write: slimio_dealloc slba=(?P<slba>\d+) "
                   r"nlb=(?P<nlb>\d+) why=(?P<why>\w+)")
_BIO = re.compile(r" (?P<ts>\d+\.\d+): block_bio_queue: (?P<dev>\d+,\d+) (?P<rwbs>\S+) "
                  r"(?P<sector>\d+) \+ (?P<sectors>\d+)")
_NVME_DISK = re.compile(r"^(nvme\d+)c\d+(n\d+)$")


class TraceError(ValueError):
    """A trace the model cannot replay; the message names the file and line."""


@dataclass
class Ops:
    """A trace's commands as parallel arrays, in LBAs of ``lba_bytes``."""
    lba_bytes: int
    cmd: np.ndarray       # int8, CMD_*
    slba: np.ndarray      # int64
    nlb: np.ndarray       # int64 (LBAs; 0 for commands without a range)
    dtype: np.ndarray     # int64 directive type of a write (-1 otherwise)
    dspec: np.ndarray     # int64 directive specific of a write (0 otherwise)
    deac: np.ndarray      # bool: a write zeroes that deallocates
    line: np.ndarray      # int64 line number in the source, for messages
    source: str = ""
    stats: dict = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.cmd)

    @property
    def kind(self) -> np.ndarray:
        """The engine's operation kind of every command."""
        k = np.full(len(self.cmd), e.OP_REQUEST, dtype=np.int8)
        k[(self.cmd == CMD_WRITE) | ((self.cmd == CMD_WRITE_ZEROES) & ~self.deac)] = e.OP_WRITE
        k[(self.cmd == CMD_DEALLOC) | ((self.cmd == CMD_WRITE_ZEROES) & self.deac)] = \
            e.OP_DEALLOC
        return k

    def describe(self, i: int) -> str:
        return (f"{self.source}:{int(self.line[i])} ({CMD_NAMES[int(self.cmd[i])]} "
                f"slba={int(self.slba[i])} nlb={int(self.nlb[i])})")

    def write_lbas(self) -> int:
        """LBAs of the write commands (what the device counts as host writes)."""
        return int(self.nlb[self.cmd == CMD_WRITE].sum())

    @staticmethod
    def concat(parts: list["Ops"]) -> "Ops":
        if len({p.lba_bytes for p in parts}) != 1:
            raise TraceError("cannot join traces of different LBA sizes: "
                             + ", ".join(f"{p.source}: {p.lba_bytes}" for p in parts))
        cat = {name: np.concatenate([getattr(p, name) for p in parts])
               for name in ("cmd", "slba", "nlb", "dtype", "dspec", "deac", "line")}
        return Ops(lba_bytes=parts[0].lba_bytes, source="+".join(p.source for p in parts),
                   **cat)


def _open(path: Path):
    with open(path, "rb") as f:
        gz = f.read(2) == b"\x1f\x8b"
    return gzip.open(path, "rt", errors="replace") if gz else open(path, errors="replace")


def _disk_ok(disk: str, wanted: str) -> bool:
    return disk == wanted or _NVME_DISK.sub(r"\1\2", disk) == wanted


def read(path: str | Path, lba_bytes: int, disk: str = "nvme0n1",
         block_dev: str = "259,0") -> Ops:
    """The commands of one trace on namespace ``disk`` (block device ``block_dev``, the
    ``MAJ,MIN`` of ``disk`` in the guest: /sys/block/nvme0n1/dev) of ``lba_bytes`` LBAs."""
    path = Path(path)
    if lba_bytes < SECTOR_BYTES or lba_bytes & (lba_bytes - 1):
        raise TraceError(f"lba_bytes={lba_bytes!r} is not an LBA size (a power of two of at "
                         "least 512: the namespace's, nvme id-ns -H)")
    per_lba = lba_bytes // SECTOR_BYTES
    cmd, slba, nlb, dtype, dspec, deac, lines = [], [], [], [], [], [], []
    stats = Counter()

    def add(c, s, n, dt=-1, ds=0, dz=False, ln=0):
        cmd.append(c), slba.append(s), nlb.append(n), dtype.append(dt), dspec.append(ds)
        deac.append(dz), lines.append(ln)

    try:
        with _open(path) as f:
            for number, text in enumerate(f, start=1):
                if "nvme_setup_cmd:" in text:
                    m = _NVME.search(text)
                    if m is None:
                        if "disk=" in text:
                            raise TraceError(f"{path}:{number}: unreadable nvme_setup_cmd "
                                             f"event: {text.strip()!r}")
                        continue  # admin command
                    if not _disk_ok(m["disk"], disk):
                        stats["other_disk_commands"] += 1
                        continue
                    op = m["op"]
                    if op in ("nvme_cmd_write", "nvme_cmd_write_zeroes", "nvme_cmd_read"):
                        rw = _RW.match(m["args"] or "")
                        if rw is None:
                            raise TraceError(f"{path}:{number}: {op} without slba/len/ctrl/"
                                             f"dsmgmt: {text.strip()!r}")
                        ctrl = int(rw[3], 16)
                        n = int(rw[2]) + 1
                        if op == "nvme_cmd_read":
                            add(CMD_READ, int(rw[1]), n, ln=number)
                            stats["read_commands"] += 1
                        else:
                            c = CMD_WRITE if op == "nvme_cmd_write" else CMD_WRITE_ZEROES
                            add(c, int(rw[1]), n, (ctrl >> 4) & 0xF, int(rw[4]) >> 16,
                                bool(ctrl & CTRL_DEAC), number)
                            stats["write_commands" if c == CMD_WRITE
                                  else "write_zeroes_commands"] += 1
                    elif op == "nvme_cmd_dsm":
                        d = _DSM.match(m["args"] or "")
                        if d is None:
                            raise TraceError(f"{path}:{number}: DSM without nr/attributes: "
                                             f"{text.strip()!r}")
                        add(CMD_DSM, 0, 0, ln=number)
                        stats["dsm_commands"] += 1
                        stats["dsm_ranges"] += int(d[1]) + 1
                    elif op == "nvme_cmd_flush":
                        stats["flush_commands"] += 1
                    else:
                        stats[f"other_commands:{op}"] += 1
                elif "tracing_mark_write: slimio_dealloc" in text:
                    m = _MARK.search(text)
                    if m is None:
                        raise TraceError(f"{path}:{number}: unreadable slimio_dealloc marker: "
                                         f"{text.strip()!r}")
                    add(CMD_DEALLOC, int(m["slba"]), int(m["nlb"]), ln=number)
                    stats["slimio_dealloc_ranges"] += 1
                    stats[f"slimio_dealloc_lbas:{m['why']}"] += int(m["nlb"])
                elif "block_bio_queue:" in text:
                    m = _BIO.search(text)
                    if m is None:
                        raise TraceError(f"{path}:{number}: unreadable block_bio_queue "
                                         f"event: {text.strip()!r}")
                    if m["dev"] != block_dev or "D" not in m["rwbs"]:
                        continue
                    sector, sectors = int(m["sector"]), int(m["sectors"])
                    first = -(-sector // per_lba)            # whole LBAs inside the range
                    end = (sector + sectors) // per_lba
                    if end > first:
                        add(CMD_DEALLOC, first, end - first, ln=number)
                    stats["discard_bios"] += 1
                    stats["discard_bytes"] += sectors * SECTOR_BYTES
                elif "LOST" in text and "EVENTS" in text:
                    raise TraceError(f"{path}:{number}: the trace lost events ({text.strip()}): "
                                     "it cannot be replayed; rerun the cell")
    except (OSError, EOFError) as exc:
        raise TraceError(f"cannot read trace {path}: {exc}") from None
    return Ops(lba_bytes=lba_bytes, cmd=np.array(cmd, dtype=np.int8),
               slba=np.array(slba, dtype=np.int64), nlb=np.array(nlb, dtype=np.int64),
               dtype=np.array(dtype, dtype=np.int64), dspec=np.array(dspec, dtype=np.int64),
               deac=np.array(deac, dtype=bool), line=np.array(lines, dtype=np.int64),
               source=str(path), stats=dict(sorted(stats.items())))


def deallocation_coverage(ops: Ops) -> dict:
    """Whether the trace says where its deallocations went: DSM commands in the trace, and
    range records (bio discards, SlimIO markers) that tell their ranges. A trace with DSM
    commands and no range records was taken before ranges were traced: its deallocations
    cannot be replayed."""
    dsm = int((ops.cmd == CMD_DSM).sum())
    ranges = int((ops.cmd == CMD_DEALLOC).sum())
    return {"dsm_commands": dsm, "dealloc_ranges": ranges,
            "dealloc_lbas": int(ops.nlb[ops.cmd == CMD_DEALLOC].sum()),
            "ranges_known": dsm == 0 or ranges > 0}
