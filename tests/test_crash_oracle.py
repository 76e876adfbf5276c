"""The crash campaign's oracle (slimio_repro.crash.oracle), against hand-made histories whose
right answer is known: what a prefix is, what a loss is, how old it is, and what is never
acceptable (a gap, a reordering, a value from outside the prefix, a lost recovered write)."""

from __future__ import annotations

import pytest

from conftest import resp
from slimio_repro.crash import campaign, oracle


def history(executed, acked_at=None, base=(), unknown=(), client=0):
    h = oracle.History(client)
    h.base = list(base)
    h.executed = list(executed)
    h.ack_times = list(acked_at or [float(i) for i in range(len(executed))])
    h.unknown = list(unknown)
    return h


def values_of(recovered, client=0):
    """The val:c:r keys as the prefix ``recovered`` leaves them."""
    last = {}
    for k in recovered:
        last[k % oracle.KEYS] = k
    return [oracle.value(client, last[r]) if r in last else None for r in range(oracle.KEYS)]


def test_the_whole_stream_is_consistent_and_lossless():
    h = history([0, 1, 2, 3])
    v = oracle.check_client(h, [0, 1, 2, 3], values_of([0, 1, 2, 3]), crash_at=10.0)
    assert v.consistent and v.lost == 0 and v.loss_age_s is None


def test_a_shorter_prefix_is_a_loss_aged_from_the_oldest_lost_ack():
    h = history([0, 1, 2, 3, 4], acked_at=[1.0, 1.5, 2.0, 2.5, 3.0])
    v = oracle.check_client(h, [0, 1], values_of([0, 1]), crash_at=3.2)
    assert v.consistent and v.lost == 3
    assert v.loss_age_s == pytest.approx(3.2 - 2.0)     # operation 2 was acked at 2.0


def test_refused_operations_leave_gaps_in_the_numbers_not_in_the_stream():
    h = history([0, 1, 5, 6])                            # 2..4 were refused (MISCONF)
    assert oracle.check_client(h, [0, 1, 5], values_of([0, 1, 5]), 9.0).consistent


def test_unanswered_operations_may_follow_in_the_order_sent():
    h = history([0, 1], unknown=[2, 3, 4])
    for rec in ([0, 1], [0, 1, 2], [0, 1, 2, 3, 4]):
        assert oracle.check_client(h, rec, values_of(rec), 5.0).consistent, rec
    bad = oracle.check_client(h, [0, 1, 3, 2], values_of([0, 1, 3, 2]), 5.0)
    assert not bad.consistent and "never sent in that order" in bad.problems[0]


@pytest.mark.parametrize("recovered, why", [
    ([0, 2, 3], "not a prefix"),                 # a gap: 1 lost, later ones kept
    ([1, 0], "not a prefix"),                    # reordered
    ([0, 1, 1], "not a prefix"),                 # replayed twice
    ([0, 1, 2, 3, 9], "never sent"),             # an operation nobody sent
])
def test_anything_but_a_prefix_is_inconsistent(recovered, why):
    h = history([0, 1, 2, 3])
    v = oracle.check_client(h, recovered, values_of(recovered), 5.0)
    assert not v.consistent and why in v.problems[0]


def test_a_value_older_or_newer_than_the_prefix_is_inconsistent():
    h = history(list(range(40)))
    rec = list(range(20))
    values = values_of(rec)
    values[3] = oracle.value(0, 35)              # a later write survived, its list entry not
    v = oracle.check_client(h, rec, values, 50.0)
    assert not v.consistent and "val:0:3" in v.problems[0]
    values = values_of(rec)
    values[3] = None                             # a kept write's value is missing
    assert not oracle.check_client(h, rec, values, 50.0).consistent
    values = values_of(rec)
    values[5] = "5:5:" + "x" * 100               # never written by anyone
    assert not oracle.check_client(h, rec, values, 50.0).consistent


def test_losing_what_an_earlier_restart_recovered_is_always_a_problem():
    h = history([7, 8], base=[0, 1, 2])
    v = oracle.check_client(h, [0, 1], values_of([0, 1]), 9.0)
    assert not v.consistent and "already recovered" in v.problems[-1]
    assert v.lost == 3


