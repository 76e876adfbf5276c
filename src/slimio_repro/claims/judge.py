"""A verdict per claim from one run's tidy records (results/tables/cells.csv).

The value of a claim is computed from the means of its terms' cells (ratio, difference, the
term alone, or a ratio of two ratios); its uncertainty is a percentile bootstrap over the
repetitions (scipy.stats.bootstrap, each set of cells resampled on its own, the terms of one
set together, seeded). The verdict:

* holds: the value is on the claimed side of the neutral value (1 for ratios, 0 for
  differences) and within the claim's tolerance of the paper's value ('equal' claims and
  absolute claims: within the tolerance);
* holds in direction only: on the claimed side, outside the tolerance;
* does not hold: not on the claimed side (or outside an 'equal' band);
* not testable here: the claim needs what this run does not have (cells of the matrix, the
  paper profile, a native CPU, a device with garbage collection, or an output the pipeline
  does not produce yet); the reason says which.

The confidence interval does not change the verdict: it is reported beside it, and a reason
says when it includes the neutral value (the side is then not established at this n).
"""

from __future__ import annotations

import dataclasses
import math
import warnings

import numpy as np
import pandas as pd
from scipy import stats

from slimio_repro.claims.catalog import POLICY_LABELS, SYSTEM_LABELS, Claim, Measure, Term

HOLDS = "holds"
DIRECTION_ONLY = "holds in direction only"
FAILS = "does not hold"
UNTESTABLE = "not testable here"
VERDICTS = (HOLDS, DIRECTION_ONLY, FAILS, UNTESTABLE)

# The bound (system nopersist: persistence off, same testbed and workload): an RPS claim of a
# system over the baseline has a ceiling, the bound's rate over the baseline's. Its metric per
# claimed metric (the bound takes no snapshot: its WAL-only rate bounds both phases), as the
# ratio tables hold it (aggregate.tables.BOUND_OF).
BOUND_SYSTEM = "nopersist"
BOUND_METRIC = {"rps_wal_only": "rps_wal_only", "rps_wal_snapshot": "rps_wal_only",
                "rps_avg": "rps_avg"}

CONFIDENCE = 0.95
RESAMPLES = 2000
SEED = 20251116

# Why a condition of `requires` is unmet, by condition.
REQUIREMENTS = {
    "paper_profile": (
        lambda cells: set(cells["profile"]) == {"paper"},
        "needs the paper profile (28 M SETs, 5.3 M keys, 20 GB snapshots on a 180 GB FEMU "
        "SSD): this run is the {profiles} profile"),
    "native_cpu": (
        lambda cells: set(cells["accel"]) <= {"native", "kvm"},
        "absolute numbers do not transfer from an emulated CPU ({accels}); needs KVM or the "
        "bare testbed, and the paper's hardware for the same magnitude"),
    "device_gc": (
        lambda cells: set(cells["device_model"]) <= {"femu"},
        "needs a device with garbage collection (FEMU): this run's device is {devices}, which "
        "has none, so its measured WAF is 1.00 by construction; the device model's claim on "
        "waf_modelled judges it instead"),
    "device_aged": (
        lambda cells: "ftl_drive_writes" in cells and cells["ftl_drive_writes"].max() >= 1.0,
        "the modelled device was written over {drive_writes} times by these cells' sequences; "
        "garbage collection needs at least one full drive write (the gc or paper profile), so "
        "a fresh device's WAF of 1.00 judges nothing"),
}


@dataclasses.dataclass(frozen=True)
class Verdict:
    claim: Claim
    verdict: str
    reason: str
    measured: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    n: int = 0                      # the smallest number of repetitions over the claim's terms
    n_detail: str = ""              # n per term, e.g. "2/2"
    judged_on: str = ""             # testbed (accelerator, device) the cells ran on
    ceiling: float | None = None    # the most the claim's ratio can be here (the bound's)

    def row(self) -> dict:
        c = self.claim
        return {
            "claim_id": c.id, "source": c.source, "where": c.where, "quote": c.quote,
            "kind": c.kind, "testbed": c.testbed, "comparison": comparison(c),
            "metrics": ", ".join(sorted(c.metrics())), "direction": c.direction,
            "paper_value": c.paper_value, "text_value": c.text_value,
            "measured": self.measured, "ci_low": self.ci_low, "ci_high": self.ci_high,
            "confidence_level": CONFIDENCE if self.ci_low is not None else None,
            "n": self.n, "n_per_term": self.n_detail, "judged_on": self.judged_on,
            "tolerance": c.tolerance.label(), "tolerance_reason": c.tolerance.reason,
            "ceiling": self.ceiling,
            "verdict": self.verdict, "reason": self.reason, "doubt": c.doubt,
        }


