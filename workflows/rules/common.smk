# Validation, wildcard constraints and input functions shared by every stage.
import itertools
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(workflow.basedir) / "src"))

from slimio_repro import paths as pathsmod  # noqa: E402
from slimio_repro import plan as planmod  # noqa: E402
from slimio_repro.plan import jobs as jobsmod  # noqa: E402

# Whether Snakemake submits this run's jobs to a cluster. It reads this file before it
# attaches its executor, so it cannot be asked; but a local run (and a dry run) always has
# --cores, and a cluster run has none (--jobs instead): its jobs run with --cores all.
SUBMITS_TO_CLUSTER = workflow.resource_settings.cores is None


def planning_host():
    """The machine the plan checks vm cells against: this one, or on a cluster (Snakemake
    submitting jobs, or running one of them) the largest node that a vm cell can ask for, as
    sinfo describes it: the submit host is not where the cells run."""
    on_cluster = SUBMITS_TO_CLUSTER or workflow.remote_exec
    if not on_cluster or "vm" not in config["matrix"]["testbeds"]:
        return None
    return planmod.Host.of_cluster(jobsmod.VM_NODE_FEATURE)


# Fill the schema's defaults, validate, and resolve the plan: every check that can be made
# before a build is made here, and a wrong key or value stops the run, named.
try:
    planmod.validate(config)
    PLAN = planmod.make(config, planning_host())
except planmod.ConfigError as exc:
    raise WorkflowError(str(exc)) from None

# The modules that need SciPy, pandas or matplotlib load after the configuration's checks: a
# dry run that refuses a bad key or value stops in 1.6-1.8 s instead of 2.9 s here
# (`time snakemake -n reproduce --config 'matrix={repetitions: 0}'`).
from slimio_repro import report as reportmod  # noqa: E402
from slimio_repro import aggregate as aggregatemod  # noqa: E402
from slimio_repro.build import fio as fiomod  # noqa: E402
from slimio_repro.build import redis as build_redis  # noqa: E402
from slimio_repro.build import ycsb_binding as ycsbmod  # noqa: E402
from slimio_repro.claims import catalog as claimsmod  # noqa: E402
from slimio_repro.claims import missing_text  # noqa: E402
from slimio_repro.run import finished as finishedmod  # noqa: E402

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

# config finished_cells_only (the Makefile's second Snakemake after a failed cell): the stages
# after the cells take the cells that have finished (complete raw directories) and no cell
# runs; the others are missing, listed with their logs (rule list_missing_cells) for the
# claims and the report. Otherwise every cell of the plan is the run's, and one that fails
# fails the run (the Makefile's first Snakemake goes on past it: --keep-going).
FINISHED_CELLS_ONLY = config["finished_cells_only"]
FINISHED = finishedmod.finished_ids(
    RESULTS, [c.id for c in (*PLAN.cells, *PLAN.extra_cells, *PLAN.motivation_cells)]
) if FINISHED_CELLS_ONLY else set()


def taken(plans):
    """Of ``plans`` (CellPlans), those this run takes: all, or under finished_cells_only
    the finished ones."""
    return [p for p in plans if not FINISHED_CELLS_ONLY or p.id in FINISHED]


def left_out(plans):
    """Of ``plans``, those finished_cells_only leaves out (none without it)."""
    return [p for p in plans if FINISHED_CELLS_ONLY and p.id not in FINISHED]


# The matrix's cells this run takes.
CELLS = tuple(p.cell for p in taken(PLAN.cells))
# What is known of the cells left out (finishedmod.missing), per list rule
# list_missing_cells writes: the run's (with the motivation's where the run includes it) and
# the motivation's own (its cells and Table 1's).
MISSING_CELLS = {
    "cells": finishedmod.missing(
        left_out(PLAN.cells) + (left_out((*PLAN.motivation_cells, *PLAN.extra_cells))
                                if PLAN.motivation_in_reproduce else []), RESULTS),
    "motivation_cells": finishedmod.missing(
        left_out((*PLAN.motivation_cells, *PLAN.table1_cells)), RESULTS),
}
CELL_RETRIES = config["cell_retries"]

