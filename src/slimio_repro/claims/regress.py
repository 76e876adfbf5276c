"""The nightly regression: a run's ratios and claim values against a stored reference.

A run's fingerprint holds, for every ratio of the tables (each system over the baseline,
per testbed, workload, policy and metric) and every claim it could judge, the value, its
95 % confidence interval over the repetitions (the claims' t interval), and which way is worse. A reference is
made from one or more fingerprints of runs of the same profile on an unchanged tree; each
quantity's tolerance comes from the spread measured there, not from a guess:

    tolerance = max(sqrt(2) x the runs' typical 95 % CI half-width x b,  (two runs' difference)
                    the range of the value over the reference runs)

where b = z(1 - 0.025 / k) / z(0.975) widens the intervals for the k quantities compared
at once (Bonferroni: a family-wise false-alarm rate of 5 % per night, not 5 % per quantity).

A regression is a quantity that moved in its worse direction by more than its tolerance (for
an 'equal' claim: further from the paper's value), or a quantity of the reference that the
run no longer produces. Verdict changes are listed beside it; improvements are reported and
do not fail.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd

from .. import paths as pathsmod
from . import judge, stats

FORMAT = 1
VERDICT_RANK = {judge.HOLDS: 0, judge.DIRECTION_ONLY: 1, judge.UNDECIDED: 2, judge.FAILS: 3,
                judge.UNTESTABLE: 4, judge.NOT_JUDGED: 5}


class RegressError(ValueError):
    """A run or reference that cannot be compared; the message says which and why."""


def fingerprint(results: Path) -> dict:
    """The comparable quantities of the run in `results` (its verdicts, records, ratios)."""
    results = Path(results)
    verdicts_file = results / pathsmod.VERDICT_FILES["json"]
    records_file = results / pathsmod.CELLS_TABLE
    for f in (verdicts_file, records_file):
        if not f.exists():
            raise RegressError(f"{results} is not a finished run: {f} is missing (run "
                               "`snakemake reproduce` into it first)")
    verdicts = json.loads(verdicts_file.read_text())
    records = pd.read_csv(records_file)
    quantities = {}
    for table in sorted((results / "tables").glob("table*_ratios.csv")):
        for r in pd.read_csv(table).itertuples(index=False):
            if pd.isna(r.ratio_to_baseline):
                continue
            a = judge.cells_of(records, r.testbed, r.system, r.workload,
                               r.policy)[r.metric].dropna()
            b = judge.cells_of(records, r.testbed, "baseline", r.workload,
                               r.policy)[r.metric].dropna()
            lo, hi = judge.ratio_interval(a.to_numpy(), b.to_numpy())
            key = f"ratio {r.testbed}/{r.workload}/{r.policy}/{r.system}/{r.metric}"
            quantities[key] = {
                "label": f"{r.system} / baseline {r.metric} ({r.testbed}, {r.workload}, "
                         f"{r.policy})",
                "value": float(r.ratio_to_baseline), "ci_low": lo, "ci_high": hi,
                "n": int(min(r.system_n, r.baseline_n)),
                "worse": "lower" if r.better == "higher" else "higher"}
    for v in verdicts["verdicts"]:
        if v["measured"] is None:
            continue
        worse = {"higher": "lower", "lower": "higher", "equal": "away"}[v["direction"]]
        quantities[f"claim {v['claim_id']}"] = {
            "label": f"claim {v['claim_id']}: {v['comparison']}", "value": v["measured"],
            "ci_low": v["ci_low"], "ci_high": v["ci_high"], "n": v["n"], "worse": worse,
            "paper_value": v["paper_value"]}
    return {"format": FORMAT, "run": verdicts["run"],
            "verdicts": {v["claim_id"]: v["verdict"] for v in verdicts["verdicts"]},
            "quantities": quantities}


def _half_width(q: dict) -> float | None:
    if q["ci_low"] is None or q["ci_high"] is None:
        return None
    return (q["ci_high"] - q["ci_low"]) / 2


def make_reference(runs: list[Path]) -> dict:
    """A reference from fingerprints of one or more runs of one profile on an unchanged tree:
    each quantity's mean and the tolerance their measured spread gives it."""
    if not runs:
        raise RegressError("a reference needs at least one run")
    prints = [fingerprint(r) for r in runs]
    profiles = {tuple(p["run"]["profiles"]) for p in prints}
    if len(profiles) > 1:
        raise RegressError(f"the runs are of different profiles ({sorted(profiles)}): a "
                           "reference is made from runs of one profile")
    quantities = {}
    keys = [k for k in prints[0]["quantities"] if all(k in p["quantities"] for p in prints)]
    norm = stats.scipy_stats().norm
    bonferroni = (norm.ppf(1 - (1 - judge.CONFIDENCE) / 2 / max(len(keys), 1))
                  / norm.ppf(1 - (1 - judge.CONFIDENCE) / 2))
    for key in keys:                    # measured by every run: a stable reference
        qs = [p["quantities"][key] for p in prints]
        values = [q["value"] for q in qs]
        widths = [w for w in map(_half_width, qs) if w is not None]
        within = (math.sqrt(2) * math.sqrt(np.mean(np.square(widths))) * bonferroni
                  if widths else None)
        between = max(values) - min(values) if len(values) > 1 else None
        if within is None and between is None:
            tolerance, basis = None, "no spread measured (n=1, one run): not compared"
        else:
            tolerance = max(x for x in (within, between) if x is not None)
            basis = (f"max(sqrt(2) x CI half-width x {bonferroni:.2f} = {within:.4g}"
                     if within is not None
                     else "max(no CI") + (f", range over {len(values)} runs {between:.4g})"
                                          if between is not None else ", one run)")
        quantities[key] = {**{k: qs[0][k] for k in ("label", "worse")},
                           **({"paper_value": qs[0]["paper_value"]}
                              if "paper_value" in qs[0] else {}),
                           "value": float(np.mean(values)), "runs": values,
                           "tolerance": tolerance, "tolerance_basis": basis,
                           "n": min(q["n"] for q in qs)}
    return {"format": FORMAT, "runs": [p["run"] for p in prints],
            "verdicts": prints[0]["verdicts"], "quantities": quantities}


