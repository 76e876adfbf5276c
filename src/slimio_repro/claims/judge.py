"""A verdict per claim from one run's tidy records (results/tables/cells.csv).

The value of a claim is computed from the means of its terms' cells (ratio, difference, the
term alone, or a ratio of two ratios); its 95 % confidence interval is a t interval on the
claim's effect (claims/stats.py). The interval decides, against the claim's band (the values
that agree with the paper, ``Claim.band``):

* holds: the whole interval lies inside the band (for an 'equal' claim this is two one-sided
  tests against its margin);
* holds in direction only: the whole interval is outside the band and on the claimed side
  of the neutral value (1 for ratios, 0 for differences);
* does not hold: the whole interval is outside the band, not all of it on the claimed side;
* undecided at n = k: the interval straddles an edge of the band; the reason names the edge
  and the repetitions per cell set that the measured spread says would decide it. n = 1 is
  always undecided (no spread measured);
* not testable here: the claim needs what this run does not have (cells of the matrix, the
  paper profile, a native CPU, a device with garbage collection, or an output the pipeline
  does not produce yet); the reason says which;
* not judged: cells failed: cells of the plan that the claim needs did not finish (the run's
  ``missing`` cells: config finished_cells_only made the verdicts from the cells that did),
  and without them its value cannot be computed; the reason names them.

A claim judged although some of its cells are missing (a repetition failed, the others
finished) is judged on the cells there are, and its verdict lists the missing ones
(``Verdict.missing_cells``, its label and reason say so).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd

from . import stats
from ..bound import BOUND_METRIC, BOUND_SYSTEM
from ..labels import POLICY_LABEL, SYSTEM_LABEL
from .catalog import Claim, Measure, Term
from .stats import CONFIDENCE

HOLDS = "holds"
DIRECTION_ONLY = "holds in direction only"
FAILS = "does not hold"
UNDECIDED = "undecided"
UNTESTABLE = "not testable here"
NOT_JUDGED = "not judged: cells failed"
VERDICTS = (HOLDS, DIRECTION_ONLY, FAILS, UNDECIDED, UNTESTABLE, NOT_JUDGED)
# The columns of the run's missing cells (judge_all's ``missing``): what selects a claim's.
MISSING_COLUMNS = ("cell_id", "testbed", "system", "workload", "policy", "rep", "motivation",
                   "log")

# An RPS claim of a system over the baseline has a ceiling: the bound's rate over the
# baseline's (slimio_repro.bound).

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
        # The device models with GC: FEMU's, and a real SSD's (parse.cell.NAMED_DEVICE_MODEL).
        lambda cells: set(cells["device_model"]) <= {"femu", "nvme-ssd"},
        "needs a device with garbage collection (FEMU, or an SSD: testbeds.bare.device): this "
        "run's device is {devices}, which "
        "has none, so its measured WAF is 1.00 by construction; the device model's claim on "
        "waf_modelled judges it instead"),
    "device_aged": (
        lambda cells: "ftl_drive_writes" in cells and cells["ftl_drive_writes"].max() >= 1.0,
        "the device was written over {drive_writes} times by these cells' sequences (their "
        "traces, replayed by the FTL stage); garbage collection needs at least one full drive "
        "write (the gc, gc-femu or paper profile), so a fresh device's WAF of 1.00 judges "
        "nothing"),
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
    needed_n: int | None = None     # undecided: repetitions per cell set that would decide it
    confidence: float = CONFIDENCE
    # (n, verdict, ci_low, ci_high, confidence) at each look that judged it (matrix.looks)
    history: tuple = ()
    interval: stats.Interval | None = None   # what the verdict was decided from
    # The ids of the cells the claim needs that did not finish in this run (missing cells).
    missing_cells: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        """The verdict as shown: 'undecided at n=2' for an undecided one; a verdict made
        without some of the claim's cells says how many are missing."""
        out = f"{UNDECIDED} at n={self.n}" if self.verdict == UNDECIDED else self.verdict
        if self.missing_cells and self.verdict != NOT_JUDGED:
            k = len(self.missing_cells)
            out += f" ({k} cell{'s' if k != 1 else ''} missing)"
        return out

    def row(self) -> dict:
        c = self.claim
        lo, hi = c.band()
        return {
            "claim_id": c.id, "source": c.source, "where": c.where, "quote": c.quote,
            "kind": c.kind, "testbed": c.testbed, "comparison": comparison(c),
            "metrics": ", ".join(sorted(c.metrics())), "direction": c.direction,
            "paper_value": c.paper_value, "text_value": c.text_value,
            "measured": self.measured, "ci_low": self.ci_low, "ci_high": self.ci_high,
            "confidence_level": self.confidence if self.ci_low is not None else None,
            "n": self.n, "n_per_term": self.n_detail, "judged_on": self.judged_on,
            "tolerance": c.tolerance.label(), "tolerance_reason": c.tolerance.reason,
            "band_low": None if math.isinf(lo) else lo,
            "band_high": None if math.isinf(hi) else hi,
            "ceiling": self.ceiling, "verdict": self.verdict, "verdict_label": self.label,
            "needed_n": self.needed_n, "reason": self.reason, "doubt": c.doubt,
            "history": history_text(self.history),
            "missing_cells": ", ".join(self.missing_cells),
        }


