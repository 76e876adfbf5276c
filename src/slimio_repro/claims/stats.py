"""The statistics of a verdict: a claim's value, its confidence interval at small n, the
number of repetitions that would decide it, and the error spent over repeated looks.

A claim's value is a function of the means of its terms (a ratio, a difference, a ratio of
two ratios, or one mean). Each distinct set of cells (system x workload x policy) is one
independent group; the terms of one group are metrics of the same cells.

The interval is a t interval on the claim's *effect*: the log of the value for a value that
is a product or quotient of positive means (every ratio, ordering and ratio of ratios), the
value itself otherwise (differences, single means, a ratio whose means may be 0). Its
standard error is the delta method's (the effect's gradient in the group means, with each
group's covariance of its metrics, so two metrics of the same cells keep their correlation);
the variance each group contributes per cell is pooled over the groups, with
sum(n_g - 1) degrees of freedom. Pooling assumes the groups' relative spread is alike (the
cells of one claim run on one testbed and one workload, and their noise is multiplicative):
at n = 2 it keeps the 95 % interval's coverage at 94-95 % where Welch's degrees of freedom
over-cover (about 97.8 %), and it under-covers once the groups' spreads differ by more than
about 2x (93 % at 3x, n = 5). tests/test_claims_stats.py measures both by simulation.

n = 1 in any group gives no interval: the spread is unmeasured.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Callable, Hashable, Mapping, Sequence

import numpy as np

CONFIDENCE = 0.95
# The most repetitions per cell set a plan of repetitions considers.
MAX_REPETITIONS = 100


def scipy_stats():
    """scipy.stats, imported where first used: the import takes about 1 s, and every
    Snakemake start imports this module through the workflow's claims."""
    from scipy import stats
    return stats


@dataclasses.dataclass(frozen=True)
class Group:
    """One set of cells: ``values`` has one row per cell and one column per metric the
    claim takes from it (in ``metrics`` order)."""
    metrics: tuple[Hashable, ...]
    values: np.ndarray

    @property
    def n(self) -> int:
        return int(self.values.shape[0])

    def means(self) -> np.ndarray:
        return self.values.mean(axis=0)


@dataclasses.dataclass(frozen=True)
class Interval:
    """A claim's value and its interval, in the value's own units."""
    value: float
    low: float | None
    high: float | None
    confidence: float
    log_scale: bool
    se: float | None = None        # of the effect (log value or value)
    df: float | None = None
    q: float | None = None         # pooled variance per cell of the effect (for n planning)
    groups: int = 0

    @property
    def defined(self) -> bool:
        return self.low is not None


Value = Callable[[Mapping[Hashable, float]], float]


@functools.lru_cache(maxsize=4096)
def t_quantile(confidence: float, dof: float) -> float:
    """The two-sided t quantile (cached: plans of repetitions ask for many)."""
    return float(scipy_stats().t.ppf(0.5 + confidence / 2, dof))


def _effect(value: Value, log_scale: bool) -> Value:
    if log_scale:
        return lambda means: math.log(value(means))
    return value


def _gradient(f: Value, means: dict[Hashable, float]) -> dict[Hashable, float]:
    """Central differences of f in each mean (relative steps)."""
    out = {}
    for key, m in means.items():
        h = 1e-6 * max(abs(m), 1e-12)
        up, down = dict(means), dict(means)
        up[key], down[key] = m + h, m - h
        out[key] = (f(up) - f(down)) / (2 * h)
    return out


def positive(groups: Sequence[Group]) -> bool:
    return all(np.all(g.means() > 0) for g in groups)


def interval(value: Value, groups: Sequence[Group], log_scale: bool | None = None,
             confidence: float = CONFIDENCE) -> Interval:
    """The value of ``value`` at the groups' means and its t interval (module docstring).
    ``log_scale`` None: log when every mean is positive."""
    means = {k: float(v) for g in groups for k, v in zip(g.metrics, g.means())}
    v = float(value(means))
    if log_scale is None:
        log_scale = positive(groups) and v > 0
    if any(g.n < 2 for g in groups) or not math.isfinite(v):
        return Interval(v, None, None, confidence, log_scale, groups=len(groups))
    f = _effect(value, log_scale)
    grad = _gradient(f, means)
    dof = sum(g.n - 1 for g in groups)
    # The effect's variance per cell contributed by each group, pooled over the groups.
    per_cell = []
    for g in groups:
        d = np.array([grad[k] for k in g.metrics])
        cov = np.atleast_2d(np.cov(g.values, rowvar=False, ddof=1))
        per_cell.append(float(d @ cov @ d))
    q = sum((g.n - 1) * qg for g, qg in zip(groups, per_cell)) / dof
    se = math.sqrt(max(q, 0.0) * sum(1 / g.n for g in groups))
    half = t_quantile(confidence, dof) * se
    e = f(means)
    lo, hi = e - half, e + half
    if log_scale:
        lo, hi = math.exp(lo), math.exp(hi)
    return Interval(v, lo, hi, confidence, log_scale, se, dof, q, len(groups))


def to_effect(x: float, log_scale: bool) -> float:
    if not log_scale:
        return x
    return math.log(x) if x > 0 else -math.inf


def half_width_at(iv: Interval, n: int, confidence: float | None = None) -> float:
    """The interval's half-width on the effect scale if every group had ``n`` cells and the
    measured pooled spread held."""
    conf = iv.confidence if confidence is None else confidence
    dof = iv.groups * (n - 1)
    return t_quantile(conf, dof) * math.sqrt(iv.q * iv.groups / n)


