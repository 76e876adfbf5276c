"""The fuzz target of SlimIO's metadata and WAL loaders (redis-slimio/tests/fuzz_slimio_load.c),
run by libFuzzer for a bounded time from the seeds in redis-slimio/tests/fuzz-corpus/.

The seeds are devices written by the real format code (slimio_fixture_writer), cut down to
the target's input format: a flags byte, the two metadata LBAs, the WAL blocks from the WAL
region's start. Regenerate them with ``python tests/test_slimio_fuzz.py`` (deterministic).
Run longer on demand: ``build/redis-slimio-unit/fuzz_slimio_load -max_total_time=3600
CORPUS redis-slimio/tests/fuzz-corpus``.
"""

from __future__ import annotations

import random
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SLIMIO = REPO / "redis-slimio"
CORPUS = SLIMIO / "tests" / "fuzz-corpus"
UNIT = REPO / "build" / "redis-slimio-unit"
LBA = 512
WAL_START = 2048            # 1 MiB in, with 512-byte LBAs
# libFuzzer's fork mode, one process per CPU: about as many executions as one process in
# FUZZ_SECONDS * FUZZ_JOBS, in 1 / FUZZ_JOBS of the wall time.
FUZZ_SECONDS = 23
FUZZ_JOBS = 2

# (name, fixture_writer arguments after the format); files are named by their size.
SCENARIOS = [
    ("one-gen-partial-tail", ["--gen", "4", "f3000"]),
    ("chain-with-unlisted-middle", ["--wal-offset", "3", "--gen", "4", "f2500",
                                    "--gen-unlisted", "5", "f700", "--gen", "6", "f900"]),
    ("full-blocks-only", ["--gen", "2", "f1920"]),
    ("snapshot-and-wal", ["--slot", "0", "f4000", "--snapshot-wal-gen", "3", "--gen", "3",
                          "f1200", "--gen", "4", "f300"]),
]


def _run(*cmd, **kw):
    return subprocess.run([str(c) for c in cmd], check=True, capture_output=True, text=True,
                          **kw)


def make_seeds(out: Path, work: Path) -> list[Path]:
    """Write the seed inputs into ``out`` from devices the fixture writer makes in ``work``."""
    _run("make", "-s", "-C", SLIMIO, "fixture-writer")
    out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(17)
    made = []
    for name, args in SCENARIOS:
        dev = work / f"{name}.img"
        dev.unlink(missing_ok=True)
        with open(dev, "wb") as f:
            f.truncate(6 << 20)
        files = []
        for a in args:
            if a.startswith("f") and a[1:].isdigit():
                p = work / f"{name}-{a}.txt"
                p.write_bytes(bytes(rng.choice(b"abcdefghij\r\n*$0123456789") for _ in
                                    range(int(a[1:]))))
                files.append(str(p))
            else:
                files.append(a)
        _run(UNIT / "slimio_fixture_writer", "--device", dev, "--lba-size", LBA, "--format",
             "1", "1", *files)
        image = dev.read_bytes()
        wal = image[WAL_START * LBA:(WAL_START + 64) * LBA].rstrip(b"\0")
        wal += b"\0" * (-len(wal) % LBA)
        for flags in (0, 3):
            seed = out / f"{name}-flags{flags}"
            seed.write_bytes(bytes([flags]) + image[:2 * LBA] + wal)
            made.append(seed)
    return made


@pytest.fixture(scope="module")
def fuzzer() -> Path:
    _run("make", "-s", "-C", SLIMIO, "fuzz")
    return UNIT / "fuzz_slimio_load"


def test_seeds_are_what_the_format_code_writes(tmp_path):
    """The committed corpus is exactly what make_seeds produces from the real format code
    (a change of the on-device format shows here first)."""
    fresh = make_seeds(tmp_path / "seeds", tmp_path)
    committed = sorted(p.name for p in CORPUS.iterdir())
    assert committed == sorted(p.name for p in fresh)
    # The format id is random per format: compare everything else of the first record.
    for p in fresh:
        a, b = p.read_bytes(), (CORPUS / p.name).read_bytes()
        assert len(a) == len(b) and a[1:25] == b[1:25], p.name


def test_fuzz_target_finds_nothing(fuzzer, tmp_path):
    """libFuzzer, with ASan and UBSan, for a bounded time from the seeds: no crash, no
    leak, no violated recovery invariant (the target aborts on one)."""
    work = tmp_path / "corpus"
    work.mkdir()
    proc = subprocess.run(
        [str(fuzzer), f"-fork={FUZZ_JOBS}", f"-max_total_time={FUZZ_SECONDS}", "-timeout=10",
         "-rss_limit_mb=2048", f"-artifact_prefix={tmp_path}/", str(work), str(CORPUS)],
        capture_output=True, text=True)
    # Fork mode's progress lines: "#<executions>: cov: ... crash: 0/0/0 time: ... job: N".
    progress = re.findall(r"^#(\d+): cov: .* oom/timeout/crash: (\d+)/(\d+)/(\d+) ",
                          proc.stderr, re.M)
    print("\n".join(proc.stderr.splitlines()[-3:]))
    crashes = list(tmp_path.glob("crash-*")) + list(tmp_path.glob("leak-*")) + \
        list(tmp_path.glob("timeout-*"))
    assert proc.returncode == 0 and not crashes, proc.stderr[-3000:]
    assert progress, proc.stderr[-3000:]
    execs, *faults = map(int, progress[-1])
    assert faults == [0, 0, 0], progress[-1]
    assert execs > 1000, progress[-1]       # it really ran


if __name__ == "__main__":
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        for p in CORPUS.glob("*"):
            p.unlink()
        for p in make_seeds(CORPUS, Path(d)):
            print(p.relative_to(REPO), p.stat().st_size)
    sys.exit(0)
