"""Which cells of a run finished, and what is known of the ones that did not.

A cell has finished when its raw directory is complete: the cell writes
:data:`~slimio_repro.agent.layout.RAW_COMPLETE` last, just before ``<cell>.partial`` is renamed
into place. A cell that failed or was stopped has no raw directory, so the next run runs it
again; nothing here marks it done.

Under config ``finished_cells_only`` (the Makefile's second Snakemake after a failed cell,
workflows/rules/common.smk) the stages after the cells take the finished cells only. The
others are *missing*: each is listed (:func:`missing`, written by :func:`write` to
``tables/cells_missing.json``) with its log and the log's last lines, for the claims (which
say which of their cells are missing) and the report (which shows them).
"""

from __future__ import annotations

import json
from pathlib import Path

from .. import paths
from ..agent import layout

# The lines of a missing cell's log the report shows: the error and the traceback's end.
LOG_TAIL_LINES = 30
# At most this much of the log's end is read (a cell's log can be long).
LOG_TAIL_BYTES = 64 << 10


def is_finished(raw: Path) -> bool:
    """Whether the raw directory ``raw`` is a finished cell's."""
    return (Path(raw) / layout.RAW_COMPLETE).is_file()


def finished_ids(results_dir: Path, cell_ids) -> set[str]:
    """Those of ``cell_ids`` whose raw directory under ``results_dir`` is complete."""
    raw = Path(results_dir) / "raw"
    return {c for c in cell_ids if is_finished(raw / c)}


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str | None:
    """The last ``lines`` lines of the file ``path`` (undecodable bytes replaced); None if
    there is no such file."""
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            size = f.tell()
            f.seek(max(0, size - LOG_TAIL_BYTES))
            data = f.read()
    except (FileNotFoundError, IsADirectoryError):
        return None
    text = data.decode("utf-8", errors="replace").rstrip("\n")
    return "\n".join(text.splitlines()[-lines:])


def missing(plans, results_dir: Path) -> list[dict]:
    """What the run knows of each of ``plans`` (CellPlans whose cells did not finish), in
    order: the cell's id and coordinates (testbed, system, workload, policy, rep; the claims
    select their cells by these), whether it is a motivation cell, its log (relative to the
    results directory) and the log's last lines (None where the cell never started: a job it
    needed failed first), and what it left in ``raw/<cell>.partial/`` (None if nothing)."""
    results_dir = Path(results_dir)
    out = []
    for plan in plans:
        cell = plan.cell
        motivation = plan.motivation is not None
        pattern = paths.MOTIVATION_LOG_PATTERN if motivation else paths.CELL_LOG_PATTERN
        log = pattern.format(**cell.wildcards())
        partial = f"raw/{plan.id}.partial"
        out.append({"cell_id": plan.id, "testbed": cell.testbed, "system": cell.system,
                    "workload": cell.workload, "policy": cell.policy, "rep": cell.rep,
                    "motivation": motivation, "log": log,
                    "log_tail": log_tail(results_dir / log),
                    "partial": partial if (results_dir / partial).is_dir() else None})
    return out


def write(cells: list[dict], out: Path) -> Path:
    """``cells`` (:func:`missing`) as the JSON file ``out``."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"missing": list(cells)}, indent=1) + "\n")
    return out


def read(path: Path) -> list[dict]:
    """The missing cells listed in ``path`` (:func:`write`, at
    :data:`~slimio_repro.paths.MISSING_CELLS_PATTERN` in a results directory), each log
    named with that results directory as the run names it (``results/logs/...``); [] if
    there is no such file."""
    path = Path(path)
    try:
        cells = json.loads(path.read_text())["missing"]
    except FileNotFoundError:
        return []
    results_dir = path.parents[len(Path(paths.MISSING_CELLS_PATTERN).parts) - 1]
    return [dict(m, log=str(results_dir / m["log"])) for m in cells]
