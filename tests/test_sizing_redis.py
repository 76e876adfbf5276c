"""The rewrite trigger the plan derives, against what a real Redis does with it.

plan/sizing.py models Redis's auto-aof-rewrite rule (a rewrite starts when the AOF exceeds
auto-aof-rewrite-min-size and has grown by auto-aof-rewrite-percentage over its last base) and
picks the min size that should give ``server.wal_snapshots_per_repetition`` rewrites whatever
the machine's rewrite speed (up to ``server.rewrite_wal_ratio``), or stops the plan. Here the
baseline redis-server gets that min size, the real redis-benchmark sends the workload, and
Redis's own counter (INFO persistence ``aof_rewrites``) says how many rewrites it performed.
Each rewrite's ratio is measured on the way (Redis's AOF sizes, polled): the count must be the
target wherever the ratios are within the promise, and never above instant rewrites' count.

What the refused targets guard against was measured with an earlier trigger that assumed one
rewrite speed: smoke with 3 rewrites got 3 with the machine busy (a VM running) and 4 idle,
i.e. the count followed the machine.
"""

import threading
import time

import pytest

from conftest import cell_plan, config_of, start_redis
from slimio_repro.agent import benchmark
from slimio_repro.plan import ConfigError, sizing as sizingmod

CELL = "bare-baseline-redis-benchmark-periodical-r1"

# (requests, keyspace, value bytes): the smoke profile's workload, one whose dataset grows to
# the end (more keys than requests) and one whose keyspace fills early. Each writes ~250 MB of
# WAL in a few seconds here.
WORKLOADS = {
    "smoke": (39000, 13000, 4096),
    "growing": (60000, 120000, 4096),
    "saturated": (60000, 4000, 4096),
}


def fields(info_text: str) -> dict:
    """An INFO section's ``key:value`` lines."""
    return dict(line.split(":", 1) for line in info_text.splitlines() if ":" in line)


def persistence(server) -> dict:
    return fields(server.info_raw("persistence"))


# Targets no trigger gives on every machine: the plan refuses them.
REFUSED = {("smoke", 3), ("growing", 2), ("growing", 3)}


def overrides_for(workload: str, target: int) -> dict:
    requests, keyspace, value = WORKLOADS[workload]
    return {"matrix": {"testbeds": ["bare"], "systems": ["baseline"],
                       "workloads": ["redis-benchmark"]},
            "server": {"wal_snapshots_per_repetition": target,
                       "auto_aof_rewrite_min_size_mb": None},
            "workloads": {"redis-benchmark": {"requests": requests, "keyspace": keyspace,
                                              "value_size_bytes": value}}}


def plan_for(workload: str, target: int):
    return cell_plan(CELL, overrides_for(workload, target))


class RewritePoller(threading.Thread):
    """INFO persistence every 2 ms while the workload runs: each rewrite's WAL, from Redis's
    own counters. While a rewrite runs, aof_current_size goes on growing by what arrives;
    when it ends, aof_base_size is the new base (the dataset it wrote) plus that."""

    def __init__(self, server):
        super().__init__(daemon=True)
        cli = server.client()
        cli.set_response_callback("INFO", lambda response, **options: response)
        self.cli, self.stop, self.samples = cli, threading.Event(), []

    def run(self):
        while not self.stop.is_set():
            f = fields(self.cli.execute_command("INFO", "persistence"))
            self.samples.append((f["aof_rewrite_in_progress"] == "1", int(f["aof_current_size"]),
                                 int(f["aof_base_size"])))
            time.sleep(0.002)

    def ratios(self) -> list[float]:
        """Each rewrite seen whole: bytes of WAL that arrived while it ran per byte of the
        dataset it wrote (plan/sizing.py's ratio)."""
        out, started = [], None
        for (was, size, _), (now, _, base) in zip(self.samples, self.samples[1:]):
            if now and not was:
                started = size
            elif was and not now and started is not None:
                during = size - started
                out.append(during / (base - during))
                started = None
        return out


@pytest.mark.parametrize("workload, target", sorted(REFUSED))
def test_targets_that_depend_on_the_machine_are_refused(workload, target):
    with pytest.raises(ConfigError, match=f"server.wal_snapshots_per_repetition: no rewrite "
                       f"trigger gives {target} WAL-Snapshots"):
        plan_for(workload, target)


@pytest.mark.parametrize("workload, target",
                         sorted({(w, t) for w in WORKLOADS for t in (1, 2, 3)} - REFUSED))
def test_real_redis_performs_the_planned_number_of_rewrites(redis_bin, tmp_path, workload,
                                                           target):
    plan = plan_for(workload, target)
    value = plan.workload.value_size_bytes
    sizing = plan.sizing
    server = start_redis(redis_bin, tmp_path, appendfsync=sizing.appendfsync,
                         rewrite_percentage=sizing.auto_aof_rewrite_percentage,
                         rewrite_min_size=sizing.auto_aof_rewrite_min_size_bytes)
    try:
        # Redis checks the trigger once per serverCron tick (hz 10: every 100 ms). Here the
        # bare host writes ~170 MB/s of WAL, so a tick would let ~17 MB pass the trigger; in
        # the VM cells (~12 MB/s) it lets ~1.2 MB pass. hz 100 gives the test the VM's
        # granularity; the rule Redis applies is unchanged.
        server.client().config_set("hz", 100)
        poller = RewritePoller(server)
        poller.start()
        benchmark.run(benchmark.command(redis_bin, server.port, plan.workload),
                      tmp_path / "benchmark.tsv", tmp_path / "benchmark.err", 600)
        deadline = time.monotonic() + 120
        while True:
            info = persistence(server)
            if info["aof_rewrite_in_progress"] == "0" and info["aof_rewrite_scheduled"] == "0":
                break
            assert time.monotonic() < deadline, "a rewrite did not finish within 120 s"
            time.sleep(0.2)
        time.sleep(0.01)
        poller.stop.set()
        poller.join()
        keys = server.client().dbsize()
    finally:
        server.shutdown()
    # The model's inputs, checked against the real run first: a wrong input would make any
    # agreement below a coincidence.
    assert keys == pytest.approx(sizing.expected_dataset_bytes
                                 / (1 + 1 + plan.workload.key_size_bytes + 5 + value), rel=0.02)
    # The plan promises the target to a machine whose rewrites take in at most
    # server.rewrite_wal_ratio bytes of WAL per byte they write. Each real rewrite's ratio is
    # measured: within the promise the count is the target. Beyond it the plan promises
    # nothing (on this host smoke-2 rewrote once at 1.43-1.47, where the model still counts
    # two), and the count is at most the model's with instant rewrites, the most any
    # machine makes.
    config = config_of(overrides_for(workload, target))
    ratios = poller.ratios()
    rewrites = int(info["aof_rewrites"])
    assert rewrites and len(ratios) == rewrites, (rewrites, ratios)
    min_size = sizing.auto_aof_rewrite_min_size_bytes
    most = len(sizingmod.rewrite_starts(config, "redis-benchmark", min_size, 0.0))
    promised = config["server"]["rewrite_wal_ratio"]
    seen = f"ratios {[round(r, 3) for r in ratios]}, promised up to {promised}"
    assert rewrites <= most, (
        f"min size {min_size} B over {sizing.expected_wal_bytes} B of WAL: Redis rewrote "
        f"{rewrites} times at the measured {seen}; instant rewrites give {most}")
    if max(ratios) <= promised:
        assert rewrites == target, f"Redis rewrote {rewrites} times at {seen}"