def comparison(c: Claim) -> str:
    """The claim's value in words, e.g. 'SlimIO / Baseline rps_wal_only (redis-benchmark,
    Periodical-Log)'."""
    def side(m: Measure) -> str:
        t, r = m.term, m.reference
        if r is None:
            return t.label()
        op = " - " if c.kind == "difference" else " / "
        if r.metric != t.metric and r.system == t.system:
            lhs, rhs = t.metric, r.metric
            who = SYSTEM_LABELS[t.system]
            return f"{who} {lhs}{op}{rhs} ({_where(t, r)})"
        lhs, rhs = SYSTEM_LABELS[t.system], SYSTEM_LABELS[r.system]
        if (t.system == r.system):
            lhs, rhs = _where(t), _where(r)
            return f"{SYSTEM_LABELS[t.system]} {t.metric}: {lhs}{op}{rhs}"
        return f"{lhs}{op}{rhs} {t.metric} ({_where(t, r)})"
    out = side(c.measure)
    if c.versus is not None:
        out = f"[{out}] / [{side(c.versus)}]"
    return out


def _where(t: Term, r: Term | None = None) -> str:
    parts = [t.workload]
    if t.policy and (r is None or r.policy == t.policy):
        parts.append(POLICY_LABELS[t.policy])
    elif t.policy and r is not None:
        parts.append(f"{POLICY_LABELS[t.policy]} vs {POLICY_LABELS[r.policy]}")
    return ", ".join(parts)


def cells_of(records: pd.DataFrame, testbed: str, system: str, workload: str,
             policy: str | None = None) -> pd.DataFrame:
    """The records of one set of cells (policy None: both policies)."""
    sel = ((records["testbed"] == testbed) & (records["system"] == system)
           & (records["workload"] == workload))
    if policy:
        sel &= records["policy"] == policy
    return records[sel]


def _cells(records: pd.DataFrame, testbed: str, t: Term) -> pd.DataFrame:
    return cells_of(records, testbed, t.system, t.workload, t.policy)


def _missing(records: pd.DataFrame, testbed: str, t: Term) -> str:
    """Which cells a term needs that the run does not have, and how to get them."""
    pattern = f"{testbed}-{t.system}-{t.workload}-{t.policy or '*'}-r*"
    for key, column, value in (("testbeds", "testbed", testbed), ("systems", "system", t.system),
                               ("workloads", "workload", t.workload),
                               ("policies", "policy", t.policy)):
        if value is not None and value not in set(records[column]):
            return (f"needs {pattern} cells: this run has no {value!r} in matrix.{key} "
                    f"(add it there)")
    return f"needs {pattern} cells, which this run does not have"


def _judged_on(cells: pd.DataFrame, testbed: str) -> str:
    accels = ",".join(sorted(set(cells["accel"].dropna()))) if "accel" in cells else "?"
    devices = ",".join(sorted(set(cells["device_model"].dropna()))) \
        if "device_model" in cells else "?"
    shown = "model (vm traces)" if testbed == "model" else testbed
    return f"{shown}: {accels}, {devices}"


def _value(c: Claim, means: dict[Term, float]) -> float:
    def one(m: Measure) -> float:
        a = means[m.term]
        if m.reference is None:
            return a
        b = means[m.reference]
        if c.kind == "difference":
            return a - b
        return a / b if b else math.nan
    v = one(c.measure)
    if c.versus is not None:
        w = one(c.versus)
        v = v / w if w else math.nan
    return v


def _on_side(c: Claim, v: float) -> bool:
    if c.direction == "higher":
        return v > c.neutral
    if c.direction == "lower":
        return v < c.neutral
    return True


def _in_band(c: Claim, v: float) -> bool:
    tol = c.tolerance
    if tol.rule == "relative":
        return abs(v / c.paper_value - 1) <= tol.value if c.paper_value else abs(v) <= tol.value
    if tol.rule == "absolute":
        return abs(v - c.paper_value) <= tol.value
    return True


