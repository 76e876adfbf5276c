"""Figures 4 and 5 (runtime RPS, snapshot periods shaded), drawn from real cells (the captured
baseline and SlimIO fixtures) and checked against their data: the plotted series read back
from the axes, and the rendered pixels of each shaded snapshot period."""

import json

import numpy as np
import pytest

from conftest import CELL_FIXTURES
from slimio_repro.parse import cell as parse
from slimio_repro.aggregate import plot

CELLS = {"baseline": "bare-baseline-redis-benchmark-periodical-r1",
         "slimio": "bare-slimio-redis-benchmark-periodical-r1"}


@pytest.fixture
def pairs(tmp_path):
    """(record, time series) files of the real periodical cells, as parse_cell writes them."""
    out = {}
    for system, cell in CELLS.items():
        record, series = parse.parse_cell(CELL_FIXTURES / cell)
        assert record["system"] == system and record["snapshots"]
        rec, csv = tmp_path / f"{cell}.json", tmp_path / f"{cell}.timeseries.csv"
        rec.write_text(json.dumps(record))
        series.to_csv(csv, index=False)
        out[system] = (rec, csv)
    return out


@pytest.fixture
def drawn(pairs, tmp_path, monkeypatch):
    """Figure 5 drawn and saved; the figure object kept for reading back."""
    figures, save = [], plot._save
    monkeypatch.setattr(plot, "_save", lambda fig, outputs: (figures.append(fig),
                                                             save(fig, outputs)))
    monkeypatch.setattr(plot.plt, "close", lambda fig: None)
    outputs = [tmp_path / "figures" / "fig5_runtime_rps.png",
               tmp_path / "figures" / "fig5_runtime_rps.pdf"]
    plot.runtime_rps_figure("fig5_runtime_rps", [pairs["baseline"], pairs["slimio"]], outputs)
    (fig,) = figures
    return fig, outputs


def test_figure_is_written_as_png_and_pdf(drawn):
    _, (png, pdf) = drawn
    assert png.read_bytes().startswith(b"\x89PNG") and png.stat().st_size > 10_000
    assert pdf.read_bytes().startswith(b"%PDF") and pdf.stat().st_size > 5_000


def test_each_panel_plots_its_cells_series(drawn, pairs):
    fig, _ = drawn
    axes = fig.get_axes()
    assert [a.get_title(loc="left").split(",")[0] for a in axes] == ["Baseline", "SlimIO"]
    for ax, system in zip(axes, ("baseline", "slimio")):
        series = __import__("pandas").read_csv(pairs[system][1]).dropna(subset=["client_rps"])
        (line,) = ax.get_lines()
        assert np.array_equal(line.get_xdata(), series.t_s.to_numpy())
        assert np.array_equal(line.get_ydata(), series.client_rps.to_numpy())
        assert line.get_ydata().max() > 0


def test_shaded_periods_are_the_snapshots_in_the_pixels(drawn, pairs):
    """Rendered pixels: halfway through each snapshot the panel is tinted with its kind's
    colour; halfway between the workload's start and the first snapshot it is not."""
    fig, _ = drawn
    fig.canvas.draw()
    image = np.asarray(fig.canvas.buffer_rgba())[:, :, :3].astype(float) / 255
    height = image.shape[0]
    white = np.ones(3)
    tint = {kind: 0.75 * white + 0.25 * np.array(__import__("matplotlib").colors.to_rgb(c))
            for kind, (c, _) in plot.SHADE.items()}

    def pixel(ax, x):
        # Median over a patch of the panel's upper third (9 pixels wide) around x: the RPS
        # line and the grid lines are a pixel or two wide.
        y0, y1 = ax.get_ylim()
        patch = []
        for frac in np.linspace(0.7, 0.95, 15):
            px, py = ax.transData.transform((x, y0 + frac * (y1 - y0)))
            for dx in range(-4, 5):
                patch.append(image[int(round(height - py)), int(round(px)) + dx])
        return np.median(patch, axis=0)

    for ax, system in zip(fig.get_axes(), ("baseline", "slimio")):
        snapshots = json.loads(pairs[system][0].read_text())["snapshots"]
        assert len(ax.patches) == len(snapshots)
        for snap in snapshots:
            got = pixel(ax, (snap["start_s"] + snap["end_s"]) / 2)
            assert np.abs(got - tint[snap["kind"]]).max() < 0.04, (system, snap, got)
        before = pixel(ax, snapshots[0]["start_s"] / 2)
        assert np.abs(before - white).max() < 0.04, (system, before)


def test_runtime_rps_figure_refuses_a_missing_system(pairs, tmp_path):
    with pytest.raises(ValueError, match=r"fig4_runtime_rps .* no cell of slimio-nofdp"):
        plot.runtime_rps_figure("fig4_runtime_rps", [pairs["baseline"], pairs["slimio"]],
                                [tmp_path / "fig4.png"])
    assert not (tmp_path / "fig4.png").exists()


def test_one_legend_for_the_figure(drawn):
    fig, _ = drawn
    assert len(fig.legends) == 1 and all(a.get_legend() is None for a in fig.get_axes())
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert labels == [plot.RPS_LABEL, "WAL-Snapshot", "On-Demand-Snapshot"]
    assert fig.get_axes()[0].get_shared_x_axes().joined(*fig.get_axes())
