"""The vm testbed, host side: a Vagrant + libvirt VM with an emulated NVMe SSD.

For a cell, :func:`run_cell`

1. makes the cell's VM directory (``testbeds.vm.work_dir``/<cell id>): the NVMe backing
   image, ``vm.json`` (what ``testbed/Vagrantfile`` reads) and the Vagrantfile;
2. ``vagrant up`` with the libvirt provider (KVM where it works, TCG otherwise), with the
   box built by the ``build_guest_box`` rule; or, instead of 1-2, takes the guest the run's
   last cell left, reset (:mod:`slimio_repro.run.guests`);
3. copies the guest sub-package into the guest and runs :func:`slimio_repro.agent.run_cell`
   there in one SSH command: it provisions the guest first (:mod:`slimio_repro.agent.
   provision`: checks that the guest is the box that was booted and that the device is the
   profile's, then prepares the namespace for the cell's system), then runs the cell on the
   namespace with the Redis builds baked into the box;
4. copies the guest's raw directory back, adds the VM's own records (``vm/``: spec, logs,
   console) and host provenance, and renames it into place;
5. destroys the VM and deletes its directory, always when a step failed, and after a cell
   that succeeded unless the guest is kept for the next cell.

Each phase is timed (:mod:`slimio_repro.agent.phases`): the cell's provenance has
``phases_s`` (the host's and the guest's phases, in order) and ``cell_total_s``.

Why a fresh boot per cell, not a saved guest restored: QEMU's NVMe controller cannot be
migrated (its VMState is ``unmigratable`` in QEMU 10.0, and upstream still), so neither
libvirt's save/restore nor a QEMU snapshot of a guest with the FDP device works, and its
namespaces cannot be hot-plugged (``Bus ... does not support hotplugging``) onto a
controller added after a restore. Measured here: a guest with only the subsystem migrated;
adding the namespace failed. So a booted guest is kept and reset between cells instead, and
the box made quick to boot (testbed/box/build_box.sh).

Everything that varies is in the config (``testbeds.vm``) and a device profile in
``femu/``; :func:`device_qemu_args` turns the profile into QEMU's NVMe device options.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import importlib.util
import io
import ipaddress
import json
import os
import py_compile
import re
import shutil
import signal
import subprocess
import tarfile
import tempfile
import threading
import time
from pathlib import Path
from xml.etree import ElementTree

from .. import paths
from ..agent import layout, provenance
from ..plan import CellPlan, DeviceProfile, check_vm_cell_space
from ..agent import phases as cellphases
from . import accel as accelmod

GUEST_ROOT = "/opt/slimio-repro"
GUEST_BUILD_DIR = f"{GUEST_ROOT}/build"
GUEST_PYTHON_DIR = f"{GUEST_ROOT}/python"
GUEST_REPO_DIR = f"{GUEST_ROOT}/repo"
GUEST_CELLS_DIR = "/var/lib/slimio-repro/cells"
BOX_NAME_PREFIX = "slimio-repro-"
# What the guest needs of the repository to run a cell: the guest sub-package (it imports
# nothing else of the package), the redis.conf template, and requirements.txt (the pins its
# provenance reports).
GUEST_REPO_FILES = ["src/slimio_repro/__init__.py", "src/slimio_repro/agent",
                    "src/slimio_repro/plan/__init__.py", "src/slimio_repro/plan/cellplan.py",
                    "redis-baseline/redis.conf.template", "requirements.txt"]
PROGRESS = re.compile(r"\r|\x1b\[K")


class VmError(RuntimeError):
    pass


def device_qemu_args(profile: DeviceProfile, image: Path) -> list[str]:
    """QEMU options for the profile's NVMe SSD, backed by ``image``.

    QEMU's own emulation: an NVMe subsystem (FDP lives there: reclaim unit size, groups and
    handles), a controller at the fixed PCI address 0x10 (libvirt puts the NIC on the first
    free slots), and namespace 1 with the profile's LBA size and all reclaim unit handles.
    FEMU: its ``femu`` device (the profile's options) with the same capacity, at the same
    PCI address.
    """
    lba = profile.lba_size_bytes
    if profile.emulator == "femu":
        opts = [f"devsz_mb={profile.capacity_gib * 1024}", "namespaces=1",
                *profile.femu_options, "bus=pci.0", "addr=0x10"]
        return ["-device", "femu," + ",".join(opts)]
    subsys = "nvme-subsys,id=slimio-subsys"
    ns = f"nvme-ns,drive=slimio-nvm,nsid=1,logical_block_size={lba},physical_block_size={lba}"
    if profile.fdp:
        subsys += (f",fdp=on,fdp.runs={profile.reclaim_unit_size_mib}M"
                   f",fdp.nrg={profile.reclaim_groups}"
                   f",fdp.nruh={profile.reclaim_unit_handles}")
        ns += f",fdp.ruhs=0-{profile.reclaim_unit_handles - 1}"
    return ["-device", subsys,
            "-device", "nvme,id=slimio-nvme,serial=slimio0,subsys=slimio-subsys,"
                       "bus=pci.0,addr=0x10",
            "-drive", f"file={image},if=none,id=slimio-nvm,format=raw,cache=none,aio=threads",
            "-device", ns]


# The network --------------------------------------------------------------------------------
# The VMs' NAT network, defined by the setup playbook (role host_libvirt,
# host_libvirt_vm_network_name): persistent, so its DHCP server outlives each cell's VM, and
# with dnsmasq's no-ping, which would hold every new VM's DHCP offer for 3 s. Its address is
# read from libvirt.
VM_NETWORK = "slimio-repro"


def management_network(name: str = VM_NETWORK) -> dict:
    """The network's name and address (CIDR) for Vagrant, or an error saying how to make it."""
    proc = subprocess.run(["virsh", "-c", "qemu:///system", "net-dumpxml", name],
                          capture_output=True, text=True)
    active = subprocess.run(["virsh", "-c", "qemu:///system", "net-info", name],
                            capture_output=True, text=True)
    if proc.returncode != 0 or not re.search(r"Active:\s+yes", active.stdout):
        raise VmError(f"libvirt network {name} is missing or not active "
                      f"({(proc.stderr or active.stderr).strip() or 'inactive'}): run "
                      "`make setup-host` (role host_libvirt defines and starts it)")
    ip = ElementTree.fromstring(proc.stdout).find("ip")
    net = ipaddress.IPv4Network(f"{ip.get('address')}/{ip.get('netmask')}", strict=False)
    return {"name": name, "address": str(net)}


# Accelerator -------------------------------------------------------------------------------
def accelerator(setting: str) -> dict:
    """kvm or tcg: the setting itself, or (auto) the setup playbook's probe verdict."""
    if setting in ("kvm", "tcg"):
        return {"accel": setting, "reason": "testbeds.vm.accel"}
    verdict = Path(paths.ACCEL_VERDICT)
    if verdict.is_file():
        return json.loads(verdict.read_text())
    return accelmod.probe()


# The box -----------------------------------------------------------------------------------
def box_name(box_file: Path) -> str:
    meta = json.loads(box_file.with_suffix(".json").read_text())
    return BOX_NAME_PREFIX + meta["inputs_sha256"][:12]


def _vagrant(args: list[str], cwd: Path | None, log: Path | None = None,
             env: dict | None = None) -> str:
    full_env = dict(os.environ, VAGRANT_CHECKPOINT_DISABLE="1", **(env or {}))
    if cwd is not None:
        full_env["VAGRANT_CWD"] = str(cwd)
    proc = subprocess.run(["vagrant", *args], capture_output=True, text=True, env=full_env)
    out = _readable(proc.stdout + proc.stderr)
    if log is not None:
        with open(log, "a") as fh:
            fh.write(f"$ vagrant {' '.join(args)}\n{out}\n")
    if proc.returncode != 0:
        tail = "\n".join(out.strip().splitlines()[-15:])
        raise VmError(f"`vagrant {' '.join(args)}` failed ({proc.returncode}):\n{tail}")
    return out


def _readable(output: str) -> str:
    """Vagrant's output without its progress lines and terminal controls."""
    out = PROGRESS.sub("\n", output)
    return "\n".join(line for line in out.splitlines() if not line.startswith("Progress:"))


def ensure_box(box_file: Path, pool: str, log: Path) -> str:
    """Add the box to Vagrant once; remove older slimio-repro boxes, and every box volume in
    ``pool`` but the one this box's VMs use (:func:`stale_box_volumes`)."""
    name = box_name(box_file)
    # What Vagrant holds, from its box directory (the layout box_volume reads): a `vagrant
    # box list` starts Ruby, which costs most of a second per cell.
    boxes = {d.name for d in (vagrant_home() / "boxes").glob(f"{BOX_NAME_PREFIX}*")
             if d.is_dir()}
    if box_volume(name) is None:
        _vagrant(["box", "add", "--force", "--name", name, str(box_file)], None, log)
    for old in sorted(boxes - {name}):
        _vagrant(["box", "remove", "--force", "--all", old], None, log)
    listing = _virsh("vol-list", "--pool", pool)
    if listing.returncode != 0:
        raise VmError(f"virsh vol-list --pool {pool} failed: {listing.stderr.strip()}")
    for vol in stale_box_volumes(volume_names(listing.stdout), box_volume(name)):
        _virsh("vol-delete", vol, "--pool", pool, log=log)
    return name


def _virsh(*args: str, log: Path | None = None) -> subprocess.CompletedProcess:
    """``virsh -c qemu:///system ARGS``, its output appended to ``log`` when given."""
    proc = subprocess.run(["virsh", "-c", "qemu:///system", *args], capture_output=True,
                          text=True)
    if log is not None:
        with open(log, "a") as fh:
            fh.write(f"$ virsh {' '.join(args)}\n{proc.stdout}{proc.stderr}")
    return proc


def volume_names(listing: str) -> list[str]:
    """The volume names of ``virsh vol-list --pool POOL``'s table (libvirt 9.0's virsh has
    no ``--name``: asked for it, it fails, and until this was read the leak went unseen)."""
    lines = listing.splitlines()
    rule = next((i for i, line in enumerate(lines) if line.startswith("---")), None)
    if rule is None:
        return []
    return [line.split()[0] for line in lines[rule + 1:] if line.strip()]


def vagrant_home() -> Path:
    """Vagrant's data directory (``VAGRANT_HOME``, else ``~/.vagrant.d``)."""
    return Path(os.environ.get("VAGRANT_HOME") or Path.home() / ".vagrant.d")


def box_volume(name: str) -> str | None:
    """The pool volume vagrant-libvirt (0.11) uploads box ``name`` into: for an unversioned
    box, ``NAME_vagrant_box_image_0_MTIME_box.img``, MTIME being that of the box image in
    Vagrant's box directory (so a box re-added after another checkout removed it gets a new
    volume); None when Vagrant does not hold the box."""
    image = vagrant_home() / "boxes" / name / "0" / "libvirt" / "box.img"
    if not image.is_file():
        return None
    return f"{name}_vagrant_box_image_0_{int(image.stat().st_mtime)}_box.img"


def stale_box_volumes(volumes: list[str], keep: str | None) -> list[str]:
    """The slimio-repro box volumes of ``volumes`` other than ``keep``: older boxes', and
    the same box's from before it was re-added (each leaked 0.8 GB per box rebuild before;
    55 of them filled this machine's disk). With ``keep`` None (the box's volume unknown)
    nothing is removed."""
    if keep is None:
        return []
    return [v for v in volumes if v.startswith(BOX_NAME_PREFIX)
            and "_vagrant_box_image_" in v and v != keep]


# One VM ------------------------------------------------------------------------------------
# The shared SSH connection's socket path must fit a Unix socket's (108 bytes; ssh adds a
# suffix while it binds); longer work_dirs connect afresh for every command.
MUX_PATH_MAX = 80
# How long a shared connection outlives its last command (a kept guest's next cell comes
# within seconds).
MUX_PERSIST_S = 60


def mux_socket(vm_dir: Path) -> Path:
    """The socket of the SSH connection a VM's commands share (:class:`RunningVm`)."""
    return vm_dir / "ssh-mux"


def close_mux(vm_dir: Path) -> None:
    """Stop the shared SSH connection of the VM in ``vm_dir``, if one runs (before the guest
    goes away)."""
    socket = mux_socket(vm_dir)
    if not socket.exists():
        return
    config = ["-F", str(vm_dir / "ssh_config")] if (vm_dir / "ssh_config").exists() else []
    with contextlib.suppress(subprocess.TimeoutExpired):
        subprocess.run(["ssh", *config, "-o", "LogLevel=QUIET", "-o", f"ControlPath={socket}",
                        "-O", "exit", "default"], capture_output=True, timeout=30)


class RunningVm:
    """A cell's VM in its own directory; every step is logged to ``log``."""

    def __init__(self, directory: Path, spec: dict, log: Path, multiplex: bool = False):
        self.dir, self.spec, self.log = directory, spec, log
        self.ssh_config = directory / "ssh_config"
        self.domain: str | None = None
        # A cell's SSH commands share one connection (ssh's ControlMaster), closed when the
        # VM is destroyed (docs/explanation/pipeline.md has the times it saves). Not where
        # the domain is killed and started again under the same directory (the crash
        # campaign): the shared connection would outlive its guest.
        self.multiplex = multiplex and len(str(mux_socket(directory))) <= MUX_PATH_MAX

    def up(self) -> None:
        """``vagrant up``; the SSH configuration and the libvirt domain's name are taken
        from what it printed (:func:`up_facts`), each a second's Vagrant run less per cell
        than ``vagrant ssh-config`` and ``vagrant destroy`` (measured: 0.9-1.0 s and
        2.4-2.7 s under this host's TCG), with those commands as the fallback."""
        (self.dir / "Vagrantfile").write_text(paths.VAGRANTFILE.read_text())
        (self.dir / "vm.json").write_text(json.dumps(self.spec, indent=2) + "\n")
        out = _vagrant(["up", "--provider", "libvirt", "--no-provision"], self.dir, self.log)
        facts = up_facts(out)
        self.domain = facts.get("domain") or self.domain    # a re-up does not print it
        if "host" in facts:
            self.ssh_config.write_text(ssh_config(facts["host"], facts["port"],
                                                  self.spec["ssh_private_key"]))
        else:
            self.ssh_config.write_text(_vagrant(["ssh-config"], self.dir))

    def start_again(self, timeout_s: float) -> bool:
        """Start this VM's stopped domain again through libvirt and wait for its SSH at the
        address of its last boot; True when the guest answered within ``timeout_s``. Under
        this host's TCG that took 14.4-19.0 s to SSH, against 19.4-22.2 s for a ``vagrant
        up`` of the same domain, three of each alternating (benchmarks/vm_restart.py).
        False (the domain may be running then) when it never booted here, or did not answer
        at that address: call :meth:`up`, which finds its address again."""
        if not self.ssh_config.exists():
            return False
        if _virsh("start", self.domain or self.default_domain, log=self.log).returncode != 0:
            return False
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                if subprocess.run(self._ssh_argv("true", "ConnectTimeout=2"),
                                  capture_output=True, timeout=30).returncode == 0:
                    return True
            except subprocess.TimeoutExpired:
                pass            # connected, but the booting guest did not log in yet
            time.sleep(0.5)
        with open(self.log, "a") as fh:
            fh.write(f"# {NO_SSH_AT_LAST_ADDRESS} within {timeout_s:.0f} s\n")
        return False

    @property
    def default_domain(self) -> str:
        """The libvirt domain vagrant-libvirt makes for this directory (its name and the
        machine's, ``default``), known before ``vagrant up`` has said it."""
        return domain_name(self.dir)

    def boot(self, stall_s: float, attempts: int, faults: list[str] = ()) -> list[dict]:
        """Boot the VM fresh, and boot it again when a boot hangs: a ``vagrant up`` that has
        not returned (the guest's SSH not answering) after ``stall_s``, or a console that
        shows a kernel panic, or a ``vagrant up`` that fails, costs the domain (destroyed
        with its root disk), a blank NVMe image and Vagrant's state, then the next attempt
        starts, ``attempts`` in all. Attempt N adds ``faults[N-1]`` (if any) to the kernel
        command line (:func:`injected_faults`: the pipeline's fault campaign and its tests).
        Returns each attempt's outcome, seconds and reason; raises :class:`VmError` naming
        every attempt when none booted."""
        outcomes = []
        for attempt in range(1, attempts + 1):
            spec = dict(self.spec)
            if attempt <= len(faults):
                spec["kernel_cmdline"] = f"{spec['kernel_cmdline']} {faults[attempt - 1]}"
            t0 = time.monotonic()
            reason = self._up_watched(spec, stall_s)
            seconds = round(time.monotonic() - t0, 3)
            outcomes.append({"attempt": attempt, "outcome": "up" if reason is None else
                             "hung", "s": seconds, **({"reason": reason} if reason else {})})
            with open(self.log, "a") as fh:
                fh.write(f"# boot attempt {attempt}: {outcomes[-1]}\n")
            if reason is None:
                return outcomes
            self._discard_boot(attempt)
        raise VmError(f"the VM in {self.dir} did not boot in {attempts} attempts: " +
                      "; ".join(f"attempt {o['attempt']} ({o['s']:.0f} s): {o['reason']}"
                                for o in outcomes) +
                      f". Its console logs are kept in the cell's vm/ records; a host this "
                      "slow needs a larger testbeds.vm.boot_stall_s")

    def _up_watched(self, spec: dict, stall_s: float) -> str | None:
        """One ``vagrant up`` with ``spec``, watched: None when the guest answered SSH,
        else why the boot counts as hung (the ``vagrant up`` is stopped by then)."""
        (self.dir / "Vagrantfile").write_text(paths.VAGRANTFILE.read_text())
        (self.dir / "vm.json").write_text(json.dumps(spec, indent=2) + "\n")
        out_file = self.dir / "vagrant-up.out"
        console = Path(spec["console_log"])
        env = dict(os.environ, VAGRANT_CHECKPOINT_DISABLE="1", VAGRANT_CWD=str(self.dir))
        with open(out_file, "w") as out:
            proc = subprocess.Popen(["vagrant", "up", "--provider", "libvirt",
                                     "--no-provision"], stdout=out, stderr=subprocess.STDOUT,
                                    env=env, start_new_session=True)
        deadline = time.monotonic() + stall_s
        reason = None
        while proc.poll() is None:
            panic = console_panic(console)
            if panic:
                reason = f"the guest's console shows {panic!r}"
            elif time.monotonic() > deadline and UP_READY not in out_file.read_text(
                    errors="replace"):
                reason = (f"no SSH after {stall_s:.0f} s (testbeds.vm.boot_stall_s)"
                          + console_tail(console))
            if reason:
                _stop_group(proc)
                break
            time.sleep(0.5)
        text = _readable(out_file.read_text(errors="replace"))
        with open(self.log, "a") as fh:
            fh.write(f"$ vagrant up --provider libvirt --no-provision\n{text}\n")
        out_file.unlink()
        if reason is None and proc.returncode != 0:
            reason = (f"`vagrant up` failed ({proc.returncode}): " +
                      " | ".join(text.strip().splitlines()[-4:]))
        if reason is None:
            facts = up_facts(text)
            self.domain = facts.get("domain") or self.default_domain
            self.ssh_config.write_text(
                ssh_config(facts["host"], facts["port"], self.spec["ssh_private_key"])
                if "host" in facts else _vagrant(["ssh-config"], self.dir))
        return reason

    def _discard_boot(self, attempt: int) -> None:
        """Remove what a hung boot made (domain, root disk, Vagrant's state), keep its
        console as console-attemptN.log, and give the next boot a blank NVMe image."""
        try:
            remove_domain(self.default_domain, self.log)
        except VmError:
            pass                    # the hung boot never got as far as defining it
        shutil.rmtree(self.dir / ".vagrant", ignore_errors=True)
        console = Path(self.spec["console_log"])
        if console.exists():
            console.rename(console.with_name(f"console-attempt{attempt}.log"))
        image = self.dir / "nvme.img"
        if image.exists():
            size = image.stat().st_size
            image.unlink()
            with open(image, "xb") as fh:
                fh.truncate(size)
            os.chmod(image, 0o666)

    def _ssh_argv(self, command: str, option: str) -> list[str]:
        """ssh running ``command`` in the guest, with one more ssh ``-o`` option."""
        return ["ssh", "-F", str(self.ssh_config), "-o", "LogLevel=ERROR", "-o", option,
                "default", command]

    def _mux_options(self) -> list[str]:
        """The options of a command over the shared connection, which is started first when
        none runs: in the background, without the cell's tag (paths.CELL_ENV; a kept guest's
        connection outlives the cell that started it). Where it could not start, this and
        every later command connect afresh."""
        if not self.multiplex:
            return []
        socket = mux_socket(self.dir)
        if not socket.exists():
            env = {k: v for k, v in os.environ.items() if k != paths.CELL_ENV}
            started = subprocess.run(
                ["ssh", "-F", str(self.ssh_config), "-o", "LogLevel=ERROR", "-o",
                 "ServerAliveInterval=30", "-o", "ControlMaster=yes", "-o",
                 f"ControlPath={socket}", "-o", f"ControlPersist={MUX_PERSIST_S}",
                 "-f", "-N", "default"], env=env, capture_output=True, timeout=120)
            if started.returncode != 0:
                with open(self.log, "a") as fh:
                    fh.write("# no shared SSH connection: "
                             + started.stderr.decode(errors="replace")[-2000:] + "\n")
                self.multiplex = False
                return []
        return ["-o", "ControlMaster=no", "-o", f"ControlPath={socket}"]

    def ssh(self, command: str, check: bool = True, stdin: bytes | None = None,
            stdout=None, timeout: float | None = None) -> subprocess.CompletedProcess:
        argv = self._ssh_argv(command, "ServerAliveInterval=30")
        proc = subprocess.run(argv[:1] + self._mux_options() + argv[1:], input=stdin,
                              stdout=stdout or subprocess.PIPE, stderr=subprocess.PIPE,
                              timeout=timeout)
        with open(self.log, "a") as fh:
            fh.write(f"$ ssh guest {command}\n")
            if stdout is None:
                fh.write(proc.stdout.decode(errors="replace")[-20000:])
            fh.write(proc.stderr.decode(errors="replace")[-20000:])
        if check and proc.returncode != 0:
            err = proc.stderr.decode(errors="replace").strip()[-3000:]
            raise VmError(f"in the guest, `{command}` failed ({proc.returncode}): {err}")
        return proc

    def destroy(self) -> None:
        """Stop the domain and remove it with its storage (the box overlay volume) through
        libvirt, as ``vagrant destroy`` does (its fallback when the domain is not known);
        the directory with Vagrant's state is the caller's to delete."""
        close_mux(self.dir)
        if not (self.dir / "Vagrantfile").exists():
            return
        try:
            remove_domain(self.domain or self.default_domain, self.log)
            return
        except VmError:
            pass        # let Vagrant try, and name what is wrong
        _vagrant(["destroy", "--force"], self.dir, self.log)


UP_DOMAIN = re.compile(r"^==> default:\s+-- Name:\s+(?P<name>\S+)\s*$", re.M)
UP_SSH = re.compile(r"SSH address: (?P<host>[0-9a-fA-F.:]+):(?P<port>\d+)\s*$", re.M)


def up_facts(output: str) -> dict:
    """From ``vagrant up``'s output: the libvirt domain's name (``-- Name:``) and the SSH
    address (``SSH address: HOST:PORT``), each only when printed."""
    out = {}
    m = UP_DOMAIN.search(output)
    if m:
        out["domain"] = m["name"]
    m = UP_SSH.search(output)
    if m:
        out["host"], out["port"] = m["host"], int(m["port"])
    return out


def ssh_config(host: str, port: int, key: str) -> str:
    """The SSH configuration ``vagrant ssh-config`` writes for the box (its key, no host
    key checking: every cell's guest is new)."""
    return (f"Host default\n  HostName {host}\n  User vagrant\n  Port {port}\n"
            "  UserKnownHostsFile /dev/null\n  StrictHostKeyChecking no\n"
            f"  PasswordAuthentication no\n  IdentityFile {key}\n  IdentitiesOnly yes\n"
            "  LogLevel FATAL\n")


# What a boot that will never answer SSH shows on the guest's serial console: a kernel
# panic, or Debian's initramfs giving up (no root file system) or stopped by `break=` and
# opening a shell there, where a console that is a file never gives it input.
CONSOLE_PANIC = re.compile(r"Kernel panic - not syncing[^\n]*|Dropping to a shell[^\n]*|"
                           r"Spawning shell within the initramfs")
# Fault injection for the pipeline's fault campaign and its tests, never set in a normal
# run: the first N boots of each cell stop in the initramfs (seen on the console at once),
# or boot with SSH masked (a guest that never answers: only the boot_stall_s deadline
# sees it).
HANG_BOOTS_ENV = "SLIMIO_REPRO_HANG_BOOTS"
MUTE_BOOTS_ENV = "SLIMIO_REPRO_MUTE_BOOTS"
HANG_CMDLINE = "break=top"
MUTE_CMDLINE = "systemd.mask=ssh.service systemd.mask=ssh.socket"
# What RunningVm.start_again logs when the restarted guest did not answer where it was.
NO_SSH_AT_LAST_ADDRESS = "no SSH at the last boot's address"
# vagrant up's line when the guest answered: a deadline passing after it is no hang.
UP_READY = "Machine booted and ready!"


def injected_faults() -> list[str]:
    """Per boot attempt, the kernel command line the fault-injection variables add."""
    hang = int(os.environ.get(HANG_BOOTS_ENV, "0") or 0)
    mute = int(os.environ.get(MUTE_BOOTS_ENV, "0") or 0)
    return [HANG_CMDLINE] * hang + [MUTE_CMDLINE] * mute


def console_panic(console: Path) -> str | None:
    """The line on the guest's console that says its boot stopped, if any."""
    try:
        with open(console, "rb") as fh:
            m = CONSOLE_PANIC.search(fh.read().decode(errors="replace"))
    except FileNotFoundError:
        return None
    return m.group(0).strip() if m else None


def console_tail(console: Path, lines: int = 2) -> str:
    """The console's last lines, for an error message (empty when it has none)."""
    try:
        text = console.read_bytes().decode(errors="replace")
    except FileNotFoundError:
        return "; the guest's console is empty"
    tail = [line.strip() for line in text.splitlines() if line.strip()][-lines:]
    return "; its console ends: " + " | ".join(tail) if tail else "; its console is empty"


def _stop_group(proc: subprocess.Popen, grace_s: float = 10) -> None:
    """SIGTERM the process group ``proc`` leads, SIGKILL it after ``grace_s``."""
    for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 30)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


