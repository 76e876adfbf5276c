# Validation, wildcard constraints and input functions shared by every stage.
import sys
from pathlib import Path

sys.path.insert(0, str(Path(workflow.basedir) / "src"))

from slimio_repro import build as buildmod  # noqa: E402
from slimio_repro import cells as cellsmod  # noqa: E402
from slimio_repro import config as configmod  # noqa: E402
from slimio_repro import fio as fiomod  # noqa: E402
from slimio_repro import paths as pathsmod  # noqa: E402
from slimio_repro import ycsb as ycsbmod  # noqa: E402

# Fill the schema's defaults and validate: a wrong key or value stops here, named.
try:
    configmod.validate(config)
except configmod.ConfigError as exc:
    raise WorkflowError(str(exc)) from None

RESULTS = config["results_dir"].rstrip("/")
BUILD = config["build_dir"].rstrip("/")
REDIS_VERSION = config["redis"]["version"]
# The guest's fio (device roofline): the one version testbed/box/fio.yaml pins.
FIO_VERSION = fiomod.pinned_version()
# The YCSB binding's build: named after the YCSB core it is built on (ycsb-bindings/pom.xml).
YCSB_VERSION = ycsbmod.pinned_version()
CELLS = cellsmod.expand(config)


wildcard_constraints:
    testbed="|".join(config["matrix"]["testbeds"]),
    system="baseline|slimio|slimio-nofdp",
    workload="redis-benchmark|ycsb-a",
    policy="periodical|always",
    rep=r"\d+",
    version=r"\d+\.\d+\.\d+",


def results(pattern):
    return f"{RESULTS}/{pattern}"


def build(pattern):
    return f"{BUILD}/{pattern}"


def cell_files(pattern, **extra):
    return [results(pattern).format(**c.wildcards(), **extra) for c in CELLS]


# Both Redis builds are baked into the guest box whatever the matrix runs (slimio-nofdp runs
# the slimio build): one box serves every matrix, and narrowing the matrix never rebuilds it.
BOX_SYSTEMS = ["baseline", "slimio"]


def cell_inputs(wildcards):
    """A bare cell needs its Redis build (and a ycsb-a cell the YCSB binding's); a vm cell
    the box (which has all the builds in it)."""
    if wildcards.testbed == "vm":
        return {"box": build(pathsmod.BOX_PATTERN)}
    inputs = {"server": redis_bin(wildcards)}
    if wildcards.workload == "ycsb-a":
        inputs["ycsb"] = build(pathsmod.YCSB_BUILD_RECORD_PATTERN.format(version=YCSB_VERSION))
    return inputs


def redis_bin(wildcards):
    build_dir = pathsmod.REDIS_BUILD_PATTERN.format(
        system=cellsmod.build_system(wildcards.system), version=REDIS_VERSION
    )
    return build(f"{build_dir}/bin/redis-server")


def slimio_build_inputs(wildcards):
    """redis-slimio's sources, Makefile and the version's hook series: a change rebuilds."""
    return [str(p) for p in buildmod.slimio_build_inputs(wildcards.version)]
