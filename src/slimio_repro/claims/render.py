"""Verdicts written out: results/claims/verdicts.{csv,json,md} and the one-screen summary
printed at the end of `make reproduce`."""

from __future__ import annotations

import json
import math
import textwrap
from collections import Counter
from pathlib import Path

import pandas as pd

from .. import paths as pathsmod
from . import stats
from .judge import (CONFIDENCE, DIRECTION_ONLY, FAILS, HOLDS, NOT_JUDGED, UNDECIDED,
                    UNTESTABLE, VERDICTS, Verdict, bracket, node_classes, number)

SHORT = {HOLDS: "holds", DIRECTION_ONLY: "direction only", FAILS: "does not hold",
         UNDECIDED: "undecided", UNTESTABLE: "not testable", NOT_JUDGED: "not judged"}
# The missing cells the one-screen summary names (the report lists every one).
MISSING_SHOWN = 8


def run_info(records: pd.DataFrame, missing: list[dict] = ()) -> dict:
    """What the run was, in brief (from its tidy records, and the cells of the run that did
    not finish: ``missing``, dicts with cell_id and log)."""
    def values(col):
        return sorted({str(v) for v in records[col].dropna()}) if col in records else []
    return {"cells": int(len(records)), "missing_cells": [
                {"cell_id": m["cell_id"], "log": m.get("log")} for m in missing],
            "profiles": values("profile"),
            "testbeds": values("testbed"), "systems": values("system"),
            "workloads": values("workload"), "policies": values("policy"),
            "accels": values("accel"), "device_models": values("device_model"),
            "redis_versions": values("redis_version"), "git_commits": values("git_commit"),
            "hosts": values("host_cpu_model"), "node_classes": node_classes(records),
            "slurm_jobs": int(records["slurm_job_id"].notna().sum())
            if "slurm_job_id" in records else 0,
            "repetitions": int(records["rep"].max()) if len(records) else 0}


def frame(verdicts: list[Verdict]) -> pd.DataFrame:
    return pd.DataFrame([v.row() for v in verdicts])


def ci_text(row) -> str:
    """A verdict row's confidence interval, '[lo, hi]' or '-'."""
    if row["ci_low"] is None or pd.isna(row["ci_low"]):
        return "-"
    return bracket(row["ci_low"], row["ci_high"])


def band_text(row) -> str | None:
    """A verdict row's band, '[lo, hi]' (an open end, stored as none, as -inf or inf); None
    for a row from before bands."""
    if "band_low" not in row and "band_high" not in row:
        return None
    lo, hi = row.get("band_low"), row.get("band_high")
    return bracket(-math.inf if lo is None or pd.isna(lo) else lo,
                   math.inf if hi is None or pd.isna(hi) else hi)


def paper_text(row) -> str:
    """The paper's value of a verdict row, with the text's where it differs from the table."""
    out = number(row["paper_value"])
    if row["text_value"] is not None and not pd.isna(row["text_value"]):
        out += f" (text: {number(row['text_value'])})"
    return out


def _cell(text) -> str:
    return "" if text is None or (isinstance(text, float) and math.isnan(text)) \
        else str(text).replace("|", "\\|").replace("\n", " ")


def counts(verdicts: list[Verdict]) -> dict[str, int]:
    c = Counter(v.verdict for v in verdicts)
    return {k: c.get(k, 0) for k in VERDICTS}


def nodes_lines(info: dict) -> list[str]:
    """Where the cells ran, when it matters: a warning where they ran on unlike nodes (a
    ratio between their cells mixes machines), the SLURM jobs' count where they ran as jobs."""
    classes = info.get("node_classes", [])
    out = []
    if len(classes) > 1:
        out.append(f"**WARNING: the cells ran on {len(classes)} unlike kinds of node** "
                   f"({'; '.join(classes)}): a ratio between cells of different nodes "
                   "compares machines as well as systems. Constrain the cells to alike nodes "
                   "(docs/how-to/cluster.md) and rerun them.")
    if info.get("slurm_jobs"):
        out.append(f"{info['slurm_jobs']} of the {info['cells']} cells ran as SLURM jobs, on "
                   f"nodes of {len(classes)} kind{'s' if len(classes) != 1 else ''}: "
                   f"{'; '.join(classes)}.")
    return out + [""] if out else []


