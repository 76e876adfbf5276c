"""Runtime-RPS figures (the paper's Figures 4 and 5) with snapshot periods shaded, the what-if
WAF figure, and beside each figure a caption (``<figure>.caption.txt``) that sets our numbers
next to the paper's and says how the two setups differ."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pandas as pd

from ..labels import KIND_LABEL, POLICY_LABEL, SYSTEM_LABEL
from .figures import RUNTIME_RPS_FIGURES
from .reference import paper_rows

STYLE = Path(__file__).with_name("slimio.mplstyle")
SHADE = {"wal_snapshot": ("tab:orange", KIND_LABEL["wal_snapshot"]),
         "on_demand_snapshot": ("tab:purple", KIND_LABEL["on_demand_snapshot"])}
RPS_LABEL = "RPS (client, per 250 ms interval)"

# The paper's numbers the figures are set beside: Table 3 (redis-benchmark) of
# results/reference/paper_tables.yaml, under the policy Figures 4 and 5 use.
PAPER_TABLE = "table3_redis_benchmark"
PAPER_POLICY = "periodical"
# The paper's setup for Table 3 and Figures 4-5 (appendix, "Artifact Setup").
PAPER_SETUP = ("FEMU v9.0 FDP SSD of 180 GB (8 channels x 8 dies, 1 GB reclaim units) in a "
               "KVM guest with 12 vCPUs and 55 GB DRAM; Redis 7.4.2; redis-benchmark with 50 "
               "clients issuing 28 M SETs over a key range of 5.3 M keys, 8-byte keys, 4 KiB "
               "(4096-byte) values; Table 3 aggregates five repetitions")
# What the paper's section 5.4 says of each figure, and of a panel's system in it (as printed).
PAPER_FIGURE = {
    "fig4_runtime_rps": ("Figure 4 of the paper showed the runtime RPS of redis-benchmark under "
                         "Periodical-Log, Baseline vs SlimIO without FDP: \"several extended "
                         "periods of RPS instability in both setups, such as around 1000s, "
                         "1500s, and beyond, which correspond to the timing of SSD garbage "
                         "collection (GC) events\"; the baseline \"maintains relatively stable "
                         "RPS\", while SlimIO without FDP \"suffers from sharp drops in RPS - "
                         "occasionally nosedive to zero\" (section 5.4)."),
    "fig5_runtime_rps": ("Figure 5 of the paper showed the runtime RPS of redis-benchmark under "
                         "Periodical-Log, Baseline vs SlimIO on the FDP SSD: \"runtime RPS "
                         "remains stable between 70000 and 80,000, except during snapshot "
                         "duration\" (section 5.4)."),
}
PAPER_PANEL = {
    ("fig4_runtime_rps", "baseline"): "Fig. 4: relatively stable through GC periods",
    ("fig4_runtime_rps", "slimio-nofdp"): "paper: no table value; §5.4 describes drops to zero "
                                          "under GC",
    ("fig5_runtime_rps", "slimio"): "Fig. 5: stable between 70,000 and 80,000 RPS except "
                                    "during snapshots",
}
PHASES = (("rps_wal_only", "WAL-Only"), ("rps_wal_snapshot", "WAL&Snapshot"))
NOTE_GID = "paper-comparison"


def pyplot():
    """matplotlib's pyplot on the file-only backend, imported where first drawn: the import
    takes about 0.3 s, and every Snakemake start imports this module through the workflow."""
    import matplotlib
    matplotlib.use("agg")
    import matplotlib.pyplot as plt
    return plt


def draw_cell(ax, record: dict, series: pd.DataFrame, legend: bool = True) -> None:
    """The client's RPS over time, each snapshot of the cell shaded from its start to its end."""
    s = series.dropna(subset=["client_rps"])
    ax.plot(s.t_s, s.client_rps, color="tab:blue", drawstyle="steps-pre", label=RPS_LABEL)
    seen = set()
    for snap in record["snapshots"]:
        color, label = SHADE[snap["kind"]]
        ax.axvspan(snap["start_s"], snap["end_s"], color=color, alpha=0.25,
                   label=None if snap["kind"] in seen else label)
        seen.add(snap["kind"])
    ax.set_xlabel("time since workload start (s)")
    ax.set_ylabel("requests per second")
    ax.set_ylim(bottom=0)
    if legend:
        ax.legend(loc="lower left", fontsize=7)


