"""The vm testbed's host side without a VM: device profiles, QEMU options, the VM spec."""

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from slimio_repro.testbed import accel
from slimio_repro.testbed import hostcpu
from slimio_repro.testbed import box
from slimio_repro.plan import sizing as cells
from slimio_repro import plan as configmod
from slimio_repro import paths
from slimio_repro.testbed import vm


def test_every_shipped_profile_loads():
    names = sorted(p.stem for p in paths.FEMU_DIR.glob("*.yaml"))
    assert {"qemu-fdp-smoke", "qemu-nofdp-smoke", "qemu-fdp-paper", "femu-fdp-paper"} <= set(names)
    for name in names:
        assert configmod.load_device_profile(name).capacity_gib > 0


def test_fdp_profile_becomes_qemu_nvme_fdp_options(tmp_path):
    args = vm.device_qemu_args(configmod.load_device_profile("qemu-fdp-smoke"), tmp_path / "n.img")
    joined = " ".join(args)
    assert "nvme-subsys,id=slimio-subsys,fdp=on,fdp.runs=64M,fdp.nrg=1,fdp.nruh=8" in joined
    # libvirt puts its own devices on the first free PCI slots: the controller's is fixed.
    assert "subsys=slimio-subsys,bus=pci.0,addr=0x10" in joined
    assert f"file={tmp_path / 'n.img'},if=none" in joined
    assert "logical_block_size=4096,physical_block_size=4096,fdp.ruhs=0-7" in joined


def test_profile_without_fdp_has_no_placement_options(tmp_path):
    joined = " ".join(vm.device_qemu_args(configmod.load_device_profile("qemu-nofdp-smoke"),
                                          tmp_path / "nvme.img"))
    assert "fdp" not in joined.replace(str(tmp_path), "") and "nvme-ns,drive=slimio-nvm,nsid=1" in joined


def test_paper_profiles_have_the_papers_geometry():
    for name in ("qemu-fdp-paper", "femu-fdp-paper"):
        p = configmod.load_device_profile(name)
        assert (p.capacity_gib, p.reclaim_unit_handles, p.reclaim_unit_size_mib) == \
            (180, 8, 1024)
    femu = vm.device_qemu_args(configmod.load_device_profile("femu-fdp-paper"), None)
    assert femu[0] == "-device" and femu[1].startswith("femu,devsz_mb=184320,")


@pytest.mark.parametrize("text, message", [
    ("emulator: qemu\ncapacity_gib: 8\nlba_size_bytes: 4096\nfdp: true\n",
     "FDP needs a positive integer reclaim_unit_size_mib"),
    ("emulator: qemu\ncapacity_gib: 8\nlba_size_bytes: 1000\nfdp: false\n",
     "lba_size_bytes 1000 must be 512 or 4096"),
    ("emulator: bochs\ncapacity_gib: 8\nlba_size_bytes: 512\nfdp: false\n",
     "emulator 'bochs' is neither qemu nor femu"),
    ("emulator: qemu\ncapacity_gb: 8\nlba_size_bytes: 512\nfdp: false\n",
     r"unknown keys \['capacity_gb'\], missing keys \['capacity_gib'\]"),
])
def test_bad_profiles_are_refused_naming_the_problem(tmp_path, text, message):
    f = tmp_path / "p.yaml"
    f.write_text(text)
    with pytest.raises(configmod.ConfigError, match=message):
        configmod.load_device_profile(str(f))


def test_femu_profiles_are_the_geometry_the_artifacts_ftl_builds():
    """The artifact's FTL (fdpftl.c, ssd_init_params) sizes the flash from the namespace and
    gc_thres_pcent: the paper profile is its 240 reclaim units of 1 GiB on 64 dies; the gc
    profile's 1 GiB on 8 dies of 1 MiB blocks is 1360 blocks, which FEMU reported in its FDP
    configuration log page in a guest here (fdp.c puts its block count where the reclaim
    unit size belongs)."""
    paper = configmod.load_device_profile("femu-fdp-paper").femu_geometry()
    assert (paper["dies"], paper["reclaim_units"], paper["reclaim_unit_mib"]) == (64, 240, 1024)
    gc = configmod.load_device_profile("femu-fdp-gc")
    assert gc.femu_geometry()["reclaim_units"] == 170
    assert gc.reported_fdp_config() == {"reclaim_unit_handles": 8, "reclaim_groups": 1,
                                        "reclaim_unit_size_bytes": 1360}
    args = vm.device_qemu_args(gc, None)[1]
    assert "femu_mode=6" in args and args.endswith("bus=pci.0,addr=0x10")


