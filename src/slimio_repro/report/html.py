"""results/report.html from a run's results directory.

Everything the page shows is read from the results directory (verdicts, tables' Markdown,
figures and their captions, per-cell records and provenance, the cells that did not finish
with their logs' ends); images and links are relative to it, so the page works offline
wherever the directory is copied, with no external asset.

A run made with config finished_cells_only (the Makefile's second Snakemake after a cell
failed) is made from the cells that finished: the page says so at its top and lists the
others (pathsmod.MISSING_CELLS), each with its log, the log's last lines and what the cell
left in its ``.partial`` directory.

The page is complete or it is not written. What a run should have made is not listed here:
rule render_report (workflows/rules/report.smk) passes its inputs, which are the outputs the
aggregate, motivation and claims rules declare for the run's plan, as ``expected``, each with
the rule that makes it; one missing stops the build (:class:`MissingOutputs`) and names it.
Given no such list (``slimio-repro report``), the page shows every table and figure in the
directory and says that its completeness was not checked. Either way it carries the list of
tables and figures it shows (``<script id="report-outputs">``) for the browser check.
"""

from __future__ import annotations

import html
import json
import os
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path

import jinja2
import markdown
import pandas as pd

from .. import paths as pathsmod
from ..claims import band_text, ci_text, node_classes, number, paper_text

TEMPLATE = Path(__file__).with_name("report.html.j2")

# How the page presents a table or figure that it shows: its title and its place, in the
# paper's order; the WAF evidence has its own section. Which ones a run has is not decided
# here (module docstring); one not named here is shown too, after these, titled by its file.
TABLES = {
    "table1_snapshot_impact": "Table 1: stock Redis's throughput and memory with a snapshot "
                              "running (EXT4, F2FS)",
    "table2_fs_write_path_cpu": "Table 2: the file system's write path in the snapshot "
                                "process's CPU",
    "table3_redis_benchmark": "Table 3: redis-benchmark",
    "table3_ratios": "Table 3: ratios to the baseline",
    "table4_ycsb_a": "Table 4: YCSB-A",
    "table4_ratios": "Table 4: ratios to the baseline",
    "table5_recovery": "Table 5: recovery",
    "table5_ratios": "Table 5: ratios to the baseline",
    "roofline": "The device roofline (fio on the namespace)",
    "timing": "Where the time goes, per cell",
}
WAF_TABLES = {
    "ftl_waf": "Modelled device WAF (FTL model, placement honoured and ignored)",
    "waf_sensitivity": "WAF sensitivity: reclaim unit size, over-provisioning, handles",
}
FIGURES = {
    "fig2_snapshot_analysis": "Figure 2: where a snapshot's time goes, and its throughput "
                              "against the ideal",
    "fig4_runtime_rps": "Figure 4: Baseline vs SlimIO w/o FDP, runtime RPS (Periodical-Log)",
    "fig5_runtime_rps": "Figure 5: Baseline vs SlimIO, runtime RPS (Periodical-Log)",
}
WAF_FIGURES = {"waf_sensitivity": "Modelled WAF against device geometry"}
# The paper's figures drawn from given cells of the matrix (each system's first repetition).
CELL_DRAWN_FIGURES = ("fig4_runtime_rps", "fig5_runtime_rps")
# Each cell's own runtime-RPS figure goes with the cells, not with the paper's figures.
CELL_FIGURE_DIR = Path(pathsmod.CELL_FIGURE_PATTERN).parent.as_posix()

VERDICT_CLASS = {"holds": "holds", "holds in direction only": "direction",
                 "does not hold": "fails", "undecided": "undecided",
                 "not testable here": "untestable", "not judged: cells failed": "notjudged"}


