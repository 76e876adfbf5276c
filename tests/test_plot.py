"""Figures 4 and 5 (runtime RPS, snapshot periods shaded), drawn from real cells (the captured
baseline and SlimIO fixtures) and checked against their data: the plotted series read back
from the axes, and the rendered pixels of each shaded snapshot period. The paper's numbers
beside them (each panel's note, each figure's caption) are checked against
results/reference/paper_tables.yaml and against the paper's text."""

import json

import numpy as np
import pandas as pd
import pytest
import yaml

from conftest import CELL_FIXTURES, FIXTURES
from slimio_repro import paths
from slimio_repro.parse import record as parse
from slimio_repro.aggregate import ftl_tables, plot

CELLS = {"baseline": "bare-baseline-redis-benchmark-periodical-r1",
         "slimio": "bare-slimio-redis-benchmark-periodical-r1"}


@pytest.fixture(scope="module")
def pairs(tmp_path_factory):
    """(record, time series) files of the real periodical cells, as parse_cell writes them."""
    tmp_path = tmp_path_factory.mktemp("cells")
    out = {}
    for system, cell in CELLS.items():
        record, series = parse.parse_cell(CELL_FIXTURES / cell)
        assert record["system"] == system and record["snapshots"]
        rec, csv = tmp_path / f"{cell}.json", tmp_path / f"{cell}.timeseries.csv"
        rec.write_text(json.dumps(record))
        series.to_csv(csv, index=False)
        out[system] = (rec, csv)
    return out


@pytest.fixture(scope="module")
def drawn(pairs, tmp_path_factory):
    """Figure 5 drawn and saved once for the module's tests, which only read it; the figure
    object kept for reading back."""
    tmp_path = tmp_path_factory.mktemp("fig5")
    figures, save = [], plot._save
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr(plot, "_save", lambda fig, outputs: (figures.append(fig),
                                                                 save(fig, outputs)))
        monkeypatch.setattr(plot.pyplot(), "close", lambda fig: None)
        outputs = [tmp_path / "figures" / "fig5_runtime_rps.png",
                   tmp_path / "figures" / "fig5_runtime_rps.pdf"]
        plot.runtime_rps_figure("fig5_runtime_rps", [pairs["baseline"], pairs["slimio"]],
                                outputs)
    (fig,) = figures
    yield fig, outputs
    plot.pyplot().close(fig)


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


# --- The paper's numbers beside the figures -------------------------------------------------

def paper_table3(system: str, policy: str = "periodical") -> dict:
    rows = yaml.safe_load((paths.REFERENCE_DIR / "paper_tables.yaml").read_text())
    return next(r for r in rows["table3_redis_benchmark"]
                if r["system"] == system and r["policy"] == policy)


def notes_of(fig) -> list[str]:
    """The paper-comparison note of each panel, top to bottom."""
    out = []
    for ax in fig.get_axes():
        (text,) = [t for t in ax.texts if t.get_gid() == plot.NOTE_GID]
        out.append(text.get_text())
    return out


def test_each_panel_notes_the_papers_table3_rps_and_ours(drawn, pairs):
    fig, _ = drawn
    baseline, slimio = notes_of(fig)
    records = {s: json.loads(pairs[s][0].read_text()) for s in pairs}
    for note, system in ((baseline, "baseline"), (slimio, "slimio")):
        paper = paper_table3(system)
        assert f"WAL-Only {paper['rps_wal_only']:,.0f}" in note
        assert f"WAL&Snapshot {paper['rps_wal_snapshot']:,.0f} RPS" in note
        ours = records[system]
        assert f"WAL-Only {ours['rps_wal_only']:,.0f} · WAL&Snapshot " \
               f"{ours['rps_wal_snapshot']:,.0f} RPS" in note.split("Ours")[1]
    # The paper's numbers as printed in its Table 3 and section 5.4.
    assert "WAL-Only 57,482 · WAL&Snapshot 42,301 RPS" in baseline
    assert "WAL-Only 75,676 · WAL&Snapshot 42,517 RPS" in slimio
    assert "70,000 and 80,000" in slimio
    # The ratio SlimIO/Baseline, the paper's (75,676 / 57,482 = 1.32) and ours.
    ours = " · ".join(f"{records['slimio'][k] / records['baseline'][k]:.2f}"
                      for k in ("rps_wal_only", "rps_wal_snapshot"))
    assert f"SlimIO/Baseline (WAL-Only · WAL&Snapshot):\n  paper 1.32 · 1.01; ours {ours}" \
        in slimio
    assert "/Baseline" not in baseline