def number(v) -> str:
    """A claim's value as the verdicts show it: 3 decimals, or thousands; '-' for none."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    return f"{v:,.3f}" if abs(v) < 1000 else f"{v:,.0f}"


def _decide(c: Claim, v: float) -> tuple[str, str]:
    paper = number(c.paper_value)
    if c.direction == "equal" or c.kind == "absolute":
        if _in_band(c, v):
            return HOLDS, f"{number(v)} is within {c.tolerance.label()} of the paper's {paper}"
        off = (v / c.paper_value - 1) * 100 if c.paper_value else math.nan
        return FAILS, (f"{number(v)} is outside {c.tolerance.label()} of the paper's {paper} "
                       f"({off:+.1f} %)")
    want = f"{'above' if c.direction == 'higher' else 'below'} {c.neutral:g}"
    if not _on_side(c, v):
        return FAILS, f"{number(v)} is not {want} as claimed (the paper: {paper})"
    if c.tolerance.rule == "direction":
        return HOLDS, f"{number(v)} is {want} as claimed (the paper: {paper}; only the side counts)"
    if _in_band(c, v):
        return HOLDS, (f"{number(v)} is {want} and within {c.tolerance.label()} of the "
                       f"paper's {paper}")
    off = (v / c.paper_value - 1) * 100 if c.paper_value else math.nan
    return DIRECTION_ONLY, (f"{number(v)} is {want} as claimed, but {off:+.1f} % from the "
                            f"paper's {paper} (tolerance {c.tolerance.label()})")


def _bootstrap(c: Claim, groups: dict, metrics_of: dict) -> tuple[float | None, float | None]:
    """Percentile bootstrap CI of the claim's value; None when a set has fewer than 2 cells."""
    keys = list(groups)
    if any(len(groups[k]) < 2 for k in keys):
        return None, None

    def statistic(*samples):
        means = {}
        for key, idx in zip(keys, samples):
            for term, values in metrics_of[key]:
                means[term] = float(values[idx.astype(int)].mean())
        return _value(c, means)

    return _interval(tuple(np.arange(len(groups[k]), dtype=float) for k in keys), statistic)


def _interval(data: tuple, statistic) -> tuple[float | None, float | None]:
    """The seeded percentile bootstrap every interval of this stage uses (each sample
    resampled on its own); None when it is undefined."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = stats.bootstrap(data, statistic, n_resamples=RESAMPLES, vectorized=False,
                              paired=False, confidence_level=CONFIDENCE, method="percentile",
                              rng=np.random.default_rng(SEED))
    lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
    return (None, None) if math.isnan(lo) or math.isnan(hi) else (lo, hi)


# What the motivation measures (its cells' metrics, Table 1's EXT4 system): a run without
# it is told where it is judged.
MOTIVATION_METRIC_PREFIX = "mot_"
MOTIVATION_SYSTEMS = ("baseline-ext4",)
MOTIVATION_HINT = ("measured by the motivation, which this run does not include: `make "
                   "motivation` judges it (results/claims/motivation/verdicts.md), or "
                   "motivation.in_reproduce adds it to the run")


def _needs_motivation(c: Claim, records: pd.DataFrame) -> bool:
    for t in c.terms():
        if t.metric.startswith(MOTIVATION_METRIC_PREFIX) and t.metric not in records.columns:
            return True
        if t.system in MOTIVATION_SYSTEMS and t.system not in set(records["system"]):
            return True
    return False


def judge(c: Claim, records: pd.DataFrame) -> Verdict:
    """The verdict of one claim on one run's records (one row per cell)."""
    if c.not_testable:
        return Verdict(c, UNTESTABLE, c.not_testable)
    if _needs_motivation(c, records):
        return Verdict(c, UNTESTABLE, MOTIVATION_HINT)
    testbed = "vm" if c.testbed == "model" else c.testbed
    terms = c.terms()
    # Each distinct set of cells is one bootstrap sample; its terms share the resample.
    groups, metrics_of, n_of = {}, {}, {}
    for t in terms:
        key = (t.system, t.workload, t.policy)
        cells = _cells(records, testbed, t)
        if cells.empty:
            return Verdict(c, UNTESTABLE, _missing(records, testbed, t))
        groups.setdefault(key, cells)
    for t in terms:
        if t.metric not in records.columns:
            return Verdict(c, UNTESTABLE, f"this run's records have no column {t.metric!r}")
    for key, cells in groups.items():
        needed = sorted({t.metric for t in terms if (t.system, t.workload, t.policy) == key})
        complete = cells.dropna(subset=needed)
        if complete.empty:
            return Verdict(c, UNTESTABLE, (
                f"the {testbed}-{key[0]}-{key[1]}-{key[2] or '*'} cells have no value of "
                f"{', '.join(needed)}"))
        groups[key] = complete
    everything = pd.concat(list(groups.values()))
    for col in ("profile", "accel", "device_model"):    # records parsed before these existed
        if col not in everything:
            everything = everything.assign(**{col: "unrecorded"})
    judged_on = _judged_on(everything, c.testbed)
    unmet = []
    for need in c.requires:
        ok, why = REQUIREMENTS[need]
        if not ok(everything):
            unmet.append(why.format(
                profiles=", ".join(sorted(set(everything["profile"]))),
                accels=", ".join(sorted(set(everything["accel"]))),
                devices=", ".join(sorted(set(everything["device_model"]))),
                drive_writes=f"{everything['ftl_drive_writes'].max():.2f}"
                if "ftl_drive_writes" in everything else "0"))
    for key, cells in groups.items():
        metrics_of[key] = [(t, cells[t.metric].to_numpy(dtype=float))
                           for t in dict.fromkeys(terms)
                           if (t.system, t.workload, t.policy) == key]
        n_of[key] = len(cells)
    means = {t: float(vals.mean()) for key in groups for t, vals in metrics_of[key]}
    value = _value(c, means)
    n_detail = "/".join(str(n_of[(t.system, t.workload, t.policy)]) for t in terms)
    n = min(n_of.values())
    if math.isnan(value) or math.isinf(value):
        return Verdict(c, UNTESTABLE, "the reference's mean is 0: the ratio is undefined",
                       n=n, n_detail=n_detail, judged_on=judged_on)
    if unmet:
        # Not judged, but what this run measured is shown (the paper's value beside it).
        return Verdict(c, UNTESTABLE, "; ".join(unmet) + f" (measured here: {number(value)}, "
                       f"n={n}; the paper: {number(c.paper_value)})", value, None, None, n,
                       n_detail, judged_on)
    lo, hi = _bootstrap(c, groups, metrics_of)
    verdict, reason = _decide(c, value)
    if lo is None:
        reason += f"; n={n}: no confidence interval"
    elif c.neutral is not None and c.direction != "equal" and lo <= c.neutral <= hi:
        reason += (f"; the {CONFIDENCE:.0%} CI [{number(lo)}, {number(hi)}] includes "
                   f"{c.neutral:g}: the side is not established at n={n}")
    hosts = node_classes(everything)
    if len(hosts) > 1:
        reason += (f"; WARNING: the cells ran on unlike nodes ({'; '.join(hosts)}): the "
                   "ratio mixes machines")
    return Verdict(c, verdict, reason, value, lo, hi, n, n_detail, judged_on)


