"""The configuration schema: defaults, profiles, and errors that name the bad key."""

import subprocess

import pytest

from slimio_repro.plan import Cell, Placement, build_system
from slimio_repro.plan import sizing as cells
from slimio_repro import plan as configmod
from slimio_repro import paths

PROFILES = sorted(p.stem for p in (paths.CONFIG_DIR / "profiles").glob("*.yaml"))
# The profiles of the whole matrix (the others are experiments on a part of it: gc*).
MATRIX_PROFILES = ["smoke", "ci", "paper"]


def load(*overrides: dict) -> dict:
    cfg = configmod.load_yaml(paths.CONFIG_DIR / "config.yaml")
    for o in overrides:
        cfg = configmod.merge(cfg, o)
    cfg = configmod.validate(cfg)
    configmod.make(cfg, host=BIG_HOST)
    return cfg


# A host the paper profile fits (12 cores, 64 GiB, KVM): the plan checks this host otherwise.
# A host the paper profile fits: 12 cores, and RAM for its 55 GB guest beside FEMU's 180 GiB
# device.
BIG_HOST = configmod.Host(cpus=12, memory_mb=262144, kvm_device=True, accel_verdict="kvm")


@pytest.mark.parametrize("profile", PROFILES)
def test_every_profile_is_valid(profile):
    cfg = configmod.load([paths.CONFIG_DIR / "config.yaml",
                          paths.CONFIG_DIR / "profiles" / f"{profile}.yaml"])
    assert cfg["profile"] == profile
    # And it plans (the checks that need the builds or FEMU's binary aside).
    assert configmod.make(cfg, host=BIG_HOST, check_sources=False).cells


def test_paper_profile_has_the_papers_parameters():
    cfg = configmod.load([paths.CONFIG_DIR / "config.yaml",
                          paths.CONFIG_DIR / "profiles" / "paper.yaml"])
    w = cfg["workloads"]["redis-benchmark"]
    assert (w["clients"], w["requests"], w["keyspace"], w["key_size_bytes"],
            w["value_size_bytes"]) == (50, 28_000_000, 5_300_000, 8, 4096)
    assert cfg["matrix"]["repetitions"] == 5
    assert cfg["redis"]["version"] == "7.4.2"


def test_defaults_come_from_the_schema():
    cfg = configmod.validate({})
    assert cfg["matrix"]["policies"] == ["periodical", "always"]
    assert cfg["workloads"]["redis-benchmark"]["requests"] == 39_000
    assert cfg["server"]["sampler_interval_s"] == 0.5


def test_unknown_key_is_named():
    with pytest.raises(configmod.ConfigError, match=r"unknown key server\.samplr_interval_s"):
        load({"server": {"samplr_interval_s": 1}})


def test_unknown_top_level_key_is_named():
    with pytest.raises(configmod.ConfigError, match=r"unknown key repetitions"):
        load({"repetitions": 3})


def test_bad_enum_value_is_named():
    with pytest.raises(configmod.ConfigError,
                       match=r"matrix\.policies\[1\]: 'sometimes' is not one of"):
        load({"matrix": {"policies": ["periodical", "sometimes"]}})


def test_out_of_range_value_is_named():
    with pytest.raises(configmod.ConfigError, match=r"server\.sampler_interval_s"):
        load({"server": {"sampler_interval_s": 5}})


def test_wrong_type_is_named():
    with pytest.raises(configmod.ConfigError, match=r"matrix\.repetitions"):
        load({"matrix": {"repetitions": "five"}})


def test_keyspace_must_fit_the_key_width():
    with pytest.raises(configmod.ConfigError, match=r"keyspace: 1000 keys do not fit"):
        load({"workloads": {"redis-benchmark": {"keyspace": 1000, "key_size_bytes": 2}}})


def test_missing_config_file_is_named(tmp_path):
    with pytest.raises(configmod.ConfigError, match="nope.yaml does not exist"):
        configmod.load([tmp_path / "nope.yaml"])


