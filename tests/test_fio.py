"""The guest's fio: the pin, the tarball check and the built binary's checks (error handling).

The build itself is exercised by the Snakemake dry runs (tests/test_workflow.py) and by the
box build; here fio is replaced by tiny scripts that behave like a good or a bad build.
"""

import hashlib
import subprocess
from pathlib import Path

import pytest

from slimio_repro.build import fio
from slimio_repro.build import sources


def _fake_fio(tmp_path: Path, version_line: str, engine_rc: int = 0) -> Path:
    exe = tmp_path / "fio"
    exe.write_text(f"""#!/bin/sh
case "$1" in
  --version) echo '{version_line}' ;;
  --enghelp=*) [ {engine_rc} -eq 0 ] || echo "IO engine ${{1#--enghelp=}} not found"
               exit {engine_rc} ;;
  *) exit 2 ;;
esac
""")
    exe.chmod(0o755)
    return exe


def test_pin_names_a_new_enough_fio_and_a_debian_source():
    pin = fio.load_pin()
    assert len(pin["sha256"]) == 64 and int(pin["sha256"], 16) >= 0
    major, minor = map(int, pin["version"].split(".")[:2])
    assert (major, minor) >= fio.MIN_VERSION
    src = pin["source"]
    assert set(src) == {"kind", "package", "upstream_version", "debian_version", "suite"}
    assert src["upstream_version"] == pin["version"]
    assert src["debian_version"].startswith(pin["version"] + "-")


def test_unpinned_version_is_refused_naming_the_pinned_one():
    with pytest.raises(fio.FioBuildError, match=rf"fio '3\.30' is not pinned; .* pins "
                                                rf"'{fio.pinned_version()}'"):
        fio.pin("3.30")


def test_a_good_build_passes_the_checks(tmp_path):
    exe = _fake_fio(tmp_path, "fio-3.41")
    assert fio.check_binary(exe, "3.41") == "fio-3.41"


def test_the_wrong_version_is_refused(tmp_path):
    exe = _fake_fio(tmp_path, "fio-3.33")
    with pytest.raises(fio.FioBuildError, match=r"printed 'fio-3\.33' .* expected 'fio-3\.41'"):
        fio.check_binary(exe, "3.41")


def test_a_version_older_than_fdp_support_is_refused(tmp_path):
    exe = _fake_fio(tmp_path, "fio-3.34")
    with pytest.raises(fio.FioBuildError, match=r"older than 3\.35"):
        fio.check_binary(exe, "3.34")


def test_a_build_without_io_uring_cmd_is_refused(tmp_path):
    exe = _fake_fio(tmp_path, "fio-3.41", engine_rc=1)
    with pytest.raises(fio.FioBuildError, match=r"has no io_uring_cmd engine .*exited 1: "
                                                r"IO engine io_uring_cmd not found"):
        fio.check_binary(exe, "3.41")


def test_a_binary_that_does_not_run_is_named(tmp_path):
    exe = tmp_path / "fio"
    exe.write_text("not an executable")
    with pytest.raises(fio.FioBuildError, match=rf"{exe} --version could not run"):
        fio.check_binary(exe, "3.41")


def test_a_tarball_with_the_wrong_sha256_is_refused(tmp_path, monkeypatch):
    """apt hands over an .orig tarball (and fails on the rest): its sha256 decides."""
    pin = fio.load_pin()
    version = pin["version"]
    monkeypatch.setattr(sources, "apt_source_versions", lambda package, upstream: [
        pin["source"]["debian_version"]])

    def fake_apt_get(cmd, cwd, **kwargs):
        assert cmd[:3] == ["apt-get", "source", "--download-only"]
        (Path(cwd) / f"fio_{version}.orig.tar.gz").write_bytes(b"not fio")
        return subprocess.CompletedProcess(cmd, 100, "", "E: Failed to fetch fio.dsc 404")

    monkeypatch.setattr(fio.subprocess, "run", fake_apt_get)
    dest = tmp_path / "cache" / "fio.tar"
    with pytest.raises(fio.FioBuildError, match=rf"has sha256 [0-9a-f]{{64}}, not the pinned "
                                                rf"{pin['sha256']}; refusing"):
        fio.fetch(version, dest)
    assert not dest.exists() and list(dest.parent.iterdir()) == []


def test_a_verified_tarball_is_kept_even_if_apt_failed_on_other_files(tmp_path, monkeypatch):
    pin = fio.load_pin()
    version = pin["version"]
    monkeypatch.setitem(pin, "sha256", hashlib.sha256(b"pretend").hexdigest())
    monkeypatch.setattr(fio, "load_pin", lambda: pin)
    monkeypatch.setattr(sources, "apt_source_versions", lambda package, upstream: [
        f"{version}-9", pin["source"]["debian_version"]])
    tried = []

    def fake_apt_get(cmd, cwd, **kwargs):
        tried.append(cmd[-1])
        (Path(cwd) / f"fio_{version}.orig.tar.gz").write_bytes(b"pretend")
        return subprocess.CompletedProcess(cmd, 100, "", "E: Failed to fetch fio.dsc 404")

    monkeypatch.setattr(fio.subprocess, "run", fake_apt_get)
    dest = tmp_path / "fio.tar"
    got = fio.fetch(version, dest)
    assert dest.read_bytes() == b"pretend"
    # The pinned Debian revision is tried first.
    assert tried == [f"fio={pin['source']['debian_version']}"]
    assert got["debian_version"] == pin["source"]["debian_version"]


def test_no_debian_source_says_to_run_setup_host(tmp_path, monkeypatch):
    monkeypatch.setattr(sources, "apt_source_versions", lambda package, upstream: [])
    with pytest.raises(fio.FioBuildError, match=r"apt knows no source package fio .*"
                                                r"make setup-host"):
        fio.fetch(fio.pinned_version(), tmp_path / "fio.tar")