class DomainWatch:
    """While the block runs, look at the domain every ``interval_s``: a domain that libvirt
    paused on an I/O error (QEMU's default when a write to the NVMe image fails, e.g. the
    disk under work_dir is full) would hang the cell's SSH command until its timeout, so
    it is destroyed at once and :attr:`why` says what happened and what to do."""

    def __init__(self, domain: str, image: Path, interval_s: float = 2.0):
        self.domain, self.image, self.interval_s = domain, image, interval_s
        self.why: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def start(self) -> "DomainWatch":
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread.is_alive():
            self._stop.set()
            self._thread.join()

    def _watch(self) -> None:
        while not self._stop.wait(self.interval_s):
            state = _virsh("domstate", self.domain, "--reason").stdout.strip()
            if state.startswith("paused") and "error" in state:
                usage = shutil.disk_usage(self.image.parent)
                self.why = (f"libvirt paused the VM ({state}): a write to its NVMe image "
                            f"{self.image} failed; its file system has "
                            f"{usage.free / 2**30:.2f} GiB free of {usage.total / 2**30:.1f} "
                            "GiB. Free space there, or point testbeds.vm.work_dir at a "
                            "larger file system, and run again")
                _virsh("destroy", self.domain)
                return


# Free space under which a failed guest write is blamed on the disk under work_dir.
FULL_DISK_BYTES = 64 << 20