def _save(fig, outputs: list[Path]) -> None:
    for out in outputs:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(out)
    pyplot().close(fig)


def caption_path(figure: Path) -> Path:
    """Where the caption of ``figure`` (``x.png`` or ``x.pdf``) goes: ``x.caption.txt``."""
    return Path(figure).with_suffix(".caption.txt")


def _write_caption(path: Path, paragraphs: list[str]) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n\n".join(paragraphs) + "\n")


def paper_row(system: str, policy: str = PAPER_POLICY) -> dict | None:
    """The paper's Table 3 row of ``system`` under ``policy``; None if the paper has none
    (SlimIO without FDP has no table row)."""
    return next((r for r in paper_rows(PAPER_TABLE)
                 if r["system"] == system and r.get("policy") == policy), None)


def _rps(value) -> str:
    return "n/a" if value is None or pd.isna(value) else f"{value:,.0f}"


def _ratio(num, den) -> float | None:
    if num is None or den is None or pd.isna(num) or pd.isna(den) or not den:
        return None
    return num / den


def _ratio_text(num, den) -> str:
    r = _ratio(num, den)
    return "n/a" if r is None else f"{r:.2f}"


def outside_snapshots(record: dict, series: pd.DataFrame) -> dict | None:
    """The client RPS of the intervals that overlap no snapshot of the cell: its 10th and
    90th percentiles and its minimum (what the paper's "stable between 70000 and 80,000,
    except during snapshot duration" and "drops to zero" describe); None if there is none.

    A row's interval ends at its ``t_s`` and starts at the previous row's (as drawn, steps-pre);
    the first row closes no interval (the client's report at the start) and is left out."""
    s = series.dropna(subset=["client_rps"]).sort_values("t_s")
    start = s.t_s.shift()
    inside = start.isna()
    for snap in record["snapshots"]:
        inside |= (start < snap["end_s"]) & (s.t_s > snap["start_s"])
    rps = s.client_rps[~inside]
    if rps.empty:
        return None
    return {"p10": float(rps.quantile(0.1)), "p90": float(rps.quantile(0.9)),
            "min": float(rps.min())}


def panel_note(name: str, record: dict, series: pd.DataFrame,
               baseline: dict | None) -> str:
    """The text set beside a panel of figure ``name``: the paper's Table 3 Periodical-Log RPS
    of the panel's system, ours (the cell's phase means), and the system/Baseline ratios in
    the paper and here (``baseline``: the Baseline cell of the same testbed)."""
    system = record["system"]
    label = SYSTEM_LABEL.get(system, system)
    paper = paper_row(system)
    lines = [f"Paper, Table 3 ({POLICY_LABEL[PAPER_POLICY]}), {label}:"]
    if paper is None:
        lines.append("  " + PAPER_PANEL.get((name, system), "paper: no table value"))
    else:
        lines.append("  " + " · ".join(f"{h} {_rps(paper[k])}" for k, h in PHASES) + " RPS")
        if (name, system) in PAPER_PANEL:
            lines.append("  " + PAPER_PANEL[(name, system)])
    lines.append(f"Ours ({record['testbed']}, phase means of this cell):")
    lines.append("  " + " · ".join(f"{h} {_rps(record.get(k))}" for k, h in PHASES) + " RPS")
    stable = outside_snapshots(record, series)
    if stable:
        lines.append(f"  outside snapshots: p10-p90 {_rps(stable['p10'])}-"
                     f"{_rps(stable['p90'])}, min {_rps(stable['min'])} RPS")
    if system != "baseline":
        base = paper_row("baseline")
        theirs = ("n/a (no table row)" if paper is None or base is None else
                  " · ".join(_ratio_text(paper[k], base[k]) for k, _ in PHASES))
        ours = ("n/a (no Baseline cell)" if baseline is None else
                " · ".join(_ratio_text(record.get(k), baseline.get(k)) for k, _ in PHASES))
        lines.append(f"{label}/Baseline ({' · '.join(h for _, h in PHASES)}):")
        lines.append(f"  paper {theirs}; ours {ours}")
    return "\n".join(lines)


