"""How often a 95 % interval of a ratio of two means covers the truth at the small n of a
run's repetitions: the verdicts' interval (claims/stats.py: t on the log ratio, spread
pooled over the cell sets), the same with Welch's degrees of freedom, and a percentile
bootstrap (scipy.stats.bootstrap, each sample resampled on its own).

Run: .venv/bin/python benchmarks/claims_intervals.py [--experiments N]

Normal repetitions, true means 130 and 100 (ratio 1.3), 5 % spread in both; seeded. It
prints coverage, not assertions (tests/test_claims_stats.py asserts the verdicts' own).
"""

from __future__ import annotations

import argparse
import math
import warnings

import numpy as np
from scipy import stats as sps

from slimio_repro.claims import stats


def _welch(a, b):
    va = a.var(ddof=1) / len(a) / a.mean() ** 2
    vb = b.var(ddof=1) / len(b) / b.mean() ** 2
    df = (va + vb) ** 2 / (va ** 2 / (len(a) - 1) + vb ** 2 / (len(b) - 1))
    e, h = math.log(a.mean() / b.mean()), sps.t.ppf(0.975, df) * math.sqrt(va + vb)
    return math.exp(e - h), math.exp(e + h)


def _pooled(a, b):
    iv = stats.interval(lambda m: m["a"] / m["b"],
                        [stats.Group(("a",), a[:, None]), stats.Group(("b",), b[:, None])],
                        log_scale=True)
    return iv.low, iv.high


def _bootstrap(a, b):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = sps.bootstrap((a, b), lambda x, y: x.mean() / y.mean(), n_resamples=2000,
                          vectorized=False, method="percentile",
                          rng=np.random.default_rng(1))
    return r.confidence_interval.low, r.confidence_interval.high


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--experiments", type=int, default=1000)
    args = ap.parse_args()
    methods = {"t, pooled (verdicts)": _pooled, "t, Welch": _welch,
               "percentile bootstrap": _bootstrap}
    print(f"coverage of the true ratio 1.3 over {args.experiments} experiments")
    print(f"{'n':>3}  " + "  ".join(f"{m:>22}" for m in methods))
    for n in (2, 3, 5):
        rng = np.random.default_rng(20261126 + n)
        hits = dict.fromkeys(methods, 0)
        for _ in range(args.experiments):
            a, b = rng.normal(130, 6.5, n), rng.normal(100, 5, n)
            for name, f in methods.items():
                lo, hi = f(a, b)
                hits[name] += lo <= 1.3 <= hi
        print(f"{n:>3}  " + "  ".join(f"{hits[m] / args.experiments:>22.3f}"
                                      for m in methods))


if __name__ == "__main__":
    main()
