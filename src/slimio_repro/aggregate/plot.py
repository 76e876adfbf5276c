"""Runtime-RPS figures (the paper's Figures 4 and 5) with snapshot periods shaded."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib

matplotlib.use("agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from ..guest import POLICY_LABEL  # noqa: E402
from .tables import RUNTIME_RPS_FIGURES, SYSTEM_LABEL  # noqa: E402

STYLE = Path(__file__).with_name("slimio.mplstyle")
SHADE = {"wal_snapshot": ("tab:orange", "WAL-Snapshot"),
         "on_demand_snapshot": ("tab:purple", "On-Demand-Snapshot")}
RPS_LABEL = "RPS (client, per 250 ms interval)"


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
    plt.close(fig)


def cell_figure(record_path: Path, series_path: Path, outputs: list[Path]) -> None:
    record = json.loads(Path(record_path).read_text())
    series = pd.read_csv(series_path)
    with plt.style.context(STYLE):
        fig, ax = plt.subplots(layout="constrained")
        draw_cell(ax, record, series)
        ax.set_title(f"{record['cell_id']}: {SYSTEM_LABEL.get(record['system'])}, "
                     f"{POLICY_LABEL[record['policy']]}", fontsize=9)
        _save(fig, outputs)


def comparison_figure(pairs: list[tuple[Path, Path]], outputs: list[Path], title: str) -> None:
    """One panel per cell, stacked, sharing both axes, with one legend for all panels.

    Panels rather than one overlaid plot: each cell has its own snapshot periods, and shading
    two sets of them on one axes would hide which drop belongs to which system.
    """
    with plt.style.context(STYLE):
        fig, axes = plt.subplots(len(pairs), 1, sharex=True, sharey=True, squeeze=False,
                                 figsize=(7.0, 0.6 + 2.2 * len(pairs)), layout="constrained")
        legend = {}
        for ax, (record_path, series_path) in zip(axes[:, 0], pairs):
            record = json.loads(Path(record_path).read_text())
            draw_cell(ax, record, pd.read_csv(series_path), legend=False)
            ax.set_title(f"{SYSTEM_LABEL.get(record['system'], record['system'])}, "
                         f"{record['testbed']} ({record['cell_id']})", fontsize=8, loc="left")
            for handle, label in zip(*ax.get_legend_handles_labels()):
                legend.setdefault(label, handle)
        for ax in axes[:-1, 0]:
            ax.set_xlabel("")
        fig.suptitle(title, fontsize=9)
        fig.legend(legend.values(), legend.keys(), loc="outside lower center",
                   ncol=len(legend), fontsize=7)
        _save(fig, outputs)


def runtime_rps_figure(name: str, pairs: list[tuple[Path, Path]], outputs: list[Path]) -> None:
    """Figure ``name`` of RUNTIME_RPS_FIGURES from its cells' (record, time series) pairs."""
    title, systems = RUNTIME_RPS_FIGURES[name]
    drawn = [json.loads(Path(r).read_text())["system"] for r, _ in pairs]
    missing = [s for s in systems if s not in drawn]
    if missing:
        raise ValueError(f"{name} compares {', '.join(systems)} but has no cell of "
                         f"{', '.join(missing)}: add them to matrix.systems")
    comparison_figure(pairs, outputs, f"{title}: runtime RPS, redis-benchmark, "
                      f"{POLICY_LABEL['periodical']} (first repetition)")


SWEEP_PANELS = [("ru_bytes", "reclaim unit size (MiB)", 2**20, True),
                ("op", "over-provisioning (fraction of user capacity)", 1, False),
                ("handles", "placement handles", 1, True),
                ("deallocations", "deallocations told to the device", 1, False)]


def waf_sensitivity(frame: pd.DataFrame, outputs: list[Path]) -> None:
    """Four panels (reclaim unit size, over-provisioning, handles, deallocations): the WAF of each
    system and policy's repetitions, placement honoured (solid) and ignored (dashed)."""
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
                ax.xaxis.set_major_formatter(matplotlib.ticker.ScalarFormatter())
            if param == "deallocations":
                ax.set_xticks([0, 1], ["no", "yes"])
                ax.set_xlim(-0.2, 1.2)
            ax.set_xlabel(label)
        axes[0].set_ylabel("device WAF (modelled)")
        handles, labels = axes[0].get_legend_handles_labels()
        if handles:
            fig.legend(handles, labels, loc="outside lower center", ncol=2, fontsize=6)
        _save(fig, outputs)