def test_the_papers_rps_are_not_drawn_on_our_axes(drawn):
    """An order of magnitude apart (TCG guests): the paper's values are text, not lines."""
    fig, _ = drawn
    for ax in fig.get_axes():
        assert len(ax.get_lines()) == 1
        assert ax.get_ylim()[1] < paper_table3("slimio")["rps_wal_only"]
        # The note sits right of the panel, over none of the data.
        (note,) = [t for t in ax.texts if t.get_gid() == plot.NOTE_GID]
        assert note.get_position()[0] > 1 and note.get_transform() == ax.transAxes


def test_caption_beside_the_figure_names_the_papers_values_and_the_setups(drawn, pairs):
    _, (png, _) = drawn
    caption = png.with_name("fig5_runtime_rps.caption.txt")
    assert plot.caption_path(png) == caption
    text = caption.read_text()
    # What the figure shows and what the paper's Figure 5 showed.
    assert text.startswith("Figure 5: Baseline vs SlimIO (this reproduction): runtime RPS")
    assert '"runtime RPS remains stable between 70000 and 80,000, except during snapshot ' \
           'duration"' in text
    # The paper's Table 3 and its ratio; ours and our ratio.
    assert "Baseline: WAL-Only 57,481.86 RPS, WAL&Snapshot 42,300.51 RPS" in text
    assert "SlimIO: WAL-Only 75,675.66 RPS, WAL&Snapshot 42,516.72 RPS" in text
    assert "SlimIO/Baseline: WAL-Only 1.32, WAL&Snapshot 1.01" in text
    for system, (rec, _) in pairs.items():
        r = json.loads(rec.read_text())
        assert f"WAL-Only {r['rps_wal_only']:,.0f} RPS" in text
        # The scale and testbed of each cell, from its record.
        (line,) = [l for l in text.splitlines() if l.startswith(f"- {r['cell_id']}: ")]
        for fact in (f"testbed {r['testbed']}", f"Redis {r['redis_version']}",
                     f"{r['requests_completed']:,} SETs over a key range of "
                     f"{r['keyspace']:,} keys",
                     f"8-byte keys, {r['value_size_bytes']}-byte values, 50 clients",
                     f"repetition {r['rep']}"):
            assert fact in line, (fact, line)
        if r.get("accel"):
            assert f"accelerator {r['accel']}" in line
    # The paper's setup.
    for fact in ("FEMU v9.0 FDP SSD of 180 GB", "12 vCPUs", "28 M SETs",
                 "key range of 5.3 M keys", "4 KiB", "five repetitions"):
        assert fact in text, fact
    assert "not drawn on our axes" in text


def test_figure_4_says_the_paper_has_no_row_for_slimio_without_fdp(pairs, tmp_path):
    """SlimIO w/o FDP (here the real SlimIO cell relabelled): the paper gives no number."""
    record = json.loads(pairs["slimio"][0].read_text())
    record.update(system="slimio-nofdp",
                  cell_id=record["cell_id"].replace("-slimio-", "-slimio-nofdp-"))
    nofdp = tmp_path / "nofdp.json"
    nofdp.write_text(json.dumps(record))
    out = tmp_path / "figures" / "fig4_runtime_rps.png"
    plot.runtime_rps_figure("fig4_runtime_rps", [pairs["baseline"], (nofdp, pairs["slimio"][1])],
                            [out], caption=tmp_path / "fig4.caption.txt")
    text = (tmp_path / "fig4.caption.txt").read_text()
    assert "SlimIO w/o FDP: paper: no table value; §5.4 describes drops to zero under GC" \
        in text
    assert "Baseline: WAL-Only 57,481.86 RPS" in text
    assert "nosedive to zero" in text
    assert not plot.caption_path(out).exists()  # written where the rule asked, only there


