"""The report (results/report.html) opened in a real browser: headless Chromium (Debian's,
driven by Selenium through Debian's chromedriver). Built here from the committed cell
fixtures (real cells captured from the real tools) through the real stages: parse,
aggregate, figures, claims, report; what the run should have made is what rule
render_report asks for in a dry run of the workflow."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

from conftest import plan_of, snakemake
from slimio_repro import claims, paths, report
from slimio_repro import aggregate
from slimio_repro.aggregate import ftl_tables, plot

# The run the fixtures complete: a bare matrix of their redis-benchmark cells (they have each
# of its cells, and more). VM_MOTIVATION: a vm run with every figure's systems and the
# motivation in `reproduce`, which the fixtures do not complete.
FIXTURE_RUN = {"matrix": {"testbeds": ["bare"], "systems": ["baseline", "slimio", "nopersist"],
                          "workloads": ["redis-benchmark"], "repetitions": 1}}
VM_MOTIVATION_RUN = {"matrix": {"testbeds": ["vm"],
                                "systems": ["baseline", "slimio", "slimio-nofdp"],
                                "workloads": ["redis-benchmark"], "policies": ["periodical"],
                                "repetitions": 1},
                     "motivation": {"in_reproduce": True}}


def planned_outputs(overrides: dict, work: Path) -> dict[str, str]:
    """What rule render_report asks for in a run of config/config.yaml with ``overrides``
    (relative to its results directory), each with the rule that makes it: a dry run's
    plan, read from its jobs as Snakemake prints them."""
    results = work / "results"
    proc = snakemake("-n", "--nolock", "--cores", "1", str(results / paths.REPORT),
                     "--config", f"results_dir={results}", f"build_dir={work / 'build'}",
                     *(f"{k}={json.dumps(v)}" for k, v in overrides.items()), check=True)
    maker, inputs = {}, None
    for rule, body in re.findall(r"^(?:local)?rule (\w+):\n((?: {4}.*\n)*)", proc.stdout,
                                 re.M):
        fields = dict(re.findall(r"^ {4}(\w+): (.*)$", body, re.M))
        maker.update((f, rule) for f in fields.get("output", "").split(", "))
        if rule == "render_report":
            inputs = fields["input"].split(", ")
    assert inputs, f"no render_report job in the dry run:\n{proc.stdout}"
    return {os.path.relpath(f, results): f"rule {maker[f]}" for f in inputs}


@pytest.fixture(scope="module")
def complete_run(fixture_results, tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """FIXTURE_RUN's results, completed by the stages that make what the fixtures lack (each
    cell's runtime-RPS figure, the WAF sensitivity figure), and its report built with what
    rule render_report asks for: (results, {file: rule that makes it})."""
    base = tmp_path_factory.mktemp("complete")
    expected = planned_outputs(FIXTURE_RUN, base / "plan")
    results = base / "results"
    shutil.copytree(fixture_results, results, symlinks=True)
    cell_dir = Path(paths.CELL_FIGURE_PATTERN).parent.as_posix()
    for f in expected:
        if Path(f).parent.as_posix() == cell_dir and f.endswith(".png"):
            cell = results / "cells" / f"{Path(f).stem}.json"
            plot.cell_figure(cell, cell.with_suffix(".timeseries.csv"),
                             [results / f, (results / f).with_suffix(".pdf")])
    waf = results / "figures" / "waf_sensitivity"
    plot.waf_sensitivity(ftl_tables.sweep_frame([]), [waf.with_suffix(".png"),
                                                  waf.with_suffix(".pdf")],
                         caption=waf.with_suffix(".caption.txt"), sequences=[])
    assert [f for f in expected if not (results / f).exists()] == [], \
        "the fixtures do not complete FIXTURE_RUN any more"
    report.write(results, expected=absolute(results, expected))
    return results, expected


@pytest.fixture(scope="module")
def vm_motivation_run(tmp_path_factory) -> dict[str, str]:
    """What rule render_report asks for in VM_MOTIVATION_RUN."""
    return planned_outputs(VM_MOTIVATION_RUN, tmp_path_factory.mktemp("vm-motivation"))


def absolute(results: Path, expected: dict[str, str]) -> dict[Path, str]:
    """``expected`` as rule render_report passes it (paths as Snakemake names them)."""
    return {results / f: maker for f, maker in expected.items()}


def copy_of(run: tuple[Path, dict[str, str]], tmp_path: Path) -> Path:
    results = tmp_path / "results"
    shutil.copytree(run[0], results, symlinks=True)
    return results


CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")


def open_in_chromium(report_file: Path, screenshot: Path) -> dict:
    """Open the report headless, screenshot its first screen, and collect what a reader
    would click: every image (loaded or not), every link (and whether its target exists)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    assert CHROMIUM.exists() and CHROMEDRIVER.exists(), (
        "Chromium and chromedriver come from the setup playbook (host_packages): run "
        "`make setup-host`")
    opts = webdriver.ChromeOptions()
    opts.binary_location = str(CHROMIUM)
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1280,900",
                "--disable-dev-shm-usage"):
        opts.add_argument(arg)
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=opts)
    try:
        driver.get(report_file.resolve().as_uri())
        driver.save_screenshot(str(screenshot))
        driver.execute_script("document.querySelectorAll('details').forEach(d => d.open = true)")
        WebDriverWait(driver, 30).until(lambda d: d.execute_script(
            "return Array.from(document.images).every(i => i.complete)"))
        images = driver.execute_script(
            "return Array.from(document.images).map(i => [i.getAttribute('src'), "
            "i.naturalWidth])")
        links = driver.execute_script(
            "return Array.from(document.querySelectorAll('a[href]')).map("
            "a => a.getAttribute('href'))")
        ids = set(driver.execute_script(
            "return Array.from(document.querySelectorAll('[id]')).map(e => e.id)"))
        claim_rows = driver.find_elements(By.CSS_SELECTOR, "#claims-table tr[id^='claim-']")
        # Each table as the reader sees it: its text, and the tables its Markdown became.
        rendered = driver.execute_script(
            "return Object.fromEntries(Array.from(document.querySelectorAll("
            "'div.table[id^=\"table-\"]')).map(d => [d.id, [d.innerText.trim().length, "
            "d.querySelectorAll('.table-body table').length]]))")
        outputs = driver.execute_script(
            "const e = document.getElementById('report-outputs'); "
            "return e ? JSON.parse(e.textContent) : null")
        return {"title": driver.title, "images": images, "links": links, "ids": ids,
                "claim_rows": len(claim_rows), "tables": rendered, "outputs": outputs,
                "counts": driver.find_element(By.ID, "verdict-counts").text,
                "external": driver.execute_script(
                    "return Array.from(document.querySelectorAll('[src],[href]')).map("
                    "e => e.getAttribute('src') || e.getAttribute('href')).filter("
                    "u => /^(https?:)?\\/\\//.test(u))")}
    finally:
        driver.quit()


