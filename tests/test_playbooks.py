"""The Ansible playbooks: syntax and ansible-lint are clean."""

import subprocess
import sys
from pathlib import Path

from slimio_repro import paths

BIN = Path(sys.executable).parent


def run(*cmd: str) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=paths.REPO_ROOT, capture_output=True, text=True)


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
