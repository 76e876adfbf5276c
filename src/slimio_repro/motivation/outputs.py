"""The paper's motivation: Table 1 (§2.2), Table 2 and Figure 2 (§3.1), beside the paper's.

* Table 1 from the baseline's redis-benchmark Periodical-Log cells on F2FS and on EXT4 (the
  matrix's records: the WAL-only and Snapshot&WAL phases' RPS and peak memory, server plus
  fork child), the drop in percent, n and spread;
* Table 2 and Figure 2 from the motivation cells' records (:mod:`slimio_repro.parse.motivation_records`):
  the file system's write path over the snapshot child's CPU; where each snapshot's time
  went (in-memory work, kernel I/O path, blocked in I/O, waiting for a CPU); snapshot and
  WAL throughput against the ideal (SlimIO's BGSAVE into its discard sink: the same
  serialisation with no I/O, the mean over the SlimIO cells);
* "Snapshot & WAL (under GC)" is **modelled**: QEMU's device has no garbage collection, so
  the FTL model (:mod:`slimio_repro.ftl`, the run's ``ftl.model``) ages a device of the
  cells' geometry to its steady state (``motivation.gc_utilization`` of it live data,
  overwritten at random) and then writes the snapshot's and the WAL's bytes to it; their
  write amplification ``waf_aged`` stretches the time the snapshot was blocked in I/O (its
  device time): time under GC = measured Snapshot & WAL time + blocked-in-I/O time x
  (waf_aged - 1). A model of the device work, labelled as such wherever it appears.
"""

from __future__ import annotations

import copy
import math
from pathlib import Path

import numpy as np
import pandas as pd

from .. import labels, paths
from ..aggregate import plot, summary
from ..ftl import FEMU_OP, Device, Geometry

# Table 1 of the paper (RPS; peak memory in GB, printed as integers).
PAPER_TABLE1 = {("ext4", "wal_only"): (59512.38, 26), ("ext4", "wal_snapshot"): (42885.10, 51),
                ("f2fs", "wal_only"): (61327.40, 26), ("f2fs", "wal_snapshot"): (43111.97, 52)}
# Table 2 of the paper: F2FS's write path in the snapshot process's CPU cycles, %.
PAPER_TABLE2 = {"snapshot_only": 11.53, "snapshot_wal": 13.61}
# Figure 2's numbers the text gives (§3.1.1-3.1.3): kernel I/O path ~15 % of the Snapshot-only
# duration; snapshot throughput ~15 % (Snapshot only) and ~20 % (Snapshot & WAL) below the
# ideal; the snapshot's throughput 30-45 % below the WAL's.
PAPER_FIG2 = {"snapshot_only_kernel_io_share_pct": 15, "snapshot_only_vs_ideal_pct": 85,
              "snapshot_wal_vs_ideal_pct": 80, "snapshot_vs_wal_ratio": "0.55-0.70"}
TABLE1_SYSTEMS = {"baseline": "F2FS", "baseline-ext4": "EXT4"}
# The baseline is named with its file system here: Table 1 compares F2FS with EXT4.
SYSTEM_LABEL = {"baseline": f"{labels.SYSTEM_LABEL['baseline']} ({TABLE1_SYSTEMS['baseline']})",
                "baseline-ext4": labels.SYSTEM_LABEL["baseline-ext4"],
                "slimio": labels.SYSTEM_LABEL["slimio"]}
SCENARIOS = (("snapshot_only", "Snapshot only"), ("snapshot_wal", "Snapshot & WAL"),
             ("snapshot_wal_gc", "Snapshot & WAL (under GC, modelled)"))
PARTS = (("in_memory_s", "in-memory work (CPU)", "tab:blue"),
         ("kernel_io_s", "kernel I/O path (CPU)", "tab:orange"),
         ("blocked_io_s", "blocked in I/O (device, writeback)", "tab:gray"),
         ("cpu_wait_s", "waiting for a CPU", "tab:olive"),
         ("other_s", "other (locks, sampling error)", "lightgray"),
         ("gc_extra_s", "modelled GC device work", "tab:red"))


def _stats(values: pd.Series) -> dict:
    v = pd.to_numeric(values, errors="coerce").dropna()
    return {"n": len(v), "mean": v.mean() if len(v) else math.nan,
            "min": v.min() if len(v) else math.nan, "max": v.max() if len(v) else math.nan}