def full_disk_note(vm_dir: Path) -> str:
    """What to add to a guest failure when the file system of the NVMe image is full: the
    guest sees the host's ENOSPC as its device's write errors."""
    usage = shutil.disk_usage(vm_dir)
    if usage.free >= FULL_DISK_BYTES:
        return ""
    return (f"\nThe file system of the VM's NVMe image ({vm_dir}) has "
            f"{usage.free / 2**20:.0f} MiB free of {usage.total / 2**30:.1f} GiB: the "
            "guest's writes failed for want of space there. Free space, or point "
            "testbeds.vm.work_dir at a larger file system, and run again")


def domain_name(vm_dir: Path) -> str:
    """The libvirt domain of the VM in ``vm_dir``: vagrant-libvirt names it after the
    directory and the machine (``default``)."""
    return f"{vm_dir.name}_default"


# Every cell's VM directory (so its domain and root-disk volume) is named
# sr-<run>-<cell id>: <run> is a hash of the run's results directory, so two runs' cells of
# one id never share a VM, and `slimio-repro doctor` finds any VM a cell left by its prefix.
CELL_VM_PREFIX = "sr-"


def run_vm_prefix(results_dir: Path) -> str:
    """What the names of every VM, lease and tagged process of the run into
    ``results_dir`` start with: ``sr-<run>-``."""
    run = hashlib.sha256(str(results_dir.resolve()).encode()).hexdigest()[:8]
    return f"{CELL_VM_PREFIX}{run}-"


