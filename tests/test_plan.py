"""The plan: one source of defaults, a typed immutable plan per cell, every check that can be
made before a build made at planning time (through `snakemake -n`, naming the key), the CLI."""

import copy
import dataclasses
import json
import re
import shlex
import subprocess
import sys

import pytest
import yaml

from conftest import REPO, snakemake
from slimio_repro import paths
from slimio_repro import plan as planmod
from slimio_repro.plan import CellPlan


def test_schema_defaults_equal_config_yaml():
    assert planmod.default_drift() == []


def test_drift_is_caught_when_one_default_is_changed_by_hand():
    schema = planmod.load_schema()
    changed = copy.deepcopy(schema)
    bench = changed["properties"]["workloads"]["properties"]["redis-benchmark"]
    bench["properties"]["requests"]["default"] = 28_000_000
    drift = planmod.default_drift(changed)
    assert drift == ["workloads.redis-benchmark.requests: the schema's default 28000000 "
                     "differs from config.yaml's 39000"]
    defaults = planmod.load_yaml(paths.CONFIG_DIR / "config.yaml")
    del defaults["server"]["sampler_interval_s"]
    assert planmod.default_drift(schema, defaults) == [
        "server.sampler_interval_s: in the schema, not in config.yaml"]


def test_smoke_profile_alone_and_merged_defaults_resolve_to_identical_plans():
    alone = planmod.make(planmod.load([paths.CONFIG_DIR / "profiles" / "smoke.yaml"]))
    merged = planmod.make(planmod.load([paths.CONFIG_DIR / "config.yaml",
                                        paths.CONFIG_DIR / "profiles" / "smoke.yaml"]))
    assert alone == merged
    assert [c.sha256() for c in alone.cells] == [c.sha256() for c in merged.cells]
    assert alone.cell("vm-baseline-redis-benchmark-periodical-r1").workload.requests == 39000


def test_cell_plan_is_frozen_and_round_trips_through_json():
    plan = planmod.make(planmod.load([paths.CONFIG_DIR / "config.yaml"]))
    cell = plan.cell("vm-slimio-ycsb-a-always-r2")
    with pytest.raises(dataclasses.FrozenInstanceError):
        cell.profile = "paper"
    again = CellPlan.from_json(cell.to_json())
    assert again == cell and again.sha256() == cell.sha256()
    assert cell.slimio.device_bytes <= cell.vm.device.capacity_bytes
    assert cell.needs == (paths.BOX_PATTERN,)


def test_only_what_changes_a_result_makes_a_cell_stale():
    base = planmod.load([paths.CONFIG_DIR / "config.yaml"])
    plan = planmod.make(base)

    def hashes(overrides):
        p = planmod.make(planmod.validate(planmod.merge(base, overrides)))
        return {c.id: c.sha256() for c in p.cells}

    before = {c.id: c.sha256() for c in plan.cells}
    more = hashes({"workloads": {"redis-benchmark": {"requests": 60001}}})
    changed = {k for k in before if before[k] != more[k]}
    assert changed == {c.id for c in plan.cells if c.cell.workload == "redis-benchmark"}
    assert hashes({"server": {"start_timeout_s": 7}}) == before
    assert hashes({"testbeds": {"vm": {"boot_timeout_s": 600, "boot_stall_s": 60,
                                       "boot_attempts": 1}}}) == before
    assert hashes({"cell_retries": 0}) == before
    pids = hashes({"slimio": {"placement_ids": {"wal": 4}}})
    assert {k for k in before if before[k] != pids[k]} == {
        c.id for c in plan.cells if c.cell.system == "slimio"}


