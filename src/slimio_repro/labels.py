"""The one table of display labels: how tables, figures, claims and the report name each
system, logging policy and data kind. The keys are the identifiers of the plan
(:mod:`slimio_repro.plan.cellplan`; tests/test_architecture.py checks they match).

Standard library only and importing nothing of the package, so that every stage (the
claims, which import no other stage, and the code in the guest included) may use it. The
order of ``SYSTEM_LABEL`` is the order of the rows in every table: the baseline first, then
the systems compared with it, the no-persistence bound, then the motivation's EXT4 baseline.
"""

SYSTEM_LABEL = {
    "baseline": "Baseline",
    "slimio": "SlimIO",
    "slimio-nofdp": "SlimIO w/o FDP",
    "nopersist": "No persistence (bound)",
    "baseline-ext4": "Baseline (EXT4)",
}
POLICY_LABEL = {
    "periodical": "Periodical-Log",
    "always": "Always-Log",
    "none": "No persistence",
}
WORKLOAD_LABEL = {
    "redis-benchmark": "redis-benchmark",
    "ycsb-a": "YCSB-A",
}
# The data kinds SlimIO places (its snapshot kinds as the paper names them).
KIND_LABEL = {
    "wal": "WAL",
    "wal_snapshot": "WAL-Snapshot",
    "on_demand_snapshot": "On-Demand-Snapshot",
}
