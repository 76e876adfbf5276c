"""The bench's plans (``slimio-repro bench``, :mod:`slimio_repro.run.bench`): one cell plan per
system and policy, sized so that no snapshot of any kind runs while it measures."""

from __future__ import annotations

import copy
import dataclasses
import math

from .cellplan import CellPlan
from . import sizing
from .config import validate
from .resolve import make

# The rewrite trigger above the WAL the bench's runs write (no rewrite), and SlimIO's WAL
# region large enough that its own early rewrite, at 5/8 of the region
# (redis-slimio/README.md), does not fire either: 5/8 x 1.75 = 1.09 > 1.05.
TRIGGER_OVER_WAL = 1.05
REGION_OVER_TRIGGER = 1.75


def bench_config(config: dict, testbed: str, systems: list[str], policies: list[str],
                 requests: int, warmup: int) -> dict:
    """``config`` narrowed to one redis-benchmark repetition of each system under each
    policy (``matrix.only`` lifted) on ``testbed``, sized for ``warmup`` + ``requests`` SETs
    with no rewrite, no On-Demand-Snapshot, no recovery and no roofline; validated."""
    cfg = copy.deepcopy(config)
    # Every system under every policy asked for: the matrix's restrictions (matrix.only)
    # say what the pipeline's tables need, not what the bench compares.
    cfg["matrix"].update(testbeds=[testbed], systems=systems, policies=policies,
                         workloads=["redis-benchmark"], repetitions=1, only={})
    cfg["workloads"]["redis-benchmark"].update(requests=warmup + requests,
                                               on_demand_snapshot=False)
    wal = sizing.expected_wal_bytes(cfg, "redis-benchmark")
    trigger_mib = math.ceil(wal * TRIGGER_OVER_WAL / sizing.MIB)
    cfg["server"]["auto_aof_rewrite_min_size_mb"] = trigger_mib
    # The planning check's sizing rule (checks.check_slimio_sizes) holds too: a rewrite that
    # started at the trigger would end before the appends reach the region's reserve, with
    # Always-Log's pad counted.
    during = cfg["server"]["rewrite_wal_ratio"] * sizing.expected_dataset_bytes(
        cfg, "redis-benchmark") / sizing.MIB
    share = min(sizing.slimio_wal_log_share(p) for p in policies)
    cfg["slimio"]["wal_size_mb"] = math.ceil(max(trigger_mib * REGION_OVER_TRIGGER,
                                                 (trigger_mib + during) * 8 / 7 + 1) / share)
    cfg["recovery"]["enabled"] = False
    cfg["testbeds"]["vm"]["roofline"]["enabled"] = False
    validate(cfg)
    return cfg


def bench_plans(config: dict, testbed: str, systems: list[str], policies: list[str],
                requests: int, warmup: int) -> list[CellPlan]:
    """One cell plan per system and policy (the bound: one) measuring ``requests`` SETs
    after ``warmup`` (:func:`bench_config`); every planning check applies."""
    made = make(bench_config(config, testbed, systems, policies, requests, warmup))
    return [dataclasses.replace(c, workload=dataclasses.replace(c.workload, requests=requests))
            for c in made.cells]