class MissingOutputs(FileNotFoundError):
    """Outputs the run should have made are not in its results directory, so the report is
    not written. ``missing`` maps each (relative to the results directory) to what makes it."""

    def __init__(self, results: Path, missing: Mapping[str, str]):
        self.results = results
        self.missing = dict(missing)
        files = "\n".join(f"  {f} (made by {maker})" for f, maker in self.missing.items())
        super().__init__(
            f"the report of {results} is not written: {len(self.missing)} of the outputs "
            f"this run should have made {'is' if len(self.missing) == 1 else 'are'} "
            f"missing:\n{files}\nmake them (`make reproduce` makes everything the run "
            "should have; `snakemake --cores all FILE` makes one file), then render the "
            "report again")


def expected_outputs(results: Path,
                     expected: Mapping[str | Path, str] | Iterable[str | Path] | None
                     ) -> dict[str, str]:
    """``expected`` as {path relative to ``results``: what makes it}. Its paths are as
    Snakemake gives a rule's inputs: absolute, or relative to the working directory; a
    plain list of paths says nothing of what makes each ("the pipeline")."""
    if expected is None:
        return {}
    items = expected.items() if isinstance(expected, Mapping) else \
        ((f, "the pipeline") for f in expected)
    base = os.path.abspath(results)
    out = {}
    for f, maker in items:
        rel = os.path.relpath(os.path.abspath(f), base)
        out[Path(rel).as_posix() if not rel.startswith("..") else os.path.abspath(f)] = maker
    return out


def _shown(results: Path, expected: Mapping[str, str], directory: str, suffix: str,
           recursive: bool = False) -> list[str]:
    """The files of ``directory`` (relative to the results directory) with ``suffix`` that
    the page shows: the expected ones and any other there."""
    found = (results / directory).rglob(f"*{suffix}") if recursive \
        else (results / directory).glob(f"*{suffix}")
    present = {p.relative_to(results).as_posix() for p in found}
    wanted = {f for f in expected if f.endswith(suffix) and (
        f.startswith(f"{directory}/") if recursive else Path(f).parent.as_posix() == directory)}
    return sorted(present | wanted)


def _ordered(stems: list[str], *known: Mapping[str, str]) -> list[str]:
    """``stems`` in the order of the ``known`` presentations, then the rest by name."""
    order = [s for k in known for s in k]
    return sorted(stems, key=lambda s: (order.index(s) if s in order else len(order), s))


def _md(path: Path) -> str | None:
    """A table's Markdown as HTML, its text escaped: Markdown passes raw HTML through, and a
    table's cells can hold strings from the configuration (the page inserts this unescaped)."""
    if not path.exists():
        return None
    md = markdown.Markdown(extensions=["tables"])
    md.preprocessors.deregister("html_block")
    md.inlinePatterns.deregister("html")
    return md.convert(path.read_text())


def _caption(results: Path, png: str, default: str) -> str:
    cap = results / Path(png).with_suffix(".caption.txt")
    return cap.read_text().strip() if cap.exists() else default


def _provenance(results: Path, records: pd.DataFrame) -> list[tuple[str, str]]:
    """The run's provenance in brief, from its records and its first cell's provenance."""
    out = []
    def values(col):
        return ", ".join(sorted({str(v) for v in records[col].dropna()})) \
            if col in records else "-"
    out.append(("Cells", f"{len(records)} ({values('testbed')}; systems {values('system')}; "
                         f"workloads {values('workload')}; policies {values('policy')}; "
                         f"up to {int(records['rep'].max()) if len(records) else 0} "
                         "repetitions)"))
    out.append(("Profile", values("profile")))
    out.append(("Redis", values("redis_version")))
    out.append(("Accelerator", values("accel")))
    out.append(("Device model", values("device_model")))
    out.append(("Host CPU", values("host_cpu_model")))
    classes = node_classes(records)
    jobs = int(records["slurm_job_id"].notna().sum()) if "slurm_job_id" in records else 0
    out.append(("Nodes", f"{len(classes)} kind{'s' if len(classes) != 1 else ''}: "
                         f"{'; '.join(classes) or '-'}"
                         + (f"; {jobs} cells ran as SLURM jobs" if jobs else "")
                         + (" (WARNING: unlike nodes; ratios between their cells compare "
                            "machines too)" if len(classes) > 1 else "")))
    out.append(("Git commit", values("git_commit") + (" (dirty tree)" if "git_dirty" in records
                                                      and records["git_dirty"].any() else "")))
    if len(records):
        out.append(("UTC", f"{records['utc_start'].min()} to {records['utc_end'].max()}"))
    for testbed in sorted(set(records.get("testbed", []))):
        first = records[records["testbed"] == testbed].iloc[0]["cell_id"]
        prov_file = results / "raw" / first / "provenance.json"
        if not prov_file.exists():
            continue
        prov = json.loads(prov_file.read_text())
        tools = prov.get("tools", {})
        out.append((f"{testbed}: tools", ", ".join(
            f"{k} {v}" for k, v in tools.items()
            if k in ("redis-server", "kernel", "nvme-cli", "mkfs.f2fs", "mkfs.ext4", "fio"))))
        vm = prov.get("vm")
        if vm:
            dev = vm["device_profile"]
            out.append(("vm: device", f"{dev['name']}: {dev['description']}"))
            out.append(("vm: accelerator", f"{vm['accel']} ({vm['accel_reason']})"))
            out.append(("vm: emulator", vm["tools"].get("qemu", "-")))
            out.append(("vm: guest", f"{vm['cpus']} vCPUs, {vm['memory_mb']} MiB; kernel "
                                     f"{prov['host']['kernel']}"))
    return out