def broken(page: dict, base: Path) -> list[str]:
    """Every image that did not load and every link whose target does not exist."""
    out = [f"image {src} did not load" for src, width in page["images"] if not width]
    for href in page["links"]:
        if href.startswith("#"):
            if href[1:] not in page["ids"]:
                out.append(f"link {href}: no such anchor")
            continue
        target = base / unquote(urlparse(href).path)
        if not target.exists():
            out.append(f"link {href}: {target} does not exist")
    return out + [f"external asset {u}" for u in page["external"]]


def missing_from(page: dict, results: Path) -> list[str]:
    """Every table and figure that should be on the page and is not there as a reader sees
    it: each the page lists (which, built by rule render_report, is everything the run
    should have made) must be rendered or loaded, and each in the results directory listed."""
    outputs = page["outputs"] or {"tables": [], "figures": []}
    out = [] if page["outputs"] else ["the page has no list of its tables and figures"]
    made = {p.relative_to(results).as_posix() for p in (results / "figures").rglob("*.png")}
    out += [f"figure {f} is in the results but not on the page"
            for f in sorted(made - set(outputs["figures"]))]
    out += [f"table {p.stem} is in the results but not on the page"
            for p in sorted((results / "tables").glob("*.md"))
            if p.stem not in outputs["tables"]]
    loaded = {src for src, width in page["images"] if width}
    out += [f"figure {f} is not loaded (naturalWidth 0, or no image)"
            for f in outputs["figures"] if f not in loaded]
    for stem in outputs["tables"]:
        text, rendered = page["tables"].get(f"table-{stem}", (0, 0))
        md = results / "tables" / f"{stem}.md"
        has_grid = md.exists() and any(line.startswith("|")
                                       for line in md.read_text().splitlines())
        if not text or (has_grid and not rendered):
            out.append(f"table {stem} is not rendered")
    return out


