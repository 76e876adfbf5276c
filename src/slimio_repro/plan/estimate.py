"""How long a profile's run takes on a cluster (``slimio-repro estimate``).

Per-cell time models calibrated on measured cells, and the run's jobs list-scheduled on the
cluster's nodes.

**Calibration.** Every completed cell records where its time went (``phases_s`` in its
provenance) and the plan it ran (``plan.json``), so the work behind each phase is known. Each
phase scales with one measure of the work (:data:`PHASE_UNIT`): boot, provisioning and
teardown are constants of the testbed (pooled over its cells); YCSB's load phase scales with
its records and the workload with its operations (redis-benchmark's requests): the time the
client itself reports (YCSB's RunTime) at its rate, the rest of the phase (the JVM's start)
as it was; the snapshots with
the bytes they write (the expected dataset, once per snapshot the cell takes); recovery with
the dataset it reloads; the trace and the copy back with the bytes the cell writes; the
roofline with its size. The others are constants of the cell's set (testbed, system, workload,
policy). A phase is linear through zero in its measure: the calibration cells ran at one scale,
so a fixed part inside a phase cannot be told from its rate and is scaled with it (this
overestimates a larger scale).

**Run.** The jobs are a run's: the builds, one job per cell (a whole node, as
workflows/rules/run.smk asks), its parsing, the FTL model of each vm set, and the rules that
run where Snakemake runs. They are placed on the nodes by list scheduling: cells first,
longest first, each on the first node free; a job waits for the jobs it needs. On SLURM every
job pays ``job_start_s`` on its node (its Snakemake starts there), and Snakemake learns that a
job ended only at its next status check (snakemake-executor-plugin-slurm 2.8: the first
``status_check_s`` after a submission, then 10 s later each time nothing ended, at most
180 s). The builds' and the post-processing rules' times come from Snakemake logs of measured
runs, divided by ``host_speed`` (1 for a cluster file; `slimio-repro calibrate` sets it to the
speed it measured, its host running everything).

**Interval.** Seeded Monte Carlo: each draw takes, for every cell, one measured cell of its set
(and one of its testbed for the testbed's phases) and scales it to the planned work, and each
post-processing job one measured duration; the run is scheduled again. The interval is the
draws' 5th to 95th percentile.

The calibration host's speed is the reference: ``speed`` in a cluster file says how many times
faster a cell runs on the cluster's nodes (1.0 = as calibrated). It is an input, never guessed.
"""

from __future__ import annotations

import heapq
import json
import math
import re
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np

from ..agent import layout
from ..agent import phases as cellphases
from ..agent import ycsb_client
from . import jobs
from .cellplan import Cell, CellPlan
from .checks import Host
from .config import ConfigError, load_yaml

MIB = 1 << 20

# The measure of work each phase of a cell scales with ("cell": a constant of the cell).
PHASE_UNIT = {
    "boot": "cell", "provision": "cell", "device_prepare": "cell", "server_start": "cell",
    "load": "records", "workload": "operations", "snapshots": "snapshot_bytes",
    "shutdown": "cell", "recovery": "dataset_bytes", "trace_fdp": "written_bytes",
    "roofline": "roofline_bytes", "guest_overhead": "cell", "copy_back": "written_bytes",
    "teardown": "cell",
}
assert set(PHASE_UNIT) == set(cellphases.ORDER)
# Phases that depend on the testbed only (the VM's boot, the guest's checks, the code copied
# in, the teardown): pooled over the calibration cells of the testbed that booted their VM, as
# a cluster's job boots each cell's; for the cells of a local run that take over a kept guest
# (:func:`kept_guests`), over the calibration cells that did.
TESTBED_PHASES = ("boot", "provision", "guest_overhead", "teardown")
# Systems measured by another's cells where they have none of their own: the baseline on
# EXT4 is the same Redis on another file system; SlimIO without FDP the same passthru path.
STAND_INS = {"baseline-ext4": "baseline", "slimio-nofdp": "slimio"}

# The rules a run runs besides its cells, by what they are. Builds: a whole node, in the
# order of their dependencies (BUILD_NEEDS). Per cell: parsing (a job) and its runtime plot
# (where Snakemake runs). Per vm set: the FTL model (a job). At the end, where Snakemake runs:
# the tables, the figures, the claims and the report.
BUILD_NEEDS = {
    "fetch_redis_source": (),
    "build_redis_baseline": ("fetch_redis_source",),
    "build_redis_slimio": ("fetch_redis_source",),
    "build_fio": (),
    "build_ycsb_binding": (),
    "build_guest_box": ("build_redis_baseline", "build_redis_slimio", "build_fio",
                        "build_ycsb_binding"),
}
# Rules that run where Snakemake runs (workflows/rules/common.smk's localrules), not as jobs.
LOCAL_RULES = {"fetch_redis_source", "plot_cell_runtime_rps", "aggregate_tables",
               "plot_fig4_runtime_rps", "plot_fig5_runtime_rps", "plot_waf_sensitivity",
               "judge_claims", "render_report", "motivation_outputs",
               "judge_motivation_claims"}
WHOLE_NODE_BUILDS = {"build_redis_baseline", "build_redis_slimio", "build_fio",
                     "build_guest_box"}
PER_CELL_RULES = ("parse_cell", "plot_cell_runtime_rps")
FINAL_RULES = ("aggregate_tables", "plot_fig4_runtime_rps", "plot_fig5_runtime_rps",
               "plot_waf_sensitivity", "judge_claims", "render_report")
MOTIVATION_RULES = ("parse_motivation_cell", "motivation_outputs", "judge_motivation_claims")
# Post-processing jobs whose time grows with the bytes their cells wrote (the NVMe trace
# they read): fitted as a + b x bytes.
BYTE_SCALED_RULES = ("parse_cell", "model_ftl_sequence")

