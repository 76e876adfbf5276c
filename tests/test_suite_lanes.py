"""The slow tier's two lanes (tests/conftest.py): the tests that boot VMs in one, the rest in
the other, what shares state in one lane, one test at a time in collection order; then the
tests marked alone."""

import re
from pathlib import Path

from conftest import ALONE_MODULES, SLOW_MODULES, VM_LANE_MODULES, lane

TESTS = Path(__file__).parent
# A module that runs cells of the vm testbed (or a VM of its own) names them so.
RUNS_VMS = re.compile(r'testbeds: \[vm\]|"vm-[a-z]|--testbed vm')


def test_every_slow_module_that_runs_vms_is_in_the_vm_lane_or_alone():
    runs_vms = {p.stem for p in TESTS.glob("test_*.py")
                if p.stem in SLOW_MODULES and RUNS_VMS.search(p.read_text())}
    assert runs_vms == VM_LANE_MODULES | (runs_vms & ALONE_MODULES)
    assert not VM_LANE_MODULES & ALONE_MODULES
    assert {lane(f"tests/{m}.py::test_x") for m in VM_LANE_MODULES} == {"vm"}
    assert {lane(f"tests/{m}.py::test_x")
            for m in SLOW_MODULES - VM_LANE_MODULES - ALONE_MODULES} == {"host"}


def test_tests_that_share_state_share_a_lane_in_the_order_they_need():
    # tiny_bare_run (session-scoped): test_e2e checks it, test_slurm runs it again through
    # SLURM and compares.
    assert lane("tests/test_e2e.py::test_x") == lane("tests/test_slurm.py::test_x")
    # The one-node cluster: the set-up's second run (test_playbooks, collected before
    # test_slurm) must find its daemons as the set-up left them; test_slurm stops them.
    assert lane("tests/test_playbooks.py::test_x") == lane("tests/test_slurm.py::test_x")
