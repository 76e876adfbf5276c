"""The guest box of the vm testbed, built offline from Debian packages.

``testbed/box/build_box.sh`` does the image work (mmdebstrap, disk, bootloader, box tar);
this module gathers its inputs and records what went in. The Debian archive is whatever
this machine's apt sources use (the same probe as the setup playbook), so no mirror host
name is written in the repository. Next to the box it writes:

* ``<box>.json``: inputs hash (the box's Vagrant name derives from it), the box's sha256,
  kernel, archive, the Redis builds, the fio and the YCSB binding baked in, build time;
* ``<box>.packages.tsv``: every Debian package and version in the guest;
* ``<box>.key``: the box's own SSH private key;
* ``<box>.vmlinuz``, ``<box>.initrd``, ``<box>.cmdline``: its kernel, initramfs and kernel
  command line, which the testbed boots directly.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import time
from pathlib import Path

from .. import paths
from ..build import sources
from ..agent import layout, provenance


class BoxError(RuntimeError):
    pass


# The box's kernel and initramfs, written next to it by build_box.sh: record key -> suffix.
BOOT_FILES = {"kernel": ".vmlinuz", "initrd": ".initrd"}


def archive(release: str = "bookworm") -> dict:
    proc = subprocess.run(["/usr/bin/python3", str(paths.ARCHIVE_URI_PROBE), release],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise BoxError(f"cannot find the Debian archive in this machine's apt sources: "
                       f"{proc.stderr.strip()} (run `make setup-host` first)")
    return json.loads(proc.stdout)


def inputs_sha256(builds: list[Path], fio_build: Path, ycsb_build: Path | None = None) -> str:
    """Hash of everything that goes into the box: recipe, packages, Python pins, the Redis
    builds and the fio build (each its bin/ and build.json), and the YCSB binding's build
    (its build.json, which has the sha256 of every jar and of the workload file)."""
    h = hashlib.sha256()
    files = [paths.BOX_SCRIPT, paths.BOX_PACKAGES, paths.BOX_GUEST_REQUIREMENTS]
    for b in [*builds, fio_build]:
        files += sorted(p for p in (b / "bin").iterdir()) + [b / "build.json"]
    if ycsb_build is not None:
        files.append(ycsb_build / "build.json")
    for f in files:
        h.update(f.name.encode())
        h.update(hashlib.sha256(f.read_bytes()).digest())
    return h.hexdigest()


def build(out: Path, builds: list[Path], fio_build: Path, ycsb_build: Path, disk_size_mb: int,
          log: Path) -> dict:
    """Build the box ``out`` with the Redis ``builds``, the ``fio_build`` (rule build_fio's
    directory: bin/fio, build.json) and the ``ycsb_build`` (rule build_ycsb_binding's: lib/,
    workloads/, build.json) baked in; fio lands at :data:`layout.GUEST_FIO`, the builds under
    the guest's build directory with the same relative paths as here."""
    out = out.resolve()
    builds = [b.resolve() for b in builds]
    fio_build, ycsb_build = fio_build.resolve(), ycsb_build.resolve()
    if not (ycsb_build / "build.json").is_file():
        raise BoxError(f"{ycsb_build} has no build.json: build the YCSB binding first "
                       "(rule build_ycsb_binding)")
    ycsb_record = json.loads((ycsb_build / "build.json").read_text())
    for b in builds:
        if not (b / "bin" / "redis-server").is_file():
            raise BoxError(f"{b} has no bin/redis-server: build Redis first")
    if not (fio_build / "bin" / "fio").is_file() or not (fio_build / "build.json").is_file():
        raise BoxError(f"{fio_build} has no bin/fio and build.json: build fio first "
                       f"(rule build_fio)")
    fio_record = json.loads((fio_build / "build.json").read_text())
    arch = archive()
    box_id = inputs_sha256(builds, fio_build, ycsb_build)
    pylib = out.parent / "guest-python"
    subprocess.run(["rm", "-rf", str(pylib)], check=True)
    t0 = time.monotonic()
    with open(log, "w") as fh:
        pip = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
               "--no-compile", "--target", str(pylib), "-r", str(paths.BOX_GUEST_REQUIREMENTS)]
        fh.write(f"$ {' '.join(pip)}\n")
        fh.flush()
        if subprocess.run(pip, stdout=fh, stderr=subprocess.STDOUT).returncode != 0:
            raise BoxError(f"pip could not install {paths.BOX_GUEST_REQUIREMENTS}; see {log}")
        cmd = ["bash", str(paths.BOX_SCRIPT), str(out), box_id, arch["uri"],
               arch["signed_by"] or "/usr/share/keyrings/debian-archive-keyring.gpg",
               str(paths.BOX_PACKAGES), str(pylib), str(disk_size_mb), str(fio_build),
               layout.GUEST_FIO, *map(str, builds), str(ycsb_build)]
        fh.write(f"$ {' '.join(cmd)}\n")
        fh.flush()
        proc = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT)
    if proc.returncode != 0:
        tail = "\n".join(log.read_text().splitlines()[-20:])
        raise BoxError(f"build_box.sh failed ({proc.returncode}); the end of {log}:\n{tail}")
    kernel = out.with_name(out.name + ".kernel").read_text().strip().split("=", 1)[1]
    boot = {name: out.with_name(out.name + suffix) for name, suffix in BOOT_FILES.items()}
    record = {
        "box": out.name,
        "inputs_sha256": box_id,
        "box_sha256": sources.sha256_of(out),
        "box_bytes": out.stat().st_size,
        "guest_kernel": kernel,
        # Booted directly by the testbed (testbed.vm): the box's own kernel and initramfs.
        "kernel_cmdline": out.with_name(out.name + ".cmdline").read_text().strip(),
        **{f"{name}_file": f.name for name, f in boot.items()},
        **{f"{name}_sha256": sources.sha256_of(f) for name, f in boot.items()},
        "debian_release": "bookworm",
        "archive_source": arch["source"],
        "redis_builds": [str(b.relative_to(b.parents[1])) for b in builds],
        "fio_build": str(fio_build.relative_to(fio_build.parents[1])),
        "fio_version": fio_record["fio_version"],
        "fio_tarball_sha256": fio_record["tarball_sha256"],
        "guest_fio": layout.GUEST_FIO,
        "ycsb_build": str(ycsb_build.relative_to(ycsb_build.parents[1])),
        "ycsb_core_version": ycsb_record["ycsb_core_version"],
        "packages_file": out.name + ".packages.tsv",
        "build_time_s": round(time.monotonic() - t0, 1),
        "utc_built": provenance.utc_now(),
    }
    out.with_suffix(".json").write_text(json.dumps(record, indent=2) + "\n")
    return record
