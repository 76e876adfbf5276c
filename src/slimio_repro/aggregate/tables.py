"""Aggregate per-cell records into the paper's tables (CSV + Markdown) and pick the cells of
its figures.

Every number carries n (repetitions), mean and spread (sample standard deviation, min, max).
The notes under each table are derived from the records they summarize (testbeds, storage,
placement, device counters), so they cannot disagree with the numbers above them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import yaml

from .. import paths
from ..bound import BOUND_METRIC
from ..labels import POLICY_LABEL, SYSTEM_LABEL
from ..plan import NOPERSIST
from ..agent import phases as cellphases

GROUP = ["testbed", "system", "workload", "policy"]
# Also the order of the rows: the baseline first, then the systems compared with it.
# The no-persistence bound last: the ceiling the others are measured against.

# Table 3 of the paper: (column in our records, header in the paper, decimals).
TABLE3_COLUMNS = [
    ("rps_wal_only", "WAL Only RPS", 1),
    ("mem_wal_only_peak_gb", "WAL Only Mem Usage (GB)", 3),
    ("rps_wal_snapshot", "WAL&Snapshot RPS", 1),
    ("mem_wal_snapshot_peak_gb", "WAL&Snapshot Mem Usage (GB)", 3),
    ("rps_avg", "Average RPS", 1),
    ("snapshot_time_s", "Snapshot time (sec)", 3),
    ("set_p999_ms", "SET p999 (ms)", 3),
    ("waf", "SSD WAF (device)", 2),
    ("waf_modelled", "SSD WAF (modelled)", 3),
]
# The paper's WAF comes from FEMU, whose FTL collects garbage: it compares with the modelled.
PAPER_ALIAS = {"waf_modelled": "waf"}
# Table 4 of the paper (YCSB-A): Table 3's columns without WAF, with GET p999.
TABLE4_COLUMNS = TABLE3_COLUMNS[:7] + [("get_p999_ms", "GET p999 (ms)", 3)]
TABLE5_COLUMNS = [
    ("recovery_time_s", "Recovery Time (sec)", 3),
    ("recovery_mb_s", "Recovery I/O Throughput (MB/s)", 1),
]
EXTRA_COLUMNS = ["wal_snapshot_time_s", "on_demand_snapshot_time_s", "wal_snapshot_count",
                 "server_set_p999_ms", "device_write_bytes_total", "recovery_bytes",
                 "slimio_recovery_time_s", "slimio_recovery_mb_s", "fdp_host_bytes_written",
                 "fdp_media_bytes_written", "fdp_media_bytes_erased", "device_gc_rounds"]
TABLE4_EXTRA_COLUMNS = ["wal_snapshot_time_s", "wal_snapshot_count", "server_set_p999_ms",
                        "server_get_p999_ms", "set_p99_ms", "get_p99_ms", "load_rps",
                        "load_duration_s", "workload_duration_s", "device_write_bytes_total",
                        "fdp_host_bytes_written", "waf"]
# The device bound of a snapshot (DESIGN §5): the On-Demand-Snapshot's throughput against fio's
# sequential-write bandwidth through passthru on the same device in the same VM. The ratio is
# taken per cell (the snapshot and the fio run it is divided by share one VM), then averaged.
ROOFLINE_COLUMNS = [
    ("on_demand_snapshot_mb_s", "On-Demand-Snapshot (MB/s)", 1),
    ("roofline_seq_write_mb_s", "fio sequential write (MB/s)", 1),
    ("snapshot_roofline_ratio", "Snapshot / fio", 3),
    ("snapshot_bound_mb_s", "No-I/O bound (MB/s)", 1),
    ("snapshot_bound_ratio", "Snapshot time / bound", 3),
]
ROOFLINE_EXTRA_COLUMNS = ["on_demand_snapshot_bytes", "on_demand_snapshot_time_s",
                          "on_demand_snapshot_child_s", "snapshot_floor_s",
                          "roofline_block_size_bytes", "roofline_iodepth"]
# Side by side (DESIGN §5): each system over the baseline in the same run, per policy.
# (column, label, which way is better)
REFERENCE_SYSTEM = "baseline"
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

# The paper's Figures 4 and 5 (§5.4): runtime RPS of the redis-benchmark workload under
# Periodical-Log (first repetition), the baseline above the system it is compared with.
# name -> (title, systems from top to bottom)
RUNTIME_RPS_FIGURES = {
    "fig4_runtime_rps": ("Figure 4: Baseline vs SlimIO w/o FDP", ("baseline", "slimio-nofdp")),
    "fig5_runtime_rps": ("Figure 5: Baseline vs SlimIO", ("baseline", "slimio")),
}


def runtime_rps_figure_cells(cells, name: str) -> list:
    """The cells (objects with testbed/system/workload/policy/rep) that figure ``name`` draws.

    Per testbed (in the order given), the first Periodical-Log redis-benchmark repetition of
    each of the figure's systems, in the figure's order; a testbed without all of them adds
    nothing, so the list is empty unless the matrix has every system of the figure.
    """
    _, systems = RUNTIME_RPS_FIGURES[name]
    first = {(c.testbed, c.system): c for c in cells
             if c.workload == "redis-benchmark" and c.policy == "periodical" and c.rep == 1}
    testbeds = list(dict.fromkeys(t for t, _ in first))
    return [first[(t, s)] for t in testbeds if all((t, s) in first for s in systems)
            for s in systems]


def runtime_rps_figure_inputs(cells, name: str, record_pattern: str,
                              timeseries_pattern: str) -> dict[str, list[str]]:
    """Records and time series of figure ``name``'s cells, in panel order (an input function
    for its rule); an error naming what the matrix lacks if it has no such cells."""
    chosen = runtime_rps_figure_cells(cells, name)
    if not chosen:
        _, systems = RUNTIME_RPS_FIGURES[name]
        have = {c.system for c in cells if c.workload == "redis-benchmark"
                and c.policy == "periodical" and c.rep == 1}
        missing = [s for s in systems if s not in have]
        lacks = (f"the matrix has no such cell of {', '.join(missing)}: add it to "
                 "matrix.systems (and periodical to matrix.policies, redis-benchmark to "
                 "matrix.workloads)" if missing else
                 "no testbed of the matrix has all of them: run them on the same testbed")
        raise ValueError(f"{name} compares {' and '.join(systems)} in the first "
                         f"redis-benchmark repetition under the periodical policy, and {lacks}")
    return {"records": [record_pattern.format(**c.wildcards()) for c in chosen],
            "timeseries": [timeseries_pattern.format(**c.wildcards()) for c in chosen]}


def _system_order(system: str) -> int:
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


def _fmt(row: pd.Series, metric: str, decimals: int) -> str:
    mean, std, n = row[f"{metric}_mean"], row[f"{metric}_std"], row[f"{metric}_n"]
    if n == 0 or pd.isna(mean):
        return "n/a"
    text = f"{mean:,.{decimals}f}"
    if n > 1 and not pd.isna(std):
        text += f" ± {std:,.{decimals}f}"
    return text


def table_rows(summary: pd.DataFrame, columns) -> tuple[list[str], list[list[str]]]:
    """Header and formatted rows (policy order as in the paper), shared by MD and LaTeX."""
    headers = ["Policy", "System", "Testbed", "n"] + [h for _, h, _ in columns]
    order = list(POLICY_LABEL)
    summary = summary.assign(_order=summary.policy.map(order.index),
                             _system=summary.system.map(_system_order)).sort_values(
        ["_order", "_system", "testbed"])
    rows = [[POLICY_LABEL.get(r.policy, r.policy), SYSTEM_LABEL.get(r.system, r.system),
             r.testbed, str(r.n)] + [_fmt(r, m, d) for m, _, d in columns]
            for _, r in summary.iterrows()]
    return headers, rows


def markdown(summary: pd.DataFrame, columns, title: str, notes: list[str]) -> str:
    headers, rows = table_rows(summary, columns)
    lines = [f"# {title}", "", "| " + " | ".join(headers) + " |",
             "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    lines += ["", "Values are mean ± sample standard deviation over n repetitions; min and max "
              "are in the CSV next to this file."] + [""] + [f"- {n}" for n in notes]
    return "\n".join(lines) + "\n"


def latex(summary: pd.DataFrame, columns, title: str) -> str:
    """A booktabs tabular for the paper's LaTeX source."""
    headers, rows = table_rows(summary, columns)

    def esc(text: str) -> str:
        return (text.replace("\\", r"\textbackslash{}").replace("&", r"\&")
                .replace("%", r"\%").replace("_", r"\_").replace("±", r"$\pm$"))
    lines = [f"% {title} (generated by slimio-repro; mean $\\pm$ std over n repetitions)",
             r"\begin{tabular}{" + "ll" + "l" + "r" * (len(headers) - 3) + "}", r"\toprule",
             " & ".join(esc(h) for h in headers) + r" \\", r"\midrule"]
    lines += [" & ".join(esc(c) for c in r) + r" \\" for r in rows]
    lines += [r"\bottomrule", r"\end{tabular}"]
    return "\n".join(lines) + "\n"