def cell_vm_name(results_dir: Path, cell_id: str) -> str:
    return f"{run_vm_prefix(results_dir)}{cell_id}"


def remove_domain(domain: str, log: Path | None = None) -> None:
    """``virsh destroy`` (if running) and ``virsh undefine --remove-all-storage``: the
    domain and the volumes of its disks (the box overlay in the pool) are gone; anything
    QEMU was given outside libvirt (the NVMe image in the cell's directory) is not."""
    virsh = functools.partial(_virsh, log=log)
    state = virsh("domstate", domain)
    if state.returncode != 0:
        raise VmError(f"libvirt has no domain {domain}: {state.stderr.strip()}")
    if state.stdout.strip() not in ("shut off", "crashed"):
        virsh("destroy", domain)
    gone = virsh("undefine", domain, "--remove-all-storage")
    if gone.returncode != 0:
        raise VmError(f"`virsh undefine {domain} --remove-all-storage` failed: "
                      f"{gone.stderr.strip()}")


def _repo_tar(files: list[str] = GUEST_REPO_FILES,
              extra: dict[str, bytes] | None = None) -> bytes:
    """The guest's copy of the code, with bytecode compiled here: a fresh guest would compile
    every module again under TCG. The bytecode is tagged for this Python (cpython-3XY); the
    guest's Python ignores it unless it is the same minor version (3.11 on both today).
    ``extra`` adds files by name (the cell's plan)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar, \
            tempfile.TemporaryDirectory() as tmp:
        for name, data in (extra or {}).items():
            info = tarfile.TarInfo(name)
            # A minute old: the guest's clock may be a little behind this one's.
            info.size, info.mtime, info.mode = len(data), int(time.time()) - 60, 0o644
            tar.addfile(info, io.BytesIO(data))
        for rel in files:
            src = paths.REPO_ROOT / rel
            tar.add(src, arcname=rel,
                    filter=lambda t: None if "__pycache__" in t.name else t)
            for py in ([src] if src.suffix == ".py" else sorted(src.rglob("*.py"))):
                pyc = Path(importlib.util.cache_from_source(str(py)))
                out = Path(tmp) / pyc.name
                py_compile.compile(str(py), cfile=str(out), doraise=True)
                info = tar.gettarinfo(out, arcname=str(pyc.relative_to(paths.REPO_ROOT)))
                info.mtime = py.stat().st_mtime  # not newer than the guest's clock
                with open(out, "rb") as fh:
                    tar.addfile(info, fh)
    return buf.getvalue()


def guest_plan(plan: CellPlan) -> CellPlan:
    """The cell's plan as the guest sees it: the builds baked into the box (also for a bare
    cell on a device, which a VM test runs in a guest whose namespace stands in for it)."""
    bin_dir = Path(plan.redis_bin_dir)
    bare = plan.bare
    if bare is not None and bare.device is not None:
        bare = dataclasses.replace(bare, device=dataclasses.replace(
            bare.device, fio_bin=layout.GUEST_FIO))
    return dataclasses.replace(
        plan, redis_bin_dir=f"{GUEST_BUILD_DIR}/{bin_dir.parent.parent.name}/"
                            f"{bin_dir.parent.name}/bin",
        ycsb_dir=(f"{GUEST_BUILD_DIR}/ycsb/{Path(plan.ycsb_dir).name}"
                  if plan.ycsb_dir else None), bare=bare)


def boot_files(box_file: Path, vm_dir: Path) -> dict:
    """The box's kernel and initramfs, copied into the cell's VM directory (where libvirt's
    QEMU can read them), and its kernel command line: the VM boots them directly."""
    record = json.loads(box_file.with_suffix(".json").read_text())
    out = {"kernel_cmdline": record["kernel_cmdline"]}
    for name in ("kernel", "initrd"):
        src = box_file.with_name(record[f"{name}_file"])
        if not src.is_file():
            raise VmError(f"{src} is missing: rebuild the box "
                          "(`snakemake --cores all build_guest_box`)")
        dest = vm_dir / f"boot-{name}"
        shutil.copyfile(src, dest)
        os.chmod(dest, 0o644)
        out[name] = str(dest)
    return out


def spec(plan: CellPlan, vm_dir: Path, box: str, box_file: Path, boot: dict,
         network: dict) -> dict:
    """What ``testbed/Vagrantfile`` reads (vm.json): the box, the VM's size and accelerator,
    the NVMe device, the ``boot`` files (:func:`boot_files`) and the ``network``
    (:func:`management_network`)."""
    vm, profile = plan.vm, plan.vm.device
    accel = accelerator(vm.accel)
    emulator = vm.emulator_path or (paths.FEMU_EMULATOR if profile.emulator == "femu" else
                                    shutil.which("qemu-system-x86_64")
                                    or "/usr/bin/qemu-system-x86_64")
    qemu_args = device_qemu_args(profile, vm_dir / "nvme.img")
    if accel["accel"] == "tcg":
        qemu_args += ["-cpu", vm.tcg_cpu]   # testbeds.vm.tcg_cpu says why not plain max
    return {"box": box, "ssh_private_key": str(box_file) + ".key",
            "boot_timeout_s": vm.boot_timeout_s, "storage_pool": vm.storage_pool,
            "cpus": vm.cpus, "memory_mb": vm.memory_mb, "accel": accel["accel"],
            "accel_reason": accel["reason"], "emulator_path": emulator,
            "console_log": str(vm_dir / "console.log"), "qemu_args": qemu_args,
            **boot, "management_network": network,
            "device_profile": profile.as_dict(), "cell": plan.id}


DEFAULT_WORK_DIR = Path(paths.VM_WORK_DIR)


def work_dir(setting: str | None) -> Path:
    """Where cells' VM directories go (testbeds.vm.work_dir); libvirt's QEMU (its own user)
    must reach them."""
    work = Path(setting) if setting else DEFAULT_WORK_DIR
    work = work if work.is_absolute() else paths.REPO_ROOT / work
    work.mkdir(parents=True, exist_ok=True)
    for d in [work, *work.parents]:
        if not d.stat().st_mode & 0o001:
            raise VmError(f"testbeds.vm.work_dir {work}: {d} is not searchable by other "
                          "users, so libvirt's QEMU cannot open the NVMe backing file in it; "
                          f"choose a directory like {DEFAULT_WORK_DIR} (or chmod o+x {d})")
    return work


def make_vm(plan: CellPlan, vm_dir: Path, box_file: Path, log: Path,
            multiplex: bool = False) -> RunningVm:
    """The VM of ``plan`` (its size, accelerator and a blank NVMe namespace) in ``vm_dir``,
    not yet booted (:meth:`RunningVm.up`); the box imported into libvirt's pool first.
    ``multiplex``: its SSH commands share one connection (:class:`RunningVm`)."""
    box = ensure_box(box_file, plan.vm.storage_pool, log)
    image = vm_dir / "nvme.img"
    with open(image, "xb") as fh:
        fh.truncate(plan.vm.device.capacity_bytes)
    os.chmod(image, 0o666)  # libvirt's QEMU runs as its own user
    return RunningVm(vm_dir, spec(plan, vm_dir, box, box_file, boot_files(box_file, vm_dir),
                           management_network()), log, multiplex=multiplex)


def guest_python(vm: RunningVm, args: str, extra: dict[str, bytes], timeout: float,
                 clear: list[str] = ()) -> subprocess.CompletedProcess:
    """One SSH command: the code (and the ``extra`` files, e.g. a plan) go into the guest's
    repository directory, the paths in ``clear`` are removed, and ``python3 -m
    slimio_repro.agent ARGS`` runs as root; its output (stdout and stderr) is returned,
    whatever its exit status."""
    code = _repo_tar(extra=extra)
    return vm.ssh(f"sudo rm -rf {GUEST_REPO_DIR} {' '.join(clear)} && "
                  f"sudo mkdir -p {GUEST_REPO_DIR} {GUEST_CELLS_DIR} && "
                  f"sudo tar -xzf - -C {GUEST_REPO_DIR} && "
                  f"cd / && sudo env PYTHONPATH={GUEST_PYTHON_DIR}:{GUEST_REPO_DIR}/src "
                  f"python3 -m slimio_repro.agent {args} 2>&1", check=False,
                  stdin=code, timeout=timeout)


def run_cell(plan: CellPlan, out_dir: Path, box_file: Path, attempt: int = 1,
             guests: FreshGuests | None = None) -> Path:
    """Run one vm-testbed cell in a VM of its own, or in a guest ``guests`` kept from an
    earlier cell; write its raw directory ``out_dir``. A motivation cell
    (``plan.motivation``) runs its scenarios (agent.motivation_cells) instead of the
    matrix's workload."""
    command = "motivation-cell" if plan.motivation is not None else "run-cell"
    box_record = json.loads(box_file.with_suffix(".json").read_text())
    s = run_in_vm(plan, out_dir, box_file,
                  f"{command} --expect-box-id {box_record['inputs_sha256']} "
                  f"--expect-kernel {box_record['guest_kernel']}",
                  timeout=plan.workload.timeout_s * 3, guests=guests)
    partial, phases, host_prov, the_spec = s["partial"], s["phases"], s["host"], s["spec"]
    records, profile = partial / "vm", plan.vm.device
    prov = json.loads((partial / layout.RAW_PROVENANCE).read_text())
    # The guest timed its own phases; what else the guest run took (the code's copy, its
    # Python's start, reading the plan) is guest_overhead.
    guest_phases = prov.get("phases_s", {})
    phases.add("guest_overhead", max(0.0, s["guest_s"] - sum(guest_phases.values())))
    for name, seconds in guest_phases.items():  # the guest's teardown adds to the host's
        phases.add(name, seconds)
    prov["phases_s"] = phases.as_dict()
    prov["cell_total_s"] = round(time.monotonic() - s["t_start"], 3)
    host_prov["utc_end"] = provenance.utc_now()
    host_prov["phases_s"] = prov["phases_s"]
    host_prov["cell_total_s"] = prov["cell_total_s"]
    (records / "host-provenance.json").write_text(json.dumps(host_prov, indent=2) + "\n")
    prov["attempt"] = attempt
    prov["git"] = host_prov["git"]      # the guest has a copy of the sources, not the checkout
    prov["vm"] = {"host": host_prov["host"], "node": host_prov["node"],
                  "tools": host_prov["tools"],
                  "box": host_prov["box"], "boot_attempts": host_prov["boot_attempts"],
                  "guest": host_prov["guest"],
                  "accel": the_spec["accel"], "accel_reason": the_spec["accel_reason"],
                  "cpus": the_spec["cpus"], "memory_mb": the_spec["memory_mb"],
                  "device_profile": profile.as_dict(),
                  "qemu_device_args": the_spec["qemu_args"]}
    (partial / layout.RAW_PROVENANCE).write_text(json.dumps(prov, indent=2) + "\n")
    partial.rename(out_dir.resolve())
    return out_dir.resolve()


