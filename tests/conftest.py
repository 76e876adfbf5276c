"""Shared fixtures: the repository, the real cell directories captured from real runs, and
(for the end-to-end tests) a Redis build made by the pipeline itself."""

from __future__ import annotations

import errno
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from slimio_repro import paths

# In a guest (tests/test_vm_e2e.py runs the SlimIO suite there) only the standard library,
# redis-py and pytest exist: the config module (PyYAML, jsonschema) is imported where used.

REPO = paths.REPO_ROOT
FIXTURES = Path(__file__).parent / "fixtures"
CELL_FIXTURES = FIXTURES / "cells"
VENV_BIN = Path(sys.executable).parent


# The slow tier: modules that run VMs, Maven, Redis's own Tcl suites or the pipeline end to
# end, and every test that needs a Redis build. `make test-fast` runs the rest (-m "not slow").
# A test marked nightly (end-to-end coverage that other tests of `make test` also give, at a
# cost the suite's time limit cannot carry) is slow too, and runs in `make nightly` only.
SLOW_MODULES = {"test_e2e", "test_vm_e2e", "test_femu_e2e", "test_bare_device_e2e", "test_slurm",
                "test_pipeline_faults", "test_slimio_server",
                "test_ycsb_binding", "test_slimio_fuzz", "test_redis_upstream"}
SLOW_FIXTURES = {"redis_bin", "slimio_bin", "fio_bin"}
# The Redis releases whose own test suites run with our patches (tests/test_redis_upstream.py).
UPSTREAM_REDIS = ["7.0.15", "8.0.2"]


# `make test` runs the slow tier in two steps. First two lanes side by side (`pytest -n 2
# --lanes`), one test at a time each: the tests that boot guests in one, the host's own in
# the other (a lane's VMs are the only ones its tests see come and go). Then
# the tests marked alone, one at a time, with the machine to themselves: the ones whose
# assertions follow the machine's speed or load, or that act on every run of the host or
# the checkout. Side by side, the lanes' Snakemakes run without locks (`snakemake()`).
VM_LANE = {"test_vm_e2e", "test_bare_device_e2e", "test_pipeline_faults"}
ALONE = {
    # Two timed runs of the tiny matrix (local, then through SLURM) against an estimate.
    "test_slurm",
    # FEMU's device threads poll: beside another lane its cells took 2.5 times as long.
    "test_femu_e2e",
    # Redis's rewrite count follows the machine's speed (one instead of two beside a VM).
    "test_sizing_redis",
    # The session's tiny run, which test_slurm's estimate times (tiny_bare_run).
    "test_e2e::test_slimio_pipeline_end_to_end",
    # `make reproduce` runs `slimio-repro doctor --fix` over every run on the host, and the
    # fault campaign kills its Snakemake and clears the lock it leaves, which is done only
    # while no other Snakemake runs in the checkout. (Decide's Snakemake, the one other run
    # of the lanes that takes the checkout's lock, runs in the host lane.)
    "test_e2e::test_a_failed_cell_leaves_the_rest_reported_and_only_it_runs_again",
    "test_pipeline_faults::test_bare_faults_rerun_only_the_interrupted_cell_and_leave_nothing",
}


def pytest_addoption(parser):
    parser.addoption("--lanes", action="store_true",
                     help="with -n 2: the slow tier's two lanes side by side (tests/conftest.py)")


