"""Progress of a run a person can follow: which cell, how many are done, the time left.

Before and after each cell, rule run_cell prints one line to the terminal and appends it to
``<results>/logs/progress.log``::

    [cell 5/24] vm-slimio-redis-benchmark-always-r1: starting; 4 done, 20 to run; about
    14 min left (from 4 cells' times)
    [cell 5/24] vm-slimio-redis-benchmark-always-r1: done in 47 s

The ordinal is the cell's place among the matrix's cells as they complete. "Done" is a
complete raw directory; the estimate is, for every cell still to run (this one included),
the mean time of the done cells of the same testbed and workload (their
provenance's ``cell_total_s``), else of all done cells; with none done, it says so.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

from ..agent import layout


def cell_seconds(raw: Path) -> float | None:
    """The recorded time of a complete cell (None if it recorded none)."""
    try:
        prov = json.loads((raw / layout.RAW_PROVENANCE).read_text())
    except (OSError, ValueError):
        return None
    total = prov.get("cell_total_s")
    if total is None and prov.get("phases_s"):
        total = sum(prov["phases_s"].values())
    return total


def estimate(cells: list, raw_dir: Path, current: str) -> dict:
    """Counts and the estimated seconds left for the matrix ``cells`` (CellPlans or Cells
    with ``id``, ``testbed`` and ``workload``), ``current`` about to run."""
    ids = [c.id for c in cells]
    done = [c for c in cells
            if c.id != current and (raw_dir / c.id / layout.RAW_COMPLETE).exists()]
    times: dict[tuple, list[float]] = {}
    for c in done:
        t = cell_seconds(raw_dir / c.id)
        if t is not None:
            times.setdefault((c.testbed, c.workload), []).append(t)
    every = [t for ts in times.values() for t in ts]
    todo = [c for c in cells if c not in done]
    left = None
    if every:
        left = sum(statistics.fmean(times.get((c.testbed, c.workload), every)) for c in todo)
    # The cell's ordinal is its place in the run (the order Snakemake picks), not the matrix's.
    return {"index": len(done) + 1 if current in ids else None, "total": len(ids),
            "done": len(done), "to_run": len(todo), "timed": len(every), "left_s": left}


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.0f} min" if seconds >= 90 else f"{seconds:.0f} s"


def _where(est: dict) -> str:
    return f"[cell {est['index']}/{est['total']}]" if est["index"] else "[cell]"


def starting_line(cell_id: str, est: dict) -> str:
    eta = (f"about {_minutes(est['left_s'])} left (from {est['timed']} cells' times)"
           if est["left_s"] is not None else "no cell has finished yet to estimate the time left")
    return f"{_where(est)} {cell_id}: starting; {est['done']} done, {est['to_run']} to run; {eta}"


def done_line(cell_id: str, est: dict, seconds: float) -> str:
    return f"{_where(est)} {cell_id}: done in {_minutes(seconds)}"


class Reporter:
    """Prints the progress lines to the terminal (``stream``) and appends them to ``log``."""

    def __init__(self, cells: list, raw_dir: Path, current: str, log: Path, stream=None):
        self.cell_id, self.log = current, log
        self.stream = stream if stream is not None else sys.stderr
        self.est = estimate(cells, raw_dir, current)
        self.t0 = time.monotonic()

    def say(self, line: str) -> None:
        stamped = f"{time.strftime('%H:%M:%S')} {line}"
        print(stamped, file=self.stream, flush=True)
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log, "a") as fh:
            fh.write(stamped + "\n")

    def __enter__(self):
        self.say(starting_line(self.cell_id, self.est))
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.say(done_line(self.cell_id, self.est, time.monotonic() - self.t0))
        else:
            self.say(f"{_where(self.est)} {self.cell_id}: failed after "
                     f"{_minutes(time.monotonic() - self.t0)} ({exc_type.__name__})")
        return False