def check_report(results: Path, screenshot: Path, expect_figures: list[str] = (),
                 checked: bool = True) -> dict:
    """The checks every report must pass (also used on the e2e runs' reports): every table
    and figure the run should have made is on the page, rendered or loaded; ``checked``:
    the page was built with that list (by rule render_report), not without one."""
    page = open_in_chromium(results / paths.REPORT, screenshot)
    assert screenshot.stat().st_size > 10_000, "the screenshot is empty"
    assert page["title"].startswith("SlimIO reproduction")
    assert page["claim_rows"] == len(claims.catalog.load()), "a claim is missing from the page"
    assert "holds:" in page["counts"] and "not testable here:" in page["counts"]
    if checked:
        assert page["outputs"] and page["outputs"]["checked"], (
            "the report was built without the run's list of outputs (rule render_report "
            "passes it), so its completeness was not checked")
    for stem in expect_figures:
        assert f"figure-{stem}" in page["ids"], f"figure {stem} is not on the page"
    assert missing_from(page, results) == []
    assert broken(page, results) == []
    return page


def test_the_run_expects_what_its_plan_makes(complete_run, vm_motivation_run):
    """Rule render_report's inputs follow the plan: a runtime-RPS figure per cell, Figures 4
    and 5 where the matrix has their systems, Figure 2 and Tables 1-2 where the run includes
    the motivation."""
    _, expected = complete_run
    cells = plan_of(FIXTURE_RUN).matrix
    assert {f for f in expected if f.startswith("figures/runtime_rps/")
            and f.endswith(".png")} == {
        paths.CELL_FIGURE_PATTERN.format(**c.wildcards(), ext="png") for c in cells}
    for name in aggregate.RUNTIME_RPS_FIGURES:
        assert (f"figures/{name}.png" in expected) == bool(
            aggregate.runtime_rps_figure_cells(cells, name))
    for files, with_motivation in ((expected, False), (vm_motivation_run, True)):
        assert (f"{paths.MOTIVATION_FIGURE}.png" in files) == with_motivation
        for table in paths.MOTIVATION_TABLES:
            assert (f"tables/{table}.md" in files) == with_motivation
    assert vm_motivation_run[f"{paths.MOTIVATION_FIGURE}.png"] == "rule motivation_outputs"
    assert vm_motivation_run["figures/fig4_runtime_rps.png"] == "rule plot_fig4_runtime_rps"


def test_the_rule_builds_the_report_from_its_inputs(complete_run, tmp_path):
    """Rule render_report alone (the rest of the run is the completed fixtures): its inputs
    are the list the page is checked against, each named with the rule that makes it."""
    results = copy_of(complete_run, tmp_path)
    (results / paths.REPORT).unlink()
    snakemake("--nolock", "--cores", "1", str(results / paths.REPORT),
              "--allowed-rules", "render_report", "--config", f"results_dir={results}",
              f"build_dir={tmp_path / 'build'}",
              *(f"{k}={json.dumps(v)}" for k, v in FIXTURE_RUN.items()), check=True)
    expected = complete_run[1]
    log = (results / "logs" / "render_report.log").read_text()
    makers = {m: list(expected.values()).count(m) for m in set(expected.values())}
    assert log.startswith(f"{len(expected)} outputs of this run expected, made by: " + ", ".join(
        f"{m} ({n})" for m, n in sorted(makers.items())) + "\n"), log
    assert (f"every one of the {len(expected)} files this run&#39;s rules declare is here"
            in (results / paths.REPORT).read_text())


def test_a_complete_run_builds_with_every_table_and_figure_it_should_have(complete_run):
    results, expected = complete_run
    page = (results / paths.REPORT).read_text()
    assert (f"every one of the {len(expected)} files this run&#39;s rules declare is here"
            in page)
    for f in expected:
        if f.endswith(".png"):
            assert f'src="{f}"' in page, f
        elif f.startswith("tables/") and f.endswith(".md"):
            assert f'id="table-{Path(f).stem}"' in page, f


