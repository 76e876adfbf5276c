"""One cell's plan: every number a cell runs with, resolved once on the host at planning time.

The plan stage (:mod:`slimio_repro.plan`) makes one :class:`CellPlan` per cell of the matrix
from the validated configuration; nothing downstream reads the raw configuration again. A cell
receives its own plan (``plan.json`` in its raw directory is exactly what it ran with), the vm
testbed hands it to the guest, and the parse stage reads the numbers back from it.

The plan is also what decides whether a finished cell is stale: :meth:`CellPlan.sha256` hashes
every field except those marked ``stale=False`` (paths, timeouts and other settings that
cannot change a completed cell's result), and the ``run_cell`` rule declares that hash as a
parameter, so Snakemake reruns exactly the cells whose plan changed.

Standard library only: the code that runs a cell (:mod:`slimio_repro.agent`) imports it inside
the guest.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import types
import typing
from dataclasses import asdict, dataclass, field

# The bound: stock Redis with persistence off (no AOF, no snapshots). It logs nothing, so it
# has no logging policy: its cells run once per repetition under the policy ``none``, and
# every policy's ratios are formed against them.
NOPERSIST = "nopersist"
NO_POLICY = "none"
# appendfsync of each policy (``none``: Redis's default, unused with appendonly no).
POLICY_APPENDFSYNC = {"periodical": "everysec", "always": "always", NO_POLICY: "everysec"}
# baseline-ext4: stock Redis, as the baseline, on EXT4 instead of the testbed's file system
# (the paper's Table 1 compares the two; plan.resolve gives its cells testbeds.vm.filesystem
# ext4).
BASELINE_EXT4 = "baseline-ext4"
SYSTEMS = ("baseline", "slimio", "slimio-nofdp", NOPERSIST, BASELINE_EXT4)
# The file system a system's cells use in the vm testbed, where it is not the testbed's.
SYSTEM_FILESYSTEM = {BASELINE_EXT4: "ext4"}
WORKLOADS = ("redis-benchmark", "ycsb-a")
# Systems that run SlimIO (the slimio build); slimio-nofdp differs only in placement.
SLIMIO_SYSTEMS = ("slimio", "slimio-nofdp")
CELL_ID_PATTERN = "{testbed}-{system}-{workload}-{policy}-r{rep}"
# A cell set: the repetitions of one system's workload under one policy on one testbed.
CELL_SET_PATTERN = "{testbed}-{system}-{workload}-{policy}"
# A motivation cell (:class:`Motivation`): its system's scenarios, on its own VM.
MOTIVATION_ID_PATTERN = "{testbed}-{system}-motivation-r{rep}"


def is_slimio(system: str) -> bool:
    return system in SLIMIO_SYSTEMS


def persists(system: str) -> bool:
    """Whether ``system`` writes a WAL and snapshots (all but the no-persistence bound)."""
    return system != NOPERSIST


def on_file_system(system: str) -> bool:
    """Whether the cell's storage is a file system (the baseline's; the bound runs on the
    same storage and writes nothing to it) rather than SlimIO's raw device."""
    return not is_slimio(system)


def policies_of(system: str, policies) -> tuple[str, ...]:
    """The logging policies ``system`` runs under, of the matrix's ``policies``."""
    return tuple(policies) if persists(system) else (NO_POLICY,)


def build_system(system: str) -> str:
    """The Redis build a system runs: slimio-nofdp runs the slimio build, the bound the
    baseline's (stock Redis)."""
    if is_slimio(system):
        return "slimio"
    return "baseline" if system in (NOPERSIST, BASELINE_EXT4) else system


def operational(default=dataclasses.MISSING):
    """A field that cannot change a finished cell's result (a path, a timeout): left out of
    :meth:`CellPlan.sha256`."""
    if default is dataclasses.MISSING:
        return field(metadata={"stale": False})
    return field(default=default, metadata={"stale": False})


@dataclass(frozen=True, order=True)
class Cell:
    testbed: str
    system: str
    workload: str
    policy: str
    rep: int

    def wildcards(self) -> dict:
        return asdict(self)

    @property
    def id(self) -> str:
        return CELL_ID_PATTERN.format(**self.wildcards())

    @property
    def set_id(self) -> str:
        """The cell set it repeats (matrix.looks' keys)."""
        return CELL_SET_PATTERN.format(**self.wildcards())

    @classmethod
    def from_id(cls, cell_id: str) -> "Cell":
        m = re.fullmatch(r"(?P<testbed>[a-z]+)-(?P<system>[a-z]+(?:-nofdp)?)-"
                         r"(?P<workload>redis-benchmark|ycsb-a)-(?P<policy>periodical|always|none)"
                         r"-r(?P<rep>\d+)", cell_id)
        if not m:
            raise ValueError(f"{cell_id!r} is not a cell id like {CELL_ID_PATTERN}")
        d = m.groupdict()
        return cls(d["testbed"], d["system"], d["workload"], d["policy"], int(d["rep"]))


