"""Numbers derived from the configuration: the rewrite trigger, SlimIO's layout, image sizes.

Only the plan stage calls these (:func:`slimio_repro.plan.make`); everything downstream reads
the results from the cell's plan (:class:`slimio_repro.agent.CellPlan`).
"""

from __future__ import annotations

import math

from .cellplan import is_slimio
from .config import ConfigError

MIB = 1024 * 1024


# Bytes a SET of a K-byte key and V-byte value adds to the AOF: RESP framing
# "*3\r\n$3\r\nSET\r\n$K\r\nKEY\r\n$V\r\nVALUE\r\n" = 23 fixed bytes + digits of K and V.
def aof_bytes_per_set(key_size: int, value_size: int) -> int:
    return 23 + len(str(key_size)) + len(str(value_size)) + key_size + value_size


# Bytes one string key takes in an RDB snapshot (type, length-prefixed key and value).
# redis-benchmark's value is pseudo-random text over 64 symbols (genBenchmarkRandomData),
# which the RDB's LZF compression leaves as it is: measured 75 k keys of 4096 B -> ~310 MB.
def rdb_bytes_per_key(key_size: int, value_size: int) -> int:
    return 1 + 1 + key_size + 5 + value_size


def _keys_after(w: dict, workload: str, sets: float) -> float:
    """Distinct keys after ``sets`` SETs: redis-benchmark's among uniform random keys;
    YCSB-A's records loaded so far (the load phase writes each once, then the run phase only
    overwrites)."""
    if workload == "ycsb-a":
        return min(sets, w["records"])
    return w["keyspace"] * (1 - math.exp(-sets / w["keyspace"]))


def expected_dataset_bytes(config: dict, workload: str = "redis-benchmark") -> int:
    """Expected RDB size after the workload: the distinct keys its SETs leave."""
    w = config["workloads"][workload]
    return int(_keys_after(w, workload, expected_sets(config, workload))
               * rdb_bytes_per_key(w["key_size_bytes"], w["value_size_bytes"]))


# YCSB workload A (ycsb-bindings/workloads/workloada.properties): the share of the run phase's
# operations that are updates (SETs); the rest are reads (GETs), which write no WAL.
YCSB_A_UPDATE_PROPORTION = 0.5


def expected_sets(config: dict, workload: str = "redis-benchmark") -> int:
    """SETs a cell sends: redis-benchmark's requests; YCSB-A's loaded records plus the run
    phase's expected updates."""
    w = config["workloads"][workload]
    if workload == "ycsb-a":
        return w["records"] + int(w["operations"] * YCSB_A_UPDATE_PROPORTION)
    return w["requests"]


def expected_wal_bytes(config: dict, workload: str = "redis-benchmark") -> int:
    w = config["workloads"][workload]
    return expected_sets(config, workload) * aof_bytes_per_set(w["key_size_bytes"],
                                                               w["value_size_bytes"])


def dataset_bytes_after(config: dict, workload: str, wal_bytes: float) -> float:
    """Expected RDB size once ``wal_bytes`` of WAL are written (the dataset grows as the
    workload runs)."""
    w = config["workloads"][workload]
    sets = wal_bytes / aof_bytes_per_set(w["key_size_bytes"], w["value_size_bytes"])
    return _keys_after(w, workload, sets) * rdb_bytes_per_key(w["key_size_bytes"],
                                                              w["value_size_bytes"])


