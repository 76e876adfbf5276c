"""What the schema cannot check, checked when the plan is made, before anything is built.

Each check names the key to change and says what to do (:class:`ConfigError`). They need the
whole configuration (combinations of keys), the derived sizes, the device profile, or the host
(cores, memory, KVM, where the Redis tarball can come from).
"""

from __future__ import annotations

import itertools
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from .. import paths
from ..build import sources
from ..agent import nameddevice
from .cellplan import DeviceProfile, is_slimio, persists
from . import sizing
from .config import ConfigError

MIB = sizing.MIB
# Room the host keeps for itself (libvirt, QEMU's own memory, the pipeline) beside a VM.
HOST_RESERVE_MB = 1024
# A snapshot forks the server: copy-on-write can double the dataset's memory at worst.
FORK_FACTOR = 2
GUEST_BASE_MB = 512


@dataclass(frozen=True)
class Host:
    """What the plan checks of the machine that will run the cells."""
    cpus: int
    memory_mb: int
    kvm_device: bool
    # The setup playbook's probe (src/slimio_repro/testbed/accel.py): kvm, tcg, or None when
    # it has not run on this host.
    accel_verdict: str | None

    @classmethod
    def this(cls) -> "Host":
        mem_kib = next(int(line.split()[1]) for line in
                       Path("/proc/meminfo").read_text().splitlines()
                       if line.startswith("MemTotal:"))
        verdict = Path(paths.ACCEL_VERDICT)
        accel = None
        if verdict.is_file():
            import json
            accel = json.loads(verdict.read_text()).get("accel")
        return cls(cpus=os.cpu_count() or 1, memory_mb=mem_kib // 1024,
                   kvm_device=os.path.exists("/dev/kvm"), accel_verdict=accel)

    @classmethod
    def of_cluster(cls, feature: str, sinfo: str | None = None) -> "Host":
        """The largest node of the SLURM cluster with node feature ``feature`` (the one a vm
        cell asks for), as `sinfo` describes it: on a cluster the cells run there, not on
        the host that plans them. KVM where that node has the feature kvm (the setup
        playbook adds it where a KVM guest boots). ``sinfo``: its output, for tests."""
        if sinfo is None:
            try:
                sinfo = subprocess.run(["sinfo", "-h", "-N", "-o", "%N|%c|%m|%f"],
                                       capture_output=True, text=True, check=True).stdout
            except OSError:
                return cls.this()       # no SLURM here: another executor runs the jobs
            except subprocess.CalledProcessError as exc:
                raise ConfigError(f"cannot ask SLURM for its nodes: sinfo failed "
                                  f"({exc.stderr.strip()}); is slurmctld up?") from None
        nodes = []
        for line in sinfo.splitlines():
            name, cpus, mem, features = line.strip().split("|")
            if feature in features.split(","):
                nodes.append(cls(cpus=int(cpus), memory_mb=int(mem.rstrip("+")),
                                 kvm_device="kvm" in features.split(","),
                                 accel_verdict="kvm" if "kvm" in features.split(",")
                                 else "tcg"))
        if not nodes:
            raise ConfigError(
                f"testbeds: no node of this SLURM cluster has the feature {feature!r} that vm "
                "cells ask for (sinfo -N -o '%N %f'); prepare nodes with the setup playbook, "
                "or name your nodes' feature in the profile's set-resources "
                "(docs/how-to/cluster.md)")
        return max(nodes, key=lambda n: (n.kvm_device, n.cpus, n.memory_mb))


def _only(matrix: dict, system: str) -> dict:
    """``matrix.only``'s entry for ``system``; {} when it has none (or null)."""
    return (matrix.get("only") or {}).get(system) or {}


def matrix_scope(matrix: dict, system: str) -> tuple[list[str], list[str]]:
    """The workloads and the policies ``system`` runs: the matrix's, narrowed by
    ``matrix.only`` (either list empty when the restriction leaves none)."""
    only = _only(matrix, system)
    return ([w for w in matrix["workloads"] if w in (only.get("workloads") or [w])],
            [p for p in matrix["policies"] if p in (only.get("policies") or [p])])