# snakemake-executor-plugin-slurm 2.8's status checks (its check_active_jobs): after a check
# that found no job ended the next comes this much later, up to the cap.
STATUS_CHECK_STEP_S = 10
STATUS_CHECK_MAX_S = 180
# The interval: the draws' percentiles.
INTERVAL = (5, 95)


class EstimateError(ValueError):
    """The estimate cannot be made (no measured cells for a set, a bad cluster file)."""


# --- The cluster -------------------------------------------------------------------------

@dataclass(frozen=True)
class Cluster:
    """A cluster file (config/clusters/*.yaml): identical nodes and how jobs reach them."""
    name: str
    nodes: int
    cpus: int
    memory_mb: int
    kvm: bool = False
    # How many times faster a cell runs on a node than on the calibration host.
    speed: float = 1.0
    # How many times faster everything but the cells runs than on the calibration host: the
    # builds, the parsing, the FTL model, the tables, figures and report, and Snakemake's
    # own time (its start, and its time on each cell's job). `slimio-repro calibrate`,
    # whose host runs all of it, sets it to the speed it measured; a cluster file has no
    # such key (its submit host is taken as the calibration host).
    host_speed: float = 1.0
    # slurm: every build, cell, parse and FTL model is a job (workflows/profiles/slurm);
    # local: `snakemake --cores all` on the one node.
    executor: str = "slurm"
    # SLURM: the status checks' first delay (the profile's slurm-init-seconds-before-
    # status-checks) and what a job spends on its node besides its rule's own work.
    status_check_s: float = 40.0
    job_start_s: float = 0.0
    description: str = ""

    @property
    def host(self) -> Host:
        """A node as the plan's checks see it."""
        return Host(cpus=self.cpus, memory_mb=self.memory_mb, kvm_device=self.kvm,
                    accel_verdict="kvm" if self.kvm else "tcg")

    @classmethod
    def load(cls, path: str | Path) -> "Cluster":
        if not Path(path).is_file():
            raise ConfigError(f"cluster file {path} does not exist (config/clusters/ has "
                              "examples)")
        data = load_yaml(path)
        known = {"nodes", "cpus", "memory_mb", "kvm", "speed", "executor", "status_check_s",
                 "job_start_s", "description"}
        unknown = set(data) - known
        if unknown:
            raise ConfigError(f"{path}: unknown key(s) {', '.join(sorted(unknown))}; a "
                              f"cluster file has {', '.join(sorted(known))}")
        missing = {"nodes", "cpus", "memory_mb"} - set(data)
        if missing:
            raise ConfigError(f"{path}: missing {', '.join(sorted(missing))}")
        c = cls(name=Path(path).stem, **data)
        for key in ("nodes", "cpus", "memory_mb"):
            if not isinstance(getattr(c, key), int) or getattr(c, key) < 1:
                raise ConfigError(f"{path}: {key} must be a positive integer")
        if not c.speed > 0:
            raise ConfigError(f"{path}: speed must be above 0 (1.0: as calibrated)")
        if c.executor not in ("slurm", "local"):
            raise ConfigError(f"{path}: executor is slurm or local, not {c.executor!r}")
        if c.executor == "local" and c.nodes != 1:
            raise ConfigError(f"{path}: executor local runs on one node, not {c.nodes}")
        return c


# --- Measured cells and the time model ----------------------------------------------------

def units(plan: CellPlan) -> dict[str, float]:
    """The work behind each measure of :data:`PHASE_UNIT` in a cell of ``plan``."""
    w = plan.workload
    ycsb = plan.cell.workload == "ycsb-a"
    data = plan.sizing.expected_dataset_bytes
    if plan.motivation is not None:
        # The fill, then the scenarios' SETs; Snapshot only, Snapshot & WAL, SlimIO's ideal.
        operations = w.requests + plan.motivation.wal_requests
        snapshots = 2 + plan.is_slimio
    else:
        operations = w.operations if ycsb else w.requests
        # The On-Demand-Snapshot, and SlimIO's no-I/O bound after it.
        snapshots = (1 + (plan.cell.system == "slimio")) if w.on_demand_snapshot else 0
    roofline = plan.vm.roofline if plan.vm is not None else (
        plan.bare.device.roofline if plan.bare is not None and plan.bare.device else None)
    return {
        "cell": 1.0,
        "records": float(w.records) if ycsb else 0.0,
        "operations": float(operations),
        "snapshot_bytes": float(data * snapshots),
        "dataset_bytes": float(data) if plan.recovery.enabled else 0.0,
        "written_bytes": float(plan.sizing.expected_wal_bytes) if plan.persists else 0.0,
        "roofline_bytes": float(roofline.size_mb * MIB) if roofline and roofline.enabled
        else 0.0,
    }


@dataclass(frozen=True)
class Measured:
    """A completed cell: its plan, where its time went, and where it ran."""
    plan: CellPlan
    phases_s: dict
    accel: str | None = None
    node_class: str | None = None
    # When the cell's own run started (UTC, naive): a logged job is this cell's if it holds it.
    utc_start: datetime | None = None
    # Of the load and workload phases, the seconds the client itself ran its operations
    # (YCSB's RunTime): the rest of the phase (the JVM's start) does not grow with the work.
    client_s: dict = field(default_factory=dict)
    # Whether it ran in a guest kept from an earlier cell (its boot was a reset).
    kept_guest: bool = False

    @property
    def id(self) -> str:
        return self.plan.id

    @property
    def total_s(self) -> float:
        return sum(self.phases_s.values())

    def phase_s(self, phase: str, target: dict[str, float]) -> float:
        """This cell's ``phase`` scaled to a cell whose work is ``target`` (:func:`units`)."""
        t = float(self.phases_s.get(phase, 0.0))
        unit = PHASE_UNIT[phase]
        measured = units(self.plan)[unit]
        if unit == "cell" or measured <= 0:
            return t
        scaled = min(self.client_s.get(phase, t), t)
        return t - scaled + scaled * target[unit] / measured


