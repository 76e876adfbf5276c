"""Where a cell's time goes: named phases, timed in the order they ran.

A cell is a short list of stages (the testbed's restore or boot, provisioning, the server's
start, the workload, the snapshots, recovery, trace and FDP log collection, the roofline,
teardown). :class:`Phases` times each one with the monotonic clock and keeps them in order;
the cell's provenance records the result (``phases_s``) and the aggregate stage summarises
it per system and workload (``results/tables/timing.{csv,md}``), so that a run that got
slower shows in which phase.

A phase that runs more than once in a cell (the trace and FDP logs are read at its start and
at its end) adds up.
"""

from __future__ import annotations

import time
from contextlib import contextmanager

# Every phase a cell can record, in the order a cell runs them. The host side of a vm cell
# adds its own (boot, guest_overhead, copy_back, teardown) around the guest's; a bare cell has
# only the guest's. A vm cell in a guest kept from the last cell records the guest's reset as
# its boot (its provenance's vm.guest says which). The timing table keeps this order.
ORDER = ("boot", "provision", "device_prepare", "server_start", "load", "workload",
         "snapshots", "shutdown", "recovery", "trace_fdp", "roofline", "guest_overhead",
         "copy_back", "teardown")


class Phases:
    """Durations of named phases (seconds, monotonic clock), in the order they first ran."""

    def __init__(self):
        self._s: dict[str, float] = {}

    @contextmanager
    def phase(self, name: str):
        if name not in ORDER:
            raise ValueError(f"unknown phase {name!r}; the phases are {', '.join(ORDER)}")
        t0 = time.monotonic()
        try:
            yield
        finally:
            self.add(name, time.monotonic() - t0)

    def add(self, name: str, seconds: float) -> None:
        if name not in ORDER:
            raise ValueError(f"unknown phase {name!r}; the phases are {', '.join(ORDER)}")
        self._s[name] = self._s.get(name, 0.0) + seconds

    def total(self) -> float:
        return sum(self._s.values())

    def as_dict(self) -> dict[str, float]:
        """The phases in :data:`ORDER`, rounded to milliseconds."""
        return {k: round(self._s[k], 3) for k in ORDER if k in self._s}