class FreshGuests:
    """Where :func:`run_in_vm` gets its VM by default: a VM booted for the cell, in a
    directory named after the run and the cell (:func:`cell_vm_name`), destroyed after it.
    ``slimio_repro.run.guests`` keeps a booted guest for the next cell instead."""

    def vm_dir(self, plan: CellPlan, out_dir: Path) -> Path:
        return work_dir(plan.vm.work_dir) / cell_vm_name(out_dir.parent.parent, plan.id)

    def adopt(self, plan: CellPlan, vm_dir: Path, log: Path) -> tuple[RunningVm, dict] | None:
        """A guest booted earlier, made ready for this cell, and what that took; None when
        there is none (the cell boots its own)."""
        return None

    def park(self, vm: RunningVm, plan: CellPlan, record: dict) -> bool:
        """Keep ``vm`` (whose cell succeeded) for the next cell: False = destroy it."""
        return False


def guest_key(plan: CellPlan, box_file: Path) -> str:
    """What makes two cells' VMs the same machine: everything :func:`spec` takes from the
    plan and the box (the device profile, accelerator, CPU, size, emulator, pool)."""
    record = json.loads(box_file.with_suffix(".json").read_text())
    facts = {**plan.vm.machine, "box": record["inputs_sha256"],
             "box_file": str(box_file.resolve())}
    return hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest()


