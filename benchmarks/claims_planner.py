"""How well does decide's plan spend a budget? Replayed on a run that has more repetitions
of some cell sets than its first look (a run `slimio-repro decide` extended): the first
``--first`` repetitions of every set are look 0; each planner plans look 1 within
``--budget`` minutes, among the undecided claims whose sets all have more cells; the plan
is then judged on the cells the run really has (repetitions 1..n of each planned set, n
capped at what exists, which the output counts), at look 1's 97.5 %.

Two planners side by side:
  * decide.plan_batch: the probability of deciding each claim per minute
    (stats.decide_probability, the spread pooled over the run's other sets too);
  * at face value: each claim's needed_n (the repetitions that clear its edges if its
    n = 2 mean and spread held), the cheapest claims first.

Run: .venv/bin/python benchmarks/claims_planner.py RESULTS_DIR [--budget 30] [--first 2]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from slimio_repro import paths
from slimio_repro.claims import catalog, decide, judge


def face_value(verdicts, records, budget):
    """The plan that takes each claim's needed_n at face value, cheapest claims first."""
    have = judge.set_ids(records).value_counts().to_dict()
    minutes = decide.cell_minutes(records)
    planned, chosen, spent = dict(have), [], 0.0
    wanted = {v.claim.id: (v.needed_n, decide.claim_sets(v.claim, records))
              for v in verdicts if v.verdict == judge.UNDECIDED and v.needed_n}

    def cost(need, sets):
        return sum(max(0, need - planned.get(s, 0)) * minutes[s] for s in sets)

    while True:
        fits = sorted((cost(*w), cid) for cid, w in wanted.items()
                      if cid not in chosen and spent + cost(*w) <= budget)
        if not fits:
            break
        m, cid = fits[0]
        need, sets = wanted[cid]
        for s in sets:
            planned[s] = max(planned[s], need)
        chosen.append(cid)
        spent += m
    return {s: n for s, n in planned.items() if n > have[s]}, chosen, spent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results_dir", type=Path)
    ap.add_argument("--budget", type=float, default=30.0, help="minutes of cell time")
    ap.add_argument("--first", type=int, default=2, help="look 0's repetitions")
    args = ap.parse_args()
    records = pd.read_csv(args.results_dir / paths.CELLS_TABLE)
    sets = judge.set_ids(records)
    exists = sets.value_counts().to_dict()
    first = records[pd.to_numeric(records["rep"]) <= args.first]
    claims = catalog.load()
    before = judge.judge_all(claims, first)
    extended = {s for s, n in exists.items() if n > args.first}
    candidates = [v for v in before if v.verdict == judge.UNDECIDED
                  and set(decide.claim_sets(v.claim, first)) <= extended]
    print(f"{len(candidates)} undecided claims at n={args.first} whose sets have more cells "
          f"({', '.join(f'{s}: {exists[s]}' for s in sorted(extended))}); budget "
          f"{args.budget:g} min")
    batch = decide.plan_batch(candidates, first, args.budget)
    plans = {"decide.plan_batch": (batch.reps, list(batch.claims), batch.minutes),
             "at face value": face_value(candidates, first, args.budget)}
    ids = {v.claim.id for v in candidates}
    for name, (reps, chosen, minutes) in plans.items():
        capped = {s: min(n, exists[s]) for s, n in reps.items()}
        short = sum(n - capped[s] for s, n in reps.items())
        after = judge.judge_all([v.claim for v in candidates], records, [capped], args.first)
        decided = [v.claim.id for v in after if v.verdict != judge.UNDECIDED]
        hit = [c for c in decided if c in chosen]
        cells = sum(n - args.first for n in reps.values())
        print(f"{name}: {minutes:.1f} min planned ({cells} cells, {short} beyond the run's) "
              f"for {len(chosen)} claims"
              + (f" (expected {batch.expected:.1f})" if name == "decide.plan_batch" else "")
              + f"; decided {len(hit)} of them, {len(decided)} of the {len(ids)} in all: "
              + ", ".join(f"{s} -> {n}" for s, n in sorted(reps.items())))


if __name__ == "__main__":
    main()