# Each mistake: the --config words, and what the error must name. None of them may build or
# write anything: the dry run stops while planning.
BAD = [
    ("matrix={policies: [sometimes]}", "matrix.policies[0]: 'sometimes' is not one of"),
    ("matrix={repetitions: 0}", "matrix.repetitions: 0 is less than the minimum of 1"),
    ("matrix={testbed: [vm]}", "unknown key matrix.testbed"),
    ("matrix={testbeds: [bare], systems: [baseline, slimio-nofdp]}",
     "matrix.systems: slimio-nofdp differs from slimio only by FDP placement"),
    ("matrix={testbeds: [bare], systems: [slimio]}\nslimio={backend: nvme}",
     "slimio.backend: nvme needs an NVMe device"),
    ("workloads={redis-benchmark: {keyspace: 1000, key_size_bytes: 2}}",
     "workloads.redis-benchmark.keyspace: 1000 keys do not fit"),
    ("workloads={ycsb-a: {records: 1000, key_size_bytes: 2}}",
     "workloads.ycsb-a.records: 1000 records do not fit"),
    ("matrix={testbeds: [bare], systems: [slimio]}\ntestbeds={bare: {image_size_mb: 128}}",
     "testbeds.bare.image_size_mb: 128 MiB cannot hold SlimIO's"),
    ("testbeds={vm: {memory_mb: 100000}}", "testbeds.vm.memory_mb: 100000 MiB does not fit"),
    ("testbeds={vm: {cpus: 64}}", "testbeds.vm.cpus: 64 vCPUs on a host with"),
    ("testbeds={vm: {device_profile: qemu-fdp-huge}}",
     "testbeds.vm.device_profile: 'qemu-fdp-huge' not found"),
    ("testbeds={vm: {device_profile: femu-fdp-gc, emulator_path: /nonexistent/femu}}",
     "testbeds.vm.device_profile: femu-fdp-gc is FEMU, and /nonexistent/femu"),
    ("slimio={lba_size_bytes: 512}",
     "slimio.lba_size_bytes: 512 differs from device profile qemu-fdp-smoke"),
    ("slimio={wal_size_mb: 20000}", "slimio.wal_size_mb: SlimIO's layout for"),
    ("slimio={wal_size_mb: 140}", "slimio.wal_size_mb: at 5/8 of a 140 MiB WAL region SlimIO "
     "starts a WAL-Snapshot before redis-benchmark's rewrite trigger"),
    ("slimio={wal_size_mb: 160}\nserver={auto_aof_rewrite_min_size_mb: 100}",
     "slimio.wal_size_mb: a 160 MiB WAL region refuses writes past 140.0 MiB of log (its "
     "reserve)"),
    # Enough under Periodical-Log; under Always-Log the pad may take a ninth of the region.
    ("slimio={wal_size_mb: 170}\nserver={auto_aof_rewrite_min_size_mb: 90}",
     "slimio.wal_size_mb: a 170 MiB WAL region (151 MiB of log at least under always, whose "
     "pad may take 1/9) refuses writes past 132.2 MiB of log"),
    ("slimio={placement_ids: {wal: 9}}",
     "slimio.placement_ids.wal: 9 is not a placement handle of device profile"),
    ("testbeds={vm: {device_profile: qemu-nofdp-smoke}}",
     "slimio.placement_ids.wal: 1, but device profile qemu-nofdp-smoke has no FDP"),
    ("workloads={redis-benchmark: {value_size_bytes: 1000000}}",
     "testbeds.vm.memory_mb: 4096 MiB cannot hold redis-benchmark's dataset"),
    ("redis={version: '7.4.2'}", "redis.version: the tarball of Redis 7.4.2 cannot be had"),
    ("redis={tarball_dirs: [/nonexistent/tarballs]}",
     "redis.tarball_dirs[0]: '/nonexistent/tarballs' is not a directory"),
]


BAD_IDS = [m.split(":")[0] for _, m in BAD]
# The mistakes a real dry run is refused with too: one each of the schema, the plan's sizes,
# this host and the file system. The rest are checked in-process, through the calls the
# workflow makes first, at a fraction of a Snakemake start each.
BAD_DRY_RUN = [(w, m) for w, m in BAD if m.startswith((
    "matrix.repetitions:", "testbeds.vm.cpus:", "redis.tarball_dirs[0]:",
    "slimio.wal_size_mb: at 5/8"))]


def config_words(words: str) -> dict:
    """``--config`` words as Snakemake reads them: KEY=VALUE, each value YAML, merged in order."""
    out: dict = {}
    for word in words.split("\n"):
        key, value = word.split("=", 1)
        out = planmod.merge(out, {key: yaml.safe_load(value)})
    return out


@pytest.mark.parametrize("words, message", BAD, ids=BAD_IDS)
def test_bad_configuration_is_refused_at_planning_naming_the_key(words, message, tmp_path):
    """What workflows/rules/common.smk does first: the defaults (the Snakefile's configfile)
    with the --config words merged in, validated, then planned."""
    results, build = tmp_path / "results", tmp_path / "build"
    with pytest.raises(planmod.ConfigError) as exc:
        config = planmod.load([paths.CONFIG_DIR / "config.yaml"], config_words(
            words) | {"results_dir": str(results), "build_dir": str(build)})
        planmod.make(config, None)
    assert message in str(exc.value), str(exc.value)
    assert not results.exists() and not build.exists(), "planning wrote something"