def run_in_vm(plan: CellPlan, out_dir: Path, box_file: Path, guest_args: str,
              timeout: float, guests: FreshGuests | None = None) -> dict:
    """Boot ``plan``'s VM (a blank namespace), or take a guest ``guests`` kept from an
    earlier cell (its namespace made blank again), run ``python3 -m slimio_repro.agent
    GUEST_ARGS --plan-json PLAN --out DIR`` in it, copy DIR back into ``out_dir``'s
    ``.partial`` sibling (with the VM's own records in its ``vm/``: vagrant.log, vm.json,
    console.log, emulator.log), and destroy the VM by any path out, unless the cell succeeded
    and ``guests`` keeps it. The caller renames the partial directory when it has finished
    it. Returns ``partial``, the host's ``phases`` (boot (for a kept guest: its reset),
    copy_back, teardown), ``guest_s`` (the guest command's seconds), ``t_start`` (monotonic),
    the ``host`` provenance (``guest``: booted for the cell or kept, and its reset) and the
    VM ``spec``."""
    guests = guests or FreshGuests()
    out_dir, box_file = out_dir.resolve(), box_file.resolve()
    if out_dir.exists():
        raise VmError(f"{out_dir} already exists; refusing to overwrite a finished cell "
                      "(delete it to run the cell again)")
    vm_dir = guests.vm_dir(plan, out_dir)
    partial = out_dir.with_name(out_dir.name + ".partial")
    if partial.exists():
        destroy_stale(partial)
    check_vm_cell_space(plan, out_dir, vm_dir.parent, box_file)   # before it writes anything
    records = partial / "vm"
    records.mkdir(parents=True)
    log = records / "vagrant.log"
    phases = cellphases.Phases()
    box_record = json.loads(box_file.with_suffix(".json").read_text())
    host_prov = {"host": provenance.host(), "node": provenance.node(), "git": provenance.git(),
                 "tools": provenance.vm_tools(), "box": box_record,
                 "utc_start": provenance.utc_now()}
    t_cell = time.monotonic()
    t0 = time.monotonic()
    kept = guests.adopt(plan, vm_dir, log) if vm_dir.exists() else None
    if kept is None:
        if vm_dir.exists():
            destroy_stale(vm_dir)
        vm_dir.mkdir(parents=True)
        os.chmod(vm_dir, 0o755)
        vm = make_vm(plan, vm_dir, box_file, log, multiplex=True)
        host_prov["guest"] = {"kept": False, "cell": 1, "booted_by": plan.id,
                              "booted_utc": host_prov["utc_start"]}
    else:
        vm, host_prov["guest"] = kept
        host_prov["boot_attempts"] = []
        guest_args += f" --blank-at {host_prov['guest']['reset']['fdp_host_bytes_written']}"
    # Getting a guest: the reset of a kept one, or a VM made (after a kept one that failed
    # its reset), then booted below.
    phases.add("boot", time.monotonic() - t0)
    the_spec = vm.spec
    (records / "vm.json").write_text(json.dumps(the_spec, indent=2) + "\n")
    domain_log = _emulator_log(vm_dir)
    log_offset = domain_log.stat().st_size if domain_log.exists() else 0
    console = Path(the_spec["console_log"])
    console_offset = console.stat().st_size if kept is not None and console.exists() else 0
    watch = None
    try:
        if kept is None:
            with phases.phase("boot"):
                host_prov["boot_attempts"] = vm.boot(
                    plan.vm.boot_stall_s, plan.vm.boot_attempts,
                    faults=injected_faults())
        guest_raw = f"{GUEST_CELLS_DIR}/raw/{plan.id}"
        watch = DomainWatch(vm.domain, vm_dir / "nvme.img").start()
        t0 = time.monotonic()
        # One SSH command for the whole cell: the code and the plan go in, the guest
        # provisions itself (agent.provision) after checking that it is the box that was
        # booted, then runs the cell.
        proc = guest_python(
            vm, f"{guest_args} --plan-json {GUEST_REPO_DIR}/{layout.RAW_PLAN} "
                f"--out {guest_raw}",
            {layout.RAW_PLAN: guest_plan(plan).to_json().encode()},
            timeout=timeout, clear=[guest_raw, f"{guest_raw}.partial"])
        (records / f"guest-{guest_args.split()[0]}.log").write_bytes(proc.stdout)
        if watch.why:
            raise VmError(f"the cell stopped: {watch.why}")
        if proc.returncode != 0:
            state = _virsh("domstate", vm.domain, "--reason").stdout.strip()
            if not state.startswith("running"):
                raise VmError(f"the VM stopped while its guest ran the cell (libvirt: "
                              f"{state or 'no such domain'}): its QEMU exited or was killed "
                              "(its output is in the cell's vm/emulator.log). Snakemake runs "
                              "the cell again (cell_retries)" + full_disk_note(vm_dir))
            tail = "\n".join(proc.stdout.decode(errors="replace").splitlines()[-25:])
            raise VmError(f"the cell failed inside the guest ({proc.returncode}):\n{tail}"
                          + full_disk_note(vm_dir))
        guest_cell_s = time.monotonic() - t0
        with phases.phase("copy_back"):
            with open(vm_dir / "raw.tar", "wb") as fh:
                vm.ssh(f"sudo tar -C {guest_raw} -cf - .", stdout=fh)
            with tarfile.open(vm_dir / "raw.tar") as tar:
                tar.extractall(partial, filter="data")
            (vm_dir / "raw.tar").unlink()
        watch.stop()
    except BaseException as exc:
        if watch is not None:
            watch.stop()
        _keep_console(vm_dir, records, console_offset)
        try:
            vm.destroy()
        finally:
            _keep_emulator_output(vm_dir, records, log_offset)
            shutil.rmtree(vm_dir, ignore_errors=True)
        if watch is not None and watch.why and watch.why not in str(exc):
            raise VmError(f"the cell stopped: {watch.why}") from exc
        raise
    _keep_console(vm_dir, records, console_offset)
    with phases.phase("teardown"):
        kept_for_next = guests.park(vm, plan, host_prov["guest"])
        if not kept_for_next:
            vm.destroy()
        _keep_emulator_output(vm_dir, records, log_offset)
        if not kept_for_next:
            shutil.rmtree(vm_dir, ignore_errors=True)
    return {"partial": partial, "phases": phases, "guest_s": guest_cell_s,
            "t_start": t_cell, "host": host_prov, "spec": the_spec}