def test_a_femu_profile_that_says_another_geometry_than_its_options_is_refused(tmp_path):
    text = configmod.load_device_profile("femu-fdp-gc").path
    f = tmp_path / "femu-wrong.yaml"
    f.write_text((paths.REPO_ROOT / text).read_text().replace(
        "reclaim_unit_size_mib: 8", "reclaim_unit_size_mib: 4"))
    with pytest.raises(configmod.ConfigError, match=r"build \{'reclaim_unit_size_mib': 8.*"
                                                    r"8 dies of 170 blocks of 1 MiB"):
        configmod.load_device_profile(str(f))


def test_unknown_profile_lists_the_known_ones():
    with pytest.raises(configmod.ConfigError, match="known profiles: .*qemu-fdp-smoke"):
        configmod.load_device_profile("nope")


def _config(**vm_settings):
    return configmod.load([paths.CONFIG_DIR / "config.yaml"],
                          {"testbeds": {"vm": vm_settings}} if vm_settings else None)


def test_tcg_spec_asks_qemu_for_max_without_rep_movsb(tmp_path):
    cfg = _config(accel="tcg")
    plan = configmod.make(cfg).cell("vm-baseline-redis-benchmark-periodical-r1")
    boot = {"kernel": "k", "initrd": "i", "kernel_cmdline": "root=/dev/vda1"}
    net = {"name": "n", "address": "192.168.124.0/24"}
    spec = vm.spec(plan, tmp_path, "slimio-repro-x", tmp_path / "b.box", boot, net)
    assert spec["accel"] == "tcg" and spec["qemu_args"][-2:] == ["-cpu", "max,-erms,-fsrm"]
    assert spec["management_network"] == net and spec["kernel_cmdline"] == "root=/dev/vda1"
    assert spec["cpus"] == 2 and spec["memory_mb"] == 4096
    assert spec["ssh_private_key"] == str(tmp_path / "b.box") + ".key"
    kvm = vm.spec(configmod.make(_config(accel="kvm")).cell(plan.id), tmp_path, "b",
                  tmp_path / "b.box", boot, net)
    assert "-cpu" not in kvm["qemu_args"]
    plain = vm.spec(configmod.make(_config(accel="tcg", tcg_cpu="max")).cell(plan.id),
                    tmp_path, "b", tmp_path / "b.box", boot, net)
    assert plain["qemu_args"][-2:] == ["-cpu", "max"]


def test_a_malformed_tcg_cpu_is_refused_at_planning():
    with pytest.raises(configmod.ConfigError, match="tcg_cpu"):
        _config(tcg_cpu="max -erms")


def test_only_the_current_box_volume_is_kept():
    # Names as vagrant-libvirt 0.11.2 made them in this host's pool, with a cell's overlay.
    keep = "slimio-repro-72c636b92ac1_vagrant_box_image_0_1795617852_box.img"
    vols = [keep, "slimio-repro-72c636b92ac1_vagrant_box_image_0_1795610000_box.img",
            "slimio-repro-0123456789ab_vagrant_box_image_0_1795500000_box.img",
            "vm-slimio-redis-benchmark-periodical-r1_default.img",
            "other_vagrant_box_image_0_1_box.img"]
    assert vm.stale_box_volumes(vols, keep) == vols[1:3]
    assert vm.stale_box_volumes(vols, None) == []


def test_volume_names_are_read_from_virsh_vol_list_table():
    # `virsh -c qemu:///system vol-list --pool default` of libvirt 9.0.0 (bookworm), which
    # has no --name; captured on this host with four box volumes in the pool.
    listing = (paths.REPO_ROOT / "tests/fixtures/vm/virsh-vol-list-9.0.0.txt").read_text()
    names = vm.volume_names(listing)
    assert len(names) == 4 and all(n.startswith("slimio-repro-") for n in names)
    assert "slimio-repro-72c636b92ac1_vagrant_box_image_0_1795617852_box.img" in names
    assert vm.volume_names(" Name   Path\n------------\n\n") == []
    assert vm.volume_names("") == []


