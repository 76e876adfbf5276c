"""The crash campaign end to end on real servers (slimio, file backend; stock Redis): a short
campaign passes and writes its outputs, resumes where it stopped, refuses another campaign's
directory, catches a server that loses acknowledged writes, and cuts off a client waiting on
a server that stopped answering."""

from __future__ import annotations

import json
import os
import signal
import threading
import time

import pytest

from conftest import start_redis
from slimio_repro import paths
from slimio_repro.crash import campaign, oracle
from slimio_repro.crash.target import TargetServer


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
        # Phase 2 is skipped where stock Redis cut a transaction short (the test below).
        assert g["restarts_ok"] == g["restarts"] == 2 * g["iterations"] - g["cut_short"]
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


def test_stock_redis_runs_a_transaction_its_aof_truncation_cut_short_with_the_next_one(
        bins, tmp_path):
    """Why the campaign skips stock Redis's phase 2 after some crashes (campaign.CUT_SHORT):
    an AOF torn inside a MULTI is truncated inside the transaction, the next writes are
    appended after it, and the next load brings back an operation the restart had dropped.
    When a stock build no longer does this, this test fails: the skip can go."""
    server = TargetServer("baseline", bins["baseline"], tmp_path, "always")
    server.start()
    cli = server.client()

    def run_ops(*ops):
        pipe = cli.pipeline(transaction=False)
        for k in ops:
            oracle.queue_operation(pipe, 0, k)
        pipe.execute()

    run_ops(0, 1, 2)
    assert oracle.open_transaction(server.aof_tail()) == {}
    server.shutdown()
    aof = sorted((server.data / "appendonlydir").glob("*.incr.aof"))[-1]
    data = aof.read_bytes()
    aof.write_bytes(data[:data.rindex(b"SET") + 20])     # torn inside operation 2's SET
    server.start()
    cli = server.client()
    assert oracle.recovered_lists(cli, 1)[0] == [0, 1]
    assert "Truncating the AOF" in server.log.read_text()
    assert oracle.open_transaction(server.aof_tail()) == {0: [2]}
    run_ops(3)                       # acknowledged under appendfsync always
    server.kill()
    server.start()
    cli = server.client()
    assert oracle.recovered_lists(cli, 1)[0] == [0, 1, 2, 3]
    h = oracle.History(0, base=[0, 1], executed=[3])
    verdicts, _ = oracle.check(cli, [h], None)
    assert verdicts[0].problems[0].startswith("not a prefix: position 2 holds operation 2")
    server.kill()


def test_a_client_waiting_on_a_stopped_server_ends_at_once_when_severed(redis_bin, tmp_path):
    """A server that stops answering without a reset, as one whose VM was destroyed
    mid-write (here: stock Redis stopped by SIGSTOP): its client waits on a reply. Severed,
    as the campaign does once the server is down, the client ends at once with what it sent
    unknown, where it would have waited for its socket's 30 s timeout."""
    server = start_redis(redis_bin, tmp_path)
    try:
        h = oracle.History(0)
        stop = threading.Event()
        client = oracle.Client("127.0.0.1", server.port, h, 4, stop)
        client.start()
        deadline = time.monotonic() + 10
        while len(h.executed) < 100 and time.monotonic() < deadline:
            time.sleep(0.01)
        os.kill(server.proc.pid, signal.SIGSTOP)
        try:
            time.sleep(0.5)
            assert client.is_alive() and h.unknown, "waiting on the stopped server's reply"
            waiting = list(h.unknown)
            t0 = time.monotonic()
            stop.set()
            client.sever()
            client.join(10)
            assert not client.is_alive() and time.monotonic() - t0 < 2
        finally:
            os.kill(server.proc.pid, signal.SIGCONT)
        assert h.unknown == waiting and client.dead_at is not None
        assert len(h.executed) >= 100 and not set(h.executed) & set(waiting)
    finally:
        server.shutdown()
