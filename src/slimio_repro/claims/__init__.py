"""Stage claims: the paper's quantitative claims (results/reference/claims.yaml) judged
against a run's tidy records, and a run compared with a stored reference run (regress)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from slimio_repro.claims import catalog, judge, regress, render
from slimio_repro.claims.judge import number
from slimio_repro.claims.render import ci_text, paper_text

__all__ = ["catalog", "judge", "regress", "render", "judge_run", "number", "ci_text",
           "paper_text"]


def judge_run(records_csv: Path, claims_file: Path, out_dir: Path) -> dict[str, Path]:
    """Judge every claim of `claims_file` on the run whose per-cell records are
    `records_csv` (results/tables/cells.csv); write verdicts.{csv,json,md} and summary.txt
    into `out_dir`."""
    claims = catalog.load(claims_file)
    records = pd.read_csv(records_csv)
    verdicts = judge.judge_all(claims, records)
    return render.write(verdicts, render.run_info(records), out_dir)
