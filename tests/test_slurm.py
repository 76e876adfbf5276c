"""End-to-end on a real SLURM: the one-node cluster of the setup playbook (playbooks/roles/
host_slurm, `-e host_slurm_enabled=true`; `make test` enables it) runs the bare matrix at
tiny scale through the pipeline's SLURM profile (workflows/profiles/slurm), with accounting
(slurmdbd on MariaDB): sacct shows every job the run submitted.

The cluster is started here (idempotent), and its daemons are stopped at the end by the
process ids in their pid files, which must then be gone."""

from __future__ import annotations

import ipaddress
import json
import os
import re
import shutil
import subprocess
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import NamedTuple

import pandas as pd
import pytest

from conftest import REPO, VENV_BIN, require_root, snakemake
from slimio_repro.agent import layout
from slimio_repro.plan import Cell

pytestmark = pytest.mark.e2e

CONTROL = Path("/usr/local/sbin/slimio-slurm")
SLURM_CONF = Path("/etc/slurm/slurm.conf")
PROFILE = REPO / "workflows" / "profiles" / "slurm"
# The matrix of tests/test_e2e.py's side-by-side run without its bound: two systems, both
# workloads, both policies, one repetition (8 cells of 5-20 s here).
MATRIX = ["matrix={testbeds: [bare], repetitions: 1, systems: [baseline, slimio]}",
          "server={sampler_interval_s: 0.25}",
          "workloads={redis-benchmark: {requests: 300000, keyspace: 57000}, "
          "ycsb-a: {records: 20000, operations: 100000}}"]
# This cluster's node runs a job within seconds: ask sooner than the profile's 40 s.
FAST_STATUS = ["--slurm-init-seconds-before-status-checks", "5"]
CANCELLED_CELL = "bare-baseline-redis-benchmark-periodical-r1"
# The daemons' process names, by the names slimio-slurm gives them.
DAEMON_COMM = {"munged": "munged", "mariadb": "mariadbd", "slurmdbd": "slurmdbd",
               "slurmctld": "slurmctld", "slurmd": "slurmd"}


def comment(rule: str, cell_id: str) -> str:
    """The executor's comment on a cell's job (sacct and squeue show it): the rule, then the
    wildcards' values."""
    values = Cell.from_id(cell_id).wildcards().values()
    return f"rule_{rule}_wildcards_" + "_".join(map(str, values))


def whole_node_threads() -> list[str]:
    """set-threads for this host's node (the profile's are a site's value)."""
    cpus = os.cpu_count()
    return ["--set-threads", *(f"{rule}={cpus}" for rule in (
        "run_cell", "run_motivation_cell", "build_redis_baseline", "build_redis_slimio",
        "build_fio", "build_guest_box"))]


def through_slurm(results: Path, *targets: str) -> subprocess.CompletedProcess:
    # Targets first: --set-threads and --config take every word after them.
    return snakemake(*targets, "--profile", str(PROFILE), *FAST_STATUS, *whole_node_threads(),
                     "--config", f"results_dir={results}", *MATRIX, slurm=True)


def daemons() -> dict[str, int]:
    """Each daemon's process id, from `slimio-slurm status` (running ones only)."""
    out = subprocess.run([str(CONTROL), "status"], capture_output=True, text=True).stdout
    return {line.split(":")[0]: int(line.rsplit("pid ", 1)[1].rstrip(")"))
            for line in out.splitlines() if "running (pid" in line}


def sacct(*args: str) -> list[dict]:
    fields = ["JobID", "JobName", "Comment", "State", "ExitCode", "NodeList", "AllocCPUS"]
    out = subprocess.run(["sacct", "-X", "-n", "-P", "-o", ",".join(fields), *args],
                         capture_output=True, text=True, check=True).stdout
    return [dict(zip(fields, line.split("|"))) for line in out.splitlines() if line]


def run_id(proc: subprocess.CompletedProcess) -> str:
    """The SLURM run id the executor names every job of a run after."""
    for line in (proc.stdout + proc.stderr).splitlines():
        if "SLURM run ID:" in line:
            return line.split("SLURM run ID:", 1)[1].strip()
    raise AssertionError("the executor printed no SLURM run ID:\n" + proc.stderr[-3000:])