# What the paper ran for each of its tables, for the heading of its numbers.
PAPER_SETUP = {
    "table3_redis_benchmark": "FEMU FDP SSD, 28 M SETs x 5",
    "table4_ycsb_a": "FEMU FDP SSD, 9 M records, 115 M operations, one run",
    "table5_recovery": "FEMU FDP SSD, 28 M SETs x 5",
}


def paper_markdown(name: str, columns) -> str:
    """The paper's own rows of table ``name`` in the same columns, for comparison."""
    rows = _paper_rows(name)
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


def write_table(cells: pd.DataFrame, workload: str, columns, name: str, title: str,
                notes: list[str], out_dir: Path, extra: list[str] = EXTRA_COLUMNS) -> pd.DataFrame:
    sel = cells[cells.workload == workload]
    metrics = [m for m, _, _ in columns] + [m for m in extra if m not in
                                            {c for c, _, _ in columns}]
    summary = summarize(sel, metrics)
    out_dir.mkdir(parents=True, exist_ok=True)
    summary.to_csv(out_dir / f"{name}.csv", index=False)
    (out_dir / f"{name}.md").write_text(markdown(summary, columns, title, notes)
                                        + paper_markdown(name, columns))
    (out_dir / f"{name}.tex").write_text(latex(summary, columns, title))
    return summary