def measured_cells(results_dir: Path) -> tuple[list[Measured], list[str]]:
    """The completed cells of a results directory (``raw/*``: provenance and plan), and the
    names of those left out (no phases recorded, or a plan of another format)."""
    out, skipped = [], []
    raw = Path(results_dir) / "raw"
    for d in sorted(raw.iterdir()) if raw.is_dir() else []:
        if not d.is_dir() or d.name.endswith(".partial"):
            continue
        try:
            prov = json.loads((d / layout.RAW_PROVENANCE).read_text())
            plan = CellPlan.from_json((d / layout.RAW_PLAN).read_text())
        except (OSError, ValueError, TypeError, KeyError):
            skipped.append(d.name)
            continue
        if not prov.get("phases_s"):
            skipped.append(d.name)
            continue
        vm = prov.get("vm") or {}
        node = vm.get("node") or prov.get("node") or {}
        started = None
        if prov.get("utc_start"):
            started = datetime.fromisoformat(prov["utc_start"]).replace(tzinfo=None)
        out.append(Measured(plan, dict(prov["phases_s"]),
                            accel=vm.get("accel") or ("bare" if plan.bare else None),
                            node_class=node.get("class"), utc_start=started,
                            client_s=_client_seconds(d),
                            kept_guest=bool((vm.get("guest") or {}).get("kept"))))
    return out, skipped


# YCSB's phases (its stdout's name) and the cell's phase each one is.
YCSB_PHASES = {"load": "load", "run": "workload"}


def _client_seconds(raw: Path) -> dict[str, float]:
    """The seconds YCSB itself took in each phase of a raw cell directory (its summary's
    RunTime), where it wrote one."""
    out = {}
    for ycsb_phase, phase in YCSB_PHASES.items():
        f = raw / layout.RAW_YCSB_STDOUT.format(phase=ycsb_phase)
        try:
            summary = ycsb_client.parse_summary(f.read_text(errors="replace"), str(f))
        except (OSError, ycsb_client.YcsbError):
            continue
        out[phase] = summary["overall"]["runtime_ms"] / 1000
    return out


@dataclass
class CellModel:
    """One planned cell's time on the calibration host: from each measured cell of its set
    (``group_s``, the set's phases) and of its testbed (``testbed_s``), and the mean of each
    phase."""
    plan: CellPlan
    group_s: np.ndarray
    testbed_s: np.ndarray
    phase_mean_s: dict[str, float]
    source: str

    @property
    def mean_s(self) -> float:
        return float(self.group_s.mean() + self.testbed_s.mean())

    def draw(self, rng: np.random.Generator) -> float:
        return float(self.group_s[rng.integers(len(self.group_s))]
                     + self.testbed_s[rng.integers(len(self.testbed_s))])


class Model:
    """The calibration: measured cells by set and by testbed."""

    def __init__(self, cells: list[Measured]):
        if not cells:
            raise EstimateError("no measured cells to calibrate on")
        self.cells = cells
        self.sets: dict[tuple, list[Measured]] = {}
        self.testbeds: dict[str, list[Measured]] = {}
        for m in cells:
            c = m.plan.cell
            self.sets.setdefault((c.testbed, c.system, c.workload, c.policy), []).append(m)
            self.testbeds.setdefault(c.testbed, []).append(m)
        # The testbed's phases from the cells that booted (all, if none did), and from those
        # that took over a kept guest (none, if none did).
        self.booted = {t: [m for m in ms if not m.kept_guest] or ms
                       for t, ms in self.testbeds.items()}
        self.kept = {t: [m for m in ms if m.kept_guest] for t, ms in self.testbeds.items()}

    def _set_of(self, cell: Cell) -> tuple[tuple, str]:
        key = (cell.testbed, cell.system, cell.workload, cell.policy)
        if key in self.sets:
            return key, ""
        stand_in = STAND_INS.get(cell.system)
        if stand_in and (cell.testbed, stand_in, cell.workload, cell.policy) in self.sets:
            return ((cell.testbed, stand_in, cell.workload, cell.policy),
                    f"{stand_in}'s cells (no {cell.system} cell measured)")
        for other in sorted(k for k in self.sets if k[:3] == key[:3]):
            return other, f"its {other[3]} cells (none under {cell.policy} measured)"
        raise EstimateError(
            f"no measured cell of {cell.testbed}-{cell.system}-{cell.workload} (nor a "
            f"stand-in) to calibrate its cells on: --calibrate a run that has them")

    def cell(self, plan: CellPlan, kept: bool = False) -> CellModel:
        """``plan``'s model; ``kept``: the cell takes over a guest an earlier cell booted
        (its testbed's phases those of the measured cells that did, if any did)."""
        key, note = self._set_of(plan.cell)
        if plan.cell.testbed not in self.testbeds:
            raise EstimateError(f"no measured cell of testbed {plan.cell.testbed}")
        target = units(plan)
        group = [p for p in cellphases.ORDER if p not in TESTBED_PHASES]
        group_s = np.array([sum(m.phase_s(p, target) for p in group) for m in self.sets[key]])
        testbed = (kept and self.kept[plan.cell.testbed]) or self.booted[plan.cell.testbed]
        testbed_s = np.array([sum(m.phase_s(p, target) for p in TESTBED_PHASES)
                              for m in testbed])
        means = {p: float(np.mean([m.phase_s(p, target) for m in (
            testbed if p in TESTBED_PHASES else self.sets[key])])) for p in cellphases.ORDER}
        source = "-".join(map(str, key)) + (f", from {note}" if note else "")
        return CellModel(plan, group_s, testbed_s, means, source)

    def describe(self) -> str:
        """Where the calibration was measured, in one line."""
        kinds = sorted({f"{m.plan.cell.testbed} "
                        f"({m.accel or '?'}{', %d vCPUs' % m.plan.vm.cpus if m.plan.vm else ''}"
                        f" on {m.node_class or 'an unrecorded node'})" for m in self.cells})
        return f"{len(self.cells)} measured cells: " + "; ".join(kinds)

    def phase_table(self) -> list[tuple[str, str, float, float, float, int]]:
        """(testbed, phase, median, 10th, 90th percentile, n) of the testbed's phases."""
        rows = []
        for testbed, cells in sorted(self.booted.items()):
            for p in TESTBED_PHASES:
                v = [m.phases_s[p] for m in cells if p in m.phases_s]
                if v:
                    rows.append((testbed, p, float(np.median(v)), float(np.percentile(v, 10)),
                                 float(np.percentile(v, 90)), len(v)))
        return rows