def run_overwrite(plan: CellPlan, out_dir: Path, box_file: Path, utilization: float,
                  warm_drive_writes: float, measure_drive_writes: float, seed: int) -> Path:
    """``slimio-repro gc-check``'s run: uniform random overwrites of ``plan``'s blank
    namespace in its own VM (:mod:`slimio_repro.agent.overwrite`), its records (trace, FDP
    statistics per phase, the emulator's output) in ``out_dir``."""
    box_record = json.loads(box_file.with_suffix(".json").read_text())
    written = utilization + warm_drive_writes + measure_drive_writes
    s = run_in_vm(
        plan, out_dir, box_file,
        f"overwrite --utilization {utilization} --warm-drive-writes {warm_drive_writes} "
        f"--measure-drive-writes {measure_drive_writes} --seed {seed} "
        f"--expect-box-id {box_record['inputs_sha256']} "
        f"--expect-kernel {box_record['guest_kernel']}",
        # Generous: under TCG FEMU takes 20-30 MB/s of 4 KiB random writes.
        timeout=600 + 300 * written * plan.vm.device.capacity_gib)
    partial = s["partial"]
    host = {**s["host"], "utc_end": provenance.utc_now(), "phases_s": s["phases"].as_dict(),
            "guest_s": round(s["guest_s"], 3),
            "total_s": round(time.monotonic() - s["t_start"], 3),
            "accel": s["spec"]["accel"], "emulator_path": s["spec"]["emulator_path"],
            "qemu_device_args": s["spec"]["qemu_args"]}
    (partial / "vm" / "host-provenance.json").write_text(json.dumps(host, indent=2) + "\n")
    partial.rename(out_dir.resolve())
    return out_dir.resolve()