def _spread(s: dict, fmt: str) -> str:
    if not s["n"]:
        return "n/a"
    text = format(s["mean"], fmt)
    return text if s["n"] < 2 else f"{text} ({format(s['min'], fmt)}-{format(s['max'], fmt)})"


# ---------------------------------------------------------------------------------- Table 1

def table1(cells: pd.DataFrame) -> pd.DataFrame:
    """One row per file system and phase: RPS and peak memory (mean, min, max, n), the drop
    from the WAL-only phase, and the paper's numbers."""
    rows = []
    sel = cells[(cells["testbed"] == "vm") & cells["system"].isin(TABLE1_SYSTEMS)
                & (cells["workload"] == "redis-benchmark") & (cells["policy"] == "periodical")]
    for system, fs_label in TABLE1_SYSTEMS.items():
        g = sel[sel["system"] == system]
        base = _stats(g.get("rps_wal_only", pd.Series(dtype=float)))
        for phase in ("wal_only", "wal_snapshot"):
            rps = _stats(g.get(f"rps_{phase}", pd.Series(dtype=float)))
            mem = _stats(g.get(f"mem_{phase}_peak_gb", pd.Series(dtype=float)))
            paper_rps, paper_mem = PAPER_TABLE1[(fs_label.lower(), phase)]
            paper_base = PAPER_TABLE1[(fs_label.lower(), "wal_only")][0]
            rows.append({
                "file_system": fs_label, "system": system, "phase": phase, "n": rps["n"],
                "rps_mean": rps["mean"], "rps_min": rps["min"], "rps_max": rps["max"],
                "rps_change_pct": (100 * (rps["mean"] / base["mean"] - 1)
                                   if base["n"] and rps["n"] else math.nan),
                "peak_memory_gb_mean": mem["mean"], "peak_memory_gb_min": mem["min"],
                "peak_memory_gb_max": mem["max"],
                "paper_rps": paper_rps, "paper_rps_change_pct": 100 * (paper_rps / paper_base - 1),
                "paper_peak_memory_gb": paper_mem})
    return pd.DataFrame(rows)


def table1_markdown(t: pd.DataFrame, notes: list[str]) -> str:
    lines = ["# Table 1: throughput and peak memory of stock Redis with and without a "
             "snapshot running (EXT4 and F2FS)", "",
             "| File system | Phase | n | RPS (min-max) | RPS change | Peak memory, GB "
             "(min-max) | Paper RPS | Paper change | Paper peak memory, GB |",
             "|---|---|---|---|---|---|---|---|---|"]
    for _, r in t.iterrows():
        rps = _spread({"n": r.n, "mean": r.rps_mean, "min": r.rps_min, "max": r.rps_max},
                      ",.0f")
        mem = _spread({"n": r.n, "mean": r.peak_memory_gb_mean, "min": r.peak_memory_gb_min,
                       "max": r.peak_memory_gb_max}, ".3f")
        change = "" if r.phase == "wal_only" or pd.isna(r.rps_change_pct) \
            else f"{r.rps_change_pct:+.1f} %"
        paper_change = "" if r.phase == "wal_only" else f"{r.paper_rps_change_pct:+.1f} %"
        lines.append(f"| {r.file_system} | {'WAL only' if r.phase == 'wal_only' else 'Snapshot&WAL'}"
                     f" | {r.n} | {rps} | {change} | {mem} | {r.paper_rps:,.2f} | "
                     f"{paper_change} | {r.paper_peak_memory_gb} |")
    return "\n".join(lines + [""] + [f"- {n}" for n in notes]) + "\n"


# ------------------------------------------------------------------- motivation cell records

def load(files: list[Path]) -> pd.DataFrame:
    """Records (one per cell), in the tables' order: system (as SYSTEM_LABEL), then rep."""
    df = summary.load_records(files)
    if df.empty:
        return df
    order = {s: i for i, s in enumerate(SYSTEM_LABEL)}
    df = df.assign(_o=df["system"].map(lambda s: order.get(s, len(order))))
    return df.sort_values(["_o", "rep"]).drop(columns="_o").reset_index(drop=True)


