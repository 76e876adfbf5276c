"""The claims stage: the claims file (schema, coverage of the pipeline's metrics), the
verdict rules, looks and decide's plan, and the nightly regression's comparison."""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess

import numpy as np
import pandas as pd
import pytest
import yaml

from conftest import FIXTURES, VENV_BIN, snakemake
from slimio_repro import ftl, paths
from slimio_repro import motivation
from slimio_repro.aggregate import ftl_tables
from slimio_repro.claims import catalog, judge, regress, render, stats
from slimio_repro.parse.motivation_records import parse_motivation_cell


def test_claims_file_has_sixty_claims_each_with_a_reasoned_tolerance():
    claims = catalog.load()
    assert len(claims) >= 60
    for c in claims:
        assert len(c.tolerance.reason) >= 10, c.id
        assert c.quote and c.where, c.id
    doubted = [c for c in claims if c.doubt]
    assert any("waf" in m for c in doubted for m in c.metrics()), \
        "the WAF claims carry the artifact's doubt"


def test_every_metric_a_claim_names_is_produced_or_the_claim_says_why_not(fixture_results,
                                                                            tmp_path):
    produced = set(pd.read_csv(fixture_results / paths.CELLS_TABLE).columns)
    vm_record = json.loads(next((fixture_results / "cells").glob("vm-*.json")).read_text())
    produced |= set(vm_record)
    # The FTL stage's columns, merged into the records by the aggregate stage.
    seq = tmp_path / "seq.json"
    seq.write_text(json.dumps(ftl.replay_sequence(
        [FIXTURES / "ftl" / "vm-baseline-redis-benchmark-periodical-r1"], "femu-fdp", False)))
    produced |= set(ftl_tables.load_ftl([seq])[0].columns)
    # The motivation's records (Table 1's cells and the motivation cells, with what the
    # aggregate stage derives), from real cells' raw directories.
    mot = FIXTURES / "motivation"
    records = []
    for raw in sorted(mot.glob("vm-*-motivation-r1")):
        records.append(tmp_path / f"{raw.name}.json")
        records[-1].write_text(json.dumps(parse_motivation_cell(raw)))
    produced |= set(pd.concat(motivation.records(
        records, sorted(mot.glob("vm-*-periodical-r1.json")))).columns)
    for c in catalog.load():
        if c.not_testable:
            continue
        missing = c.metrics() - produced
        assert not missing, f"claim {c.id} names {missing}, which no stage produces; mark it " \
                            "not_testable with the reason"


def test_a_text_value_always_comes_with_the_tables_value():
    raw = yaml.safe_load(paths.CLAIMS_FILE.read_text())["claims"]
    for d in raw:
        if "text_value" in d:
            assert d["text_value"] != d["paper_value"], d["id"]


def _bad(tmp_path, **change):
    good = yaml.safe_load(paths.CLAIMS_FILE.read_text())
    claim = next(d for d in good["claims"] if d["kind"] == "ratio" and "not_testable" not in d)
    claim.update(change)
    f = tmp_path / "claims.yaml"
    f.write_text(yaml.safe_dump({"claims": [claim]}))
    return f, claim["id"]


@pytest.mark.parametrize("change, message", [
    ({"tolerance": {"rule": "relative", "reason": "because it is so"}}, "needs a value"),
    ({"kind": "absolute"}, "an absolute claim has no reference"),
    ({"testbed": "moon"}, "is not one of"),
    ({"paper_value": "1.3x"}, "is not of type 'number'"),
])
def test_a_bad_claim_is_refused_with_its_id(tmp_path, change, message):
    f, cid = _bad(tmp_path, **change)
    with pytest.raises(catalog.ClaimsError, match=message) as e:
        catalog.load(f)
    assert cid in str(e.value)


def test_a_bad_claims_file_stops_the_run_at_planning_time(tmp_path):
    f, cid = _bad(tmp_path, kind="absolute")
    proc = snakemake("-n", "reproduce", "--config", f"claims={{file: {f}}}",
                     f"results_dir={tmp_path / 'results'}")
    assert proc.returncode != 0
    assert cid in proc.stderr + proc.stdout and "claims.file" in proc.stderr + proc.stdout


# --- verdict rules, on records shaped like cells.csv ------------------------------------

