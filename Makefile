# The two commands of the README, and what they are made of.
#
#   make reproduce   set up this host and run the main job (smoke profile by default)
#   make test        set up this host and run the test suite but the tests marked nightly
#                    (what .ci/run runs)
#   make test-fast   the fast tier (no VM, no Redis build), for the inner loop
#   make motivation  the paper's motivation (Tables 1-2, Figure 2) and its claims' verdicts
#                    (results/claims/motivation/), about 10 minutes on smoke; part of
#                    reproduce where the profile says motivation.in_reproduce (paper)
#   make crash-campaign  SlimIO and stock Redis crashed and restarted 1000 times (config's
#                    crash section; results/crash/summary.md); exit 1 on any finding
#   make bench       nopersist, baseline and slimio side by side, interleaved, under both
#                    policies (BENCH_TESTBED=bare by default, or vm; BENCH_ARGS for more,
#                    e.g. --rounds 5); prints the ratios, keeps them in results/bench/
#   make decide      more repetitions only where a claim is undecided, within DECIDE_BUDGET of
#                    cell time (default 30m): new -rN cells through the same pipeline, the
#                    claims judged again look by look (results/claims/decide.yaml)
#   make calibrate   this host's speed from two smoke cells, each in a VM booted for it
#                    (about 90 s, after the builds), and the PROFILE run it predicts here
#                    (build/calibration.json)
#   make nightly     the nightly regression over both paths: the bare ci profile and the VM
#                    smoke profile, fresh, each compared with its committed reference
#                    (results/reference/nightly.json, nightly-vm.json), then the tests
#                    marked nightly (tests/conftest.py); exit 1 on a regression or a
#                    failed test
#
# Needs Debian 12, root (loop devices, apt), make and python3. Everything else is installed
# by `bootstrap` (a pinned virtualenv from PyPI) and `setup-host` (the Ansible playbook).

SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PROFILE ?= smoke
CORES ?= all
SNAKEMAKE_ARGS ?=
# The nightly regression's run and the reference it is compared with.
NIGHTLY_RESULTS ?= results/nightly
NIGHTLY_REFERENCE ?= results/reference/nightly.json
# ... and of its VM path (the smoke matrix: passthru, placement, the device model).
NIGHTLY_VM_RESULTS ?= results/nightly-vm
NIGHTLY_VM_REFERENCE ?= results/reference/nightly-vm.json

BIN := $(VENV)/bin
# Snakemake runs the pipeline here, not on a cluster: pointed at no SLURM configuration, the
# SLURM plugin's `scontrol show config` at start-up fails at once instead of waiting 9 s for
# a one-node cluster that is installed but stopped (as `make test` leaves it).
LOCAL := PATH="$(abspath $(BIN)):$$PATH" SLURM_CONF=/dev/null
STAMP := $(VENV)/.installed
# The guest box (paths.BOX_PATTERN under the config's build_dir), with every build baked in.
BOX := build/box/slimio-guest.box
# The test runs print their 30 slowest tests: where the suite's time goes, from every run.
PYTEST := PATH="$(abspath $(BIN)):$$PATH" $(BIN)/pytest -ra --durations=30

.PHONY: bootstrap setup-host host-ready reproduce motivation decide calibrate crash-campaign bench nightly test test-fast lint

bootstrap: $(STAMP)

