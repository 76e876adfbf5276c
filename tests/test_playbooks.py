"""The Ansible playbooks: syntax and ansible-lint are clean, and the setup is idempotent."""

import json
import os
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from conftest import require_root
from slimio_repro import paths

BIN = Path(sys.executable).parent
CALLBACKS = Path(__file__).parent / "ansible_callbacks"
# Every role of playbooks/setup-host.yml; with make test's options each runs a task.
ROLES = {"host_apt_sources", "host_packages", "host_image_tools", "host_qemu", "host_libvirt",
         "host_vagrant", "host_accel", "host_femu", "host_slurm"}


def run(*cmd: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=paths.REPO_ROOT, capture_output=True, text=True, **kwargs)


def make_test_setup_args() -> list[str]:
    """The playbook's options in `make test` (the Makefile's `test: SETUP_ARGS += ...`)."""
    makefile = (paths.REPO_ROOT / "Makefile").read_text()
    found = re.search(r"^test: SETUP_ARGS \+= (.+)$", makefile, re.MULTILINE)
    assert found, "the Makefile's test target sets no SETUP_ARGS"
    return found.group(1).split()


def test_playbook_syntax():
    proc = run(str(BIN / "ansible-playbook"), "--syntax-check", "playbooks/setup-host.yml")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_ansible_lint_is_clean():
    proc = run(str(BIN / "ansible-lint"), "--offline", "playbooks/")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_archive_uri_probe_reads_this_machines_sources():
    probe = paths.REPO_ROOT / "playbooks/roles/host_apt_sources/files/debian_archive_uri.py"
    proc = run("/usr/bin/python3", str(probe), "bookworm")
    assert proc.returncode == 0, proc.stderr
    assert '"uri": "http' in proc.stdout


@pytest.mark.slow
@pytest.mark.e2e
def test_a_second_setup_run_changes_nothing(tmp_path):
    """`make test` has run the setup playbook with its options before pytest: run with the same
    options again, no task of any role reports a change (SLURM and FEMU roles included), and
    every role ran at least one task. A task that reports a change every time hides the run
    that really changed something, and restarts what it need not (the SLURM daemons, the VMs'
    network). Run alone, it needs `make setup-host SETUP_ARGS='<make test's options>'` first."""
    require_root()
    results = tmp_path / "tasks.jsonl"
    env = {**os.environ, "ANSIBLE_CALLBACK_PLUGINS": str(CALLBACKS),
           "ANSIBLE_CALLBACKS_ENABLED": "task_results", "SLIMIO_TASK_RESULTS": str(results),
           "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    proc = run(str(BIN / "ansible-playbook"), "playbooks/setup-host.yml",
               *make_test_setup_args(), env=env)
    assert proc.returncode == 0, proc.stdout[-5000:] + proc.stderr[-3000:]
    records = [json.loads(line) for line in results.read_text().splitlines()]
    ran = {r["role"] for r in records if r["status"] != "skipped"}
    assert ROLES <= ran, f"roles that ran no task: {sorted(ROLES - ran)}"
    changed = defaultdict(list)
    for r in records:
        if r["changed"]:
            what = ("handler " if r["handler"] else "") + r["task"]
            if r["changed_items"]:
                what += f" (items {', '.join(r['changed_items'])})"
            changed[r["role"] or "(play)"].append(what)
    summary = "\n".join(f"{role}:\n  " + "\n  ".join(tasks) for role, tasks in changed.items())
    assert not changed, "a second run of the setup playbook changed:\n" + summary