def test_a_missing_figure_stops_the_build_and_names_it_and_its_rule(complete_run, tmp_path):
    """A run without Figure 5 (or a cell's figure) gets no report; the earlier one stays."""
    results = copy_of(complete_run, tmp_path)
    before = (results / paths.REPORT).read_bytes()
    (results / "figures" / "fig5_runtime_rps.png").unlink()
    cell = next(f for f in complete_run[1] if f.startswith("figures/runtime_rps/")
                and f.endswith(".png"))
    (results / cell).unlink()
    with pytest.raises(report.MissingOutputs) as err:
        report.write(results, expected=absolute(results, complete_run[1]))
    assert "2 of the outputs this run should have made are missing" in str(err.value)
    assert "figures/fig5_runtime_rps.png (made by rule plot_fig5_runtime_rps)" in str(err.value)
    assert f"{cell} (made by rule plot_cell_runtime_rps)" in str(err.value)
    assert (results / paths.REPORT).read_bytes() == before
    assert sorted(p.name for p in results.glob("report*")) == [paths.REPORT]


def test_a_missing_table_stops_the_build_and_writes_nothing(complete_run, tmp_path):
    results = copy_of(complete_run, tmp_path)
    (results / paths.REPORT).unlink()
    (results / "tables" / "table4_ratios.md").unlink()
    with pytest.raises(report.MissingOutputs,
                       match=r"1 of the outputs this run should have made is missing:\n"
                             r"  tables/table4_ratios.md \(made by rule aggregate_tables\)"):
        report.write(results, expected=absolute(results, complete_run[1]))
    assert list(results.glob("report*")) == []


def test_a_run_without_figure_2_or_4_where_its_plan_has_them_gets_no_report(
        complete_run, vm_motivation_run, tmp_path):
    """The issue's case: the bare fixtures' run judged as the vm run with the motivation
    and SlimIO w/o FDP, which would have made Figures 2 and 4 and Tables 1-2."""
    results = copy_of(complete_run, tmp_path)
    with pytest.raises(report.MissingOutputs) as err:
        report.build(results, absolute(results, vm_motivation_run))
    for f, rule in [("figures/fig2_snapshot_analysis.png", "motivation_outputs"),
                    ("figures/fig4_runtime_rps.png", "plot_fig4_runtime_rps"),
                    ("tables/table1_snapshot_impact.md", "motivation_outputs"),
                    ("tables/table2_fs_write_path_cpu.md", "motivation_outputs")]:
        assert f"  {f} (made by rule {rule})\n" in str(err.value)
    assert "fig5_runtime_rps" not in str(err.value)


def test_without_the_runs_list_the_page_shows_what_is_there_and_says_so(fixture_results):
    page = report.build(fixture_results)
    assert "Not checked for completeness" in page
    assert 'src="figures/fig5_runtime_rps.png"' in page
    outputs = json.loads(re.search(r'<script type="application/json" id="report-outputs">'
                                   r'(.*?)</script>', page).group(1))
    assert outputs["checked"] is False
    assert set(outputs["tables"]) == {p.stem for p in (fixture_results / "tables").glob("*.md")}


