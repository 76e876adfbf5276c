"""A cell's device trace as the FTL model replays it: writes with their placement, the
ranges deallocated, and the commands that reach an FTL without moving data.

The guest records one tracefs stream per cell (``nvme-trace.txt.gz``, see
:mod:`slimio_repro.agent.vmstorage`) with three kinds of events, in time order:

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

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..parse import nvmetrace
from . import engine as e

TraceError = nvmetrace.TraceError

# Categories of a traced command (Ops.cmd).
CMD_WRITE = 0
CMD_DEALLOC = 1        # a deallocated range (bio discard, SlimIO marker)
CMD_READ = 2
CMD_DSM = 3
CMD_WRITE_ZEROES = 4
CMD_NAMES = {CMD_WRITE: "write", CMD_DEALLOC: "deallocate range", CMD_READ: "read",
             CMD_DSM: "dataset management", CMD_WRITE_ZEROES: "write zeroes"}

SECTOR_BYTES = 512


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


def read(path: str | Path, lba_bytes: int, disk: str = "nvme0n1",
         block_dev: str = "259,0") -> Ops:
    """The commands of one trace on namespace ``disk`` (block device ``block_dev``, the
    ``MAJ,MIN`` of ``disk`` in the guest: /sys/block/nvme0n1/dev) of ``lba_bytes`` LBAs, read
    by the trace's parser (:mod:`slimio_repro.parse.nvmetrace`)."""
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

    for number, text in nvmetrace.numbered_lines(path):
        try:
            nvme = nvmetrace.parse_line(text, number, str(path))
            mark = None if nvme else nvmetrace.parse_dealloc_marker(text)
            bio = None if nvme or mark else nvmetrace.parse_discard_bio(text)
        except TraceError as exc:
            where = f"{path}:{number}: "
            raise TraceError(str(exc) if str(exc).startswith(where) else where + str(exc)) \
                from None
        if nvme is not None:
            if not nvme.disk:
                continue  # admin command
            if not nvmetrace.disk_matches(nvme.disk, disk):
                stats["other_disk_commands"] += 1
                continue
            op = nvme.opcode
            if op == "nvme_cmd_read":
                add(CMD_READ, nvme.slba, nvme.blocks, ln=number)
                stats["read_commands"] += 1
            elif op in ("nvme_cmd_write", "nvme_cmd_write_zeroes"):
                c = CMD_WRITE if op == "nvme_cmd_write" else CMD_WRITE_ZEROES
                add(c, nvme.slba, nvme.blocks, nvme.dtype, nvme.dspec,
                    bool(nvme.ctrl & nvmetrace.CTRL_DEAC), number)
                stats["write_commands" if c == CMD_WRITE else "write_zeroes_commands"] += 1
            elif op == nvmetrace.DSM_OPCODE:
                add(CMD_DSM, 0, 0, ln=number)
                stats["dsm_commands"] += 1
                stats["dsm_ranges"] += nvme.dsm_ranges
            elif op == "nvme_cmd_flush":
                stats["flush_commands"] += 1
            else:
                stats[f"other_commands:{op}"] += 1
        elif mark is not None:
            add(CMD_DEALLOC, int(mark["slba"]), int(mark["nlb"]), ln=number)
            stats["slimio_dealloc_ranges"] += 1
            stats[f"slimio_dealloc_lbas:{mark['why']}"] += int(mark["nlb"])
        elif bio is not None:
            if bio["dev"] != block_dev or "D" not in bio["rwbs"]:
                continue
            sector, sectors = int(bio["sector"]), int(bio["sectors"])
            first = -(-sector // per_lba)            # whole LBAs inside the range
            end = (sector + sectors) // per_lba
            if end > first:
                add(CMD_DEALLOC, first, end - first, ln=number)
            stats["discard_bios"] += 1
            stats["discard_bytes"] += sectors * SECTOR_BYTES
        elif "LOST" in text and "EVENTS" in text:
            raise TraceError(f"{path}:{number}: the trace lost events ({text.strip()}): "
                             "it cannot be replayed; rerun the cell")
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
