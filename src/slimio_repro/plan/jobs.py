"""What a cell's job asks of a cluster node: Snakemake resources that the SLURM executor
(workflows/profiles/slurm) turns into sbatch options. Run locally, Snakemake ignores all but
threads.

A cell holds its node alone (``--exclusive``, with the node's CPUs as its threads): two
cells never share a node's cores, and nothing else runs beside the cell it measures. Its
memory is what the cell needs, its time limit the longest its own timeouts let it run (SLURM
never stops a cell that would still have finished), and a vm cell asks for a node with the
feature ``VM_NODE_FEATURE`` (the setup playbook's one-node cluster gives every node it
prepares ``libvirt``, and ``kvm`` where a KVM guest boots)."""

from __future__ import annotations

import math

from .cellplan import CellPlan
from .checks import FORK_FACTOR, HOST_RESERVE_MB

MIB = 1 << 20
# The SLURM feature (sbatch --constraint) of nodes that can run a vm cell; a site whose
# feature has another name overrides the resource in its profile (set-resources).
VM_NODE_FEATURE = "libvirt"
# What runs beside the server or the VM on the node: the cell's Python and Snakemake and the
# redis-benchmark client; beside a VM, QEMU and libvirt too (the plan's own reserve beside a
# VM, plan/checks.py).
HOST_SIDE_MB = HOST_RESERVE_MB
# A bare cell's server: Redis holds a key at about this multiple of its RDB bytes (dict
# entries, object headers, allocator slack), plus its own base (the binary, client and AOF
# buffers); a snapshot's copy-on-write child can double the dataset (FORK_FACTOR).
REDIS_MEMORY_PER_RDB_BYTE = 1.5
REDIS_BASE_MB = 64
# A YCSB client's JVM without a configured heap (its default is a quarter of the node).
YCSB_JVM_DEFAULT_MB = 512
# Added to the sum of a cell's timeouts: the VM's teardown, provisioning, the records.
TIME_MARGIN_S = 600


def cell_mem_mb(plan: CellPlan) -> int:
    """Memory the cell's job needs on its node, in MiB."""
    if plan.cell.testbed == "vm":
        return plan.vm.memory_mb + HOST_SIDE_MB
    server = plan.sizing.expected_dataset_bytes * REDIS_MEMORY_PER_RDB_BYTE * FORK_FACTOR
    jvm_mb = 0
    if plan.cell.workload == "ycsb-a":
        jvm_mb = plan.workload.jvm_heap_mb or YCSB_JVM_DEFAULT_MB
    return HOST_SIDE_MB + REDIS_BASE_MB + jvm_mb + math.ceil(server / MIB)


def cell_time_limit_s(plan: CellPlan) -> float:
    """The longest the cell's own timeouts let it run, in seconds: the VM's boot, the
    server's start and its restart for recovery, the workload (YCSB's load and run phases
    each have the workload's timeout), and the snapshots it waits for (the WAL-Snapshot in
    flight, the On-Demand-Snapshot, SlimIO's bound; a motivation cell's three scenarios)."""
    boot = plan.vm.boot_timeout_s if plan.vm is not None else 0
    phases = 2 if plan.cell.workload == "ycsb-a" else 1
    workload = plan.workload.timeout_s * (phases + (plan.motivation is not None))
    snapshots = 3 * plan.server.snapshot_timeout_s
    return boot + 2 * plan.server.start_timeout_s + workload + snapshots + TIME_MARGIN_S


def cell_resources(plan: CellPlan) -> dict:
    """The cell's Snakemake resources: ``mem_mb``, ``runtime`` (minutes), ``constraint`` (the
    node feature a vm cell needs; empty for a bare cell, which any node the setup playbook
    prepared can run) and ``slurm_extra`` (the node held alone)."""
    return {
        "mem_mb": cell_mem_mb(plan),
        "runtime": math.ceil(cell_time_limit_s(plan) / 60),
        "constraint": VM_NODE_FEATURE if plan.cell.testbed == "vm" else "",
        "slurm_extra": "--exclusive",
    }
