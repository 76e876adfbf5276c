"""More repetitions only where a verdict needs them (`slimio-repro decide`, `make decide`).

Each round looks at the run's verdicts (judged look by look, judge.judge_all), finds the
undecided claims, and plans the repetitions that decide the most of them per minute of
cell time within what is left of the budget: a claim is decided, if its measured mean and
spread hold, once every cell set it compares has the repetitions its verdict names
(needed_n, at the next look's confidence); sets shared between claims are paid once. The
plan is one more look (matrix.looks, written to RESULTS_DIR/claims/decide.yaml), which the
same Snakemake pipeline runs as new -rN cells (nothing that exists is run again), and the
claims are judged again. Rounds go on until every claim is decided, nothing more fits in
the budget, or ``max_looks`` is reached.
"""

from __future__ import annotations

import dataclasses
import math
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import yaml

from slimio_repro import paths
from slimio_repro.claims import catalog, judge
from slimio_repro.claims.judge import UNDECIDED, Verdict

# The file of the looks decide added (a config file: give it to snakemake and
# `slimio-repro claims` after the profile's).
LOOKS_FILE = "claims/decide.yaml"
# Cell time assumed for a cell set no cell of which recorded its wall time.
DEFAULT_CELL_S = 120.0
MAX_LOOKS = 4
# What makes Snakemake run a job again during decide: an input newer than the output, or a
# changed set of inputs (a table's records gain the look's cells). Not a changed parameter
# or code: a finished cell never runs again.
RERUN_TRIGGERS = ("mtime", "input")


class DecideError(ValueError):
    """A run decide cannot work on; the message says why and what to do."""


@dataclasses.dataclass(frozen=True)
class Batch:
    """One look's repetitions: cell set -> its repetitions after the look."""
    reps: dict[str, int]
    cells: int                     # cells it adds
    minutes: float                 # cell time planned
    claims: tuple[str, ...]        # the claims it is planned to decide
    left_out: tuple[str, ...]      # undecided claims it cannot decide within the budget


def claim_sets(c: catalog.Claim, records: pd.DataFrame) -> list[str]:
    """The cell sets a claim's value takes its means from (a term that pools both policies
    takes both)."""
    out = []
    for t in c.terms():
        cells = judge.cells_of(records, c.cells_testbed, t.system, t.workload, t.policy)
        out += sorted(set(judge.set_ids(cells)))
    return list(dict.fromkeys(out))


def cell_minutes(records: pd.DataFrame) -> dict[str, float]:
    """Each cell set's mean wall time per cell in minutes (cell_total_s; the mean over every
    cell where a set has none, DEFAULT_CELL_S where no cell has one)."""
    sets = judge.set_ids(records)
    wall = pd.to_numeric(records.get("cell_total_s", pd.Series(index=records.index,
                                                               dtype=float)),
                         errors="coerce")
    overall = wall.mean() if wall.notna().any() else DEFAULT_CELL_S
    out = {}
    for s in sets.unique():
        mine = wall[sets == s].dropna()
        out[s] = float(mine.mean() if len(mine) else overall) / 60
    return out


def plan_batch(verdicts: list[Verdict], records: pd.DataFrame, budget_min: float) -> Batch:
    """The repetitions that decide the most undecided claims per minute within
    ``budget_min``: greedily, the claim whose missing repetitions cost least given what is
    planned already, until the next one does not fit."""
    have = judge.set_ids(records).value_counts().to_dict()
    minutes = cell_minutes(records)
    wanted = {}
    for v in verdicts:
        if v.verdict == UNDECIDED and v.needed_n:
            sets = claim_sets(v.claim, records)
            if sets:
                wanted[v.claim.id] = (v.needed_n, sets)
    planned = dict(have)
    chosen, spent = [], 0.0

    def cost(need, sets):
        return sum(max(0, need - planned.get(s, 0)) * minutes.get(s, DEFAULT_CELL_S / 60)
                   for s in sets)

    while True:
        options = sorted((cost(*wanted[cid]), cid) for cid in wanted if cid not in chosen)
        fits = [(m, cid) for m, cid in options if spent + m <= budget_min]
        if not fits:
            break
        m, cid = fits[0]
        need, sets = wanted[cid]
        for s in sets:
            planned[s] = max(planned.get(s, 0), need)
        chosen.append(cid)
        spent += m
    reps = {s: n for s, n in planned.items() if n > have.get(s, 0)}
    undecided = [v.claim.id for v in verdicts if v.verdict == UNDECIDED]
    return Batch(reps, sum(n - have.get(s, 0) for s, n in reps.items()), spent,
                 tuple(chosen), tuple(c for c in undecided if c not in chosen))


def load_looks(results: Path) -> list[dict]:
    f = Path(results) / LOOKS_FILE
    if not f.exists():
        return []
    data = yaml.safe_load(f.read_text()) or {}
    return list((data.get("matrix") or {}).get("looks") or [])


def write_looks(results: Path, looks: list[dict]) -> Path:
    f = Path(results) / LOOKS_FILE
    f.parent.mkdir(parents=True, exist_ok=True)
    f.write_text("# Written by `slimio-repro decide`: the repetitions each look added (a config\n"
                 "# file; give it after the profile to snakemake and to `slimio-repro claims`).\n"
                 + yaml.safe_dump({"matrix": {"looks": looks}}, sort_keys=True))
    return f