def test_a_snapshot_may_hold_any_consistent_prefix():
    h = history([0, 1, 2, 3])
    v = oracle.check_client(h, [0], values_of([0]), None, require_acked=False)
    assert v.consistent and v.lost == 0


def test_values_are_deterministic_and_straddle_wal_blocks():
    sizes = {len(oracle.value(c, k)) for c in range(4) for k in range(500)}
    assert min(sizes) >= oracle.VALUE_MIN and max(sizes) < oracle.VALUE_MAX
    assert max(sizes) > 1000 and oracle.value(2, 7) == oracle.value(2, 7)
    assert oracle.value(2, 7).startswith("2:7:")


def test_plans_are_reproducible_and_cover_every_failpoint():
    a = [campaign.make_plan(i, "slimio", "always", seed=5) for i in range(400)]
    b = [campaign.make_plan(i, "slimio", "always", seed=5) for i in range(400)]
    assert a == b
    assert {p.kill for p in a} == set(campaign.FAILPOINTS) | {"random"}
    assert {p.phase2 for p in a} == set(campaign.PHASE2)
    assert all(p.kill == "random" for p in
               (campaign.make_plan(i, "baseline", "always", seed=5) for i in range(50)))


def summary_of(records):
    return campaign.summarize(records)


def record(system="slimio", policy="periodical", ok=True, lost=0, age=None, kill="random"):
    plan = campaign.make_plan(0, system, policy, seed=1)
    plan.kill = kill
    check = {"restarted": True, "refused": "", "start_s": 0.1, "consistent": True,
             "acked": 100, "lost": lost, "loss_age_s": age, "problems": []}
    return {"plan": vars(plan), "fired": True, "crashed_by": "kill", "orphans": [],
            "refused_commands": 0, "first": check, "second": dict(check, lost=0,
                                                                  loss_age_s=None),
            "slots": [], "seconds": 1.0, "error": "", "ok": ok}


def test_summary_judges_the_everysec_contract():
    s = summary_of([record(lost=3, age=0.4), record(lost=1, age=1.9)])
    g = s["groups"][0]
    assert g["acked_lost"] == 4 and g["max_loss_window_s"] == 1.9 and g["within_contract"]
    g = summary_of([record(lost=1, age=2.5)])["groups"][0]
    assert not g["within_contract"]
    g = summary_of([record(policy="always", lost=1, age=0.01, ok=False)])["groups"][0]
    assert not g["within_contract"] and g["failed_iterations"] == [0]
    assert "| slimio | always | 1 | 0 |" in campaign.render_md(summary_of(
        [record(policy="always", ok=False)]))


def transaction(client: int, op: int) -> bytes:
    return (resp("MULTI") + resp("RPUSH", oracle.log_key(client), str(op))
            + resp("SET", oracle.val_key(client, op % oracle.KEYS), oracle.value(client, op))
            + resp("EXEC"))


def test_open_transaction_names_the_operations_of_a_multi_without_its_exec():
    whole = transaction(0, 7) + transaction(1, 3)
    assert oracle.open_transaction(whole) == {}
    assert oracle.open_transaction(b"") == {}
    # Cut inside the SET: the RPUSH is whole, so operation 4 of client 1 dangles.
    cut = whole + transaction(1, 4)[:-len(resp("EXEC")) - 10]
    assert oracle.open_transaction(cut) == {1: [4]}
    # Cut right after the MULTI: nothing of the transaction would run.
    assert oracle.open_transaction(whole + resp("multi")) == {}
    # Lower-case names, as a client may send them, are found too.
    assert oracle.open_transaction(whole + resp("multi") + resp("rpush", "log:2", "9")) == \
        {2: [9]}


def test_an_iteration_cut_short_passes_with_one_check_and_is_counted():
    r = record(system="baseline")
    r["second"], r["cut_short"] = None, {"1": [9141]}
    plan = campaign.CampaignPlan(**r["plan"])
    o = campaign.Outcome(plan, first=campaign.Check(**r["first"]), cut_short={1: [9141]})
    assert o.ok and not campaign.Outcome(plan, first=o.first).ok
    s = summary_of([r, record(system="baseline")])
    g = s["groups"][0]
    assert g["cut_short"] == 1 and g["restarts"] == 3 and campaign.passed(s)
    assert "valkey-io/valkey#4342): phase 2 skipped: baseline/periodical 1." in \
        campaign.render_md(s)