def _records(slimio, baseline, metric="rps_wal_only", testbed="vm"):
    rows = []
    for system, values in (("slimio", slimio), ("baseline", baseline)):
        for rep, v in enumerate(values, 1):
            rows.append({"testbed": testbed, "system": system, "workload": "redis-benchmark",
                         "policy": "always", "rep": rep, "profile": "smoke", "accel": "tcg",
                         "device_model": "qemu", "host_cpu_model": "x", metric: v})
    return pd.DataFrame(rows)


def _claim(**kw):
    base = dict(id="t", source="paper", where="§5", quote="q", kind="ratio",
                measure=catalog.Measure(
                    catalog.Term("rps_wal_only", "slimio", "redis-benchmark", "always"),
                    catalog.Term("rps_wal_only", "baseline", "redis-benchmark", "always")),
                paper_value=1.5, direction="higher",
                tolerance=catalog.Tolerance("relative", "ratios: a quarter", 0.25),
                testbed="vm")
    base.update(kw)
    return catalog.Claim(**base)


@pytest.mark.parametrize("slimio, verdict", [
    ([150, 150, 150], judge.HOLDS),             # 1.5: the paper's value
    ([110, 111, 109], judge.DIRECTION_ONLY),    # 1.1: faster, but 27 % short of 1.5
    ([90, 91, 89], judge.FAILS),                # 0.9: slower
])
def test_verdict_follows_side_and_tolerance(slimio, verdict):
    v = judge.judge(_claim(), _records(slimio, [100, 100, 100]))
    assert v.verdict == verdict, v.reason
    assert v.measured == pytest.approx(np.mean(slimio) / 100)
    assert v.ci_low <= v.measured <= v.ci_high and v.n == 3


def test_a_ratio_above_the_bound_is_said_to_be_out_of_reach():
    """The bound (nopersist) at 1.2x the baseline: the paper's 1.5x cannot be reached, and
    the reason says so with the number; a ceiling above the paper's value says nothing."""
    rows = _records([110, 111, 109], [100, 100, 100])
    bound = [{"testbed": "vm", "system": "nopersist", "workload": "redis-benchmark",
              "policy": "none", "rep": r, "profile": "smoke", "accel": "tcg",
              "device_model": "qemu", "host_cpu_model": "x", "rps_wal_only": v}
             for r, v in enumerate((120, 121, 119), 1)]
    low = judge.judge_all([_claim()], pd.concat([rows, pd.DataFrame(bound)]))[0]
    assert low.verdict == judge.DIRECTION_ONLY and low.ceiling == pytest.approx(1.2)
    assert "is 1.200x the Baseline here: the paper's 1.500 cannot be reached" in low.reason
    assert low.row()["ceiling"] == pytest.approx(1.2)
    for b in bound:
        b["rps_wal_only"] *= 2
    high = judge.judge_all([_claim()], pd.concat([rows, pd.DataFrame(bound)]))[0]
    assert high.ceiling == pytest.approx(2.4) and "cannot be reached" not in high.reason
    alone = judge.judge_all([_claim()], rows)[0]
    assert alone.ceiling is None and alone.reason == low.reason.split("; the bound")[0]


def test_equal_claims_hold_inside_the_band_only():
    c = _claim(direction="equal", paper_value=1.0,
               tolerance=catalog.Tolerance("relative", "memory: within five percent", 0.05))
    assert judge.judge(c, _records([103] * 2, [100] * 2)).verdict == judge.HOLDS
    assert judge.judge(c, _records([110] * 2, [100] * 2)).verdict == judge.FAILS


def test_untestable_names_the_missing_cells_and_the_unmet_condition():
    v = judge.judge(_claim(testbed="bare"), _records([1, 2], [1, 2]))
    assert v.verdict == judge.UNTESTABLE
    assert "bare-slimio-redis-benchmark-always-r*" in v.reason and "matrix.testbeds" in v.reason
    c = _claim(kind="absolute", measure=catalog.Measure(
        catalog.Term("rps_wal_only", "slimio", "redis-benchmark", "always")),
        direction="equal", requires=("native_cpu",))
    v = judge.judge(c, _records([1, 2], [1, 2]))
    assert v.verdict == judge.UNTESTABLE and "tcg" in v.reason
    v = judge.judge(_claim(not_testable="needs Table 2's perf profile"), _records([1], [1]))
    assert v.verdict == judge.UNTESTABLE and "perf" in v.reason