def no_jobs_left(timeout_s: float = 90) -> list[str]:
    """Cancel every job on the cluster (the test's own one-node cluster: what a failed run
    left behind) and wait until none is left; return the node's name and state then."""
    subprocess.run(["scancel", "--user", "root"], capture_output=True)
    deadline = time.monotonic() + timeout_s
    while subprocess.run(["squeue", "-h"], capture_output=True, text=True).stdout.strip() \
            and time.monotonic() < deadline:
        time.sleep(1)
    return subprocess.run(["sinfo", "-h", "-N", "-o", "%N %T"], capture_output=True,
                          text=True, check=True).stdout.split()


@pytest.fixture(scope="module")
def cluster():
    """The one-node cluster, started; stopped afterwards by its daemons' process ids."""
    require_root()
    set_up = CONTROL.is_file() and SLURM_CONF.is_file() and \
        "playbooks/roles/host_slurm" in SLURM_CONF.read_text(errors="replace")
    if not set_up:
        why = ("the one-node SLURM cluster is not set up here: run `make setup-host "
               "SETUP_ARGS='-e host_slurm_enabled=true'` (make test does)")
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)
    subprocess.run([str(CONTROL), "start"], check=True, capture_output=True, text=True)
    pids = daemons()
    try:
        assert set(pids) == {"munged", "mariadb", "slurmdbd", "slurmctld", "slurmd"}, pids
        node = no_jobs_left()
        assert node[1] in ("idle", "mixed"), node
        yield node[0]
    finally:
        # A job's steps must not outlive slurmd.
        no_jobs_left()
        stopped = subprocess.run([str(CONTROL), "stop"], capture_output=True, text=True)
        assert stopped.returncode == 0, stopped.stderr
        for name, pid in pids.items():
            comm = Path(f"/proc/{pid}/comm")
            alive = comm.exists() and comm.read_text().strip() in (name, DAEMON_COMM[name])
            assert not alive, f"{name} (pid {pid}) still runs after slimio-slurm stop"
        assert daemons() == {}


@pytest.fixture(scope="module")
def slurm_run(cluster, redis_bin, slimio_bin, tmp_path_factory):
    """The tiny bare matrix, once locally and once through SLURM (both wall times printed):
    (local results, SLURM results, the SLURM run's id, the node's name)."""
    base = tmp_path_factory.mktemp("slurm")
    t0 = time.monotonic()
    local = snakemake("--cores", "all", "reproduce", "--config",
                      f"results_dir={base / 'local'}", *MATRIX)
    local_s = time.monotonic() - t0
    assert local.returncode == 0, local.stdout[-3000:] + local.stderr[-3000:]
    t0 = time.monotonic()
    proc = through_slurm(base / "slurm", "reproduce")
    slurm_s = time.monotonic() - t0
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    print(f"tiny bare matrix: local {local_s:.0f} s, through SLURM {slurm_s:.0f} s")
    return base / "local", base / "slurm", run_id(proc), cluster


def records(results: Path) -> pd.DataFrame:
    return pd.read_csv(results / "tables" / "cells.csv").set_index("cell_id").sort_index()


def test_every_cell_ran_as_a_slurm_job_and_the_records_match_a_local_run(slurm_run):
    local, slurm, run, node = slurm_run
    here, there = records(local), records(slurm)
    # The same cells, the same columns, values of the same kinds.
    assert list(there.index) == list(here.index) and len(here) == 8
    assert list(there.columns) == list(here.columns)
    for col in here.columns:
        a, b = here[col].dropna(), there[col].dropna()
        if len(a) and len(b) and col not in ("slurm_job_id",):
            assert pd.api.types.is_numeric_dtype(a) == pd.api.types.is_numeric_dtype(b), col
    assert here["slurm_job_id"].isna().all()
    assert there["slurm_job_id"].notna().all()
    assert set(there["node_class"]) == set(here["node_class"])
    assert there["node_class"].nunique() == 1
    for name in ("table3_redis_benchmark", "table4_ycsb_a", "table3_ratios"):
        a = pd.read_csv(local / "tables" / f"{name}.csv")
        b = pd.read_csv(slurm / "tables" / f"{name}.csv")
        assert a.shape == b.shape and list(a.columns) == list(b.columns), name

    # sacct: every cell is a completed job of this run, on this node, holding all its CPUs,
    # and each cell's provenance names that job.
    jobs = sacct("--name", run)
    by_comment = {j["Comment"]: j for j in jobs}
    for cell_id in there.index:
        prov = json.loads((slurm / "raw" / cell_id / layout.RAW_PROVENANCE).read_text())
        job_id = prov["node"]["slurm"]["job_id"]
        job = next(j for j in jobs if j["JobID"] == job_id)
        assert job["Comment"] == comment("run_cell", cell_id), job
        assert (job["State"], job["ExitCode"], job["NodeList"]) == ("COMPLETED", "0:0", node)
        assert int(job["AllocCPUS"]) == os.cpu_count()
        assert prov["node"]["slurm"]["cluster"] == "slimio-repro"
        assert str(there.loc[cell_id, "slurm_job_id"]).split(".")[0] == job_id
    assert {comment("parse_cell", c) for c in there.index} <= set(by_comment)
    # Tables, figures, claims and the report are made where Snakemake runs, not as jobs.
    rules = {c.split("_wildcards_")[0] for c in by_comment}
    assert rules - {"rule_run_cell", "rule_parse_cell"} <= {"rule_build_ycsb_binding"}, rules


