"""More repetitions only where a verdict needs them (`slimio-repro decide`, `make decide`).

Each round looks at the run's verdicts (judged look by look, judge.judge_all), finds the
undecided claims, and plans the repetitions that decide the most of them per minute of
cell time within what is left of the budget, expected from what was measured: the
probability that a claim's interval at the next look's confidence clears its band's edges
with n repetitions per cell set (stats.decide_probability, the spread taken from the run's
other cell sets too, spread_prior), over the minutes those cells take; sets shared between
claims are paid once. The
plan is one more look (matrix.looks, written to RESULTS_DIR/claims/decide.yaml), which the
same Snakemake pipeline runs as new -rN cells (nothing that exists is run again), and the
claims are judged again. Rounds go on until every claim is decided, nothing more fits in
the budget, or ``max_looks`` is reached.
"""

from __future__ import annotations

import dataclasses
import math
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from .. import paths
from . import catalog, judge, stats
from .judge import UNDECIDED, Verdict

# The file of the looks decide added (a config file: give it to snakemake and
# `slimio-repro claims` after the profile's).
LOOKS_FILE = "claims/decide.yaml"
# Cell time assumed for a cell set no cell of which recorded its wall time.
DEFAULT_CELL_S = 120.0
MAX_LOOKS = 4
# The least probability of deciding a claim that a plan spends cell time on: a look more
# likely to leave a claim undecided than to decide it is not worth the user's minutes.
MIN_PROBABILITY = 0.5
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
    expected: float = 0.0          # how many of ``claims`` it decides, expected


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


def spread_prior(c: catalog.Claim, records: pd.DataFrame,
                 exclude: set[str] = frozenset()) -> tuple[float, float] | None:
    """What the run's other cell sets say of the claim's per-cell variance on its effect
    scale, as (variance, degrees of freedom), for a claim judged on the log scale: each
    metric's relative variance (variance over squared mean) pooled over every set of the
    claim's testbed outside ``exclude`` with 2 or more cells, summed over the metrics each
    of the claim's sets contributes (the log effect moves by +-1 in each log mean; metrics
    of one set taken as uncorrelated, which overstates the variance where they are) and
    averaged over its sets; the degrees of freedom are the fewest any metric pooled. None
    where nothing can be pooled. The cells of one testbed share their noise (the spread of
    a TCG guest's rate is 18-30 % in every set), so 2 cells of the claim's own sets are
    planned with the spread of dozens."""
    if not c.log_effect:
        return None
    mine = records[records["testbed"].astype(str) == c.cells_testbed]
    sets = judge.set_ids(mine)
    mine, sets = mine[~sets.isin(exclude)], sets[~sets.isin(exclude)]
    pooled: dict[str, tuple[float, float]] = {}
    for m in c.metrics():
        if m not in mine:
            return None
        x = pd.to_numeric(mine[m], errors="coerce")
        g = x.groupby(sets)
        n, mean, var = g.count(), g.mean(), g.var(ddof=1)
        ok = (n >= 2) & (mean > 0) & var.notna()
        if not ok.any():
            return None
        df = float((n[ok] - 1).sum())
        pooled[m] = (float(((n[ok] - 1) * var[ok] / mean[ok] ** 2).sum() / df), df)
    per_set: dict[tuple, float] = {}
    for t in c.terms():
        key = (t.system, t.workload, t.policy)
        per_set.setdefault(key, 0.0)
        per_set[key] += pooled[t.metric][0]
    return (sum(per_set.values()) / len(per_set), min(df for _, df in pooled.values()))


# The repetitions per cell set a plan considers.
NS = np.arange(2, stats.MAX_REPETITIONS + 1)


def _chances(verdicts: list[Verdict], records: pd.DataFrame, look: int):
    """The cells each set has, each set's minutes per cell, and for each undecided claim its
    sets and its probability of being decided at each of NS (0 where NS does not add
    cells)."""
    have = judge.set_ids(records).value_counts().to_dict()
    minutes = cell_minutes(records)
    confidence = 1 - stats.alpha_of_look(look)
    wanted: dict[str, tuple[list[str], np.ndarray]] = {}
    for v in verdicts:
        if v.verdict != UNDECIDED:
            continue
        sets = claim_sets(v.claim, records)
        iv = v.interval
        if not sets or iv is None:
            continue
        if not iv.defined:
            chance = np.where(NS == 2, MIN_PROBABILITY, 0.0)
        else:
            prior = spread_prior(v.claim, records, exclude=set(sets))
            chance = stats.decide_probability(iv, v.claim.band(), NS, confidence, prior)
        chance = np.where(NS > max(have.get(s, 0) for s in sets), chance, 0.0)
        wanted[v.claim.id] = (sets, chance)
    return have, minutes, wanted


