"""SlimIO's C unit tests (on-device format, metadata, WAL framing, failpoints), built with
-Wall -Werror and run plain and under AddressSanitizer + UBSan."""

import re
import subprocess

import pytest

from slimio_repro import paths


@pytest.mark.parametrize("target", ["test", "test-asan"])
def test_slimio_c_unit_tests(target, tmp_path):
    proc = subprocess.run(
        ["make", "-C", str(paths.REPO_ROOT / "redis-slimio"), target,
         f"BUILD_DIR={tmp_path}"], capture_output=True, text=True)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    m = re.search(r"^(\d+) passed, (\d+) failed$", proc.stdout, re.M)
    assert m and int(m.group(1)) >= 18 and m.group(2) == "0", out[-4000:]
    assert "AddressSanitizer" not in out and "runtime error" not in out
