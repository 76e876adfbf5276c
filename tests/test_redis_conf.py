"""redis.conf of a cell: the slimio-* options appear for system slimio only, and everything
else is the same for both systems."""

import dataclasses
import difflib
from pathlib import Path

import pytest

from conftest import cell_plan
from slimio_repro.plan import sizing as cells
from slimio_repro.agent import slimio
from slimio_repro.plan import Placement
from slimio_repro.agent.server import render_conf

COMMON = dict(port=6390, data_dir="/mnt/data", log_file="/raw/redis.log",
              appendfsync="everysec", auto_aof_rewrite_percentage=1,
              auto_aof_rewrite_min_size=123456789)
OPTIONS = ["slimio-device", "slimio-backend", "slimio-format", "slimio-wal-size",
           "slimio-slot-size", "slimio-lba-size", "slimio-sqpoll", "slimio-group-commit",
           "slimio-ring-entries",
           "slimio-wal-buffer-size", "slimio-readahead-size", "slimio-placement-wal",
           "slimio-placement-wal-snapshot", "slimio-placement-on-demand",
           "slimio-load-snapshot", "slimio-deallocate"]


def directives(text: str) -> dict:
    out = {}
    for line in text.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            key, _, value = line.strip().partition(" ")
            assert key not in out, f"{key} twice"
            out[key] = value
    return out


@pytest.fixture
def rendered(default_config, tmp_path):
    plan = cell_plan("bare-slimio-redis-benchmark-periodical-r1",
                     {"matrix": {"testbeds": ["bare"], "systems": ["baseline", "slimio"]}})
    layout = plan.slimio.layout()
    block = slimio.conf_block(plan.slimio, Path("/mnt/slimio.dev"))
    base = render_conf(tmp_path / "baseline.conf", **COMMON)
    slim = render_conf(tmp_path / "slimio.conf", slimio_block=block, **COMMON)
    return base, slim, layout


def test_baseline_conf_has_no_slimio_option(rendered):
    base, _, _ = rendered
    assert not [k for k in directives(base) if k.startswith("slimio")]
    assert directives(base)["appendonly"] == "yes"


def test_slimio_conf_has_every_option_once(rendered, default_config):
    _, slim, layout = rendered
    d = directives(slim)
    assert [k for k in d if k.startswith("slimio")] == OPTIONS
    assert d["slimio-device"] == "/mnt/slimio.dev"
    assert (d["slimio-backend"], d["slimio-format"]) == ("file", "never")
    assert int(d["slimio-wal-size"]) == cells.slimio_wal_size_bytes(
        default_config, "redis-benchmark", "periodical")
    assert int(d["slimio-slot-size"]) == layout["slimio_slot_size_bytes"]
    assert d["slimio-lba-size"] == "4096" and d["slimio-sqpoll"] == "no"
    assert d["slimio-group-commit"] == "yes"
    assert (d["slimio-wal-buffer-size"], d["slimio-readahead-size"]) == ("8mb", "1mb")
    assert (d["slimio-placement-wal"], d["slimio-placement-wal-snapshot"],
            d["slimio-placement-on-demand"]) == ("1", "3", "2")
    assert d["slimio-load-snapshot"] == "wal-snapshot"


def test_the_slimio_block_is_the_only_difference(rendered):
    base, slim, _ = rendered
    diff = [l for l in difflib.ndiff(base.splitlines(), slim.splitlines())
            if l.startswith(("- ", "+ "))]
    assert diff and all(l.startswith("+ slimio-") for l in diff)
    assert slim.startswith(base)


def test_no_placement_and_sqpoll_render():
    plan = cell_plan("vm-slimio-redis-benchmark-periodical-r1")
    s = dataclasses.replace(plan.slimio, sqpoll=True, placement_ids=Placement(-1, -1, 0))
    d = directives(slimio.conf_block(s, Path("/d")))
    assert d["slimio-sqpoll"] == "yes" and d["slimio-placement-wal"] == "-1"
    assert d["slimio-placement-on-demand"] == "0"
    assert "slimio-trace-marker" not in d and d["slimio-deallocate"] == "yes"
    traced = directives(slimio.conf_block(s, Path("/d"), Path("/sys/kernel/tracing/trace_marker")))
    assert traced["slimio-trace-marker"] == "/sys/kernel/tracing/trace_marker"


def test_a_regular_file_device_is_not_deallocated(tmp_path):
    """The bare testbed's device file keeps its blocks written (slimio.deallocates): no
    deallocation by the format nor by the server; a device node is deallocated."""
    plan = cell_plan("vm-slimio-redis-benchmark-periodical-r1")
    dev = tmp_path / "slimio.dev"
    dev.write_bytes(b"")
    assert directives(slimio.conf_block(plan.slimio, dev))["slimio-deallocate"] == "no"
    assert "--no-deallocate" in slimio.format_command(Path("admin"), dev, plan.slimio)
    node = Path("/dev/null")
    assert directives(slimio.conf_block(plan.slimio, node))["slimio-deallocate"] == "yes"
    assert "--no-deallocate" not in slimio.format_command(Path("admin"), node, plan.slimio)