def _quotient(a, b) -> float | None:
    """a / b of two means; None when either is missing or b is 0."""
    if a is None or b is None or pd.isna(a) or pd.isna(b) or b == 0:
        return None
    return float(a) / float(b)


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
                            "ratio_to_baseline": _quotient(mean, base_mean),
                            "bound_mean": bound_mean, "bound_n": bound_n,
                            "bound_to_baseline": _quotient(bound_mean, base_mean),
                            "system_fraction_of_bound": _quotient(mean, bound_mean),
                            "baseline_fraction_of_bound": _quotient(base_mean, bound_mean)})
    return pd.DataFrame(out, columns=RATIO_COLUMNS)


def _paper_ratios(name: str) -> dict:
    """The paper's own ratios in table ``name``: (policy, system, metric) -> system/baseline.

    Table 5 of the paper has no policy: its key has policy None.
    """
    rows = _paper_rows(name)
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


def ratio_markdown(table: pd.DataFrame, columns, title: str, paper_table: str,
                   notes: list[str]) -> str:
    labels = {m: label for m, label, _ in columns}
    paper = _paper_ratios(paper_table)
    lines = [f"# {title}", ""]
    if table.empty:
        return "\n".join(lines + ["No system to compare with the baseline in this run: the "
                                   "matrix needs `baseline` and another system."]) + "\n"
    lines += ["| Policy | System | Testbed | Metric | better | Baseline (n) | System (n) "
              "| System / Baseline | Paper's ratio | Bound (n) | Bound / Baseline "
              "| System / Bound |", "|" + "---|" * 12]
    order = list(POLICY_LABEL)
    table = table.assign(_p=table.policy.map(order.index), _s=table.system.map(_system_order),
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


def _numeric(cells: pd.DataFrame, column: str) -> pd.Series:
    """``column`` as numbers (NaN where null or absent: older records lack newer fields)."""
    if column not in cells:
        return pd.Series(float("nan"), index=cells.index)
    return pd.to_numeric(cells[column], errors="coerce")


def _distinct(cells: pd.DataFrame, column: str) -> list[str]:
    """The distinct non-null values of ``column`` as text, sorted (none if it is absent)."""
    if column not in cells:
        return []
    return sorted({str(v) for v in cells[column] if v is not None and not pd.isna(v)})


def _paper_rows(name: str) -> list[dict]:
    with open(paths.REFERENCE_DIR / "paper_tables.yaml") as fh:
        return yaml.safe_load(fh).get(name, [])


def _placement(g: pd.DataFrame) -> str:
    """What the NVMe command traces of these cells say about placement ('' if not traced)."""
    ids = {i for v in _distinct(g, "nvme_trace_placement_ids") for i in v.split(";")}
    if not ids:
        return ""
    placed = sorted(ids - {"none"}, key=lambda i: (len(i), i))
    if not placed:
        text = "no placement id on any write in the NVMe trace"
    else:
        text = f"placement ids in the NVMe trace: {', '.join(placed)}"
        if "none" in ids:
            text += " (and writes without one)"
    ok = g["nvme_trace_placement_ok"].dropna() if "nvme_trace_placement_ok" in g else []
    if len(ok):
        bad = g.loc[ok.index[~ok.astype(bool)], "cell_id"]
        text += ("; every write carried the placement id expected for its region"
                 f" ({len(ok)} of {len(ok)} cells)" if bad.empty else
                 f"; NOT every write carried the placement id expected for its region in "
                 f"{len(bad)} of {len(ok)} cells: {', '.join(bad)}")
    return text


def storage_notes(cells: pd.DataFrame) -> list[str]:
    """One line per (testbed, system): where its WAL and snapshots went, from its records."""
    notes = []
    groups = sorted(cells.groupby(["testbed", "system"]),
                    key=lambda kv: (kv[0][0], _system_order(kv[0][1])))
    for (testbed, system), g in groups:
        fs = ", ".join(_distinct(g, "filesystem")) or "an unrecorded file system"
        if system == REFERENCE_SYSTEM:
            what = f"stock Redis, AOF and RDB files on {fs}"
        elif system == NOPERSIST:
            what = (f"stock Redis with AOF and snapshots off (it writes nothing), its data "
                    f"directory on {fs}; one set of cells serves every policy")
        else:
            parts = []
            for backend in _distinct(g, "slimio_backend"):
                sub = g[g.slimio_backend.astype(str) == backend]
                device = ", ".join(_distinct(sub, "slimio_device")) or "an unrecorded device"
                if backend == "nvme":
                    parts.append(f"NVMe passthru (io_uring commands) on {device}")
                elif backend == "file":
                    on = f", a file on {fs}" if fs != "raw" else ""
                    parts.append(f"file backend (io_uring, O_DIRECT) on {device}{on}")
                else:
                    parts.append(f"backend {backend!r} on {device}")
            what = ("WAL and snapshots through " + " and ".join(parts) if parts
                    else f"SlimIO's backend not recorded (file system: {fs})")
        placement = _placement(g)
        notes.append(f"{SYSTEM_LABEL.get(system, system)} ({testbed}, {len(g)} cells): {what}"
                     + (f"; {placement}" if placement else "") + ".")
    return notes


def waf_notes(cells: pd.DataFrame) -> list[str]:
    """Where the SSD WAF column comes from and what it can show on the device measured."""
    notes = []
    measured = cells[_numeric(cells, "waf").notna()]
    if len(measured):
        notes.append(
            "SSD WAF = media bytes written / host bytes written during the cell, from the "
            "device's FDP statistics log page (its endurance group); both counters and the "
            "media bytes erased are in the CSV (fdp_media_bytes_written, "
            "fdp_host_bytes_written, fdp_media_bytes_erased).")
        erased = _numeric(measured, "fdp_media_bytes_erased")
        if erased.notna().all() and (erased == 0).all():
            notes.append(
                "No cell erased any media (fdp_media_bytes_erased = 0 in every cell with a WAF): "
                "the device ran no garbage collection. QEMU's FDP emulation (the smoke and ci "
                "profiles' device) has none, so its WAF is 1.00 up to rounding by construction; "
                "the excess in the third decimal is QEMU's accounting: when a write fills the "
                "rest of a reclaim unit, QEMU counts that part a second time as media bytes "
                "written (hw/nvme/ctrl.c, nvme_do_write_fdp -> nvme_update_ruh).")
        elif (erased > 0).any():
            notes.append(
                f"The device erased media (fdp_media_bytes_erased > 0) in {(erased > 0).sum()} "
                f"of {len(measured)} cells with a WAF: garbage collection ran there.")
        else:
            notes.append("Media bytes erased is missing from some cells with a WAF: whether "
                         "the device ran garbage collection is not recorded for them.")
        paper = {r["policy"]: r["waf"] for r in _paper_rows("table3_redis_benchmark")
                 if r["system"] == REFERENCE_SYSTEM and r.get("waf") is not None}
        if paper:
            quoted = " and ".join(f"{w:.2f} ({POLICY_LABEL.get(p, p)})" for p, w in paper.items())
            notes.append(f"The paper's baseline WAF of {quoted} comes from FEMU, which models "
                         "garbage collection; a device without it cannot show that difference.")
    if "bare" in set(cells.testbed):
        notes.append("SSD WAF is n/a on the bare testbed: it needs the FDP statistics log of "
                     "the VM's emulated device.")
    return notes


def _bytes_text(value: str) -> str:
    n = int(float(value))
    for unit, size in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size and n % size == 0:
            return f"{n // size} {unit}"
    return f"{n} B"


def roofline_notes(cells: pd.DataFrame) -> list[str]:
    block = [_bytes_text(v) for v in _distinct(cells, "roofline_block_size_bytes")]
    depth = [str(int(float(v))) for v in _distinct(cells, "roofline_iodepth")]
    notes = [
        "On-Demand-Snapshot: the size of the cell's last On-Demand-Snapshot (BGSAVE) over its "
        "time from the server log (on_demand_snapshot_bytes, on_demand_snapshot_time_s in the "
        "CSV; MB = 10^6 bytes). That time includes the fork and the RDB serialization, not "
        "only the device writes.",
    ]
    if _numeric(cells, "roofline_seq_write_mb_s").notna().any():
        notes.append(
            "fio: one sequential-write job through NVMe passthru (ioengine=io_uring_cmd on the "
            "namespace's char device) on the same device, in the same VM as the cell; block "
            f"size {', '.join(block) or 'not recorded'}, iodepth "
            f"{', '.join(depth) or 'not recorded'} (roofline_block_size_bytes, "
            "roofline_iodepth in the CSV); MB = 10^6 bytes: what the device takes from the "
            "guest when nothing but sequential writes is asked of it.")
    else:
        notes.append("No cell has a fio roofline (roofline_seq_write_mb_s): it is measured in "
                     "the VM of a vm-testbed cell.")
    notes.append(
        "Snapshot / fio: per cell, the snapshot's MB/s over the fio MB/s measured in the same "
        "VM (the fraction of the device bound reached), then mean ± sd over the cells. n/a "
        "where a cell lacks either number (the bare testbed has no passthru device for fio).")
    notes.append(
        "No-I/O bound: each slimio cell takes a second BGSAVE after its On-Demand-Snapshot "
        "with slimio-snapshot-sink discard: the same fork, iteration, encoding, compression "
        "and RDB checksum, into a sink that keeps nothing. Its MB/s (snapshot_bound_bytes / "
        "snapshot_bound_s) is averaged per testbed, workload and policy; every system's "
        "cells of that group snapshot the same workload's dataset. Snapshot time / bound: "
        "the cell's snapshot time, from the fork to the child's last log line "
        "(on_demand_snapshot_child_s; the parent notices the end up to 100 ms later), over "
        "the longer of its bytes at the no-I/O rate and at its fio rate (snapshot_floor_s): "
        "1.0 is the fastest the dataset and the device allow.")
    return notes


def snapshot_bounds(sel: pd.DataFrame) -> pd.DataFrame:
    """Each cell's snapshot against its bound (DESIGN §5: the lower of two rates).

    The no-I/O rate is SlimIO's BGSAVE into nothing (snapshot_bound_bytes over
    snapshot_bound_s, in the slimio cells), averaged per (testbed, workload, policy): every
    system's cells of that group snapshot the same workload's dataset. A cell's bound time is
    the longer of its snapshot's bytes at that rate and at its own fio write rate; its
    snapshot time (fork to the child's end, on_demand_snapshot_child_s) over it is
    snapshot_bound_ratio: 1.0 is as fast as physically possible.
    """
    sel = sel.copy()
    MB = 1e6
    rate = _numeric(sel, "snapshot_bound_bytes") / MB / _numeric(sel, "snapshot_bound_s")
    sel["_rate"] = rate.where(rate > 0)
    per_group = sel.groupby(["testbed", "workload", "policy"])["_rate"].transform("mean")
    sel["snapshot_bound_mb_s"] = per_group
    nbytes = _numeric(sel, "on_demand_snapshot_bytes") / MB
    fio = _numeric(sel, "roofline_seq_write_mb_s")
    floor = nbytes / per_group
    device = nbytes / fio.where(fio > 0)
    # Without the no-I/O rate there is no bound; without fio (bare) the no-I/O one alone.
    sel["snapshot_floor_s"] = floor.where(~(device > floor), device)
    sel["snapshot_bound_ratio"] = _numeric(sel, "on_demand_snapshot_child_s") / \
        sel["snapshot_floor_s"]
    return sel.drop(columns="_rate")


def write_roofline(cells: pd.DataFrame, out_dir: Path) -> pd.DataFrame:
    """results/tables/roofline.{csv,md}: the On-Demand-Snapshot against fio and against its
    no-I/O bound, per group."""
    sel = snapshot_bounds(cells[cells.workload == "redis-benchmark"])
    fio = _numeric(sel, "roofline_seq_write_mb_s")
    sel["snapshot_roofline_ratio"] = _numeric(sel, "on_demand_snapshot_mb_s") / fio.where(fio > 0)
    summary = summarize(sel, [m for m, _, _ in ROOFLINE_COLUMNS] + ROOFLINE_EXTRA_COLUMNS)
    summary.to_csv(out_dir / "roofline.csv", index=False)
    (out_dir / "roofline.md").write_text(markdown(
        summary, ROOFLINE_COLUMNS,
        "Snapshot roofline: On-Demand-Snapshot throughput against fio on the same device",
        roofline_notes(sel)))
    return summary


TIMING_GROUP = ["testbed", "system", "workload"]


def write_timing(cells: pd.DataFrame, out_dir: Path) -> pd.DataFrame:
    """results/tables/timing.{csv,md}: where the cells' time went, per system and workload.

    One row per (testbed, system, workload) over its policies and repetitions: n, and each
    phase's mean, std, min and max in seconds (the phases the cells recorded, in the order
    they run), then the cell's total. Cells made before phases were recorded count in n_total
    only where they have a total.
    """
    phase_cols = [f"phase_{k}_s" for k in cellphases.ORDER]
    present = [c for c in phase_cols if c in cells and _numeric(cells, c).notna().any()]
    summary = summarize(cells, present + ["cell_total_s"], TIMING_GROUP)
    if len(summary):
        summary = summary.assign(_s=summary.system.map(_system_order)).sort_values(
            ["testbed", "workload", "_s"]).drop(columns="_s")
    out_dir.mkdir(parents=True, exist_ok=True)
    summary.to_csv(out_dir / "timing.csv", index=False)
    headers = ["Testbed", "System", "Workload", "n"] + \
        [m[len("phase_"):-len("_s")] for m in present] + ["total (min-max)"]
    lines = ["# Where the time goes: seconds per cell, by phase", "",
             "| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    for _, r in summary.iterrows():
        cells_ = [r.testbed, SYSTEM_LABEL.get(r.system, r.system), r.workload, str(r.n)]
        cells_ += ["n/a" if pd.isna(r[f"{m}_mean"]) else f"{r[f'{m}_mean']:.1f}"
                   for m in present]
        t = "cell_total_s"
        cells_.append("n/a" if pd.isna(r[f"{t}_mean"]) else
                      f"{r[f'{t}_mean']:.1f} ({r[f'{t}_min']:.1f}-{r[f'{t}_max']:.1f})")
        lines.append("| " + " | ".join(cells_) + " |")
    total = _numeric(cells, "cell_total_s").dropna()
    lines += ["", "Mean seconds per cell over its policies and repetitions (std, min and max "
              "per phase are in timing.csv). Phases: boot (vagrant up of the cell's VM), "
              "provision (the guest checked, the namespace prepared for the system), "
              "device_prepare (the cell's storage; SlimIO's format), server_start, "
              "load (YCSB's load phase), workload, snapshots (the wait for WAL-Snapshots "
              "still running and the On-Demand-Snapshot), shutdown (INFO, dataset "
              "fingerprint, shutdown), recovery, trace_fdp (NVMe command trace and FDP "
              "statistics), roofline (fio on the namespace), guest_overhead (the rest of "
              "the guest run: the code and plan copied in, its Python's start), copy_back, "
              "teardown (VM destroyed, storage removed).",
              f"All {len(total)} cells with a total: {total.sum() / 60:.1f} min of cell time."
              if len(total) else "No cell recorded its time."]
    (out_dir / "timing.md").write_text("\n".join(lines) + "\n")
    return summary


def load_ftl(files: list[Path]) -> tuple[pd.DataFrame, list[dict]]:
    """The FTL stage's sequences (results/ftl/*.json): per cell its modelled WAF on the aged
    device (placement honoured and ignored), and the sequences themselves."""
    rows, sequences = [], []
    for f in files:
        seq = json.loads(Path(f).read_text())
        sequences.append(seq)
        ignored = {r["cell"]: r for r in seq["placement_ignored"]["cells"]}
        page = seq["geometry"]["page_bytes"]
        written = 0
        for r in seq["cells"]:
            written = r["host_bytes"] + (0 if seq.get("fresh_device_per_cell") else written)
            rows.append({"cell_id": r["cell"], "waf_modelled": r["waf"],
                         "waf_modelled_placement_ignored": ignored[r["cell"]]["waf"],
                         "ftl_host_bytes": r["host_bytes"],
                         "ftl_gc_bytes": r["gc_pages"] * page,
                         "ftl_erases": r["erases"],
                         "ftl_dealloc_bytes": r["dealloc_pages"] * page,
                         # How often the modelled device had been written over by the end of
                         # this cell (its sequence's host bytes so far / user capacity).
                         "ftl_drive_writes": written / seq["geometry"]["user_bytes"],
                         "ftl_model": seq["model"]})
    return pd.DataFrame(rows), sequences


SWEEP_COLUMNS = ["testbed", "system", "workload", "policy", "parameter", "value", "placement",
                 "waf", "drive_writes", "gc_pages", "error"]


def sweep_frame(sequences: list[dict]) -> pd.DataFrame:
    """The what-if sweeps of every sequence, one row per (sequence, parameter, value,
    placement): the sequence's WAF on that device."""
    rows = []
    for q in sequences:
        cell = q["cells"][0]["cell"]
        testbed, rest = cell.split("-", 1)
        system = next(s for s in sorted(SYSTEM_LABEL, key=len, reverse=True)
                      if rest.startswith(s + "-"))
        workload, policy = rest[len(system) + 1:].rsplit("-r", 1)[0].rsplit("-", 1)
        for p in q.get("sweep", []):
            rows.append({"testbed": testbed, "system": system, "workload": workload,
                         "policy": policy, "parameter": p["parameter"], "value": p["value"],
                         "placement": "honoured" if p["placement"] else "ignored",
                         "waf": p.get("waf"), "drive_writes": p.get("drive_writes"),
                         "gc_pages": p.get("gc_pages"), "error": p.get("error")})
    return pd.DataFrame(rows, columns=SWEEP_COLUMNS)


def write_sweep(sequences: list[dict], out_dir: Path) -> pd.DataFrame:
    """results/tables/waf_sensitivity.{csv,md}: each sequence's WAF on other devices."""
    frame = sweep_frame(sequences)
    frame.to_csv(out_dir / "waf_sensitivity.csv", index=False)
    lines = ["# Device WAF sensitivity (FTL model, what-if)", "",
             "Each system's repetitions replayed on one device (FEMU's cells: each on a "
             "fresh one) whose reclaim unit size, over-provisioning or number of handles "
             "differs from the cells' own device, or that is not told of deallocations, one "
             "parameter at a time; placement honoured (the trace's placement ids) or ignored "
             "(every write on one handle). Figure: results/figures/waf_sensitivity.{png,pdf}.",
             ""]
    if frame.empty:
        lines.append("No sweep: the run has no vm cell, or its profile sets ftl.sweep: false "
                     "(smoke: its cells write too little for any device to collect garbage).")
    for (param), g in frame.groupby("parameter", sort=False):
        values = list(dict.fromkeys(g["value"]))
        unit = {"ru_bytes": " (MiB)", "op": "", "handles": "",
                "deallocations": " (told to the device)"}[param]
        shown = [f"{v / 2**20:g}" if param == "ru_bytes" else
                 f"{v:.3f}" if param == "op" else
                 ("yes" if v else "no") if param == "deallocations" else f"{int(v)}"
                 for v in values]
        lines += [f"## {param}{unit}", "",
                  "| System | Workload | Policy | Placement | " + " | ".join(shown) + " |",
                  "|" + "---|" * (4 + len(values))]
        for key, r in g.groupby(["system", "workload", "policy", "placement"], sort=False):
            by = {v: w for v, w in zip(r["value"], r["waf"])}
            cells = ["n/a" if by.get(v) is None or pd.isna(by.get(v)) else f"{by[v]:.3f}"
                     for v in values]
            lines.append(f"| {SYSTEM_LABEL.get(key[0], key[0])} | {key[1]} | "
                         f"{POLICY_LABEL.get(key[2], key[2])} | {key[3]} | "
                         + " | ".join(cells) + " |")
        lines.append("")
    (out_dir / "waf_sensitivity.md").write_text("\n".join(lines))
    return frame


FTL_COLUMNS = [
    ("waf", "Device WAF per cell (its FDP statistics)", 3),
    ("waf_modelled", "WAF per cell, placement honoured", 3),
    ("waf_modelled_placement_ignored", "WAF per cell, placement ignored", 3),
    ("ftl_gc_gib", "GC copies per cell (GiB)", 3),
    ("ftl_dealloc_gib", "Deallocated per cell (GiB)", 3),
    ("db_waf", "Host / application bytes", 3),
    ("total_waf", "Flash / application bytes", 3),
    ("host_kib_per_set", "Host KiB per SET", 2),
    ("flash_kib_per_set", "Flash KiB per SET", 2),
]


def _waf_text(waf: float | None) -> str:
    return "n/a" if waf is None else f"{waf:.3f}"


def ftl_notes(sequences: list[dict]) -> list[str]:
    if not sequences:
        return ["No vm cell in this run: the FTL model replays the NVMe traces of vm cells."]
    g, seq = sequences[0]["geometry"], sequences[0]
    device = (f"{g['user_bytes'] / 2**30:.2f} GiB user, {g['physical_units']} reclaim units of "
              f"{g['ru_bytes'] >> 20} MiB, {g['handles']} handles, over-provisioning "
              f"{g['op']:.3f}")
    femu = seq.get("emulator") == "femu"
    notes = [
        (f"Modelled: the FTL model {seq['model']} ({seq['model_source']}) replays each cell's "
         f"trace on a fresh device, as FEMU ran it (its device lives in the emulator's RAM), "
         f"at the cells' own device: {device}." if seq.get("fresh_device_per_cell") else
         f"Modelled: the FTL model {seq['model']} ({seq['model_source']}) replays each "
         "system's repetitions in order on one device that is never reformatted (as the "
         "paper's five repetitions ran on one FEMU device), at the cells' own device: "
         f"{device}. Repetition k's WAF is measured on the device aged by repetitions "
         "1..k-1.") + " Placement ignored = the same traces with every write on one handle.",
        "WAF = (host + GC-copied pages) / host pages. "
        + ("The device WAF is FEMU's own count (its FDP statistics: media / host bytes "
           "written over the cell, femu/patches/0004)." if femu else
           "The device (QEMU) reports 1.00: it collects no garbage."),
        "Total write amplification (redis-benchmark cells): application bytes = SETs x (key "
        "+ value size); host bytes = everything the namespace received during the cell (the "
        "trace: the database, its file system or SlimIO's format, recovery); flash bytes = "
        "host + GC-copied bytes of the model. Per SET: host and flash bytes over the SETs.",
    ]
    for q in sequences:
        c0 = q["cells"][0]["cell"].rsplit("-r", 1)[0]
        s, i = q["sequence"], q["placement_ignored"]["sequence"]
        checks = q.get("device_checks", [])
        if q.get("emulator") == "femu":
            pairs = [(r["waf"], (r.get("device") or {}).get("waf")) for r in q["cells"]]
            diffs = [m / d - 1 for m, d in pairs if m is not None and d]
            notes.append(
                f"{c0}: model vs FEMU per cell: WAF " + ", ".join(
                    f"{_waf_text(m)} / {_waf_text(d)}" for m, d in pairs)
                + (f" (largest difference {max(diffs, key=abs):+.2%})" if diffs else "")
                + f"; the trace gives FEMU's host bytes written exactly in "
                f"{sum(1 for c in checks if c.get('host_bytes_ok'))} of {len(checks)} cells")
            continue
        ok = sum(1 for c in checks if c.get("host_bytes_ok") and c.get("ru_usage_ok"))
        exact = sum(1 for c in checks if c.get("media_bytes_exact"))
        notes.append(f"{c0}: sequence WAF {_waf_text(s['waf'])} (placement ignored "
                     f"{_waf_text(i['waf'])}) over {s['drive_writes']:.2f} drive writes; "
                     f"the trace gives the device's host bytes written and every handle's "
                     f"reclaim unit usage exactly in {ok} of {len(checks)} cells, its media "
                     f"bytes written (QEMU's order-dependent padding) in {exact}")
    return notes


def write_ftl(cells: pd.DataFrame, sequences: list[dict], out_dir: Path) -> pd.DataFrame:
    """results/tables/ftl_waf.{csv,md}: the modelled WAF per system, workload and policy."""
    sel = cells[cells["waf_modelled"].notna()].copy() if "waf_modelled" in cells else cells[:0]
    for col in ("ftl_gc_bytes", "ftl_dealloc_bytes"):
        if col in sel:
            sel[col.replace("_bytes", "_gib")] = pd.to_numeric(sel[col]) / 2**30
    if len(sel) and {"requests_completed", "key_size_bytes", "value_size_bytes"} <= set(sel):
        # Total write amplification ("How to write to SSDs"): the SETs' payload -> what the
        # namespace received (the database and its file system) -> what the flash programmed.
        sets = pd.to_numeric(sel["requests_completed"], errors="coerce")
        app = sets * (pd.to_numeric(sel["key_size_bytes"]) + pd.to_numeric(sel["value_size_bytes"]))
        host = pd.to_numeric(sel["ftl_host_bytes"])
        flash = host + pd.to_numeric(sel["ftl_gc_bytes"])
        sel["db_waf"], sel["total_waf"] = host / app, flash / app
        sel["host_kib_per_set"], sel["flash_kib_per_set"] = host / sets / 1024, flash / sets / 1024
    summary = summarize(sel, [m for m, _, _ in FTL_COLUMNS])
    summary.to_csv(out_dir / "ftl_waf.csv", index=False)
    (out_dir / "ftl_waf.md").write_text(
        markdown(summary, FTL_COLUMNS, "Device WAF with garbage collection (FTL model)",
                 ftl_notes(sequences))
        + paper_markdown("table3_redis_benchmark", [("waf_modelled", "SSD WAF", 2)]))
    return summary


def write_all(record_files: list[Path], out_dir: Path, ftl_files: list[Path] = ()) -> None:
    cells = load_records(record_files)
    ftl_cells, sequences = load_ftl(list(ftl_files))
    if len(ftl_cells):
        cells = cells.merge(ftl_cells, on="cell_id", how="left")
    out_dir.mkdir(parents=True, exist_ok=True)
    cells.to_csv(out_dir / "cells.csv", index=False)
    phases = ("Phases are taken from the INFO sampler's rdb_bgsave_in_progress / "
              "aof_rewrite_in_progress flags; Mem Usage is the peak RSS of the server plus its "
              "fork child in that phase (GB = 10^9 bytes).")
    snapshot_time = ("Snapshot time is the mean over all WAL-Snapshots and On-Demand-Snapshots "
                     "(from the server log, ms resolution).")
    run = (f"Testbed(s): {', '.join(_distinct(cells, 'testbed'))}; profile: "
           f"{', '.join(_distinct(cells, 'profile'))}; Redis "
           f"{', '.join(_distinct(cells, 'redis_version'))}.")
    bench_cells = cells[cells.workload == "redis-benchmark"]
    waf = waf_notes(bench_cells)
    t3 = write_table(cells, "redis-benchmark", TABLE3_COLUMNS, "table3_redis_benchmark",
                     "Table 3: Overall evaluation with the redis-benchmark workload",
                     [run] + storage_notes(bench_cells) + [phases, snapshot_time] + waf,
                     out_dir)
    paper_note = ("Paper's ratio: the same ratio from the paper's Table 3/5 (FEMU FDP SSD, "
                  "28 M SETs x 5), for comparison only; the paper has no SlimIO w/o FDP row.")
    write_ratios(t3, TABLE3_RATIO_COLUMNS, "table3_ratios",
                 "Table 3 ratios: each system over the baseline (redis-benchmark)",
                 "table3_redis_benchmark", [phases, snapshot_time] + waf + [paper_note], out_dir)
    t5_notes = [
        "Recovery time is Redis's own 'DB loaded from append only file' time after a remount "
        "(cold page cache), for every system; throughput is what was loaded over that time "
        "(MB = 10^6 bytes): the AOF's files (base + increments) for the baseline, the bytes "
        "SlimIO read from its device (snapshot slot + WAL, INFO slimio_recovery_bytes) for "
        "SlimIO and SlimIO w/o FDP.",
        "The CSV also has SlimIO's own measurement of its device reads "
        "(slimio_recovery_time_s, slimio_recovery_mb_s as INFO slimio reports them).",
    ]
    # Written even with recovery disabled (then every value is n/a): the rule promises it.
    # The no-persistence bound has nothing to recover.
    t5 = write_table(cells[cells.system != NOPERSIST], "redis-benchmark", TABLE5_COLUMNS,
                     "table5_recovery",
                     "Table 5: Recovery evaluation (redis-benchmark cells)",
                     t5_notes + [run] + storage_notes(bench_cells[bench_cells.system
                                                                  != NOPERSIST]), out_dir)
    write_ratios(t5, TABLE5_RATIO_COLUMNS, "table5_ratios",
                 "Table 5 ratios: each system over the baseline (recovery, redis-benchmark)",
                 "table5_recovery", [t5_notes[0], paper_note], out_dir)
    ycsb_cells = cells[cells.workload == "ycsb-a"]
    latency = ("SET p999 and GET p999 are YCSB's per-operation 99.9th percentiles of the run "
               "phase (UPDATE = SET, READ = GET through our binding) from its HdrHistogram "
               "(us resolution, shown in ms); Average RPS is YCSB's run-phase throughput; the "
               "CSV also has the server's own p99.9 (INFO latencystats) as a cross-check.")
    client = ("YCSB client: " + ", ".join(_distinct(ycsb_cells, "ycsb_client_host")) +
              " (guest = in the cell's VM beside the server, over loopback; host = on the "
              "machine of a bare cell); YCSB core "
              + ", ".join(_distinct(ycsb_cells, "ycsb_core_version")) + ", "
              + ", ".join(_distinct(ycsb_cells, "java_version")) + ".") \
        if len(ycsb_cells) else "No YCSB-A cell in this run: add ycsb-a to matrix.workloads."
    t4_notes = [run] + storage_notes(ycsb_cells) + [
        phases, "Each cell loads the records (YCSB's load phase), then runs the operations; "
        "the columns measure the run phase.", snapshot_time, latency, client]
    t4 = write_table(cells, "ycsb-a", TABLE4_COLUMNS, "table4_ycsb_a",
                     "Table 4: Overall evaluation with the YCSB-A workload", t4_notes, out_dir,
                     TABLE4_EXTRA_COLUMNS)
    write_ratios(t4, TABLE4_RATIO_COLUMNS, "table4_ratios",
                 "Table 4 ratios: each system over the baseline (YCSB-A)", "table4_ycsb_a",
                 [phases, snapshot_time, latency, client,
                  "Paper's ratio: the same ratio from the paper's Table 4 (FEMU FDP SSD, 9 M "
                  "records, 115 M operations, one run), for comparison only."], out_dir)
    write_roofline(cells, out_dir)
    write_timing(cells, out_dir)
    write_ftl(cells, sequences, out_dir)
    write_sweep(sequences, out_dir)