def test_a_wide_interval_is_undecided_and_n1_always_is():
    """The paper's value itself, measured noisily: the interval straddles both edges, so
    the verdict is undecided and names them and the repetitions that would decide it."""
    v = judge.judge(_claim(), _records([80, 150, 200], [100, 100, 100]))
    assert v.verdict == judge.UNDECIDED and v.label == "undecided at n=3"
    assert v.ci_low < 1.125 and v.ci_high > 1.875
    assert "lower edge 1.125 and upper edge 1.875" in v.reason
    assert v.needed_n > 3 and f"about {v.needed_n} repetitions" in v.reason
    v = judge.judge(_claim(), _records([150], [100]))
    assert v.verdict == judge.UNDECIDED and v.ci_low is None and "no interval" in v.reason


def test_ratio_interval_matches_the_delta_method_for_large_samples():
    """Theory: for large normal samples the interval of the ratio of means approaches the
    delta method's +-1.96 standard errors (to 1 % of the ratio's half-width)."""
    rng = np.random.default_rng(1)
    a, b = rng.normal(150, 10, 400), rng.normal(100, 10, 400)
    lo, hi = judge.ratio_interval(a, b)
    r = a.mean() / b.mean()
    se = r * np.sqrt((a.std(ddof=1) / a.mean()) ** 2 / len(a)
                     + (b.std(ddof=1) / b.mean()) ** 2 / len(b))
    assert lo == pytest.approx(r - 1.96 * se, abs=0.01 * 1.96 * se)
    assert hi == pytest.approx(r + 1.96 * se, abs=0.01 * 1.96 * se)


# --- the nightly regression --------------------------------------------------------------

def _scaled_run(src, dst, factor):
    """A copy of a run whose SlimIO cells' RPS is multiplied by factor (a slowed SlimIO)."""
    shutil.copytree(src, dst, symlinks=True)
    cells = pd.read_csv(dst / paths.CELLS_TABLE)
    slim = cells.system == "slimio"
    for col in ("rps_wal_only", "rps_wal_snapshot", "rps_avg"):
        cells.loc[slim, col] *= factor
    cells.to_csv(dst / paths.CELLS_TABLE, index=False)
    for f in (dst / "tables").glob("table*_ratios.csv"):
        t = pd.read_csv(f)
        rps = t.metric.str.startswith("rps_")
        t.loc[rps, "ratio_to_baseline"] *= factor
        t.to_csv(f, index=False)
    return dst


def test_regression_is_flagged_only_beyond_the_measured_spread(fixture_results, tmp_path):
    a = _scaled_run(fixture_results, tmp_path / "a", 1.0)
    b = _scaled_run(fixture_results, tmp_path / "b", 0.97)
    ref = regress.make_reference([a, b])
    rps = [q for k, q in ref["quantities"].items() if "rps_avg" in k and k.startswith("ratio")]
    assert rps and all(q["tolerance"] == pytest.approx(0.03 * q["value"] / 0.985, rel=0.01)
                       for q in rps), "n=1 runs: the tolerance is the range between the runs"
    same = regress.compare(regress.fingerprint(a), ref)
    assert not same["regression"], regress.markdown(same)
    slow = regress.compare(regress.fingerprint(_scaled_run(fixture_results, tmp_path / "s",
                                                           0.8)), ref)
    assert slow["regression"]
    flagged = {r["quantity"] for r in slow["quantities"] if r["status"] == "regression"}
    assert any("slimio/rps_avg" in q for q in flagged), flagged
    assert "REGRESSION" in regress.markdown(slow)
    fast = regress.compare(regress.fingerprint(_scaled_run(fixture_results, tmp_path / "f",
                                                           1.3)), ref)
    assert not fast["regression"] and fast["counts"]["improved"] > 0


def test_a_quantity_the_run_no_longer_produces_is_a_regression(fixture_results, tmp_path):
    ref = regress.make_reference([fixture_results, _scaled_run(fixture_results,
                                                               tmp_path / "b", 0.99)])
    run = _scaled_run(fixture_results, tmp_path / "c", 1.0)
    cells = pd.read_csv(run / paths.CELLS_TABLE)
    cells[~((cells.system == "slimio") & (cells.workload == "ycsb-a"))].to_csv(
        run / paths.CELLS_TABLE, index=False)
    for f in (run / "tables").glob("table4_ratios.csv"):
        f.unlink()
    result = regress.compare(regress.fingerprint(run), ref)
    assert result["regression"] and result["counts"]["missing"] > 0


