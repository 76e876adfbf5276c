"""Stage ``ftl`` (workflows/rules/ftl.smk): a trace-driven model of the SSD's flash
translation layer, so that write amplification means something on testbeds whose device
collects no garbage (QEMU's NVMe emulation).

``slimio-repro ftl`` replays a cell's NVMe command trace, or the repetitions of a system in
order on one un-reformatted device, through a page-mapped FTL with a reclaim unit per
placement handle (:mod:`.model`: the paper's FEMU FDP FTL, or plain greedy), and reports
WAF = (host + GC-copied pages) / host pages with its erases and copies per handle. The
engine (:mod:`.engine`) is compiled with Numba; :mod:`.theory` has the analytic values it
is tested against, and :func:`check_device` the QEMU bookkeeping a real cell's FDP log pages
are checked against.
"""

from . import gccheck
from .model import (FEMU_COMMIT, FEMU_OP, MODELS, Counters, Device, Geometry, ModelError,
                    paper_geometry, policy)
from .replay import CellDevice, check_device, render, replay_cells, replay_sequence, sweep
from .trace import Ops, TraceError, deallocation_coverage, read

__all__ = ["FEMU_COMMIT", "gccheck", "FEMU_OP", "MODELS", "CellDevice", "Counters", "Device", "Geometry",
           "ModelError", "Ops", "TraceError", "check_device", "deallocation_coverage",
           "paper_geometry", "policy", "read", "render", "replay_cells", "replay_sequence",
           "sweep"]
