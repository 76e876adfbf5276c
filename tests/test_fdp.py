"""nvme-cli 2.3 fdp plugin JSON parsers, on outputs captured in the guest (QEMU NVMe with one
FDP configuration: 8 reclaim unit handles, 64 MiB reclaim units, 4096-byte LBAs)."""

import json

import pytest

from conftest import FIXTURES
from slimio_repro.agent import fdp
from slimio_repro.agent.fdp import FdpError

VM = FIXTURES / "vm"


def stats_text(hbmw: int, mbmw: int, mbe: int = 0) -> str:
    return json.dumps({"hbmw": str(hbmw), "mbmw": str(mbmw), "mbe": str(mbe)})


def test_stats_fixture():
    assert fdp.parse_stats((VM / "fdp-stats.json").read_text()) == {
        "host_bytes_written": 1235394560, "media_bytes_written": 1239121920,
        "media_bytes_erased": 0}


def test_stats_accept_128_bit_counters():
    big = 2**100 + 3
    assert fdp.parse_stats(stats_text(big, big))["host_bytes_written"] == big


def test_stats_delta_and_waf():
    before = fdp.parse_stats((VM / "fdp-stats.json").read_text())
    after = fdp.parse_stats(stats_text(1235394560 + 4096 * 1000, 1239121920 + 4096 * 1500,
                                       67108864))
    d = fdp.stats_delta(before, after)
    assert d == {"host_bytes_written": 4096000, "media_bytes_written": 6144000,
                 "media_bytes_erased": 67108864, "waf": 1.5}


def test_stats_delta_without_host_writes_has_no_waf():
    s = fdp.parse_stats(stats_text(10, 20))
    assert fdp.stats_delta(s, s)["waf"] is None


def test_stats_delta_refuses_counters_going_backwards():
    before = fdp.parse_stats(stats_text(100, 200))
    after = fdp.parse_stats(stats_text(150, 190))
    with pytest.raises(FdpError, match="media_bytes_written went backwards: before=200, "
                                       "after=190"):
        fdp.stats_delta(before, after)


def test_stats_missing_counter_names_it():
    with pytest.raises(FdpError, match="my-stats.json has no 'mbe' key"):
        fdp.parse_stats('{"hbmw": "1", "mbmw": "2"}', source="my-stats.json")


def test_stats_non_numeric_counter_is_refused():
    with pytest.raises(FdpError, match="hbmw='lots'"):
        fdp.parse_stats('{"hbmw": "lots", "mbmw": "2", "mbe": "0"}')


def test_not_json_is_refused():
    with pytest.raises(FdpError, match="not valid JSON.*-o json"):
        fdp.parse_stats("FDP statistics:\nhbmw: 1\n")


def test_configs_fixture():
    assert fdp.parse_configs((VM / "fdp-configs.json").read_text()) == [{
        "config_index": 0, "fdp_attributes": 128, "config_valid": True,
        "volatile_write_cache": False, "reclaim_group_id_format_bits": 0,
        "vendor_specific_size_bytes": 0, "reclaim_groups": 1, "reclaim_unit_handles": 8,
        "max_namespaces": 256, "reclaim_unit_size_bytes": 64 * 1024**2,
        "estimated_reclaim_unit_time_limit_s": 0}]


def test_configs_missing_key_and_truncation():
    with pytest.raises(FdpError, match=r"configs\[0\] has no 'runs' key"):
        fdp.parse_configs('{"n": 0, "configs": [{"fdpa": 128, "vss": 0, "nrg": 1, '
                          '"nruh": 8, "nnss": 256, "erutl": 0}]}')
    with pytest.raises(FdpError, match="n=1 announces 2"):
        fdp.parse_configs('{"n": 1, "configs": []}')


def test_status_fixture():
    text = (VM / "fdp-status.json").read_text()
    assert fdp.parse_status(text) == list(range(8))
    descriptors = fdp.parse_status_descriptors(text)
    by_pid = {d["placement_id"]: d for d in descriptors}
    assert by_pid[1] == {"placement_id": 1, "reclaim_unit_handle_id": 1,
                         "active_ru_time_remaining_s": 0,
                         "ru_available_media_writes_blocks": 16384}
    # One 64 MiB reclaim unit holds 16384 4-KiB blocks; handle 2 has one block fewer left,
    # consistent with the single 1-block passthru write to placement id 2 in the trace fixture.
    assert by_pid[2]["ru_available_media_writes_blocks"] == 16383
    assert by_pid[0]["ru_available_media_writes_blocks"] == 9687


def test_status_is_sorted_and_checks_its_count():
    text = json.dumps({"nruhsd": 2, "ruhss": [
        {"pid": 3, "ruhid": 3, "earutr": 0, "ruamw": 1},
        {"pid": 1, "ruhid": 1, "earutr": 0, "ruamw": 1}]})
    assert fdp.parse_status(text) == [1, 3]
    with pytest.raises(FdpError, match="nruhsd=3 but 'ruhss' holds 2"):
        fdp.parse_status(text.replace('"nruhsd": 2', '"nruhsd": 3'))
    with pytest.raises(FdpError, match=r"ruhss\[0\] has no 'pid' key"):
        fdp.parse_status('{"nruhsd": 1, "ruhss": [{"ruhid": 0}]}')


def test_usage_fixture():
    usage = fdp.parse_usage((VM / "fdp-usage.json").read_text())
    assert len(usage) == 8
    assert all(u["attributes"] == 1 and u["attributes_name"] == "host_specified" for u in usage)
    assert [u["reclaim_unit_handle_id"] for u in usage] == list(range(8))