def test_a_cancelled_cell_leaves_no_cell_and_is_redone(slurm_run):
    _, slurm, _, _ = slurm_run
    raw = slurm / "raw" / CANCELLED_CELL
    partial = raw.with_name(raw.name + ".partial")
    before = json.loads((raw / layout.RAW_PROVENANCE).read_text())["node"]["slurm"]["job_id"]
    # As if the cell had not run yet: its raw directory, its record and the tables gone.
    shutil.rmtree(raw)
    shutil.rmtree(slurm / "tables")
    for done in (slurm / "cells").glob(f"{CANCELLED_CELL}.*"):
        done.unlink()
    env = dict(os.environ, PATH=f"{VENV_BIN}:{os.environ['PATH']}")
    cmd = [str(VENV_BIN / "snakemake"), "reproduce", "--profile", str(PROFILE),
           *FAST_STATUS, *whole_node_threads(),
           "--config", f"results_dir={slurm}", *MATRIX]
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        # Wait until the cell runs (its job is RUNNING and its server writes), then cancel it.
        deadline = time.monotonic() + 240
        job_id = None
        while time.monotonic() < deadline and proc.poll() is None:
            out = subprocess.run(["squeue", "-h", "-t", "RUNNING", "-o", "%i|%k"],
                                 capture_output=True, text=True).stdout
            job_id = next((line.split("|")[0] for line in out.splitlines()
                           if line.endswith(comment("run_cell", CANCELLED_CELL))), None)
            if job_id and (partial / layout.RAW_PLAN).exists():
                break
            time.sleep(0.5)
        assert job_id and proc.poll() is None, \
            "the cell's job never ran:\n" + (proc.stdout.read()[-3000:] if proc.poll() else "")
        time.sleep(3)
        subprocess.run(["scancel", job_id], check=True)
        output, _ = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
            # A killed Snakemake leaves its lock: the suite's later runs must not find it.
            snakemake("--unlock", "--cores", "1")
    assert proc.returncode != 0, output[-3000:]
    assert "CANCELLED" in output, output[-3000:]
    # No half-written cell: no raw directory, nothing mounted, no server left of it.
    assert not raw.exists()
    assert not (partial / layout.RAW_COMPLETE).exists()
    assert str(partial) not in Path("/proc/mounts").read_text()
    servers = subprocess.run(["pgrep", "-af", str(partial)], capture_output=True,
                             text=True).stdout
    assert not servers.strip(), servers
    states = {j["JobID"]: j["State"] for j in sacct("-j", job_id)}
    assert states[job_id].startswith("CANCELLED"), states

    # The next run redoes exactly that cell, as a new job.
    again = through_slurm(slurm, "reproduce")
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-5000:]
    assert (raw / layout.RAW_COMPLETE).exists() and not partial.exists()
    after = json.loads((raw / layout.RAW_PROVENANCE).read_text())["node"]["slurm"]["job_id"]
    assert after not in (before, job_id)
    redone = [j for j in sacct("--name", run_id(again)) if j["Comment"].startswith("rule_run_cell")]
    assert [j["JobID"] for j in redone] == [after], redone


def test_a_cluster_run_without_the_nodes_cpu_count_stops_before_submitting(cluster, tmp_path):
    proc = snakemake("reproduce", "--profile", str(PROFILE), "--set-threads", "run_cell=2",
                     "--config", f"results_dir={tmp_path}", *MATRIX, slurm=True)
    assert proc.returncode != 0
    assert "run_motivation_cell, build_redis_baseline" in proc.stderr, proc.stderr[-2000:]
    assert "set-threads" in proc.stderr
    assert not (tmp_path / "raw").exists()