def test_box_volume_follows_the_box_image_mtime(tmp_path, monkeypatch):
    monkeypatch.setenv("VAGRANT_HOME", str(tmp_path))
    assert vm.box_volume("slimio-repro-x") is None
    image = tmp_path / "boxes" / "slimio-repro-x" / "0" / "libvirt" / "box.img"
    image.parent.mkdir(parents=True)
    image.write_bytes(b"")
    os.utime(image, (1795617852, 1795617852))
    assert vm.box_volume("slimio-repro-x") == \
        "slimio-repro-x_vagrant_box_image_0_1795617852_box.img"


def test_ensure_box_reads_vagrants_box_directory(tmp_path, monkeypatch):
    """The box is added only when Vagrant's directory lacks it, older slimio-repro boxes
    are removed, and every stale volume of the pool is deleted (the commands are recorded
    here, not run: test_vm_e2e runs them for real)."""
    monkeypatch.setenv("VAGRANT_HOME", str(tmp_path / "vagrant.d"))
    box_file = tmp_path / "slimio-guest.box"
    box_file.with_suffix(".json").write_text(json.dumps({"inputs_sha256": "a" * 64}))
    name = vm.box_name(box_file)
    ran = []
    monkeypatch.setattr(vm, "_vagrant", lambda args, cwd, log=None: ran.append(args) or "")
    listing = (" Name   Path\n------\n slimio-repro-old_vagrant_box_image_0_1_box.img  /p/a\n"
               f" {name}_vagrant_box_image_0_7_box.img  /p/b\n other.img /p/c\n")

    def virsh(*args, log=None):
        ran.append(list(args))
        return subprocess.CompletedProcess(args, 0, listing if args[0] == "vol-list" else "", "")
    monkeypatch.setattr(vm, "_virsh", virsh)
    assert vm.ensure_box(box_file, "default", tmp_path / "log") == name
    assert ran[0][:2] == ["box", "add"] and ran[0][-1] == str(box_file)
    ran.clear()
    for box, mtime in ((name, 7), ("slimio-repro-old", 1)):
        image = tmp_path / "vagrant.d" / "boxes" / box / "0" / "libvirt" / "box.img"
        image.parent.mkdir(parents=True)
        image.write_bytes(b"")
        os.utime(image, (mtime, mtime))
    vm.ensure_box(box_file, "default", tmp_path / "log")
    assert ran == [["box", "remove", "--force", "--all", "slimio-repro-old"],
                   ["vol-list", "--pool", "default"],
                   ["vol-delete", "slimio-repro-old_vagrant_box_image_0_1_box.img",
                    "--pool", "default"]]


def test_a_femu_profile_needs_its_emulator_and_room_in_host_ram(tmp_path):
    """FEMU runs under TCG too, but only once built, and its device lives in host RAM: a
    missing binary is refused with the command that builds it, the paper's 180 GiB device
    on this host for its RAM (whether or not FEMU is built)."""
    missing = tmp_path / "no-femu"
    cfg = _config(accel="tcg", device_profile="femu-fdp-gc", emulator_path=str(missing))
    with pytest.raises(configmod.ConfigError, match=f"{missing}.*host_femu_enabled=true"):
        configmod.make(cfg)
    built = tmp_path / "qemu-system-x86_64"
    built.write_text("")
    for emulator in (missing, built):
        cfg = _config(accel="tcg", device_profile="femu-fdp-paper", emulator_path=str(emulator))
        with pytest.raises(configmod.ConfigError, match="180 GiB lives in host RAM"):
            configmod.make(cfg)


def test_guest_config_points_at_the_box_and_says_whether_there_is_fdp():
    cfg = _config()
    cfg["testbeds"]["vm"]["device_profile"] = "qemu-nofdp-smoke"
    cfg["slimio"]["placement_ids"] = {"wal": -1, "wal_snapshot": -1, "on_demand": -1}
    plan = configmod.make(cfg).cell("vm-slimio-ycsb-a-always-r1")
    g = vm.guest_plan(plan)
    assert g.redis_bin_dir == f"{vm.GUEST_BUILD_DIR}/redis-slimio/7.0.15/bin"
    assert g.ycsb_dir.startswith(f"{vm.GUEST_BUILD_DIR}/ycsb/") and g.vm.fdp is False
    assert g.sha256() == plan.sha256(), "the box's paths do not make a cell stale"
    assert plan.redis_bin_dir.startswith(str(paths.REPO_ROOT)), "the host's plan stays"