@pytest.mark.parametrize("words, message", BAD_DRY_RUN,
                         ids=[m.split(":")[0] for _, m in BAD_DRY_RUN])
def test_bad_configuration_stops_the_dry_run_naming_the_key(words, message, tmp_path):
    results, build = tmp_path / "results", tmp_path / "build"
    proc = snakemake("-n", "--nolock", "--cores", "2", "reproduce", "--config",
                     f"results_dir={results}", f"build_dir={build}", *words.split("\n"))
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    assert message in out, out[-2000:]
    assert not results.exists() and not build.exists(), "planning wrote something"


def test_distinct_mistakes_are_at_least_fifteen():
    assert len({m for _, m in BAD}) == len(BAD) >= 15


# Every command the README shows is run by a test. Its lines in ```sh blocks and its inline
# `make ...` / `snakemake ...` / `.venv/bin/...` spans are parsed here:
# * a `snakemake --cores all ...` line is planned (a dry run that must plan cells);
# * a `make TARGET [VAR=value]` is dry-run with `make -n`, and the Snakemake command it runs
#   is planned too (so `make reproduce PROFILE=ci` plans the ci profile);
# * the `.venv/bin/mkdocs build` line is run by tests/test_docs.py.
# A README command of any other kind fails test_every_readme_command_is_run_by_a_test.
# (The paper profile's command has its own test in test_workflow.py: it does not fit this
# host.)
def readme_commands() -> list[str]:
    text = (REPO / "README.md").read_text()
    commands = []
    for block in re.findall(r"```sh\n(.*?)```", text, re.S):
        for line in block.splitlines():
            line = re.sub(r"\s+#.*$", "", line).strip()
            if line:
                commands.append(line)
    commands += re.findall(r"`((?:make [a-z]|snakemake |\.venv/bin/)[^`]*)`", text)
    return list(dict.fromkeys(commands))


def readme_snakemake_args(commands: list[str]) -> list[list[str]]:
    """The arguments after `snakemake --cores all` of the README's snakemake lines."""
    found = []
    for command in commands:
        words = shlex.split(command)
        if words[0] == "snakemake":
            assert words[1:3] == ["--cores", "all"], command
            found.append(words[3:])
    return found


README_COMMANDS = readme_commands()
README_SNAKEMAKE = readme_snakemake_args(README_COMMANDS)
README_MAKE = [c for c in README_COMMANDS if c.startswith("make ")]


def plan_dry_run(args: list[str], tmp_path) -> None:
    proc = snakemake("-n", "--nolock", "--cores", "all", *args,
                     *(["--config"] if "--config" not in args else []),
                     f"results_dir={tmp_path}", f"build_dir={tmp_path / 'build'}")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "run_cell" in proc.stdout


def test_every_readme_command_is_run_by_a_test():
    assert "make reproduce" in README_COMMANDS and "make test" in README_COMMANDS
    assert README_SNAKEMAKE, "the README shows no snakemake command"
    untested = [c for c in README_COMMANDS
                if not (c.startswith(("snakemake ", "make "))
                        or c.startswith(".venv/bin/mkdocs build "))]
    assert not untested, (f"README commands no test runs: {untested}; add a case to "
                          "tests/test_plan.py (README commands) or tests/test_docs.py")


def test_the_readme_parser_finds_commands_in_blocks_and_spans():
    assert ["reproduce", "--configfile", "config/profiles/ci.yaml"] in README_SNAKEMAKE
    assert "make test-fast" in README_MAKE


@pytest.mark.parametrize("args", README_SNAKEMAKE, ids=lambda a: " ".join(a) or "reproduce")
def test_readme_commands_plan(args, tmp_path):
    plan_dry_run(args, tmp_path)


# What each make target the README shows must run (its recipe under `make -n`).
MAKE_RUNS = {
    "reproduce": r"/snakemake --cores all reproduce ",
    "test": (r"/pytest -ra --durations=30 -n auto -m \"not slow\" tests \|\| status=1; .*"
             r"/pytest -ra --durations=30 -n 2 --lanes "
             r"-m \"slow and not nightly and not alone\" tests \|\| status=1; .*"
             r"/pytest -ra --durations=30 -m \"slow and not nightly and alone\" tests "
             r"\|\| status=1; exit \$status$"),
    "test-fast": r"/pytest -ra --durations=30 -n auto -m \"not slow\" tests$",
    "setup-host": r"/ansible-playbook playbooks/setup-host\.yml",
    "decide": r"/slimio-repro decide results --budget ",
    "motivation": r"/snakemake --cores all motivation ",
    "bench": r"/slimio-repro bench --testbed ",
    "nightly": r"/slimio-repro regress ",
    "crash-campaign": r"/snakemake --cores 1 crash_campaign ",
    "calibrate": r"/slimio-repro calibrate --configfile config/config\.yaml --configfile "
                 r"config/profiles/smoke\.yaml$",
}