def history_text(history) -> str:
    """A verdict's looks in words, e.g. 'n=2: undecided [0.9, 1.4] (95%); n=5: holds
    [1.2, 1.3] (97.5%)'; '' with one look or none."""
    if len(history) < 2:
        return ""
    return "; ".join(f"n={n}: {v} {bracket(lo, hi)} ({_pct(conf)})"
                     for n, v, lo, hi, conf in history)


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
            who = SYSTEM_LABEL[t.system]
            return f"{who} {lhs}{op}{rhs} ({_where(t, r)})"
        lhs, rhs = SYSTEM_LABEL[t.system], SYSTEM_LABEL[r.system]
        if (t.system == r.system):
            lhs, rhs = _where(t), _where(r)
            return f"{SYSTEM_LABEL[t.system]} {t.metric}: {lhs}{op}{rhs}"
        return f"{lhs}{op}{rhs} {t.metric} ({_where(t, r)})"
    out = side(c.measure)
    if c.versus is not None:
        out = f"[{out}] / [{side(c.versus)}]"
    return out


def _where(t: Term, r: Term | None = None) -> str:
    parts = [t.workload]
    if t.policy and (r is None or r.policy == t.policy):
        parts.append(POLICY_LABEL[t.policy])
    elif t.policy and r is not None:
        parts.append(f"{POLICY_LABEL[t.policy]} vs {POLICY_LABEL[r.policy]}")
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