# --- Snakemake logs: the builds, the post-processing, the per-job overhead ----------------

@dataclass(frozen=True)
class LoggedJob:
    rule: str
    start: datetime
    end: datetime
    outputs: tuple[str, ...]
    inputs: tuple[str, ...]

    @property
    def seconds(self) -> float:
        return (self.end - self.start).total_seconds()


@dataclass(frozen=True)
class LoggedRun:
    """One Snakemake log: when it started, how long it took, its finished jobs."""
    path: Path
    start: datetime
    elapsed_s: float | None
    first_job_s: float | None
    jobs: tuple[LoggedJob, ...]


_STAMP = re.compile(r"^\[(\w{3} \w{3} +\d+ \d\d:\d\d:\d\d \d{4})\]$")


def read_snakemake_log(path: str | Path) -> LoggedRun:
    """A Snakemake log (.snakemake/log/*.snakemake.log): its start (``Date:``), its elapsed
    time, the delay to its first job, and every job that finished (rule, start, end, outputs,
    inputs); timestamps have a resolution of 1 s."""
    path = Path(path)
    start = elapsed = stamp = first = None
    open_jobs, pending, done = {}, None, []
    for line in path.read_text(errors="replace").splitlines():
        if m := _STAMP.match(line):
            stamp = datetime.strptime(m.group(1), "%a %b %d %H:%M:%S %Y")
        elif line.startswith("  Date: "):
            start = datetime.strptime(line[8:].strip(), "%Y-%m-%d %H:%M:%S")
        elif m := re.match(r"^(?:local)?rule (\w+):$", line):
            pending = {"rule": m.group(1), "start": stamp, "outputs": (), "inputs": ()}
            first = first or stamp
        elif pending is not None and (m := re.match(r"^    (input|output): (.*)$", line)):
            pending[m.group(1) + "s"] = tuple(s.strip() for s in m.group(2).split(", "))
        elif pending is not None and (m := re.match(r"^    jobid: (\d+)$", line)):
            open_jobs[m.group(1)] = pending
            pending = None
        elif m := re.match(r"^Finished jobid: (\d+)", line):
            j = open_jobs.pop(m.group(1), None)
            if j is not None and j["start"] is not None:
                done.append(LoggedJob(j["rule"], j["start"], stamp, j["outputs"], j["inputs"]))
        elif m := re.match(r"^Elapsed time: (\d+):(\d\d):(\d\d(?:\.\d+)?)$", line):
            elapsed = int(m.group(1)) * 3600 + int(m.group(2)) * 60 + float(m.group(3))
    if start is None:
        raise EstimateError(f"{path} is not a Snakemake log (no Date: line)")
    return LoggedRun(path, start, elapsed,
                     (first - start).total_seconds() if first else None, tuple(done))


@dataclass
class RuleTimes:
    """What the Snakemake logs measured: each rule's job durations, and (for parsing and the
    FTL model) the bytes their cells wrote; a local cell job's time beyond its cell's own;
    Snakemake's start to its first job."""
    seconds: dict[str, list[float]] = field(default_factory=dict)
    bytes_: dict[str, list[float]] = field(default_factory=dict)
    cell_job_extra_s: list[float] = field(default_factory=list)
    start_s: list[float] = field(default_factory=list)
    logs: list[Path] = field(default_factory=list)

    @classmethod
    def of(cls, logs: list[Path], cells: list[Measured]) -> "RuleTimes":
        by_id = {m.id: m for m in cells}
        t = cls()
        for path in logs:
            run = read_snakemake_log(path)
            t.logs.append(path)
            if run.first_job_s is not None:
                t.start_s.append(run.first_job_s)
            for j in run.jobs:
                t.seconds.setdefault(j.rule, []).append(j.seconds)
                names = [Path(o).name.removesuffix(".json") for o in j.outputs]
                cell = by_id.get(names[0]) if j.rule == "run_cell" and names else None
                # The job that ran this very cell (logs hold local times: a host on UTC).
                slack = timedelta(seconds=2)
                if cell is not None and cell.utc_start is not None and \
                        j.start - slack <= cell.utc_start <= j.end + slack:
                    t.cell_job_extra_s.append(max(0.0, j.seconds - cell.total_s))
                if j.rule in BYTE_SCALED_RULES:
                    ids = [Path(i).name for i in j.inputs] if j.rule == "model_ftl_sequence" \
                        else names[:1]
                    # The bytes of the NVMe trace the job reads (vm cells have one).
                    written = [units(by_id[i].plan)["written_bytes"] if by_id[i].plan.vm
                               else 0.0 for i in ids if i in by_id]
                    t.bytes_.setdefault(j.rule, []).append(
                        float(sum(written)) if len(written) == len(ids) and ids else math.nan)
        return t

    def faster(self, speed: float) -> "RuleTimes":
        """These times on a host ``speed`` times as fast (the bytes stay as they were)."""
        if speed == 1.0:
            return self
        return replace(self, seconds={r: [x / speed for x in v] for r, v in self.seconds.items()},
                       cell_job_extra_s=[x / speed for x in self.cell_job_extra_s],
                       start_s=[x / speed for x in self.start_s])

    def mean(self, rule: str) -> float | None:
        v = self.seconds.get(rule)
        return float(np.mean(v)) if v else None

    def scaled(self, rule: str, written: float) -> np.ndarray | None:
        """Durations of ``rule``'s jobs for one that reads ``written`` bytes' trace: each
        measured job's residual around the fit a + b x bytes, on the fit at ``written``."""
        v = self.seconds.get(rule)
        if not v:
            return None
        v = np.array(v)
        b = np.array(self.bytes_.get(rule, [math.nan] * len(v)))
        known = ~np.isnan(b)
        if known.sum() >= 2 and len(set(b[known])) >= 2:
            slope, icpt = np.polyfit(b[known], v[known], 1)
            slope = max(slope, 0.0)
            icpt = float(np.mean(v[known] - slope * b[known]))
            return np.maximum(v[known] - (icpt + slope * b[known]) + icpt + slope * written,
                              0.0)
        return v