@pytest.mark.parametrize("command", README_MAKE)
def test_readme_make_targets_run_what_they_say(command, tmp_path):
    words = shlex.split(command)
    target = words[1]
    assert target in MAKE_RUNS, f"{command}: add what `make {target}` runs to MAKE_RUNS"
    proc = subprocess.run(["make", "-n", "--no-print-directory", *words[1:]], cwd=REPO,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    recipe = proc.stdout.replace("\\\n", " ")
    lines = [re.sub(r"\s+", " ", line).strip() for line in recipe.splitlines()]
    assert any(re.search(MAKE_RUNS[target], line) for line in lines), recipe[-2000:]
    # The Snakemake run the target makes is planned, as the README's snakemake lines are;
    # where it goes on past a failed cell, so is the second Snakemake that makes the results
    # of the cells that finished (it runs no cell: with none finished here, it says so).
    runs = [shlex.split(m.group(1)) for line in lines
            for m in re.finditer(r"/snakemake --cores \S+ (reproduce [^|;{}]*)", line)]
    for args in runs:
        if "config/finished-cells-only.yaml" not in args:
            plan_dry_run(args, tmp_path)
            continue
        proc = snakemake("-n", "--nolock", "--cores", "all", *args, "--config",
                         f"results_dir={tmp_path}", f"build_dir={tmp_path / 'build'}")
        out = proc.stdout + proc.stderr
        assert proc.returncode != 0 and "finished_cells_only: none of the" in out and \
            "cells of the matrix has finished" in out, out[-2000:]
    if target == "reproduce":
        assert len(runs) == 2 and "--keep-going" in runs[0], recipe[-2000:]


def cli(*args):
    return subprocess.run([sys.executable, "-m", "slimio_repro", *args], cwd=REPO,
                          capture_output=True, text=True)


def test_cli_end_to_end(tmp_path):
    resolved = cli("validate-config", "--configfile", "config/profiles/smoke.yaml")
    assert resolved.returncode == 0, resolved.stderr
    cfg = json.loads(resolved.stdout)
    assert cfg["workloads"]["redis-benchmark"]["requests"] == 39000
    assert cfg["matrix"]["systems"] == ["baseline", "slimio", "slimio-nofdp", "nopersist"]
    matrix = cli("matrix").stdout.split()
    # 2 systems x 2 workloads x 2 policies x 2 repetitions, the bound once per workload and
    # repetition (policy none), and slimio-nofdp in Figure 4's combination (matrix.only).
    assert len(matrix) == 22 and "vm-slimio-nofdp-redis-benchmark-periodical-r2" in matrix
    assert "vm-slimio-nofdp-ycsb-a-always-r2" not in matrix
    assert {c for c in matrix if "nopersist" in c} == {
        f"vm-nopersist-{w}-none-r{r}" for w in ("redis-benchmark", "ycsb-a") for r in (1, 2)}
    bound = CellPlan.from_json(cli("plan", "--cell", "vm-nopersist-ycsb-a-none-r1").stdout)
    assert not bound.recovery.enabled and not bound.vm.roofline.enabled
    assert bound.redis_bin_dir.endswith("redis-baseline/7.0.15/bin") and not bound.persists
    one = cli("plan", "--cell", "vm-slimio-redis-benchmark-periodical-r1")
    assert CellPlan.from_json(one.stdout).slimio.placement_ids.wal == 1
    hashes = cli("plan").stdout.splitlines()
    assert len(hashes) == 22 and all(len(line.split("\t")[1]) == 64 for line in hashes)
    bad = cli("matrix", "--set", json.dumps({"matrix": {"repetitions": 0}}))
    assert bad.returncode == 2 and "matrix.repetitions" in bad.stderr
    parsed = cli("parse-cell", "tests/fixtures/cells/bare-baseline-redis-benchmark-always-r1",
                 "--timeseries", str(tmp_path / "ts.csv"))
    assert parsed.returncode == 0, parsed.stderr
    assert json.loads(parsed.stdout)["cell_id"] == "bare-baseline-redis-benchmark-always-r1"
    assert (tmp_path / "ts.csv").read_text().startswith("t_s,")