def repetitions_to_clear(iv: Interval, edges: Sequence[float],
                         confidence: float | None = None,
                         limit: int = MAX_REPETITIONS) -> int | None:
    """The fewest repetitions per group at which the interval around the measured value
    would leave every edge in ``edges`` (value units) outside it, if the measured mean and
    spread held; None if even ``limit`` would not (the value sits on an edge)."""
    if iv.q is None:
        return None
    centre = to_effect(iv.value, iv.log_scale)
    gaps = [abs(centre - to_effect(e, iv.log_scale)) for e in edges]
    need = min(gaps) if gaps else math.inf
    if iv.q <= 0:
        return 2
    for n in range(2, limit + 1):
        if half_width_at(iv, n, confidence) < need:
            return n
    return None


# Spreads the planning probability averages over (quantiles of the spread's posterior).
SPREAD_DRAWS = 32


def decide_probability(iv: Interval, edges: Sequence[float], n: np.ndarray | int,
                       confidence: float | None = None,
                       prior: tuple[float, float] | None = None) -> np.ndarray:
    """For each ``n`` (repetitions per group, more than any group has), the probability that
    the interval at ``confidence`` leaves every edge in ``edges`` (value units) outside it,
    predicted from what was measured. With flat priors on the true effect and on the log
    of the spread, the true per-cell variance s2 is the measured q times df / chi2(df)
    (``prior``, a variance and its degrees of freedom, adds what other cells say of it).
    Given s2, the effect at n is normal around the measured effect with variance
    s2 * (sum(1 / n_g) - groups / n), what the cells still to come add; the spread the
    interval at n measures is the measured sum of squares plus s2 times a chi-square for
    the new degrees of freedom; its half-width is the t quantile times
    sqrt(spread * groups / n). The interval is undecided while its centre lies within a
    half-width of an edge: the probability is 1 minus the predictive mass there, averaged
    over SPREAD_DRAWS quantiles of s2 and of the chi-square. 0 where the spread is
    unmeasured. tests/test_claims_stats.py checks by simulation that it comes true as
    often as it says."""
    ns = np.atleast_1d(np.asarray(n, dtype=float))
    if iv.q is None or iv.se is None or not iv.df:
        return np.zeros_like(ns)
    conf = iv.confidence if confidence is None else confidence
    centre = to_effect(iv.value, iv.log_scale)
    points = sorted(x for x in (to_effect(e, iv.log_scale) for e in edges)
                    if math.isfinite(x))
    if not points:
        return np.ones_like(ns)
    inverse_n = iv.se ** 2 / iv.q if iv.q > 0 else iv.groups / 2   # sum(1 / n_g)
    # SciPy's special functions (the chi-square's, Student's t's and the normal's quantiles
    # and distribution), which scipy.stats's distributions compute, without their argument
    # checks: decide and the simulations that test this call it thousands of times.
    from scipy import special
    s2_0, df_0 = prior if prior else (0.0, 0.0)
    u = (np.arange(SPREAD_DRAWS) + 0.5) / SPREAD_DRAWS
    # The true variance (axis 0), and the chi-square of the cells to come (axis 1).
    s2 = ((max(iv.q, 0.0) * iv.df + s2_0 * df_0) / special.chdtri(iv.df + df_0, 1 - u))
    s2 = s2[:, None, None]
    dof = iv.groups * (ns - 1)
    new = np.maximum(dof - iv.df, 1e-9)
    chi2 = special.chdtri(new, 1 - u[:, None])[None, :, :]
    q_n = (max(iv.q, 0.0) * iv.df + s2 * chi2) / (iv.df + new)      # the spread measured at n
    half = special.stdtrit(dof, 0.5 + conf / 2) * np.sqrt(q_n * iv.groups / ns)
    scale = np.sqrt(s2 * np.maximum(inverse_n - iv.groups / ns, 0.0))

    def cdf(x):
        safe = np.where(scale > 0, scale, 1.0)
        return np.where(scale > 0, special.ndtr((x - centre) / safe),
                        (x >= centre).astype(float))

    # The undecided region: the union of [edge - half, edge + half] over the sorted edges.
    undecided = np.zeros_like(half)
    reach = np.full_like(half, -np.inf)     # where the region so far ends
    for e in points:
        lo = np.maximum(e - half, reach)
        hi = e + half
        undecided += np.where(hi > lo, cdf(hi) - cdf(lo), 0.0)
        reach = np.maximum(reach, hi)
    return np.clip(1 - undecided.mean(axis=(0, 1)), 0.0, 1.0)


def alpha_of_look(look: int, confidence: float = CONFIDENCE) -> float:
    """The two-sided error a look may spend so that every look together spends at most
    ``1 - confidence`` on each side beyond what the run's own verdict (look 0) spent:
    look 0 spends alpha = 1 - confidence (a one-sided alpha / 2 at each band edge); a
    'holds' needs the interval inside the band, so a false 'holds' at one edge costs at most
    alpha / 2 of the 5 % a verdict may err. Each further look j spends alpha / 2 ** j
    (Bonferroni over the looks: the sum over j >= 1 is alpha), so the whole sequence errs at
    an edge with probability at most alpha / 2 + alpha / 2 = alpha."""
    alpha = 1 - confidence
    return alpha if look == 0 else alpha / 2 ** look
