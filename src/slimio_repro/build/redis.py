"""Build Redis from a verified tarball, out of the repository tree, with our patches applied.

System baseline is stock Redis plus the benchmark-tool patches. System slimio is the same
tree plus SlimIO's new files (redis-slimio/src/) and its hook series
(redis-slimio/patches/<series>/), and the slimio-admin tool next to the binaries.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tarfile
import time
from pathlib import Path

from .. import paths
from . import sources

TOOLS = ("redis-server", "redis-cli", "redis-benchmark", "redis-check-aof", "redis-check-rdb")
SYSTEMS = ("baseline", "slimio")
MAKE_FLAGS = ["BUILD_TLS=no", "USE_SYSTEMD=no"]


class BuildError(RuntimeError):
    pass


def patch_series(series: str) -> list[Path]:
    directory = paths.BENCHMARK_PATCH_DIR / series
    patches = sorted(directory.glob("*.patch"))
    if not patches:
        raise BuildError(f"no patches in {directory}")
    return patches


def slimio_patch_series(series: str) -> list[Path]:
    """SlimIO's hook series for a Redis line (UPSTREAM.yaml's slimio_patch_series)."""
    directory = paths.SLIMIO_PATCH_DIR / series
    patches = sorted(directory.glob("*.patch"))
    if not patches:
        raise BuildError(f"no SlimIO patches in {directory}: system slimio needs its hook "
                         f"series there (NNNN-*.patch, applied with patch -p1)")
    return patches


def slimio_sources() -> list[Path]:
    """SlimIO's new files that go into the Redis tree's src/ (not the admin tool's main)."""
    files = sorted(p for p in paths.SLIMIO_SRC_DIR.iterdir()
                   if p.suffix in (".c", ".h") and p.name != paths.SLIMIO_ADMIN_SOURCE)
    if not files:
        raise BuildError(f"no SlimIO sources (*.c, *.h) in {paths.SLIMIO_SRC_DIR}")
    return files


def slimio_build_inputs(version: str) -> list[Path]:
    """Every repository file a slimio build of ``version`` is made of (a change rebuilds it)."""
    series = sources.pin(version)["slimio_patch_series"]
    return sorted([*paths.SLIMIO_SRC_DIR.glob("*.c"), *paths.SLIMIO_SRC_DIR.glob("*.h"),
                   *(paths.SLIMIO_PATCH_DIR / series).glob("*.patch"),
                   paths.REDIS_SLIMIO_DIR / "Makefile"])


HUNK_RE = re.compile(r"^@@ -\d+(?:,(?P<old>\d+))? \+\d+(?:,(?P<new>\d+))? @@")


def lines_touched(patch_text: str) -> dict:
    """Lines a unified diff adds and removes, per file and in total.

    Only lines inside hunks count, as the hunk headers' line counts delimit them: the
    ``---``/``+++`` file headers, the commit message, the diffstat and git format-patch's
    ``-- `` signature do not, while a removed line that itself starts with ``--`` does.
    """
    by_file: dict[str, dict] = {}
    old_name = current = None
    old_left = new_left = 0
    for line in patch_text.splitlines():
        if old_left or new_left:
            counts = by_file.setdefault(current, {"added": 0, "removed": 0})
            if line.startswith("+"):
                counts["added"] += 1
                new_left -= 1
            elif line.startswith("-"):
                counts["removed"] += 1
                old_left -= 1
            elif line.startswith("\\"):
                pass  # "\ No newline at end of file"
            else:
                old_left, new_left = old_left - 1, new_left - 1
            continue
        if line.startswith(("--- ", "+++ ")):
            name = line[4:].split("\t")[0].strip()
            name = name[2:] if name.startswith(("a/", "b/")) else name
            if line.startswith("--- "):
                old_name = name
            else:  # a deleted file's new name is /dev/null: name it by its old one
                current = old_name if name == "/dev/null" else name
        m = HUNK_RE.match(line)
        if m:
            old_left = int(m["old"]) if m["old"] is not None else 1
            new_left = int(m["new"]) if m["new"] is not None else 1
    added = sum(c["added"] for c in by_file.values())
    removed = sum(c["removed"] for c in by_file.values())
    return {"added": added, "removed": removed, "total": added + removed,
            "by_file": {f: c["added"] + c["removed"] for f, c in sorted(by_file.items())}}


def series_lines_touched(patches: list[Path]) -> dict:
    """:func:`lines_touched` summed over a series (the lines it touches in upstream files)."""
    total = {"added": 0, "removed": 0, "total": 0, "by_file": {}}
    for p in patches:
        one = lines_touched(p.read_text(errors="replace"))
        for key in ("added", "removed", "total"):
            total[key] += one[key]
        for f, n in one["by_file"].items():
            total["by_file"][f] = total["by_file"].get(f, 0) + n
    total["by_file"] = dict(sorted(total["by_file"].items()))
    return total


def series_hash(patches: list[Path]) -> str:
    """sha256 over files in order (names and contents): identifies the exact patch series
    (or set of source files) in provenance."""
    h = hashlib.sha256()
    for p in patches:
        h.update(p.name.encode() + b"\0" + p.read_bytes())
    return h.hexdigest()


# The compiler cache (ccache, which the setup playbook installs). Every build unpacks a
# fresh tree and compiles all of it; ccache keeps each object under a hash of its source,
# headers and flags, so the slimio build takes the baseline's objects for the files the two
# share, and a build again (a new checkout, a change to SlimIO's sources) compiles only
# what changed. Its wrappers come first on PATH, where Redis's, its dependencies' and fio's
# makefiles find `cc`. Paths under the repository are hashed relative to it (BASEDIR), and
# the compiler's directory is not hashed (NOHASHDIR): each build's tree is new and deleted
# after it, so the objects' debug information names the first tree that compiled them. The
# cache is ccache's default, $HOME/.cache/ccache.
CCACHE_WRAPPERS = Path("/usr/lib/ccache")


def compile_env() -> dict | None:
    """The environment of a build's commands with the compiler cache, or None without it."""
    if not (CCACHE_WRAPPERS / "cc").exists():
        return None
    return {**os.environ, "PATH": f"{CCACHE_WRAPPERS}:{os.environ.get('PATH', '')}",
            "CCACHE_BASEDIR": str(paths.REPO_ROOT), "CCACHE_NOHASHDIR": "1"}


def compiler_cache() -> str:
    """What compiles a build's files: ccache's version line, or "none" (the build records it)."""
    return tool_version(["ccache", "--version"]) if compile_env() else "none"


def run_logged(cmd: list[str], cwd: Path, log, error: type[Exception] | None = None) -> None:
    """Run ``cmd`` in ``cwd`` (with the compiler cache, :func:`compile_env`) with its output
    appended to the open build ``log``; raise ``error`` (BuildError by default) naming the
    command and the log when it fails."""
    log.write(f"$ {' '.join(cmd)}  (in {cwd})\n")
    log.flush()
    proc = subprocess.run(cmd, cwd=cwd, stdout=log, stderr=subprocess.STDOUT, env=compile_env())
    if proc.returncode != 0:
        raise (error or BuildError)(f"`{' '.join(cmd)}` failed with exit code "
                                    f"{proc.returncode}; see the build log {log.name}")


def tool_version(cmd: list[str]) -> str:
    """The first line ``cmd`` prints (``cc --version``), or "unknown"."""
    try:
        out = subprocess.run(cmd, capture_output=True, text=True)
        return (out.stdout or out.stderr).splitlines()[0].strip()
    except (OSError, IndexError):
        return "unknown"


def add_slimio(tree: Path, patches: list[Path], files: list[Path], log) -> None:
    """Put SlimIO into an unpacked Redis tree: its new files into src/, then its hooks."""
    for f in files:
        log.write(f"copy {f} -> {tree / 'src' / f.name}\n")
        shutil.copy2(f, tree / "src" / f.name)
    for p in patches:
        run_logged(["patch", "-p1", "--forward", "--batch", "-i", str(p)], tree, log)


def build_redis(system: str, version: str, tarball: Path, out_dir: Path, jobs: int,
                log_path: Path) -> dict:
    """Build ``system`` (baseline or slimio) of Redis ``version`` into ``out_dir``/bin.

    The tree is unpacked and built under ``out_dir``.partial, then renamed, so a failed
    build leaves nothing that looks finished. Returns the build record (also build.json).
    """
    if system not in SYSTEMS:
        raise BuildError(f"unknown system {system!r}; choose one of {', '.join(SYSTEMS)}")
    pinned = sources.pin(version)
    digest = sources.sha256_of(tarball)
    if digest != pinned["sha256"]:
        raise BuildError(f"{tarball}: sha256 {digest} is not the pinned {pinned['sha256']}")
    patches = patch_series(pinned["benchmark_patch_series"])
    slimio_record = {}
    if system == "slimio":
        # Identified before the build starts: the files as they were when copied.
        slimio_patches, slimio_files = (slimio_patch_series(pinned["slimio_patch_series"]),
                                        slimio_sources())
        admin_source = paths.SLIMIO_SRC_DIR / paths.SLIMIO_ADMIN_SOURCE
        slimio_record = {
            "slimio_patch_series": pinned["slimio_patch_series"],
            "slimio_patches": [p.name for p in slimio_patches],
            "slimio_patch_series_sha256": series_hash(slimio_patches),
            # Added + removed lines inside the hunks: how much of upstream Redis SlimIO touches.
            "slimio_patch_lines_touched": series_lines_touched(slimio_patches),
            "slimio_sources": [f.name for f in slimio_files],
            "slimio_sources_sha256": series_hash(slimio_files),
            "slimio_admin_source_sha256": series_hash([admin_source]),
        }
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
            run_logged(["patch", "-p1", "--forward", "--batch", "-i", str(p)], src, log)
        if system == "slimio":
            add_slimio(src, slimio_patches, slimio_files, log)
        # Stock allocator and flags (jemalloc, -O2): the baseline must be stock Redis, and
        # slimio is built exactly the same way.
        run_logged(["make", f"-j{jobs}", *MAKE_FLAGS], src, log)
        bin_dir = work / "bin"
        bin_dir.mkdir()
        for tool in TOOLS:
            shutil.copy2(src / "src" / tool, bin_dir / tool)
        if system == "slimio":
            admin_cmd = ["make", "-C", str(paths.REDIS_SLIMIO_DIR), "admin",
                         f"BUILD_DIR={bin_dir.resolve()}"]
            run_logged(admin_cmd, paths.REPO_ROOT, log)
            slimio_record["slimio_admin_command"] = admin_cmd
    record = {
        "system": system,
        "redis_version": version,
        "source_sha256": digest,
        "benchmark_patch_series": pinned["benchmark_patch_series"],
        "benchmark_patches": [p.name for p in patches],
        "benchmark_patch_series_sha256": series_hash(patches),
        "make_jobs": jobs,
        "make_flags": MAKE_FLAGS,
        "compiler": tool_version(["cc", "--version"]),
        "compiler_cache": compiler_cache(),
        "build_time_s": round(time.monotonic() - started, 1),
        "redis_server_version": tool_version([str(work / "bin" / "redis-server"), "--version"]),
    }
    record.update(slimio_record)
    (work / "build.json").write_text(json.dumps(record, indent=2) + "\n")
    shutil.rmtree(work / "tree")
    shutil.rmtree(out_dir, ignore_errors=True)
    work.rename(out_dir)
    return record
