"""The Snakemake workflow: lint, dry runs of every profile, and config errors at start-up."""

import re

import pytest

from conftest import snakemake
from slimio_repro import aggregate
from slimio_repro.plan import sizing as cells
from slimio_repro import plan as configmod
from slimio_repro.build import fio
from slimio_repro import paths


def test_paper_profile_stops_at_planning_on_a_small_host(tmp_path):
    """The README's paper command on a host it does not fit (this one: 2 cores, 24 GiB, no
    usable KVM) stops before anything is built, naming the key; on a host it fits, it plans."""
    proc = snakemake("-n", "--nolock", "--cores", "2", "reproduce",
                     "--configfile", "config/profiles/paper.yaml",
                     "--config", f"results_dir={tmp_path / 'r'}", f"build_dir={tmp_path / 'b'}")
    host = configmod.Host.this()
    if host.cpus < 12:
        assert proc.returncode != 0
        assert "testbeds.vm.cpus: 12 vCPUs on a host with" in proc.stdout + proc.stderr
    elif host.memory_mb < 56320 + 1024:
        assert proc.returncode != 0 and "testbeds.vm.memory_mb" in proc.stdout + proc.stderr
    assert not (tmp_path / "r").exists() and not (tmp_path / "b").exists()


@pytest.mark.parametrize("profile", ["smoke", "ci"])
def test_dry_run_of_every_profile(profile, tmp_path):
    # An empty build directory: the dry run must plan both builds, whatever build/ holds.
    proc = snakemake("-n", "--nolock", "--cores", "2", "reproduce",
                     "--configfile", f"config/profiles/{profile}.yaml",
                     "--config", f"results_dir={tmp_path}", f"build_dir={tmp_path / 'build'}")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    cfg = configmod.load([paths.CONFIG_DIR / "config.yaml",
                          paths.CONFIG_DIR / "profiles" / f"{profile}.yaml"])
    m = re.search(r"^run_cell\s+(\d+)$", proc.stdout, re.M)
    assert m and int(m.group(1)) == len(configmod.make(cfg).matrix)
    assert re.search(r"^aggregate_tables\s+1$", proc.stdout, re.M)
    for system in ("baseline", "slimio"):
        assert re.search(rf"^build_redis_{system}\s+1$", proc.stdout, re.M), system
        cell_ids = set(re.findall(rf"raw/((?:bare|vm)-{system}-(?:redis-benchmark|ycsb-a)-"
                                  r"\S+-r\d+)$", proc.stdout, re.M))
        assert len(cell_ids) == len([c for c in configmod.make(cfg).matrix if c.system == system])
    # Every profile runs YCSB-A (Table 4) beside redis-benchmark; its binding is built once.
    assert {c.workload for c in configmod.make(cfg).matrix} == {"redis-benchmark", "ycsb-a"}
    assert re.search(r"^build_ycsb_binding\s+1$", proc.stdout, re.M)
    for name in ("table3_ratios", "table4_ratios", "table4_ycsb_a", "table5_ratios",
                 "roofline"):
        assert f"tables/{name}.csv" in proc.stdout and f"tables/{name}.md" in proc.stdout
    # Figures 4 and 5 are planned exactly when the matrix has both of their systems.
    for name in aggregate.RUNTIME_RPS_FIGURES:
        planned = bool(aggregate.runtime_rps_figure_cells(configmod.make(cfg).matrix, name))
        assert bool(re.search(rf"^plot_{name}\s+1$", proc.stdout, re.M)) == planned, name
    # The vm testbed's cells need the guest box, built once with every system's Redis in it.
    vm_cells = [c for c in configmod.make(cfg).matrix if c.testbed == "vm"]
    assert bool(re.search(r"^build_guest_box\s+1$", proc.stdout, re.M)) == bool(vm_cells)
    assert not re.search(r"^build_guest_box\s+[2-9]", proc.stdout, re.M)
    # ... and fio (the device roofline), built once from the pinned tarball for the box.
    assert bool(re.search(r"^build_fio\s+1$", proc.stdout, re.M)) == bool(vm_cells)


def test_slimio_build_depends_on_its_sources_and_series(tmp_path):
    proc = snakemake("-n", "--nolock", "--cores", "2", "build_redis",
                     "--config", f"build_dir={tmp_path / 'build'}")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    job = proc.stdout[proc.stdout.index("rule build_redis_slimio:"):]
    inputs = job[:job.index("output:")]
    assert "redis-slimio/src/slimio_format.c" in inputs
    assert "redis-slimio/src/slimio_admin.c" in inputs and "redis-slimio/Makefile" in inputs
    assert "redis-slimio/patches/7.0/0001-" in inputs and "patches/7.2+/" not in inputs


