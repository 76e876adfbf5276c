"""The crash campaign's power cut: SlimIO on the `nvme` backend inside a testbed VM (the
emulated NVMe FDP namespace through passthru), its clients and oracle on this host, and the
VM itself destroyed mid-write (``virsh destroy``: QEMU killed, the guest's kernel, page cache
and every command it had not handed to the emulated device gone at once).

What a power cut here does not lose: what QEMU already wrote to the namespace's backing file
(this host's page cache keeps it; QEMU's NVMe device has a volatile write cache flag but no
cache it could drop). So the cut tests everything SlimIO and the guest hold, not the drive's
own cache; the file campaign's kill -9 tests the rest of the protocol.

One VM serves the whole campaign (a boot costs 15 s under TCG): each iteration formats the
namespace afresh with ``slimio-admin format --force``; each restart boots the same VM again
(libvirt starts the destroyed domain, and its SSH is awaited at its last address; its NVMe
backing file is the same).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from pathlib import Path

import redis

from ..plan import CellPlan
from ..agent import server as guest_server
from ..agent import slimio as guest_slimio
from ..testbed import vm as vmmod
from .target import StartRefused

GUEST_DIR = "/var/lib/slimio-crash"
GUEST_DEVICE = "/dev/ng0n1"
PORT = 6379
# How long a restarted VM may take to answer SSH at its last address before `vagrant up`
# looks for it (a boot answers in about 17 s under this host's TCG).
RESTART_SSH_S = 120


class VmServer:
    """SlimIO in the campaign's VM, with the interface of :class:`.target.TargetServer`."""

    def __init__(self, plan: CellPlan, box_file: Path, vm_dir: Path, log: Path,
                 bin_dir: str, policy: str, wal_mib: int, rewrite_min_mib: int):
        self.plan, self.box_file, self.dir, self.log_file = plan, box_file, vm_dir, log
        self.bin_dir = bin_dir
        self.system, self.port, self.host = "slimio", PORT, None
        self.exited_at: float | None = None
        self.vm: vmmod.RunningVm | None = None
        self.device = GUEST_DEVICE
        s = plan.slimio
        self.options = {
            "port": PORT, "bind": "0.0.0.0", "protected-mode": "no", "daemonize": "yes",
            "dir": GUEST_DIR, "logfile": f"{GUEST_DIR}/redis.log", "appendonly": "yes",
            "appendfsync": "always" if policy == "always" else "everysec", "save": '""',
            "auto-aof-rewrite-percentage": 100,
            "auto-aof-rewrite-min-size": f"{rewrite_min_mib}mb",
            "enable-debug-command": "yes",
        }
        self.conf = guest_slimio.conf_block(s, Path(GUEST_DEVICE))
        self.wal_mib = wal_mib
        self.up = False

    # -- the VM ---------------------------------------------------------------------------
    def boot(self) -> float:
        """Boot the VM (the first time: create it with a blank namespace)."""
        t0 = time.time()
        if self.vm is None:
            if self.dir.exists():
                vmmod.destroy_stale(self.dir)     # what an interrupted campaign left
            self.dir.mkdir(parents=True)
            self.dir.chmod(0o755)
            box = vmmod.ensure_box(self.box_file, self.plan.vm.storage_pool, self.log_file)
            image = self.dir / "nvme.img"
            with open(image, "wb") as fh:
                fh.truncate(self.plan.vm.device.capacity_bytes)
            image.chmod(0o666)
            spec = vmmod.spec(self.plan, self.dir, box, self.box_file,
                              vmmod.boot_files(self.box_file, self.dir),
                              vmmod.management_network())
            self.vm = vmmod.RunningVm(self.dir, spec, self.log_file)
            self.vm.up()
        elif not self.vm.start_again(RESTART_SSH_S):
            self.vm.up()
        self.host = re.search(r"HostName\s+(\S+)", self.vm.ssh_config.read_text()).group(1)
        self.up = True
        # What booting wrote to the root disk (the first boot's SSH host key, logs) is on
        # the disk before any power cut: the campaign cuts the namespace's power, and the
        # next boot needs a root file system that logs in.
        self.ssh("sudo sync")
        return time.time() - t0

    def power_cut(self) -> float:
        """Destroy the VM (QEMU killed): the moment of the cut."""
        domain = (self.dir / ".vagrant/machines/default/libvirt/id").read_text().strip()
        t = time.time()
        subprocess.run(["virsh", "-c", "qemu:///system", "destroy", domain], check=True,
                       capture_output=True)
        self.up = False
        self.exited_at = t
        return t

    def destroy(self) -> None:
        if self.vm is not None:
            try:
                self.vm.destroy()
            finally:
                shutil.rmtree(self.dir, ignore_errors=True)
                self.vm = None

    def ssh(self, command: str, stdin: bytes | None = None, check: bool = True) -> str:
        return self.vm.ssh(command, stdin=stdin, check=check,
                           timeout=600).stdout.decode(errors="replace")

    # -- the campaign's server interface ----------------------------------------------------
    def format(self) -> None:
        """A fresh namespace for the next iteration (the server is down)."""
        if not self.up:
            self.boot()
        self.ssh("sudo pkill -9 redis-server; true")
        cmd = guest_slimio.format_command(Path(self.bin_dir) / "slimio-admin",
                                          Path(GUEST_DEVICE), self.plan.slimio)
        cmd[cmd.index("--wal-mib") + 1] = str(self.wal_mib)
        self.ssh("sudo " + " ".join(cmd) + " --force")

    def start(self, failpoints: str = "", timeout_s: float = 300) -> float:
        if failpoints:
            raise ValueError("the power-cut campaign kills at random moments only")
        t0 = time.time()
        if not self.up:
            self.boot()
        conf = "".join(f"{k} {v}\n" for k, v in self.options.items()) + self.conf
        self.ssh(f"sudo mkdir -p {GUEST_DIR} && sudo rm -f {GUEST_DIR}/redis.log && "
                 f"sudo tee {GUEST_DIR}/redis.conf >/dev/null", stdin=conf.encode())
        self.ssh(f"sudo {self.bin_dir}/redis-server {GUEST_DIR}/redis.conf")
        self.exited_at = None
        cli = guest_server.connect(PORT, timeout=5, host=self.host)
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                if cli.ping() and cli.info("persistence")["loading"] == 0:
                    return time.time() - t0
            except (redis.ConnectionError, redis.BusyLoadingError, redis.TimeoutError):
                pass
            if "redis-server" not in self.ssh("pgrep -a redis-server; true"):
                raise StartRefused(f"the guest's server exited: {self.log_tail()}")
            if time.monotonic() > deadline:
                raise StartRefused(f"not ready within {timeout_s} s: {self.log_tail()}")
            time.sleep(0.2)

    def alive(self) -> bool:
        return self.up

    def kill(self) -> float:
        return self.power_cut() if self.up else time.time()

    def shutdown(self, timeout_s: float = 120) -> int:
        try:
            guest_server.connect(PORT, timeout=timeout_s, host=self.host).shutdown()
        except redis.ConnectionError:
            pass
        deadline = time.monotonic() + timeout_s
        while "redis-server" in self.ssh("pgrep -a redis-server; true"):
            if time.monotonic() > deadline:
                raise StartRefused("the guest's server did not exit after SHUTDOWN")
            time.sleep(0.2)
        return 0

    def client(self) -> redis.Redis:
        return guest_server.connect(PORT, timeout=30, host=self.host)

    def log_tail(self, lines: int = 6) -> str:
        if not self.up:
            return ""
        text = self.ssh(f"sudo tail -n {lines} {GUEST_DIR}/redis.log; true")
        return " | ".join(line.split(" ", 4)[-1] for line in text.strip().splitlines())

    def group_survivors(self) -> list[int]:
        return []

    def cleanup(self) -> None:
        """The server stopped, the VM kept (the next iteration formats the namespace)."""
        if self.up:
            self.ssh("sudo pkill -9 redis-server; true")

    def inspect(self) -> dict:
        cmd = guest_slimio.inspect_command(Path(self.bin_dir) / "slimio-admin",
                                           Path(GUEST_DEVICE), self.plan.slimio.lba_size_bytes)
        return json.loads(self.ssh("sudo " + " ".join(cmd)))

    def export(self, role: str, dest: Path) -> str:
        out = f"{GUEST_DIR}/export-{role}.rdb"
        proc = self.vm.ssh(f"sudo {self.bin_dir}/slimio-admin export --device {GUEST_DEVICE} "
                           f"--lba-size {self.plan.slimio.lba_size_bytes} --slot {role} "
                           f"--output {out} --force", check=False)
        if proc.returncode:
            return proc.stderr.decode(errors="replace").strip()
        with open(dest, "wb") as fh:
            self.vm.ssh(f"sudo cat {out}", stdout=fh)
        return ""