def _missing_cells(results: Path) -> list[dict]:
    """The cells of the run that did not finish (pathsmod.MISSING_CELLS, written by rule
    list_missing_cells; [] without the file): each with its log and the log's last lines as
    they were listed, and what it left in its ``.partial`` directory, linked where there."""
    path = results / pathsmod.MISSING_CELLS
    if not path.exists():
        return []
    out = []
    for m in json.loads(path.read_text())["missing"]:
        log, partial = m.get("log"), m.get("partial")
        out.append({"id": m["cell_id"], "log": log,
                    "log_href": log if log and (results / log).is_file() else None,
                    "tail": m.get("log_tail"),
                    "partial": f"{partial}/" if partial and (results / partial).is_dir()
                    else None})
    return out


def _caveats(records: pd.DataFrame) -> list[str]:
    """What this environment cannot show, derived from the run where it can be."""
    out = []
    accels = set(records.get("accel", pd.Series(dtype=str)).dropna())
    if "tcg" in accels:
        out.append("The VMs ran under TCG (no usable KVM on this host): every CPU cost is "
                   "emulated, so absolute RPS, latencies and times are an order of magnitude "
                   "off the paper's and only ratios measured side by side mean anything; "
                   "claims on absolute numbers are not testable here.")
    if "qemu" in set(records.get("device_model", pd.Series(dtype=str)).dropna()):
        out.append("QEMU's FDP emulation runs no garbage collection: the device-measured WAF is "
                   "1.00 by construction. WAF with garbage collection comes from the FTL model "
                   "(the artifact's FEMU FTL replayed on our NVMe traces) and is labelled "
                   "modelled.")
    profiles = set(records.get("profile", pd.Series(dtype=str)).dropna())
    if profiles and profiles != {"paper"}:
        out.append(f"Scale: the {', '.join(sorted(profiles))} profile runs "
                   f"{int(records['requests'].max()):,} requests per cell against the paper's "
                   "28 M SETs (5.3 M keys, 4 KiB values, 20 GB snapshots on a 180 GB FEMU SSD); "
                   "snapshots are megabytes, not gigabytes, and the device is written a small "
                   "fraction of once, so GC cannot arise the way it does in the paper.")
    out.append("The artifact's own evidence is in doubt where it depends on FEMU's placement: "
               "its branch head (691eacb9f) sends every host write to handle 0, and its FDP "
               "statistics log returns no data (claims so marked carry the doubt beside their "
               "verdict).")
    return out