def rewrite_starts(config: dict, workload: str, min_size: int, ratio: float,
                   limit: int | None = None) -> list[float]:
    """Bytes of WAL written when each AOF rewrite starts, by Redis's rule (serverCron): a
    rewrite starts when the AOF exceeds auto-aof-rewrite-min-size and has grown by
    auto-aof-rewrite-percentage over its size when the last rewrite ended; no rewrite starts
    while one runs.

    A rewrite writes the dataset of the moment it starts (the new base's RDB preamble) while
    ``ratio`` bytes of WAL arrive per byte it writes (the workload's write rate over the
    rewrite's, a property of the machine); that WAL lands in the new increment, so when it
    ends the AOF is the dataset plus that WAL. The next rewrite then starts M - D after this
    one, whatever the ratio, as long as M exceeds D x (1 + ratio); below that, rewrites run
    back to back and their number follows the machine's speed. Stops after ``limit`` starts.
    """
    total = expected_wal_bytes(config, workload)
    percentage = config["server"]["auto_aof_rewrite_percentage"]
    starts, at = [], float(min_size)
    while at <= total and (limit is None or len(starts) < limit):
        starts.append(at)
        dataset = dataset_bytes_after(config, workload, at)
        during = ratio * dataset
        aof = dataset + during
        at += during + max(min_size - aof, aof * percentage / 100)
    return starts


def _min_sizes_giving(config: dict, workload: str, n: int, ratio: float) -> tuple[int, int]:
    """The smallest and the largest min size that give exactly ``n`` rewrites at ``ratio``
    (smallest > largest when none does). The count falls as the min size grows."""
    total = int(expected_wal_bytes(config, workload))

    def count(m: int) -> int:
        return len(rewrite_starts(config, workload, m, ratio, limit=n + 1))

    lo, hi = 1, total + 1
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if count(mid) <= n else (mid + 1, hi)
    fewest = lo
    lo, hi = 0, total
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if count(mid) >= n else (lo, mid - 1)
    return fewest, lo


def aof_rewrite_min_size_bytes(config: dict, workload: str = "redis-benchmark") -> int:
    """auto-aof-rewrite-min-size that gives ``server.wal_snapshots_per_repetition`` (N)
    WAL-Snapshots per repetition on any machine whose rewrites take in at most
    ``server.rewrite_wal_ratio`` bytes of WAL per byte they write: the middle of the range of
    min sizes for which :func:`rewrite_starts` counts exactly N rewrites both with instant
    rewrites and at that ratio (the count falls as the ratio grows, so every ratio between
    gives N too). Raises ConfigError when no min size of at least 1 MiB does.
    """
    explicit = config["server"]["auto_aof_rewrite_min_size_mb"]
    if explicit:
        return explicit * MIB
    n = config["server"]["wal_snapshots_per_repetition"]
    ratio = config["server"]["rewrite_wal_ratio"]
    instant = _min_sizes_giving(config, workload, n, 0.0)
    slow = _min_sizes_giving(config, workload, n, ratio)
    low, high = max(instant[0], slow[0], MIB), min(instant[1], slow[1])
    if high < low:
        total = expected_wal_bytes(config, workload)
        data = expected_dataset_bytes(config, workload)
        raise ConfigError(
            f"server.wal_snapshots_per_repetition: no rewrite trigger gives {n} WAL-Snapshots "
            f"in {workload}'s {total / MIB:.1f} MiB of WAL over its {data / MIB:.1f} MiB "
            f"dataset both with instant rewrites and with rewrites that take in "
            f"server.rewrite_wal_ratio = {ratio} bytes of WAL per byte they write (the count "
            "would depend on how fast this machine rewrites); lower it, raise the workload's "
            "requests, or set server.auto_aof_rewrite_min_size_mb")
    return (low + high) // 2


def _ceil_to(value: float, unit: int) -> int:
    return int(math.ceil(value / unit)) * unit


def slimio_slot_size_bytes(config: dict, workload: str = "redis-benchmark") -> int:
    """Size of each of SlimIO's three snapshot slots (whole MiB).

    A slot holds one snapshot: the WAL-Snapshot's RDB preamble or the On-Demand RDB, at most
    the dataset at the end of the workload (expected_dataset_bytes), with a margin.
    """
    s = config["slimio"]
    if s["slot_size_mb"]:
        return s["slot_size_mb"] * MIB
    need = (expected_dataset_bytes(config, workload) * s["slot_margin_ratio"]
            + s["slot_margin_mb"] * MIB)
    return _ceil_to(need, MIB)


