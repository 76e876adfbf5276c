"""The plan: the validated configuration resolved once into frozen dataclasses.

:func:`make` checks what the schema cannot (:mod:`.checks`) and derives every number a cell
needs (:mod:`.sizing`); the result is the :class:`Plan` with one
:class:`~slimio_repro.agent.CellPlan` per cell. Snakemake's rules, the CLI and the tests all
take the plan; nothing downstream reads the raw configuration.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace
from pathlib import Path

from .. import paths
from ..build import fio as fio_build
from ..build import ycsb_binding as ycsb_build
from ..agent import GuestError, nameddevice
from .cellplan import BASELINE_EXT4, CELL_SET_PATTERN, POLICY_APPENDFSYNC, SYSTEM_FILESYSTEM, Bare, Cell, CellPlan, Motivation, NamedDevice, Placement, RedisBenchmark, Recovery, Roofline, Server, Sizing, Slimio, Vm, YcsbA, build_system, is_slimio, persists, policies_of
from . import checks, sizing, space
from .checks import ConfigError
from .device import load_device_profile

MIB = 1 << 20


@dataclass(frozen=True)
class Plan:
    profile: str
    redis_version: str
    results_dir: Path
    build_dir: Path
    make_jobs: int
    tarball_dirs: tuple[str, ...]
    box_disk_size_mb: int
    ycsb_version: str
    cells: tuple[CellPlan, ...]
    # The motivation (config's motivation section): Table 1's cells (matrix cells, the
    # baseline's on F2FS and on EXT4; those the matrix has are the matrix's own), the
    # motivation cells (Table 2, Figure 2), and whether `reproduce` runs them. Empty, with
    # ``motivation_unavailable`` saying why, where the matrix has no vm testbed.
    table1_cells: tuple[CellPlan, ...] = ()
    motivation_cells: tuple[CellPlan, ...] = ()
    motivation_in_reproduce: bool = False
    motivation_unavailable: str | None = None

    def cell(self, cell: Cell | str) -> CellPlan:
        cell_id = cell if isinstance(cell, str) else cell.id
        for c in (*self.cells, *self.table1_cells, *self.motivation_cells):
            if c.id == cell_id:
                return c
        raise KeyError(f"{cell_id} is not a cell of this plan")

    @property
    def extra_cells(self) -> tuple[CellPlan, ...]:
        """Table 1's cells that are not the matrix's (run by the same rule)."""
        ids = {c.id for c in self.cells}
        return tuple(c for c in self.table1_cells if c.id not in ids)

    def cell_of(self, wildcards) -> CellPlan:
        """The cell plan for a Snakemake rule's wildcards."""
        return self.cell(Cell(wildcards.testbed, wildcards.system, wildcards.workload,
                              wildcards.policy, int(wildcards.rep)))

    @property
    def matrix(self) -> tuple[Cell, ...]:
        return tuple(c.cell for c in self.cells)

    @property
    def redis_builds(self) -> tuple[str, ...]:
        """The Redis builds the matrix runs (slimio-nofdp runs the slimio build)."""
        return tuple(sorted({build_system(c.cell.system) for c in self.cells}))


def _workload(name: str, w: dict) -> RedisBenchmark | YcsbA:
    if name == "ycsb-a":
        return YcsbA(records=w["records"], operations=w["operations"], threads=w["threads"],
                     key_size_bytes=w["key_size_bytes"],
                     value_size_bytes=w["value_size_bytes"], jvm_heap_mb=w["jvm_heap_mb"],
                     on_demand_snapshot=w["on_demand_snapshot"],
                     timeout_s=float(w["timeout_s"]), jvm_options=tuple(w["jvm_options"]))
    return RedisBenchmark(clients=w["clients"], requests=w["requests"], keyspace=w["keyspace"],
                          key_size_bytes=w["key_size_bytes"],
                          value_size_bytes=w["value_size_bytes"], pipeline=w["pipeline"],
                          threads=w["threads"], on_demand_snapshot=w["on_demand_snapshot"],
                          timeout_s=float(w["timeout_s"]))