def test_the_verdicts_show_their_label_and_undecided_its_own_style(fixture_results,
                                                                   tmp_path):
    """The label ('undecided at n=1'), the band, a style of its own; and a verdict file from
    before the undecided verdict (no label, no band) still renders."""
    page = report.build(fixture_results)
    verdicts = json.loads((fixture_results / paths.VERDICT_FILES["json"]).read_text())
    undecided = [v for v in verdicts["verdicts"] if v["verdict"] == "undecided"]
    assert undecided, "the fixtures' run has no undecided claim to show"
    v = undecided[0]
    row = re.search(rf'<tr id="claim-{re.escape(v["claim_id"])}">(.*?)</tr>', page, re.S)
    assert f'class="verdict undecided"' in row.group(1)
    assert f'>{v["verdict_label"]}<' in row.group(1) and "at n=" in v["verdict_label"]
    assert "band [" in row.group(1)
    assert ".undecided {" in page and "t interval on the claim's effect" in page
    assert "bootstrap" not in page
    results = tmp_path / "results"
    shutil.copytree(fixture_results, results, symlinks=True)
    # A claim judged over two looks of `decide` shows its history.
    looked = dict(verdicts, verdicts=[dict(r, history="n=2: undecided [0.9, 1.6] (95%); "
                                           "n=5: holds [1.2, 1.4] (97.5%)")
                                      if r is v else r for r in verdicts["verdicts"]])
    (results / paths.VERDICT_FILES["json"]).write_text(json.dumps(looked))
    row = re.search(rf'<tr id="claim-{re.escape(v["claim_id"])}">(.*?)</tr>',
                    report.build(results), re.S)
    assert "Looks (slimio-repro decide): n=2: undecided [0.9, 1.6] (95%); n=5: holds" in \
        row.group(1)
    old = dict(verdicts, verdicts=[{k: x for k, x in r.items()
                                    if k not in ("verdict_label", "band_low", "band_high",
                                                 "needed_n")}
                                   for r in verdicts["verdicts"] if r["verdict"] != "undecided"],
               counts={k: n for k, n in verdicts["counts"].items() if k != "undecided"})
    (results / paths.VERDICT_FILES["json"]).write_text(json.dumps(old))
    page = report.build(results)
    claims_table = page[page.index('<table id="claims-table">'):page.index("</table>")]
    assert '<span class="undecided">' not in page and "band [" not in claims_table
    assert claims_table.count('<tr id="claim-') == len(old["verdicts"])


def test_report_opens_in_chromium_with_every_claim_table_and_figure(complete_run, tmp_path):
    results, expected = complete_run
    page = check_report(results, tmp_path / "first-screen.png", ["fig5_runtime_rps"])
    assert set(page["outputs"]["figures"]) >= {f for f in expected if f.endswith(".png")}
    assert set(page["outputs"]["tables"]) >= {Path(f).stem for f in expected
                                              if f.startswith("tables/") and f.endswith(".md")}
    assert any(h.startswith("raw/bare-slimio-redis-benchmark-periodical-r1/")
               for h in page["links"]), "no link to a cell's raw directory"


def test_browser_check_catches_a_broken_image_and_link(fixture_results, tmp_path):
    """The check itself can fail: a report with a missing figure and a dead link."""
    results = tmp_path / "results"
    shutil.copytree(fixture_results, results, symlinks=True)
    (results / "figures" / "fig5_runtime_rps.png").unlink()
    shutil.rmtree(results / "raw" / "bare-baseline-ycsb-a-periodical-r1")
    page = open_in_chromium(results / paths.REPORT, tmp_path / "shot.png")
    problems = broken(page, results)
    assert "image figures/fig5_runtime_rps.png did not load" in problems
    assert any("raw/bare-baseline-ycsb-a-periodical-r1/" in p for p in problems)


def test_browser_check_requires_every_figure_and_table_the_page_lists(complete_run, tmp_path):
    """A figure gone after the build, a table whose Markdown no longer renders: each named
    (check_report fails on any)."""
    results = copy_of(complete_run, tmp_path)
    cell = next(f for f in complete_run[1] if f.startswith("figures/runtime_rps/")
                and f.endswith(".png"))
    (results / cell).unlink()
    page = (results / paths.REPORT).read_text()
    start = page.index('<div class="table" id="table-table3_ratios">')
    body = page.index('<div class="table-body">', start) + len('<div class="table-body">')
    end = page.index("</div>", body)
    (results / paths.REPORT).write_text(page[:body] + page[end:])
    page = open_in_chromium(results / paths.REPORT, tmp_path / "shot.png")
    assert missing_from(page, results) == [
        f"figure {cell} is not loaded (naturalWidth 0, or no image)",
        "table table3_ratios is not rendered"]


def test_report_refuses_to_be_written_outside_its_results(fixture_results, tmp_path):
    with pytest.raises(ValueError, match="must sit in the results directory"):
        report.write(fixture_results, tmp_path / "elsewhere.html")


