"""Fetch a pinned Redis source tarball and verify its sha256 before anything uses it."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import urllib.request
from pathlib import Path

import yaml

from .. import paths


class SourceError(RuntimeError):
    """No pinned source could provide a tarball with the right checksum."""


def load_pins() -> dict:
    with open(paths.UPSTREAM_PINS) as fh:
        return yaml.safe_load(fh)["redis"]


def pin(version: str) -> dict:
    pins = load_pins()
    if version not in pins:
        raise SourceError(f"Redis {version!r} is not pinned in {paths.UPSTREAM_PINS}; "
                          f"pinned versions: {', '.join(pins)}")
    return pins[version]


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _from_dir(directory: str, version: str, dest: Path) -> str:
    for name in (f"redis-{version}.tar.gz", f"redis_{version}.orig.tar.gz"):
        candidate = Path(directory) / name
        if candidate.is_file():
            shutil.copyfile(candidate, dest)
            return str(candidate)
    raise SourceError(f"no redis-{version}.tar.gz in {directory}")


def _from_url(source: dict, dest: Path) -> str:
    try:
        with urllib.request.urlopen(source["url"], timeout=30) as resp, open(dest, "wb") as out:
            shutil.copyfileobj(resp, out)
    except OSError as exc:
        raise SourceError(f"{source['url']}: {exc}") from None
    return source["url"]


def apt_source_versions(package: str, upstream_version: str) -> list[str]:
    """Debian source versions of ``package`` whose upstream part is ``upstream_version``."""
    out = subprocess.run(["apt-cache", "showsrc", package], capture_output=True, text=True)
    versions = re.findall(r"^Version: (\S+)$", out.stdout, re.M)
    wanted = [v for v in versions
              if re.sub(r"^\d+:", "", v).rsplit("-", 1)[0] == upstream_version]
    return sorted(set(wanted), reverse=True)


APT_HELPER = "/usr/lib/apt/apt-helper"


def _orig_uri(package: str, version: str, upstream: str) -> tuple[str, str] | None:
    """The URI and apt's checksum of ``package=version``'s upstream tarball, from apt's index."""
    proc = subprocess.run(["apt-get", "source", "--print-uris", "--download-only",
                           f"{package}={version}"], capture_output=True, text=True)
    name = f"{package}_{upstream}.orig.tar.gz"
    for uri, fname, _size, digest in re.findall(r"^'(\S+)' (\S+) (\d+) (\S+)$",
                                                 proc.stdout, re.M):
        if fname == name:
            return uri, digest
    return None


def _from_apt_source(source: dict, dest: Path) -> str:
    """The upstream tarball of a Debian source package, fetched alone with apt's own transport
    (apt-helper, so apt's proxy and mirror settings apply). Only the .orig.tar.gz is fetched:
    a Debian revision's .dsc can vanish from the pool (a security update moves it) while the
    upstream tarball, shared by every revision, stays."""
    package, upstream = source["package"], source["upstream_version"]
    versions = apt_source_versions(package, upstream)
    if not versions:
        raise SourceError(
            f"apt knows no source package {package} {upstream} (suite {source['suite']}); "
            "run `make setup-host` (it adds deb-src entries derived from this machine's apt "
            "sources) or put the tarball in redis.tarball_dirs")
    errors = []
    for version in versions:
        found = _orig_uri(package, version, upstream)
        if found is None:
            errors.append(f"{version}: apt-get source --print-uris lists no "
                          f"{package}_{upstream}.orig.tar.gz")
            continue
        uri, digest = found
        proc = subprocess.run([APT_HELPER, "download-file", uri, str(dest), digest],
                              capture_output=True, text=True)
        if proc.returncode == 0 and dest.is_file():
            return f"apt source {package}={version} ({uri})"
        errors.append(f"{version}: {uri}: {(proc.stderr or proc.stdout).strip()[-300:]}")
    raise SourceError(f"apt source fetch failed: {'; '.join(errors)}")


def fetch(version: str, dest: Path, tarball_dirs: list[str] = ()) -> dict:
    """Put the verified tarball of ``version`` at ``dest``; return where it came from."""
    expected = pin(version)["sha256"]
    if dest.is_file() and sha256_of(dest) == expected:
        return {"version": version, "sha256": expected, "origin": "cache", "path": str(dest)}
    dest.parent.mkdir(parents=True, exist_ok=True)
    attempts = [("dir", d) for d in tarball_dirs] + [
        (s["kind"], s) for s in pin(version)["sources"]]
    errors = []
    for kind, source in attempts:
        partial = dest.with_name(dest.name + f".partial-{os.getpid()}")
        try:
            if kind == "dir":
                origin = _from_dir(source, version, partial)
            elif kind == "url":
                origin = _from_url(source, partial)
            elif kind == "apt-source":
                origin = _from_apt_source(source, partial)
            else:
                raise SourceError(f"unknown source kind {kind!r} in {paths.UPSTREAM_PINS}")
            got = sha256_of(partial)
            if got != expected:
                raise SourceError(f"{origin}: sha256 {got} does not match the pinned {expected}; "
                                  "refusing to build it")
            partial.rename(dest)
            return {"version": version, "sha256": got, "origin": origin, "path": str(dest)}
        except SourceError as exc:
            errors.append(str(exc))
        finally:
            partial.unlink(missing_ok=True)
    raise SourceError(f"could not fetch Redis {version}:\n  " + "\n  ".join(errors))


def reachable(version: str, cached: Path, tarball_dirs: list[str] = (),
              timeout_s: float = 5.0) -> str | None:
    """Where :func:`fetch` would find the tarball of ``version`` without fetching it: the
    build cache, a tarball directory, a Debian source package apt knows, or a URL that
    answers. None when none of them can: the plan stops before any build."""
    if cached.is_file():
        return f"cache {cached}"
    for d in tarball_dirs:
        if (Path(d) / f"redis-{version}.tar.gz").is_file():
            return f"dir {d}"
    for source in pin(version)["sources"]:
        if source["kind"] == "apt-source":
            if apt_source_versions(source["package"], source["upstream_version"]):
                return f"apt-source {source['package']} {source['upstream_version']}"
        elif source["kind"] == "url":
            try:
                req = urllib.request.Request(source["url"], method="HEAD")
                with urllib.request.urlopen(req, timeout=timeout_s):
                    return source["url"]
            except (OSError, ValueError):
                continue
    return None
