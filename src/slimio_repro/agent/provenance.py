"""What a run was made of: host, tools, sources, git state. Recorded in every cell."""

from __future__ import annotations

import importlib.metadata
import os
import platform
import shutil
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

from . import layout

REQUIREMENTS = layout.REPO_ROOT / "requirements.txt"


def pinned_python_packages() -> list[str]:
    """Package names pinned in requirements.txt (the one list of them)."""
    return [line.split("==")[0].strip() for line in REQUIREMENTS.read_text().splitlines()
            if "==" in line and not line.lstrip().startswith("#")]


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def first_line(cmd: list[str]) -> str:
    """The first line ``cmd`` prints (stdout, else stderr: `java -version`), or why not."""
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unavailable ({exc})"
    text = (proc.stdout or proc.stderr).strip()
    return text.splitlines()[0] if text else "unknown"


def java() -> str:
    """The Java runtime's version, as `java -version`'s first line names it
    (``openjdk version "17.0.15" 2025-04-15``), read from the runtime's ``release`` file: a
    JVM's start costs about 1.4 s under TCG, in every YCSB cell. `java -version` itself
    where the runtime has no such file or is not an OpenJDK build."""
    exe = shutil.which("java")
    if exe is None:
        return "unavailable (no java on PATH)"
    release = Path(os.path.realpath(exe)).parent.parent / "release"
    try:
        fields = dict(line.split("=", 1) for line in release.read_text().splitlines()
                      if "=" in line)
    except OSError:
        return first_line(["java", "-version"])
    version = fields.get("JAVA_VERSION", "").strip('"')
    if not version or "openjdk" not in str(release):
        # Another vendor's runtime names itself its own way: ask it.
        return first_line(["java", "-version"])
    date = fields.get("JAVA_VERSION_DATE", "").strip('"')
    return f'openjdk version "{version}" {date}'.rstrip()


def host() -> dict:
    cpu = "unknown"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    mem_kib = next(int(l.split()[1]) for l in Path("/proc/meminfo").read_text().splitlines()
                   if l.startswith("MemTotal:"))
    os_release = dict(
        line.split("=", 1) for line in Path("/etc/os-release").read_text().splitlines()
        if "=" in line)
    return {
        "hostname": platform.node(),
        "cpu_model": cpu,
        "cpus_online": os.cpu_count(),
        "mem_total_bytes": mem_kib * 1024,
        "kernel": platform.release(),
        "uname": " ".join(platform.uname()),
        "os": os_release.get("PRETTY_NAME", "unknown").strip('"'),
    }


# What SLURM tells a job about where it runs (srun sets them in a job step's environment).
SLURM_VARIABLES = {"job_id": "SLURM_JOB_ID", "step_id": "SLURM_STEP_ID",
                   "cluster": "SLURM_CLUSTER_NAME", "partition": "SLURM_JOB_PARTITION",
                   "node": "SLURMD_NODENAME", "cpus_on_node": "SLURM_CPUS_ON_NODE",
                   "submit_host": "SLURM_SUBMIT_HOST"}


def node_class(host_record: dict) -> str:
    """What must be alike on two nodes for their cells' numbers to be compared: the CPU
    model and count, the memory (GiB), the kernel. Two nodes of one class give the same
    string."""
    return (f"{host_record['cpu_model']}, {host_record['cpus_online']} CPUs, "
            f"{host_record['mem_total_bytes'] / (1 << 30):.0f} GiB, "
            f"kernel {host_record['kernel']}")


def node() -> dict:
    """The machine a cell ran on: its name and class (:func:`node_class`), and the SLURM job
    it ran as (None when it ran outside SLURM)."""
    here = host()
    slurm = {key: os.environ[var] for key, var in SLURM_VARIABLES.items() if var in os.environ}
    return {"name": here["hostname"], "class": node_class(here),
            "slurm": slurm if "job_id" in slurm else None}


def git() -> dict:
    def run(*args: str) -> str:
        try:
            proc = subprocess.run(["git", "-C", str(layout.REPO_ROOT), *args],
                                  capture_output=True, text=True)
        except OSError:
            return ""
        return proc.stdout.strip() if proc.returncode == 0 else ""
    commit = run("rev-parse", "HEAD")
    return {"commit": commit or "unknown (not a git checkout)",
            "dirty": bool(run("status", "--porcelain", "--untracked-files=no")),
            "describe": run("describe", "--always", "--dirty")}


def vm_tools() -> dict:
    """Versions of the vm testbed's host tools."""
    return {
        "qemu": first_line(["qemu-system-x86_64", "--version"]),
        "libvirtd": first_line(["libvirtd", "--version"]),
        "virsh": first_line(["virsh", "--version"]),
        "vagrant": first_line(["vagrant", "--version"]),
        "vagrant-libvirt": first_line(["dpkg-query", "-W", "-f", "${Version}",
                                        "vagrant-libvirt"]),
    }


def tools(bin_dir: Path) -> dict:
    versions = {
        "redis-server": first_line([str(bin_dir / "redis-server"), "--version"]),
        "redis-benchmark": first_line([str(bin_dir / "redis-benchmark"), "--version"]),
        "mkfs.ext4": first_line(["mkfs.ext4", "-V"]),
        "mkfs.f2fs": first_line(["mkfs.f2fs", "-V"]),
        "nvme-cli": first_line(["nvme", "version"]),
        "losetup": first_line(["losetup", "--version"]),
        "kernel": platform.release(),
        "python": sys.version.split()[0],
    }
    for pkg in pinned_python_packages():
        try:
            versions[f"python:{pkg}"] = importlib.metadata.version(pkg)
        except importlib.metadata.PackageNotFoundError:
            versions[f"python:{pkg}"] = "not installed"
    return versions
