"""Would pairing repetitions narrow the verdicts' intervals? For every claim a run judges
that compares two cell sets with the same repetitions (a ratio of two systems, or of two
policies), the width of the verdicts' interval (unpaired: t on the log ratio of the means,
spread pooled over both sets, 2n - 2 degrees of freedom) beside the paired one (t on the
mean of the per-repetition log ratios r1/r1, r2/r2, ..., n - 1 degrees of freedom), both
95 %, on the log scale.

Run: .venv/bin/python benchmarks/claims_pairing.py RESULTS_DIR

Pairing pays only where repetition k of both sets shares what varies between repetitions
(the same host minute, the same VM boot luck): it removes that shared part of the spread
but halves the degrees of freedom, which at n = 2 multiplies t by 2.9 (12.71 against 4.30).
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats as sps

from slimio_repro import paths
from slimio_repro.claims import catalog, judge


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results_dir", type=Path)
    args = ap.parse_args()
    records = pd.read_csv(args.results_dir / paths.CELLS_TABLE)
    rows = []
    for c in catalog.load():
        if c.kind != "ratio" or c.versus is not None or not c.log_effect:
            continue
        t, r = c.measure.term, c.measure.reference
        if (t.system, t.workload, t.policy) == (r.system, r.workload, r.policy):
            continue                          # two metrics of the same cells: paired already
        testbed = c.cells_testbed
        a = judge.cells_of(records, testbed, t.system, t.workload, t.policy)
        b = judge.cells_of(records, testbed, r.system, r.workload, r.policy)
        if t.metric not in a or r.metric not in b:
            continue
        a = a.set_index("rep")[t.metric].dropna()
        b = b.set_index("rep")[r.metric].dropna()
        reps = sorted(set(a.index) & set(b.index))
        if len(reps) < 2 or (a <= 0).any() or (b <= 0).any():
            continue
        x, y = a.loc[reps].to_numpy(float), b.loc[reps].to_numpy(float)
        n = len(reps)
        q = ((x.std(ddof=1) / x.mean()) ** 2 + (y.std(ddof=1) / y.mean()) ** 2) / 2
        unpaired = 2 * sps.t.ppf(0.975, 2 * n - 2) * math.sqrt(q * 2 / n)
        d = np.log(x / y)
        paired = 2 * sps.t.ppf(0.975, n - 1) * d.std(ddof=1) / math.sqrt(n)
        rows.append((c.id, n, unpaired, paired))
    if not rows:
        print("no claim compares two cell sets with shared repetitions in this run")
        return
    print(f"{'claim':55} {'n':>2} {'unpaired':>9} {'paired':>9} {'paired/unpaired':>16}")
    for cid, n, u, p in rows:
        print(f"{cid:55} {n:>2} {u:>9.3f} {p:>9.3f} {p / u if u else math.nan:>16.2f}")
    ratios = [p / u for _, _, u, p in rows if u]
    print(f"median paired/unpaired width: {np.median(ratios):.2f} over {len(ratios)} claims; "
          f"paired narrower in {sum(x < 1 for x in ratios)}")


if __name__ == "__main__":
    main()
