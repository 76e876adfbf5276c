"""Runtime-RPS figures (the paper's Figures 4 and 5) with snapshot periods shaded."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib

matplotlib.use("agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from .aggregate import SYSTEM_LABEL  # noqa: E402
from .cells import POLICY_LABEL  # noqa: E402

STYLE = Path(__file__).with_name("slimio.mplstyle")
SHADE = {"wal_snapshot": ("tab:orange", "WAL-Snapshot"),
         "on_demand_snapshot": ("tab:purple", "On-Demand-Snapshot")}


def draw_cell(ax, record: dict, series: pd.DataFrame) -> None:
    s = series.dropna(subset=["client_rps"])
    ax.plot(s.t_s, s.client_rps, color="tab:blue", drawstyle="steps-pre",
            label="RPS (client, per 250 ms interval)")
    seen = set()
    for snap in record["snapshots"]:
        color, label = SHADE[snap["kind"]]
        ax.axvspan(snap["start_s"], snap["end_s"], color=color, alpha=0.25,
                   label=None if snap["kind"] in seen else label)
        seen.add(snap["kind"])
    ax.set_xlabel("time since workload start (s)")
    ax.set_ylabel("requests per second")
    ax.set_ylim(bottom=0)
    ax.legend(loc="lower left", fontsize=7)


def cell_figure(record_path: Path, series_path: Path, outputs: list[Path]) -> None:
    record = json.loads(Path(record_path).read_text())
    series = pd.read_csv(series_path)
    with plt.style.context(STYLE):
        fig, ax = plt.subplots(layout="constrained")
        draw_cell(ax, record, series)
        ax.set_title(f"{record['cell_id']}: {SYSTEM_LABEL.get(record['system'])}, "
                     f"{POLICY_LABEL[record['policy']]}", fontsize=9)
        for out in outputs:
            Path(out).parent.mkdir(parents=True, exist_ok=True)
            fig.savefig(out)
        plt.close(fig)


def comparison_figure(pairs: list[tuple[Path, Path]], outputs: list[Path], title: str) -> None:
    """One panel per cell (e.g. Figure 5: baseline vs SlimIO, Periodical-Log), shared axes."""
    with plt.style.context(STYLE):
        fig, axes = plt.subplots(len(pairs), 1, sharex=True, sharey=True, squeeze=False,
                                 figsize=(7.0, 0.4 + 2.4 * len(pairs)), layout="constrained")
        for ax, (record_path, series_path) in zip(axes[:, 0], pairs):
            record = json.loads(Path(record_path).read_text())
            draw_cell(ax, record, pd.read_csv(series_path))
            ax.set_title(f"{SYSTEM_LABEL.get(record['system'], record['system'])} "
                         f"({record['cell_id']})", fontsize=8)
        fig.suptitle(title, fontsize=9)
        for out in outputs:
            Path(out).parent.mkdir(parents=True, exist_ok=True)
            fig.savefig(out)
        plt.close(fig)
