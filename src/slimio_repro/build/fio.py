"""fio for the guest's device roofline: fetch the pinned tarball, verify it, build, check it.

The pin (``testbed/box/fio.yaml``) names an upstream version, the Debian source package whose
pristine ``.orig`` tarball carries it, and that tarball's sha256. :func:`build` fetches the
tarball with ``apt-get source --download-only`` into a scratch directory, refuses it unless
its sha256 is the pinned one, builds the upstream tree (never Debian's patched one) with
:data:`CONFIGURE_FLAGS`, checks the binary (:func:`check_binary`) and leaves::

    <out_dir>/bin/fio
    <out_dir>/build.json   version, Debian source version, tarball sha256, configure command,
                           build time, host kernel and compiler, the binary's shared libraries

Like the Redis builds, the work happens in ``<out_dir>.partial`` and is renamed at the end, so
a failed build leaves nothing that looks finished.
"""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import subprocess
import tarfile
import tempfile
import time
from pathlib import Path

import yaml

from .. import paths
from . import redis as build_redis
from . import sources

# The oldest fio whose io_uring_cmd engine does FDP placement (fdp=1, fdp_pli=).
MIN_VERSION = (3, 35)
# Portable code (the guest runs under TCG's `-cpu max` or on another host's CPU) and no
# optional library that configure would otherwise pick up from whatever -dev packages this
# host happens to have: the binary links libc, libm, zlib and libaio only, which the guest
# box has (testbed/box/packages.txt). No GUI (gfio is off unless --enable-gfio).
CONFIGURE_FLAGS = ["--disable-native", "--disable-numa", "--disable-rdma", "--disable-rados",
                   "--disable-rbd", "--disable-http", "--disable-gfapi", "--disable-libnfs",
                   "--disable-pmem", "--disable-xnvme", "--disable-isal", "--disable-isal64",
                   "--disable-libblkio", "--disable-libzbc", "--disable-tcmalloc",
                   "--disable-dfs", "--disable-lex"]
# Engines the roofline needs compiled in: `fio --enghelp=<engine>` must succeed for each.
REQUIRED_ENGINES = ("io_uring_cmd",)
CHECK_TIMEOUT_S = 30


class FioBuildError(RuntimeError):
    """The pinned fio could not be fetched, verified, built or checked."""


def load_pin() -> dict:
    """The ``fio`` entry of :data:`paths.FIO_PIN`, checked for the keys the build needs."""
    with open(paths.FIO_PIN) as fh:
        pin = (yaml.safe_load(fh) or {}).get("fio")
    need = {"version", "sha256", "source"}
    if not isinstance(pin, dict) or not need <= set(pin):
        raise FioBuildError(f"{paths.FIO_PIN}: needs a `fio:` mapping with {sorted(need)}")
    source_need = {"kind", "package", "upstream_version", "debian_version", "suite"}
    if not source_need <= set(pin["source"]) or pin["source"]["kind"] != "apt-source":
        raise FioBuildError(f"{paths.FIO_PIN}: fio.source must be an apt-source with "
                            f"{sorted(source_need)}; got {pin['source']!r}")
    return pin


def pinned_version() -> str:
    return str(load_pin()["version"])


def pin(version: str) -> dict:
    """The pin of ``version``; an error names the pinned one when they differ."""
    p = load_pin()
    if str(p["version"]) != version:
        raise FioBuildError(f"fio {version!r} is not pinned; {paths.FIO_PIN} pins "
                            f"{p['version']!r} (build that, or change the pin with its sha256)")
    return p


def fetch(version: str, dest: Path) -> dict:
    """Put the pinned ``.orig`` tarball of fio ``version`` at ``dest``, verified.

    Tries the pinned Debian revision first, then any other revision of the same upstream
    version that apt knows (they ship the same ``.orig``). Only the ``.orig`` tarball is
    needed: when apt also fails to get the ``.dsc`` or Debian's patches, the tarball still
    counts, because its sha256 is checked against the pin before anything uses it.
    Returns where it came from.
    """
    p = pin(version)
    src = p["source"]
    package, upstream = src["package"], str(src["upstream_version"])
    known = sources.apt_source_versions(package, upstream)
    if not known:
        raise FioBuildError(
            f"apt knows no source package {package} {upstream} (suite {src['suite']}); run "
            "`make setup-host` (it adds deb-src entries for that suite, derived from this "
            "machine's apt sources) and `apt-get update`")
    versions = [src["debian_version"]] if src["debian_version"] in known else []
    versions += [v for v in known if v not in versions]
    errors = []
    dest.parent.mkdir(parents=True, exist_ok=True)
    for debian_version in versions:
        with tempfile.TemporaryDirectory(dir=dest.parent) as tmp:
            proc = subprocess.run(
                ["apt-get", "source", "--download-only", f"{package}={debian_version}"],
                cwd=tmp, capture_output=True, text=True)
            origs = sorted(Path(tmp).glob(f"{package}_{upstream}.orig.tar.*"))
            origs = [o for o in origs if not o.name.endswith(".asc")]
            if not origs:
                errors.append(f"{package}={debian_version}: no .orig tarball "
                              f"(apt-get: {proc.stderr.strip()[-300:]})")
                continue
            got = sources.sha256_of(origs[0])
            if got != p["sha256"]:
                errors.append(f"{package}={debian_version}: {origs[0].name} has sha256 {got}, "
                              f"not the pinned {p['sha256']}; refusing to build it")
                continue
            shutil.move(origs[0], dest)
            return {"debian_version": debian_version, "tarball": origs[0].name,
                    "sha256": got, "apt_get_returncode": proc.returncode}
    raise FioBuildError(f"could not fetch fio {version}:\n  " + "\n  ".join(errors))


