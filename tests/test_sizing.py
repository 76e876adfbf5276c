"""The derived auto-aof-rewrite-min-size gives the configured number of WAL-Snapshots."""

import pytest

from slimio_repro import cells, config as configmod, paths


def simulate_rewrites(total_wal: int, dataset: int, min_size: int, percentage: int) -> int:
    """Redis's trigger: AOF size > min size and growth over the last base >= percentage."""
    size, base, count, written, step = 0, 0, 0, 0, max(1, total_wal // 100_000)
    while written < total_wal:
        written += step
        size += step
        growth = (size * 100 / base - 100) if base else float("inf")
        if size > min_size and growth >= percentage:
            count += 1
            size = base = dataset
    return count


@pytest.mark.parametrize("profile", ["smoke", "ci", "paper"])
@pytest.mark.parametrize("target", [1, 2, 3])
def test_min_size_gives_the_target_number_of_rewrites(profile, target):
    cfg = configmod.load([paths.CONFIG_DIR / "config.yaml",
                          paths.CONFIG_DIR / "profiles" / f"{profile}.yaml"],
                         {"server": {"wal_snapshots_per_repetition": target,
                                     "auto_aof_rewrite_min_size_mb": None}})
    m = cells.aof_rewrite_min_size_bytes(cfg)
    got = simulate_rewrites(cells.expected_wal_bytes(cfg), cells.expected_dataset_bytes(cfg),
                            m, cfg["server"]["auto_aof_rewrite_percentage"])
    assert got == target


def test_papers_explicit_trigger_gives_two_rewrites():
    cfg = configmod.load([paths.CONFIG_DIR / "config.yaml",
                          paths.CONFIG_DIR / "profiles" / "paper.yaml"])
    m = cells.aof_rewrite_min_size_bytes(cfg)
    assert 50e9 <= m <= 56e9
    assert simulate_rewrites(cells.expected_wal_bytes(cfg), cells.expected_dataset_bytes(cfg),
                             m, cfg["server"]["auto_aof_rewrite_percentage"]) == 2


def test_aof_bytes_per_set_matches_resp_framing():
    key, value = "12345678", "x" * 4096
    resp = f"*3\r\n$3\r\nSET\r\n${len(key)}\r\n{key}\r\n${len(value)}\r\n{value}\r\n"
    assert cells.aof_bytes_per_set(8, 4096) == len(resp)


def test_image_holds_wal_rewrite_and_snapshots(default_config):
    need = (2 * cells.aof_rewrite_min_size_bytes(default_config)
            + 3 * cells.expected_dataset_bytes(default_config))
    assert cells.image_size_bytes(default_config) >= need