# --- The jobs of a run and their schedule -------------------------------------------------

@dataclass
class Job:
    name: str
    kind: str                   # build, cell, parse, ftl, local
    seconds: float
    cpus: int | None            # None: a whole node
    needs: tuple[str, ...] = ()
    priority: int = 0
    on_node: bool = True        # False: a rule run where Snakemake runs
    model: CellModel | None = None
    draws: np.ndarray | None = None
    kept_guest: bool = False    # a cell that takes over a guest an earlier cell booted


@dataclass
class Placed:
    job: Job
    node: int | None            # None: where Snakemake runs
    start: float
    end: float


def schedule(jobs_: list[Job], cluster: Cluster, seconds: dict[str, float] | None = None,
             start_s: float = 0.0) -> tuple[float, list[Placed]]:
    """List scheduling: the makespan and each job's place. Jobs go in order of priority,
    then of the time they became ready, then of the list (longest cells first); on SLURM
    the queue is first in, first out (a job waits while the one before it cannot start), a
    job on a node takes ``job_start_s`` more, and a job that needs another starts after the
    status check that saw that one end. ``seconds`` replaces jobs' durations (a draw)."""
    slurm = cluster.executor == "slurm"
    dur = {j.name: (seconds or {}).get(j.name, j.seconds) for j in jobs_}
    by_name = {j.name: j for j in jobs_}
    order = {j.name: i for i, j in enumerate(jobs_)}
    free = [cluster.cpus] * cluster.nodes
    local_free = cluster.cpus
    waiting = {j.name: set(j.needs) for j in jobs_}
    ready: list[tuple] = []
    ready_local: list[tuple] = []
    released: dict[str, float] = {}
    running: list[tuple[float, int, str]] = []
    ended_unseen: list[str] = []
    placed: dict[str, Placed] = {}
    t = start_s
    check_next, interval = None, cluster.status_check_s
    on_nodes = 0                # jobs running on nodes (SLURM asks about them)

    def release(name: str, at: float):
        released[name] = at
        j = by_name[name]
        queue = ready_local if (slurm and not j.on_node) else ready
        heapq.heappush(queue, (-j.priority, at, order[name], name))

    for j in jobs_:
        if not j.needs:
            release(j.name, t)

    dependents: dict[str, list[str]] = {}
    for j in jobs_:
        for n in j.needs:
            dependents.setdefault(n, []).append(j.name)

    def finish(name: str, at: float):
        for other in dependents.get(name, ()):
            needs = waiting[other]
            needs.discard(name)
            if not needs and other not in released:
                release(other, at)

    while ready or ready_local or running or ended_unseen:
        # Start what can start now: SLURM's rules where Snakemake runs, in order...
        while ready_local and local_free >= (by_name[ready_local[0][3]].cpus or 1):
            j = by_name[heapq.heappop(ready_local)[3]]
            local_free -= j.cpus or 1
            placed[j.name] = Placed(j, None, t, t + dur[j.name])
            heapq.heappush(running, (t + dur[j.name], order[j.name], j.name))
        # ...and the jobs on the nodes: on SLURM first in, first out (the queue waits while
        # its first job cannot start); locally any that fits, in order.
        kept = []
        while ready and max(free) > 0:
            item = heapq.heappop(ready)
            j = by_name[item[3]]
            want = cluster.cpus if j.cpus is None else min(j.cpus, cluster.cpus)
            where = next((n for n in range(cluster.nodes) if free[n] >= want), None)
            if where is None:
                kept.append(item)
                if slurm:
                    break
                continue
            extra = cluster.job_start_s if slurm else 0.0
            end = t + dur[j.name] + extra
            free[where] -= want
            placed[j.name] = Placed(j, where, t, end)
            heapq.heappush(running, (end, order[j.name], j.name))
            on_nodes += 1
            if slurm and check_next is None:
                check_next, interval = t + cluster.status_check_s, cluster.status_check_s
        for item in kept:
            heapq.heappush(ready, item)
        # The next event: a job's end, or (SLURM) a status check.
        candidates = [running[0][0]] if running else []
        if slurm and check_next is not None and (ended_unseen or on_nodes):
            candidates.append(check_next)
        if not candidates:
            break
        t = max(t, min(candidates))
        while running and running[0][0] <= t:
            _, _, name = heapq.heappop(running)
            p = placed[name]
            if p.node is None:
                local_free += p.job.cpus or 1
            else:
                on_nodes -= 1
                free[p.node] += cluster.cpus if p.job.cpus is None else \
                    min(p.job.cpus, cluster.cpus)
            if slurm and p.job.on_node:
                ended_unseen.append(name)
            else:
                finish(name, t)
        if slurm and check_next is not None and t >= check_next:
            if ended_unseen:
                for name in ended_unseen:
                    finish(name, t)
                ended_unseen.clear()
                interval = cluster.status_check_s
            else:
                interval = min(interval + STATUS_CHECK_STEP_S, STATUS_CHECK_MAX_S)
            check_next = t + interval
        if slurm and not ended_unseen and not on_nodes:
            # No job to ask about: the next submission starts the checks again.
            check_next = None
    if len(placed) != len(jobs_):
        missing = sorted(set(by_name) - set(placed))
        raise EstimateError(f"jobs never ran (a need that is no job?): {missing[:5]}")
    return max(p.end for p in placed.values()), list(placed.values())