# Under Always-Log SlimIO fills each batch's partial tail block with AOF annotation lines
# (redis-slimio/src/slimio_wal.h), at most 1 / SLIMIO_WAL_PAD_PER_LOG_DIV of a generation's
# log bytes: a region of W payload bytes then holds at least DIV / (DIV + 1) W of log.
SLIMIO_WAL_PAD_PER_LOG_DIV = 8


def slimio_wal_log_share(policy: str) -> float:
    """The share of a WAL region's payload that is log, at least, under ``policy``: all of
    it under Periodical-Log (no pad), 8/9 under Always-Log (the pad's cap)."""
    if policy == "always":
        return SLIMIO_WAL_PAD_PER_LOG_DIV / (SLIMIO_WAL_PAD_PER_LOG_DIV + 1)
    return 1.0


def slimio_wal_size_bytes(config: dict, workload: str, policy: str) -> int:
    """WAL payload bytes SlimIO's circular WAL region must hold (whole MiB).

    The region holds the live WAL generations: the one a WAL-Snapshot replays from and the
    one opened when the rewrite started, i.e. everything written from the start of one
    rewrite to the end of the next. The trigger model (aof_rewrite_min_size_bytes) says when
    a rewrite starts, not how long it lasts, and no rewrite starts while one runs: a slow
    rewrite keeps the previous generation alive for as long as it takes, and in the worst
    case (the first rewrite lasting to the end of the workload) that is the whole WAL of the
    cell, and under Always-Log its pad (slimio_wal_log_share). So the only bound the model
    justifies is the cell's total WAL, with a margin.
    The 32-byte block headers are not in this number: the layout adds them (see
    slimio_device_bytes).
    """
    s = config["slimio"]
    if s["wal_size_mb"]:
        return s["wal_size_mb"] * MIB
    need = (expected_wal_bytes(config, workload) * s["wal_margin_ratio"]
            / slimio_wal_log_share(policy) + s["wal_margin_mb"] * MIB)
    return _ceil_to(need, MIB)


# SlimIO's on-device layout (redis-slimio/src/slimio_format.h): two metadata LBAs, the WAL
# region, three equal slots, each region starting on a 1 MiB boundary; every WAL block of
# lba_size bytes carries a 32-byte header.
SLIMIO_ALIGN_BYTES = MIB
SLIMIO_WAL_HEADER_BYTES = 32
SLIMIO_SLOTS = 3


def slimio_device_bytes(config: dict, workload: str, policy: str) -> int:
    """Size of the device file that the layout for the WAL and slot sizes above needs.

    Mirrors slimioLayoutPlan (redis-slimio/src/slimio_format.c); slimio-admin format refuses
    a device that is too small, naming both sizes, so a divergence cannot go unnoticed.
    """
    lba = config["slimio"]["lba_size_bytes"]
    wal_blocks = math.ceil(slimio_wal_size_bytes(config, workload, policy)
                           / (lba - SLIMIO_WAL_HEADER_BYTES))
    wal_region = _ceil_to(wal_blocks * lba, SLIMIO_ALIGN_BYTES)
    slot_region = _ceil_to(slimio_slot_size_bytes(config, workload), SLIMIO_ALIGN_BYTES)
    return SLIMIO_ALIGN_BYTES + wal_region + SLIMIO_SLOTS * slot_region


def image_size_bytes(config: dict, system: str, workload: str, policy: str) -> int:
    """File-system image big enough for the WAL, a rewrite in flight and two snapshots.

    A slimio cell's image holds the same room as the baseline's (the server's own data
    directory keeps its place) plus SlimIO's device file.
    """
    explicit = config["testbeds"]["bare"]["image_size_mb"]
    if explicit:
        return explicit * MIB
    need = (2 * aof_rewrite_min_size_bytes(config, workload)
            + 3 * expected_dataset_bytes(config, workload))
    size = max(256 * MIB, int(need * 1.5))
    if is_slimio(system):
        size += slimio_device_bytes(config, workload, policy)
    return size