def test_regress_command_exits_one_on_a_regression(fixture_results, tmp_path):
    ref = tmp_path / "nightly.json"
    runs = [str(fixture_results), str(_scaled_run(fixture_results, tmp_path / "b", 0.98))]
    cli = [str(VENV_BIN / "slimio-repro")]
    made = subprocess.run(cli + ["nightly-reference", str(ref), *runs], capture_output=True,
                          text=True)
    assert made.returncode == 0, made.stderr
    again = subprocess.run(cli + ["nightly-reference", str(ref), *runs], capture_output=True,
                           text=True)
    assert again.returncode == 2 and "--force" in again.stderr
    ok = subprocess.run(cli + ["regress", runs[0], str(ref), "--out", str(tmp_path / "r1")],
                        capture_output=True, text=True)
    assert ok.returncode == 0 and "no regression" in ok.stdout, ok.stdout + ok.stderr
    slow = _scaled_run(fixture_results, tmp_path / "slow", 0.7)
    bad = subprocess.run(cli + ["regress", str(slow), str(ref), "--out", str(tmp_path / "r2")],
                         capture_output=True, text=True)
    assert bad.returncode == 1 and "REGRESSION" in bad.stdout
    assert json.loads((tmp_path / "r2.json").read_text())["regression"] is True


def test_the_summary_fits_one_screen():
    """Sixty judged claims (the smoke run judges about fifty) and the rest not testable."""
    claims = catalog.load()
    kinds = (judge.HOLDS, judge.DIRECTION_ONLY, judge.FAILS, judge.UNDECIDED)
    verdicts = [judge.Verdict(c, kinds[i % 4], "r", 1.234, 1.0, 1.5, 3, "3/3", needed_n=12)
                if i < 60 else judge.Verdict(c, judge.UNTESTABLE, f"needs reason {i % 7}: why")
                for i, c in enumerate(claims)]
    info = {"cells": 24, "profiles": ["smoke"], "testbeds": ["vm"], "accels": ["tcg"]}
    text = render.summary(verdicts, info, "results/claims/verdicts.md")
    assert len(text.splitlines()) <= 50 and max(map(len, text.splitlines())) <= 80, text
    for i, c in enumerate(claims[:60]):
        shown = c.id + ("*" if c.doubt else "") + {3: " 3->12"}.get(i % 4, "")
        if i % 4 != 3:      # every claim that holds, holds in direction only or fails
            assert shown in text, c.id
    # ... and where the screen runs out, the undecided ones are counted, not all listed.
    assert "undecided (15): " in text and ("(15 in all: results/claims/verdicts.md" in text
                                           or claims[3].id in text)


def test_records_without_the_environment_columns_are_judged_not_crashed():
    """A run parsed before accel/device_model existed: the condition is unmet, said so."""
    records = _records([150, 150], [100, 100]).drop(columns=["accel", "device_model"])
    c = _claim(kind="absolute", measure=catalog.Measure(
        catalog.Term("rps_wal_only", "slimio", "redis-benchmark", "always")),
        direction="equal", requires=("native_cpu",))
    v = judge.judge(c, records)
    assert v.verdict == judge.UNTESTABLE and "unrecorded" in v.reason
    assert judge.judge(_claim(), records).verdict == judge.HOLDS


def test_cells_on_unlike_nodes_are_warned_of_in_the_verdict_and_the_report():
    """A cluster ran the slimio cells on one kind of node, the baseline's on another: the
    ratio compares machines too, and the verdict and the report's header say so."""
    records = _records([150, 150], [100, 100])
    records["node_class"] = ["Xeon A, 64 CPUs, 512 GiB, kernel 6.1"] * 2 + \
        ["Xeon B, 32 CPUs, 256 GiB, kernel 6.1"] * 2
    records["slurm_job_id"] = ["11", "12", "13", "14"]
    for col in ("cell_id", "redis_version", "git_commit"):
        records[col] = [f"c{i}" for i in range(4)] if col == "cell_id" else "x"
    v = judge.judge(_claim(), records)
    assert "unlike nodes (Xeon A" in v.reason and "Xeon B" in v.reason
    md = render.markdown([v], render.run_info(records))
    assert "WARNING: the cells ran on 2 unlike kinds of node" in md
    assert "4 of the 4 cells ran as SLURM jobs" in md
    # Alike nodes: no warning, and the jobs are still said.
    records["node_class"] = "Xeon A, 64 CPUs, 512 GiB, kernel 6.1"
    v = judge.judge(_claim(), records)
    assert "unlike" not in v.reason
    md = render.markdown([v], render.run_info(records))
    assert "WARNING" not in md and "ran as SLURM jobs, on nodes of 1 kind" in md