# --- The estimate ------------------------------------------------------------------------

@dataclass
class Estimate:
    cluster: Cluster
    profile: str
    model: Model
    times: RuleTimes
    jobs: list[Job]
    placed: list[Placed]
    makespan_s: float
    draws_s: np.ndarray
    seed: int
    start_s: float
    builds: bool
    unmeasured: list[str]
    warnings: list[str]

    @property
    def interval_s(self) -> tuple[float, float]:
        lo, hi = np.percentile(self.draws_s, INTERVAL)
        return float(lo), float(hi)

    @property
    def cells(self) -> list[Placed]:
        return [p for p in self.placed if p.job.kind == "cell"]


def _build_rules(cells: list[CellPlan]) -> list[str]:
    """The build rules a run of ``cells`` needs (workflows/rules/build.smk)."""
    need = set()
    for c in cells:
        if c.vm is not None:
            need |= set(BUILD_NEEDS)
        else:
            need |= {"fetch_redis_source", f"build_redis_{'slimio' if c.is_slimio else 'baseline'}"}
            if c.cell.workload == "ycsb-a":
                need.add("build_ycsb_binding")
            if c.bare is not None and c.bare.device is not None:
                need.add("build_fio")
    return [r for r in BUILD_NEEDS if r in need]


def kept_guests(cells: list[CellPlan]) -> set[str]:
    """Of a run on one node (Snakemake running the cells), the cells that take over a guest
    an earlier cell booted (run/guests.py): every vm cell of a machine but one, where its
    plan keeps guests. (A cluster job boots its cell's VM.)"""
    seen, kept = set(), set()
    for c in cells:
        if c.vm is None or not c.vm.keeps_guest:
            continue
        machine = json.dumps(c.vm.machine, sort_keys=True)
        if machine in seen:
            kept.add(c.id)
        seen.add(machine)
    return kept


def run_jobs(cells: list[CellPlan], model: Model, times: RuleTimes, cluster: Cluster,
             builds: bool, motivation: bool,
             matrix: set[str] | None = None) -> tuple[list[Job], list[str]]:
    """Every job of the run of ``cells`` (``matrix``: the ids of the matrix's own, whose
    vm sets the FTL model replays; default all), with its expected time (and the draws'
    inputs); the rules no log measured (left out, at 0 s)."""
    unmeasured: list[str] = []

    def measured(rule: str) -> float:
        m = times.mean(rule)
        if m is None:
            unmeasured.append(rule)
        return m or 0.0

    out: list[Job] = []
    build_names = []
    if builds:
        for rule in _build_rules(cells):
            out.append(Job(rule, "build", measured(rule),
                           None if rule in WHOLE_NODE_BUILDS else 1,
                           tuple(n for n in BUILD_NEEDS[rule] if n in
                                 {j.name for j in out}),
                           on_node=rule not in LOCAL_RULES))
            build_names.append(rule)
    extra = float(np.mean(times.cell_job_extra_s)) if (
        times.cell_job_extra_s and cluster.executor == "local") else 0.0
    kept = kept_guests(cells) if cluster.executor == "local" else set()
    models = [model.cell(c, kept=c.id in kept) for c in cells]
    # Longest first: the list's order is the schedule's among cells ready together.
    models.sort(key=lambda m: (-m.mean_s, m.plan.id))
    for m in models:
        out.append(Job(m.plan.id, "cell", m.mean_s / cluster.speed + extra, None,
                       tuple(build_names), priority=10, model=m,
                       kept_guest=m.plan.id in kept))
    parse_done = []
    for m in models:
        written = units(m.plan)["written_bytes"] if m.plan.vm is not None else 0.0
        rule = "parse_motivation_cell" if m.plan.motivation is not None else "parse_cell"
        d = times.scaled("parse_cell", written) if rule == "parse_cell" else None
        if d is None:
            d = np.array([measured(rule)])
        out.append(Job(f"{rule}:{m.plan.id}", "parse", float(d.mean()), 1, (m.plan.id,),
                       draws=d))
        parse_done.append(f"{rule}:{m.plan.id}")
        if m.plan.motivation is None:
            out.append(Job(f"plot_cell_runtime_rps:{m.plan.id}", "local",
                           measured("plot_cell_runtime_rps"), 1,
                           (f"{rule}:{m.plan.id}",), on_node=False))
    # The FTL model: one job per vm set that writes, its repetitions' traces in order.
    sets: dict[str, list[CellModel]] = {}
    for m in models:
        if m.plan.vm is not None and m.plan.persists and m.plan.motivation is None \
                and (matrix is None or m.plan.id in matrix):
            sets.setdefault(m.plan.cell.set_id, []).append(m)
    ftl_names = []
    for set_id, members in sorted(sets.items()):
        written = sum(units(m.plan)["written_bytes"] for m in members)
        d = times.scaled("model_ftl_sequence", written)
        if d is None:
            d = np.array([measured("model_ftl_sequence")])
        out.append(Job(f"model_ftl_sequence:{set_id}", "ftl", float(d.mean()), 1,
                       tuple(m.plan.id for m in members), draws=d))
        ftl_names.append(f"model_ftl_sequence:{set_id}")
    final = list(FINAL_RULES) + (list(MOTIVATION_RULES[1:]) if motivation else [])
    prev = tuple(parse_done + ftl_names)
    for rule in final:
        out.append(Job(rule, "local", measured(rule), 1, prev, on_node=False))
        prev = (rule,)
    return out, sorted(set(unmeasured))