@dataclass(frozen=True)
class RedisBenchmark:
    """workloads.redis-benchmark (config/config.yaml documents each key)."""
    clients: int
    requests: int
    keyspace: int
    key_size_bytes: int
    value_size_bytes: int
    pipeline: int
    threads: int
    on_demand_snapshot: bool
    timeout_s: float = operational(3600)

    @property
    def distinct_keys(self) -> int:
        """Keys the workload can write (the key range)."""
        return self.keyspace


@dataclass(frozen=True)
class YcsbA:
    """workloads.ycsb-a (config/config.yaml documents each key)."""
    records: int
    operations: int
    threads: int
    key_size_bytes: int
    value_size_bytes: int
    jvm_heap_mb: int | None
    on_demand_snapshot: bool
    timeout_s: float = operational(3600)
    # JVM options of the client (cells planned before the key existed ran without any).
    jvm_options: tuple[str, ...] = ()

    @property
    def distinct_keys(self) -> int:
        """Records, numbered from 0 (the load phase writes them all)."""
        return self.records


@dataclass(frozen=True)
class Sizing:
    """Numbers derived from the workload: the rewrite trigger and the storage it needs."""
    appendfsync: str
    auto_aof_rewrite_min_size_bytes: int
    auto_aof_rewrite_percentage: int
    expected_sets: int
    expected_wal_bytes: int
    expected_dataset_bytes: int
    # The bare testbed's per-cell file-system image (None in the vm testbed).
    image_size_bytes: int | None


@dataclass(frozen=True)
class Placement:
    """FDP placement identifiers per data kind (-1 = no directive)."""
    wal: int
    wal_snapshot: int
    on_demand: int

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Slimio:
    """The slimio section as a cell uses it: backend resolved, layout sized, placement per
    system (none for slimio-nofdp)."""
    backend: str
    lba_size_bytes: int
    wal_size_bytes: int
    slot_size_bytes: int
    device_bytes: int
    sqpoll: bool
    ring_entries: int
    wal_buffer_size_mb: int
    readahead_size_mb: int
    placement_ids: Placement
    load_snapshot: str
    # slimio-group-commit (a default: plans written before it load, and ran without it).
    group_commit: bool = True

    def layout(self) -> dict:
        """The layout's sizes under the names the records use (``slimio_*_bytes``)."""
        return {"slimio_wal_size_bytes": self.wal_size_bytes,
                "slimio_slot_size_bytes": self.slot_size_bytes,
                "slimio_lba_size_bytes": self.lba_size_bytes,
                "slimio_device_bytes": self.device_bytes}


@dataclass(frozen=True)
class Server:
    sampler_interval_s: float
    start_timeout_s: float = operational(600)
    snapshot_timeout_s: float = operational(3600)


@dataclass(frozen=True)
class Recovery:
    enabled: bool
    cold_cache: bool
    sampled_keys: int


@dataclass(frozen=True)
class Roofline:
    enabled: bool
    size_mb: int
    iodepth: int


@dataclass(frozen=True)
class NamedDevice:
    """testbeds.bare.device as planning found it (:mod:`.nameddevice`): the NVMe namespace a
    bare cell runs on instead of an image. Its attributes are named as :class:`Vm`'s, which
    the storage, the device monitor and the roofline of :mod:`.vmstorage` read."""
    namespace: str
    passthru_device: str | None
    controller: str | None
    endurance_group: int
    fdp: bool
    # The namespace's identity (sysfs wwid) and its controller's: a cell refuses another.
    wwid: str | None
    serial: str | None
    model: str | None
    filesystem: str
    roofline: Roofline
    # fio for the roofline (the host's build).
    fio_bin: str = operational("")
    i_own_this_device: str | None = operational(None)
    # Where a cell mounts its file system (set by the cell: inside its raw directory).
    mountpoint: str = operational("")


@dataclass(frozen=True)
class Bare:
    filesystem: str
    direct_io: bool
    # testbeds.bare.device: None runs the cell on a fresh image file.
    device: NamedDevice | None = field(default=None, metadata={"omit_none": True})