def _cell_setup(record: dict) -> str:
    """One cell's scale and testbed, from its record."""
    parts = [f"testbed {record['testbed']}"]
    if record.get("accel"):
        parts.append(f"accelerator {record['accel']}")
    elif record["testbed"] == "vm":
        parts.append("accelerator not in the record (see the cell's provenance.json)")
    if record.get("device_model"):
        parts.append(f"device model {record['device_model']}")
    parts.append(f"Redis {record.get('redis_version')}")
    sets = record.get("requests_completed") or record.get("requests")
    parts.append(f"{sets:,} SETs over a key range of {record['keyspace']:,} keys"
                 if sets is not None and record.get("keyspace") is not None else
                 "SET count and key range not in the record")
    parts.append(f"{record['key_size_bytes']}-byte keys, {record['value_size_bytes']}-byte "
                 f"values, {record.get('clients')} clients")
    if record.get("slimio_device_bytes"):
        parts.append(f"SlimIO LBA region of {record['slimio_device_bytes'] / 2**20:,.0f} MiB "
                     f"on {record.get('slimio_device')}")
    else:
        parts.append(f"file system {record.get('filesystem')}, device size not in the record")
    parts.append(f"profile {record.get('profile')}, repetition {record['rep']}")
    return f"{record['cell_id']}: " + "; ".join(parts)


def runtime_rps_caption(name: str, records: list[dict]) -> list[str]:
    """The caption of figure ``name`` (paragraphs): what it shows, what the paper's showed,
    both sets of numbers, and how the setups differ."""
    title, systems = RUNTIME_RPS_FIGURES[name]
    labels = " and ".join(SYSTEM_LABEL.get(s, s) for s in systems)
    shows = (f"{title} (this reproduction): runtime RPS of the redis-benchmark workload under "
             f"{POLICY_LABEL[PAPER_POLICY]}, {labels}, one panel per cell (the first "
             f"repetition of each system on each testbed: "
             f"{', '.join(r['cell_id'] for r in records)}); the line is the client's RPS per "
             "250 ms interval, shaded spans are WAL-Snapshot and On-Demand-Snapshot periods. "
             "The box beside each panel sets the paper's Table 3 RPS of that system beside "
             "ours.")
    paper_lines = [f"The paper's Table 3 ({POLICY_LABEL[PAPER_POLICY]}, redis-benchmark):"]
    for system in systems:
        row = paper_row(system)
        paper_lines.append(
            f"- {SYSTEM_LABEL.get(system, system)}: " + (
                PAPER_PANEL.get((name, system), "no table value") if row is None else
                ", ".join(f"{h} {row[k]:,.2f} RPS" for k, h in PHASES)))
    base = paper_row("baseline")
    for system in systems[1:]:
        row = paper_row(system)
        if row is not None and base is not None:
            paper_lines.append(f"- {SYSTEM_LABEL.get(system, system)}/Baseline: " + ", ".join(
                f"{h} {_ratio_text(row[k], base[k])}" for k, h in PHASES))
    ours_lines = ["Ours (phase means of the plotted cells; WAL-Only = no snapshot running):"]
    baselines = {r["testbed"]: r for r in records if r["system"] == "baseline"}
    for r in records:
        ours_lines.append(f"- {SYSTEM_LABEL.get(r['system'], r['system'])} ({r['testbed']}): "
                          + ", ".join(f"{h} {_rps(r.get(k))} RPS" for k, h in PHASES))
    for r in records:
        b = baselines.get(r["testbed"])
        if r["system"] != "baseline" and b is not None:
            ours_lines.append(f"- {SYSTEM_LABEL.get(r['system'], r['system'])}/Baseline "
                              f"({r['testbed']}): " + ", ".join(
                                  f"{h} {_ratio_text(r.get(k), b.get(k))}" for k, h in PHASES))
    setup = ["Setup differences. The paper: " + PAPER_SETUP + ". Ours, per cell:"]
    setup += [f"- {_cell_setup(r)}" for r in records]
    scale = []
    for testbed, b in baselines.items():
        factor = _ratio(b.get("rps_wal_only"), base["rps_wal_only"]) if base else None
        if factor:
            scale.append(f"on testbed {testbed} our Baseline's WAL-Only RPS is {factor:.3g} "
                         f"times the paper's ({_rps(b.get('rps_wal_only'))} vs "
                         f"{_rps(base['rps_wal_only'])})")
    setup.append("Absolute RPS depend on the testbed and the scale, so they are not comparable "
                 "across the two setups" + (f" ({'; '.join(scale)})" if scale else "")
                 + ": the paper's values are given as numbers beside the panels, not drawn on "
                   "our axes; compare the ratios to the Baseline and the shape of the curves.")
    return [shows, PAPER_FIGURE[name], "\n".join(paper_lines), "\n".join(ours_lines),
            "\n".join(setup)]