def build(results: Path, expected: Mapping[str | Path, str] | Iterable[str | Path] | None = None
          ) -> str:
    """The report's HTML for the results directory `results`. ``expected``: the outputs the
    run should have made, each with what makes it (module docstring); if any is missing,
    :class:`MissingOutputs` names them all."""
    results = Path(results)
    wanted = expected_outputs(results, expected)
    missing = {f: maker for f, maker in wanted.items() if not (results / f).exists()}
    if missing:
        raise MissingOutputs(results, missing)
    verdicts = json.loads((results / pathsmod.VERDICT_FILES["json"]).read_text())
    records = pd.read_csv(results / pathsmod.CELLS_TABLE)
    rows = []
    for v in verdicts["verdicts"]:
        # verdict_label and the band are newer than some verdict files: those still render.
        rows.append({**v, "paper": paper_text(v), "measured_text": number(v["measured"]),
                     "ci": ci_text(v), "label": v.get("verdict_label") or v["verdict"],
                     "band": band_text(v), "missing_cells": v.get("missing_cells") or "",
                     "needed_n": v.get("needed_n"), "css": VERDICT_CLASS.get(v["verdict"], "")})
    missing = _missing_cells(results)

    def exists(rel: str) -> bool:
        return rel in wanted or (results / rel).exists()

    def tables(stems, titles):
        return [{"id": s, "title": titles.get(s, s), "html": _md(results / "tables" / f"{s}.md"),
                 "csv": f"tables/{s}.csv" if exists(f"tables/{s}.csv") else None}
                for s in stems]

    def figures(files, titles):
        out = []
        for f in files:
            stem = Path(f).stem
            title = titles.get(stem, stem)
            pdf = Path(f).with_suffix(".pdf").as_posix()
            out.append({"id": stem, "title": title, "src": f,
                        "pdf": pdf if exists(pdf) else None,
                        "caption": _caption(results, f, title)})
        return out

    table_stems = [Path(f).stem for f in _shown(results, wanted, "tables", ".md")]
    waf_table_stems = _ordered([s for s in table_stems if s in WAF_TABLES], WAF_TABLES)
    main_table_stems = _ordered([s for s in table_stems if s not in WAF_TABLES], TABLES)
    pngs = _shown(results, wanted, "figures", ".png", recursive=True)
    # A partial run shows no figure of a cell that did not finish: one there is from an
    # earlier run of that cell (so is a Figure 4 or 5 its rules did not ask for).
    gone = {m["id"] for m in missing}
    pngs = [f for f in pngs if not gone or (
        Path(f).stem not in gone and (Path(f).stem not in CELL_DRAWN_FIGURES
                                      or expected is None or f in wanted))]
    cell_pngs = [f for f in pngs if Path(f).parent.as_posix() == CELL_FIGURE_DIR]
    paper_pngs = {Path(f).stem: f for f in pngs if f not in cell_pngs}
    waf_pngs = [paper_pngs[s] for s in _ordered([s for s in paper_pngs if s in WAF_FIGURES],
                                                 WAF_FIGURES)]
    main_pngs = [paper_pngs[s] for s in _ordered([s for s in paper_pngs
                                                   if s not in WAF_FIGURES], FIGURES)]
    # What the page shows, for the browser check: it must find each table rendered and
    # each image loaded.
    outputs = {"checked": expected is not None,
               "tables": main_table_stems + waf_table_stems,
               "figures": main_pngs + waf_pngs + cell_pngs}
    if expected is not None:
        n_tables = sum(1 for f in wanted if f.startswith("tables/") and f.endswith(".md"))
        n_figures = sum(1 for f in wanted if f.endswith(".png"))
        completeness = (f"Complete: every one of the {len(wanted)} files this run's rules "
                        f"declare is here ({n_tables} tables and {n_figures} figures among "
                        "them); the page is not written without them.")
        if missing:
            completeness += (f" The rules declared them for the cells that finished: "
                             f"{len(missing)} did not (below), and nothing here is made from "
                             "them.")
    else:
        completeness = ("Not checked for completeness: this page was rendered without the "
                        "run's list of outputs (slimio-repro report) and shows the tables "
                        "and figures that are in the results directory. The pipeline's rule "
                        "render_report (make reproduce) renders it only when every table and "
                        "figure the run should have made is there.")

    cells = []
    for _, r in records.sort_values("cell_id").iterrows():
        raw = f"raw/{r['cell_id']}/"
        cells.append({"id": r["cell_id"], "testbed": r["testbed"], "system": r["system"],
                      "workload": r["workload"], "policy": r["policy"], "rep": int(r["rep"]),
                      "rps": number(r.get("rps_avg")), "raw": raw,
                      "provenance": raw + "provenance.json",
                      "has_raw": (results / raw).is_dir()})
    info = verdicts["run"]
    glance = (f"This run: {info['cells']} cells of the {', '.join(info['profiles'])} profile "
              f"on {', '.join(info['testbeds'])} ({', '.join(info['accels'])}; device "
              f"{', '.join(info['device_models'])}), Redis {', '.join(info['redis_versions'])}, "
              f"up to {info['repetitions']} repetitions, commit "
              f"{', '.join(c[:12] for c in info['git_commits'])}.")
    if missing:
        k = len(missing)
        glance += (f" {k} more cell{'s' if k != 1 else ''} of the run did not finish and "
                   f"{'are' if k != 1 else 'is'} left out of every table, figure and verdict "
                   "below.")
    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined,
                             loader=jinja2.FileSystemLoader(TEMPLATE.parent))
    return env.get_template(TEMPLATE.name).render(
        glance=glance, completeness=completeness, outputs=outputs,
        counts=verdicts["counts"], n_claims=len(rows), verdicts=rows,
        confidence=verdicts["confidence_level"], provenance=_provenance(results, records),
        caveats=_caveats(records), tables=tables(main_table_stems, TABLES),
        waf_tables=tables(waf_table_stems, WAF_TABLES),
        figures=figures(main_pngs, FIGURES), waf_figures=figures(waf_pngs, WAF_FIGURES),
        cell_figures=[{"id": Path(f).stem, "src": f} for f in cell_pngs], cells=cells,
        missing=missing,
        crash=_md(results / pathsmod.CRASH_DIR / "summary.md"),
        crash_log=f"{pathsmod.CRASH_DIR}/campaign.jsonl",
        summary=(results / pathsmod.VERDICT_FILES["summary"]).read_text()
        if (results / pathsmod.VERDICT_FILES["summary"]).exists() else "",
        escape=html.escape)