def estimate_run(config: dict, cluster: Cluster, calibration: Path, logs: list[Path] | None = None,
             builds: bool = True, draws: int = 1000, seed: int = 1) -> Estimate:
    """The estimate of a run of the validated ``config`` on ``cluster``, calibrated on the
    completed cells of ``calibration`` (a results directory) and the Snakemake ``logs``
    (default: ``calibration``/logs/snakemake/*.log)."""
    from .resolve import make
    plan = make(config, cluster.host, check_sources=False)
    cells = list(plan.cells)
    motivation = plan.motivation_in_reproduce
    if motivation:
        # Table 1's cells that the matrix has not, and the motivation's scenario cells.
        cells += list(plan.extra_cells) + list(plan.motivation_cells)
    measured, _ = measured_cells(calibration)
    if not measured:
        raise EstimateError(f"{calibration} has no completed cell with its phases recorded "
                            "(raw/*/provenance.json and plan.json)")
    model = Model(measured)
    if logs is None:
        logs = sorted((Path(calibration) / "logs" / "snakemake").glob("*.log"))
    times = RuleTimes.of(list(logs), measured).faster(cluster.host_speed)
    jobs_, unmeasured = run_jobs(cells, model, times, cluster, builds, motivation,
                                 {c.id for c in plan.cells})
    start_s = float(np.mean(times.start_s)) if times.start_s else 0.0
    makespan, placed = schedule(jobs_, cluster, start_s=start_s)
    rng = np.random.default_rng(seed)
    out = np.empty(draws)
    for i in range(draws):
        d = {}
        for j in jobs_:
            if j.model is not None:
                d[j.name] = j.model.draw(rng) / cluster.speed + (j.seconds - j.model.mean_s
                                                               / cluster.speed)
            elif j.draws is not None:
                d[j.name] = float(j.draws[rng.integers(len(j.draws))])
        out[i] = schedule(jobs_, cluster, d, start_s=start_s)[0]
    warnings = _warnings(cells, jobs_, cluster)
    return Estimate(cluster, plan.profile, model, times, jobs_, placed, makespan, out, seed,
                    start_s, builds, unmeasured, warnings)


def _warnings(cells: list[CellPlan], jobs_: list[Job], cluster: Cluster) -> list[str]:
    """The cells' sets this estimate expects to outlive their own limits (the SLURM time
    limit plan/jobs.py gives a cell's job, the workload's timeout), and memory a node lacks."""
    by_set: dict[str, list[str]] = {}
    for j in jobs_:
        if j.model is None:
            continue
        p = j.model.plan
        problems = []
        limit = jobs.cell_time_limit_s(p)
        if j.seconds > limit:
            problems.append(f"{_dur(j.seconds)} expected, beyond its SLURM time limit "
                            f"{_dur(limit)}")
        for phase in ("load", "workload"):
            took = j.model.phase_mean_s[phase] / cluster.speed
            if took > p.workload.timeout_s:
                problems.append(f"its {phase} phase {_dur(took)}, beyond the workload's "
                                f"timeout_s {_dur(p.workload.timeout_s)}")
        if problems:
            name = p.id.rpartition("-r")[0]
            by_set.setdefault(name, problems)
    out = [f"{name}: {'; '.join(problems)}" for name, problems in by_set.items()]
    mem = max((jobs.cell_mem_mb(j.model.plan) for j in jobs_ if j.model), default=0)
    if mem > cluster.memory_mb:
        out.append(f"a cell asks for {mem} MiB and a node has {cluster.memory_mb}")
    return out


# --- What the estimate says -----------------------------------------------------------------

def _dur(s: float) -> str:
    if s >= 72 * 3600:
        return f"{s / 3600:.0f} h ({s / 86400:.1f} days)"
    if s >= 2 * 3600:
        return f"{s / 3600:.1f} h"
    if s >= 120:
        return f"{s / 60:.0f} min"
    return f"{s:.0f} s"


def _cell_runs(ids: list[str]) -> str:
    """Cell ids, repetitions of a set folded: vm-slimio-ycsb-a-always r1-r3."""
    sets: dict[str, list[int]] = {}
    for i in ids:
        base, _, rep = i.rpartition("-r")
        sets.setdefault(base, []).append(int(rep))
    parts = []
    for base, reps in sets.items():
        reps.sort()
        runs, s = [], reps[0]
        for a, b in zip(reps, reps[1:] + [None]):
            if b != a + 1:
                runs.append(f"r{s}" if s == a else f"r{s}-r{a}")
                s = b
        parts.append(f"{base} {','.join(runs)}")
    return "; ".join(parts)


def needed_speed(e: Estimate, goal_s: float) -> float:
    """The speed factor at which this cluster meets ``goal_s`` (the schedule's jobs scaled
    until the makespan fits), or inf."""
    if e.makespan_s <= goal_s:
        return e.cluster.speed
    lo, hi = e.cluster.speed, e.cluster.speed * 1e4
    cells = [j for j in e.jobs if j.model is not None]
    extra = {j.name: j.seconds - j.model.mean_s / e.cluster.speed for j in cells}

    def fits(speed: float) -> bool:
        d = {j.name: j.model.mean_s / speed + extra[j.name] for j in cells}
        return schedule(e.jobs, e.cluster, d, start_s=e.start_s)[0] <= goal_s

    if not fits(hi):
        return math.inf
    while hi / lo > 1.001:
        mid = math.sqrt(lo * hi)
        lo, hi = (lo, mid) if fits(mid) else (mid, hi)
    return hi


def needed_nodes(e: Estimate, goal_s: float) -> int | None:
    """The fewest nodes (up to one per cell) on which the expected run meets ``goal_s``
    (None: no number of nodes does)."""

    def fits(n: int) -> bool:
        return schedule(e.jobs, replace(e.cluster, nodes=n), start_s=e.start_s)[0] <= goal_s

    lo, hi = 1, len(e.cells)
    if not fits(hi):
        return None
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if fits(mid) else (mid + 1, hi)
    return lo


