"""Pinned sources: a tarball whose sha256 differs is refused and never lands in the cache."""

import pytest

from slimio_repro.build import redis as build
from slimio_repro.build import sources


@pytest.fixture
def only_local_sources(monkeypatch):
    pins = sources.load_pins()
    monkeypatch.setattr(sources, "load_pins", lambda: {
        v: dict(p, sources=[]) for v, p in pins.items()})
    return pins


def test_sha256_mismatch_is_refused(tmp_path, only_local_sources):
    fake = tmp_path / "mirror"
    fake.mkdir()
    (fake / "redis-7.0.15.tar.gz").write_bytes(b"not redis")
    dest = tmp_path / "cache" / "redis-7.0.15.tar.gz"
    with pytest.raises(sources.SourceError, match="does not match the pinned 4b1dc4ee"):
        sources.fetch("7.0.15", dest, [str(fake)])
    assert not dest.exists()
    assert list(dest.parent.iterdir()) == []


def test_verified_local_tarball_is_used(tmp_path, only_local_sources, monkeypatch):
    fake = tmp_path / "mirror"
    fake.mkdir()
    (fake / "redis-7.0.15.tar.gz").write_bytes(b"pretend")
    monkeypatch.setitem(only_local_sources["7.0.15"], "sha256",
                        sources.sha256_of(fake / "redis-7.0.15.tar.gz"))
    dest = tmp_path / "cache" / "redis-7.0.15.tar.gz"
    got = sources.fetch("7.0.15", dest, [str(fake)])
    assert got["origin"].endswith("redis-7.0.15.tar.gz") and dest.read_bytes() == b"pretend"
    assert sources.fetch("7.0.15", dest)["origin"] == "cache"


def test_unpinned_version_is_named():
    with pytest.raises(sources.SourceError, match=r"'6\.2\.0' is not pinned"):
        sources.fetch("6.2.0", __import__("pathlib").Path("/nonexistent/x.tar.gz"))


def test_every_pin_has_a_patch_series():
    for version, pin in sources.load_pins().items():
        assert len(pin["sha256"]) == 64, version
        assert build.patch_series(pin["benchmark_patch_series"]), version


def test_every_pin_names_its_slimio_series():
    series = {v: p["slimio_patch_series"] for v, p in sources.load_pins().items()}
    assert series == {"7.0.15": "7.0", "7.4.2": "7.2+", "8.0.2": "7.2+"}


def test_offline_pins_name_debian_suites_not_hosts():
    for pin in sources.load_pins().values():
        for s in pin["sources"]:
            if s["kind"] == "apt-source":
                assert set(s) == {"kind", "package", "upstream_version", "suite"}


def test_apt_source_fetches_only_the_upstream_tarball(tmp_path):
    """The real Debian pool: only the .orig.tar.gz is fetched (a revision's .dsc can be gone
    from the pool after a security update while the upstream tarball stays), and verified."""
    dest = tmp_path / "cache" / "redis-8.0.2.tar.gz"
    got = sources.fetch("8.0.2", dest)
    assert got["origin"].startswith("apt source redis=") and "redis_8.0.2.orig.tar.gz" in got["origin"]
    assert sources.sha256_of(dest) == sources.pin("8.0.2")["sha256"]
    assert sorted(p.name for p in dest.parent.iterdir()) == [dest.name]
