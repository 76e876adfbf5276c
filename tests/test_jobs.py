"""What a cell's job asks of a cluster node (plan/jobs.py), against real cells: the captured
cells' peak memory and duration fit what their plans ask for."""

import json
import math
from datetime import datetime

import pandas as pd
import pytest

from conftest import CELL_FIXTURES, plan_of
from slimio_repro import paths
from slimio_repro import plan as planmod
from slimio_repro.plan import ConfigError, Host
from slimio_repro.agent import layout
from slimio_repro.plan import CellPlan
from slimio_repro.plan import jobs

MIB = 1 << 20
CAPTURED = sorted(p for p in CELL_FIXTURES.iterdir() if (p / layout.RAW_PLAN).is_file())


@pytest.mark.parametrize("raw", CAPTURED, ids=lambda p: p.name)
def test_a_real_cells_memory_and_time_fit_what_its_plan_asks_for(raw):
    plan = CellPlan.from_json((raw / layout.RAW_PLAN).read_text())
    need = jobs.cell_resources(plan)
    prov = json.loads((raw / layout.RAW_PROVENANCE).read_text())
    took = (datetime.fromisoformat(prov["utc_end"])
            - datetime.fromisoformat(prov["utc_start"])).total_seconds()
    assert 0 < took < need["runtime"] * 60
    samples = pd.read_csv(raw / layout.RAW_SAMPLER)
    peak = (samples["server_rss_bytes"] + samples["child_rss_bytes"].fillna(0)).max()
    if plan.cell.testbed == "vm":
        # In the guest: its RAM is the VM's, which the job holds whole.
        assert need["mem_mb"] > plan.vm.memory_mb and peak / MIB < plan.vm.memory_mb
        assert need["constraint"] == jobs.VM_NODE_FEATURE
    else:
        assert peak / MIB < need["mem_mb"] - jobs.HOST_SIDE_MB, (peak / MIB, need)
        assert need["constraint"] == ""
    assert need["slurm_extra"] == "--exclusive"


def test_the_time_limit_covers_every_timeout_a_cell_can_wait_out():
    plan = plan_of({"matrix": {"testbeds": ["vm", "bare"],
                               "systems": ["baseline", "slimio", "nopersist"]}})
    for cell in plan.cells:
        limit = jobs.cell_resources(cell)["runtime"] * 60
        waits = (cell.workload.timeout_s * (2 if cell.cell.workload == "ycsb-a" else 1)
                 + 2 * cell.server.start_timeout_s + cell.server.snapshot_timeout_s
                 + (cell.vm.boot_timeout_s if cell.vm else 0))
        assert limit >= waits, cell.id
    # The paper's scale: a day-long workload timeout gives a limit beyond a day.
    # Planned against the cluster's largest node with libvirt (a KVM one), as on a cluster.
    node = Host.of_cluster("libvirt", "small|16|64000|libvirt\nbig|64|512000+|libvirt,kvm\n"
                                      "gpu|128|1024000|gpu\n")
    assert (node.cpus, node.memory_mb, node.accel_verdict) == (64, 512000, "kvm")
    paper = planmod.make(planmod.load([paths.CONFIG_DIR / "config.yaml",
                                       paths.CONFIG_DIR / "profiles" / "paper.yaml"]), node,
                         check_sources=False)
    cell = paper.cells[0]
    assert jobs.cell_resources(cell)["runtime"] > 24 * 60
    assert jobs.cell_resources(cell)["mem_mb"] >= cell.vm.memory_mb + jobs.HOST_SIDE_MB
    assert math.isclose(jobs.cell_resources(cell)["runtime"],
                        math.ceil(jobs.cell_time_limit_s(cell) / 60))


def test_a_cluster_without_nodes_for_vm_cells_is_named_at_planning():
    with pytest.raises(ConfigError, match="no node of this SLURM cluster has the feature "
                                          "'libvirt'"):
        Host.of_cluster("libvirt", "n1|8|16000|gpu\nn2|8|16000|(null)\n")