def render_estimate(e: Estimate, goal_s: float | None = None) -> str:
    c = e.cluster
    lo, hi = e.interval_s
    lines = [f"Estimate: profile {e.profile} on {c.name}: {c.nodes} node(s) of {c.cpus} CPUs "
             f"and {c.memory_mb // 1024} GiB ({'KVM' if c.kvm else 'TCG'}), executor "
             f"{c.executor}, speed {c.speed:g}",
             f"Calibrated on {e.model.describe()}.",
             "Testbed constants (median, 10th-90th percentile): " + "; ".join(
                 f"{tb} {ph} {med:.1f} s ({lo_:.1f}-{hi_:.1f})"
                 for tb, ph, med, lo_, hi_, _ in e.model.phase_table()) + ".",
             "Speed 1.0 is the calibration host's: a node whose cells run N times faster has "
             "speed N (an input; measure it with one cell there)." if c.speed == 1.0 else
             f"Cells run {c.speed:g} times faster than on the calibration host (an input).",
             ""]
    builds = [p for p in e.placed if p.job.kind == "build"]
    cells = e.cells
    if builds:
        end = max(p.end for p in builds)
        lines.append(f"Builds: {_dur(end - e.start_s)} ({', '.join(p.job.name for p in builds)})")
    else:
        lines.append("Builds: none (cached)")
    lines.append(f"Cells: {len(cells)}, {_dur(sum(p.job.seconds for p in cells))} of cell time "
                 "(longest first on the first node free):")
    for n in range(c.nodes):
        mine = sorted((p for p in cells if p.node == n), key=lambda p: p.start)
        if not mine:
            lines.append(f"  node {n + 1}: idle")
            continue
        lines.append(f"  node {n + 1}: {len(mine)} cells, {_dur(mine[0].start)} to "
                     f"{_dur(mine[-1].end)}: {_cell_runs([p.job.name for p in mine])}")
    longest = max(cells, key=lambda p: p.job.seconds)
    lines.append(f"  longest cell: {longest.job.name}, {_dur(longest.job.seconds)} "
                 f"({longest.job.model.source})")
    last_cell = max(cells, key=lambda p: p.end)
    lines.append(f"After the cells: {_dur(e.makespan_s - last_cell.end)} (parsing, FTL "
                 "model, tables, figures, claims, report)")
    chain = _critical_path(e)
    lines.append("Critical path: " + " -> ".join(chain))
    lines.append(f"Expected wall time: {_dur(e.makespan_s)} ({INTERVAL[1] - INTERVAL[0]} % "
                 f"interval {_dur(lo)} to {_dur(hi)}; {len(e.draws_s)} draws of measured "
                 f"cells, seed {e.seed})")
    # What the cells' time goes to.
    total = {}
    for p in cells:
        for ph, s in p.job.model.phase_mean_s.items():
            key = (p.job.model.plan.cell.workload, ph)
            total[key] = total.get(key, 0.0) + s / c.speed
    all_s = sum(total.values()) or 1.0
    top = sorted(total.items(), key=lambda kv: -kv[1])[:3]
    lines.append("Cell time goes to: " + ", ".join(
        f"{w} {ph} {100 * s / all_s:.0f} %" for (w, ph), s in top))
    if e.unmeasured:
        lines.append("Not measured (counted as 0 s): " + ", ".join(e.unmeasured))
    for w in e.warnings:
        lines.append(f"Warning: {w}")
    if goal_s is not None:
        lines.append(_goal(e, goal_s))
    return "\n".join(lines) + "\n"


def _critical_path(e: Estimate) -> list[str]:
    """The chain of jobs that ends last, from the end back to the start."""
    by_name = {p.job.name: p for p in e.placed}
    last = max(e.placed, key=lambda p: p.end)
    chain = [last]
    seen = {id(last)}
    while True:
        p = chain[-1]
        prev = [by_name[n] for n in p.job.needs if n in by_name]
        # What held this job back: a need that ended just before, or the job before it on its
        # node.
        same_node = [q for q in e.placed if q.node is not None and q.node == p.node
                     and q.end <= p.start + 1e-6]
        cands = [q for q in prev + same_node if id(q) not in seen]
        if not cands:
            break
        chain.append(max(cands, key=lambda q: q.end))
        seen.add(id(chain[-1]))
    chain.reverse()
    # The chain by stage: each stage's first start to its last end.
    stages = {"build": "builds", "cell": "cells", "parse": "parsing and FTL model",
              "ftl": "parsing and FTL model", "local": "tables, figures, claims, report"}
    out: list[list] = []
    for p in chain:
        name = stages[p.job.kind]
        if p.job.kind == "local" and p.job.name.startswith("plot_cell_runtime_rps"):
            name = "parsing and FTL model"
        if out and out[-1][0] == name:
            out[-1][2], out[-1][3] = p.end, out[-1][3] + [p]
        else:
            out.append([name, p.start, p.end, [p]])
    text = []
    for name, start, end, members in out:
        if name == "cells":
            nodes = sorted({q.node + 1 for q in members})
            name = f"{len(members)} cells on node {', '.join(map(str, nodes))}"
        text.append(f"{name} {_dur(end - start)}")
    return text


def _goal(e: Estimate, goal_s: float) -> str:
    if e.makespan_s <= goal_s:
        return f"Goal {_dur(goal_s)}: met (expected {_dur(e.makespan_s)})."
    longest = max(p.job.seconds for p in e.cells)
    nodes = needed_nodes(e, goal_s)
    speed = needed_speed(e, goal_s)
    parts = [f"Goal {_dur(goal_s)}: not met (expected {_dur(e.makespan_s)})."]
    if nodes is not None:
        parts.append(f"At this speed {nodes} nodes would meet it.")
    else:
        parts.append(f"No number of nodes meets it at this speed: the longest cell alone "
                     f"takes {_dur(longest)}.")
    if math.isfinite(speed):
        nodes = f"{e.cluster.nodes} node{'s' if e.cluster.nodes > 1 else ''}"
        parts.append(f"On {nodes} it takes cells {speed:.3g} times faster "
                     f"than the calibration host (speed {speed:.3g}).")
    return " ".join(parts)