def number(v) -> str:
    """A claim's value as the verdicts show it: 3 decimals, or thousands; '-' for none."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if isinstance(v, float) and math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return f"{v:,.3f}" if abs(v) < 1000 else f"{v:,.0f}"


def bracket(lo, hi) -> str:
    """An interval as the verdicts show it, '[lo, hi]' (an open end as -inf or inf)."""
    return f"[{number(lo)}, {number(hi)}]"


def decide(c: Claim, iv: stats.Interval, n: int,
           next_confidence: float | None = None) -> tuple[str, str, int | None]:
    """The verdict, its reason and (undecided) the repetitions per cell set that would
    decide it at ``next_confidence`` (the confidence of the next look; the interval's own
    by default), from the claim's interval ``iv`` (module docstring)."""
    lo_b, hi_b = c.band()
    paper = number(c.paper_value)
    band = f"{'margin' if c.tolerance.rule == 'margin' else 'band'} {bracket(lo_b, hi_b)}"
    conf = _pct(iv.confidence)
    if not iv.defined:
        return UNDECIDED, (f"{number(iv.value)} at n={n}: one repetition measures no spread, "
                           f"so no interval; at least 2 repetitions per cell set are needed, "
                           f"then the spread says how many decide it ({band})"), 2
    lo, hi = iv.low, iv.high
    ci = f"the {conf} CI {bracket(lo, hi)}"
    if lo_b <= lo and hi <= hi_b:
        return HOLDS, f"{ci} lies inside the {band} (the paper: {paper})", None
    if hi < lo_b or lo > hi_b:
        if c.tolerance.rule != "direction" and (
                (c.direction == "higher" and lo > c.neutral)
                or (c.direction == "lower" and hi < c.neutral)):
            return DIRECTION_ONLY, (f"{ci} is {'above' if c.direction == 'higher' else 'below'}"
                                    f" {c.neutral:g} as claimed but outside the {band} (the "
                                    f"paper: {paper})"), None
        where = "below" if hi < lo_b else "above"
        return FAILS, f"{ci} lies {where} the {band} (the paper: {paper})", None
    edges = [e for e in (lo_b, hi_b) if math.isfinite(e) and lo <= e <= hi]
    named = " and ".join(f"{'lower' if e == lo_b else 'upper'} edge {number(e)}"
                         for e in edges)
    need = stats.repetitions_to_clear(iv, edges, next_confidence)
    at = "" if next_confidence is None else f" at the {_pct(next_confidence)} a further look uses"
    if need is None:
        more = (f"no number of repetitions up to {stats.MAX_REPETITIONS} would{at}: the "
                f"measured {number(iv.value)} sits on the edge")
    else:
        more = (f"about {need} repetitions per cell set would decide it{at} if the measured "
                "mean and spread held")
    return UNDECIDED, (f"{ci} straddles the {band}'s {named} at n={n}; {more} (the paper: "
                       f"{paper})"), need


def _pct(confidence: float) -> str:
    """95 % as '95%', 97.5 % as '97.5%'."""
    return f"{confidence * 100:.4g}%"


def _groups(c: Claim, groups: dict) -> list[stats.Group]:
    """The claim's cell sets as the statistics take them: a column per term."""
    out = []
    for key, cells in groups.items():
        terms = tuple(t for t in dict.fromkeys(c.terms())
                      if (t.system, t.workload, t.policy) == key)
        values = np.column_stack([cells[t.metric].to_numpy(dtype=float) for t in terms])
        out.append(stats.Group(terms, values))
    return out


def claim_interval(c: Claim, groups: list[stats.Group],
                   confidence: float = CONFIDENCE) -> stats.Interval:
    """The claim's value and interval from its cell sets (log scale where its effect is)."""
    log = c.log_effect and stats.positive(groups)
    return stats.interval(lambda means: _value(c, means), groups, log_scale=log,
                          confidence=confidence)


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


def missing_frame(missing) -> pd.DataFrame:
    """The run's missing cells (dicts or a frame with :data:`MISSING_COLUMNS`; None: none)
    as a frame."""
    if missing is None:
        missing = []
    frame = pd.DataFrame(missing) if not isinstance(missing, pd.DataFrame) else missing
    for col in MISSING_COLUMNS:
        if col not in frame:
            frame = frame.assign(**{col: False if col == "motivation" else None})
    return frame


def missing_cells_of(c: Claim, missing: pd.DataFrame | None,
                     terms: list[Term] | None = None) -> list[str]:
    """The ids of the missing cells (:func:`missing_frame`) that claim ``c`` (or its
    ``terms``) would be judged on: its testbed's cells of each term's system, workload and
    policy; a motivation cell only for a motivation metric (mot_*), a matrix cell only for
    the others."""
    if missing is None or missing.empty:
        return []
    out = []
    for t in terms if terms is not None else c.terms():
        sel = cells_of(missing, c.cells_testbed, t.system, t.workload, t.policy)
        mot = t.metric.startswith(MOTIVATION_METRIC_PREFIX)
        sel = sel[sel["motivation"].fillna(False).astype(bool) == mot]
        out += list(sel["cell_id"])
    return list(dict.fromkeys(out))