def compare(current: dict, reference: dict) -> dict:
    """What moved between the reference and the current run's fingerprint, and whether any
    move is a regression."""
    if reference.get("format") != FORMAT:
        raise RegressError(f"the reference has format {reference.get('format')!r}, this "
                           f"framework reads {FORMAT}: make a new one (slimio-repro "
                           "nightly-reference)")
    ref_profiles = {tuple(r["profiles"]) for r in reference["runs"]}
    if tuple(current["run"]["profiles"]) not in ref_profiles:
        raise RegressError(f"the run is of profile {current['run']['profiles']}, the "
                           f"reference of {sorted(ref_profiles)}: compare like with like")
    rows = []
    for key, ref in reference["quantities"].items():
        cur = current["quantities"].get(key)
        row = {"quantity": key, "label": ref["label"], "reference": ref["value"],
               "tolerance": ref["tolerance"], "tolerance_basis": ref["tolerance_basis"],
               "current": cur["value"] if cur else None, "worse": ref["worse"]}
        if cur is None:
            row.update(status="missing", moved=None)
        elif ref["tolerance"] is None:
            row.update(status="not compared", moved=cur["value"] - ref["value"])
        else:
            moved = cur["value"] - ref["value"]
            if ref["worse"] == "away":
                paper = ref["paper_value"]
                worse_by = abs(cur["value"] - paper) - abs(ref["value"] - paper)
            else:
                worse_by = -moved if ref["worse"] == "lower" else moved
            status = ("regression" if worse_by > ref["tolerance"]
                      else "improved" if -worse_by > ref["tolerance"] else "ok")
            row.update(status=status, moved=moved)
        if row["moved"] is not None and ref["value"]:
            row["moved_pct"] = 100 * row["moved"] / abs(ref["value"])
        rows.append(row)
    verdict_changes = [
        {"claim_id": cid, "reference": was, "current": current["verdicts"].get(cid, "missing"),
         "worse": VERDICT_RANK.get(current["verdicts"].get(cid), 9) > VERDICT_RANK[was]}
        for cid, was in reference["verdicts"].items()
        if current["verdicts"].get(cid) != was]
    regressions = [r for r in rows if r["status"] in ("regression", "missing")]
    ref_hosts = {h for r in reference["runs"] for h in r.get("hosts", [])}
    warnings = []
    if set(current["run"].get("hosts", [])) != ref_hosts:
        warnings.append(f"the reference ran on {sorted(ref_hosts) or 'unrecorded hosts'}, this "
                        f"run on {current['run'].get('hosts') or 'unrecorded hosts'}: its "
                        "tolerances were measured elsewhere; refresh the reference on this "
                        "machine (docs/how-to/nightly.md)")
    gone = current["run"].get("missing_cells", [])
    if gone:
        k = len(gone)
        warnings.append(f"{k} cell{'s' if k != 1 else ''} of this run did not finish and "
                        f"{'are' if k != 1 else 'is'} left out of its quantities "
                        f"({', '.join(m['cell_id'] for m in gone)}): a quantity made only "
                        "of them is missing, and others rest on fewer repetitions")
    return {"format": FORMAT, "run": current["run"], "reference_runs": reference["runs"],
            "regression": bool(regressions), "counts": {
                s: sum(r["status"] == s for r in rows)
                for s in ("ok", "improved", "regression", "missing", "not compared")},
            "quantities": rows, "verdict_changes": verdict_changes, "warnings": warnings}