def test_report_shows_the_crash_campaign(complete_run, tmp_path):
    """With a crash campaign in the results (a real 8-iteration campaign's log, captured),
    the report shows its summary table and links its log; without one it says how to run
    it."""
    from slimio_repro import crash
    results = copy_of(complete_run, tmp_path)
    expected = absolute(results, complete_run[1])
    assert "make crash-campaign" in report.html.build(results, expected)
    out = results / paths.CRASH_DIR
    out.mkdir()
    shutil.copy(Path(__file__).parent / "fixtures" / "crash" / "campaign.jsonl", out)
    records = [json.loads(line) for line in (out / "campaign.jsonl").open()]
    (out / "summary.md").write_text(crash.render_md(crash.summarize(records)))
    report.write(results, expected=expected)
    page = check_report(results, tmp_path / "shot.png", ["fig5_runtime_rps"])
    assert "crash" in page["ids"] and f"{paths.CRASH_DIR}/campaign.jsonl" in page["links"]
    html = (results / paths.REPORT).read_text()
    assert "<td>slimio</td>" in html and "<td>baseline</td>" in html


def test_a_partial_run_lists_its_missing_cells_with_their_logs(fixture_results, tmp_path):
    """A run made from the cells that finished (config finished_cells_only): the page says so
    at its top and lists each missing cell with a link to its log, the log's last lines
    (escaped) and what it left in its .partial directory; a claim not judged for them has a
    style of its own; the rest of the page is as in a complete run."""
    from slimio_repro.claims import judge
    from slimio_repro.run import finished
    results = tmp_path / "results"
    shutil.copytree(fixture_results, results, symlinks=True)
    failed = plan_of({"matrix": {"testbeds": ["vm"], "systems": ["baseline", "slimio"],
                                 "workloads": ["ycsb-a"], "policies": ["always"],
                                 "repetitions": 1}}).cells
    log = results / paths.CELL_LOG_PATTERN.format(**failed[0].cell.wildcards())
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text("".join(f"line {i}\n" for i in range(100))
                   + "error: <script>alert(1)</script> & the VM did not boot\n")
    (results / "raw" / f"{failed[0].id}.partial").mkdir()
    # A figure of the cell from an earlier run of it: not this run's, not shown.
    stale = results / paths.CELL_FIGURE_PATTERN.format(**failed[0].cell.wildcards(), ext="png")
    stale.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(results / "figures" / "fig5_runtime_rps.png", stale)
    missing = finished.missing(failed, results)
    assert missing[0]["log_tail"].startswith("line 71\n") and missing[1]["log_tail"] is None
    finished.write(missing, results / paths.MISSING_CELLS)
    claims.judge_run(results / paths.CELLS_TABLE, paths.CLAIMS_FILE, results / "claims",
                     missing=[dict(m, log=str(results / m["log"])) for m in missing])
    page = report.build(results)
    top = page[:page.index('<section id="claims">')]
    assert 'id="partial-run"' in top and "A partial run: 2 cells did not finish." in top
    assert "2 more cells of the run did not finish" in top
    section = top[top.index('<section id="missing-cells">'):]
    first, second = (section[section.index(f'id="missing-{c.id}"'):] for c in failed)
    rel = log.relative_to(results).as_posix()
    assert f'Log: <a href="{rel}">{rel}</a>' in first
    assert f'<a href="raw/{failed[0].id}.partial/">' in first
    assert "&lt;script&gt;alert(1)&lt;/script&gt; &amp; the VM did not boot" in first
    assert "<script>alert" not in page and "line 70\n" not in first
    assert "No log (" in second and "the cell did not start" in second
    assert stale.name not in page and 'src="figures/fig5_runtime_rps.png"' in page
    verdicts = json.loads((results / paths.VERDICT_FILES["json"]).read_text())
    not_judged = [v for v in verdicts["verdicts"] if v["verdict"] == judge.NOT_JUDGED]
    assert not_judged, "no claim of the fixtures' run needs the vm ycsb-a cells"
    row = re.search(rf'<tr id="claim-{re.escape(not_judged[0]["claim_id"])}">(.*?)</tr>',
                    page, re.S).group(1)
    assert 'class="verdict notjudged"' in row and "Missing cells (did not finish): " in row
    assert f"not judged, cells failed: {len(not_judged)}" in page
    # Every cell there again: nothing of it is left.
    finished.write([], results / paths.MISSING_CELLS)
    claims.judge_run(results / paths.CELLS_TABLE, paths.CLAIMS_FILE, results / "claims")
    page = report.build(results)
    assert 'id="partial-run"' not in page and 'id="missing-cells"' not in page
    assert "not judged" not in page and "Missing cells" not in page