def cell_figure(record_path: Path, series_path: Path, outputs: list[Path]) -> None:
    record = json.loads(Path(record_path).read_text())
    series = pd.read_csv(series_path)
    plt = pyplot()
    with plt.style.context(STYLE):
        fig, ax = plt.subplots(layout="constrained")
        draw_cell(ax, record, series)
        ax.set_title(f"{record['cell_id']}: {SYSTEM_LABEL.get(record['system'])}, "
                     f"{POLICY_LABEL[record['policy']]}", fontsize=9)
        _save(fig, outputs)


def comparison_figure(pairs: list[tuple[Path, Path]], outputs: list[Path], title: str,
                      notes: list[str] | None = None) -> None:
    """One panel per cell, stacked, sharing both axes, with one legend for all panels; with
    ``notes``, each panel's note in a box to its right.

    Panels rather than one overlaid plot: each cell has its own snapshot periods, and shading
    two sets of them on one axes would hide which drop belongs to which system. The notes sit
    outside the axes so that they hide none of the curve or the shaded periods.
    """
    plt = pyplot()
    with plt.style.context(STYLE):
        fig, axes = plt.subplots(len(pairs), 1, sharex=True, sharey=True, squeeze=False,
                                 figsize=(10.0 if notes else 7.0, 0.6 + 2.2 * len(pairs)),
                                 layout="constrained")
        legend = {}
        for i, (ax, (record_path, series_path)) in enumerate(zip(axes[:, 0], pairs)):
            record = json.loads(Path(record_path).read_text())
            draw_cell(ax, record, pd.read_csv(series_path), legend=False)
            ax.set_title(f"{SYSTEM_LABEL.get(record['system'], record['system'])}, "
                         f"{record['testbed']} ({record['cell_id']})", fontsize=8, loc="left")
            if notes:
                ax.text(1.02, 1.0, notes[i], transform=ax.transAxes, ha="left", va="top",
                        fontsize=6, linespacing=1.3, gid=NOTE_GID,
                        bbox={"boxstyle": "round,pad=0.4", "facecolor": "white",
                              "edgecolor": "0.6", "linewidth": 0.5})
            for handle, label in zip(*ax.get_legend_handles_labels()):
                legend.setdefault(label, handle)
        for ax in axes[:-1, 0]:
            ax.set_xlabel("")
        fig.suptitle(title, fontsize=9)
        fig.legend(legend.values(), legend.keys(), loc="outside lower center",
                   ncol=len(legend), fontsize=7)
        _save(fig, outputs)