def made_by(files: Iterable[str | Path], rules: Iterable) -> dict[str, str]:
    """Each of ``files`` -> the rule of ``rules`` that makes it ('rule NAME'; Snakemake's
    rules, or anything with ``name`` and ``is_producer(path)``), 'the pipeline' if none."""
    rules = [r for r in rules if r.name != "render_report"]
    return {str(f): next((f"rule {r.name}" for r in rules if r.is_producer(str(f))),
                         "the pipeline") for f in files}


def write_for_rule(report: str | Path, expected: Mapping[str, str]) -> Path:
    """Rule render_report's job: the report at ``report`` with ``expected`` (the outputs the
    run should have made -> the rule that makes each, :func:`made_by`); says on stdout (the
    rule's log) what it expected."""
    makers = Counter(expected.values())
    print(f"{len(expected)} outputs of this run expected, made by: "
          + ", ".join(f"{m} ({n})" for m, n in sorted(makers.items())))
    out = write(Path(report).parent, Path(report), expected)
    print(out)
    return out


def write(results: Path, out: Path | None = None,
          expected: Mapping[str | Path, str] | Iterable[str | Path] | None = None) -> Path:
    """Write the report (default results/report.html) and return its path. Nothing is
    written if the build fails (:class:`MissingOutputs`): an earlier report stays as it was."""
    results = Path(results)
    out = Path(out) if out else results / pathsmod.REPORT
    if out.resolve().parent != results.resolve():
        raise ValueError(f"the report must sit in the results directory {results} (its links "
                         f"are relative to it), not at {out}")
    text = build(results, expected)
    tmp = out.with_suffix(".html.tmp")
    tmp.write_text(text)
    tmp.replace(out)
    return out