def parse_budget(text: str) -> float:
    """'60m', '1h', '90s' or a number of minutes -> minutes."""
    t = str(text).strip().lower()
    units = {"h": 60.0, "m": 1.0, "s": 1 / 60}
    try:
        if t and t[-1] in units:
            value = float(t[:-1]) * units[t[-1]]
        else:
            value = float(t)
    except ValueError:
        raise DecideError(f"--budget {text!r}: give a time such as 30m, 1h or 90s") from None
    if not value > 0 or math.isinf(value):
        raise DecideError(f"--budget {text!r}: the budget must be a positive time")
    return value


def run(results: Path, configfiles: list[Path], repetitions: int, budget_min: float,
        cores: str = "all", max_looks: int = MAX_LOOKS, snakemake: str = "snakemake",
        dry_run: bool = False, claims_file: Path = paths.CLAIMS_FILE,
        out=sys.stdout) -> list[dict]:
    """decide's rounds (module docstring) on the run in ``results`` made with
    ``configfiles`` (whose matrix.repetitions is ``repetitions``), judging the claims of
    ``claims_file``; returns one entry per look it ran: the repetitions, the minutes planned
    and the claims it meant to decide."""
    results = Path(results)
    cells_csv = results / paths.CELLS_TABLE
    if not cells_csv.exists():
        raise DecideError(f"{results} has no {paths.CELLS_TABLE}: run `make reproduce` (or "
                          "snakemake reproduce) into it first")
    claims = catalog.load(claims_file)

    def pipeline(target: str) -> None:
        """Snakemake on ``target`` with the run's config files and every look so far."""
        cmd = [snakemake, "--cores", str(cores), target, "--configfile",
               *map(str, configfiles), str(results / LOOKS_FILE), "--config",
               f"results_dir={results}", f"claims={{file: {Path(claims_file).resolve()}}}",
               "--rerun-triggers", *RERUN_TRIGGERS]
        print("  " + " ".join(cmd), flush=True)
        done = subprocess.run(cmd)
        if done.returncode != 0:
            raise DecideError(f"snakemake failed (exit {done.returncode}); the looks so far "
                              f"are in {results / LOOKS_FILE}: fix the cause and run decide "
                              "again (finished cells are kept)")

    start = time.monotonic()
    rounds = []
    while True:
        looks = load_looks(results)
        records = pd.read_csv(cells_csv)
        _check_run(records, looks, repetitions, cells_csv, results)
        verdicts = judge.judge_all(claims, records, looks, repetitions)
        undecided = [v for v in verdicts if v.verdict == UNDECIDED]
        left = budget_min - (time.monotonic() - start) / 60
        print(f"look {len(looks)}: {len(undecided)} undecided claims, {left:.1f} min of "
              "the budget left", file=out)
        if not undecided or len(looks) >= max_looks:
            break
        batch = plan_batch(verdicts, records, left)
        if not batch.reps:
            cheapest = min_cost(verdicts, records)
            print("  nothing more fits: " + (
                f"the cheapest undecided claim needs {cheapest:.1f} min"
                if math.isfinite(cheapest)
                else "no undecided claim names repetitions that decide it"), file=out)
            break
        print(f"  look {len(looks) + 1}: {batch.cells} more cells ({batch.minutes:.1f} min "
              f"planned) for {len(batch.claims)} claims: "
              + ", ".join(f"{s} -> {n}" for s, n in sorted(batch.reps.items())), file=out)
        rounds.append({"look": len(looks) + 1, "reps": batch.reps, "planned_min": batch.minutes,
                       "claims": list(batch.claims)})
        if dry_run:
            break
        write_looks(results, looks + [batch.reps])
        pipeline(str(results / paths.VERDICT_FILES["json"]))
    if rounds and not dry_run:
        pipeline("reproduce")      # the tables, figures and report with every look's cells
    return rounds


def _check_run(records: pd.DataFrame, looks: list[dict], repetitions: int, cells_csv: Path,
               results: Path) -> None:
    """Refuse records that are not of this config (a set no look added to has another number
    of repetitions) or whose last look did not finish (a set has fewer cells than the looks
    gave it)."""
    have = judge.set_ids(records).value_counts()
    want: dict[str, int] = {}
    for look in looks:
        want.update(look)
    plain = [int(n) for s, n in have.items() if s not in want]
    if plain and max(plain) != repetitions:
        raise DecideError(
            f"{cells_csv} does not look like a run of these config files (matrix."
            f"repetitions {repetitions}): give decide the run's own --configfile")
    short = {s: (int(have.get(s, 0)), n) for s, n in want.items() if have.get(s, 0) < n}
    if short:
        raise DecideError(
            "the last look's cells did not all finish (" + ", ".join(
                f"{s}: {h} of {n}" for s, (h, n) in sorted(short.items()))
            + f"): run decide again once they have (snakemake with {results / LOOKS_FILE} "
            "after the profile makes them)")


def min_cost(verdicts: list[Verdict], records: pd.DataFrame) -> float:
    """The cell minutes of the cheapest undecided claim on its own."""
    costs = [plan_batch([v], records, math.inf).minutes for v in verdicts
             if v.verdict == UNDECIDED and v.needed_n]
    return min(costs) if costs else math.inf