# --- looks and more repetitions (slimio-repro decide) ------------------------------------

def _looked_records(slimio, baseline, minutes=(2.0, 1.0)):
    rows = _records(slimio, baseline)
    rows["policy"] = "periodical"
    rows["cell_total_s"] = [minutes[0] * 60] * len(slimio) + [minutes[1] * 60] * len(baseline)
    return rows


def _periodical_claim(**kw):
    m = catalog.Measure(catalog.Term("rps_wal_only", "slimio", "redis-benchmark",
                                     "periodical"),
                        catalog.Term("rps_wal_only", "baseline", "redis-benchmark",
                                     "periodical"))
    return _claim(measure=m, **kw)


def test_looks_judge_on_each_looks_cells_and_keep_the_first_decision():
    """Look 0 has 2 repetitions per set (undecided), look 1 adds three more to each: the
    claim is judged on the 2, then on the 5 at 97.5 %, and the history says both."""
    slimio = [140, 160, 150, 151, 149]
    records = _looked_records(slimio, [100, 101, 99, 100, 100])
    c = _periodical_claim()
    looks = [{"vm-slimio-redis-benchmark-periodical": 5,
              "vm-baseline-redis-benchmark-periodical": 5}]
    v = judge.judge_all([c], records, looks, repetitions=2)[0]
    assert v.verdict == judge.HOLDS and v.n == 5 and v.confidence == pytest.approx(0.975)
    assert [h[:2] for h in v.history] == [(2, judge.UNDECIDED), (5, judge.HOLDS)]
    assert "n=2: undecided" in v.row()["history"] and "(97.5%)" in v.row()["history"]
    # The same records without looks: one look at 95 % on all five.
    alone = judge.judge_all([c], records)[0]
    assert alone.confidence == pytest.approx(0.95) and alone.row()["history"] == ""
    # A claim decided at look 0 is not judged again.
    early = judge.judge_all([_periodical_claim(paper_value=1.5)],
                            _looked_records([150, 150.1, 90, 90], [100, 100, 100, 100]),
                            [{"vm-slimio-redis-benchmark-periodical": 4,
                              "vm-baseline-redis-benchmark-periodical": 4}], 2)[0]
    assert early.verdict == judge.HOLDS and early.n == 2 and len(early.history) == 1


def test_decide_plans_the_most_likely_decisions_per_minute_within_the_budget():
    """One undecided claim at n = 2: the plan takes both its sets to the number of
    repetitions with the best probability of deciding it per minute, at least
    decide.MIN_PROBABILITY likely, within the budget (that probability is
    stats.decide_probability's, at the next look's 97.5 %); a budget below it plans nothing;
    a second claim on the same sets is paid for once."""
    from slimio_repro.claims import decide
    records = _looked_records([130, 150], [100, 104], minutes=(2.0, 1.0))
    c = _periodical_claim(paper_value=1.3)
    v = judge.judge_all([c], records)[0]
    assert v.verdict == judge.UNDECIDED
    batch = decide.plan_batch([v], records, 60.0)
    (n,) = set(batch.reps.values())
    assert set(batch.reps) == {"vm-slimio-redis-benchmark-periodical",
                               "vm-baseline-redis-benchmark-periodical"}
    chance = float(stats.decide_probability(v.interval, c.band(), n, 0.975)[0])
    assert batch.expected == pytest.approx(chance) and chance >= decide.MIN_PROBABILITY
    assert batch.minutes == pytest.approx((n - 2) * 3.0) and batch.minutes <= 60.0
    assert batch.claims == ("t",)
    cheapest = decide.min_cost([v], records)
    assert cheapest <= batch.minutes
    assert decide.plan_batch([v], records, cheapest - 0.01).reps == {}
    assert decide.plan_batch([v], records, cheapest - 0.01).left_out == ("t",)
    twin = dataclasses.replace(v, claim=dataclasses.replace(c, id="twin"))
    both = decide.plan_batch([v, twin], records, 60.0)
    assert set(both.claims) == {"t", "twin"} and both.minutes == pytest.approx(batch.minutes)
    assert both.expected == pytest.approx(2 * chance)