def _slimio(config: dict, system: str, testbed: str, workload: str, policy: str) -> Slimio:
    s = config["slimio"]
    backend = s["backend"]
    if backend == "auto":
        on_device = testbed == "vm" or config["testbeds"]["bare"]["device"] is not None
        backend = "nvme" if on_device else "file"
    ids = s["placement_ids"]
    placement = Placement(-1, -1, -1) if system == "slimio-nofdp" else \
        Placement(ids["wal"], ids["wal_snapshot"], ids["on_demand"])
    return Slimio(backend=backend, lba_size_bytes=s["lba_size_bytes"],
                  wal_size_bytes=sizing.slimio_wal_size_bytes(config, workload, policy),
                  slot_size_bytes=sizing.slimio_slot_size_bytes(config, workload),
                  device_bytes=sizing.slimio_device_bytes(config, workload, policy),
                  sqpoll=s["sqpoll"], group_commit=s["group_commit"],
                  ring_entries=s["ring_entries"],
                  wal_buffer_size_mb=s["wal_buffer_size_mb"],
                  readahead_size_mb=s["readahead_size_mb"], placement_ids=placement,
                  load_snapshot=s["load_snapshot"])


def _vm(config: dict, profile, roofline: bool = True, filesystem: str | None = None) -> Vm:
    """testbeds.vm for a cell; ``roofline=False`` leaves the device roofline out;
    ``filesystem`` replaces the testbed's (baseline-ext4's EXT4)."""
    v = config["testbeds"]["vm"]
    roof = v["roofline"] if roofline else {**v["roofline"], "enabled": False}
    return Vm(device=profile, accel=v["accel"], cpus=v["cpus"], memory_mb=v["memory_mb"],
              emulator_path=v["emulator_path"], namespace=v["namespace"],
              passthru_device=v["passthru_device"], controller=v["controller"],
              endurance_group=v["endurance_group"], filesystem=filesystem or v["filesystem"],
              mountpoint=v["mountpoint"], guest_scratch_dir=v["guest_scratch_dir"],
              roofline=Roofline(**roof), tcg_cpu=v["tcg_cpu"], storage_pool=v["storage_pool"],
              boot_timeout_s=float(v["boot_timeout_s"]),
              boot_stall_s=float(v["boot_stall_s"]), boot_attempts=v["boot_attempts"],
              reuse_guest=v["reuse_guest"], work_dir=v["work_dir"])


def _named_device(config: dict, p: paths.Paths, facts) -> NamedDevice:
    """testbeds.bare.device as the cells use it, from the facts read at planning."""
    bare = config["testbeds"]["bare"]
    fio = p.build_dir / paths.FIO_PATTERN.format(version=fio_build.load_pin()["version"])
    return nameddevice.settings(facts, bare["i_own_this_device"], bare["filesystem"],
                                Roofline(**bare["roofline"]), str(fio))


def _bare(config: dict, filesystem: str | None, named: NamedDevice | None,
          roofline: bool) -> Bare:
    """testbeds.bare for a cell: the system's file system (``filesystem``, else the
    testbed's), on an image, or on the device ``named`` (its roofline only if ``roofline``:
    the no-persistence bound measures none)."""
    fs = filesystem or config["testbeds"]["bare"]["filesystem"]
    if named is not None:
        named = replace(named, filesystem=fs, roofline=named.roofline if roofline else
                        replace(named.roofline, enabled=False))
    return Bare(filesystem=fs, direct_io=config["testbeds"]["bare"]["direct_io"],
                device=named)