# Cores of a job that takes its whole machine (a cell, a build, the box). Locally: --cores.
# On a cluster the submitting host has no --cores: the SLURM profile's set-threads give
# these rules the CPU count of the nodes that run them (workflows/profiles/slurm), and a
# cell holds its node alone (plan/jobs.py).
WHOLE_NODE_CORES = workflow.resource_settings.cores or 1
WHOLE_NODE_RULES = ("run_cell", "run_motivation_cell", "build_redis_baseline",
                    "build_redis_slimio", "build_fio", "build_guest_box")
if SUBMITS_TO_CLUSTER:
    _missing = [r for r in WHOLE_NODE_RULES
                if r not in workflow.resource_settings.overwrite_threads]
    if _missing:
        raise WorkflowError(
            f"on a cluster, rules {', '.join(_missing)} take a whole node and need its CPU "
            "count: give it in the profile's set-threads (workflows/profiles/slurm/"
            "config.yaml), e.g. `set-threads: {run_cell: 32, ...}`")

# Rules that only gather small files or name targets run where Snakemake runs, not as
# cluster jobs: each job costs a submission and a Snakemake start on its node. The builds,
# the cells, their parsing and the FTL model are jobs. fetch_redis_source reaches the
# network (compute nodes often cannot).
localrules:
    fetch_redis_source,
    build_ycsb,
    build_fio_pinned,
    build_redis,
    run_matrix,
    aggregate_tables,
    plot_cell_runtime_rps,
    plot_fig4_runtime_rps,
    plot_fig5_runtime_rps,
    plot_waf_sensitivity,
    list_missing_cells,
    judge_claims,
    render_report,
    motivation_outputs,
    judge_motivation_claims,
    motivation,
    reproduce,


def cell_resources(wildcards, pattern=pathsmod.CELL_ID_PATTERN):
    """The cell's needs as Snakemake resources (plan/jobs.py), one by one below."""
    return jobsmod.cell_resources(PLAN.cell(pattern.format(**wildcards)))


def cell_resource(name, pattern=pathsmod.CELL_ID_PATTERN):
    return lambda wildcards: cell_resources(wildcards, pattern)[name]


wildcard_constraints:
    testbed="|".join(config["matrix"]["testbeds"]),
    system="|".join(planmod.SYSTEMS),
    workload="|".join(planmod.WORKLOADS),
    policy="|".join(planmod.POLICY_APPENDFSYNC),
    rep=r"\d+",
    version=r"\d+\.\d+\.\d+",


def sweep_leftovers():
    """Stop the cells an interrupted run left running and remove what they and dead cells
    left (run/leases.py); `slimio-repro doctor` shows the rest."""
    from slimio_repro.run import leases

    for line in leases.sweep(stop_orphans=True):
        print(f"left by an interrupted run: {line}", file=sys.stderr)


def release_kept_guests():
    """Destroy the guests this run's cells kept for a next cell (run/guests.py)."""
    from slimio_repro.run import guests

    for line in guests.release():
        print(line, file=sys.stderr)


def results(pattern):
    return f"{RESULTS}/{pattern}"


def build(pattern):
    return f"{BUILD}/{pattern}"


def cell_files(pattern, **extra):
    return [results(pattern).format(**c.wildcards(), **extra) for c in CELLS]


def cell_records(wildcards=None):
    """The records the tables are made from (rule aggregate_tables); under
    finished_cells_only with no cell finished, a stop that says so."""
    if not CELLS:
        raise WorkflowError(
            f"finished_cells_only: none of the {len(PLAN.cells)} cells of the matrix has "
            f"finished (no complete {results('raw')}/<cell>/): there is nothing to make the "
            "tables from; the errors of the run before this one say why the cells failed")
    return cell_files(pathsmod.CELL_RECORD_PATTERN)


# Both Redis builds are baked into the guest box whatever the matrix runs (slimio-nofdp runs
# the slimio build): one box serves every matrix, and narrowing the matrix never rebuilds it.
BOX_SYSTEMS = ["baseline", "slimio"]


SPACE_CHECKED = []


def disk_space_checked(wildcards=None):
    """No input: stops the run, at planning, when the disks cannot hold what its cells write
    (plan/space.py): results_dir every cell of the run not yet finished, the VM work_dir and
    the libvirt pool the largest one. Called by the cells' input functions, so only a run
    with cells is checked, and after Snakemake has read its targets (which cells the run
    has). On a cluster the work_dir and the pool are the nodes' (each cell checks its own
    when it starts): results_dir only; nothing in a cluster job (its cell checks itself)."""
    if not SPACE_CHECKED and not workflow.remote_exec:
        targets = workflow.dag_settings.targets if workflow.dag_settings else ()
        try:
            planmod.check_space(PLAN, sorted(targets), on_cluster=SUBMITS_TO_CLUSTER)
        except planmod.ConfigError as exc:
            raise WorkflowError(str(exc)) from None
        SPACE_CHECKED.append(True)
    return []


