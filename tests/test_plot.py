"""Figures 4 and 5 (runtime RPS, snapshot periods shaded) from real cell records."""

import json

import pytest

from conftest import CELL_FIXTURES
from slimio_repro.parse import cell as parse
from slimio_repro.aggregate import plot


@pytest.fixture
def periodical_pairs(tmp_path):
    """(record, time series) files per system, each a copy of the real periodical fixture
    cell relabelled as that system (only the drawing is under test here)."""
    raw = CELL_FIXTURES / "bare-baseline-redis-benchmark-periodical-r1"
    record, series = parse.parse_cell(raw)
    assert record["snapshots"], "the fixture must have snapshot periods to shade"
    pairs = {}
    for system in ("baseline", "slimio", "slimio-nofdp"):
        rec, csv = tmp_path / f"{system}.json", tmp_path / f"{system}.timeseries.csv"
        rec.write_text(json.dumps(dict(record, system=system,
                                       cell_id=record["cell_id"].replace("baseline", system))))
        series.to_csv(csv, index=False)
        pairs[system] = (rec, csv)
    return pairs


@pytest.mark.parametrize("name, systems", [("fig4_runtime_rps", ("baseline", "slimio-nofdp")),
                                           ("fig5_runtime_rps", ("baseline", "slimio"))])
def test_runtime_rps_figure_writes_png_and_pdf(periodical_pairs, tmp_path, name, systems):
    outputs = [tmp_path / "figures" / f"{name}.png", tmp_path / "figures" / f"{name}.pdf"]
    plot.runtime_rps_figure(name, [periodical_pairs[s] for s in systems], outputs)
    assert outputs[0].read_bytes().startswith(b"\x89PNG") and outputs[0].stat().st_size > 10_000
    assert outputs[1].read_bytes().startswith(b"%PDF") and outputs[1].stat().st_size > 5_000


def test_runtime_rps_figure_refuses_a_missing_system(periodical_pairs, tmp_path):
    with pytest.raises(ValueError, match=r"fig4_runtime_rps .* no cell of slimio-nofdp"):
        plot.runtime_rps_figure("fig4_runtime_rps", [periodical_pairs["baseline"],
                                                     periodical_pairs["slimio"]],
                                [tmp_path / "fig4.png"])
    assert not (tmp_path / "fig4.png").exists()


def test_comparison_figure_has_a_panel_per_cell(periodical_pairs, tmp_path, monkeypatch):
    saved = []
    monkeypatch.setattr(plot, "_save", lambda fig, outputs: saved.append(fig))
    request_close = plot.plt.close
    plot.comparison_figure([periodical_pairs[s] for s in ("baseline", "slimio", "slimio-nofdp")],
                           [], "three panels")
    (fig,) = saved
    axes = fig.get_axes()
    assert [a.get_title(loc="left").split(",")[0] for a in axes] == [
        "Baseline", "SlimIO", "SlimIO w/o FDP"]
    # Shared axes, and each panel shades its own cell's snapshot periods.
    assert axes[0].get_shared_x_axes().joined(axes[0], axes[2])
    n_snapshots = len(json.loads(periodical_pairs["slimio"][0].read_text())["snapshots"])
    assert all(len(a.patches) == n_snapshots for a in axes)
    # One legend for the figure (RPS line and the snapshot kinds), none per panel.
    assert len(fig.legends) == 1 and all(a.get_legend() is None for a in axes)
    assert plot.RPS_LABEL in [t.get_text() for t in fig.legends[0].get_texts()]
    request_close(fig)