def runtime_rps_figure(name: str, pairs: list[tuple[Path, Path]], outputs: list[Path],
                       caption: Path | None = None) -> None:
    """Figure ``name`` of RUNTIME_RPS_FIGURES from its cells' (record, time series) pairs,
    each panel annotated with the paper's numbers (:func:`panel_note`), and its caption
    (:func:`runtime_rps_caption`) written to ``caption`` (default: beside ``outputs[0]``)."""
    title, systems = RUNTIME_RPS_FIGURES[name]
    records = [json.loads(Path(r).read_text()) for r, _ in pairs]
    drawn = [r["system"] for r in records]
    missing = [s for s in systems if s not in drawn]
    if missing:
        raise ValueError(f"{name} compares {', '.join(systems)} but has no cell of "
                         f"{', '.join(missing)}: add them to matrix.systems")
    baselines = {r["testbed"]: r for r in records if r["system"] == "baseline"}
    notes = [panel_note(name, r, pd.read_csv(s), baselines.get(r["testbed"]))
             for r, (_, s) in zip(records, pairs)]
    comparison_figure(pairs, outputs, f"{title}: runtime RPS, redis-benchmark, "
                      f"{POLICY_LABEL[PAPER_POLICY]} (first repetition)", notes)
    _write_caption(caption or caption_path(outputs[0]), runtime_rps_caption(name, records))


SWEEP_PANELS = [("ru_bytes", "reclaim unit size (MiB)", 2**20, True),
                ("op", "over-provisioning (fraction of user capacity)", 1, False),
                ("handles", "placement handles", 1, True),
                ("deallocations", "deallocations told to the device", 1, False)]


# The paper's measured WAF as reference lines, in the order of paper_waf(): (colour, style);
# none of them solid or dashed, which are our placement honoured and ignored.
PAPER_WAF_STYLES = [("0.3", ":"), ("0.3", "-."), ("black", (0, (5, 1, 1, 1, 1, 1)))]


def paper_waf() -> list[tuple[str, list[str], float]]:
    """The paper's SSD WAF (Table 3, FEMU): (system, policies, WAF), one entry per distinct
    value of a system (SlimIO's 1.00 under both policies is one entry)."""
    out: dict[tuple[str, float], list[str]] = {}
    for r in paper_rows(PAPER_TABLE):
        out.setdefault((r["system"], r["waf"]), []).append(r["policy"])
    order = list(SYSTEM_LABEL)
    return [(system, policies, waf) for (system, waf), policies in
            sorted(out.items(), key=lambda kv: (order.index(kv[0][0]) if kv[0][0] in order
                                                else len(order), kv[0][1]))]


def _paper_waf_label(system: str, policies: list[str], waf: float) -> str:
    return (f"paper (FEMU, measured): {SYSTEM_LABEL.get(system, system)}, "
            f"{' and '.join(POLICY_LABEL.get(p, p) for p in policies)}: WAF {waf:.2f}")


def waf_sensitivity_caption(frame: pd.DataFrame, sequences: list[dict] = ()) -> list[str]:
    """The caption of the WAF sensitivity figure (paragraphs)."""
    shows = ("Device WAF sensitivity (this reproduction): the WAF our FTL stage models by "
             "replaying each system and policy's repetitions (their NVMe command traces, in "
             "order, on one device) on devices that differ from the cells' own in one parameter "
             "at a time: reclaim unit size, over-provisioning, number of placement handles, and "
             "whether deallocations reach the device; placement honoured (solid) or ignored "
             "(dashed, every write on one handle).")
    if frame.empty:
        shows += (" This run has no sweep (no vm cell, or ftl.sweep: false), so the panels "
                  "hold only the paper's reference lines.")
    paper = ("Horizontal reference lines: the paper's SSD WAF (Table 3, section 5.2), measured "
             "on its FEMU FDP SSD: "
             + "; ".join(f"{SYSTEM_LABEL.get(s, s)} {w:.2f} under "
                         f"{' and '.join(POLICY_LABEL.get(p, p) for p in ps)}"
                         for s, ps, w in paper_waf())
             + ". The paper's setup: " + PAPER_SETUP + ". "
             "These values are the paper's FEMU measurements at its one device geometry; "
               "the paper has no sensitivity figure. Ours are modelled, not measured: the FTL "
               "stage replays our cells' traces through a model of the device's FTL (QEMU's "
               "FDP emulation, the vm testbed's tested device, collects no garbage, so it "
               "cannot measure a WAF above 1).")
    ours = ["Our modelled sequences:"]
    for q in sequences:
        g, s = q["geometry"], q["sequence"]
        ours.append(f"- {', '.join(c['cell'] for c in q['cells'])}: model {q['model']}; "
                    f"device {g['user_bytes'] / 2**30:.2f} GiB user, over-provisioning "
                    f"{g['op']:.3f}, {g['ru_bytes'] >> 20} MiB reclaim units, {g['handles']} "
                    f"handles; {s['host_bytes'] / 2**30:.3f} GiB written by the host "
                    f"({s['drive_writes']:.2f} drive writes), WAF "
                    f"{'n/a' if s['waf'] is None else format(s['waf'], '.3f')}")
    if len(ours) == 1:
        ours.append("- none")
    ours.append(f"For scale: each of the paper's five runs wrote 28 M SETs of 4 KiB values "
                f"(about {28e6 * 4096 / 2**30:.0f} GiB of values) to a 180 GB device with 1 GB "
                "reclaim units.")
    return [shows, paper, "\n".join(ours)]