def test_a_config_file_that_is_not_yaml_or_not_a_mapping_is_named_with_where(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("matrix:\n  repetitions: [1, 2\n")
    with pytest.raises(configmod.ConfigError,
                       match=r"(?s)bad.yaml is not valid YAML: .*line 2, column"):
        configmod.load_yaml(bad)
    bad.write_text("- a list\n")
    with pytest.raises(configmod.ConfigError, match="bad.yaml must hold a mapping, not list"):
        configmod.load_yaml(bad)


def test_matrix_expands_to_one_cell_per_repetition(default_config):
    got = configmod.make(default_config).matrix
    m = default_config["matrix"]
    # Every system under every policy, but the no-persistence bound once (policy none).
    # slimio-nofdp only in Figure 4's combination (matrix.only).
    logged = [s for s in m["systems"] if s not in ("nopersist", "slimio-nofdp")]
    assert "nopersist" in m["systems"] and "slimio-nofdp" in m["systems"]
    assert m["only"] == {"slimio-nofdp": {"workloads": ["redis-benchmark"],
                                          "policies": ["periodical"]}}
    assert len(got) == len(m["testbeds"]) * m["repetitions"] * (
        len(m["workloads"]) * (len(logged) * len(m["policies"]) + 1) + 1)
    assert {c.policy for c in got if c.system == "nopersist"} == {"none"}
    assert {(c.workload, c.policy) for c in got if c.system == "slimio-nofdp"} == \
        {("redis-benchmark", "periodical")}
    assert len({c.id for c in got}) == len(got)
    for c in got:
        assert Cell.from_id(c.id) == c


def test_bad_cell_id_is_rejected():
    with pytest.raises(ValueError, match="is not a cell id"):
        Cell.from_id("bare-baseline-fio-periodical-r1")


def test_command_line_strings_are_coerced_to_the_schema_types():
    cfg = load({"matrix": {"repetitions": "3"},
                "server": {"sampler_interval_s": "0.25", "auto_aof_rewrite_min_size_mb": "null"},
                "workloads": {"redis-benchmark": {"on_demand_snapshot": "false"}}})
    assert cfg["matrix"]["repetitions"] == 3
    assert cfg["server"]["sampler_interval_s"] == 0.25
    assert cfg["workloads"]["redis-benchmark"]["on_demand_snapshot"] is False
    assert cfg["server"]["auto_aof_rewrite_min_size_mb"] is None


def test_uncoercible_string_is_still_an_error():
    with pytest.raises(configmod.ConfigError, match=r"matrix\.repetitions: 'many'"):
        load({"matrix": {"repetitions": "many"}})


@pytest.mark.parametrize("profile", MATRIX_PROFILES)
def test_every_profile_runs_every_system_its_testbeds_can(profile):
    """All three systems where a VM runs them; the nightly's bare-only ci profile has no
    slimio-nofdp (passthru without placement needs the vm testbed's namespace). Every
    profile has the no-persistence bound."""
    cfg = configmod.load([paths.CONFIG_DIR / "config.yaml",
                          paths.CONFIG_DIR / "profiles" / f"{profile}.yaml"])
    expected = ["baseline", "slimio"] + (["slimio-nofdp"]
                                         if "vm" in cfg["matrix"]["testbeds"] else [])
    expected += ["nopersist"]
    assert cfg["matrix"]["systems"] == expected
    plan = configmod.make(cfg, host=BIG_HOST, check_sources=False)
    assert {c.system for c in plan.matrix} == set(expected)


def test_schema_accepts_slimio_and_fills_its_section():
    cfg = load({"matrix": {"systems": ["slimio"]}})
    assert cfg["matrix"]["systems"] == ["slimio"]
    s = configmod.validate({})["slimio"]
    assert (s["backend"], s["lba_size_bytes"], s["load_snapshot"]) == ("auto", 4096,
                                                                       "wal-snapshot")
    assert s["placement_ids"] == {"wal": 1, "wal_snapshot": 3, "on_demand": 2}


def test_unknown_system_is_named_with_the_allowed_ones():
    with pytest.raises(configmod.ConfigError,
                       match=r"matrix\.systems\[1\]: 'slimio-fdp' is not one of "
                             r"'baseline', 'slimio', 'slimio-nofdp', 'nopersist'"):
        load({"matrix": {"systems": ["baseline", "slimio-fdp"]}})


def test_slimio_backend_resolves_per_testbed_and_nofdp_has_no_placement():
    plan = configmod.make(load({"matrix": {"testbeds": ["vm"]}}))
    assert plan.cell("vm-slimio-redis-benchmark-periodical-r1").slimio.backend == "nvme"
    assert plan.cell("vm-slimio-redis-benchmark-periodical-r1").slimio.placement_ids == \
        Placement(wal=1, wal_snapshot=3, on_demand=2)
    assert plan.cell("vm-slimio-nofdp-redis-benchmark-periodical-r2").slimio.placement_ids == \
        Placement(-1, -1, -1)
    assert build_system("slimio-nofdp") == "slimio"
    bare = configmod.make(load({"matrix": {"testbeds": ["bare"],
                                           "systems": ["baseline", "slimio"]}}))
    assert bare.cell("bare-slimio-redis-benchmark-always-r1").slimio.backend == "file"
    assert bare.cell("bare-baseline-redis-benchmark-always-r1").slimio is None
    forced = configmod.make(load({"slimio": {"backend": "file"}}))
    assert forced.cell("vm-slimio-ycsb-a-always-r1").slimio.backend == "file"


def test_matrix_only_narrows_a_system_and_refuses_an_empty_one():
    lifted = configmod.make(load({"matrix": {"only": {"slimio-nofdp": None}}})).matrix
    assert {(c.workload, c.policy) for c in lifted if c.system == "slimio-nofdp"} == {
        (w, p) for w in ("redis-benchmark", "ycsb-a") for p in ("periodical", "always")}
    narrowed = configmod.make(load({"matrix": {"only": {"baseline": {"policies": ["always"]}},
                                               "repetitions": 1}})).matrix
    assert {c.policy for c in narrowed if c.system == "baseline"} == {"always"}
    assert {c.policy for c in narrowed if c.system == "slimio"} == {"periodical", "always"}
    # The bound logs nothing: a policy restriction leaves its cells alone.
    bound = configmod.make(load({"matrix": {"only": {"nopersist": {"policies": ["always"]}},
                                            "policies": ["periodical"],
                                            "systems": ["baseline", "nopersist"]}})).matrix
    assert {c.id for c in bound if c.system == "nopersist"} == {
        f"vm-nopersist-{w}-none-r{r}" for w in ("redis-benchmark", "ycsb-a") for r in (1, 2)}
    # An entry for a system outside the matrix restricts nothing.
    assert configmod.make(load({"matrix": {"systems": ["baseline"],
                                           "policies": ["always"]}})).matrix
    with pytest.raises(configmod.ConfigError,
                       match=r"matrix\.only\.slimio-nofdp\.policies: \['periodical'\] has none "
                             r"of matrix\.policies \['always'\], so slimio-nofdp would run no "
                             r"cell.*matrix\.only\.slimio-nofdp: null"):
        load({"matrix": {"policies": ["always"]}})
    with pytest.raises(configmod.ConfigError,
                       match=r"matrix\.only: 'slimio-nofpd' is not one of"):
        load({"matrix": {"only": {"slimio-nofpd": None}}})
    with pytest.raises(configmod.ConfigError,
                       match=r"matrix\.only\.baseline\.workloads\[0\]: 'ycsb' is not one of"):
        load({"matrix": {"only": {"baseline": {"workloads": ["ycsb"]}}}})


def test_slimio_nofdp_on_bare_is_refused():
    with pytest.raises(configmod.ConfigError,
                       match=r"slimio-nofdp differs from slimio only by FDP placement"):
        load({"matrix": {"testbeds": ["bare"], "systems": ["baseline", "slimio-nofdp"]}})


def test_nvme_backend_on_bare_is_refused():
    with pytest.raises(configmod.ConfigError, match=r"slimio\.backend: nvme needs an NVMe"):
        load({"matrix": {"testbeds": ["bare"], "systems": ["slimio"]},
              "slimio": {"backend": "nvme"}})


def test_a_device_setting_without_its_device_is_refused():
    with pytest.raises(configmod.ConfigError, match=r"testbeds\.bare\.filesystem: f2fs is for "
                       r"a device"):
        load({"matrix": {"testbeds": ["bare"], "systems": ["baseline"]},
              "testbeds": {"bare": {"filesystem": "f2fs"}}})
    with pytest.raises(configmod.ConfigError, match=r"i_own_this_device: /dev/nvme1n1 is set, "
                       r"and testbeds\.bare\.device is null"):
        load({"matrix": {"testbeds": ["bare"], "systems": ["baseline", "slimio"]},
              "testbeds": {"bare": {"i_own_this_device": "/dev/nvme1n1"}}})


def test_planning_reads_the_named_device_and_refuses_this_machines_root_disk():
    """Planning really reads the device (sysfs, blkid, lsblk): a namespace that is not here,
    and this machine's own root disk, are refused before anything is built."""
    with pytest.raises(configmod.ConfigError,
                       match=r"testbeds\.bare\.device /dev/nvme97n1 does not exist on"):
        load({"matrix": {"testbeds": ["bare"], "systems": ["baseline", "slimio"]},
              "testbeds": {"bare": {"device": "/dev/nvme97n1"}}})
    source = subprocess.run(["findmnt", "-no", "SOURCE", "/"], capture_output=True,
                            text=True, check=True).stdout.strip()
    parent = subprocess.run(["lsblk", "-ndo", "PKNAME", source], capture_output=True,
                            text=True).stdout.strip()
    root_disk = f"/dev/{parent}" if parent else source
    with pytest.raises(configmod.ConfigError, match=r"holds this machine's root file system"):
        load({"matrix": {"testbeds": ["bare"], "systems": ["baseline", "slimio"]},
              "testbeds": {"bare": {"device": root_disk, "i_own_this_device": root_disk}}})


def test_unknown_slimio_key_is_named():
    with pytest.raises(configmod.ConfigError, match=r"unknown key slimio\.placement_ids\.snap"):
        load({"slimio": {"placement_ids": {"snap": 1}}})


def test_bad_slimio_value_is_named():
    with pytest.raises(configmod.ConfigError, match=r"slimio\.backend: 'spdk' is not one of"):
        load({"slimio": {"backend": "spdk"}})
    with pytest.raises(configmod.ConfigError, match=r"slimio\.placement_ids\.wal"):
        load({"slimio": {"placement_ids": {"wal": -2}}})


def test_explicit_image_too_small_for_the_slimio_device_is_named():
    with pytest.raises(configmod.ConfigError,
                       match=r"testbeds\.bare\.image_size_mb: 128 MiB cannot hold SlimIO's "
                             r"\d+ MiB device file"):
        load({"testbeds": {"bare": {"image_size_mb": 128}},
              "matrix": {"testbeds": ["bare"], "systems": ["baseline", "slimio"]}})
    # The same image is fine for a baseline-only matrix.
    load({"testbeds": {"bare": {"image_size_mb": 128}},
          "matrix": {"testbeds": ["bare"], "systems": ["baseline"]}})