def make(config: dict, host: checks.Host | None = None, check_sources: bool = True,
         device_facts=None) -> Plan:
    """The plan of a validated ``config`` (:func:`slimio_repro.plan.validate`); raises
    :class:`ConfigError` naming the key when a check fails. With the bare testbed on a
    device (testbeds.bare.device), the device is read here (or ``device_facts``, read by
    :func:`agent.nameddevice.gather` where it is) and refused when the cells must not write
    it."""
    m = config["matrix"]
    checks.check_matrix(config)
    checks.check_slimio_sizes(config)
    named = None
    if "bare" in m["testbeds"] and config["testbeds"]["bare"]["device"] is not None:
        try:
            facts = device_facts or nameddevice.gather(config["testbeds"]["bare"]["device"])
        except GuestError as exc:
            raise ConfigError(f"testbeds.bare.device: cannot read it: {exc}") from None
        named = _named_device(config, paths.Paths.from_config(config), facts)
    profile = None
    if "vm" in m["testbeds"]:
        profile = load_device_profile(config["testbeds"]["vm"]["device_profile"])
        checks.check_vm(config, profile, host or checks.Host.this())
    if check_sources:
        checks.check_redis_source(config)
        if profile is not None:
            checks.check_emulator(config, profile)
    p = paths.Paths.from_config(config)
    version = config["redis"]["version"]
    ycsb_version = ycsb_build.pinned_version()
    combos = [(testbed, system, workload, policy)
              for testbed, system in itertools.product(m["testbeds"], m["systems"])
              for workloads, policies in [checks.matrix_scope(m, system)]
              for workload in workloads for policy in policies_of(system, policies)]
    reps = checks.repetitions_of_sets(m, [CELL_SET_PATTERN.format(
        testbed=t, system=s, workload=w, policy=po) for t, s, w, po in combos])
    cells = [_cell_plan(config, p, profile, version, ycsb_version, testbed, system, workload,
                        policy, rep, named=named)
             for testbed, system, workload, policy in combos
             for rep in range(1, reps[CELL_SET_PATTERN.format(
                 testbed=testbed, system=system, workload=workload, policy=policy)] + 1)]
    if named is not None:
        checks.check_bare_device(config, facts, [c for c in cells if c.bare is not None])
    mot = config["motivation"]
    table1, scenario_cells, unavailable = (), (), None
    if profile is None:
        unavailable = ("the motivation runs in the vm testbed, and matrix.testbeds is "
                       f"{m['testbeds']}: add vm to matrix.testbeds")
    else:
        reps = range(1, mot["repetitions"] + 1)
        table1 = tuple(_cell_plan(config, p, profile, version, ycsb_version, "vm", system,
                                  "redis-benchmark", "periodical", rep)
                       for system in ("baseline", BASELINE_EXT4) for rep in reps)
        try:
            scenario_cells = tuple(_motivation_cell(config, p, profile, version, ycsb_version,
                                                    system, rep)
                                   for system in mot["systems"] for rep in reps)
        except ConfigError as exc:
            # A motivation that cannot run stops the runs that include it (at planning,
            # here, or `snakemake motivation`'s), not the others.
            if mot["in_reproduce"]:
                raise
            table1, unavailable = (), str(exc)
    return Plan(profile=config["profile"], redis_version=version, results_dir=p.results_dir,
                build_dir=p.build_dir, make_jobs=config["redis"]["make_jobs"],
                tarball_dirs=tuple(config["redis"]["tarball_dirs"]),
                box_disk_size_mb=config["testbeds"]["vm"]["box_disk_size_mb"],
                ycsb_version=ycsb_version, cells=tuple(cells), table1_cells=table1,
                motivation_cells=scenario_cells,
                motivation_in_reproduce=mot["in_reproduce"] and profile is not None,
                motivation_unavailable=unavailable)


