"""Shared fixtures: the repository, the real cell directories captured from real runs, and
(for the end-to-end tests) a Redis build made by the pipeline itself."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from slimio_repro import config as configmod
from slimio_repro import paths

REPO = paths.REPO_ROOT
FIXTURES = Path(__file__).parent / "fixtures"
CELL_FIXTURES = FIXTURES / "cells"
VENV_BIN = Path(sys.executable).parent


@pytest.fixture
def default_config() -> dict:
    return configmod.load([paths.CONFIG_DIR / "config.yaml"])


@pytest.fixture
def fixture_cell(tmp_path) -> Path:
    """A copy of a real periodical cell (the tests may not modify the committed one)."""
    dst = tmp_path / "bare-baseline-redis-benchmark-periodical-r1"
    shutil.copytree(CELL_FIXTURES / dst.name, dst)
    return dst


def snakemake(*args: str, cwd: Path = REPO, check: bool = False) -> subprocess.CompletedProcess:
    env = dict(os.environ, PATH=f"{VENV_BIN}:{os.environ['PATH']}")
    proc = subprocess.run([str(VENV_BIN / "snakemake"), *args], cwd=cwd, env=env,
                          capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise AssertionError(f"snakemake {' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}")
    return proc


@pytest.fixture(scope="session")
def redis_bin() -> Path:
    """The baseline Redis binaries, built by the pipeline's own rule (cached in build/)."""
    snakemake("--cores", "all", "build_redis", check=True)
    version = configmod.load([paths.CONFIG_DIR / "config.yaml"])["redis"]["version"]
    bin_dir = REPO / "build" / "redis-baseline" / version / "bin"
    assert (bin_dir / "redis-benchmark").is_file()
    return bin_dir


def require_root() -> None:
    if os.geteuid() != 0:
        pytest.fail("the end-to-end tests need root (loop devices and mount); "
                    "run `make test` as root")
