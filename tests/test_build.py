"""Build helpers that need no Redis: SlimIO's file lists, how its series is applied, and the
count of upstream lines it touches (at most SLIMIO_MAX_LINES_TOUCHED per series)."""

import re

import pytest

from slimio_repro.build import redis as build
from slimio_repro import paths
from slimio_repro.build import sources

# A git format-patch style patch, written for this test: a commit message whose lines start
# with '-' and '+', a diffstat, two files, a removed line that itself starts with "--", a
# "\ No newline" marker and the "-- " signature. 4 added and 2 removed lines in hunks.
PATCH = """\
From 1111111111111111111111111111111111111111 Mon Sep 17 00:00:00 2001
From: Someone <someone@example.org>
Subject: [PATCH 1/1] aof: hook SlimIO's WAL append

- not a removed line
+ not an added line
---
 src/aof.c    | 4 +++-
 src/server.h | 3 ++-
 2 files changed, 5 insertions(+), 2 deletions(-)

diff --git a/src/aof.c b/src/aof.c
index 1234567..89abcde 100644
--- a/src/aof.c
+++ b/src/aof.c
@@ -10,4 +10,5 @@ void aofWrite(void) {
     int a;
--- a decrement that was a removed line
+    if (slimioEnabled()) return slimioWalAppend();
+    int b;
     return;
 }
diff --git a/src/server.h b/src/server.h
--- a/src/server.h
+++ b/src/server.h
@@ -1,2 +1,3 @@
 #define A 1
-#define B 2
+#define B 3
+#include "slimio.h"
\\ No newline at end of file
-- 
2.39.5
"""


def test_lines_touched_counts_hunk_lines_only():
    got = build.lines_touched(PATCH)
    assert (got["added"], got["removed"], got["total"]) == (4, 2, 6)
    assert got["by_file"] == {"src/aof.c": 3, "src/server.h": 3}


def test_lines_touched_sums_a_series(tmp_path):
    (tmp_path / "0001-a.patch").write_text(PATCH)
    (tmp_path / "0002-b.patch").write_text(PATCH.replace("src/aof.c", "src/rdb.c"))
    got = build.series_lines_touched(sorted(tmp_path.glob("*.patch")))
    assert got["total"] == 12
    assert got["by_file"] == {"src/aof.c": 3, "src/rdb.c": 3, "src/server.h": 6}


# The most upstream lines a SlimIO hook series may touch (series_lines_touched's total, the
# build.json key slimio_patch_lines_touched): the hooks stay thin, the logic stays in
# redis-slimio/src/ and the options' documentation in redis-slimio/slimio.conf.
SLIMIO_MAX_LINES_TOUCHED = 60


def slimio_series_dirs():
    return sorted(d for d in paths.SLIMIO_PATCH_DIR.iterdir() if d.is_dir())


def test_every_pinned_series_is_checked():
    series = {sources.pin(v)["slimio_patch_series"] for v in sources.load_pins()}
    assert series and series <= {d.name for d in slimio_series_dirs()}


@pytest.mark.parametrize("series", [d.name for d in slimio_series_dirs()])
def test_slimio_series_touches_at_most_60_upstream_lines(series):
    got = build.series_lines_touched(build.slimio_patch_series(series))
    assert 0 < got["total"] <= SLIMIO_MAX_LINES_TOUCHED, (
        f"SlimIO's {series} series touches {got['total']} upstream lines "
        f"(+{got['added']}/-{got['removed']}), more than {SLIMIO_MAX_LINES_TOUCHED}: "
        f"{got['by_file']}")


def slimio_conf_directives() -> dict:
    """The directives redis-slimio/slimio.conf documents, with the default it names."""
    text = (paths.REDIS_SLIMIO_DIR / "slimio.conf").read_text()
    found = re.findall(r"^# (slimio-[a-z-]+) (\S+)$", text, re.M)
    names = [n for n, _ in found]
    assert len(names) == len(set(names)), f"documented twice: {names}"
    return dict(found)


