"""Parse the Linux tracefs event ``nvme/nvme_setup_cmd`` and summarise what the host sent.

Why: the FDP experiments need to know, per NVMe command, which reclaim unit handle a write
was placed on (SlimIO-style placement vs. the device's default handle), how many bytes each
opcode moved, and whether the trace ring buffer dropped events.  The kernel's own tracepoint
is the ground truth for that: it records every command the driver builds, including
passthrough commands from ``nvme io-passthru``.

Input is the text of ``/sys/kernel/tracing/trace`` or ``trace_pipe`` (as captured in the
guest, kernel 6.12; plain or gzip-compressed, possibly hundreds of MB, so everything streams).
An event line looks like::

    dd-766  [000] .....  149.081148: nvme_setup_cmd: nvme0: disk=nvme0c0n1, qid=1,
        cmdid=40980, nsid=1, flags=0x0, meta=0x0, cmd=(nvme_cmd_write slba=74754, len=127,
        ctrl=0x0, dsmgmt=0, reftag=0)

(one line in the file).  Field semantics, from ``drivers/nvme/host/trace.c``
(``nvme_trace_read_write``) and the NVMe base/NVM command set specs:

* ``len`` is the 0-based Number of Logical Blocks, so ``blocks = len + 1``;
* ``ctrl`` is CDW12 bits 31:16, so DTYPE = ``(ctrl >> 4) & 0xF`` and FUA = ``ctrl & 0x4000``;
* ``dsmgmt`` is CDW13, so DSPEC = ``dsmgmt >> 16``;
* a write's FDP placement id is DSPEC when DTYPE == 2 (data placement directive); with no
  directive the device uses its default reclaim unit handle (reported as ``"none"``).

Admin commands (``qid=0``, ``nvme_admin_*``) carry no ``disk=``; their ``disk`` is ``""``.

The same stream carries two more events the FTL model replays (:mod:`slimio_repro.ftl.trace`),
read here too so that one module reads the trace: a discard bio of the block layer
(``block_bio_queue``, :func:`parse_discard_bio`) and SlimIO's marker before a deallocation
through passthru (``tracing_mark_write: slimio_dealloc``, :func:`parse_dealloc_marker`).
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

EVENT_NAME = "nvme_setup_cmd"

# Task name (may hold spaces, dashes, parentheses: greedy up to the *last* "-PID" before the
# CPU column), optional "(TGID)" column (option record-tgid), "[CPU]", optional latency flags
# (option irq-info), timestamp, event name, event body.
LINE_RE = re.compile(
    r"^\s*(?P<task>.*)-(?P<pid>\d+)\s+(?:\(\s*(?:\d+|-+)\)\s+)?\[(?P<cpu>\d+)\]\s+"
    r"(?:\S+\s+)?(?P<ts>\d+(?:\.\d+)?): nvme_setup_cmd:\s+(?P<body>.*?)\s*$")
BODY_RE = re.compile(
    r"^(?P<ctrl>nvme\d+): (?:disk=(?P<disk>[^,\s]+), )?qid=(?P<qid>\d+), cmdid=(?P<cid>\d+), "
    r"nsid=(?P<nsid>\d+), flags=0x[0-9a-fA-F]+, meta=0x[0-9a-fA-F]+, "
    r"cmd=\((?P<opcode>[^\s)]+)(?: (?P<args>.*))?\)$")
# Format shared by read, write, write zeroes and zone append (nvme_trace_read_write).
RW_ARGS_RE = re.compile(r"^slba=(?P<slba>\d+), len=(?P<len>\d+), ctrl=0x(?P<ctrl>[0-9a-fA-F]+), "
                        r"dsmgmt=(?P<dsmgmt>\d+), reftag=\d+$")
# A Dataset Management command: its range count (0-based) and attributes, not its ranges.
DSM_ARGS_RE = re.compile(r"^nr=(?P<nr>\d+), attributes=(?P<attributes>\d+)")
DSM_OPCODE = "nvme_cmd_dsm"
# Opcodes whose arguments must be in the read/write format.
RW_OPCODES = frozenset({"nvme_cmd_read", "nvme_cmd_write", "nvme_cmd_write_zeroes",
                        "nvme_cmd_zone_append"})
HEADER_ENTRIES_RE = re.compile(r"^#\s*entries-in-buffer/entries-written:\s*(\d+)/(\d+)")
MARKER_RE = re.compile(r" (?P<ts>\d+\.\d+): tracing_mark_write: slimio_dealloc slba=(?P<slba>\d+) "
                       r"nlb=(?P<nlb>\d+) why=(?P<why>\w+)")
BIO_RE = re.compile(r" (?P<ts>\d+\.\d+): block_bio_queue: (?P<dev>\d+,\d+) (?P<rwbs>\S+) "
                    r"(?P<sector>\d+) \+ (?P<sectors>\d+)")
# trace_pipe reports ring-buffer overruns inline.
LOST_EVENTS_RE = re.compile(r"^CPU:\d+ \[LOST (\d+) EVENTS\]")

DTYPE_DATA_PLACEMENT = 2
CTRL_FUA = 0x4000
CTRL_DEAC = 0x0200  # Write Zeroes: deallocate the range (CDW12 bit 25)
NO_PLACEMENT_KEY = "none"
GZIP_MAGIC = b"\x1f\x8b"


class TraceError(ValueError):
    """An ``nvme_setup_cmd`` event line that this parser cannot read."""


@dataclass(frozen=True)
class NvmeCommand:
    """One ``nvme_setup_cmd`` event.

    ``slba``/``blocks``/``dtype``/``dspec`` are decoded only for commands the kernel traces in
    the read/write format (read, write, write zeroes, zone append); they are None otherwise,
    and ``fua`` is False.
    """

    timestamp_s: float
    task: str             # process name, without the "-PID" suffix
    cpu: int
    disk: str             # e.g. "nvme0c0n1"; "" for admin commands
    qid: int              # 0 = admin queue
    cid: int
    nsid: int
    opcode: str           # e.g. "nvme_cmd_write"; "0x.." for opcodes the kernel has no name for
    slba: int | None
    blocks: int | None    # len + 1
    dtype: int | None     # directive type, (ctrl >> 4) & 0xF
    dspec: int | None     # directive specific, dsmgmt >> 16
    fua: bool
    pid: int = 0
    controller: str = ""  # e.g. "nvme0"
    ctrl: int | None = None        # CDW12 bits 31:16 of a read/write-format command
    dsm_ranges: int | None = None  # a Dataset Management command's range count (nr + 1)

    @property
    def placement_id(self) -> int | None:
        """FDP placement id (DSPEC) when the command carries a data placement directive."""
        return self.dspec if self.dtype == DTYPE_DATA_PLACEMENT else None


def _where(line_number: int | None, source: str | None) -> str:
    if source is not None and line_number is not None:
        return f"{source}:{line_number}: "
    if line_number is not None:
        return f"line {line_number}: "
    return f"{source}: " if source is not None else ""


def parse_line(line: str, line_number: int | None = None,
               source: str | None = None) -> NvmeCommand | None:
    """The command in one trace line, or None for anything that is not an nvme_setup_cmd event.

    Raise :class:`TraceError` naming ``source``, ``line_number`` and the text when the line is an
    ``nvme_setup_cmd`` event in a format this parser does not know.
    """
    if line.startswith("#") or f"{EVENT_NAME}:" not in line:
        return None

    def fail(why: str) -> TraceError:
        return TraceError(
            f"{_where(line_number, source)}cannot parse {EVENT_NAME} event ({why}): "
            f"{line.rstrip()!r}; expected the Linux 6.12 tracefs text format, e.g. "
            "'dd-766 [000] ..... 149.081148: nvme_setup_cmd: nvme0: disk=nvme0c0n1, qid=1, "
            "cmdid=40980, nsid=1, flags=0x0, meta=0x0, cmd=(nvme_cmd_write slba=74754, len=127, "
            "ctrl=0x0, dsmgmt=0, reftag=0)'; check the capture is complete and unmodified")

    m = LINE_RE.match(line)
    if m is None:
        raise fail("no 'TASK-PID [CPU] ... TIMESTAMP:' prefix")
    b = BODY_RE.match(m["body"])
    if b is None:
        raise fail("unexpected event fields")
    opcode = b["opcode"]
    args = b["args"] or ""
    slba = blocks = dtype = dspec = ctrl = dsm_ranges = None
    fua = False
    rw = RW_ARGS_RE.match(args)
    if opcode == DSM_OPCODE:
        d = DSM_ARGS_RE.match(args)
        if d is None:
            raise fail(f"{opcode} arguments not in 'nr=, attributes=' form")
        dsm_ranges = int(d["nr"]) + 1
    elif rw is not None:
        ctrl = int(rw["ctrl"], 16)
        dsmgmt = int(rw["dsmgmt"])
        slba = int(rw["slba"])
        blocks = int(rw["len"]) + 1
        dtype = (ctrl >> 4) & 0xF
        dspec = dsmgmt >> 16
        fua = bool(ctrl & CTRL_FUA)
    elif opcode in RW_OPCODES:
        raise fail(f"{opcode} arguments not in 'slba=, len=, ctrl=, dsmgmt=, reftag=' form")
    return NvmeCommand(
        timestamp_s=float(m["ts"]), task=m["task"], cpu=int(m["cpu"]), disk=b["disk"] or "",
        qid=int(b["qid"]), cid=int(b["cid"]), nsid=int(b["nsid"]), opcode=opcode, slba=slba,
        blocks=blocks, dtype=dtype, dspec=dspec, fua=fua, pid=int(m["pid"]),
        controller=b["ctrl"], ctrl=ctrl, dsm_ranges=dsm_ranges)


def _other_event(line: str, name: str, pattern: re.Pattern) -> re.Match | None:
    if name not in line:
        return None
    m = pattern.search(line)
    if m is None:
        raise TraceError(f"unreadable {name.rstrip(':')} event: {line.strip()!r}")
    return m


def parse_dealloc_marker(line: str) -> re.Match | None:
    """SlimIO's ``slimio_dealloc slba=S nlb=N why=W`` marker (``slba``, ``nlb``, ``why``), or
    None when the line is not one; :class:`TraceError` when it is one that cannot be read."""
    return _other_event(line, "tracing_mark_write: slimio_dealloc", MARKER_RE)


def parse_discard_bio(line: str) -> re.Match | None:
    """A ``block_bio_queue`` event (``dev`` MAJ,MIN, ``rwbs``, ``sector``, ``sectors`` in 512-byte
    sectors), or None when the line is not one; :class:`TraceError` when unreadable."""
    return _other_event(line, "block_bio_queue:", BIO_RE)


def _open_text(path: Path) -> IO[str]:
    """Open a trace for reading as text, gunzipping it when it starts with the gzip magic."""
    try:
        with open(path, "rb") as f:
            magic = f.read(2)
    except OSError as exc:
        raise TraceError(f"cannot read trace {path}: {exc}") from None
    # Task names are kernel comm strings, not guaranteed UTF-8: never fail on them.
    if magic == GZIP_MAGIC:
        return gzip.open(path, "rt", encoding="utf-8", errors="replace")
    return open(path, encoding="utf-8", errors="replace")


def numbered_lines(path: Path) -> Iterator[tuple[int, str]]:
    """(line number, line) of a trace file, plain or gzip."""
    with _open_text(path) as f:
        try:
            yield from enumerate(f, start=1)
        except (OSError, EOFError) as exc:  # truncated/corrupt gzip
            raise TraceError(f"cannot read trace {path}: {exc}; is the file complete?") from None


def iter_commands(path: str | Path) -> Iterator[NvmeCommand]:
    """Stream the commands in a trace file (plain text or gzip), in file order."""
    path = Path(path)
    for number, line in numbered_lines(path):
        cmd = parse_line(line, number, str(path))
        if cmd is not None:
            yield cmd


def disk_matches(disk: str, wanted: str) -> bool:
    """Whether trace disk ``disk`` is ``wanted``.

    With native NVMe multipath the tracepoint names the per-controller path (``nvme0c0n1``)
    while users know the namespace head (``nvme0n1``): ``wanted="nvme0n1"`` matches both;
    ``wanted="nvme0c0n1"`` matches only that path.
    """
    if disk == wanted:
        return True
    return re.sub(r"^(nvme\d+)c\d+(n\d+)$", r"\1\2", disk) == wanted


def summarize(path: str | Path, lba_size_bytes: int, disk: str | None = None) -> dict:
    """JSON-serialisable summary of a trace; ``disk`` keeps only that disk's commands.

    Bytes are ``blocks * lba_size_bytes`` (the namespace's LBA data size: check
    ``nvme id-ns -H``, "in use").  Placement keys are ``"none"`` (device default handle) or
    the placement id as a string.  ``trace_entries_*`` come from the ``trace`` file header and
    are None for ``trace_pipe`` captures, which instead report ``trace_pipe_lost_events``.
    """
    if isinstance(lba_size_bytes, bool) or not isinstance(lba_size_bytes, int) \
            or lba_size_bytes <= 0:
        raise ValueError(f"lba_size_bytes={lba_size_bytes!r} must be a positive int (the "
                         "namespace's LBA data size, e.g. 512 or 4096; see nvme id-ns -H)")
    path = Path(path)
    commands_per_opcode: Counter[str] = Counter()
    blocks_per_opcode: Counter[str] = Counter()
    placement_commands: Counter[str] = Counter()
    placement_blocks: Counter[str] = Counter()
    disks_seen: set[str] = set()
    events = fua_writes = flushes = 0
    first_s = last_s = None
    lba_min = lba_end = None
    in_buffer = written = None
    pipe_lost = 0

    for number, line in numbered_lines(path):
        if line.startswith("#"):
            h = HEADER_ENTRIES_RE.match(line)
            if h:  # several headers only when captures were concatenated: add them up
                in_buffer = (in_buffer or 0) + int(h[1])
                written = (written or 0) + int(h[2])
            continue
        lost = LOST_EVENTS_RE.match(line)
        if lost:
            pipe_lost += int(lost[1])
            continue
        cmd = parse_line(line, number, str(path))
        if cmd is None:
            continue
        events += 1
        if cmd.disk:
            disks_seen.add(cmd.disk)
        if disk is not None and not disk_matches(cmd.disk, disk):
            continue
        commands_per_opcode[cmd.opcode] += 1
        first_s = cmd.timestamp_s if first_s is None else min(first_s, cmd.timestamp_s)
        last_s = cmd.timestamp_s if last_s is None else max(last_s, cmd.timestamp_s)
        if cmd.blocks is not None:
            blocks_per_opcode[cmd.opcode] += cmd.blocks
        if cmd.opcode == "nvme_cmd_flush":
            flushes += 1
        elif cmd.opcode == "nvme_cmd_write":
            pid = cmd.placement_id
            key = NO_PLACEMENT_KEY if pid is None else str(pid)
            placement_commands[key] += 1
            placement_blocks[key] += cmd.blocks
            fua_writes += cmd.fua
            end = cmd.slba + cmd.blocks
            lba_min = cmd.slba if lba_min is None else min(lba_min, cmd.slba)
            lba_end = end if lba_end is None else max(lba_end, end)

    def placement_order(key: str) -> tuple[int, int]:
        return (0, 0) if key == NO_PLACEMENT_KEY else (1, int(key))

    bytes_per_opcode = {op: n * lba_size_bytes for op, n in sorted(blocks_per_opcode.items())}
    return {
        "trace_path": str(path),
        "disk_filter": disk,
        "disks_seen": sorted(disks_seen),
        "lba_size_bytes": lba_size_bytes,
        "trace_events": events,
        "commands": sum(commands_per_opcode.values()),
        "commands_per_opcode": dict(sorted(commands_per_opcode.items())),
        "bytes_per_opcode": bytes_per_opcode,
        "read_commands": commands_per_opcode["nvme_cmd_read"],
        "read_bytes": bytes_per_opcode.get("nvme_cmd_read", 0),
        "write_commands": commands_per_opcode["nvme_cmd_write"],
        "write_bytes": bytes_per_opcode.get("nvme_cmd_write", 0),
        "writes_per_placement_id": {
            key: {"write_commands": placement_commands[key],
                  "write_bytes": placement_blocks[key] * lba_size_bytes}
            for key in sorted(placement_commands, key=placement_order)},
        "fua_write_commands": fua_writes,
        "flush_commands": flushes,
        "first_timestamp_s": first_s,
        "last_timestamp_s": last_s,
        "duration_s": None if first_s is None else round(last_s - first_s, 6),
        "write_lba_min": lba_min,
        "write_lba_end_exclusive": lba_end,
        "trace_entries_in_buffer": in_buffer,
        "trace_entries_written": written,
        "trace_entries_lost": None if written is None else written - in_buffer,
        "trace_pipe_lost_events": pipe_lost,
    }


def slimio_regions(layout: dict, placement_ids: dict) -> list[dict]:
    """The LBA regions of a SlimIO layout and the placement keys their writes may carry.

    ``layout`` is ``slimio-admin inspect --json`` output; ``placement_ids`` maps ``wal``,
    ``wal_snapshot``, ``on_demand`` to a placement id or -1 (none). Metadata records are
    written with no placement; the WAL region with the WAL's; a snapshot slot with the
    placement of whichever snapshot kind was written into it (slots change roles).
    """
    def key(pid: int) -> str:
        return NO_PLACEMENT_KEY if pid is None or pid < 0 else str(pid)

    wal, slots = layout["wal"], layout["slots"]
    slot_start = min(s["start_lba"] for s in slots)
    slot_end = max(s["start_lba"] + s["lbas"] for s in slots)
    return [
        {"region": "metadata", "start_lba": 0, "end_lba": wal["start_lba"],
         "allowed": [NO_PLACEMENT_KEY]},
        {"region": "wal", "start_lba": wal["start_lba"],
         "end_lba": wal["start_lba"] + wal["lbas"], "allowed": [key(placement_ids["wal"])]},
        {"region": "snapshots", "start_lba": slot_start, "end_lba": slot_end,
         "allowed": sorted({key(placement_ids["wal_snapshot"]),
                            key(placement_ids["on_demand"])})},
    ]


def check_placement(path: str | Path, regions: list[dict], lba_size_bytes: int,
                    disk: str | None = None) -> dict:
    """Whether every write in the trace carried the placement its LBA region expects.

    ``regions`` as :func:`slimio_regions` returns them. A write is attributed to the region
    its first LBA falls in; one that crosses a region's end, or lies in no region, counts as
    a mismatch (``outside``). Returns per region the write bytes per placement key, the
    number of mismatched writes with up to 5 examples, and ``ok``.
    """
    per_region = {r["region"]: Counter() for r in regions}
    mismatched, examples = 0, []
    for cmd in iter_commands(path):
        if cmd.opcode != "nvme_cmd_write" or (disk is not None
                                              and not disk_matches(cmd.disk, disk)):
            continue
        pid = cmd.placement_id
        k = NO_PLACEMENT_KEY if pid is None else str(pid)
        end = cmd.slba + cmd.blocks
        region = next((r for r in regions if r["start_lba"] <= cmd.slba < r["end_lba"]), None)
        if region is None or end > region["end_lba"]:
            name = "outside"
            ok = False
        else:
            name = region["region"]
            ok = k in region["allowed"]
        per_region.setdefault(name, Counter())[k] += cmd.blocks * lba_size_bytes
        if not ok:
            mismatched += 1
            if len(examples) < 5:
                examples.append({"slba": cmd.slba, "blocks": cmd.blocks, "placement": k,
                                 "region": name, "timestamp_s": cmd.timestamp_s})
    return {
        "regions": regions,
        "write_bytes_per_region": {name: dict(sorted(c.items())) for name, c in per_region.items()},
        "mismatched_writes": mismatched,
        "mismatch_examples": examples,
        "ok": mismatched == 0,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m slimio_repro.nvmetrace",
                                     description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("summarize", help="print a JSON summary of an nvme_setup_cmd trace")
    p.add_argument("trace", type=Path, help="tracefs trace/trace_pipe text, optionally .gz")
    p.add_argument("--lba-size", type=int, required=True, metavar="BYTES",
                   help="namespace LBA data size in bytes (nvme id-ns -H), e.g. 4096")
    p.add_argument("--disk", help="keep only this disk, e.g. nvme0n1 or nvme0c0n1")
    args = parser.parse_args(argv)
    try:
        out = summarize(args.trace, args.lba_size, args.disk)
    except (TraceError, ValueError) as exc:
        print(f"nvmetrace: {exc}", file=sys.stderr)
        return 1
    json.dump(out, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