def node_classes(records: pd.DataFrame) -> list[str]:
    """The classes of the nodes ``records``' cells ran on (CPU model and count, memory,
    kernel: what must be alike for a ratio between cells to mean anything); the host's CPU
    model for records made before nodes were recorded."""
    col = "node_class" if "node_class" in records else "host_cpu_model"
    if col not in records:
        return []
    return sorted(set(records[col].dropna()) - {"unrecorded"})


def ceiling(c: Claim, records: pd.DataFrame, testbed: str) -> tuple[float, int] | None:
    """The most claim ``c``'s value can be on this run's testbed, and the bound's n: for a
    ratio of a system's RPS over the baseline's (same metric, workload and policy), the
    no-persistence bound's rate over the baseline's. None for any other claim, or without
    nopersist cells."""
    m = c.measure
    t, r = m.term, m.reference
    if (c.kind != "ratio" or c.versus is not None or r is None or t.metric != r.metric
            or t.metric not in BOUND_METRIC or r.system == BOUND_SYSTEM
            or t.system == r.system or (t.workload, t.policy) != (r.workload, r.policy)):
        return None
    metric = BOUND_METRIC[t.metric]
    bound = cells_of(records, testbed, BOUND_SYSTEM, t.workload)
    base = cells_of(records, testbed, r.system, r.workload, r.policy)
    if metric not in bound or t.metric not in base:
        return None
    b = pd.to_numeric(bound[metric], errors="coerce").dropna()
    a = pd.to_numeric(base[t.metric], errors="coerce").dropna()
    if b.empty or a.empty or not a.mean():
        return None
    return float(b.mean() / a.mean()), len(b)


def _with_ceiling(v: Verdict, records: pd.DataFrame) -> Verdict:
    """``v`` with its ceiling (:func:`ceiling`) and, where the paper's value is above it, a
    reason saying that no system can reach that value on this testbed."""
    c = v.claim
    if v.verdict == UNTESTABLE:
        return v
    got = ceiling(c, records, "vm" if c.testbed == "model" else c.testbed)
    if got is None:
        return v
    top, n = got
    reason = v.reason
    if c.direction == "higher" and c.paper_value > top:
        reason += (f"; the bound (no persistence, n={n}) is {number(top)}x the "
                   f"{SYSTEM_LABELS[c.measure.reference.system]} here: the paper's "
                   f"{number(c.paper_value)} cannot be reached on this testbed by any system")
    return dataclasses.replace(v, reason=reason, ceiling=top)


def judge_all(claims: list[Claim], records: pd.DataFrame) -> list[Verdict]:
    return [_with_ceiling(judge(c, records), records) for c in claims]


def ratio_interval(a: np.ndarray, b: np.ndarray) -> tuple[float | None, float | None]:
    """Percentile bootstrap CI of mean(a) / mean(b), the samples resampled independently
    (the same method and seed as the claims'); None with fewer than 2 values on a side."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if len(a) < 2 or len(b) < 2 or not b.mean():
        return None, None
    return _interval((a, b), lambda x, y: x.mean() / y.mean())
