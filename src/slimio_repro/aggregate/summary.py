"""The run's tidy records as one frame (one row per cell), and their summary per group:
n (repetitions), mean and spread (sample standard deviation, min, max) of each metric.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from ..labels import SYSTEM_LABEL


GROUP = ["testbed", "system", "workload", "policy"]
# The system every ratio is over (the paper's too).
REFERENCE_SYSTEM = "baseline"


def system_order(system: str) -> int:
    order = list(SYSTEM_LABEL)
    return order.index(system) if system in order else len(order)


def load_records(files: list[Path]) -> pd.DataFrame:
    rows = []
    for f in files:
        rec = json.loads(Path(f).read_text())
        rows.append({k: v for k, v in rec.items() if not isinstance(v, (list, dict))})
    return pd.DataFrame(rows)


def summarize(cells: pd.DataFrame, metrics: list[str], group: list[str] = GROUP
              ) -> pd.DataFrame:
    """One row per ``group`` (testbed, system, workload, policy) with n, mean, std, min, max."""
    out = []
    for key, g in cells.groupby(group, sort=False):
        row = dict(zip(group, key))
        row["n"] = len(g)
        for m in metrics:
            values = pd.to_numeric(g[m], errors="coerce").dropna() if m in g else pd.Series()
            row[f"{m}_n"] = len(values)
            row[f"{m}_mean"] = values.mean() if len(values) else None
            row[f"{m}_std"] = values.std(ddof=1) if len(values) > 1 else None
            row[f"{m}_min"] = values.min() if len(values) else None
            row[f"{m}_max"] = values.max() if len(values) else None
        out.append(row)
    columns = group + ["n"] + [f"{m}_{k}" for m in metrics
                               for k in ("n", "mean", "std", "min", "max")]
    return pd.DataFrame(out, columns=columns)


def quotient(a, b) -> float | None:
    """a / b of two means; None when either is missing or b is 0."""
    if a is None or b is None or pd.isna(a) or pd.isna(b) or b == 0:
        return None
    return float(a) / float(b)


def numeric(cells: pd.DataFrame, column: str) -> pd.Series:
    """``column`` as numbers (NaN where null or absent: older records lack newer fields)."""
    if column not in cells:
        return pd.Series(float("nan"), index=cells.index)
    return pd.to_numeric(cells[column], errors="coerce")


def distinct(cells: pd.DataFrame, column: str) -> list[str]:
    """The distinct non-null values of ``column`` as text, sorted (none if it is absent)."""
    if column not in cells:
        return []
    return sorted({str(v) for v in cells[column] if v is not None and not pd.isna(v)})