def repetitions_of_sets(matrix: dict, sets: list[str]) -> dict[str, int]:
    """Each cell set's repetitions: matrix.repetitions, or more where matrix.looks adds
    them. Raises :class:`ConfigError` naming a look's key that is no cell set of the
    matrix, or a set whose repetitions shrink from one look to the next."""
    reps = {s: matrix["repetitions"] for s in sets}
    for j, look in enumerate(matrix.get("looks") or [], 1):
        for key, n in look.items():
            if key not in reps:
                raise ConfigError(
                    f"matrix.looks[{j - 1}]: {key!r} is no cell set of this matrix (its sets "
                    f"are {', '.join(sorted(reps)) or 'none'}); remove it, or run `slimio-repro "
                    "decide` again on the same profile")
            if n < reps[key]:
                raise ConfigError(
                    f"matrix.looks[{j - 1}].{key}: {n} repetitions, fewer than the "
                    f"{reps[key]} it had before; a look only adds repetitions")
            reps[key] = n
    return reps


def check_matrix(config: dict) -> None:
    bench = config["workloads"]["redis-benchmark"]
    width = bench["key_size_bytes"]
    if bench["keyspace"] > 10 ** width:
        raise ConfigError(
            f"workloads.redis-benchmark.keyspace: {bench['keyspace']} keys do not fit in "
            f"key_size_bytes={width} decimal digits; raise key_size_bytes or lower keyspace")
    ycsb = config["workloads"]["ycsb-a"]
    if ycsb["records"] > 10 ** ycsb["key_size_bytes"]:
        raise ConfigError(
            f"workloads.ycsb-a.records: {ycsb['records']} records do not fit in "
            f"key_size_bytes={ycsb['key_size_bytes']} decimal digits (the binding's keys are "
            "zero-padded record numbers); raise key_size_bytes or lower records")
    matrix = config["matrix"]
    for system in matrix["systems"]:
        workloads, policies = matrix_scope(matrix, system)
        if not workloads or (not policies and persists(system)):   # nopersist: no policy
            missing = "workloads" if not workloads else "policies"
            asked = _only(matrix, system)[missing]
            raise ConfigError(
                f"matrix.only.{system}.{missing}: {asked} has none of matrix."
                f"{missing} {matrix[missing]}, so {system} would run no cell: add one of "
                f"them to matrix.{missing}, remove {system} from matrix.systems, or lift "
                f"the restriction (matrix.only.{system}: null)")
    bare = config["testbeds"]["bare"]
    on_image = "bare" in matrix["testbeds"] and bare["device"] is None
    if on_image and "slimio-nofdp" in matrix["systems"]:
        raise ConfigError(
            "matrix.systems: slimio-nofdp differs from slimio only by FDP placement, which "
            "needs an NVMe device; matrix.testbeds has bare on an image: remove "
            "slimio-nofdp from matrix.systems, bare from matrix.testbeds, or name an NVMe "
            "namespace in testbeds.bare.device")
    if on_image and config["slimio"]["backend"] == "nvme" \
            and any(is_slimio(s) for s in matrix["systems"]):
        raise ConfigError(
            "slimio.backend: nvme needs an NVMe device, and matrix.testbeds has bare on an "
            "image: set slimio.backend to auto (nvme on a device, file on an image) or file, "
            "or name an NVMe namespace in testbeds.bare.device")
    if on_image and bare["filesystem"] != "ext4":
        raise ConfigError(
            f"testbeds.bare.filesystem: {bare['filesystem']} is for a device "
            "(testbeds.bare.device); the image is ext4 (this host's kernel may have no "
            "F2FS): set it to ext4, or name an NVMe namespace in testbeds.bare.device")
    if bare["i_own_this_device"] is not None and bare["device"] is None:
        raise ConfigError(
            f"testbeds.bare.i_own_this_device: {bare['i_own_this_device']} is set, and "
            "testbeds.bare.device is null: it only lets the cells overwrite the device "
            "testbeds.bare.device names; name it there, or remove i_own_this_device")
    if Path(config["results_dir"]).resolve() == Path(config["build_dir"]).resolve():
        raise ConfigError(
            f"results_dir: {config['results_dir']!r} is also build_dir; results and the build "
            "cache must be different directories")