def test_vagrantfile_reads_everything_from_vm_json():
    text = paths.VAGRANTFILE.read_text()
    for key in ("box", "cpus", "memory_mb", "accel", "emulator_path", "qemu_args",
                "storage_pool", "ssh_private_key", "console_log", "boot_timeout_s"):
        assert f'spec.fetch("{key}")' in text, key
    assert 'libvirt.driver = "qemu"' in text and "synced_folder" in text


def test_box_name_follows_its_inputs(tmp_path):
    b = tmp_path / "slimio-guest.box"
    b.with_suffix(".json").write_text(json.dumps({"inputs_sha256": "ab" * 32}))
    assert vm.box_name(b) == "slimio-repro-abababababab"


def test_box_inputs_hash_changes_with_a_build(tmp_path):
    build = tmp_path / "build" / "redis-baseline" / "7.0.15"
    fio_build = tmp_path / "build" / "fio" / "3.41"
    for b, binary in ((build, "redis-server"), (fio_build, "fio")):
        (b / "bin").mkdir(parents=True)
        (b / "bin" / binary).write_bytes(b"one")
        (b / "build.json").write_text("{}")
    first = box.inputs_sha256([build], fio_build)
    (build / "bin" / "redis-server").write_bytes(b"two")
    second = box.inputs_sha256([build], fio_build)
    assert second != first
    (fio_build / "bin" / "fio").write_bytes(b"two")
    third = box.inputs_sha256([build], fio_build)
    assert third != second
    ycsb_build = tmp_path / "build" / "ycsb" / "0.17.0"
    ycsb_build.mkdir(parents=True)
    (ycsb_build / "build.json").write_text('{"jars": {"a.jar": "1"}}')
    with_ycsb = box.inputs_sha256([build], fio_build, ycsb_build)
    assert with_ycsb != third
    (ycsb_build / "build.json").write_text('{"jars": {"a.jar": "2"}}')
    assert box.inputs_sha256([build], fio_build, ycsb_build) != with_ycsb


def test_accel_probe_without_a_kernel_chooses_tcg(monkeypatch):
    monkeypatch.setattr(accel, "host_kernel", lambda: None)
    monkeypatch.setattr(accel.os.path, "exists", lambda p: True)
    monkeypatch.setattr(accel.os, "access", lambda p, mode: True)
    verdict = accel.probe()
    assert verdict["accel"] == "tcg" and "no kernel" in verdict["reason"]


def test_accel_probe_without_kvm_device_chooses_tcg(monkeypatch):
    monkeypatch.setattr(accel.os.path, "exists", lambda p: False)
    assert accel.probe() == {"accel": "tcg", "reason": "/dev/kvm does not exist"}


def test_accelerator_setting_overrides_the_probe():
    assert vm.accelerator("tcg")["accel"] == "tcg"
    assert vm.accelerator("kvm")["accel"] == "kvm"


def test_work_dir_must_be_reachable_by_libvirts_qemu(tmp_path):
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    with pytest.raises(vm.VmError, match=f"{private} is not searchable by other users"):
        vm.work_dir(str(private / "vm"))
    assert vm.work_dir(None) == vm.DEFAULT_WORK_DIR


def test_up_facts_come_from_what_vagrant_up_printed():
    """The domain name and SSH address as vagrant-libvirt 0.x prints them (captured from a
    cell's vagrant.log), so that neither `vagrant ssh-config` nor `vagrant destroy` has to
    run; a re-up of an existing domain prints no name, and none is made up."""
    out = (Path(__file__).parent / "fixtures" / "vm" / "vagrant-up.log").read_text()
    facts = vm.up_facts(out)
    assert facts == {"domain": "vm-slimio-redis-benchmark-always-r1_default",
                     "host": "192.168.124.101", "port": 22}
    config = vm.ssh_config(facts["host"], facts["port"], "/k/box.key")
    assert "  HostName 192.168.124.101\n  User vagrant\n  Port 22\n" in config
    assert "  IdentityFile /k/box.key\n  IdentitiesOnly yes\n" in config
    assert vm.up_facts("==> default: Machine booted and ready!\n") == {}


QEMU_PROC = paths.REPO_ROOT / "tests/fixtures/vm/qemu-proc"


