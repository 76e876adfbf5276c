"""Names the guest owns: the files of a raw cell directory, and the box's paths.

The code in this sub-package runs where a cell runs (inside the cell's VM, or on the bare
host), writes a cell's raw directory and is the only thing that knows its file names; the
parse stage and the vm testbed read them from here.
"""

from __future__ import annotations

from pathlib import Path

# The repository as the code that runs sees it: the checkout on the host, the copy the vm
# testbed puts into the guest (testbed.vm.GUEST_REPO_FILES).
REPO_ROOT = Path(__file__).resolve().parents[3]
REDIS_CONF_TEMPLATE = REPO_ROOT / "redis-baseline" / "redis.conf.template"
# Built by `make -C redis-slimio admin` next to redis-server, never copied into the Redis tree.
SLIMIO_ADMIN = "slimio-admin"
# fio for the device roofline, baked into the box here (testbed/box/build_box.sh).
GUEST_FIO = "/opt/slimio-repro/fio/bin/fio"
# Baked into the box by testbed/box/build_box.sh: only the pipeline's guests have it.
BOX_MARKER = Path("/opt/slimio-repro/python")
# The hash of the box's inputs (testbed.box.inputs_sha256), written by build_box.sh: a cell
# checks it against the box the host booted before it runs.
BOX_ID_FILE = Path("/opt/slimio-repro/box-id")

# Files inside one cell's raw directory.
# The cell's own plan (plan.cellplan.CellPlan as JSON): every number it runs with.
RAW_PLAN = "plan.json"
RAW_PROVENANCE = "provenance.json"
# Cells made before the plan existed hold the validated config and its derived numbers here.
RAW_CONFIG = "effective-config.json"
RAW_COMMANDS = "commands.json"
RAW_REDIS_CONF = "redis.conf"
RAW_REDIS_LOG = "redis.log"
RAW_RECOVERY_LOG = "redis-recovery.log"
RAW_SAMPLER = "sampler.csv"
RAW_BENCHMARK = "benchmark.stdout.tsv"
RAW_BENCHMARK_ERR = "benchmark.stderr.txt"
# Workload ycsb-a: per phase (load, run) YCSB's summary (stdout), its status lines with the
# wall-clock time they arrived (stderr, "<unix time>\t<line>"), and one HdrHistogram log per
# operation (YCSB's hdrhistogram.fileoutput: "<phase>-<OPERATION>.hdr").
RAW_YCSB_STDOUT = "ycsb-{phase}.stdout.txt"
RAW_YCSB_STATUS = "ycsb-{phase}.stderr.tsv"
RAW_YCSB_HDR_PREFIX = "ycsb-{phase}-"
RAW_EVENTS = "events.json"
RAW_INFO_END = "info-after-workload.json"
RAW_INFO_RECOVERY = "info-after-recovery.json"
RAW_DEVICE_STATS = "device-stats.json"
RAW_RECOVERY = "recovery.json"
RAW_COMPLETE = "CELL_COMPLETE"
# The device roofline (vm testbed): fio's own JSON output and the summary of roofline.run.
RAW_FIO_ROOFLINE = "fio-roofline.json"
RAW_ROOFLINE = "roofline.json"
# System slimio only: the admin tool's output and the server's INFO slimio section (raw).
RAW_SLIMIO_DEVICE = "slimio-device.json"
RAW_SLIMIO_FORMAT_OUT = "slimio-format.stdout.txt"
RAW_SLIMIO_FORMAT_ERR = "slimio-format.stderr.txt"
RAW_SLIMIO_INSPECT_BEFORE = "slimio-inspect-before.json"
RAW_SLIMIO_INSPECT_AFTER = "slimio-inspect-after.json"
RAW_SLIMIO_INFO_END = "info-slimio-after-workload.txt"
RAW_SLIMIO_INFO_RECOVERY = "info-slimio-after-recovery.txt"

# System slimio on the bare testbed: the SlimIO device is this file in the cell's image.
SLIMIO_DEVICE_FILE = "slimio.dev"

# vm testbed: the FDP statistics and NVMe command trace of the cell (:mod:`.vmstorage`).
RAW_FDP_STATS_BEFORE = "fdp-stats-before.json"
RAW_FDP_STATS_AFTER = "fdp-stats-after.json"
RAW_FDP_CONFIGS = "fdp-configs.json"
RAW_FDP_STATUS = "fdp-status.json"
# The reclaim unit handle status when the trace stops (the FTL model checks its RU usage).
RAW_FDP_STATUS_AFTER = "fdp-status-after.json"
RAW_NVME_ID_NS = "nvme-id-ns.json"
# What provisioning found and changed in the guest (:mod:`.provision`).
RAW_PROVISION = "provision.json"
RAW_TRACE = "nvme-trace.txt.gz"
RAW_TRACE_STATS = "nvme-trace-stats.json"
# vm testbed, written by the host: the emulator's own output during the cell (the libvirt
# domain log's part since its boot; FEMU prints a line per GC round there).
RAW_EMULATOR_LOG = "vm/emulator.log"
