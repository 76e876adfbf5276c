"""What the artifact's FEMU prints about its garbage collection, read on the host (a vm cell
keeps the emulator's output in :data:`.layout.RAW_EMULATOR_LOG`).

Each round of ``do_gc`` (``hw/femu/fdp/fdpftl.c`` at ConfFDP ``a225af2a4``, line 1223)
prints, before it copies the victim's valid pages::

    [<asctime>]GC-ing line:<blk>,ipc=<invalid pages>,victim=<victim lines>,full=<full lines>,
    free=<free lines>,stream_id=<handle>,rg_id=<group>, discard <n> read/write <r>/<w>
    block_erased <n> copied <n>

``asctime`` ends in a newline, so a line starts with ``]GC-ing``; the counters at its end are
cumulative and exclude the round being printed (the FDP statistics log page, with
``femu/patches/0004``, has the totals).
"""

from __future__ import annotations

import re
from collections import Counter

GC_LINE = re.compile(
    r"GC-ing line:(?P<line>\d+),ipc=(?P<ipc>\d+),victim=(?P<victims>\d+),full=(?P<full>\d+),"
    r"free=(?P<free>\d+),stream_id=(?P<handle>\d+),rg_id=(?P<rg>\d+), discard (?P<discard>\d+) "
    r"read/write (?P<reads>\d+)/(?P<writes>\d+) block_erased (?P<erased>\d+) "
    r"copied (?P<copied>\d+)")


def gc_rounds(text: str) -> dict:
    """``gc_rounds`` (the victims FEMU collected), ``gc_rounds_per_handle`` (by the victim's
    handle) and ``min_free_lines`` (the fewest free reclaim units a round saw; None without
    a round) from FEMU's output."""
    per_handle: Counter = Counter()
    min_free = None
    for m in GC_LINE.finditer(text):
        per_handle[int(m["handle"])] += 1
        free = int(m["free"])
        min_free = free if min_free is None else min(min_free, free)
    return {"gc_rounds": sum(per_handle.values()),
            "gc_rounds_per_handle": dict(sorted(per_handle.items())),
            "min_free_lines": min_free}
