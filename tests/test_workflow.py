"""The Snakemake workflow: lint, dry runs of every profile, and config errors at start-up."""

import re

import pytest

from conftest import snakemake
from slimio_repro import cells, config as configmod, paths


@pytest.mark.parametrize("profile", ["smoke", "ci", "paper"])
def test_dry_run_of_every_profile(profile, tmp_path):
    # An empty build directory: the dry run must plan both builds, whatever build/ holds.
    proc = snakemake("-n", "--nolock", "--cores", "2", "reproduce",
                     "--configfile", f"config/profiles/{profile}.yaml",
                     "--config", f"results_dir={tmp_path}", f"build_dir={tmp_path / 'build'}")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    cfg = configmod.load([paths.CONFIG_DIR / "config.yaml",
                          paths.CONFIG_DIR / "profiles" / f"{profile}.yaml"])
    m = re.search(r"^run_cell\s+(\d+)$", proc.stdout, re.M)
    assert m and int(m.group(1)) == len(cells.expand(cfg))
    assert re.search(r"^aggregate_tables\s+1$", proc.stdout, re.M)
    for system in ("baseline", "slimio"):
        assert re.search(rf"^build_redis_{system}\s+1$", proc.stdout, re.M), system
        cell_ids = set(re.findall(rf"raw/((?:bare|vm)-{system}-redis-benchmark-\S+-r\d+)$",
                                  proc.stdout, re.M))
        assert len(cell_ids) == len([c for c in cells.expand(cfg) if c.system == system])
    for name in ("table3_ratios", "table5_ratios"):
        assert f"tables/{name}.csv" in proc.stdout and f"tables/{name}.md" in proc.stdout
    # The vm testbed's cells need the guest box, built once with every system's Redis in it.
    vm_cells = [c for c in cells.expand(cfg) if c.testbed == "vm"]
    assert bool(re.search(r"^build_guest_box\s+1$", proc.stdout, re.M)) == bool(vm_cells)
    assert not re.search(r"^build_guest_box\s+[2-9]", proc.stdout, re.M)


def test_slimio_build_depends_on_its_sources_and_series(tmp_path):
    proc = snakemake("-n", "--nolock", "--cores", "2", "build_redis",
                     "--config", f"build_dir={tmp_path / 'build'}")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    job = proc.stdout[proc.stdout.index("rule build_redis_slimio:"):]
    inputs = job[:job.index("output:")]
    assert "redis-slimio/src/slimio_format.c" in inputs
    assert "redis-slimio/src/slimio_admin.c" in inputs and "redis-slimio/Makefile" in inputs
    assert "redis-slimio/patches/7.0/0001-" in inputs and "patches/7.2+/" not in inputs


def test_config_override_merges_instead_of_replacing(tmp_path):
    proc = snakemake("-n", "--nolock", "--cores", "2", "run_matrix",
                     "--config", f"results_dir={tmp_path}", "matrix={repetitions: 1}")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert re.search(r"^run_cell\s+4$", proc.stdout, re.M)  # both policies, both systems kept


def test_bad_config_stops_the_workflow_naming_the_key(tmp_path):
    proc = snakemake("-n", "--nolock", "--cores", "2", "reproduce",
                     "--config", f"results_dir={tmp_path}", "matrix={policies: [sometimes]}")
    assert proc.returncode != 0
    assert "matrix.policies[0]: 'sometimes' is not one of" in proc.stdout + proc.stderr


# The one lint we accept: "Specify a conda environment or container for each rule". The
# software is pinned by requirements.txt (the project venv) and the setup playbook, and no
# conda channel or container registry is reachable from the machines this must run on.
ACCEPTED_LINTS = ("Specify a conda environment or container for each rule.",)


def test_lint_is_clean_but_for_conda():
    proc = snakemake("--lint")
    lints = [l.strip() for l in (proc.stdout + proc.stderr).splitlines()
             if l.strip().startswith("* ")]
    assert lints, "snakemake --lint printed nothing: did its output format change?"
    other = [l for l in lints if not l[2:].startswith(ACCEPTED_LINTS)]
    assert not other, "\n".join(other)