def test_qemu_threads_are_read_and_classed_from_a_real_proc_tree():
    """tests/fixtures/vm/qemu-proc: /proc/stat and /proc/PID/{stat,task/*/stat} of a cell
    VM's QEMU (10.0, TCG, two vCPUs), copied from this host."""
    pid = int(next(p.name for p in QEMU_PROC.iterdir() if p.name.isdigit()))
    threads = hostcpu.read_threads(pid, QEMU_PROC)
    names = {tid: comm for tid, (comm, _) in threads.items() if tid > 0}
    assert sorted(c for c in names.values() if hostcpu.thread_class(c) == "vcpu") == \
        ["CPU 0/TCG", "CPU 1/TCG"]
    assert {"qemu-system-x86", "worker", "IO mon_iothread"} <= set(names.values())
    assert hostcpu.thread_class("CPU 3/KVM") == "vcpu"
    assert hostcpu.thread_class("worker") == hostcpu.thread_class("CPU 0/TCG x") == "emulation"
    # The process counts every thread's time, also that of workers that have ended.
    process = threads[hostcpu.PROCESS][1]
    assert process >= sum(cpu for tid, (_, cpu) in threads.items() if tid > 0) > 20
    assert threads[hostcpu.HOST][1] > process


def test_host_cores_per_class_over_a_window():
    s = {  # time -> tid -> (name, CPU s): two vCPUs, the main loop, a worker born later
        10.0: {-1: ("host", 100.0), 0: ("q", 50.0), 1: ("CPU 0/TCG", 20.0),
               2: ("CPU 1/TCG", 10.0), 3: ("qemu-system-x86", 5.0)},
        12.0: {-1: ("host", 103.9), 0: ("q", 53.6), 1: ("CPU 0/TCG", 21.8),
               2: ("CPU 1/TCG", 11.4), 3: ("qemu-system-x86", 5.1), 4: ("worker", 0.2)},
        14.0: {-1: ("host", 107.0), 0: ("q", 56.0), 1: ("CPU 0/TCG", 23.0),
               2: ("CPU 1/TCG", 12.0), 3: ("qemu-system-x86", 5.2)}}
    got = hostcpu.cores(s, 10.5, 11.5)      # the samples around it: 10.0 and 12.0
    assert got == pytest.approx({"vcpu": (1.8 + 1.4) / 2, "emulation": (3.6 - 3.2) / 2,
                                 "other": (3.9 - 3.6) / 2})
    # Over 10-14 the worker has ended: its time is in the process's, so in emulation.
    assert hostcpu.cores(s, 10.0, 14.0)["emulation"] == pytest.approx((6.0 - 5.0) / 4)
    assert hostcpu.cores(s, 9.0, 11.0) is None and hostcpu.cores(s, 13.0, 15.0) is None


def test_the_sampler_sees_a_busy_thread(tmp_path):
    """A thread of this process that computes for a second uses about one core."""
    import threading
    import time

    def spin(seconds):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            pass
    sampler = hostcpu.HostCpuSampler(os.getpid(), tmp_path / "cpu.csv", interval_s=0.1).start()
    time.sleep(0.3)
    start = time.time()
    worker = threading.Thread(target=spin, args=(1.0,))
    worker.start()
    worker.join()
    end = time.time()
    time.sleep(0.3)
    sampler.stop()
    used = hostcpu.cores(hostcpu.load(tmp_path / "cpu.csv"), start, end)
    # Nothing here is a vCPU; the spinning thread is at most one core, at least a share of
    # one on a busy host.
    assert used["vcpu"] == 0 and 0.3 < used["emulation"] < 1.3, used
    with pytest.raises(hostcpu.HostCpuError, match=r"no QEMU pid for domain nope"):
        hostcpu.qemu_pid("nope", tmp_path)


def test_a_cell_keeps_only_its_own_start_of_the_domain_log():
    """libvirt appends every start of a domain of one name to one log; a cell keeps the last
    start's part (lines as libvirt 9.0 and the FEMU build wrote them here)."""
    first = ("2026-11-26 18:33:25.562+0000: starting up libvirt version: 9.0.0, package: "
             "9.0.0-4+deb12u2 (Debian), qemu version: 9.0.1, kernel: 6.18.44, hostname: vm\n"
             "gc_thres_pcent 0.750000\n"
             "2026-11-26T18:34:28.019661Z qemu-system-x86_64: terminating on signal 15 from "
             "pid 23367 (libvirtd)\n")
    second = ("2026-11-26 18:41:12.427+0000: starting up libvirt version: 9.0.0, package: "
              "9.0.0-4+deb12u2 (Debian), qemu version: 9.0.1, kernel: 6.18.44, hostname: vm\n"
              "msftl_thread start@@@@@@@@@\n"
              "2026-11-26 18:42:09.357+0000: shutting down, reason=destroyed\n")
    assert vm.emulator_output(first + second) == second
    assert vm.emulator_output("no start line\n") == "no start line\n"