def _keep_console(vm_dir: Path, records: Path, offset: int = 0) -> None:
    """The guest's console from ``offset`` on (a kept guest's console goes on over its
    cells), and those of boots that hung (console-attemptN.log)."""
    for console in [vm_dir / "console.log", *sorted(vm_dir.glob("console-attempt*.log"))]:
        if console.exists():
            with open(console, "rb") as src, open(records / console.name, "wb") as dest:
                if console.name == "console.log":
                    src.seek(offset)
                shutil.copyfileobj(src, dest)


# Where libvirt writes a domain's QEMU command line and output (vagrant-libvirt names the
# domain after the VM's directory and its machine, "default"), and how each start begins.
QEMU_LOG_PATTERN = "/var/log/libvirt/qemu/{domain}.log"
QEMU_LOG_START = ": starting up libvirt version"
# The cell's copy, in its raw directory's vm/.
EMULATOR_LOG = Path(layout.RAW_EMULATOR_LOG).name


def emulator_output(log_text: str) -> str:
    """The last start's part of a libvirt domain log (the log grows over every start of a
    domain of that name): its command line and the emulator's own output (FEMU reports its
    garbage collection there)."""
    lines = log_text.splitlines(keepends=True)
    starts = [i for i, line in enumerate(lines) if QEMU_LOG_START in line]
    return "".join(lines[starts[-1]:] if starts else lines)


def _emulator_log(vm_dir: Path) -> Path:
    return Path(QEMU_LOG_PATTERN.format(domain=domain_name(vm_dir)))


def _keep_emulator_output(vm_dir: Path, records: Path, offset: int) -> None:
    """Keep what the domain log gained since ``offset`` (its size before the cell's boot),
    from the last start on."""
    log = _emulator_log(vm_dir)
    if log.exists() and log.stat().st_size > offset:
        with open(log, "rb") as fh:
            fh.seek(offset)
            text = fh.read().decode(errors="replace")
        (records / EMULATOR_LOG).write_text(emulator_output(text))


def destroy_stale(directory: Path) -> None:
    """Destroy a VM an interrupted run left behind (its domain and root disk), then delete
    its directory."""
    close_mux(directory)
    try:
        remove_domain(domain_name(directory))
    except VmError:
        if (directory / "Vagrantfile").exists() and (directory / ".vagrant").exists():
            try:
                _vagrant(["destroy", "--force"], directory)
            except VmError:
                pass
    shutil.rmtree(directory, ignore_errors=True)