def _f(v, pct=False) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    return f"{v:+.1f} %" if pct else f"{v:.4g}"


def markdown(result: dict) -> str:
    c = result["counts"]
    head = "REGRESSION" if result["regression"] else "no regression"
    lines = [f"# Nightly regression: {head}", "",
             f"{len(result['quantities'])} quantities against the reference "
             f"({len(result['reference_runs'])} run(s)): " + ", ".join(
                 f"{k} {v}" for k, v in c.items()) + ".", ""]
    lines += [f"**Warning:** {w}" for w in result.get("warnings", [])]
    if result.get("warnings"):
        lines.append("")
    moved = [r for r in result["quantities"] if r["status"] != "ok"]
    if moved:
        lines += ["| Status | Quantity | Reference | Current | Moved | Tolerance | Basis |",
                  "|---|---|---|---|---|---|---|"]
        order = {"regression": 0, "missing": 1, "improved": 2, "not compared": 3}
        for r in sorted(moved, key=lambda r: order[r["status"]]):
            lines.append(f"| **{r['status']}** | {r['label']} | {_f(r['reference'])} | "
                         f"{_f(r['current'])} | {_f(r.get('moved_pct'), pct=True)} | "
                         f"{_f(r['tolerance'])} | {r['tolerance_basis']} |")
        lines.append("")
    if result["verdict_changes"]:
        lines += ["Verdict changes:", ""]
        lines += [f"- {v['claim_id']}: {v['reference']} -> {v['current']}"
                  + (" (worse)" if v["worse"] else "") for v in result["verdict_changes"]]
        lines.append("")
    lines.append("A regression is a quantity that moved in its worse direction by more than "
                 "its tolerance, which the reference derived from the spread of its own runs "
                 "(sqrt(2) x the 95 % CI half-width over repetitions, widened for the "
                 "number of quantities compared (Bonferroni), or the range between reference "
                 "runs, whichever is larger); or one the run no longer produces.")
    return "\n".join(lines) + "\n"


def write(result: dict, out_prefix: Path) -> tuple[Path, Path]:
    out_prefix = Path(out_prefix)
    out_prefix.parent.mkdir(parents=True, exist_ok=True)
    md, js = out_prefix.with_suffix(".md"), out_prefix.with_suffix(".json")
    md.write_text(markdown(result))
    js.write_text(json.dumps(result, indent=1) + "\n")
    return md, js
