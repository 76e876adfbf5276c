"""Aggregate per-cell records into the paper's tables (CSV + Markdown).

Every number carries n (repetitions), mean and spread (sample standard deviation, min, max).
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import yaml

from . import paths
from .cells import POLICY_LABEL

GROUP = ["testbed", "system", "workload", "policy"]
SYSTEM_LABEL = {"baseline": "Baseline", "slimio": "SlimIO", "slimio-nofdp": "SlimIO w/o FDP"}

# Table 3 of the paper: (column in our records, header in the paper, decimals).
TABLE3_COLUMNS = [
    ("rps_wal_only", "WAL Only RPS", 1),
    ("mem_wal_only_peak_gb", "WAL Only Mem Usage (GB)", 3),
    ("rps_wal_snapshot", "WAL&Snapshot RPS", 1),
    ("mem_wal_snapshot_peak_gb", "WAL&Snapshot Mem Usage (GB)", 3),
    ("rps_avg", "Average RPS", 1),
    ("snapshot_time_s", "Snapshot time (sec)", 3),
    ("set_p999_ms", "SET p999 (ms)", 3),
    ("waf", "SSD WAF", 2),
]
TABLE5_COLUMNS = [
    ("recovery_time_s", "Recovery Time (sec)", 3),
    ("recovery_mb_s", "Recovery I/O Throughput (MB/s)", 1),
]
EXTRA_COLUMNS = ["wal_snapshot_time_s", "on_demand_snapshot_time_s", "wal_snapshot_count",
                 "server_set_p999_ms", "device_write_bytes_total", "recovery_bytes"]


def load_records(files: list[Path]) -> pd.DataFrame:
    rows = []
    for f in files:
        rec = json.loads(Path(f).read_text())
        rows.append({k: v for k, v in rec.items() if not isinstance(v, (list, dict))})
    return pd.DataFrame(rows)


def summarize(cells: pd.DataFrame, metrics: list[str]) -> pd.DataFrame:
    """One row per (testbed, system, workload, policy) with n, mean, std, min, max."""
    out = []
    for key, g in cells.groupby(GROUP, sort=False):
        row = dict(zip(GROUP, key))
        row["n"] = len(g)
        for m in metrics:
            values = pd.to_numeric(g[m], errors="coerce").dropna() if m in g else pd.Series()
            row[f"{m}_n"] = len(values)
            row[f"{m}_mean"] = values.mean() if len(values) else None
            row[f"{m}_std"] = values.std(ddof=1) if len(values) > 1 else None
            row[f"{m}_min"] = values.min() if len(values) else None
            row[f"{m}_max"] = values.max() if len(values) else None
        out.append(row)
    return pd.DataFrame(out)


def _fmt(row: pd.Series, metric: str, decimals: int) -> str:
    mean, std, n = row[f"{metric}_mean"], row[f"{metric}_std"], row[f"{metric}_n"]
    if n == 0 or pd.isna(mean):
        return "n/a"
    text = f"{mean:,.{decimals}f}"
    if n > 1 and not pd.isna(std):
        text += f" ± {std:,.{decimals}f}"
    return text


def markdown(summary: pd.DataFrame, columns, title: str, notes: list[str]) -> str:
    headers = ["Policy", "System", "Testbed", "n"] + [h for _, h, _ in columns]
    lines = [f"# {title}", "", "| " + " | ".join(headers) + " |",
             "|" + "---|" * len(headers)]
    order = {p: i for i, p in enumerate(POLICY_LABEL)}
    summary = summary.sort_values(
        by=["policy", "system", "testbed"], key=lambda s: s.map(order) if s.name == "policy"
        else s)
    for _, row in summary.iterrows():
        cells = [POLICY_LABEL.get(row.policy, row.policy), SYSTEM_LABEL.get(row.system,
                 row.system), row.testbed, str(row.n)]
        cells += [_fmt(row, m, d) for m, _, d in columns]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "Values are mean ± sample standard deviation over n repetitions; min and max "
              "are in the CSV next to this file."] + [""] + [f"- {n}" for n in notes]
    return "\n".join(lines) + "\n"


def paper_markdown(name: str, columns) -> str:
    """The paper's own rows of table ``name`` in the same columns, for comparison."""
    with open(paths.REFERENCE_DIR / "paper_tables.yaml") as fh:
        rows = yaml.safe_load(fh).get(name, [])
    if not rows:
        return ""
    headers = ["Policy", "System"] + [h for _, h, _ in columns]
    lines = ["", "## The paper's numbers (FEMU FDP SSD, 28 M SETs x 5; for comparison only)", "",
             "| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    for row in rows:
        cells = [POLICY_LABEL.get(row.get("policy"), "-"), SYSTEM_LABEL[row["system"]]]
        cells += ["n/a" if row.get(m) is None else f"{row[m]:,.{d}f}" for m, _, d in columns]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def write_table(cells: pd.DataFrame, workload: str, columns, name: str, title: str,
                notes: list[str], out_dir: Path) -> pd.DataFrame:
    sel = cells[cells.workload == workload]
    metrics = [m for m, _, _ in columns] + [m for m in EXTRA_COLUMNS if m not in
                                            {c for c, _, _ in columns}]
    summary = summarize(sel, metrics)
    out_dir.mkdir(parents=True, exist_ok=True)
    summary.to_csv(out_dir / f"{name}.csv", index=False)
    (out_dir / f"{name}.md").write_text(markdown(summary, columns, title, notes)
                                        + paper_markdown(name, columns))
    return summary


def write_all(record_files: list[Path], out_dir: Path) -> None:
    cells = load_records(record_files)
    out_dir.mkdir(parents=True, exist_ok=True)
    cells.to_csv(out_dir / "cells.csv", index=False)
    testbeds = ", ".join(sorted(cells.testbed.unique()))
    fs = ", ".join(sorted(cells.filesystem.unique()))
    notes = [
        f"Testbed(s): {testbeds}; baseline file system: {fs}. Profile: "
        f"{', '.join(sorted(cells.profile.unique()))}; Redis {', '.join(sorted(cells.redis_version.unique()))}.",
        "Phases are taken from the INFO sampler's rdb_bgsave_in_progress / "
        "aof_rewrite_in_progress flags; Mem Usage is the peak RSS of the server plus its fork "
        "child in that phase (GB = 10^9 bytes).",
        "Snapshot time is the mean over all WAL-Snapshots and On-Demand-Snapshots "
        "(from the server log, ms resolution).",
        "SSD WAF is n/a on the bare testbed: it needs the FDP statistics log of the VM's "
        "emulated device.",
    ]
    write_table(cells, "redis-benchmark", TABLE3_COLUMNS, "table3_redis_benchmark",
                "Table 3: Overall evaluation with the redis-benchmark workload", notes, out_dir)
    if "recovery_time_s" in cells:
        write_table(cells, "redis-benchmark", TABLE5_COLUMNS, "table5_recovery",
                    "Table 5: Recovery evaluation (redis-benchmark cells)",
                    ["Recovery time is Redis's own 'DB loaded from append only file' time after "
                     "a remount (cold page cache); throughput is the AOF size (base + "
                     "increments) over that time (MB = 10^6 bytes)."], out_dir)