def test_guest_box_depends_on_the_pinned_fio_and_the_ycsb_binding(tmp_path):
    build_dir = tmp_path / "build"
    proc = snakemake("-n", "--nolock", "--cores", "2", str(build_dir / paths.BOX_PATTERN),
                     "--config", f"build_dir={build_dir}")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    fio_bin = build_dir / paths.FIO_PATTERN.format(version=fio.pinned_version())
    job = proc.stdout[proc.stdout.index("rule build_guest_box:"):]
    assert str(fio_bin) in job[:job.index("output:")]
    ycsb_record = build_dir / paths.YCSB_BUILD_RECORD_PATTERN.format(version="0.17.0")
    assert str(ycsb_record) in job[:job.index("output:")]
    binding = proc.stdout[proc.stdout.index("rule build_ycsb_binding:"):]
    inputs = binding[:binding.index("output:")]
    assert "ycsb-bindings/pom.xml" in inputs and "workloada.properties" in inputs
    assert "/target/" not in inputs
    fio_job = proc.stdout[proc.stdout.index("rule build_fio:"):]
    assert f"output: {fio_bin}" in fio_job and str(paths.FIO_PIN) in fio_job
    assert re.search(r"^build_fio\s+1$", proc.stdout, re.M)


def test_figure_4_is_a_target_only_with_slimio_without_fdp(tmp_path):
    three = snakemake("-n", "--nolock", "--cores", "2", "reproduce",
                      "--config", f"results_dir={tmp_path}",
                      "matrix={systems: [baseline, slimio, slimio-nofdp]}")
    assert three.returncode == 0, three.stdout + three.stderr
    for name in ("fig4_runtime_rps", "fig5_runtime_rps"):
        assert re.search(rf"^plot_{name}\s+1$", three.stdout, re.M), name
    job = three.stdout[three.stdout.index("rule plot_fig4_runtime_rps:"):]
    inputs = job[:job.index("output:")]
    assert "cells/vm-baseline-redis-benchmark-periodical-r1.json" in inputs
    assert "cells/vm-slimio-nofdp-redis-benchmark-periodical-r1.timeseries.csv" in inputs
    assert "vm-slimio-redis" not in inputs and "-r2." not in inputs

    two = snakemake("-n", "--nolock", "--cores", "2", "reproduce",
                    "--config", f"results_dir={tmp_path}", "matrix={systems: [baseline, slimio]}")
    assert two.returncode == 0, two.stdout + two.stderr
    assert re.search(r"^plot_fig5_runtime_rps\s+1$", two.stdout, re.M)
    assert "plot_fig4_runtime_rps" not in two.stdout and "fig4_runtime_rps" not in two.stdout
    # Asked for by name, it fails at planning time and says what is missing.
    named = snakemake("-n", "--nolock", "--cores", "2", f"{tmp_path}/figures/fig4_runtime_rps.png",
                      "--config", f"results_dir={tmp_path}", "matrix={systems: [baseline, slimio]}")
    assert named.returncode != 0
    assert "no such cell of slimio-nofdp" in named.stdout + named.stderr


def test_finished_cells_only_plans_from_the_finished_cells_and_runs_none(tmp_path):
    """config finished_cells_only (the Makefile's second Snakemake after a failed cell): no
    cell runs; the tables and figures are planned from the finished cells; a device-model
    sequence replays its repetitions up to its first missing one (none if that is the
    first); the missing cells are listed for the claims and the report."""
    from slimio_repro.agent import layout
    plan = configmod.make(configmod.load([paths.CONFIG_DIR / "config.yaml"]),
                          check_sources=False)
    gone = {"vm-baseline-redis-benchmark-periodical-r2", "vm-slimio-ycsb-a-always-r1"}
    for c in plan.cells:
        if c.id not in gone:
            (tmp_path / "raw" / c.id).mkdir(parents=True)
            (tmp_path / "raw" / c.id / layout.RAW_COMPLETE).write_text("done\n")
    # A cell that failed: its partial directory, no complete raw directory.
    (tmp_path / "raw" / "vm-slimio-ycsb-a-always-r1.partial").mkdir()
    proc = snakemake("-n", "--nolock", "--cores", "2", "reproduce",
                     "--configfile", "config/finished-cells-only.yaml",
                     "--config", f"results_dir={tmp_path}", f"build_dir={tmp_path / 'build'}")
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    assert not re.search(r"^(run_cell|build_guest_box)\s+\d+$", out, re.M)
    assert "rule run_cell:" not in out
    assert re.search(rf"^parse_cell\s+{len(plan.cells) - 2}$", out, re.M)
    assert re.search(r"^list_missing_cells\s+1$", out, re.M)
    job = out[out.index("rule aggregate_tables:"):]
    inputs = job[:job.index("output:")]
    assert not any(g in inputs for g in gone)
    assert inputs.count("/cells/") == len(plan.cells) - 2
    ftl = dict(re.findall(r"input: (.*)\n\s+output: \S+/ftl/(\S+)\.json", out))
    replayed = {seq: sorted(re.findall(r"raw/(\S+?)(?:,|$)", raw)) for raw, seq in ftl.items()}
    assert replayed["vm-baseline-redis-benchmark-periodical"] == [
        "vm-baseline-redis-benchmark-periodical-r1"]
    assert "vm-slimio-ycsb-a-always" not in replayed
    assert len(replayed["vm-slimio-ycsb-a-periodical"]) == 2


def test_config_override_merges_instead_of_replacing(tmp_path):
    proc = snakemake("-n", "--nolock", "--cores", "2", "run_matrix",
                     "--config", f"results_dir={tmp_path}", "matrix={repetitions: 1}")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # Both policies, all four systems and both workloads kept (the bound once per workload,
    # slimio-nofdp in Figure 4's one combination).
    assert re.search(r"^run_cell\s+11$", proc.stdout, re.M)


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
