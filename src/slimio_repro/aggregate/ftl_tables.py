"""The FTL model's device WAF per system, workload and policy (results/tables/ftl_waf), and
its sensitivity sweep (results/tables/waf_sensitivity).
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from ..labels import POLICY_LABEL, SYSTEM_LABEL
from .formats import markdown
from .reference import paper_markdown
from .summary import summarize


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
                 ftl_notes(sequences), by_workload=True)
        + paper_markdown("table3_redis_benchmark", [("waf_modelled", "SSD WAF", 2)]))
    return summary