# SlimIO's WAL region (redis-slimio/src/slimio.c, slimio_wal.h): a WAL-Snapshot is scheduled
# when the live WAL passes 5/8 of the region; ordinary appends leave an eighth free (the
# reserve that takes executed commands when the region fills).
SLIMIO_REWRITE_FILL = 5 / 8
SLIMIO_RESERVE_SHARE = 1 / 8


def _workload_policies(config: dict):
    """Every (workload, policy) of the matrix: SlimIO's region is sized per policy."""
    return itertools.product(config["matrix"]["workloads"], config["matrix"]["policies"])


def check_slimio_sizes(config: dict) -> None:
    """SlimIO's sizing rule (redis-slimio/README.md, "A full WAL region"): with W the WAL
    region's payload bytes, L the share of it that is log at least (all of it under
    Periodical-Log; 8/9 under Always-Log, whose batches end on a block with a capped pad:
    sizing.slimio_wal_log_share), T Redis's rewrite trigger and D the largest dataset a
    rewrite snapshots, while ``server.rewrite_wal_ratio`` (r) bytes of WAL arrive per byte
    it writes:

    * 5/8 L W >= T: Redis's own trigger fires before SlimIO's (at 5/8 of the region), so
      SlimIO rewrites exactly as often as the baseline;
    * T + r D <= 7/8 L W: a rewrite that starts at T ends before the appends reach the
      reserve, so no client is refused in a sustained workload.
    """
    if not any(is_slimio(s) for s in config["matrix"]["systems"]):
        return
    ratio = config["server"]["rewrite_wal_ratio"]
    explicit = config["slimio"]["wal_size_mb"]
    key = ("slimio.wal_size_mb" if explicit else
           "slimio.wal_size_mb (derived: slimio.wal_margin_ratio / wal_margin_mb)")
    for workload, policy in _workload_policies(config):
        wal = sizing.slimio_wal_size_bytes(config, workload, policy)
        share = sizing.slimio_wal_log_share(policy)
        log = wal * share
        holds = (f"a {wal / MIB:.0f} MiB WAL region" if share == 1 else
                 f"a {wal / MIB:.0f} MiB WAL region ({log / MIB:.0f} MiB of log at least "
                 f"under {policy}, whose pad may take 1/{sizing.SLIMIO_WAL_PAD_PER_LOG_DIV + 1})")
        trigger = sizing.aof_rewrite_min_size_bytes(config, workload)
        dataset = sizing.expected_dataset_bytes(config, workload)
        during = ratio * dataset
        if log * SLIMIO_REWRITE_FILL < trigger:
            raise ConfigError(
                f"{key}: at 5/8 of {holds} SlimIO starts a "
                f"WAL-Snapshot before {workload}'s rewrite trigger "
                f"({trigger / MIB:.1f} MiB, server.auto_aof_rewrite_min_size_mb or derived), "
                f"so it would rewrite more often than the baseline; use at least "
                f"{-(-trigger // (SLIMIO_REWRITE_FILL * share) // MIB):.0f} MiB, or set it to "
                "null (derived)")
        limit = log * (1 - SLIMIO_RESERVE_SHARE)
        if trigger + during > limit:
            need = (trigger + during) / (1 - SLIMIO_RESERVE_SHARE) / share
            raise ConfigError(
                f"{key}: {holds} refuses writes past "
                f"{limit / MIB:.1f} MiB of log (its reserve), but {workload}'s rewrite starts "
                f"at {trigger / MIB:.1f} MiB and {during / MIB:.1f} MiB more arrive while its "
                f"{dataset / MIB:.1f} MiB dataset is snapshot (server.rewrite_wal_ratio = "
                f"{ratio}): clients would be refused (MISCONF); use at least "
                f"{-(-need // MIB):.0f} MiB, or set it to null (derived)")
    image_mb = config["testbeds"]["bare"]["image_size_mb"]
    if image_mb and "bare" in config["matrix"]["testbeds"] \
            and config["testbeds"]["bare"]["device"] is None:
        device = max(sizing.slimio_device_bytes(config, w, p)
                     for w, p in _workload_policies(config))
        # ext4's own metadata (inode tables, journal) takes a few percent of the image.
        need_mb = -(-(device + device // 16 + 256 * MIB) // MIB)
        if image_mb < need_mb:
            raise ConfigError(
                f"testbeds.bare.image_size_mb: {image_mb} MiB cannot hold SlimIO's "
                f"{device // MIB} MiB device file and the file system around it (needs "
                f"at least {need_mb} MiB); raise it, set it to null, or shrink "
                "slimio.wal_size_mb / slimio.slot_size_mb")


def check_vm(config: dict, profile: DeviceProfile, host: Host) -> None:
    """The vm testbed: the host can run the VM, the device profile can hold the cells."""
    vm = config["testbeds"]["vm"]
    if vm["boot_stall_s"] >= vm["boot_timeout_s"]:
        raise ConfigError(
            f"testbeds.vm.boot_stall_s: {vm['boot_stall_s']} s is not below boot_timeout_s "
            f"({vm['boot_timeout_s']} s), so a hung boot would never be retried; lower it "
            "or raise boot_timeout_s")
    if vm["cpus"] > host.cpus:
        raise ConfigError(f"testbeds.vm.cpus: {vm['cpus']} vCPUs on a host with {host.cpus} "
                          "cores; lower it (the smoke and ci profiles use 2)")
    if vm["memory_mb"] > host.memory_mb - HOST_RESERVE_MB:
        raise ConfigError(
            f"testbeds.vm.memory_mb: {vm['memory_mb']} MiB does not fit this host's "
            f"{host.memory_mb} MiB with {HOST_RESERVE_MB} MiB left for the host; lower it, or "
            "run this profile on a larger host")
    if vm["accel"] == "kvm" and not host.kvm_device:
        raise ConfigError("testbeds.vm.accel: kvm, but this host has no /dev/kvm; set it to "
                          "auto or tcg")
    if profile.emulator == "femu":
        # FEMU keeps the whole device in host RAM (its DRAM backend), beside the guest's.
        need = profile.capacity_gib * 1024 + vm["memory_mb"]
        if need > host.memory_mb - HOST_RESERVE_MB:
            raise ConfigError(
                f"testbeds.vm.device_profile: {profile.name}'s {profile.capacity_gib} GiB "
                f"lives in host RAM beside the guest's {vm['memory_mb']} MiB: {need} MiB "
                f"does not fit this host's {host.memory_mb} MiB with {HOST_RESERVE_MB} MiB "
                "left for the host; use a smaller FEMU profile (e.g. femu-fdp-gc)")
    for workload in config["matrix"]["workloads"]:
        data = sizing.expected_dataset_bytes(config, workload)
        need_mb = FORK_FACTOR * data // MIB + GUEST_BASE_MB
        if need_mb > vm["memory_mb"]:
            raise ConfigError(
                f"testbeds.vm.memory_mb: {vm['memory_mb']} MiB cannot hold {workload}'s "
                f"dataset ({data // MIB} MiB) twice over (a snapshot forks the server) plus "
                f"{GUEST_BASE_MB} MiB for the guest; raise it to {need_mb} or shrink the workload")
    slimio_systems = [s for s in config["matrix"]["systems"] if is_slimio(s)]
    if not slimio_systems:
        return
    s = config["slimio"]
    if s["lba_size_bytes"] != profile.lba_size_bytes:
        raise ConfigError(
            f"slimio.lba_size_bytes: {s['lba_size_bytes']} differs from device profile "
            f"{profile.name}'s LBA size {profile.lba_size_bytes}; make them equal")
    for workload, policy in _workload_policies(config):
        need = sizing.slimio_device_bytes(config, workload, policy)
        if need > profile.capacity_bytes:
            raise ConfigError(
                f"slimio.wal_size_mb: SlimIO's layout for {workload} needs {need // MIB} MiB "
                f"and device profile {profile.name} has {profile.capacity_bytes // MIB} MiB; "
                "lower slimio.wal_size_mb / slot_size_mb or use a larger device profile")
    if "slimio" in slimio_systems:
        for kind, pid in s["placement_ids"].items():
            if pid < 0:
                continue
            if not profile.fdp:
                raise ConfigError(
                    f"slimio.placement_ids.{kind}: {pid}, but device profile {profile.name} "
                    "has no FDP; set the ids to -1, or use an FDP profile")
            if pid >= profile.reclaim_unit_handles:
                raise ConfigError(
                    f"slimio.placement_ids.{kind}: {pid} is not a placement handle of device "
                    f"profile {profile.name} (0-{profile.reclaim_unit_handles - 1})")
    work = vm["work_dir"]
    if work:
        existing = Path(work) if Path(work).is_absolute() else paths.REPO_ROOT / work
        while not existing.exists():
            existing = existing.parent
        for d in [existing, *existing.parents]:
            if not d.stat().st_mode & 0o001:
                raise ConfigError(
                    f"testbeds.vm.work_dir: {work}: {d} is not searchable by other users, so "
                    "libvirt's QEMU cannot open the NVMe backing file in it; choose a "
                    "directory like /var/tmp/slimio-repro/vm (or null)")


def check_emulator(config: dict, profile: DeviceProfile) -> None:
    """A FEMU profile needs the FEMU build on this machine (checked with the sources: a plan
    made elsewhere, e.g. to be run on a cluster's nodes, skips it)."""
    if profile.emulator != "femu":
        return
    emulator = config["testbeds"]["vm"]["emulator_path"] or paths.FEMU_EMULATOR
    if not Path(emulator).exists():
        raise ConfigError(
            f"testbeds.vm.device_profile: {profile.name} is FEMU, and {emulator} "
            "(testbeds.vm.emulator_path) does not exist: build it with `make setup-host "
            "SETUP_ARGS='-e host_femu_enabled=true'` (femu/README.md), or use a qemu "
            "profile")


def check_redis_source(config: dict) -> None:
    version = config["redis"]["version"]
    for i, d in enumerate(config["redis"]["tarball_dirs"]):
        if not Path(d).is_dir():
            raise ConfigError(f"redis.tarball_dirs[{i}]: {d!r} is not a directory; fix or "
                              "remove it")
    cached = paths.Paths.from_config(config).build_dir / \
        paths.SOURCE_TARBALL_PATTERN.format(version=version)
    if sources.reachable(version, cached, config["redis"]["tarball_dirs"]) is None:
        kinds = ", ".join(s["kind"] for s in sources.pin(version)["sources"])
        raise ConfigError(
            f"redis.version: the tarball of Redis {version} cannot be had here (its pinned "
            f"sources: {kinds}; none in the build cache or redis.tarball_dirs): put "
            f"redis-{version}.tar.gz in a directory listed in redis.tarball_dirs (its sha256 "
            f"is verified), run `make setup-host` for Debian's sources, or choose a version "
            "this host can fetch (7.0.15)")


def check_bare_device(config: dict, facts, plans) -> None:
    """testbeds.bare.device, read now (``facts``: :func:`agent.nameddevice.gather`): refuse
    what the cells must not write, and what a system of the matrix needs of it that it lacks
    (``plans``: the bare cells' plans), every problem in one error."""
    bare = config["testbeds"]["bare"]
    found = nameddevice.problems(facts, bare["i_own_this_device"])
    for plan in plans:
        found += nameddevice.problems(facts, bare["i_own_this_device"], plan.cell.system,
                                      plan.bare.filesystem, plan.slimio)
    found = list(dict.fromkeys(found))
    if found:
        raise ConfigError("testbeds.bare.device: the bare cells cannot run on "
                          f"{bare['device']}:\n- " + "\n- ".join(found))
