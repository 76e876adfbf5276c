"""The paper's own numbers (results/reference/paper_tables.yaml), printed under each table
for comparison.
"""

from __future__ import annotations

import yaml

from .. import paths
from ..labels import POLICY_LABEL, SYSTEM_LABEL
from .summary import REFERENCE_SYSTEM


# The paper's WAF comes from FEMU, whose FTL collects garbage: it compares with the modelled.
PAPER_ALIAS = {"waf_modelled": "waf"}
# What the paper ran for each of its tables, for the heading of its numbers.
PAPER_SETUP = {
    "table3_redis_benchmark": "FEMU FDP SSD, 28 M SETs x 5",
    "table4_ycsb_a": "FEMU FDP SSD, 9 M records, 115 M operations, one run",
    "table5_recovery": "FEMU FDP SSD, 28 M SETs x 5",
}


def paper_markdown(name: str, columns) -> str:
    """The paper's own rows of table ``name`` in the same columns, for comparison."""
    rows = paper_rows(name)
    if not rows:
        return ""
    headers = ["Policy", "System"] + [h for _, h, _ in columns]
    lines = ["", f"## The paper's numbers ({PAPER_SETUP[name]}; for comparison only)", "",
             "| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    for row in rows:
        cells = [POLICY_LABEL.get(row.get("policy"), "-"), SYSTEM_LABEL[row["system"]]]
        values = [row.get(PAPER_ALIAS.get(m, m)) for m, _, _ in columns]
        cells += ["n/a" if v is None else f"{v:,.{d}f}" for v, (_, _, d) in zip(values, columns)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def paper_ratios(name: str) -> dict:
    """The paper's own ratios in table ``name``: (policy, system, metric) -> system/baseline.

    Table 5 of the paper has no policy: its key has policy None.
    """
    rows = paper_rows(name)
    by = {(r.get("policy"), r["system"]): r for r in rows}
    out = {}
    for (policy, system), r in by.items():
        base = by.get((policy, REFERENCE_SYSTEM))
        if system == REFERENCE_SYSTEM or base is None:
            continue
        for metric, value in r.items():
            if isinstance(value, (int, float)) and base.get(metric):
                out[(policy, system, metric)] = value / base[metric]
        for ours, theirs in PAPER_ALIAS.items():
            if (policy, system, theirs) in out:
                out[(policy, system, ours)] = out[(policy, system, theirs)]
    return out


def paper_rows(name: str) -> list[dict]:
    with open(paths.REFERENCE_DIR / "paper_tables.yaml") as fh:
        return yaml.safe_load(fh).get(name, [])
