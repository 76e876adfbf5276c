"""The report (results/report.html) opened in a real browser: headless Chromium (Debian's,
driven by Selenium through Debian's chromedriver). Built here from the committed cell
fixtures (real cells captured from the real tools) through the real stages: parse,
aggregate, figures, claims, report."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

from slimio_repro import claims, paths, report

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
        return {"title": driver.title, "images": images, "links": links, "ids": ids,
                "claim_rows": len(claim_rows),
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


def check_report(results: Path, screenshot: Path, expect_figures: list[str]) -> dict:
    """The checks every report must pass (also used on the e2e runs' reports)."""
    page = open_in_chromium(results / paths.REPORT, screenshot)
    assert screenshot.stat().st_size > 10_000, "the screenshot is empty"
    assert page["title"].startswith("SlimIO reproduction")
    assert page["claim_rows"] == len(claims.catalog.load()), "a claim is missing from the page"
    assert "holds:" in page["counts"] and "not testable here:" in page["counts"]
    for stem in expect_figures:
        assert f"figure-{stem}" in page["ids"], f"figure {stem} is not on the page"
    for stem, _ in report.html.TABLES + report.html.WAF_TABLES:
        if (results / "tables" / f"{stem}.md").exists():
            assert f"table-{stem}" in page["ids"], f"table {stem} is not on the page"
    assert broken(page, results) == []
    return page


def test_report_opens_in_chromium_with_every_claim_table_and_figure(fixture_results, tmp_path):
    page = check_report(fixture_results, tmp_path / "first-screen.png", ["fig5_runtime_rps"])
    assert any(src == "figures/fig5_runtime_rps.png" for src, _ in page["images"])
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


def test_report_refuses_to_be_written_outside_its_results(fixture_results, tmp_path):
    with pytest.raises(ValueError, match="must sit in the results directory"):
        report.write(fixture_results, tmp_path / "elsewhere.html")


def test_report_shows_the_crash_campaign(fixture_results, tmp_path):
    """With a crash campaign in the results (a real 8-iteration campaign's log, captured),
    the report shows its summary table and links its log; without one it says how to run
    it."""
    from slimio_repro import crash
    results = tmp_path / "results"
    shutil.copytree(fixture_results, results, symlinks=True)
    assert "make crash-campaign" in report.html.build(results)
    out = results / paths.CRASH_DIR
    out.mkdir()
    shutil.copy(Path(__file__).parent / "fixtures" / "crash" / "campaign.jsonl", out)
    records = [json.loads(line) for line in (out / "campaign.jsonl").open()]
    (out / "summary.md").write_text(crash.render_md(crash.summarize(records)))
    report.write(results)
    page = check_report(results, tmp_path / "shot.png", ["fig5_runtime_rps"])
    assert "crash" in page["ids"] and f"{paths.CRASH_DIR}/campaign.jsonl" in page["links"]
    html = (results / paths.REPORT).read_text()
    assert "<td>slimio</td>" in html and "<td>baseline</td>" in html