def missing_lines(info: dict) -> list[str]:
    """The cells of the run that did not finish, for verdicts.md: each with its log."""
    missing = info.get("missing_cells", [])
    if not missing:
        return []
    k = len(missing)
    return [f"**{k} cell{'s' if k != 1 else ''} of this run did not finish** and "
            f"{'are' if k != 1 else 'is'} left out of these verdicts: a claim that needed "
            f"one is *{NOT_JUDGED}*, or is judged on the cells there are and says how many "
            "of its cells are missing. The next run runs them again. "
            + ("Their logs" if k != 1 else "Its log") + ": "
            + ", ".join(f"`{m['log'] or m['cell_id']}`" for m in missing) + ".", ""]


def markdown(verdicts: list[Verdict], info: dict) -> str:
    df = frame(verdicts)
    n = counts(verdicts)
    lines = [
        "# Does the paper hold? A verdict per claim",
        "",
        f"Run: {info['cells']} cells, profile {', '.join(info['profiles'])}, testbeds "
        f"{', '.join(info['testbeds'])} (accelerator {', '.join(info['accels']) or '-'}, "
        f"device {', '.join(info['device_models']) or '-'}), Redis "
        f"{', '.join(info['redis_versions'])}, up to {info['repetitions']} repetitions; "
        f"commit {', '.join(c[:12] for c in info['git_commits'])}.",
        "",
        *missing_lines(info),
        *nodes_lines(info),
        " · ".join(f"**{k}**: {v}" for k, v in n.items()) + f" (of {len(verdicts)} claims)",
        "",
        "| Claim | Where | Claim's words | Compared | Paper | Band | Measured | "
        f"{CONFIDENCE:.0%} CI | n | Verdict | Why |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for _, r in df.iterrows():
        paper = paper_text(r)
        why = _cell(r["reason"])
        if _cell(r.get("history")):
            why += f" **Looks:** {_cell(r['history'])}."
        if _cell(r["doubt"]):
            why += f" **Doubt:** {_cell(r['doubt'])}"
        lines.append(
            f"| {r['claim_id']} | {_cell(r['where'])} | {_cell(r['quote'])} | "
            f"{_cell(r['comparison'])} | {paper} | {band_text(r)} ({r['tolerance']}) | "
            f"{number(r['measured'])} | {ci_text(r)} | {r['n_per_term'] or '-'} | "
            f"**{r['verdict_label']}** | {why} |")
    lines += [
        "",
        f"Verdicts are decided by the {CONFIDENCE:.0%} confidence interval of each claim's "
        "value, never by the point: *holds* = the whole interval lies inside the claim's band "
        "(the values that agree with the paper; for 'negligible', 'comparable' and 'stable' "
        "claims a margin around no difference, which makes it two one-sided tests); *holds in "
        "direction only* = the whole interval is outside the band, on the claimed side of 1 "
        "(ratios) or 0 (differences); *does not hold* = the whole interval is outside the "
        "band, not all of it on the claimed side; *undecided at n=k* = the interval straddles "
        "an edge of the band, and the reason says how many repetitions per cell set the "
        "measured spread says would decide it (n=1 measures no spread and is always "
        "undecided); *not testable here* = the run lacks what the claim needs (the reason "
        f"names it); *{NOT_JUDGED}* = cells the claim's value needs did not finish in this "
        "run (the reason names them; a claim judged without some of its cells says how many "
        "are missing beside its verdict). The interval is a t interval on the effect (the "
        "log of a ratio, a difference itself), its standard error by the delta method with the spread pooled "
        "over the claim's cell sets (src/slimio_repro/claims/stats.py). Each claim's band, "
        "tolerance and the tolerance's reason are in verdicts.csv and "
        "results/reference/claims.yaml.",
    ]
    return "\n".join(lines) + "\n"


SCREEN_LINES = 50


def summary_missing_lines(missing: list[dict]) -> list[str]:
    """The cells of the run that did not finish, for the one-screen summary: their logs
    (whose names are the cells'), the first :data:`MISSING_SHOWN` of them."""
    if not missing:
        return []
    k = len(missing)
    lines = textwrap.wrap(
        f"{k} cell{'s' if k != 1 else ''} of this run did not finish, left out of the tables, "
        "figures and verdicts (the claims that needed one say so; the next run runs "
        f"{'them' if k != 1 else 'it'} again). {'Their logs' if k != 1 else 'Its log'}:",
        width=78, initial_indent="  ", subsequent_indent="  ")
    lines += [f"    {m.get('log') or m['cell_id'] + ' (no log)'}"
              for m in missing[:MISSING_SHOWN]]
    if k > MISSING_SHOWN:
        lines.append(f"    ... ({k} in all: the report lists them with their logs' ends)")
    return lines


def missing_text(missing: list[dict]) -> str:
    """The cells of the run that did not finish (dicts with cell_id and log), as the end of
    a run prints them where the claims were not judged again."""
    if not missing:
        return ""
    return "\n".join(["=" * 78, *summary_missing_lines(missing), "=" * 78]) + "\n"


def summary(verdicts: list[Verdict], info: dict, verdicts_md: str = "") -> str:
    """One screen: the counts, then the judged claims one line each, then why the others
    could not be judged (grouped)."""
    n = counts(verdicts)
    lines = [
        "=" * 78,
        f"Does the paper hold? {len(verdicts)} claims, {info['cells']} cells "
        f"({', '.join(info['profiles'])} profile; {', '.join(info['testbeds'])}; "
        f"{', '.join(info['accels'])})",
        " " + ", ".join(f"{SHORT[k]} {v}" for k, v in n.items()
                        if v or k != NOT_JUDGED),
        "-" * 78,
    ]
    if len(info.get("node_classes", [])) > 1:
        lines += textwrap.wrap(
            f"WARNING: the cells ran on {len(info['node_classes'])} unlike kinds of node; "
            "ratios between their cells compare machines too (verdicts.md lists them)",
            width=78, initial_indent="  ", subsequent_indent="    ")
    lines += summary_missing_lines(info.get("missing_cells", []))
    # The judged claims, grouped by verdict, wrapped: id ('*' = the artifact itself casts
    # doubt on the claim), and for an undecided one the repetitions that would decide it.
    # Where the screen runs out, the last group listed (the undecided claims) is cut short
    # and counted (verdicts.md lists them all).
    tail = ["  (undecided: n -> n that would decide it; * = the artifact doubts the claim)"]
    if any(v.missing_cells and v.verdict != NOT_JUDGED for v in verdicts):
        tail.append("  (! = judged without some of its cells, which did not finish)")
    reasons = Counter(_reason_group(v.reason) for v in verdicts if v.verdict == UNTESTABLE)
    if reasons:
        tail.append("  not testable here:")
        tail += [f"    {k:>3} x {why}" for why, k in reasons.most_common(4)]
    if verdicts_md:
        tail.append(f"  details: {verdicts_md}")
    tail.append("=" * 78)
    for verdict in (HOLDS, DIRECTION_ONLY, FAILS, NOT_JUDGED, UNDECIDED):
        items = [f"{v.claim.id}{'*' if v.claim.doubt else ''}"
                 + ("!" if v.missing_cells and verdict != NOT_JUDGED else "") + (
                 f"\u00a0{v.n}->{v.needed_n or str(stats.MAX_REPETITIONS) + '+'}"
                 if verdict == UNDECIDED else "")
                 for v in verdicts if v.verdict == verdict]
        if not items:
            continue
        head = f"  {SHORT[verdict]} ({len(items)}): "
        # a no-break space keeps each claim's id and numbers on one line
        block = [w.replace("\u00a0", " ") for w in textwrap.wrap(
            ", ".join(items), width=78, initial_indent=head, subsequent_indent="    ",
            break_on_hyphens=False)]
        room = SCREEN_LINES - len(lines) - len(tail)
        if len(block) > room:
            block = block[:max(room - 1, 0)] + [
                f"    ... ({len(items)} in all: {verdicts_md or 'verdicts.md'} lists them)"
                if room > 1 else f"{head}listed in {verdicts_md or 'verdicts.md'}"]
        lines += block
    return "\n".join(lines + tail) + "\n"


def _reason_group(reason: str) -> str:
    """The reason's first clause, short enough for one line."""
    head = reason.split(":")[0].split(";")[0]
    return head if len(head) <= 66 else head[:63] + "..."


def write(verdicts: list[Verdict], info: dict, out_dir: Path) -> dict[str, Path]:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {k: out_dir / Path(v).name for k, v in pathsmod.VERDICT_FILES.items()}
    frame(verdicts).to_csv(paths["csv"], index=False)
    rows = [v.row() for v in verdicts]
    for r in rows:
        for k, val in r.items():
            if isinstance(val, float) and math.isnan(val):
                r[k] = None
    paths["json"].write_text(json.dumps(
        {"run": info, "counts": counts(verdicts), "confidence_level": CONFIDENCE,
         "verdicts": rows}, indent=1) + "\n")
    paths["md"].write_text(markdown(verdicts, info))
    paths["summary"].write_text(summary(verdicts, info, str(paths["md"])))
    return paths