def test_decide_plans_with_the_spread_of_the_runs_other_cell_sets():
    """Two cells per set that happen to agree (under 1 % apart) beside eight other sets of the same
    testbed whose rates spread by about 25 %: the claim is planned with the pooled spread,
    so with more repetitions, and a lower probability, than its own two cells promise."""
    from slimio_repro.claims import decide
    records = _looked_records([161, 162], [100, 100.7])
    rng = np.random.default_rng(3)
    others = pd.DataFrame([{"testbed": "vm", "system": f"s{i}", "workload": "ycsb-a",
                            "policy": "periodical", "rep": r + 1, "cell_total_s": 60,
                            "rps_wal_only": x}
                           for i in range(8) for r, x in enumerate(rng.normal(100, 25, 2))])
    c = _periodical_claim(paper_value=1.3)
    v = judge.judge_all([c], records)[0]
    assert v.verdict == judge.UNDECIDED     # 1.61 against the band's upper edge 1.625
    prior = decide.spread_prior(c, pd.concat([records, others]),
                                exclude={"vm-slimio-redis-benchmark-periodical",
                                         "vm-baseline-redis-benchmark-periodical"})
    pooled = np.mean([np.var(g, ddof=1) / np.mean(g) ** 2
                      for _, g in others.groupby("system")["rps_wal_only"]])
    assert prior == pytest.approx((pooled, 8))
    alone = decide.plan_batch([v], records, 600.0)
    shared = decide.plan_batch([v], pd.concat([records, others]), 600.0)
    assert max(shared.reps.values()) > max(alone.reps.values())
    assert shared.expected < alone.expected


@pytest.mark.parametrize("text, minutes", [("30m", 30), ("1h", 60), ("90s", 1.5), ("45", 45)])
def test_a_budget_reads_as_minutes(text, minutes):
    from slimio_repro.claims import decide
    assert decide.parse_budget(text) == pytest.approx(minutes)


def test_a_bad_budget_or_look_is_refused_by_name():
    from slimio_repro import plan as planmod
    from slimio_repro.claims import decide
    with pytest.raises(decide.DecideError, match="'half an hour'"):
        decide.parse_budget("half an hour")
    config = planmod.load([paths.CONFIG_DIR / "config.yaml"],
                          {"matrix": {"looks": [{"vm-slimio-ycsb-a-none": 4}]}})
    with pytest.raises(planmod.ConfigError, match=r"matrix.looks\[0\]: 'vm-slimio-ycsb-a-none'"):
        planmod.make(config, check_sources=False)
    config = planmod.load([paths.CONFIG_DIR / "config.yaml"], {"matrix": {"looks": [
        {"vm-slimio-ycsb-a-always": 4}, {"vm-slimio-ycsb-a-always": 3}]}})
    with pytest.raises(planmod.ConfigError, match="a look only adds repetitions"):
        planmod.make(config, check_sources=False)
    config = planmod.load([paths.CONFIG_DIR / "config.yaml"], {"matrix": {"looks": [
        {"vm-slimio-ycsb-a-always": 4}]}})
    cells = [c.cell.id for c in planmod.make(config, check_sources=False).cells]
    assert "vm-slimio-ycsb-a-always-r4" in cells and "vm-slimio-ycsb-a-periodical-r3" not in cells


def test_decide_refuses_a_run_of_another_profile(tmp_path):
    """Three repetitions in the records, two in the config given: decide stops before
    running anything and says to give the run's own config file."""
    from slimio_repro.claims import decide
    results = tmp_path / "results"
    (results / "tables").mkdir(parents=True)
    _looked_records([150, 151, 149], [100, 101, 99]).to_csv(results / paths.CELLS_TABLE)
    with pytest.raises(decide.DecideError, match="give decide the run's own --configfile"):
        decide.run(results, [paths.CONFIG_DIR / "config.yaml"], 2, 30, snakemake="false")
    assert not (results / decide.LOOKS_FILE).exists()


def _gone(*cells, motivation=False):
    """Missing cells (judge.MISSING_COLUMNS) from (system, policy, rep)."""
    return [{"cell_id": f"vm-{s}-redis-benchmark-{p}-r{r}", "testbed": "vm", "system": s,
             "workload": "redis-benchmark", "policy": p, "rep": r, "motivation": motivation,
             "log": f"results/logs/run_cell/vm-{s}-redis-benchmark-{p}-r{r}.log"}
            for s, p, r in cells]