def cell_inputs(wildcards):
    """What the cell's plan says it needs built: a bare cell its Redis build (and a ycsb-a
    cell the YCSB binding's), a vm cell the box (which has all the builds in it); first, that
    the disks can hold the run (disk_space_checked)."""
    disk_space_checked()
    names = {pathsmod.BOX_PATTERN: "box"}
    out = {}
    for need in PLAN.cell_of(wildcards).needs:
        name = names.get(need) or ("server" if need.endswith("redis-server") else "ycsb")
        out[name] = build(need)
    return out


def slimio_build_inputs(wildcards):
    """redis-slimio's sources, Makefile and the version's hook series: a change rebuilds."""
    return [str(p) for p in build_redis.slimio_build_inputs(wildcards.version)]


def ftl_sequence_cells(testbed, system, workload, policy):
    """The cells a sequence replays, in repetition order. Under finished_cells_only, those
    before its first repetition that did not finish: the repetitions replay one after the
    other on one device, so only these replay as they do in the whole sequence."""
    cells = sorted((c for c in PLAN.matrix
                    if (c.testbed, c.system, c.workload, c.policy)
                    == (testbed, system, workload, policy)), key=lambda c: c.rep)
    if FINISHED_CELLS_ONLY:
        cells = list(itertools.takewhile(lambda c: c.id in FINISHED, cells))
    return cells


def ftl_sequences():
    """Every (testbed, system, workload, policy) of the matrix whose cells trace the device
    and write to it (the no-persistence bound writes nothing a model could amplify), and
    that has a repetition to replay (ftl_sequence_cells)."""
    seen = {}
    for c in PLAN.matrix:
        if c.testbed == "vm" and planmod.persists(c.system):
            key = dict(testbed=c.testbed, system=c.system, workload=c.workload, policy=c.policy)
            if ftl_sequence_cells(**key):
                seen[tuple(key.values())] = key
    return list(seen.values())


# The FTL stage's results (workflows/rules/ftl.smk): one per vm sequence of repetitions.
FTL_OUTPUTS = [results(pathsmod.FTL_SEQUENCE_PATTERN).format(**k) for k in ftl_sequences()]


def ftl_sequence_inputs(wildcards):
    """The raw directories of the sequence's repetitions, in repetition order."""
    cells = ftl_sequence_cells(wildcards.testbed, wildcards.system, wildcards.workload,
                               wildcards.policy)
    return [results(pathsmod.CELL_RAW_PATTERN).format(**c.wildcards()) for c in cells]


def print_claims_summary():
    """At the end of a run that judged the claims: their one-screen summary (onsuccess),
    which names the cells finished_cells_only left out. Where the claims were not judged
    again (nothing changed since), the cells left out are named all the same."""
    if SUMMARY_PRINTED:
        return                            # Snakemake may call onsuccess more than once
    summary = Path(results(pathsmod.VERDICT_FILES["summary"]))
    if summary.exists() and summary.stat().st_mtime >= WORKFLOW_STARTED:
        SUMMARY_PRINTED.append(summary)
        print(summary.read_text(), end="")
    elif MISSING_CELLS["cells"]:
        SUMMARY_PRINTED.append(None)
        print(missing_text([dict(m, log=results(m["log"])) for m in MISSING_CELLS["cells"]]),
              end="")


def motivation_available(wildcards=None):
    """The motivation's inputs (none), or a planning-time stop naming why it cannot run
    (rule motivation.smk's targets)."""
    if PLAN.motivation_unavailable:
        raise WorkflowError(f"motivation: {PLAN.motivation_unavailable}")
    if PLAN.motivation_cells and not taken(PLAN.motivation_cells):
        raise WorkflowError(
            f"motivation: finished_cells_only: none of its {len(PLAN.motivation_cells)} cells "
            f"has finished (no complete {results('raw')}/<cell>/): there is nothing to make "
            "Table 2 and Figure 2 from; the errors of the run before this one say why the "
            "cells failed")
    return []
