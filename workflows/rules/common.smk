# Validation, wildcard constraints and input functions shared by every stage.
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(workflow.basedir) / "src"))

from slimio_repro import guest as guestmod  # noqa: E402
from slimio_repro import paths as pathsmod  # noqa: E402
from slimio_repro import plan as planmod  # noqa: E402
from slimio_repro.aggregate import tables as aggregatemod  # noqa: E402
from slimio_repro.build import fio as fiomod  # noqa: E402
from slimio_repro.build import redis as buildmod  # noqa: E402
from slimio_repro.build import ycsb as ycsbmod  # noqa: E402
from slimio_repro.claims import catalog as claimsmod  # noqa: E402

# Fill the schema's defaults, validate, and resolve the plan: every check that can be made
# before a build is made here, and a wrong key or value stops the run, named.
try:
    planmod.validate(config)
    PLAN = planmod.make(config)
except planmod.ConfigError as exc:
    raise WorkflowError(str(exc)) from None
# The claims file too, before anything is built: a bad claim stops the run, named.
try:
    claimsmod.load(config["claims"]["file"])
except claimsmod.ClaimsError as exc:
    raise WorkflowError(f"{exc} (config claims.file)") from None

# When this run started: a claims summary older than this was not judged by this run.
WORKFLOW_STARTED = time.time()
SUMMARY_PRINTED = []

# As the user wrote them (relative to the working directory, or absolute): targets match.
RESULTS = config["results_dir"].rstrip("/")
BUILD = config["build_dir"].rstrip("/")
REDIS_VERSION = PLAN.redis_version
# The guest's fio (device roofline): the one version testbed/box/fio.yaml pins.
FIO_VERSION = fiomod.pinned_version()
# The YCSB binding's build: named after the YCSB core it is built on (ycsb-bindings/pom.xml).
YCSB_VERSION = PLAN.ycsb_version
CELLS = PLAN.matrix


wildcard_constraints:
    testbed="|".join(config["matrix"]["testbeds"]),
    system="|".join(guestmod.SYSTEMS),
    workload="|".join(guestmod.WORKLOADS),
    policy="|".join(guestmod.POLICY_APPENDFSYNC),
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
    """What the cell's plan says it needs built: a bare cell its Redis build (and a ycsb-a
    cell the YCSB binding's), a vm cell the box (which has all the builds in it)."""
    names = {pathsmod.BOX_PATTERN: "box"}
    out = {}
    for need in PLAN.cell_of(wildcards).needs:
        name = names.get(need) or ("server" if need.endswith("redis-server") else "ycsb")
        out[name] = build(need)
    return out


def slimio_build_inputs(wildcards):
    """redis-slimio's sources, Makefile and the version's hook series: a change rebuilds."""
    return [str(p) for p in buildmod.slimio_build_inputs(wildcards.version)]


def ftl_sequences():
    """Every (testbed, system, workload, policy) of the matrix whose cells trace the device
    and write to it (the no-persistence bound writes nothing a model could amplify)."""
    seen = {}
    for c in CELLS:
        if c.testbed == "vm" and guestmod.persists(c.system):
            key = dict(testbed=c.testbed, system=c.system, workload=c.workload, policy=c.policy)
            seen[tuple(key.values())] = key
    return list(seen.values())


# The FTL stage's results (workflows/rules/ftl.smk): one per vm sequence of repetitions.
FTL_OUTPUTS = [results(pathsmod.FTL_SEQUENCE_PATTERN).format(**k) for k in ftl_sequences()]


def ftl_sequence_inputs(wildcards):
    """The raw directories of the sequence's repetitions, in repetition order."""
    cells = sorted((c for c in CELLS if (c.testbed, c.system, c.workload, c.policy)
                    == (wildcards.testbed, wildcards.system, wildcards.workload,
                        wildcards.policy)), key=lambda c: c.rep)
    return [results(pathsmod.CELL_RAW_PATTERN).format(**c.wildcards()) for c in cells]


def print_claims_summary():
    """At the end of a run that judged the claims: their one-screen summary (onsuccess)."""
    summary = Path(results(pathsmod.VERDICT_FILES["summary"]))
    if summary.exists() and summary.stat().st_mtime >= WORKFLOW_STARTED \
            and not SUMMARY_PRINTED:
        SUMMARY_PRINTED.append(summary)   # Snakemake may call onsuccess more than once
        print(summary.read_text(), end="")


def motivation_available(wildcards=None):
    """The motivation's inputs (none), or a planning-time stop naming why it cannot run
    (rule motivation.smk's targets)."""
    if PLAN.motivation_unavailable:
        raise WorkflowError(f"motivation: {PLAN.motivation_unavailable}")
    return []
