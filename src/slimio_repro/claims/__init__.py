"""Stage claims: the paper's quantitative claims (results/reference/claims.yaml) judged
against a run's tidy records, and a run compared with a stored reference run (regress)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from . import catalog, decide, judge, regress, render, stats
from .judge import node_classes, number
from .render import band_text, ci_text, missing_text, paper_text

__all__ = ["catalog", "decide", "judge", "regress", "render", "stats", "judge_run",
           "node_classes", "number", "band_text", "ci_text", "missing_text", "paper_text"]


def judge_run(records_csv: Path, claims_file: Path, out_dir: Path,
              extra_csv: tuple[Path, ...] = (), prefix: str | None = None,
              looks: list[dict] | None = None, repetitions: int | None = None,
              missing: list[dict] = ()) -> dict[str, Path]:
    """Judge every claim of `claims_file` (those whose id starts with ``prefix``, if given)
    on the run whose per-cell records are `records_csv` (results/tables/cells.csv) and
    ``extra_csv`` (the motivation's, results/tables/motivation_cells.csv; a cell in both
    counts once), look by look where ``looks`` (matrix.looks) added repetitions to
    ``repetitions`` (matrix.repetitions); write verdicts.{csv,json,md} and summary.txt into
    `out_dir`. ``missing``: the run's cells that did not finish, each a dict with its
    cell_id, testbed, system, workload, policy, rep, whether it is a motivation cell and its
    log (judge.MISSING_COLUMNS); the verdicts and the summary name them, and a claim that
    needed one says so."""
    claims = catalog.load(claims_file)
    if prefix:
        claims = [c for c in claims if c.id.startswith(prefix)]
    records = pd.concat([pd.read_csv(f) for f in (records_csv, *extra_csv)],
                        ignore_index=True)
    if "cell_id" in records:
        records = records.drop_duplicates(subset="cell_id", keep="first")
    verdicts = judge.judge_all(claims, records, looks, repetitions, list(missing))
    return render.write(verdicts, render.run_info(records, list(missing)), out_dir)