# What the setup playbook starts that must not listen on the network: the cluster's daemons,
# MariaDB, and a job's srun and slurmstepd (loopback only); libvirt's daemons (their Unix
# sockets only); each libvirt network's dnsmasq (the guests' DNS and DHCP: its own bridge).
LOOPBACK_ONLY = {"munged", "mariadbd", "slurmdbd", "slurmctld", "slurmd", "srun", "slurmstepd",
                 "libvirtd", "virtlogd"}
VM_NETWORK = "slimio-repro"     # playbooks/roles/host_libvirt: host_libvirt_vm_network_name


class Listener(NamedTuple):
    proto: str
    address: str                # as ss prints it, without brackets: 127.0.0.1, ::1, 0.0.0.0, *
    interface: str | None       # the device the socket is bound to (SO_BINDTODEVICE), if any
    port: str
    processes: list[tuple[str, int]]    # (name, pid) of each process that holds it

    def on_loopback(self) -> bool:
        try:
            return ipaddress.ip_address(self.address).is_loopback
        except ValueError:      # *
            return False

    def unspecified(self) -> bool:
        return self.address == "*" or ipaddress.ip_address(self.address).is_unspecified

    def __str__(self):
        where = self.address + (f"%{self.interface}" if self.interface else "")
        return f"{self.proto} {where}:{self.port} " + \
            ", ".join(f"{name} (pid {pid})" for name, pid in self.processes)


def listeners() -> list[Listener]:
    """Every listening TCP socket and bound UDP socket of this host, with the processes that
    hold it: `ss -ltnup` (root sees every process)."""
    out = subprocess.run(["ss", "-H", "-ltnup"], capture_output=True, text=True,
                         check=True).stdout
    found = []
    for line in out.splitlines():
        fields = line.split()
        local = re.fullmatch(r"(\[[^\]]*\]|[^%\s]*?)(?:%(\S+?))?:(\d+|\*)", fields[4])
        assert local, f"ss printed a local address this test cannot read: {line}"
        processes = [(name, int(pid)) for name, pid in
                     re.findall(r'\("([^"]*)",pid=(\d+),', line)]
        found.append(Listener(fields[0], local.group(1).strip("[]"), local.group(2),
                              local.group(3), processes))
    return found


def libvirt_networks() -> dict[str, tuple[str, str, int]]:
    """Each active libvirt network: (its bridge, its address, its dnsmasq's pid)."""
    virsh = ["virsh", "-c", "qemu:///system"]
    names = subprocess.run([*virsh, "net-list", "--name"], capture_output=True, text=True,
                           check=True).stdout.split()
    out = {}
    for name in names:
        xml = ET.fromstring(subprocess.run([*virsh, "net-dumpxml", name], capture_output=True,
                                           text=True, check=True).stdout)
        pid_file = Path(f"/run/libvirt/network/{name}.pid")
        pid = int(pid_file.read_text().strip()) if pid_file.is_file() else -1
        out[name] = (xml.find("bridge").get("name"), xml.find("ip").get("address"), pid)
    return out


def test_what_the_setup_starts_listens_on_loopback_or_the_vms_network_only(cluster):
    """With the cluster up: slurmctld, slurmd, slurmdbd, MariaDB and munged listen on
    loopback addresses only (the guests on the VMs' network must not reach them, nor the
    network beyond), and each libvirt network's dnsmasq on its own bridge only
    (docs/explanation/security.md)."""
    sockets = listeners()
    exposed = [str(s) for s in sockets
               if {name for name, _ in s.processes} & LOOPBACK_ONLY and not s.on_loopback()]
    networks = libvirt_networks()
    assert VM_NETWORK in networks, f"libvirt's network {VM_NETWORK} is not active: {networks}"
    for name, (bridge, address, pid) in networks.items():
        dns = [s for s in sockets if pid in {p for _, p in s.processes}]
        assert dns, f"network {name}'s dnsmasq (pid {pid}) listens nowhere"
        exposed += [f"{s} (network {name}, bridge {bridge} {address})" for s in dns
                    if not (s.address == address or (s.unspecified() and s.interface == bridge))]
    assert not exposed, "listening beyond loopback and the VMs' networks:\n" + \
        "\n".join(exposed)
    # The check saw the daemons: each listens (on loopback).
    daemons = {name for s in sockets for name, _ in s.processes}
    assert {"slurmctld", "slurmd", "slurmdbd"} <= daemons, sorted(daemons)
