"""The derived auto-aof-rewrite-min-size gives the configured number of WAL-Snapshots."""

import pytest

from slimio_repro.plan import sizing as cells
from slimio_repro import plan as configmod
from slimio_repro import paths


# The rewrite counts a real Redis performs with these triggers: tests/test_sizing_redis.py.
# Here: the model against closed forms, and against the paper.


def saturated(profile: str, target: int, ratio: float) -> dict:
    """A profile whose keyspace fills within the first thousandth of its requests, so the
    dataset is constant (D) from the first rewrite on."""
    cfg = configmod.load([paths.CONFIG_DIR / "config.yaml",
                          paths.CONFIG_DIR / "profiles" / f"{profile}.yaml"],
                         {"server": {"wal_snapshots_per_repetition": target,
                                     "auto_aof_rewrite_min_size_mb": None,
                                     "rewrite_wal_ratio": ratio}})
    w = cfg["workloads"]["redis-benchmark"]
    w["keyspace"] = max(1, w["requests"] // 10_000)
    return cfg


@pytest.mark.parametrize("profile", ["smoke", "ci", "paper"])
@pytest.mark.parametrize("target", [1, 2, 3])
def test_instant_rewrites_give_the_closed_form_trigger(profile, target):
    """With a constant dataset D, instant rewrites (ratio 0) and percentage 1, the k-th rewrite
    starts after k*M - (k-1)*D bytes of WAL (a rewrite leaves an AOF of D, and M - D more
    starts the next), so N rewrites in T bytes need (T + N*D)/(N+1) < M <= (T + (N-1)*D)/N;
    the model picks the middle of that interval."""
    cfg = saturated(profile, target, 0.0)
    total, data = cells.expected_wal_bytes(cfg), cells.expected_dataset_bytes(cfg)
    low = (total + target * data) / (target + 1)
    high = (total + (target - 1) * data) / target
    assert cells.aof_rewrite_min_size_bytes(cfg) == pytest.approx((low + high) / 2, rel=1e-3)


@pytest.mark.parametrize("ratio", [0.5, 1.0, 2.0])
def test_a_rewrite_lasting_r_times_the_dataset_shifts_the_next_by_its_wal(ratio):
    """While a rewrite writes D bytes, r*D bytes of WAL arrive and stay in the new AOF (D +
    r*D); the next rewrite starts when the AOF passes M again: M - D - r*D after the end, so
    M - D after the start, as without the rewrite's WAL, unless M < D + r*D (then right
    after it ends, r*D + 1% of D + r*D after the start)."""
    cfg = saturated("smoke", 2, ratio)
    final = cells.expected_dataset_bytes(cfg)
    wide = int(final * (1 + ratio) * 1.5)
    first, second = cells.rewrite_starts(cfg, "redis-benchmark", wide, ratio)[:2]
    data = cells.dataset_bytes_after(cfg, "redis-benchmark", first)
    assert second - first == pytest.approx(wide - data, rel=1e-9)
    cfg["workloads"]["redis-benchmark"]["keyspace"] = 1000
    narrow = int(cells.expected_dataset_bytes(cfg) / 2)
    first, second = cells.rewrite_starts(cfg, "redis-benchmark", narrow, ratio)[:2]
    data = cells.dataset_bytes_after(cfg, "redis-benchmark", first)
    assert narrow < data * (1 + ratio)
    assert second - first == pytest.approx(ratio * data + 0.01 * (1 + ratio) * data, rel=1e-9)


def test_the_dataset_grows_as_uniform_random_keys_fill_the_keyspace():
    cfg = profile_config("smoke")
    w = cfg["workloads"]["redis-benchmark"]
    per_set = cells.aof_bytes_per_set(w["key_size_bytes"], w["value_size_bytes"])
    per_key = cells.rdb_bytes_per_key(w["key_size_bytes"], w["value_size_bytes"])
    # After as many SETs as keys, 1 - 1/e of the keys exist.
    grown = cells.dataset_bytes_after(cfg, "redis-benchmark", w["keyspace"] * per_set)
    assert grown == pytest.approx(w["keyspace"] * per_key * (1 - 1 / 2.718281828), rel=1e-6)
    # YCSB-A: the load phase writes every record once, then the run phase overwrites.
    y = cfg["workloads"]["ycsb-a"]
    per = cells.aof_bytes_per_set(y["key_size_bytes"], y["value_size_bytes"])
    half = cells.dataset_bytes_after(cfg, "ycsb-a", y["records"] / 2 * per)
    assert half * 2 == cells.dataset_bytes_after(cfg, "ycsb-a", y["records"] * 10 * per)


def test_too_many_rewrites_for_the_wal_are_refused_naming_the_key():
    cfg = configmod.load([paths.CONFIG_DIR / "config.yaml"],
                         {"server": {"wal_snapshots_per_repetition": 3}})
    with pytest.raises(configmod.ConfigError, match="server.wal_snapshots_per_repetition: no "
                       "rewrite trigger gives 3 WAL-Snapshots in redis-benchmark's 153.7 MiB"):
        cells.aof_rewrite_min_size_bytes(cfg)


@pytest.mark.parametrize("workload", ["redis-benchmark", "ycsb-a"])
@pytest.mark.parametrize("profile", ["smoke", "ci"])
def test_derived_trigger_gives_the_target_whatever_the_rewrite_speed(profile, workload):
    """The profiles' own triggers: N rewrites for every ratio from 0 to the configured one."""
    cfg = profile_config(profile)
    m = cells.aof_rewrite_min_size_bytes(cfg, workload)
    target = cfg["server"]["wal_snapshots_per_repetition"]
    top = cfg["server"]["rewrite_wal_ratio"]
    for ratio in (0.0, top / 4, top / 2, top):
        assert len(cells.rewrite_starts(cfg, workload, m, ratio)) == target, ratio


def test_ycsb_wal_is_the_load_plus_the_updates():
    cfg = configmod.load([paths.CONFIG_DIR / "config.yaml",
                          paths.CONFIG_DIR / "profiles" / "paper.yaml"])
    per_set = cells.aof_bytes_per_set(8, 2048)
    assert cells.expected_sets(cfg, "ycsb-a") == 9_000_000 + 57_500_000
    assert cells.expected_wal_bytes(cfg, "ycsb-a") == 66_500_000 * per_set
    assert cells.expected_dataset_bytes(cfg, "ycsb-a") == 9_000_000 * (1 + 1 + 8 + 5 + 2048)


def test_papers_explicit_trigger_gives_its_two_rewrites():
    """The paper's one trigger (53,000 MiB) and its two WAL-Snapshots per redis-benchmark
    run. YCSB-A's 138.6 GB of WAL over its 18.6 GB dataset pass the same trigger three times
    by Redis's rule (55.6, 92.6, 129.6 GB), where the paper reports two per run."""
    cfg = configmod.load([paths.CONFIG_DIR / "config.yaml",
                          paths.CONFIG_DIR / "profiles" / "paper.yaml"])
    m = cells.aof_rewrite_min_size_bytes(cfg)
    assert m == 53_000 * cells.MIB
    for ratio in (0.0, 0.5, 1.0):  # the paper's snapshots: ~1 byte of WAL per byte written
        assert len(cells.rewrite_starts(cfg, "redis-benchmark", m, ratio)) == 2
        assert len(cells.rewrite_starts(cfg, "ycsb-a", m, ratio)) == 3


def test_aof_bytes_per_set_matches_resp_framing():
    key, value = "12345678", "x" * 4096
    resp = f"*3\r\n$3\r\nSET\r\n${len(key)}\r\n{key}\r\n${len(value)}\r\n{value}\r\n"
    assert cells.aof_bytes_per_set(8, 4096) == len(resp)


def test_image_holds_wal_rewrite_and_snapshots(default_config):
    need = (2 * cells.aof_rewrite_min_size_bytes(default_config)
            + 3 * cells.expected_dataset_bytes(default_config))
    assert cells.image_size_bytes(default_config, "baseline", "redis-benchmark",
                                  "always") >= need


def profile_config(profile: str, **slimio) -> dict:
    return configmod.load([paths.CONFIG_DIR / "config.yaml",
                           paths.CONFIG_DIR / "profiles" / f"{profile}.yaml"],
                          {"slimio": slimio} if slimio else None)


@pytest.mark.parametrize("profile", ["smoke", "ci", "paper"])
def test_slimio_slot_holds_the_dataset_with_margin(profile):
    cfg = profile_config(profile)
    slot = cells.slimio_slot_size_bytes(cfg)
    assert slot % cells.MIB == 0
    assert slot >= cells.expected_dataset_bytes(cfg) * 1.25 + 16 * cells.MIB
    assert slot < cells.expected_dataset_bytes(cfg) * 1.25 + 17 * cells.MIB


def live_wal_peak(total_wal: int, dataset: int, min_size: int, rewrite_wal: int) -> int:
    """Largest sum of live WAL generations under Redis's trigger (percentage 1), when every
    rewrite lasts while ``rewrite_wal`` bytes of WAL arrive: a generation opens when a
    rewrite starts and the previous one is dropped when that rewrite ends."""
    written, gen_start, prev_start, peak = 0, 0, None, 0
    aof, rewrite_left, step = 0, None, max(1, total_wal // 100_000)
    while written < total_wal:
        written += step
        aof += step
        if rewrite_left is not None:
            rewrite_left -= step
            if rewrite_left <= 0:
                rewrite_left, prev_start = None, None
                aof = dataset + (written - gen_start)
        elif aof > min_size:
            prev_start, gen_start, rewrite_left = gen_start, written, rewrite_wal
        peak = max(peak, written - (prev_start if prev_start is not None else gen_start))
    return peak


@pytest.mark.parametrize("policy", ["periodical", "always"])
@pytest.mark.parametrize("profile", ["smoke", "ci", "paper"])
def test_slimio_wal_region_holds_the_live_generations(profile, policy):
    """The region's log share (all of it, or 8/9 under Always-Log, whose pad
    redis-slimio caps at an eighth of the log) holds the live generations."""
    cfg = profile_config(profile)
    region = cells.slimio_wal_size_bytes(cfg, "redis-benchmark", policy)
    wal = region * cells.slimio_wal_log_share(policy)
    total = cells.expected_wal_bytes(cfg, "redis-benchmark")
    d, m = cells.expected_dataset_bytes(cfg), cells.aof_rewrite_min_size_bytes(cfg)
    assert region % cells.MIB == 0
    if cfg["slimio"]["wal_size_mb"] is not None:
        # Set by the profile (paper: the whole WAL does not fit its 180 GiB device): the live
        # generations fit while a rewrite lasts up to a quarter of the run. The paper's
        # snapshots take 110-148 s of SETs at ~42 k/s x 4 KiB, about 22 % of its WAL.
        peaks = [live_wal_peak(total, d, m, int(total * f)) for f in (0.001, 0.1, 0.25)]
        assert max(peaks) <= wal < total
        return
    assert wal >= total * 1.1 + 64 * cells.MIB * cells.slimio_wal_log_share(policy)
    # Whatever a rewrite lasts (none, a tenth of the run, all of it), the live generations
    # fit, and a slow enough first rewrite does need the whole WAL of the cell.
    peaks = [live_wal_peak(total, d, m, int(total * f)) for f in (0.001, 0.1, 0.5, 1.0)]
    assert max(peaks) <= wal
    assert peaks[-1] >= total - total // 100_000


@pytest.mark.parametrize("policy", ["periodical", "always"])
@pytest.mark.parametrize("workload", ["redis-benchmark", "ycsb-a"])
@pytest.mark.parametrize("profile", ["smoke", "ci", "paper"])
def test_slimio_device_is_the_layout_of_wal_and_slots(profile, workload, policy):
    cfg = profile_config(profile)
    wal = cells.slimio_wal_size_bytes(cfg, workload, policy)
    slot = cells.slimio_slot_size_bytes(cfg, workload)
    device = cells.slimio_device_bytes(cfg, workload, policy)
    wal_region = device - cells.MIB - 3 * slot  # slots are whole MiB already
    assert device % cells.MIB == 0 and wal_region % cells.MIB == 0
    # The WAL region's payload (4064 of every 4096 bytes) holds the WAL size; no more than
    # one MiB of rounding on top.
    assert wal_region // 4096 * (4096 - 32) >= wal
    assert (wal_region - cells.MIB) // 4096 * (4096 - 32) < wal


@pytest.mark.parametrize("profile", ["smoke", "ci", "paper"])
def test_slimio_image_grows_by_the_device(profile):
    cfg = profile_config(profile)
    for policy in ("periodical", "always"):
        assert (cells.image_size_bytes(cfg, "slimio", "redis-benchmark", policy)
                - cells.image_size_bytes(cfg, "baseline", "redis-benchmark", policy)
                == cells.slimio_device_bytes(cfg, "redis-benchmark", policy))


def test_explicit_slimio_sizes_are_used():
    cfg = profile_config("smoke", wal_size_mb=100, slot_size_mb=50)
    for policy in ("periodical", "always"):
        assert cells.slimio_wal_size_bytes(cfg, "redis-benchmark", policy) == 100 * cells.MIB
    assert cells.slimio_slot_size_bytes(cfg) == 50 * cells.MIB


@pytest.mark.parametrize("wal_mb, slot_mb, lba", [(8, 16, 4096), (100, 37, 4096), (8, 8, 512)])
def test_device_size_matches_slimio_admin_layout(slimio_admin, tmp_path, wal_mb, slot_mb, lba):
    """The device size the cell allocates is exactly what slimio-admin's layout needs."""
    import subprocess
    cfg = profile_config("smoke", wal_size_mb=wal_mb, slot_size_mb=slot_mb, lba_size_bytes=lba)
    size = cells.slimio_device_bytes(cfg, "redis-benchmark", "always")
    args = ["--wal-mib", str(wal_mb), "--slot-mib", str(slot_mb), "--lba-size", str(lba)]
    for dev_size, ok in ((size, True), (size - lba, False)):
        dev = tmp_path / f"dev-{dev_size}"
        with open(dev, "wb") as fh:
            fh.truncate(dev_size)
        proc = subprocess.run([str(slimio_admin), "format", "--device", str(dev), *args],
                              capture_output=True, text=True)
        assert (proc.returncode == 0) == ok, (dev_size, proc.stderr)
        if not ok:
            assert "but the layout needs" in proc.stderr


@pytest.mark.parametrize("profile", ["smoke", "ci", "paper"])
def test_slimio_layout_of_every_workload_fits_the_profiles_device(profile):
    from slimio_repro.testbed import vm
    cfg = profile_config(profile)
    capacity = configmod.load_device_profile(cfg["testbeds"]["vm"]["device_profile"]).capacity_gib
    for workload in cfg["matrix"]["workloads"]:
        for policy in cfg["matrix"]["policies"]:
            assert cells.slimio_device_bytes(cfg, workload, policy) <= capacity << 30, \
                (workload, policy)