def test_a_claim_whose_cells_failed_is_not_judged_and_one_partly_missing_says_which():
    """A failed cell (config finished_cells_only left it out): a claim none of whose cells
    of a term finished is 'not judged: cells failed', naming them; one with some of them is
    judged on the rest, and its verdict says which are missing; claims that need none of
    them are as before."""
    full = _records([150, 152, 148], [100, 101, 99])
    # baseline r3 failed: judged on the slimio cells and two baseline cells.
    partly = full[~((full.system == "baseline") & (full.rep == 3))]
    missing = _gone(("baseline", "always", 3))
    v = judge.judge_all([_claim()], partly, missing=missing)[0]
    assert v.verdict == judge.HOLDS and v.n_detail == "3/2", v.reason
    assert v.missing_cells == ("vm-baseline-redis-benchmark-always-r3",)
    assert v.label == "holds (1 cell missing)"
    assert "judged without 1 of its cells, which did not finish in this run " \
           "(vm-baseline-redis-benchmark-always-r3)" in v.reason
    assert v.row()["missing_cells"] == "vm-baseline-redis-benchmark-always-r3"
    # Every baseline cell failed: the ratio has no denominator.
    none = full[full.system != "baseline"]
    gone = _gone(*(("baseline", "always", r) for r in (1, 2, 3)))
    v = judge.judge_all([_claim()], none, missing=gone)[0]
    assert v.verdict == judge.NOT_JUDGED and v.label == judge.NOT_JUDGED
    assert v.measured is None and len(v.missing_cells) == 3
    assert "the vm-baseline-redis-benchmark-always cells it needs did not finish" in v.reason
    # ... while without the list of missing cells it is the matrix's doing, as before.
    assert judge.judge_all([_claim()], none)[0].verdict == judge.UNTESTABLE
    # A claim on other cells, or on another testbed's, is untouched by them.
    other = _claim(measure=catalog.Measure(
        catalog.Term("rps_wal_only", "slimio", "redis-benchmark", "always")), kind="absolute",
        direction="equal", paper_value=150, tolerance=catalog.Tolerance("relative", "r", 0.25))
    v = judge.judge_all([other], none, missing=gone)[0]
    assert v.verdict == judge.HOLDS and not v.missing_cells and "judged without" not in v.reason
    assert judge.judge_all([_claim(testbed="bare")], _records([150] * 3, [100] * 3, testbed="bare"),
                           missing=gone)[0].missing_cells == ()
    # A policy-pooled term counts the missing cells of either policy.
    pooled = _claim(measure=catalog.Measure(
        catalog.Term("rps_wal_only", "slimio", "redis-benchmark", None),
        catalog.Term("rps_wal_only", "baseline", "redis-benchmark", None)))
    assert judge.judge_all([pooled], partly, missing=_gone(("baseline", "periodical", 1)))[0] \
        .missing_cells == ("vm-baseline-redis-benchmark-periodical-r1",)


def test_a_missing_motivation_cell_counts_for_the_motivation_metrics_only():
    """A motivation cell shares its system, workload and policy with Table 1's matrix cells:
    its absence touches the claims on its metrics (mot_*), a matrix cell's the others."""
    records = _records([150, 150], [100, 100])
    mot_gone = _gone(("baseline", "always", 1), motivation=True)
    v = judge.judge_all([_claim()], records, missing=mot_gone)[0]
    assert v.verdict != judge.NOT_JUDGED and not v.missing_cells
    mot = _claim(kind="absolute", direction="equal", paper_value=10.0,
                 measure=catalog.Measure(catalog.Term("mot_snapshot_only_time_s", "baseline",
                                                      "redis-benchmark", "always")),
                 tolerance=catalog.Tolerance("relative", "r", 0.5))
    v = judge.judge_all([mot], records, missing=mot_gone)[0]
    assert v.verdict == judge.NOT_JUDGED and v.missing_cells == (mot_gone[0]["cell_id"],)
    # Not in the run at all (nothing missing): where it is judged, as before.
    assert judge.judge_all([mot], records)[0].reason == judge.MOTIVATION_HINT


def test_a_missing_cell_counts_at_the_looks_that_had_it():
    """decide's looks: a look-1 cell that is missing is not missing at look 0, so a claim
    decided there does not name it; one judged again at look 1 does."""
    gone = _gone(("baseline", "always", 4))
    looks = [{"vm-slimio-redis-benchmark-always": 4, "vm-baseline-redis-benchmark-always": 4}]
    decided = _records([150, 152, 148, 150], [100, 101, 99])
    v = judge.judge_all([_claim()], decided, looks, 3, missing=gone)[0]
    assert v.verdict == judge.HOLDS and v.n == 3 and v.missing_cells == ()
    undecided = _records([150, 100, 200, 150], [100, 101, 99])
    v = judge.judge_all([_claim()], undecided, looks, 3, missing=gone)[0]
    assert v.history[0][1] == judge.UNDECIDED and v.n_detail == "4/3"
    assert v.missing_cells == ("vm-baseline-redis-benchmark-always-r4",)