# A guest kept for the next cell (run/guests.py) ------------------------------------------------
def _box_record(tmp_path, inputs="i1"):
    box_file = tmp_path / "b.box"
    box_file.with_suffix(".json").write_text(json.dumps({"inputs_sha256": inputs}))
    return box_file


def test_cells_share_a_guest_only_when_their_machines_are_the_same(tmp_path):
    """The guest key follows what the VM is (profile, CPU, size, box), not the cell."""
    from slimio_repro.run import guests
    box_file = _box_record(tmp_path)
    plan = configmod.make(_config(accel="tcg"))
    a = plan.cell("vm-baseline-redis-benchmark-periodical-r1")
    b = plan.cell("vm-slimio-redis-benchmark-always-r1")
    assert vm.guest_key(a, box_file) == vm.guest_key(b, box_file)
    out = tmp_path / "results" / "raw" / a.id
    assert guests.guest_dir(a, out, box_file) == guests.guest_dir(b, out, box_file)
    assert guests.guest_dir(a, out, box_file).name.startswith(vm.CELL_VM_PREFIX)
    bigger = configmod.make(_config(accel="tcg", memory_mb=8192)).cell(a.id)
    assert vm.guest_key(bigger, box_file) != vm.guest_key(a, box_file)
    (tmp_path / "x").mkdir()
    other_box = _box_record(tmp_path / "x", "i2")
    assert vm.guest_key(a, other_box) != vm.guest_key(a, box_file)
    other_run = tmp_path / "other" / "raw" / a.id
    assert guests.guest_dir(a, other_run, box_file) != guests.guest_dir(a, out, box_file)


def test_a_guest_is_kept_only_where_a_next_cell_can_take_it(monkeypatch):
    from slimio_repro.run import guests, leases
    plan = configmod.make(_config(accel="tcg")).cell("vm-baseline-redis-benchmark-periodical-r1")
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    monkeypatch.setattr(leases, "driver", lambda pid: (4242, 1))
    assert guests.why_fresh(plan) is None
    assert isinstance(guests.guests_for(plan, Path("/b.box")),
                      guests.KeptGuests)
    off = configmod.make(_config(accel="tcg", reuse_guest=False)).cell(plan.id)
    assert "reuse_guest is false" in guests.why_fresh(off)
    assert type(guests.guests_for(off, Path("/b.box"))) is vm.FreshGuests
    femu = configmod.make(_config(accel="tcg", device_profile="femu-fdp-gc")).cell(plan.id)
    assert "FTL state" in guests.why_fresh(femu)
    monkeypatch.setenv("SLURM_JOB_ID", "7")
    assert "SLURM" in guests.why_fresh(plan)
    monkeypatch.delenv("SLURM_JOB_ID")
    monkeypatch.setattr(leases, "driver", lambda pid: None)
    assert "no Snakemake" in guests.why_fresh(plan)


def test_a_kept_guests_lease_lives_with_its_snakemake_and_is_swept_after(tmp_path,
                                                                          monkeypatch):
    """A parked guest's lease is held by the Snakemake that ran its cells: live while it
    runs (doctor leaves the guest alone), dead after, when the sweep removes the guest's
    directory without touching any cell's partial directory (it has none)."""
    from slimio_repro.run import guests, leases
    monkeypatch.setattr(leases, "LEASE_DIR", tmp_path / "leases")
    work = tmp_path / "vm"
    guest = work / f"{vm.CELL_VM_PREFIX}0123abcd-guest-feed"
    guest.mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    keep = tmp_path / "keep.txt"
    keep.write_text("a file beside the run")
    me = leases.driver(os.getpid()) or (os.getpid(), leases._start_time(os.getpid()))
    live = leases.Lease(id=guest.name, cell=guests.KEPT_GUEST, host=os.uname().nodename,
                        pid=me[0], pid_start=me[1], driver_pid=me[0], driver_start=me[1],
                        partial="", vm_dir=str(guest), domain=vm.domain_name(guest),
                        started_utc="2026-11-28T00:00:00Z")
    leases.write(live)
    assert live.state() == "live"
    assert not [f for f in leases.leftovers([work], [], []) if f.kind == "vm-dir"]
    dead = leases.Lease(**{**live.__dict__, "pid": 999999999, "pid_start": 1})
    leases.write(dead)
    monkeypatch.setattr(leases, "domain_exists", lambda d: False)
    assert [f.what for f in leases.leftovers([work], [], []) if f.kind == "vm-dir"] == \
        [str(guest)]
    done = leases.sweep()
    assert f"removed {guest}" in done and not guest.exists()
    assert keep.exists() and not dead.path.exists()