@pytest.hookimpl(optionalhook=True)     # a guest's pytest has no pytest-xdist
def pytest_xdist_make_scheduler(config, log):
    """With --lanes, pytest-xdist gives each lane, whole and in order, to a worker of its own
    (its --dist loadgroup cannot: pytest 9 ignores the node ids it rewrites)."""
    if not config.getoption("lanes"):
        return None
    from xdist.scheduler import LoadScopeScheduling

    class Lanes(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return "vm" if Path(nodeid.split("::", 1)[0]).stem in VM_LANE else "host"

    return Lanes(config, log)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_setupnodes(config, specs):
    """Before the lanes start (pytest-xdist's controller): the builds they share, made once
    by the pipeline's rules, so that neither lane makes them while the other reads them."""
    if not config.getoption("lanes"):
        return
    built_box()     # both Redis builds, the pinned fio and the YCSB binding are its inputs
    for version in UPSTREAM_REDIS:
        source_tarball(version)


def pytest_collection_modifyitems(config, items):
    for item in items:
        module = item.module.__name__
        if module in SLOW_MODULES or SLOW_FIXTURES & set(item.fixturenames) \
                or item.get_closest_marker("nightly"):
            item.add_marker(pytest.mark.slow)
            if module in ALONE or f"{module}::{item.originalname}" in ALONE:
                item.add_marker(pytest.mark.alone)


def start_redis(bin_dir: Path, directory: Path, appendfsync: str = "everysec",
                rewrite_percentage: int = 100, rewrite_min_size: int = 64 << 20):
    """A redis-server of ``bin_dir`` on a free port with its data, conf and log in
    ``directory``; started (shut it down with ``.shutdown()``)."""
    from slimio_repro.agent.server import RedisServer, free_port, render_conf
    port = free_port()
    render_conf(directory / "redis.conf", port=port, data_dir=directory,
                log_file=directory / "redis.log", appendfsync=appendfsync,
                auto_aof_rewrite_percentage=rewrite_percentage,
                auto_aof_rewrite_min_size=rewrite_min_size)
    server = RedisServer(bin_dir, directory / "redis.conf", port, directory / "redis.log")
    server.start(60)
    return server


def config_of(overrides: dict | None = None, configfiles=None) -> dict:
    """config/config.yaml (then ``configfiles``) with ``overrides`` merged over."""
    from slimio_repro import plan as planmod
    return planmod.load([paths.CONFIG_DIR / "config.yaml", *(configfiles or [])], overrides)


def plan_of(overrides: dict | None = None, configfiles=None):
    """The plan of :func:`config_of`."""
    from slimio_repro import plan as planmod
    return planmod.make(config_of(overrides, configfiles))


def cell_plan(cell_id: str, overrides: dict | None = None, configfiles=None):
    """One cell's plan (see :func:`plan_of`)."""
    return plan_of(overrides, configfiles).cell(cell_id)


@pytest.fixture
def default_config() -> dict:
    from slimio_repro import plan as configmod
    return configmod.load([paths.CONFIG_DIR / "config.yaml"])


@pytest.fixture
def fixture_cell(tmp_path) -> Path:
    """A copy of a real periodical cell (the tests may not modify the committed one)."""
    dst = tmp_path / "bare-baseline-redis-benchmark-periodical-r1"
    shutil.copytree(CELL_FIXTURES / dst.name, dst)
    return dst


def snakemake(*args: str, cwd: Path = REPO, check: bool = False, slurm: bool = False,
              env: dict | None = None) -> subprocess.CompletedProcess:
    """Snakemake of the project's venv, with ``env`` added to the environment. A local run
    (``slurm`` False) is pointed at no SLURM configuration: the SLURM executor plugin runs
    `scontrol show config` whenever Snakemake starts, which waits 9 s for a controller that
    is installed but stopped (as the one-node cluster is after tests/test_slurm.py), and
    fails at once without a configuration."""
    env = dict(os.environ, **(env or {}), PATH=f"{VENV_BIN}:{os.environ['PATH']}")
    if not slurm:
        env["SLURM_CONF"] = os.devnull
    if os.environ.get("PYTEST_XDIST_WORKER") and "--unlock" not in args:
        # Side by side in one checkout, Snakemake's locks break: a run that ends removes the
        # whole lock directory (Snakemake 9.27.1's FilePersistence._delete_locks), and a run
        # that starts meanwhile fails writing its own. Each test writes its own results.
        args = ("--nolock", *args)
    proc = subprocess.run([str(VENV_BIN / "snakemake"), *args], cwd=cwd, env=env,
                          capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise AssertionError(f"snakemake {' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}")
    return proc


def built(system: str) -> Path:
    """The ``system``'s binaries, built by the pipeline's own rule (cached in build/)."""
    from slimio_repro import plan as configmod
    version = configmod.load([paths.CONFIG_DIR / "config.yaml"])["redis"]["version"]
    bin_dir = REPO / "build" / paths.REDIS_BUILD_PATTERN.format(system=system,
                                                                 version=version) / "bin"
    snakemake("--cores", "all", str(bin_dir.relative_to(REPO) / "redis-server"), check=True)
    assert (bin_dir / "redis-benchmark").is_file()
    return bin_dir


@pytest.fixture(scope="session")
def redis_bin() -> Path:
    """The baseline Redis binaries."""
    return built("baseline")


@pytest.fixture(scope="session")
def slimio_bin() -> Path:
    """The slimio Redis binaries and slimio-admin (rule build_redis_slimio); in a guest, the
    box's (SLIMIO_TEST_BIN_DIR)."""
    given = os.environ.get("SLIMIO_TEST_BIN_DIR")
    bin_dir = Path(given) if given else built("slimio")
    assert (bin_dir / paths.SLIMIO_ADMIN).is_file()
    return bin_dir


@pytest.fixture(scope="session")
def fio_bin() -> Path:
    """The pinned fio, built by the pipeline's own rule (the bare bench's device rates)."""
    from slimio_repro.build import fio
    snakemake("--cores", "all", "build_fio_pinned", check=True)
    path = REPO / "build" / paths.FIO_PATTERN.format(version=fio.load_pin()["version"])
    assert path.is_file()
    return path


@pytest.fixture(scope="session")
def slimio_admin(tmp_path_factory) -> Path:
    """slimio-admin alone (`make -C redis-slimio admin`), for tests of the layout arithmetic."""
    out = tmp_path_factory.mktemp("slimio-admin")
    proc = subprocess.run(["make", "-C", str(paths.REDIS_SLIMIO_DIR), "admin",
                           f"BUILD_DIR={out}"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out / paths.SLIMIO_ADMIN


def source_tarball(version: str) -> Path:
    """Redis ``version``'s source tarball, fetched and checked by the pipeline's own rule."""
    tarball = REPO / "build" / paths.SOURCE_TARBALL_PATTERN.format(version=version)
    snakemake("--cores", "all", str(tarball.relative_to(REPO)), check=True)
    return tarball


def built_box() -> tuple[dict, Path]:
    """The default configuration and its guest box, built by the pipeline (a no-op when it
    is current): what a test that boots its own VM starts from."""
    require_root()
    from slimio_repro import plan as configmod
    cfg = configmod.load([paths.CONFIG_DIR / "config.yaml"])
    box_file = REPO / cfg["build_dir"] / paths.BOX_PATTERN
    snakemake("--cores", "all", str(box_file.relative_to(REPO)), check=True)
    return cfg, box_file


def require_root() -> None:
    if os.geteuid() != 0:
        pytest.fail("the end-to-end tests need root (loop devices and mount); "
                    "run `make test` as root")


# The tiny bare matrix (about 5-20 s per cell here): both systems side by side and the
# no-persistence bound, both workloads and both policies, one repetition: 10 cells.
TINY = ["server={sampler_interval_s: 0.25}",
        "workloads={redis-benchmark: {requests: 300000, keyspace: 57000}, "
        "ycsb-a: {records: 20000, operations: 100000}}"]
SIDE_BY_SIDE = ("matrix={testbeds: [bare], repetitions: 1, "
                "systems: [baseline, slimio, nopersist]}")


@dataclass(frozen=True)
class TinyRun:
    results: Path       # its results directory: read it, never write to it
    seconds: float      # its wall time, measured around its Snakemake
    log: Path           # its Snakemake log


@pytest.fixture(scope="session")
def tiny_bare_run(redis_bin, slimio_bin, tmp_path_factory) -> TinyRun:
    """`snakemake reproduce` of the tiny bare matrix, once per session:
    tests/test_e2e.py checks what it made, and tests/test_slurm.py runs the same matrix
    through SLURM and compares the two."""
    require_root()
    results = tmp_path_factory.mktemp("tiny-bare") / "results"
    t0 = time.monotonic()
    proc = snakemake("--cores", "all", "reproduce", "--config", f"results_dir={results}",
                     SIDE_BY_SIDE, *TINY)
    seconds = time.monotonic() - t0
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return TinyRun(results, seconds, snakemake_log(proc))


def snakemake_log(proc: subprocess.CompletedProcess) -> Path:
    """The log of the Snakemake run ``proc``, as it names it at its end (not whichever file
    appeared in .snakemake/log meanwhile)."""
    found = re.findall(r"^Complete log\(s\): (\S+)$", proc.stdout + proc.stderr, re.MULTILINE)
    assert len(found) == 1, proc.stderr[-3000:]
    return Path(found[0])


def resp(*args) -> bytes:
    """One command in RESP, as Redis's aofWrite writes it (arguments str, int or bytes)."""
    out = b"*%d\r\n" % len(args)
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    return out


def first_data(path: Path, offset: int) -> int | None:
    """The first allocated byte at or after ``offset`` (SEEK_DATA), None if only holes follow
    (SlimIO's deallocation punches holes in a regular-file device)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        return os.lseek(fd, offset, os.SEEK_DATA)
    except OSError as e:
        if e.errno == errno.ENXIO:
            return None
        raise
    finally:
        os.close(fd)


@pytest.fixture(scope="session")
def fixture_results(tmp_path_factory) -> Path:
    """A results directory made by the real stages from the committed cell fixtures."""
    # Imported here: the SlimIO server suite loads this conftest inside the guest, which has
    # the guest's packages only (no pandas, no matplotlib).
    from slimio_repro import claims, report
    from slimio_repro.aggregate import plot, tables
    from slimio_repro.parse import record as parse
    from slimio_repro.run import finished

    results = tmp_path_factory.mktemp("report") / "results"
    (results / "cells").mkdir(parents=True)
    shutil.copytree(CELL_FIXTURES, results / "raw")
    records = []
    for raw in sorted((results / "raw").iterdir()):
        rec = results / "cells" / f"{raw.name}.json"
        parse.write(raw, rec, rec.with_suffix(".timeseries.csv"))
        records.append(rec)
    tables.write_all(records, results / "tables")
    pairs = [(results / "cells" / f"bare-{s}-redis-benchmark-periodical-r1.json",
              results / "cells" / f"bare-{s}-redis-benchmark-periodical-r1.timeseries.csv")
             for s in ("baseline", "slimio")]
    figures = results / "figures"
    figures.mkdir()
    plot.runtime_rps_figure("fig5_runtime_rps", pairs,
                            [figures / "fig5_runtime_rps.png", figures / "fig5_runtime_rps.pdf"],
                            caption=figures / "fig5_runtime_rps.caption.txt")
    # Every cell finished: none is missing (rule list_missing_cells).
    finished.write([], results / paths.MISSING_CELLS)
    claims.judge_run(results / paths.CELLS_TABLE, paths.CLAIMS_FILE, results / "claims")
    report.write(results)
    return results