def test_slimio_conf_documents_every_option_of_the_config_table():
    table = (paths.SLIMIO_SRC_DIR / "slimio_configs.h").read_text()
    options = re.findall(r'^\s*create\w+Config\("(slimio-[a-z-]+)"', table, re.M)
    assert options and len(options) == len(set(options))
    assert set(slimio_conf_directives()) == set(options)


def test_slimio_sources_leave_out_the_admin_tool():
    names = [p.name for p in build.slimio_sources()]
    assert "slimio_format.c" in names and "slimio_format.h" in names
    assert paths.SLIMIO_ADMIN_SOURCE not in names
    assert all(n.endswith((".c", ".h")) for n in names)


def test_slimio_build_inputs_cover_sources_series_and_makefile():
    inputs = build.slimio_build_inputs("7.0.15")
    assert paths.SLIMIO_SRC_DIR / paths.SLIMIO_ADMIN_SOURCE in inputs
    assert paths.REDIS_SLIMIO_DIR / "Makefile" in inputs
    for version in sources.load_pins():
        series = paths.SLIMIO_PATCH_DIR / sources.pin(version)["slimio_patch_series"]
        patches = set(series.glob("*.patch"))
        assert patches and patches <= set(build.slimio_build_inputs(version)), version


def test_missing_slimio_series_is_named(monkeypatch, tmp_path):
    monkeypatch.setattr(paths, "SLIMIO_PATCH_DIR", tmp_path)
    with pytest.raises(build.BuildError, match=r"no SlimIO patches in .*/7\.0: system slimio"):
        build.slimio_patch_series("7.0")


def test_add_slimio_copies_sources_then_applies_the_series(tmp_path):
    tree = tmp_path / "redis-7.0.15"
    (tree / "src").mkdir(parents=True)
    (tree / "src" / "server.c").write_text("int main(void) {\n    return 0;\n}\n")
    new = tmp_path / "slimio_x.c"
    new.write_text("int slimioX(void) { return 1; }\n")
    patch = tmp_path / "0001-hook.patch"
    patch.write_text("--- a/src/server.c\n+++ b/src/server.c\n@@ -1,3 +1,3 @@\n"
                     " int main(void) {\n-    return 0;\n+    return slimioX();\n }\n")
    with open(tmp_path / "build.log", "w") as log:
        build.add_slimio(tree, [patch], [new], log)
        assert (tree / "src" / "slimio_x.c").read_text() == new.read_text()
        assert "return slimioX();" in (tree / "src" / "server.c").read_text()
        with pytest.raises(build.BuildError, match=r"patch -p1 --forward --batch .* failed"):
            build.add_slimio(tree, [patch], [new], log)  # applied already: --forward refuses


def test_unknown_system_is_refused(tmp_path):
    with pytest.raises(build.BuildError, match=r"unknown system 'slimio-nofdp'"):
        build.build_redis("slimio-nofdp", "7.0.15", tmp_path / "x.tar.gz", tmp_path / "out",
                          1, tmp_path / "log")


def test_a_second_tree_of_the_same_sources_compiles_from_the_cache(tmp_path, monkeypatch):
    """Two unpacked trees (as the baseline and slimio builds, or two clones): the second's
    object comes from ccache, though the trees' absolute paths differ."""
    monkeypatch.setenv("CCACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(paths, "REPO_ROOT", tmp_path)
    assert build.compile_env() is not None, "ccache is missing: run `make setup-host`"
    for name in ("baseline.partial", "slimio.partial"):
        tree = tmp_path / name
        (tree / "include").mkdir(parents=True)
        (tree / "include" / "x.h").write_text("#define X 42\n")
        (tree / "x.c").write_text('#include "x.h"\nint x(void) { return X; }\n')
        with open(tmp_path / f"{name}.log", "w") as log:
            build.run_logged(["cc", "-g", "-c", f"-I{tree / 'include'}", "x.c", "-o", "x.o"],
                             tree, log)
    stats = dict(line.split("\t") for line in build.subprocess.run(
        ["ccache", "--print-stats"], capture_output=True, text=True,
        env=build.compile_env(), check=True).stdout.splitlines())
    assert (int(stats["cache_miss"]), int(stats["direct_cache_hit"])) == (1, 1), stats
