"""The crash campaign end to end on real servers (slimio, file backend; stock Redis): a short
campaign passes and writes its outputs, resumes where it stopped, refuses another campaign's
directory, and catches a server that loses acknowledged writes."""

from __future__ import annotations

import json

import pytest

from slimio_repro import paths
from slimio_repro.crash import campaign


@pytest.fixture
def bins(slimio_bin, redis_bin):
    return {"slimio": slimio_bin, "baseline": redis_bin}


PARAMS = {"iterations": 8, "systems": ["slimio", "baseline"],
          "policies": ["always", "periodical"], "seed": 11, "failpoint_share": 0.6}


def test_a_short_campaign_passes_and_resumes(bins, tmp_path):
    out, work = tmp_path / "crash", tmp_path / "work"
    admin = bins["slimio"] / paths.SLIMIO_ADMIN
    summary = campaign.run(out, PARAMS, bins, admin, work, {"note": "test"}, progress=print)
    assert campaign.passed(summary), (out / "summary.md").read_text()
    lines = (out / "campaign.jsonl").read_text().splitlines()
    assert len(lines) == 8
    groups = {(g["system"], g["policy"]) for g in summary["groups"]}
    assert groups == {(s, p) for s in PARAMS["systems"] for p in PARAMS["policies"]}
    for g in summary["groups"]:
        assert g["restarts_ok"] == g["restarts"] == 2 * g["iterations"]
        assert g["recoveries_consistent"] == g["recoveries"] and g["acked"] > 0
    meta = json.loads((out / "campaign.json").read_text())
    assert set(meta["binaries_sha256"]) >= {"slimio/redis-server", "baseline/redis-server"}
    assert not (out / "failures").exists() and not list(work.glob("iter-*"))
    assert "| slimio | always |" in (out / "summary.md").read_text()
    # Resumed with more iterations: only the new ones run.
    summary = campaign.run(out, dict(PARAMS, iterations=10), bins, admin, work)
    assert summary["iterations"] == 10
    assert (out / "campaign.jsonl").read_text().splitlines()[:8] == lines
    # Another campaign's directory is refused, nothing overwritten.
    with pytest.raises(ValueError, match="other parameters"):
        campaign.run(out, dict(PARAMS, seed=12), bins, admin, work)
    assert len((out / "campaign.jsonl").read_text().splitlines()) == 10


def test_the_campaign_catches_a_server_that_loses_acknowledged_writes(bins, tmp_path):
    """Stock Redis with its AOF switched off, told it is under Always-Log: every
    acknowledged write is lost at the kill, and the iteration says so."""
    plan = campaign.make_plan(2, "baseline", "always", seed=3)
    plan.phase1_s, plan.phase2 = 0.8, "kill-idle"
    o = campaign.run_iteration(plan, bins, bins["slimio"] / paths.SLIMIO_ADMIN, tmp_path,
                               options={"appendonly": "no"})
    assert o.first.restarted and o.first.consistent
    assert o.first.acked > 0 and o.first.lost == o.first.acked
    assert not o.ok and "lost" in campaign._why(o)
