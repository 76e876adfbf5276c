"""The code that runs where a cell runs: inside the cell's VM (vm testbed), or on this host
(bare testbed). It runs one cell from its plan and writes the cell's raw directory.

Import rule: the standard library, redis-py (baked into the box: testbed/box/
requirements-guest.txt) and this sub-package only, because the guest has nothing else;
tests/test_architecture.py checks it, and imports the package with the host-only packages
absent. The other stages use what ``__all__`` names.
"""

from . import (bench, benchmark, fdp, femulog, fsimage, inmemory, layout, motivation,
               nameddevice, overwrite, phases, provenance, redislog, roofline, server, slimio, vmstorage,
               ycsb)
from .cell import CellError, fingerprint, run as run_cell, sampled_keys
from .cellplan import (BASELINE_EXT4, CELL_ID_PATTERN, CELL_SET_PATTERN, MOTIVATION_ID_PATTERN, NO_POLICY, NOPERSIST, POLICY_APPENDFSYNC,
                       POLICY_LABEL, SLIMIO_SYSTEMS, SYSTEMS, WORKLOADS, Bare, Cell, CellPlan,
                       DeviceProfile, Motivation, NamedDevice, Placement, RedisBenchmark, Recovery, Roofline, Server,
                       Sizing, Slimio, Vm, YcsbA, build_system, is_slimio, on_file_system,
                       persists, policies_of, SYSTEM_FILESYSTEM)
from .vmstorage import GuestError

__all__ = [
    # modules other stages may use
    "bench", "benchmark", "fdp", "femulog", "fsimage", "inmemory", "layout", "motivation", "nameddevice", "overwrite", "phases", "provenance", "redislog", "roofline",
    "server", "slimio", "vmstorage", "ycsb",
    # running a cell
    "run_cell", "CellError", "GuestError", "fingerprint", "sampled_keys",
    # the cell plan
    "BASELINE_EXT4", "CELL_ID_PATTERN", "CELL_SET_PATTERN", "MOTIVATION_ID_PATTERN", "NO_POLICY", "NOPERSIST", "POLICY_APPENDFSYNC", "POLICY_LABEL", "SLIMIO_SYSTEMS", "SYSTEMS",
    "WORKLOADS", "Bare", "Cell", "CellPlan", "DeviceProfile", "Motivation", "NamedDevice", "Placement", "RedisBenchmark",
    "Recovery", "Roofline", "Server", "Sizing", "Slimio", "Vm", "YcsbA", "build_system",
    "is_slimio", "on_file_system", "persists", "policies_of", "SYSTEM_FILESYSTEM",
]