def test_the_verdicts_and_the_summary_name_the_missing_cells(tmp_path):
    """verdicts.{md,json,csv} and the one-screen summary name the cells that did not finish
    with their logs, and the claims that needed them say so."""
    full = _records([150, 152, 148], [100, 101, 99])
    records = full[~((full.system == "baseline") & (full.rep == 3))]
    csv = tmp_path / "cells.csv"
    records.assign(cell_id=[f"c{i}" for i in range(len(records))]).to_csv(csv, index=False)
    claims_file = tmp_path / "claims.yaml"
    claims_file.write_text(yaml.safe_dump({"claims": [{
        "id": "partly", "source": "paper", "where": "§5", "quote": "q", "kind": "ratio",
        "measure": {"term": {"metric": "rps_wal_only", "system": "slimio",
                             "workload": "redis-benchmark", "policy": "always"},
                    "reference": {"system": "baseline"}},
        "paper_value": 1.5, "direction": "higher", "testbed": "vm",
        "tolerance": {"rule": "relative", "value": 0.25, "reason": "a quarter of the value"}}, {
        "id": "gone", "source": "paper", "where": "§5", "quote": "q", "kind": "absolute",
        "measure": {"term": {"metric": "rps_wal_only", "system": "slimio-nofdp",
                             "workload": "redis-benchmark", "policy": "always"}},
        "paper_value": 100.0, "direction": "equal", "testbed": "vm",
        "tolerance": {"rule": "relative", "value": 0.25, "reason": "a quarter of the value"}}]}))
    missing = _gone(("baseline", "always", 3), ("slimio-nofdp", "always", 1))
    from slimio_repro import claims
    out = claims.judge_run(csv, claims_file, tmp_path / "claims", missing=missing)
    summary = out["summary"].read_text()
    assert "2 cells of this run did not finish" in summary
    for m in missing:
        assert f"    {m['log']}\n" in summary
    assert "not judged 1" in summary and "not judged (1): gone" in summary
    assert "partly!" in summary and "! = judged without some of its cells" in summary
    md = out["md"].read_text()
    assert "**2 cells of this run did not finish**" in md and f"`{missing[0]['log']}`" in md
    assert "**holds (1 cell missing)**" in md and f"**{judge.NOT_JUDGED}**" in md
    data = json.loads(out["json"].read_text())
    assert [m["cell_id"] for m in data["run"]["missing_cells"]] == [m["cell_id"] for m in missing]
    assert data["counts"][judge.NOT_JUDGED] == 1
    rows = pd.read_csv(out["csv"]).set_index("claim_id")
    assert rows.loc["partly", "missing_cells"] == missing[0]["cell_id"]
    assert rows.loc["gone", "verdict"] == judge.NOT_JUDGED
    # Judged again with every cell there: nothing is said of missing cells.
    again = claims.judge_run(csv, claims_file, tmp_path / "again")
    assert "did not finish" not in again["summary"].read_text()
    assert "not judged" not in again["summary"].read_text()
    # Where the end of a run did not judge the claims again, it names the cells all the same.
    text = render.missing_text(missing)
    assert text.startswith("=" * 78) and missing[1]["log"] in text
    assert render.missing_text([]) == ""


def test_the_regression_warns_of_a_partial_run(fixture_results, tmp_path):
    """A nightly path with a failed cell: the comparison says the run left cells out."""
    run = tmp_path / "run"
    shutil.copytree(fixture_results, run, symlinks=True)
    verdicts = json.loads((run / paths.VERDICT_FILES["json"]).read_text())
    verdicts["run"]["missing_cells"] = [{"cell_id": "bare-slimio-ycsb-a-always-r1",
                                         "log": "results/logs/run_cell/x.log"}]
    (run / paths.VERDICT_FILES["json"]).write_text(json.dumps(verdicts))
    ref = regress.make_reference([fixture_results])
    result = regress.compare(regress.fingerprint(run), ref)
    assert any("1 cell of this run did not finish" in w and "bare-slimio-ycsb-a-always-r1" in w
               for w in result["warnings"]), result["warnings"]