# The virtualenv with pinned Snakemake, Ansible and the analysis libraries. Debian's python3
# needs python3-venv for `-m venv`; install it first if it is missing. uv installs the
# requirements: the same versions as pip's, in 20 s instead of 56 s from a warm cache (a
# clean clone's first step). Compiled to bytecode at install, as pip does, and the project's
# own src/ too: where PYTHONDONTWRITEBYTECODE is set, nothing else would, and a Snakemake
# start took twice as long without the libraries' bytecode, 0.8 s longer without src/'s
# (5.0-5.4 s against 4.2-4.9 s for `snakemake -n reproduce` in a clean clone).
UV := uv==0.13.9
$(STAMP): requirements.txt pyproject.toml
	@$(PYTHON) -c 'import ensurepip' 2>/dev/null || { \
	  echo "installing python3-venv (needed for the project virtualenv)"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check $(UV)
	$(BIN)/uv pip install --quiet --compile-bytecode --python $(BIN)/python -r requirements.txt
	$(BIN)/uv pip install --quiet --python $(BIN)/python --no-deps -e .
	$(BIN)/python -m compileall -q src
	touch $@

# The playbook, always; it leaves a stamp of the playbooks it ran (host-ready reads it).
# SETUP_ARGS are the playbook's extra options, e.g. -e host_slurm_enabled=true.
SETUP_ARGS ?=
setup-host: bootstrap
	$(BIN)/ansible-playbook playbooks/setup-host.yml $(SETUP_ARGS)
	@mkdir -p build && $(SETUP_INPUTS) > $(HOST_STAMP)

# reproduce runs the playbook unless it last ran to its end with these very playbooks and
# libvirt still has the VMs' network and storage pool up (a reboot stops the daemons, and
# only the playbook starts them here): a run with nothing to change took 20-23 s of the smoke
# budget. `make setup-host` always runs it.
HOST_STAMP := build/.host-ready
SETUP_INPUTS := find playbooks ansible.cfg -type f | LC_ALL=C sort | xargs sha256sum | sha256sum
host-ready: bootstrap
	@if [ "$$(cat $(HOST_STAMP) 2>/dev/null)" = "$$($(SETUP_INPUTS))" ] && \
	   virsh -c qemu:///system net-info slimio-repro 2>/dev/null | grep -Eq '^Active: +yes' && \
	   virsh -c qemu:///system pool-info default 2>/dev/null | grep -Eq '^State: +running'; \
	then echo "host-ready: set up by these playbooks, libvirt's network and pool up (make" \
	  "setup-host runs the playbook anyway)"; \
	else $(MAKE) --no-print-directory setup-host; fi

# A run of the matrix goes on past a failed cell (--keep-going). Where anything failed, a
# second Snakemake makes the tables, figures, claims and report from the cells that finished
# (config/finished-cells-only.yaml after the profile: it runs no cell; the report, the
# verdicts and the summary name the missing cells with their logs), and the recipe fails.
# The next run runs the missing cells again. (Snakemake stopped by Ctrl-C exits as a failed
# one does: the second one starts then; Ctrl-C stops it too.) $(1): the target, $(2): the
# profile's file, $(3): the run's own --config (a second --config would replace the first,
# and SNAKEMAKE_ARGS may hold one).
FINISHED_CELLS = --keep-going || { echo "$(1): a job failed; making what the cells that" \
	"finished allow"; $(LOCAL) $(BIN)/snakemake --cores $(CORES) $(1) \
	--configfile $(2) config/finished-cells-only.yaml $(3) $(SNAKEMAKE_ARGS); false; }

# doctor --fix first: what an interrupted run left (its cells' VMs, mounts, processes, a
# Snakemake lock no Snakemake holds) is removed, each named.
reproduce: host-ready
	$(BIN)/slimio-repro doctor --fix --configfile config/profiles/$(PROFILE).yaml >&2 || true
	$(LOCAL) $(BIN)/snakemake --cores $(CORES) reproduce --rerun-incomplete \
	  --configfile config/profiles/$(PROFILE).yaml $(SNAKEMAKE_ARGS) \
	  $(call FINISHED_CELLS,reproduce,config/profiles/$(PROFILE).yaml)

motivation: host-ready
	$(LOCAL) $(BIN)/snakemake --cores $(CORES) motivation \
	  --configfile config/profiles/$(PROFILE).yaml $(SNAKEMAKE_ARGS) \
	  $(call FINISHED_CELLS,motivation,config/profiles/$(PROFILE).yaml)

DECIDE_BUDGET ?= 30m
decide: host-ready
	$(LOCAL) $(BIN)/slimio-repro decide results --budget $(DECIDE_BUDGET) --cores $(CORES) \
	  --configfile config/profiles/$(PROFILE).yaml

crash-campaign: setup-host
	$(LOCAL) $(BIN)/snakemake --cores 1 crash_campaign \
	  --configfile config/profiles/$(PROFILE).yaml $(SNAKEMAKE_ARGS)

# The guest box first (the calibration cells run in VMs), then the cells and the prediction.
calibrate: host-ready
	$(LOCAL) $(BIN)/snakemake --cores $(CORES) $(BOX)
	$(LOCAL) $(BIN)/slimio-repro calibrate --configfile config/config.yaml \
	  --configfile config/profiles/$(PROFILE).yaml

BENCH_TESTBED ?= bare
BENCH_ARGS ?=
# The VM bench needs the guest box; on bare, the two Redis builds and fio (device rates).
bench: setup-host
	$(LOCAL) $(BIN)/snakemake --cores $(CORES) \
	  $(if $(filter vm,$(BENCH_TESTBED)),$(BOX),build_redis build_fio_pinned)
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/slimio-repro bench --testbed $(BENCH_TESTBED) \
	  $(BENCH_ARGS)

# Both paths, every cell afresh (--forcerun run_cell; the builds stay cached), each compared
# with its own reference; both run even when the first regresses or a cell fails (the
# results of a path with a failed cell are made from its other cells), and either fails it.
nightly: setup-host
	status=0; \
	$(LOCAL) $(BIN)/snakemake --cores $(CORES) reproduce \
	  --configfile config/profiles/ci.yaml --config results_dir=$(NIGHTLY_RESULTS) \
	  --forcerun run_cell $(SNAKEMAKE_ARGS) $(call FINISHED_CELLS,reproduce, \
	  config/profiles/ci.yaml,--config results_dir=$(NIGHTLY_RESULTS)) || status=1; \
	$(LOCAL) $(BIN)/snakemake --cores $(CORES) reproduce \
	  --configfile config/profiles/smoke.yaml --config results_dir=$(NIGHTLY_VM_RESULTS) \
	  --forcerun run_cell $(SNAKEMAKE_ARGS) $(call FINISHED_CELLS,reproduce, \
	  config/profiles/smoke.yaml,--config results_dir=$(NIGHTLY_VM_RESULTS)) || status=1; \
	$(BIN)/slimio-repro regress $(NIGHTLY_RESULTS) $(NIGHTLY_REFERENCE) \
	  --out results/regression || status=1; \
	$(BIN)/slimio-repro regress $(NIGHTLY_VM_RESULTS) $(NIGHTLY_VM_REFERENCE) \
	  --out results/regression-vm || status=1; \
	$(PYTEST) -m nightly tests || status=1; \
	exit $$status

# The whole suite needs the one-node SLURM cluster (tests/test_slurm.py) and the artifact's
# FEMU (tests/test_femu_e2e.py) too.
# The fast tier runs on every CPU (pytest-xdist). The slow tier runs as two lanes side by
# side, the guests' tests and the host's, each one test at a time (after the builds they
# share), then the tests that need the machine to themselves (marked alone) one at a time:
# tests/conftest.py says which and why. Every part runs, whichever fails.
test: SETUP_ARGS += -e host_slurm_enabled=true -e host_femu_enabled=true
test: setup-host
	status=0; \
	$(PYTEST) -n auto -m "not slow" tests || status=1; \
	$(PYTEST) -n 2 --lanes -m "slow and not nightly and not alone" tests || status=1; \
	$(PYTEST) -m "slow and not nightly and alone" tests || status=1; \
	exit $$status

# The inner loop: unit, parser, planning, architecture and C unit tests; no VM, no Redis build
# (tests marked slow in tests/conftest.py are left out). Run `make setup-host` once first.
test-fast: bootstrap
	$(PYTEST) -n auto -m "not slow" tests

lint: bootstrap
	$(BIN)/snakemake --lint
	$(BIN)/ansible-lint --offline playbooks/
	$(BIN)/ansible-playbook --syntax-check playbooks/setup-host.yml
