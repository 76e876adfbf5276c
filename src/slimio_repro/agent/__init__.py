"""The code that runs where a cell runs: inside the cell's VM (vm testbed), or on this host
(bare testbed). It runs one cell from its plan (:mod:`slimio_repro.plan.cellplan`) and writes
the cell's raw directory.

Import rule: the standard library, redis-py (baked into the box: testbed/box/
requirements-guest.txt), this sub-package and the plan's standard-library modules
(``plan.cellplan``, ``labels``) only, because the guest has nothing else;
tests/test_architecture.py checks it, and imports the package with the host-only packages
absent. The other stages use what ``__all__`` names.
"""

from . import (bench_runs, benchmark, cell_runner, diskspace, fdp, femulog, fsimage, inmemory,
               layout, motivation_cells, nameddevice, overwrite, phases, provenance, redislog,
               roofline, server, slimio, vmstorage, ycsb_client)
from .cell_runner import CellError, fingerprint, run as run_cell, sampled_keys
from .vmstorage import GuestError

__all__ = [
    # modules other stages may use
    "bench_runs", "benchmark", "cell_runner", "diskspace", "fdp", "femulog", "fsimage",
    "inmemory", "layout", "motivation_cells", "nameddevice", "overwrite", "phases",
    "provenance", "redislog", "roofline", "server", "slimio", "vmstorage", "ycsb_client",
    # running a cell
    "run_cell", "CellError", "GuestError", "fingerprint", "sampled_keys",
]