def aged_device(capacity_bytes: int, ru_bytes: int, model: str, utilization: float = 0.75,
                seed: int = 1) -> Device:
    """A modelled device of this geometry (no placement: one handle) aged to GC's steady
    state: ``utilization`` of its user capacity holds live data, written once and then
    overwritten twice over at random (the rest never written: the device is then one of
    that user capacity with the same flash). With FEMU's model (GC keeps a quarter of the
    flash free) a full device (utilization 1) amplifies 6-8x; 0.75 gives about 2x, 0.5
    about 1.3x."""
    page = 4096
    # The model keeps a page per entry: a large device is modelled with larger pages (the
    # WAF depends on the units' fill, not on the page size).
    while capacity_bytes // page > (1 << 22):
        page *= 2
    ru_bytes = max(ru_bytes, page * 4)
    user = int(utilization * capacity_bytes) // ru_bytes * ru_bytes
    geo = Geometry(user_bytes=user, op=(1 + FEMU_OP) * capacity_bytes / user - 1,
                   page_bytes=page, ru_bytes=ru_bytes, handles=1, placement=False)
    dev = Device(geo, model)
    dev.write_sequential(0, geo.user_pages)
    dev.uniform_random(2 * geo.user_pages, seed=seed)
    return dev


def waf_of_writes(aged: Device, written_bytes: int, seed: int = 1) -> float:
    """The write amplification of ``written_bytes`` written in order onto a copy of the
    ``aged`` device (:func:`aged_device`; the device itself is left as it is)."""
    dev = copy.deepcopy(aged)
    geo = dev.geometry
    pages = max(1, written_bytes // geo.page_bytes)
    start = int(np.random.default_rng(seed).integers(0, geo.user_pages))
    got = dev.write_sequential(start, min(pages, geo.user_pages))
    return float(got.waf or 1.0)


def aged_waf(capacity_bytes: int, ru_bytes: int, written_bytes: int, model: str,
             utilization: float = 0.75, seed: int = 1) -> float:
    """The write amplification of ``written_bytes`` written in order onto a device of this
    geometry aged as :func:`aged_device` ages it."""
    return waf_of_writes(aged_device(capacity_bytes, ru_bytes, model, utilization, seed),
                         written_bytes, seed)


def with_derived(df: pd.DataFrame, device: dict | None = None, model: str = "femu-fdp",
                 utilization: float = 0.75) -> pd.DataFrame:
    """The records with what needs more than one cell: each scenario's throughput as a % of
    the ideal (the SlimIO cells' mean discard-sink rate), the snapshot's over the WAL's
    rate, and the modelled "under GC" scenario (``device``: capacity_bytes, ru_bytes)."""
    df = df.copy()
    ideal = pd.to_numeric(df.get("mot_ideal_mb_s", pd.Series(dtype=float)),
                          errors="coerce").dropna()
    ideal_mb_s = ideal.mean() if len(ideal) else math.nan
    df["mot_ideal_reference_mb_s"] = ideal_mb_s
    for pre in ("mot_snapshot_only", "mot_snapshot_wal"):
        df[f"{pre}_vs_ideal_pct"] = 100 * df[f"{pre}_write_mb_s"] / ideal_mb_s
    df["mot_snapshot_vs_wal_rate"] = (df["mot_snapshot_wal_write_mb_s"]
                                      / df["mot_wal_write_mb_s_during_snapshot"])
    if device is not None:
        # One aged device; each cell's writes go onto a copy of it.
        aged = aged_device(device["capacity_bytes"], device["ru_bytes"], model, utilization)
        wafs = []
        for _, r in df.iterrows():
            written = (r["mot_snapshot_wal_bytes"] + (r["mot_wal_write_mb_s_during_snapshot"]
                       or 0) * 1e6 * r["mot_snapshot_wal_time_s"])
            wafs.append(waf_of_writes(aged, int(written)))
        df["mot_gc_waf_modelled"] = wafs
        # The device's share of the snapshot's time: its main thread blocked in I/O (the
        # scheduler's events), or all its off-CPU time where a cell has no such events.
        device_s = df.get("mot_snapshot_wal_blocked_io_s",
                          pd.Series(math.nan, index=df.index)).fillna(
            df["mot_snapshot_wal_offcpu_s"])
        df["mot_snapshot_wal_gc_extra_s"] = device_s * (df["mot_gc_waf_modelled"] - 1)
        df["mot_snapshot_wal_gc_modelled_time_s"] = (df["mot_snapshot_wal_time_s"]
                                            + df["mot_snapshot_wal_gc_extra_s"])
    return df


# ---------------------------------------------------------------------------------- Table 2

def table2(df: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for system, g in df.groupby("system", sort=False):
        for scen, label in SCENARIOS[:2]:
            pre = f"mot_{scen}"
            fs = _stats(g[f"{pre}_fs_write_path_cpu_pct"])
            ctl = _stats(g[f"{pre}_fs_control_cpu_pct"])
            io = _stats(100 * g[f"{pre}_kernel_io_s"] / g[f"{pre}_cpu_s"])
            cpu = _stats(g[f"{pre}_cpu_s"])
            rows.append({"system": system, "filesystem": ", ".join(sorted(set(g["filesystem"]))),
                         "scenario": scen, "n": fs["n"], "child_cpu_s_mean": cpu["mean"],
                         "samples_mean": g[f"{pre}_samples"].mean(),
                         "fs_write_path_cpu_pct_mean": fs["mean"],
                         "fs_write_path_cpu_pct_min": fs["min"],
                         "fs_write_path_cpu_pct_max": fs["max"],
                         "fs_control_cpu_pct_mean": ctl["mean"],
                         "kernel_io_cpu_pct_mean": io["mean"],
                         "paper_f2fs_pct": PAPER_TABLE2[scen] if system == "baseline"
                         else math.nan})
    return pd.DataFrame(rows)


def table2_markdown(t: pd.DataFrame, notes: list[str]) -> str:
    lines = ["# Table 2: the file system's write path in the snapshot process's CPU", "",
             "| System | File system | Scenario | n | Snapshot child's CPU, s | Samples | "
             "File system's write path, % of its CPU (min-max) | without the data copy, % | "
             "Kernel I/O path, % of its CPU | Paper (F2FS), % |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for _, r in t.iterrows():
        fs = _spread({"n": r.n, "mean": r.fs_write_path_cpu_pct_mean,
                      "min": r.fs_write_path_cpu_pct_min, "max": r.fs_write_path_cpu_pct_max},
                     ".2f")
        paper = "" if pd.isna(r.paper_f2fs_pct) else f"{r.paper_f2fs_pct:.2f}"
        lines.append(f"| {SYSTEM_LABEL.get(r.system, r.system)} | {r.filesystem} | "
                     f"{dict(SCENARIOS)[r.scenario]} | {r.n} | {r.child_cpu_s_mean:.3f} | "
                     f"{r.samples_mean:.0f} | {fs} | {r.fs_control_cpu_pct_mean:.2f} | "
                     f"{r.kernel_io_cpu_pct_mean:.2f} | {paper} |")
    return "\n".join(lines + [""] + [f"- {n}" for n in notes]) + "\n"


# ---------------------------------------------------------------------------------- Figure 2

def figure2_frame(df: pd.DataFrame) -> pd.DataFrame:
    """Per system and scenario: the mean time parts (Figure 2a) and throughputs (2b)."""
    rows = []
    for system, g in df.groupby("system", sort=False):
        for scen, label in SCENARIOS:
            pre = "mot_snapshot_wal" if scen == "snapshot_wal_gc" else f"mot_{scen}"
            if scen == "snapshot_wal_gc" and "mot_snapshot_wal_gc_modelled_time_s" not in g:
                continue
            offcpu = g[f"{pre}_offcpu_s"].mean()
            blocked = g[f"{pre}_blocked_io_s"].mean() if f"{pre}_blocked_io_s" in g else 0.0
            waiting = g[f"{pre}_cpu_wait_s"].mean() if f"{pre}_cpu_wait_s" in g else 0.0
            row = {"system": system, "scenario": scen, "label": label, "n": len(g),
                   "in_memory_s": g[f"{pre}_in_memory_s"].mean(),
                   "kernel_io_s": g[f"{pre}_kernel_io_s"].mean(),
                   "blocked_io_s": blocked, "cpu_wait_s": waiting,
                   "other_s": max(0.0, offcpu - blocked - waiting),
                   "offcpu_s": offcpu,
                   "gc_extra_s": (g["mot_snapshot_wal_gc_extra_s"].mean()
                                  if scen == "snapshot_wal_gc" else 0.0),
                   "time_s": g["mot_snapshot_wal_gc_modelled_time_s" if scen == "snapshot_wal_gc"
                               else f"mot_{scen}_time_s"].mean()}
            row["snapshot_mb_s"] = (g[f"{pre}_bytes"].mean() / row["time_s"] / 1e6
                                    if row["time_s"] else math.nan)
            row["wal_mb_s"] = (g["mot_wal_write_mb_s_during_snapshot"].mean()
                               if scen != "snapshot_only" else math.nan)
            row["wal_only_mb_s"] = g["mot_wal_write_mb_s_before_snapshot"].mean()
            row["ideal_mb_s"] = g["mot_ideal_reference_mb_s"].mean()
            rows.append(row)
    return pd.DataFrame(rows)


SHORT_LABEL = {"snapshot_only": "Snapshot\nonly", "snapshot_wal": "Snapshot\n& WAL",
               "snapshot_wal_gc": "Snapshot & WAL\nunder GC\n(modelled)"}


def plot_figure2(frame: pd.DataFrame, png: Path, pdf: Path, caption: str) -> None:
    plt = plot.pyplot()
    plt.style.use(str(plot.STYLE))
    order = list(SYSTEM_LABEL)
    systems = sorted(dict.fromkeys(frame["system"]),
                     key=lambda x: order.index(x) if x in order else len(order))
    fig, axes = plt.subplots(2, len(systems), figsize=(4.0 * len(systems) + 1.5, 8),
                             squeeze=False)
    for i, system in enumerate(systems):
        g = frame[frame["system"] == system].reset_index(drop=True)
        labels = [SHORT_LABEL[s] for s in g["scenario"]]
        ax = axes[0][i]
        left = np.zeros(len(g))
        for col, label, color in PARTS:
            vals = g[col].fillna(0).to_numpy()
            ax.barh(labels, vals, left=left, color=color, label=label)
            left += vals
        ax.invert_yaxis()
        ax.set_title(f"(a) {SYSTEM_LABEL.get(system, system)}", fontsize=10)
        ax.set_xlabel("snapshot time, s (mean over the cells)", fontsize=8)
        ax.tick_params(labelsize=8)
        ax = axes[1][i]
        x = np.arange(len(g))
        ax.bar(x - 0.2, g["snapshot_mb_s"], 0.4, label="snapshot", color="tab:blue")
        ax.bar(x + 0.2, g["wal_mb_s"].fillna(0), 0.4, label="WAL (during the snapshot)",
               color="tab:green")
        ideal = g["ideal_mb_s"].dropna()
        if len(ideal):
            ax.axhline(ideal.iloc[0], color="black", linestyle="--",
                       label="ideal (no-I/O snapshot)")
        ax.set_xticks(x, labels, fontsize=8)
        ax.set_ylabel("MB/s", fontsize=8)
        ax.set_title(f"(b) {SYSTEM_LABEL.get(system, system)}", fontsize=10)
    fig.subplots_adjust(left=0.1, right=0.98, top=0.96, bottom=0.2, hspace=0.75,
                        wspace=0.45)
    for row, anchor in ((0, 0.565), (1, 0.105)):
        handles, names = axes[row][0].get_legend_handles_labels()
        fig.legend(handles, names, loc="upper center", bbox_to_anchor=(0.5, anchor),
                   ncol=len(names), fontsize=8, frameon=False)
    fig.text(0.01, 0.005, caption, fontsize=6, wrap=True)
    png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png, dpi=150)
    fig.savefig(pdf)
    plt.close(fig)


# ------------------------------------------------------------------------------ everything

def notes(df: pd.DataFrame) -> list[str]:
    """What the reader must know: where it ran, the ideal's source, the modelled GC."""
    out = []
    accels = ", ".join(sorted(set(df.get("accel", pd.Series(dtype=str)).dropna())))
    out.append(f"Measured in the vm testbed ({accels or 'unrecorded'}) on QEMU's emulated NVMe "
               "namespace; under TCG every CPU cost is emulated, so shares and rates are this "
               "testbed's, not the paper's hardware's.")
    if "mot_ideal_reference_mb_s" in df and df["mot_ideal_reference_mb_s"].notna().any():
        n = int(df["mot_ideal_mb_s"].notna().sum()) if "mot_ideal_mb_s" in df else 0
        out.append(f"Ideal: SlimIO's BGSAVE into its discard sink (the same serialisation, no "
                   f"I/O), {df['mot_ideal_reference_mb_s'].iloc[0]:.1f} MB/s, the mean over "
                   f"{n} SlimIO cells; the paper's ideal overlaps in-memory work with the I/O.")
    else:
        out.append("Ideal: not measured (no SlimIO motivation cell: add slimio to "
                   "motivation.systems).")
    if "mot_gc_waf_modelled" in df:
        out.append("Snapshot & WAL (under GC) is MODELLED: QEMU's device has no GC; the FTL "
                   "model's device (no placement), aged to GC's steady state with "
                   f"{df['mot_gc_utilization'].iloc[0]:.0%} of it live random data "
                   "(motivation.gc_utilization), gives the snapshot's and WAL's bytes a "
                   f"write amplification of {df['mot_gc_waf_modelled'].min():.2f}-"
                   f"{df['mot_gc_waf_modelled'].max():.2f}, which stretches the time the "
                   "snapshot was blocked in I/O by that factor less one.")
    if "mot_writes_covered_snapshot" in df and not df["mot_writes_covered_snapshot"].all():
        bad = ", ".join(df.loc[~df["mot_writes_covered_snapshot"].astype(bool), "cell_id"])
        out.append(f"WARNING: in {bad} the writes ended before the snapshot did: raise "
                   "motivation.wal_requests.")
    return out


def records(motivation_files: list[Path], table1_files: list[Path], model: str = "femu-fdp",
            utilization: float = 0.75) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Table 1's cells, and the motivation cells with what is derived across them
    (:func:`with_derived`, the modelled "under GC" scenario on the cells' own device)."""
    raw = load(motivation_files)
    device = None
    if "device_capacity_bytes" in raw and len(raw):
        device = {"capacity_bytes": int(raw["device_capacity_bytes"].iloc[0]),
                  "ru_bytes": int(raw["device_ru_bytes"].iloc[0])}
    df = with_derived(raw, device, model, utilization)
    df["mot_gc_utilization"] = utilization if device is not None else math.nan
    return load(table1_files), df


def write_all(motivation_files: list[Path], table1_files: list[Path], results_dir: Path,
              model: str = "femu-fdp", utilization: float = 0.75) -> list[Path]:
    """Every motivation output under ``results_dir`` (tables/, figures/); their paths."""
    tables, figures = results_dir / "tables", results_dir / "figures"
    tables.mkdir(parents=True, exist_ok=True)
    figures.mkdir(parents=True, exist_ok=True)
    cells, df = records(motivation_files, table1_files, model, utilization)
    written = []
    t1 = table1(cells)
    t1_notes = [
        "The baseline's redis-benchmark Periodical-Log cells (the matrix's on F2FS, "
        "baseline-ext4's on EXT4), the same workload: RPS in the WAL-only and "
        "Snapshot&WAL phases (WAL-Snapshots, i.e. AOF rewrites, during the workload) and "
        "peak memory of the server plus its fork child per phase; mean (min-max) over n.",
        "The paper's Table 1 comes from its 28 M SETs on 5.3 M keys (26 GB of data); this "
        "profile's dataset is far smaller, so compare the change, not the absolute values.",
        *notes(cells)[:1]]
    for name, frame, md in (("table1_snapshot_impact", t1, table1_markdown(t1, t1_notes)),):
        frame.to_csv(tables / f"{name}.csv", index=False)
        (tables / f"{name}.md").write_text(md)
        written += [tables / f"{name}.csv", tables / f"{name}.md"]
    t2 = table2(df)
    t2.to_csv(tables / "table2_fs_write_path_cpu.csv", index=False)
    (tables / "table2_fs_write_path_cpu.md").write_text(table2_markdown(t2, [
        "perf record -g -e cpu-clock (software clock) on the snapshot (fork child) process; a "
        "sample is the file system's write path when its call chain holds a write or sync "
        "system call and a function of the file system (f2fs_*, or ext4_*/jbd2_*), inclusive "
        "of the page-cache code and the copy it calls (slimio_repro.parse.perfprofile).",
        *notes(df)]))
    written += [tables / "table2_fs_write_path_cpu.csv", tables / "table2_fs_write_path_cpu.md"]
    # The records the motivation's claims are judged on: Table 1's cells and these.
    pd.concat([cells, df], ignore_index=True).to_csv(results_dir / paths.MOTIVATION_TABLE,
                                                     index=False)
    written.append(results_dir / paths.MOTIVATION_TABLE)
    frame = figure2_frame(df)
    caption = ("Figure 2 (reproduced): (a) where each snapshot's time went: the snapshot "
               "child's main thread on its CPU (perf samples: in-memory work, kernel I/O "
               "path) and off it (the scheduler's events: blocked in I/O, i.e. the device as "
               "the snapshot sees it, waiting for a CPU, other); (b) snapshot and WAL "
               "throughput against the ideal. "
               + " ".join(notes(df)))
    png, pdf = figures / "fig2_snapshot_analysis.png", figures / "fig2_snapshot_analysis.pdf"
    plot_figure2(frame, png, pdf, caption)
    cap = figures / "fig2_snapshot_analysis.caption.txt"
    cap.write_text(caption + "\n\n" + frame.to_string(index=False) + "\n")
    written += [png, pdf, cap]
    return written
