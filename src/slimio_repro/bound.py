"""The bound no logging policy can beat: the same workload on the same testbed with
persistence off (system ``nopersist``). Each RPS metric has a ceiling, the bound's metric it
is held against; the bound takes no snapshot during its workload, so its WAL-only rate bounds
the WAL&Snapshot phase too. The ratio tables (:mod:`slimio_repro.aggregate`) and the claims'
ceilings (:mod:`slimio_repro.claims`) both read it from here.

Standard library only and importing nothing of the package (the claims import no other stage).
"""

BOUND_SYSTEM = "nopersist"
# metric -> the bound's metric it is held against
BOUND_METRIC = {"rps_wal_only": "rps_wal_only", "rps_wal_snapshot": "rps_wal_only",
                "rps_avg": "rps_avg"}
