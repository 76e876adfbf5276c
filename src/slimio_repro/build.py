"""Build Redis from a verified tarball, out of the repository tree, with our patches applied."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tarfile
import time
from pathlib import Path

from . import paths, sources

TOOLS = ("redis-server", "redis-cli", "redis-benchmark", "redis-check-aof", "redis-check-rdb")


class BuildError(RuntimeError):
    pass


def patch_series(series: str) -> list[Path]:
    directory = paths.BENCHMARK_PATCH_DIR / series
    patches = sorted(directory.glob("*.patch"))
    if not patches:
        raise BuildError(f"no patches in {directory}")
    return patches


def series_hash(patches: list[Path]) -> str:
    """sha256 over the patch files in order: identifies the exact series in provenance."""
    h = hashlib.sha256()
    for p in patches:
        h.update(p.name.encode() + b"\0" + p.read_bytes())
    return h.hexdigest()


def _run(cmd: list[str], cwd: Path, log) -> None:
    log.write(f"$ {' '.join(cmd)}  (in {cwd})\n")
    log.flush()
    proc = subprocess.run(cmd, cwd=cwd, stdout=log, stderr=subprocess.STDOUT)
    if proc.returncode != 0:
        raise BuildError(f"`{' '.join(cmd)}` failed with exit code {proc.returncode}; "
                         f"see the build log {log.name}")


def _tool_version(cmd: list[str]) -> str:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True)
        return (out.stdout or out.stderr).splitlines()[0].strip()
    except (OSError, IndexError):
        return "unknown"


def build_redis(system: str, version: str, tarball: Path, out_dir: Path, jobs: int,
                log_path: Path) -> dict:
    """Build ``system`` (baseline) of Redis ``version`` into ``out_dir``/bin.

    The tree is unpacked and built under ``out_dir``.partial, then renamed, so a failed
    build leaves nothing that looks finished. Returns the build record (also build.json).
    """
    pinned = sources.pin(version)
    digest = sources.sha256_of(tarball)
    if digest != pinned["sha256"]:
        raise BuildError(f"{tarball}: sha256 {digest} is not the pinned {pinned['sha256']}")
    patches = patch_series(pinned["benchmark_patch_series"])
    jobs = jobs or os.cpu_count() or 1
    work = out_dir.with_name(out_dir.name + ".partial")
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    started = time.monotonic()
    with open(log_path, "w") as log:
        with tarfile.open(tarball) as tar:
            tar.extractall(work / "tree", filter="tar")
        (src,) = (work / "tree").iterdir()
        for p in patches:
            _run(["patch", "-p1", "--forward", "--batch", "-i", str(p)], src, log)
        # Stock allocator and flags (jemalloc, -O2): the baseline must be stock Redis.
        _run(["make", f"-j{jobs}", "BUILD_TLS=no", "USE_SYSTEMD=no"], src, log)
        bin_dir = work / "bin"
        bin_dir.mkdir()
        for tool in TOOLS:
            shutil.copy2(src / "src" / tool, bin_dir / tool)
    record = {
        "system": system,
        "redis_version": version,
        "source_sha256": digest,
        "benchmark_patch_series": pinned["benchmark_patch_series"],
        "benchmark_patches": [p.name for p in patches],
        "benchmark_patch_series_sha256": series_hash(patches),
        "make_jobs": jobs,
        "make_flags": ["BUILD_TLS=no", "USE_SYSTEMD=no"],
        "compiler": _tool_version(["cc", "--version"]),
        "build_time_s": round(time.monotonic() - started, 1),
        "redis_server_version": _tool_version([str(work / "bin" / "redis-server"), "--version"]),
    }
    (work / "build.json").write_text(json.dumps(record, indent=2) + "\n")
    shutil.rmtree(work / "tree")
    shutil.rmtree(out_dir, ignore_errors=True)
    work.rename(out_dir)
    return record