@dataclass(frozen=True)
class DeviceProfile:
    """An emulated SSD of femu/ (femu/README.md documents the keys)."""
    name: str
    path: str
    emulator: str
    capacity_gib: int
    lba_size_bytes: int
    fdp: bool
    reclaim_unit_size_mib: int | None
    reclaim_unit_handles: int | None
    reclaim_groups: int | None
    description: str
    # FEMU's device options, "key=value" each (femu profiles only).
    femu_options: tuple[str, ...]

    @property
    def capacity_bytes(self) -> int:
        return self.capacity_gib << 30

    def femu(self) -> dict[str, int]:
        """The profile's FEMU options as numbers."""
        return {k: int(v) for k, v in (o.split("=", 1) for o in self.femu_options)}

    def femu_geometry(self) -> dict[str, int]:
        """The flash the artifact's FDP FTL builds from the options (hw/femu/fdp/fdpftl.c,
        ssd_init_params, integer arithmetic as there): the namespace (devsz_mb) is
        gc_thres_pcent % of the flash; each of the nchs x luns_per_ch dies holds
        blocks_per_die blocks of nand_block_size_mb; a reclaim unit (a line) is one block
        on each die of its reclaim group, so each group has blocks_per_die of them."""
        o = self.femu()
        dies = o.get("nchs", 8) * o.get("luns_per_ch", 8)
        flash_mb = self.capacity_gib * 1024 * 100 // o.get("gc_thres_pcent", 75)
        blocks_per_die = flash_mb // dies // o.get("nand_block_size_mb", 4)
        groups = o.get("rg_number", 8)
        return {"dies": dies, "flash_mb": flash_mb, "blocks_per_die": blocks_per_die,
                "blocks": blocks_per_die * dies, "reclaim_groups": groups,
                "reclaim_units": blocks_per_die * groups,
                "reclaim_unit_mib": dies // groups * o.get("nand_block_size_mb", 4),
                "handles": o.get("handle_number", 4)}

    def reported_fdp_config(self) -> dict[str, int]:
        """The FDP configuration the device reports in its log page, as parse_configs
        reads it: QEMU reports the profile's; FEMU (hw/femu/fdp/fdp.c, fdp_confs) reports
        stream_number x rg_number handles, rg_number groups, and its total number of NAND
        blocks where the reclaim unit size belongs."""
        if self.emulator != "femu":
            return {"reclaim_unit_handles": self.reclaim_unit_handles,
                    "reclaim_groups": self.reclaim_groups,
                    "reclaim_unit_size_bytes": (self.reclaim_unit_size_mib or 0) << 20}
        o, g = self.femu(), self.femu_geometry()
        return {"reclaim_unit_handles": o.get("stream_number", 4) * g["reclaim_groups"],
                "reclaim_groups": g["reclaim_groups"],
                "reclaim_unit_size_bytes": g["blocks"]}

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Vm:
    """testbeds.vm as a cell uses it, with its device profile loaded."""
    device: DeviceProfile
    accel: str
    cpus: int
    memory_mb: int
    emulator_path: str | None
    namespace: str
    passthru_device: str
    controller: str
    endurance_group: int
    filesystem: str
    mountpoint: str
    guest_scratch_dir: str
    roofline: Roofline
    # testbeds.vm.tcg_cpu (its default is the schema's); a plan recorded before the key
    # existed ran under plain max, and reads back as such.
    tcg_cpu: str = "max"
    storage_pool: str = operational("default")
    boot_timeout_s: float = operational(900)
    boot_stall_s: float = operational(180)
    boot_attempts: int = operational(3)
    reuse_guest: bool = operational(False)
    work_dir: str | None = operational(None)

    @property
    def fdp(self) -> bool:
        return self.device.fdp

    @property
    def machine(self) -> dict:
        """What makes two cells' VMs the same machine, as far as the plan says
        (testbed/vm.py's guest_key adds the box): a guest kept from one cell serves the
        next only where these are equal."""
        return {"profile": self.device.as_dict(), "accel": self.accel,
                "tcg_cpu": self.tcg_cpu, "cpus": self.cpus, "memory_mb": self.memory_mb,
                "emulator_path": self.emulator_path, "storage_pool": self.storage_pool,
                "boot_timeout_s": self.boot_timeout_s}

    @property
    def keeps_guest(self) -> bool:
        """Whether a run's cells may keep this VM for the next one (run/guests.py): QEMU's
        device, whose namespace a reset makes blank; FEMU's FTL state nothing resets."""
        return self.reuse_guest and self.device.emulator == "qemu"


@dataclass(frozen=True)
class Motivation:
    """A motivation cell's scenarios (config's motivation section; :mod:`.motivation`): the
    workload's SETs fill the dataset, then an On-Demand-Snapshot is taken with no writes
    arriving (Snapshot only) and one while redis-benchmark sends ``wal_requests`` more SETs
    (Snapshot & WAL), each under perf (software clock at ``perf_frequency_hz``, call
    graphs); a SlimIO cell also snapshots into its discard sink (the ideal)."""
    wal_requests: int
    lead_s: float
    perf_frequency_hz: int