def _version_tuple(text: str) -> tuple[int, ...]:
    m = re.search(r"fio-(\d+)\.(\d+)", text)
    return (int(m[1]), int(m[2])) if m else ()


def check_binary(fio: Path, version: str) -> str:
    """Check that ``fio`` runs, is ``version`` (>= :data:`MIN_VERSION`) and has the roofline's
    engines; return what ``fio --version`` printed (e.g. ``fio-3.41``)."""
    def run(arg: str) -> subprocess.CompletedProcess:
        try:
            return subprocess.run([str(fio), arg], capture_output=True, text=True,
                                  timeout=CHECK_TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise FioBuildError(f"{fio} {arg} could not run: {exc}; rebuild fio "
                                f"(rule build_fio)") from None

    proc = run("--version")
    printed = proc.stdout.strip()
    if proc.returncode != 0 or printed != f"fio-{version}":
        raise FioBuildError(f"{fio} --version printed {printed!r} (exit {proc.returncode}), "
                            f"expected 'fio-{version}': the build is not the pinned fio; "
                            f"delete {fio.parent.parent} and rebuild")
    if _version_tuple(printed) < MIN_VERSION:
        raise FioBuildError(f"fio {version} is older than "
                            f"{'.'.join(map(str, MIN_VERSION))}, which FDP with "
                            f"ioengine=io_uring_cmd needs: pin a newer fio in {paths.FIO_PIN}")
    for engine in REQUIRED_ENGINES:
        proc = run(f"--enghelp={engine}")
        if proc.returncode != 0:
            raise FioBuildError(
                f"{fio} has no {engine} engine (`fio --enghelp={engine}` exited "
                f"{proc.returncode}: {(proc.stderr or proc.stdout).strip()[-200:]}); it is "
                f"built on Linux only when configure finds io_uring support: see "
                f"config.log of the build")
    return printed


def needed_libraries(binary: Path) -> list[str]:
    """The shared libraries ``binary`` links (ELF DT_NEEDED), which the guest must have."""
    proc = subprocess.run(["objdump", "-p", str(binary)], capture_output=True, text=True)
    return re.findall(r"^\s*NEEDED\s+(\S+)$", proc.stdout, re.M)


def build(version: str, out_dir: Path, jobs: int, log_path: Path) -> dict:
    """Fetch, verify and build fio ``version`` into ``out_dir`` (bin/fio, build.json).

    Returns the build record (also written as build.json).
    """
    pinned = pin(version)
    jobs = jobs or os.cpu_count() or 1
    work = out_dir.with_name(out_dir.name + ".partial")
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    tarball = work / f"fio-{version}.orig.tar"
    started = time.monotonic()
    with open(log_path, "w") as log:
        origin = fetch(version, tarball)
        log.write(f"fetched {origin}\n")
        with tarfile.open(tarball) as tar:
            tar.extractall(work / "tree", filter="tar")
        trees = list((work / "tree").iterdir())
        if len(trees) != 1 or not (trees[0] / "configure").is_file():
            raise FioBuildError(f"{origin['tarball']} does not unpack to one fio tree with a "
                                f"configure script: {[t.name for t in trees]}")
        src = trees[0]
        configure = ["./configure", *CONFIGURE_FLAGS]
        build_redis.run_logged(configure, src, log, FioBuildError)
        make = ["make", f"-j{jobs}", "fio"]
        build_redis.run_logged(make, src, log, FioBuildError)
        bin_dir = work / "bin"
        bin_dir.mkdir()
        shutil.copy2(src / "fio", bin_dir / "fio")
    printed = check_binary(bin_dir / "fio", version)
    record = {
        "fio_version": printed,
        "version": version,
        "debian_source_package": pinned["source"]["package"],
        "debian_source_version": origin["debian_version"],
        "debian_suite": pinned["source"]["suite"],
        "tarball": origin["tarball"],
        "tarball_sha256": origin["sha256"],
        "configure_command": configure,
        "make_command": make,
        "build_time_s": round(time.monotonic() - started, 1),
        "host_kernel": platform.release(),
        "host_machine": platform.machine(),
        "compiler": build_redis.tool_version(["cc", "--version"]),
        "compiler_cache": build_redis.compiler_cache(),
        "needed_libraries": needed_libraries(bin_dir / "fio"),
        "engines_checked": list(REQUIRED_ENGINES),
    }
    (work / "build.json").write_text(json.dumps(record, indent=2) + "\n")
    shutil.rmtree(work / "tree")
    tarball.unlink()
    shutil.rmtree(out_dir, ignore_errors=True)
    work.rename(out_dir)
    return record