def waf_sensitivity(frame: pd.DataFrame, outputs: list[Path], caption: Path | None = None,
                    sequences: list[dict] = ()) -> None:
    """Four panels (reclaim unit size, over-provisioning, handles, deallocations): the WAF of each
    system and policy's repetitions, placement honoured (solid) and ignored (dashed), with the
    paper's measured WAF as labelled horizontal lines; the caption
    (:func:`waf_sensitivity_caption`, about ``sequences``) written to ``caption`` (default:
    beside ``outputs[0]``)."""
    plt = pyplot()
    from matplotlib import ticker, transforms
    with plt.style.context(STYLE):
        fig, axes = plt.subplots(1, 4, figsize=(12, 3.4), layout="constrained", sharey=True)
        if frame.empty:
            fig.suptitle("No what-if sweep in this run (no vm cell, or ftl.sweep: false)",
                         fontsize=9)
        ok = frame[frame["waf"].notna()] if not frame.empty else frame
        colors = {}
        for ax, (param, label, scale, log2) in zip(axes, SWEEP_PANELS):
            sel = ok[ok.parameter == param] if not ok.empty else ok
            for key, g in (sel.groupby(["system", "workload", "policy", "placement"],
                                       sort=False) if not sel.empty else []):
                series = f"{SYSTEM_LABEL.get(key[0], key[0])}, {key[1]}, " \
                         f"{POLICY_LABEL.get(key[2], key[2])}"
                color = colors.setdefault(series, f"C{len(colors) % 10}")
                g = g.sort_values("value")
                ax.plot(g["value"] / scale, g["waf"], marker="o", markersize=3, color=color,
                        linestyle="-" if key[3] == "honoured" else "--",
                        label=f"{series}, placement {key[3]}")
            if log2:
                ax.set_xscale("log", base=2)
                ax.xaxis.set_major_formatter(ticker.ScalarFormatter())
            if param == "deallocations":
                ax.set_xticks([0, 1], ["no", "yes"])
                ax.set_xlim(-0.2, 1.2)
            ax.set_xlabel(label)
            for (system, policies, waf), (color, style) in zip(
                    paper_waf(), itertools.cycle(PAPER_WAF_STYLES)):
                ax.axhline(waf, color=color, linestyle=style, linewidth=0.9,
                           label=_paper_waf_label(system, policies, waf))
                if ax is axes[-1]:
                    ax.text(1.01, waf, f"paper {SYSTEM_LABEL.get(system, system)} {waf:.2f}",
                            transform=transforms.blended_transform_factory(ax.transAxes,
                                                                           ax.transData),
                            ha="left", va="center", fontsize=6, color=color)
        axes[0].set_ylabel("device WAF (ours modelled; paper measured)")
        handles, labels = axes[0].get_legend_handles_labels()
        if handles:
            fig.legend(handles, labels, loc="outside lower center", ncol=2, fontsize=6)
        _save(fig, outputs)
    _write_caption(caption or caption_path(outputs[0]),
                   waf_sensitivity_caption(frame, sequences))