@dataclass(frozen=True)
class Disk:
    """What a cell writes to the disks of the host that runs it, as the plan estimates it
    (:mod:`slimio_repro.plan.space`, which says how); the cell checks that they can hold it
    before it writes anything (:mod:`slimio_repro.agent.diskspace`)."""
    # Its storage's backing file on the host: the NVMe namespace's sparse nvme.img in its VM
    # directory (vm, a QEMU profile: what the cell writes to the namespace, at most its
    # capacity; a FEMU profile keeps the device in RAM: 0), or the bare cell's image file in
    # its raw directory's .partial (at most the image's size); 0 on a named device.
    storage_bytes: int
    # Its raw directory (also the size of the tar it comes back from the guest in).
    raw_bytes: int
    # What the guest writes to its root disk, the qcow2 overlay of the box volume in the
    # libvirt pool (vm only; at most the root disk's size): the raw directory as it grows
    # there, with the NVMe trace's text before it is compressed.
    guest_bytes: int = 0


@dataclass(frozen=True)
class CellPlan:
    cell: Cell
    profile: str
    redis_version: str
    workload: RedisBenchmark | YcsbA
    server: Server
    recovery: Recovery
    sizing: Sizing
    slimio: Slimio | None
    bare: Bare | None
    vm: Vm | None
    # Where the cell finds its builds (the host's build directory; the box's in a guest).
    redis_bin_dir: str = operational("")
    ycsb_dir: str | None = operational(None)
    # What the cell needs built, relative to the build directory (Snakemake's inputs).
    needs: tuple[str, ...] = operational(())
    # A motivation cell's scenarios; None for a cell of the matrix (and then left out of
    # the plan's hash, so that the matrix's plans hash as they did before it existed).
    motivation: Motivation | None = field(default=None, metadata={"omit_none": True})
    # What it writes to the host's disks (an estimate; None in a plan made before it existed).
    disk: Disk | None = operational(None)

    @property
    def id(self) -> str:
        if self.motivation is not None:
            return MOTIVATION_ID_PATTERN.format(**self.cell.wildcards())
        return self.cell.id

    @property
    def is_slimio(self) -> bool:
        return is_slimio(self.cell.system)

    @property
    def persists(self) -> bool:
        return persists(self.cell.system)

    @property
    def appendfsync(self) -> str:
        return self.sizing.appendfsync

    def to_dict(self) -> dict:
        return asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2) + "\n"

    @classmethod
    def from_dict(cls, data: dict) -> "CellPlan":
        return _load(cls, data)

    @classmethod
    def from_json(cls, text: str) -> "CellPlan":
        return cls.from_dict(json.loads(text))

    def stale_fields(self) -> dict:
        """The fields that decide whether a finished cell is stale (all but operational)."""
        return _stale_view(self)

    def sha256(self) -> str:
        text = json.dumps(self.stale_fields(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()


def _stale_view(obj):
    if dataclasses.is_dataclass(obj):
        return {f.name: _stale_view(getattr(obj, f.name)) for f in dataclasses.fields(obj)
                if f.metadata.get("stale", True)
                and not (f.metadata.get("omit_none") and getattr(obj, f.name) is None)}
    if isinstance(obj, (list, tuple)):
        return [_stale_view(v) for v in obj]
    return obj


def _fits(cls, value: dict) -> bool:
    """``value`` has every field of dataclass ``cls`` that has no default, and no other key
    (a plan written before a field with a default existed still loads)."""
    fields = dataclasses.fields(cls)
    required = {f.name for f in fields if f.default is dataclasses.MISSING
                and f.default_factory is dataclasses.MISSING}
    return required <= set(value) <= {f.name for f in fields}


def _load(tp, value):
    """Rebuild a value of type ``tp`` (a dataclass, union, tuple or scalar) from JSON data."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        options = typing.get_args(tp)
        if value is None and type(None) in options:
            return None
        for option in options:
            if dataclasses.is_dataclass(option) and isinstance(value, dict) and \
                    _fits(option, value):
                return _load(option, value)
        for option in options:
            if option is not type(None) and not dataclasses.is_dataclass(option):
                return _load(option, value)
        raise ValueError(f"cell plan: {value!r} matches none of {tp}")
    if origin is tuple:
        (item, _ellipsis) = typing.get_args(tp)
        return tuple(_load(item, v) for v in value)
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise ValueError(f"cell plan: {tp.__name__} needs an object, got {value!r}")
        hints = typing.get_type_hints(tp)
        names = {f.name for f in dataclasses.fields(tp)}
        unknown = set(value) - names
        if unknown:
            raise ValueError(f"cell plan: {tp.__name__} has no field(s) {sorted(unknown)}")
        return tp(**{k: _load(hints[k], v) for k, v in value.items()})
    if tp is float and isinstance(value, int):
        return float(value)
    return value
