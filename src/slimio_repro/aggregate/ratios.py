"""Each system over the baseline (and the bound over the baseline), per testbed, workload and
policy, beside the paper's ratio: results/tables/table{3,4,5}_ratios.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ..bound import BOUND_METRIC
from ..labels import POLICY_LABEL, SYSTEM_LABEL
from ..plan import NOPERSIST
from .reference import paper_ratios
from .summary import REFERENCE_SYSTEM, quotient, system_order


# Side by side: each system over the baseline in the same run, per policy.
# (column, label, which way is better)
TABLE3_RATIO_COLUMNS = [
    ("rps_wal_only", "WAL Only RPS", "higher"),
    ("rps_wal_snapshot", "WAL&Snapshot RPS", "higher"),
    ("rps_avg", "Average RPS", "higher"),
    ("snapshot_time_s", "Snapshot time", "lower"),
    ("set_p999_ms", "SET p999", "lower"),
    ("mem_wal_only_peak_gb", "WAL Only Mem Usage", "lower"),
    ("mem_wal_snapshot_peak_gb", "WAL&Snapshot Mem Usage", "lower"),
    ("waf", "SSD WAF (device)", "lower"),
    ("waf_modelled", "SSD WAF (modelled)", "lower"),
]
TABLE4_RATIO_COLUMNS = TABLE3_RATIO_COLUMNS[:7] + [("get_p999_ms", "GET p999", "lower")]
TABLE5_RATIO_COLUMNS = [
    ("recovery_time_s", "Recovery Time", "lower"),
    ("recovery_mb_s", "Recovery I/O Throughput", "higher"),
]
RATIO_COLUMNS = ["testbed", "workload", "policy", "system", "metric", "better", "system_mean",
                 "system_n", "baseline_mean", "baseline_n", "ratio_to_baseline", "bound_mean",
                 "bound_n", "bound_to_baseline", "system_fraction_of_bound",
                 "baseline_fraction_of_bound"]


def ratios(summary: pd.DataFrame, columns) -> pd.DataFrame:
    """Ratio of means, each system over the baseline of the same testbed, workload and policy.

    One row per (testbed, workload, policy, system, metric) with both means and both n. For
    an RPS metric (:data:`slimio_repro.bound.BOUND_METRIC`), also the bound's mean and n (system nopersist, same
    testbed and workload), the bound over the baseline (the most any system can gain on
    it: a ratio above that is impossible on this testbed), and the system's and the
    baseline's fraction of the bound; None where the matrix has no nopersist cells.
    """
    out = []
    keys = ["testbed", "workload", "policy"]
    logged = summary[summary.system != NOPERSIST]
    bounds = summary[summary.system == NOPERSIST]
    for key, g in logged.groupby(keys, sort=False):
        ref = g[g.system == REFERENCE_SYSTEM]
        bound = bounds[(bounds.testbed == key[0]) & (bounds.workload == key[1])]
        for _, row in g[g.system != REFERENCE_SYSTEM].iterrows():
            for metric, _, better in columns:
                base_mean = ref[f"{metric}_mean"].iloc[0] if len(ref) else None
                mean = row[f"{metric}_mean"]
                bound_metric = BOUND_METRIC.get(metric)
                bound_mean = bound_n = None
                if bound_metric is not None and len(bound):
                    bound_mean = bound[f"{bound_metric}_mean"].iloc[0]
                    bound_n = int(bound[f"{bound_metric}_n"].iloc[0])
                out.append({**dict(zip(keys, key)), "system": row.system, "metric": metric,
                            "better": better, "system_mean": mean,
                            "system_n": row[f"{metric}_n"], "baseline_mean": base_mean,
                            "baseline_n": ref[f"{metric}_n"].iloc[0] if len(ref) else 0,
                            "ratio_to_baseline": quotient(mean, base_mean),
                            "bound_mean": bound_mean, "bound_n": bound_n,
                            "bound_to_baseline": quotient(bound_mean, base_mean),
                            "system_fraction_of_bound": quotient(mean, bound_mean),
                            "baseline_fraction_of_bound": quotient(base_mean, bound_mean)})
    return pd.DataFrame(out, columns=RATIO_COLUMNS)


def ratio_markdown(table: pd.DataFrame, columns, title: str, paper_table: str,
                   notes: list[str]) -> str:
    labels = {m: label for m, label, _ in columns}
    paper = paper_ratios(paper_table)
    lines = [f"# {title}", ""]
    if table.empty:
        return "\n".join(lines + ["No system to compare with the baseline in this run: the "
                                   "matrix needs `baseline` and another system."]) + "\n"
    lines += ["| Policy | System | Testbed | Metric | better | Baseline (n) | System (n) "
              "| System / Baseline | Paper's ratio | Bound (n) | Bound / Baseline "
              "| System / Bound |", "|" + "---|" * 12]
    order = list(POLICY_LABEL)
    table = table.assign(_p=table.policy.map(order.index), _s=table.system.map(system_order),
                         _m=table.metric.map(list(labels).index))
    for _, r in table.sort_values(["_p", "_s", "testbed", "_m"]).iterrows():
        def num(v, n):
            if v is None or pd.isna(v):
                return "n/a"
            n = int(n)      # a column with a missing n is float in pandas
            return f"{v:,.1f} ({n})" if abs(v) >= 100 else f"{v:.3f} ({n})"
        def rate(v):
            return "n/a" if v is None or pd.isna(v) else f"{v:.3f}"
        ref = paper.get((r.policy, r.system, r.metric), paper.get((None, r.system, r.metric)))
        has_bound = r.metric in BOUND_METRIC
        lines.append(
            f"| {POLICY_LABEL.get(r.policy, r.policy)} | {SYSTEM_LABEL.get(r.system, r.system)} "
            f"| {r.testbed} | {labels[r.metric]} ({r.metric}) | {r.better} "
            f"| {num(r.baseline_mean, r.baseline_n)} | {num(r.system_mean, r.system_n)} "
            f"| {rate(r.ratio_to_baseline)} | {'-' if ref is None else f'{ref:.3f}'} "
            f"| {num(r.bound_mean, r.bound_n) if has_bound else '-'} "
            f"| {rate(r.bound_to_baseline) if has_bound else '-'} "
            f"| {rate(r.system_fraction_of_bound) if has_bound else '-'} |")
    lines += ["", "Ratios of the means over n repetitions each, measured side by side in this "
              "run (same host, same storage); the means and n are in the CSV next to this file.",
              "- Bound: the same workload with persistence off (system nopersist: stock Redis, "
              "AOF and snapshots off, on the same testbed), its WAL-only RPS for the WAL-only "
              "and WAL&Snapshot columns and its average RPS for the average. Bound / Baseline "
              "is the most any system can gain over the baseline here: a paper's ratio above "
              "it cannot be reached on this testbed, however fast the system. n/a where the "
              "matrix has no nopersist cells."]
    lines += [f"- {n}" for n in notes]
    return "\n".join(lines) + "\n"


def write_ratios(summary: pd.DataFrame, columns, name: str, title: str, paper_table: str,
                 notes: list[str], out_dir: Path) -> pd.DataFrame:
    table = ratios(summary, columns)
    table.to_csv(out_dir / f"{name}.csv", index=False)
    (out_dir / f"{name}.md").write_text(ratio_markdown(table, columns, title, paper_table,
                                                       notes))
    return table