def _cost(sets: list[str], planned: dict[str, int], minutes: dict[str, float]) -> np.ndarray:
    """The cell minutes that take every one of ``sets`` to each of NS, beyond ``planned``."""
    return sum(np.maximum(0, NS - planned.get(s, 0)) * minutes.get(s, DEFAULT_CELL_S / 60)
               for s in sets)


def plan_batch(verdicts: list[Verdict], records: pd.DataFrame, budget_min: float,
               look: int = 1) -> Batch:
    """The repetitions that decide the most undecided claims per minute within
    ``budget_min``, for look number ``look`` (its confidence 1 - stats.alpha_of_look(look)):
    greedily, the claim and number of repetitions with the highest probability of deciding
    it (stats.decide_probability, with the run's other sets' spread, spread_prior) per
    minute of cell time not yet planned, among those at least MIN_PROBABILITY likely, until
    nothing more fits. A claim whose spread is unmeasured (one cell in a set) is taken to
    2 repetitions first, at MIN_PROBABILITY."""
    have, minutes, wanted = _chances(verdicts, records, look)
    planned = dict(have)
    chosen: dict[str, float] = {}
    spent = 0.0
    while True:
        best = None
        for cid, (sets, chance) in wanted.items():
            if cid in chosen:
                continue
            cost = _cost(sets, planned, minutes)
            ok = (chance >= MIN_PROBABILITY) & (spent + cost <= budget_min)
            if not ok.any():
                continue
            rate = np.where(ok, chance / np.maximum(cost, 1e-9), -1.0)
            i = int(np.argmax(rate))
            if best is None or rate[i] > best[0]:
                best = (rate[i], cid, int(NS[i]), float(cost[i]), float(chance[i]))
        if best is None:
            break
        _, cid, n, cost, chance = best
        for s in wanted[cid][0]:
            planned[s] = max(planned.get(s, 0), n)
        chosen[cid] = chance
        spent += cost
    reps = {s: n for s, n in planned.items() if n > have.get(s, 0)}
    undecided = [v.claim.id for v in verdicts if v.verdict == UNDECIDED]
    return Batch(reps, sum(n - have.get(s, 0) for s, n in reps.items()), spent,
                 tuple(chosen), tuple(c for c in undecided if c not in chosen),
                 sum(chosen.values()))


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
        cores: str = "all", max_looks: int = MAX_LOOKS, snakemake: str | None = None,
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
    if not dry_run:
        snakemake = snakemake or find_snakemake()

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
        batch = plan_batch(verdicts, records, left, len(looks) + 1)
        if not batch.reps:
            cheapest = min_cost(verdicts, records, len(looks) + 1)
            print("  nothing more fits: " + (
                f"the cheapest undecided claim needs {cheapest:.1f} min to be decided with "
                f"probability {MIN_PROBABILITY:g}" if math.isfinite(cheapest)
                else f"no undecided claim is decided with probability {MIN_PROBABILITY:g} "
                     f"by {stats.MAX_REPETITIONS} repetitions"), file=out)
            break
        print(f"  look {len(looks) + 1}: {batch.cells} more cells ({batch.minutes:.1f} min "
              f"planned) for {len(batch.claims)} claims, {batch.expected:.1f} of them decided "
              "as expected from the measured means and spreads: "
              + ", ".join(f"{s} -> {n}" for s, n in sorted(batch.reps.items())), file=out)
        rounds.append({"look": len(looks) + 1, "reps": batch.reps, "planned_min": batch.minutes,
                       "claims": list(batch.claims), "expected": round(batch.expected, 2)})
        if dry_run:
            break
        write_looks(results, looks + [batch.reps])
        pipeline(str(results / paths.VERDICT_FILES["json"]))
    if rounds and not dry_run:
        pipeline("reproduce")      # the tables, figures and report with every look's cells
    return rounds


def find_snakemake() -> str:
    """The snakemake beside this Python (the project's venv), else the one on PATH; a
    DecideError before anything is planned or written where there is none."""
    beside = Path(sys.executable).parent / "snakemake"
    found = str(beside) if beside.exists() else shutil.which("snakemake")
    if not found:
        raise DecideError(f"no snakemake beside {sys.executable} or on PATH: run decide from "
                          "the project's venv (make decide, or .venv/bin/slimio-repro)")
    return found


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


def min_cost(verdicts: list[Verdict], records: pd.DataFrame, look: int = 1) -> float:
    """The cell minutes of the cheapest undecided claim on its own, at MIN_PROBABILITY."""
    have, minutes, wanted = _chances(verdicts, records, look)
    costs = [float(_cost(sets, have, minutes)[chance >= MIN_PROBABILITY].min())
             for sets, chance in wanted.values() if (chance >= MIN_PROBABILITY).any()]
    return min(costs) if costs else math.inf