def _motivation_cell(config: dict, p: paths.Paths, profile, version: str, ycsb_version: str,
                     system: str, rep: int) -> CellPlan:
    """A motivation cell: its system's redis-benchmark Periodical-Log cell whose SETs
    (motivation.fill_requests) fill the dataset, with the scenarios' settings. No
    WAL-Snapshot runs in it, so its storage (SlimIO's WAL region) is sized for the fill and
    the Snapshot & WAL scenario's writes together, and an explicit region must hold them."""
    mot, bench = config["motivation"], config["workloads"]["redis-benchmark"]
    fill = mot["fill_requests"] or bench["requests"]
    scenarios = Motivation(wal_requests=mot["wal_requests"] or 2 * bench["requests"],
                           lead_s=float(mot["lead_s"]),
                           perf_frequency_hz=mot["perf_frequency_hz"])
    whole = {**config, "workloads": {**config["workloads"], "redis-benchmark": {
        **bench, "requests": fill + scenarios.wal_requests}}}
    # SlimIO starts a WAL-Snapshot itself at 5/8 of its region (checks.SLIMIO_REWRITE_FILL):
    # a derived region is sized so that the cell's whole WAL stays below that.
    wal = sizing.expected_wal_bytes(whole, "redis-benchmark")
    s = config["slimio"]
    if not s["wal_size_mb"]:
        need = wal * s["wal_margin_ratio"] / checks.SLIMIO_REWRITE_FILL
        whole["slimio"] = {**s, "wal_size_mb": -(-int(need) // MIB) + s["wal_margin_mb"]}
    cell = _cell_plan(whole, p, profile, version, ycsb_version, "vm", system,
                      "redis-benchmark", "periodical", rep, roofline=False)
    if cell.is_slimio and cell.slimio.device_bytes > profile.capacity_bytes:
        raise ConfigError(
            f"motivation: SlimIO's motivation cell needs a {cell.slimio.device_bytes / MIB:.0f}"
            f" MiB device (its WAL region holds fill_requests {fill} and wal_requests "
            f"{scenarios.wal_requests} SETs with no WAL-Snapshot), and testbeds.vm."
            f"device_profile {profile.name} has {profile.capacity_bytes / MIB:.0f} MiB: lower "
            "motivation.fill_requests or motivation.wal_requests")
    if cell.is_slimio and wal > cell.slimio.wal_size_bytes * checks.SLIMIO_REWRITE_FILL:
        raise ConfigError(
            f"motivation: a motivation cell writes {wal / MIB:.0f} MiB of WAL "
            f"(fill_requests {fill} and wal_requests {scenarios.wal_requests} SETs), and "
            f"slimio.wal_size_mb {cell.slimio.wal_size_bytes // MIB} starts a WAL-Snapshot "
            f"past {cell.slimio.wal_size_bytes * checks.SLIMIO_REWRITE_FILL / MIB:.0f} MiB, "
            "which would run during its scenarios: lower motivation.fill_requests or "
            "motivation.wal_requests")
    return space.with_disk(whole, replace(cell, workload=replace(cell.workload, requests=fill),
                                          motivation=scenarios))


def _cell_plan(config: dict, p: paths.Paths, profile, version: str, ycsb_version: str,
               testbed: str, system: str, workload: str, policy: str, rep: int,
               roofline: bool = True, named: NamedDevice | None = None) -> CellPlan:
    """One cell's plan (``roofline=False``: no device roofline, e.g. a motivation cell;
    ``named``: the bare testbed's device, None for an image)."""
    server = config["server"]
    w = config["workloads"][workload]
    # The no-persistence bound writes nothing: no On-Demand-Snapshot, nothing to
    # recover, and no device roofline (its siblings measure the same namespace's).
    logs = persists(system)
    derived = Sizing(
        appendfsync=POLICY_APPENDFSYNC[policy],
        auto_aof_rewrite_min_size_bytes=sizing.aof_rewrite_min_size_bytes(config, workload),
        auto_aof_rewrite_percentage=server["auto_aof_rewrite_percentage"],
        expected_sets=sizing.expected_sets(config, workload),
        expected_wal_bytes=sizing.expected_wal_bytes(config, workload),
        expected_dataset_bytes=sizing.expected_dataset_bytes(config, workload),
        image_size_bytes=(sizing.image_size_bytes(config, system, workload, policy)
                          if testbed == "bare" and named is None else None))
    bin_dir = p.redis_build(build_system(system), version) / "bin"
    ycsb_dir = p.ycsb_build(ycsb_version) if workload == "ycsb-a" else None
    if testbed == "vm":
        needs = (paths.BOX_PATTERN,)
    else:
        needs = (str((bin_dir / "redis-server").relative_to(p.build_dir)),)
        if named is not None and named.roofline.enabled and logs:
            needs += (str(Path(named.fio_bin).relative_to(p.build_dir)),)
        if ycsb_dir is not None:
            needs += (paths.YCSB_BUILD_RECORD_PATTERN.format(version=ycsb_version),)
    filesystem = SYSTEM_FILESYSTEM.get(system)
    return space.with_disk(config, CellPlan(
        cell=Cell(testbed, system, workload, policy, rep),
        profile=config["profile"], redis_version=version,
        workload=(_workload(workload, w) if logs else
                  replace(_workload(workload, w), on_demand_snapshot=False)),
        server=Server(sampler_interval_s=float(server["sampler_interval_s"]),
                      start_timeout_s=float(server["start_timeout_s"]),
                      snapshot_timeout_s=float(server["snapshot_timeout_s"])),
        recovery=(Recovery(**config["recovery"]) if logs else
                  Recovery(**{**config["recovery"], "enabled": False})),
        sizing=derived,
        slimio=(_slimio(config, system, testbed, workload, policy)
                if is_slimio(system) else None),
        bare=(_bare(config, filesystem, named, logs and roofline)
              if testbed == "bare" else None),
        vm=(_vm(config, profile, roofline=logs and roofline, filesystem=filesystem)
            if testbed == "vm" else None),
        redis_bin_dir=str(bin_dir), ycsb_dir=str(ycsb_dir) if ycsb_dir else None,
        needs=needs))