def test_leftovers_of_own_runs_only_leave_another_runs_leases_vms_and_processes_out(
        tmp_path, monkeypatch):
    """A check of one run's leftovers (the fault campaign's, a test's) beside another
    pipeline: that run's dead lease, VM directory and tagged process count, the other run's
    do not; doctor's check (every run) counts both."""
    from slimio_repro.run import leases
    monkeypatch.setattr(leases, "LEASE_DIR", tmp_path / "leases")
    monkeypatch.setattr(leases, "domain_exists", lambda d: False)
    work = tmp_path / "vm"
    mine, other = tmp_path / "mine" / "results", tmp_path / "other" / "results"
    procs = []
    try:
        for results in (mine, other):
            lid = vm.cell_vm_name(results, "bare-baseline-redis-benchmark-periodical-r1")
            assert lid.startswith(vm.run_vm_prefix(results))
            (work / lid).mkdir(parents=True)
            leases.write(leases.Lease(
                id=lid, cell="c", host=os.uname().nodename, pid=999999999, pid_start=1,
                driver_pid=None, driver_start=None, partial="", vm_dir=str(work / lid),
                domain=None, started_utc="2026-11-29T00:00:00Z"))
            procs.append(subprocess.Popen(["sleep", "60"],
                                          env={**os.environ, leases.CELL_ENV: lid}))
        time.sleep(0.2)

        def found(**kw):
            """(kind, whether of ``mine``) of what the two runs left (another test's
            tagged processes may run beside this one)."""
            return sorted((f.kind, vm.run_vm_prefix(mine) in f.what)
                          for f in leases.leftovers([work], [mine], [], **kw)
                          if vm.run_vm_prefix(mine) in f.what
                          or vm.run_vm_prefix(other) in f.what)
        assert found(own_runs_only=True) == [("lease", True), ("process", True),
                                              ("vm-dir", True)]
        assert found() == [("lease", False), ("lease", True), ("process", False),
                           ("process", True), ("vm-dir", False), ("vm-dir", True)]
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


def test_a_kept_guest_that_powered_off_is_not_taken_and_the_cell_boots_its_own(tmp_path,
                                                                                monkeypatch):
    """A parked guest whose idle power-off fired (or whose domain is gone) is given up
    before any command is sent to it, with the reason in the cell's log; its lease goes."""
    from slimio_repro.run import guests, leases
    monkeypatch.setattr(leases, "LEASE_DIR", tmp_path / "leases")
    plan = configmod.make(_config(accel="tcg")).cell("vm-baseline-redis-benchmark-periodical-r1")
    guest = tmp_path / "sr-x-guest-1"
    guest.mkdir()
    (guest / "vm.json").write_text(json.dumps({"console_log": str(guest / "console.log")}))
    (guest / guests.PARKED).write_text(json.dumps(
        {"domain": "sr-x-guest-1_default", "booted_by": "c1", "booted_utc": "t",
         "last_cell": "c1", "cells": 1, "unmounted": []}))
    (tmp_path / "leases").mkdir()
    (tmp_path / "leases" / f"{guest.name}.json").write_text("{}")
    sent = []
    monkeypatch.setattr(vm.RunningVm, "ssh", lambda self, *a, **k: sent.append(a))
    log = tmp_path / "vagrant.log"
    for state in ("shut off", None):
        (guest / guests.PARKED).exists() or (guest / guests.PARKED).write_text(json.dumps(
            {"domain": "d", "booted_by": "c1", "booted_utc": "t", "last_cell": "c1",
             "cells": 1}))
        monkeypatch.setattr(leases, "domain_state", lambda d, s=state: s)
        assert guests.KeptGuests(tmp_path / "b.box").adopt(plan, guest, log) is None
        assert not (guest / guests.PARKED).exists()
    assert sent == [] and not (tmp_path / "leases" / f"{guest.name}.json").exists()
    text = log.read_text()
    assert "not reused (booting a fresh VM): its domain is shut off" in text
    assert "its domain is gone" in text