def _not_judged(c: Claim, gone: list[str], terms: list[Term]) -> Verdict:
    """A claim whose value needs cells that did not finish (``gone``, those of ``terms``)."""
    k = len(gone)
    sets = ", ".join(dict.fromkeys(
        f"{c.cells_testbed}-{t.system}-{t.workload}-{t.policy or '*'}" for t in terms))
    return Verdict(c, NOT_JUDGED, (
        f"the {sets} cells it needs did not finish in this run ({k} missing: "
        f"{', '.join(gone)}), and the cells that did cannot give its value; the cells' logs "
        "say why (the report lists them), and the next run runs them again"),
        missing_cells=tuple(gone))


def judge(c: Claim, records: pd.DataFrame, confidence: float = CONFIDENCE,
          next_confidence: float | None = None,
          missing: pd.DataFrame | None = None) -> Verdict:
    """The verdict of one claim on one run's records (one row per cell), its interval at
    ``confidence``; an undecided one names the repetitions that would decide it at
    ``next_confidence`` (default: the next look's, stats.alpha_of_look(1)). ``missing``: the
    run's cells that did not finish (:func:`missing_frame`); a claim that needs one is not
    judged without it where its value needs it, and otherwise says which are missing."""
    if next_confidence is None:
        next_confidence = 1 - stats.alpha_of_look(1)
    if c.not_testable:
        return Verdict(c, UNTESTABLE, c.not_testable)
    v = _judge(c, records, confidence, next_confidence, missing)
    gone = missing_cells_of(c, missing)
    if not gone or v.verdict == NOT_JUDGED:
        return v
    k = len(gone)
    return dataclasses.replace(v, missing_cells=tuple(gone), reason=(
        f"{v.reason}; judged without {k} of its cells, which did not finish in this run "
        f"({', '.join(gone)}): n counts the cells there are"))


def _judge(c: Claim, records: pd.DataFrame, confidence: float, next_confidence: float,
           missing: pd.DataFrame | None) -> Verdict:
    """:func:`judge`, but for the note on the claim's missing cells."""
    if _needs_motivation(c, records):
        mot_terms = [t for t in c.terms() if t.metric.startswith(MOTIVATION_METRIC_PREFIX)
                     or t.system in MOTIVATION_SYSTEMS]
        gone = missing_cells_of(c, missing, mot_terms)
        if gone:
            return _not_judged(c, gone, mot_terms)
        return Verdict(c, UNTESTABLE, MOTIVATION_HINT)
    testbed = c.cells_testbed
    terms = c.terms()
    # What the run lacks decides before what failed in it: a claim the run could never
    # judge is not testable here, whatever else is missing.
    failed = []
    # Each distinct set of cells is one group; its terms are metrics of the same cells.
    groups = {}
    for t in terms:
        key = (t.system, t.workload, t.policy)
        cells = _cells(records, testbed, t)
        if cells.empty:
            if not missing_cells_of(c, missing, [t]):
                return Verdict(c, UNTESTABLE, _missing(records, testbed, t))
            failed.append(t)
        groups.setdefault(key, cells)
    if failed:
        return _not_judged(c, missing_cells_of(c, missing, failed), failed)
    for t in terms:
        if t.metric not in records.columns:
            if not missing_cells_of(c, missing, [t]):
                return Verdict(c, UNTESTABLE, f"this run's records have no column {t.metric!r}")
            failed.append(t)
    if failed:
        return _not_judged(c, missing_cells_of(c, missing, failed), failed)
    for key, cells in groups.items():
        key_terms = [t for t in terms if (t.system, t.workload, t.policy) == key]
        needed = sorted({t.metric for t in key_terms})
        complete = cells.dropna(subset=needed)
        if complete.empty:
            if not missing_cells_of(c, missing, key_terms):
                return Verdict(c, UNTESTABLE, (
                    f"the {testbed}-{key[0]}-{key[1]}-{key[2] or '*'} cells have no value of "
                    f"{', '.join(needed)}"))
            failed += key_terms
        groups[key] = complete
    if failed:
        return _not_judged(c, missing_cells_of(c, missing, failed), failed)
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
    n_of = {key: len(cells) for key, cells in groups.items()}
    iv = claim_interval(c, _groups(c, groups), confidence)
    value = iv.value
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
    verdict, reason, need = decide(c, iv, n, next_confidence)
    hosts = node_classes(everything)
    if len(hosts) > 1:
        reason += (f"; WARNING: the cells ran on unlike nodes ({'; '.join(hosts)}): the "
                   "ratio mixes machines")
    return Verdict(c, verdict, reason, value, iv.low, iv.high, n, n_detail, judged_on,
                   needed_n=need, confidence=confidence,
                   history=((n, verdict, iv.low, iv.high, confidence),), interval=iv)


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
    if v.verdict in (UNTESTABLE, NOT_JUDGED):
        return v
    got = ceiling(c, records, c.cells_testbed)
    if got is None:
        return v
    top, n = got
    reason = v.reason
    if c.direction == "higher" and c.paper_value > top:
        reason += (f"; the bound (no persistence, n={n}) is {number(top)}x the "
                   f"{SYSTEM_LABEL[c.measure.reference.system]} here: the paper's "
                   f"{number(c.paper_value)} cannot be reached on this testbed by any system")
    return dataclasses.replace(v, reason=reason, ceiling=top)


