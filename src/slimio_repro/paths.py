"""Every path the framework reads or writes on the host, in one place.

What a cell writes into its raw directory, and the box's paths, are named by the code that
writes them, in :mod:`slimio_repro.agent.layout`.

Snakemake rules use the ``*_PATTERN`` strings (with ``{wildcards}``); Python code uses the
:class:`Paths` methods, which format the same patterns, so the two can never disagree.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .agent import layout as _guest

# The guest owns these (it runs with its own copy of the repository); named here too.
REPO_ROOT = _guest.REPO_ROOT
REDIS_CONF_TEMPLATE = _guest.REDIS_CONF_TEMPLATE
SLIMIO_ADMIN = _guest.SLIMIO_ADMIN

CONFIG_DIR = REPO_ROOT / "config"
SCHEMA_DIR = REPO_ROOT / "workflows" / "schemas"
CONFIG_SCHEMA = SCHEMA_DIR / "config.schema.yaml"
REDIS_BASELINE_DIR = REPO_ROOT / "redis-baseline"
UPSTREAM_PINS = REDIS_BASELINE_DIR / "UPSTREAM.yaml"
BENCHMARK_PATCH_DIR = REDIS_BASELINE_DIR / "patches"
REDIS_SLIMIO_DIR = REPO_ROOT / "redis-slimio"
SLIMIO_PATCH_DIR = REDIS_SLIMIO_DIR / "patches"
SLIMIO_SRC_DIR = REDIS_SLIMIO_DIR / "src"
# Built by `make -C redis-slimio admin`, never copied into the Redis tree.
SLIMIO_ADMIN_SOURCE = "slimio_admin.c"
REFERENCE_DIR = REPO_ROOT / "results" / "reference"
# `slimio-repro estimate`'s default calibration: measured smoke vm cells (their provenance and
# plans) and the Snakemake logs of their runs, captured by tests/fixtures/estimate/capture.py.
ESTIMATE_CALIBRATION = REFERENCE_DIR / "estimate-calibration"
# `slimio-repro calibrate`'s reference: a smoke run with kept guests (run/calibrate.py), and
# its result, in the build directory.
SMOKE_REFERENCE = REFERENCE_DIR / "smoke-run"
CALIBRATION_FILE = "calibration.json"
# The vm testbed: device profiles, the Vagrantfile, the guest box recipe, the playbooks.
FEMU_DIR = REPO_ROOT / "femu"
TESTBED_DIR = REPO_ROOT / "testbed"
VAGRANTFILE = TESTBED_DIR / "Vagrantfile"
BOX_DIR = TESTBED_DIR / "box"
BOX_SCRIPT = BOX_DIR / "build_box.sh"
BOX_PACKAGES = BOX_DIR / "packages.txt"
BOX_GUEST_REQUIREMENTS = BOX_DIR / "requirements-guest.txt"
# fio for the device roofline: pinned (testbed/box/fio.yaml), built on the host, baked into the
# box at agent.layout.GUEST_FIO.
FIO_PIN = BOX_DIR / "fio.yaml"
# Our YCSB binding (a Maven project in YCSB's layout) and its workload files; built on the host
# into YCSB_BUILD_PATTERN (lib/ = the binding, YCSB's core and their runtime jars; workloads/;
# build.json) and baked into the box under the same relative path.
YCSB_BINDINGS_DIR = REPO_ROOT / "ycsb-bindings"
YCSB_POM = YCSB_BINDINGS_DIR / "pom.xml"
ARCHIVE_URI_PROBE = REPO_ROOT / "playbooks/roles/host_apt_sources/files/debian_archive_uri.py"
# Written by the setup playbook's host_accel role (src/slimio_repro/testbed/accel.py).
ACCEL_VERDICT = "/var/lib/slimio-repro/accel.json"
# Where the host_femu setup role links its FEMU build (its host_femu_prefix + bin/).
FEMU_EMULATOR = "/opt/femu/bin/qemu-system-x86_64"
# Where the vm cells' VM directories go when testbeds.vm.work_dir is null.
VM_WORK_DIR = "/var/tmp/slimio-repro/vm"
# Each running cell's lease: what it holds on its host (run/leases.py).
LEASE_DIR = "/var/tmp/slimio-repro/leases"
# The environment variable every process of a cell inherits: its lease id (run/leases.py).
CELL_ENV = "SLIMIO_REPRO_CELL"

# Wildcard patterns, relative to the results or build directory.
SOURCE_TARBALL_PATTERN = "sources/redis-{version}.tar.gz"
REDIS_BUILD_PATTERN = "redis-{system}/{version}"
FIO_BUILD_PATTERN = "fio/{version}"
FIO_PATTERN = f"{FIO_BUILD_PATTERN}/bin/fio"
YCSB_BUILD_PATTERN = "ycsb/{version}"
YCSB_BUILD_RECORD_PATTERN = f"{YCSB_BUILD_PATTERN}/build.json"
CELL_ID_PATTERN = "{testbed}-{system}-{workload}-{policy}-r{rep}"
CELL_RAW_PATTERN = f"raw/{CELL_ID_PATTERN}"
CELL_RECORD_PATTERN = f"cells/{CELL_ID_PATTERN}.json"
CELL_TIMESERIES_PATTERN = f"cells/{CELL_ID_PATTERN}.timeseries.csv"
BOX_PATTERN = "box/slimio-guest.box"
CELL_FIGURE_PATTERN = f"figures/runtime_rps/{CELL_ID_PATTERN}.{{ext}}"
# Rule run_cell's log (workflows/rules/run.smk): what a cell that failed left to read.
CELL_LOG_PATTERN = f"logs/run_cell/{CELL_ID_PATTERN}.log"
# The FTL model's replay of a system's repetitions in order on one un-reformatted device.
FTL_SEQUENCE_ID_PATTERN = "{testbed}-{system}-{workload}-{policy}"
FTL_SEQUENCE_PATTERN = f"ftl/{FTL_SEQUENCE_ID_PATTERN}.json"
# The motivation (Table 1, Table 2, Figure 2): its cells' raw directories and records, its
# tables, figure and verdicts (of the claims whose id starts with MOTIVATION_CLAIMS).
MOTIVATION_ID_PATTERN = "{testbed}-{system}-motivation-r{rep}"
MOTIVATION_RAW_PATTERN = f"raw/{MOTIVATION_ID_PATTERN}"
MOTIVATION_RECORD_PATTERN = f"motivation/{MOTIVATION_ID_PATTERN}.json"
MOTIVATION_LOG_PATTERN = f"logs/run_motivation_cell/{MOTIVATION_ID_PATTERN}.log"
MOTIVATION_TABLE = "tables/motivation_cells.csv"
MOTIVATION_TABLES = ("table1_snapshot_impact", "table2_fs_write_path_cpu")
MOTIVATION_FIGURE = "figures/fig2_snapshot_analysis"
MOTIVATION_CLAIMS = "mot-"
# The claims stage: the paper's claims (reference data), their schema, and a run's verdicts.
CLAIMS_FILE = REFERENCE_DIR / "claims.yaml"
CLAIMS_SCHEMA = SCHEMA_DIR / "claims.schema.yaml"
CELLS_TABLE = "tables/cells.csv"
# The cells of the run that did not finish (config finished_cells_only: the tables, claims
# and report made from the others), each with its log's last lines; [] in a complete run.
# The motivation's own beside its records.
MISSING_CELLS_PATTERN = "tables/{table}_missing.json"
MISSING_CELLS = MISSING_CELLS_PATTERN.format(table="cells")
MOTIVATION_MISSING_CELLS = MISSING_CELLS_PATTERN.format(table="motivation_cells")
VERDICT_FILES = {"csv": "claims/verdicts.csv", "json": "claims/verdicts.json",
                 "md": "claims/verdicts.md", "summary": "claims/summary.txt"}
MOTIVATION_VERDICT_FILES = {k: v.replace("claims/", "claims/motivation/")
                            for k, v in VERDICT_FILES.items()}
REPORT = "report.html"
# The crash campaign's outputs (rule crash_campaign), relative to the results directory.
CRASH_DIR = "crash"
CRASH_SUMMARY = f"{CRASH_DIR}/summary.json"
# slimio-repro gc-check's records, one directory per device profile, utilization and seed.
GC_CHECK_DIR = "gc-check"


@dataclass(frozen=True)
class Paths:
    """Where one run's results and the shared build cache live."""

    results_dir: Path
    build_dir: Path

    @classmethod
    def from_config(cls, config: dict) -> "Paths":
        return cls(_absolute(config["results_dir"]), _absolute(config["build_dir"]))

    def redis_build(self, system: str, version: str) -> Path:
        return self.build_dir / REDIS_BUILD_PATTERN.format(system=system, version=version)

    def ycsb_build(self, version: str) -> Path:
        return self.build_dir / YCSB_BUILD_PATTERN.format(version=version)

    def cell_raw(self, cell) -> Path:
        return self.results_dir / CELL_RAW_PATTERN.format(**cell.wildcards())


def _absolute(path: str | Path) -> Path:
    p = Path(path)
    return p if p.is_absolute() else (REPO_ROOT / p)