def test_outside_snapshots_leaves_out_the_first_row_and_snapshot_intervals():
    series = pd.DataFrame({"t_s": [0.0, 1.0, 2.0, 3.0, 4.0, 5.0],
                           "client_rps": [0.0, 10.0, 20.0, 5.0, 40.0, 50.0]})
    got = plot.outside_snapshots({"snapshots": [{"start_s": 2.5, "end_s": 2.7}]}, series)
    # (2, 3] overlaps the snapshot; the first row closes no interval.
    assert got["min"] == 10.0
    assert got["p90"] == pytest.approx(pd.Series([10.0, 20.0, 40.0, 50.0]).quantile(0.9))


@pytest.fixture
def captured(monkeypatch):
    """Every figure plot._save is given, kept open for reading back."""
    figures, save = [], plot._save
    monkeypatch.setattr(plot, "_save", lambda fig, outputs: (figures.append(fig),
                                                             save(fig, outputs)))
    monkeypatch.setattr(plot.pyplot(), "close", lambda fig: None)
    return figures


def test_waf_sensitivity_has_the_papers_waf_as_labelled_lines(captured, tmp_path):
    from slimio_repro import ftl
    seq = ftl.replay_sequence([FIXTURES / "ftl" / "vm-slimio-redis-benchmark-periodical-r1"])
    out = tmp_path / "waf_sensitivity.png"
    plot.waf_sensitivity(ftl_tables.sweep_frame([seq]), [out], sequences=[seq])
    (fig,) = captured
    expected = {("Baseline", "Periodical-Log", 1.14), ("Baseline", "Always-Log", 1.24),
                ("SlimIO", "Periodical-Log and Always-Log", 1.00)}
    assert {(s, p, paper_table3(s.lower(), p.split("-")[0].lower())["waf"])
            for s, p, _ in expected} == expected
    for ax in fig.get_axes():
        refs = {line.get_label(): line.get_ydata()[0] for line in ax.get_lines()
                if line.get_label().startswith("paper")}
        assert refs == {f"paper (FEMU, measured): {s}, {p}: WAF {w:.2f}": w
                        for s, p, w in expected}
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "paper (FEMU, measured): Baseline, Always-Log: WAF 1.24" in legend
    assert {t.get_text() for t in fig.get_axes()[-1].texts} == {
        "paper Baseline 1.14", "paper Baseline 1.24", "paper SlimIO 1.00"}
    text = plot.caption_path(out).read_text()
    assert "Baseline 1.14 under Periodical-Log; Baseline 1.24 under Always-Log; " \
           "SlimIO 1.00 under Periodical-Log and Always-Log" in text
    assert "the paper's FEMU measurements" in text and "Ours are modelled, not measured" in text
    assert "- vm-slimio-redis-benchmark-periodical-r1: model femu-fdp; device 8.00 GiB" in text


def test_waf_sensitivity_without_a_sweep_still_shows_the_papers_waf(captured, tmp_path):
    out = tmp_path / "w.png"
    plot.waf_sensitivity(ftl_tables.sweep_frame([]), [out], caption=tmp_path / "w.txt")
    (fig,) = captured
    assert sorted(line.get_ydata()[0] for line in fig.get_axes()[0].get_lines()) == \
        [1.00, 1.14, 1.24]
    text = (tmp_path / "w.txt").read_text()
    assert "This run has no sweep" in text and "1.14" in text and "- none" in text