def judge_all(claims: list[Claim], records: pd.DataFrame, looks: list[dict] | None = None,
              repetitions: int | None = None, missing=None) -> list[Verdict]:
    """Every claim's verdict. With ``looks`` (matrix.looks: the repetitions each further
    look added, per cell set, over ``repetitions`` everywhere at look 0) the claims are
    judged look by look on the cells each look had, look j at the confidence
    1 - stats.alpha_of_look(j); a claim decided at a look keeps that verdict (the looks
    together err at most as often as one look at 95 %), and its history lists every look
    that judged it. ``missing``: the run's cells that did not finish (dicts with
    :data:`MISSING_COLUMNS`, :func:`missing_frame`)."""
    missing = missing_frame(missing)
    if not looks:
        return [_with_ceiling(judge(c, records, missing=missing), records) for c in claims]
    if repetitions is None:
        raise ValueError("judging over looks needs matrix.repetitions (look 0's)")
    sets = set_ids(records)
    reps = pd.to_numeric(records["rep"])
    n_of: dict[str, int] = {}
    final: dict[str, Verdict] = {}
    history: dict[str, tuple] = {c.id: () for c in claims}
    for j in range(len(looks) + 1):
        if j:
            n_of.update(looks[j - 1])
        cut = records[reps <= sets.map(lambda s: n_of.get(s, repetitions))]
        # A missing cell counts at the looks that had it.
        gone = missing[pd.to_numeric(missing["rep"]) <= set_ids(missing).map(
            lambda s: n_of.get(s, repetitions))] if len(missing) else missing
        last = j == len(looks)
        for c in claims:
            if c.id in final:
                continue
            v = judge(c, cut, 1 - stats.alpha_of_look(j), 1 - stats.alpha_of_look(j + 1),
                      gone)
            if v.verdict != UNTESTABLE:
                history[c.id] += v.history
            # A claim whose cells are missing at this look may have them at the next.
            if v.verdict not in (UNDECIDED, NOT_JUDGED) or last:
                final[c.id] = v
    return [_with_ceiling(dataclasses.replace(final[c.id], history=history[c.id]), records)
            for c in claims]


def set_ids(records: pd.DataFrame) -> pd.Series:
    """Each record's cell set (matrix.looks' keys)."""
    return (records["testbed"].astype(str) + "-" + records["system"].astype(str) + "-"
            + records["workload"].astype(str) + "-" + records["policy"].astype(str))


def ratio_interval(a: np.ndarray, b: np.ndarray) -> tuple[float | None, float | None]:
    """The 95 % interval of mean(a) / mean(b) (the claims' t interval on the log ratio, the
    samples independent); None with fewer than 2 values on a side or a mean that is not
    positive."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if len(a) < 2 or len(b) < 2 or a.mean() <= 0 or b.mean() <= 0:
        return None, None
    iv = stats.interval(lambda m: m["a"] / m["b"],
                        [stats.Group(("a",), a[:, None]), stats.Group(("b",), b[:, None])],
                        log_scale=True)
    return iv.low, iv.high
