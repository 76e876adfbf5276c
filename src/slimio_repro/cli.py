"""``slimio-repro``: the framework's command line (the Snakemake rules call the same code)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from . import paths
from . import plan as planmod
from .build import redis as build_redis, sources
from .agent import CellError, layout, overwrite, slimio
from .plan import Cell


def _config(args) -> dict:
    files = args.configfile or [paths.CONFIG_DIR / "config.yaml"]
    overrides = json.loads(args.set) if args.set else None
    return planmod.load(files, overrides)


def _plan(args) -> planmod.Plan:
    return planmod.make(_config(args))


def cmd_validate_config(args) -> int:
    """The fully resolved configuration (defaults filled in), after every planning check."""
    config = _config(args)
    planmod.make(config)
    print(json.dumps(config, indent=2))
    return 0


def cmd_matrix(args) -> int:
    for c in _plan(args).cells:
        print(c.id)
    return 0


def cmd_plan(args) -> int:
    """One cell's plan (as its run gets it), or every cell's id and plan hash."""
    plan = _plan(args)
    if args.cell:
        print(plan.cell(args.cell).to_json(), end="")
    else:
        for c in plan.cells:
            print(f"{c.id}\t{c.sha256()}")
    return 0


def cmd_fetch_source(args) -> int:
    print(json.dumps(sources.fetch(args.version, Path(args.output), args.tarball_dir), indent=2))
    return 0


def cmd_build_redis(args) -> int:
    record = build_redis.build_redis(args.system, args.version, Path(args.tarball),
                               Path(args.output_dir), args.jobs, Path(args.log))
    print(json.dumps(record, indent=2))
    return 0


def cmd_run_cell(args) -> int:
    from . import run
    plan = _plan(args)
    c = Cell.from_id(args.cell)
    cell_plan = plan.cell(c)
    out = paths.Paths(plan.results_dir, plan.build_dir).cell_raw(c)
    box = plan.build_dir / paths.BOX_PATTERN if c.testbed == "vm" else None
    with run.leases.held(cell_plan, out):
        print(run.run_cell(cell_plan, out, box))
    return 0


def cmd_parse_cell(args) -> int:
    from .parse import parse_cell
    record, series = parse_cell(Path(args.raw_dir))
    print(json.dumps(record, indent=2))
    if args.timeseries:
        series.to_csv(args.timeseries, index=False)
    return 0


def _size(text: str) -> int:
    """A byte count with an optional binary suffix: 4096, 64M, 1G, 180G."""
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
    t = text.strip().lower().removesuffix("ib").removesuffix("b")
    try:
        if t and t[-1] in units:
            return int(float(t[:-1]) * units[t[-1]])
        return int(t)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size (e.g. 4096, 64M, 1G)") \
            from None


def cmd_ftl(args) -> int:
    """Replay cells through the FTL model (and check their traces against the device)."""
    from . import ftl
    if args.check_device:
        checks = [ftl.check_device(ftl.CellDevice.load(d)) for d in args.raw_dirs]
        print(json.dumps(checks, indent=2))
        return 0 if all(c.get("host_bytes_ok") is not False
                        and c.get("ru_usage_ok") is not False for c in checks) else 1
    names = {"user_bytes": args.user_bytes, "op": args.op, "page_bytes": args.page_bytes,
             "ru_bytes": args.ru_bytes, "handles": args.handles}
    overrides = {k: v for k, v in names.items() if v is not None}
    if args.ignore_placement:
        overrides["placement"] = False
    out = ftl.replay_cells(args.raw_dirs, args.model, **overrides)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n")
    print(ftl.render(out))
    return 0


def _vm_cell(args, config: dict, policy: str, device_profile: str | None = None):
    """The plan of the config's vm testbed's slimio redis-benchmark cell under ``policy`` (its
    VM and namespace, on ``device_profile`` if given) and the built box; ValueError when
    the box is not built."""
    overrides = {**(json.loads(args.set) if args.set else {}),
                 "matrix": {"testbeds": ["vm"], "systems": ["slimio"],
                            "workloads": ["redis-benchmark"], "policies": [policy],
                            "repetitions": 1}}
    if device_profile:
        overrides["testbeds"] = planmod.merge(overrides.get("testbeds", {}),
                                              {"vm": {"device_profile": device_profile}})
    vm_config = planmod.load(args.configfile or [paths.CONFIG_DIR / "config.yaml"], overrides)
    plan = planmod.make(vm_config).cell(f"vm-slimio-redis-benchmark-{policy}-r1")
    box_file = paths.REPO_ROOT / config["build_dir"] / paths.BOX_PATTERN
    if not box_file.is_file():
        raise ValueError(f"{box_file} is not built: run `snakemake --cores all "
                         f"{box_file.relative_to(paths.REPO_ROOT)}` first")
    return plan, box_file


def cmd_gc_check(args) -> int:
    """Uniform random overwrites on the vm testbed's device: its GC against the FTL model and
    Desnoyers' closed form (exit 1 when the model disagrees)."""
    from .ftl import gccheck
    from .testbed import vm
    if args.compare:
        raw = Path(args.compare)
        summary = gccheck.compare(raw, args.model, raw / layout.RAW_EMULATOR_LOG)
    else:
        config = _config(args)
        profile = args.device_profile or config["testbeds"]["vm"]["device_profile"]
        plan, box_file = _vm_cell(args, config, "periodical", profile)
        # The guest's jobs refuse bad numbers: refuse them here, before a VM boots.
        overwrite.jobs(plan.vm.namespace, plan.vm.device.capacity_bytes, args.utilization,
                       args.warm_drive_writes, args.measure_drive_writes, args.seed)
        out = Path(args.out) if args.out else (
            paths.REPO_ROOT / config["results_dir"] / paths.GC_CHECK_DIR
            / f"{profile}-u{args.utilization}-seed{args.seed}")
        vm.run_overwrite(plan, out, box_file, args.utilization, args.warm_drive_writes,
                         args.measure_drive_writes, args.seed)
        summary = gccheck.compare(out, args.model, out / layout.RAW_EMULATOR_LOG)
    print(gccheck.render(summary), end="")
    return 0 if summary["model_agrees"] else 1


def cmd_claims(args) -> int:
    """Judge the paper's claims on a finished run and print the one-screen summary."""
    from . import claims
    results = Path(args.results_dir)
    # The motivation's records too, where `make motivation` ran into the same directory.
    extra = tuple(f for f in [results / paths.MOTIVATION_TABLE] if f.is_file())
    # The looks of `slimio-repro decide`, where it added repetitions to this run.
    matrix = _config(args)["matrix"]
    # The cells the run left out (config finished_cells_only), where it left any.
    from .run import finished
    missing = finished.read(results / paths.MISSING_CELLS)
    out = claims.judge_run(results / paths.CELLS_TABLE, Path(args.claims),
                           results / Path(paths.VERDICT_FILES["csv"]).parent, extra,
                           looks=matrix["looks"], repetitions=matrix["repetitions"],
                           missing=missing)
    print(out["summary"].read_text(), end="")
    return 0


def cmd_crash_campaign(args) -> int:
    """SlimIO and stock Redis crashed and restarted many times; exit 1 if any iteration
    found a problem."""
    from . import crash
    config = _config(args)
    vm_plan = box_file = None
    if args.testbed == "vm":
        vm_plan, box_file = _vm_cell(args, config, "always")
    out = Path(args.out) if args.out else (
        paths.REPO_ROOT / config["results_dir"] / paths.CRASH_DIR
        / ("power-cut" if vm_plan else ""))
    summary = crash.run_configured(
        config, out, work_dir=args.work_dir, iterations=args.iterations,
        systems=args.systems.split(",") if args.systems else (["slimio"] if vm_plan else None),
        policies=args.policies.split(",") if args.policies else None, seed=args.seed,
        vm_plan=vm_plan, box_file=box_file)
    print((out / "summary.md").read_text(), end="")
    return 0 if crash.passed(summary) else 1


def cmd_bench(args) -> int:
    """The systems side by side, interleaved, under each policy; the table on stdout."""
    from datetime import datetime, timezone

    from .run import bench
    config = _config(args)
    testbed = args.testbed
    systems = args.systems.split(",") if args.systems else bench.DEFAULT_SYSTEMS[testbed]
    policies = args.policies.split(",") if args.policies else ["periodical", "always"]
    requests = args.requests or bench.DEFAULT_REQUESTS[testbed]
    warmup = requests // 10 if args.warmup is None else args.warmup
    snapshots = bench.DEFAULT_SNAPSHOTS if args.snapshots is None else args.snapshots
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    out = Path(args.out) if args.out else (
        paths.REPO_ROOT / config["results_dir"] / "bench" / f"{testbed}-{stamp}")
    fio_bin = None
    if testbed == "bare" and not args.wal_only:
        from .build import fio as fiobuild
        fio_bin = (paths.REPO_ROOT / config["build_dir"] / paths.FIO_PATTERN.format(
            version=fiobuild.load_pin()["version"])).resolve()
    bench.check(out, systems, args.rounds, requests, warmup, fio_bin,
                perf_needed=args.profile and testbed == "bare", snapshots=snapshots)
    plans = planmod.bench_plans(config, testbed, systems, policies, requests, warmup)
    box = paths.REPO_ROOT / config["build_dir"] / paths.BOX_PATTERN
    print(bench.run(plans, out, args.rounds, warmup, box if testbed == "vm" else None,
                    persistence_phases=not args.wal_only, fio_bin=fio_bin,
                    profile=args.profile, snapshots=snapshots), end="")
    print(f"written: {out}")
    return 0


def _seconds(text: str) -> float:
    """A duration: 90, 90s, 30m, 4h."""
    t = text.strip().lower()
    factor = {"s": 1, "m": 60, "h": 3600}.get(t[-1:], None)
    try:
        return float(t[:-1]) * factor if factor else float(t)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration (e.g. 90s, 30m, 4h)") \
            from None


def cmd_estimate(args) -> int:
    """The run's schedule on a cluster and its expected wall time, from measured cells."""
    from dataclasses import replace
    cluster = planmod.Cluster.load(args.cluster)
    if args.speed is not None:
        cluster = replace(cluster, speed=args.speed)
    logs = [Path(f) for f in args.snakemake_log] if args.snakemake_log else None
    calibration = Path(args.calibrate) if args.calibrate else paths.ESTIMATE_CALIBRATION
    e = planmod.estimate_run(_config(args), cluster, calibration, logs,
                             builds=not args.builds_cached, draws=args.draws, seed=args.seed)
    print(planmod.render_estimate(e, args.goal), end="")
    return 0


def cmd_calibrate(args) -> int:
    """This host's speed from two smoke cells, and the profile's run it predicts here."""
    from .run import calibrate
    files = args.configfile or [paths.CONFIG_DIR / "config.yaml", calibrate.SMOKE_PROFILE]
    config = planmod.load(files, json.loads(args.set) if args.set else None)
    build_dir = Path(args.build_dir or config["build_dir"])
    record = calibrate.run(config, build_dir,
                           measured=[Path(m) for m in args.measured or []],
                           draws=args.draws)
    print(calibrate.summary(record), end="")
    return 0


def cmd_report(args) -> int:
    """Render results/report.html from a run's verdicts, tables and figures."""
    from . import report
    print(report.write(Path(args.results_dir)))
    return 0


def cmd_doctor(args) -> int:
    """What interrupted runs left on this host (cells' processes, VMs, volumes, mounts,
    loop devices, partial cells, a stale Snakemake lock): listed with the command that
    removes each, or removed with --fix. Exit 1 while anything is left."""
    from .run import leases
    from .testbed import vm
    config = _config(args)
    work = [vm.work_dir(config["testbeds"]["vm"]["work_dir"])]
    results = [Path(d) for d in (args.results_dir or [config["results_dir"]])]
    found = leases.leftovers(work, results, [Path.cwd()])
    if args.fix and found:
        leases.fix(found)
        for item in found:
            print(f"removed {item.kind}: {item.what}")
        found = leases.leftovers(work, results, [Path.cwd()])
    for item in found:
        print(f"left behind: {item.kind} {item.what}\n  remove it: {item.remedy}")
    if not found:
        print("doctor: nothing left behind by an interrupted run")
    return 1 if found else 0


def cmd_pipeline_faults(args) -> int:
    """The pipeline's fault campaign (run/faults.py): exit 1 unless every round passed."""
    from .claims import decide
    from .run import faults
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    kinds = args.kinds.split(",") if args.kinds else faults.KINDS
    unknown = sorted(set(kinds) - set(faults.KINDS))
    if unknown:
        print(f"error: --kinds {','.join(unknown)}: not a fault; choose from "
              f"{','.join(faults.KINDS)}", file=sys.stderr)
        return 2
    configfiles = args.configfile or [str(paths.CONFIG_DIR / "profiles" / "smoke.yaml")]
    with faults.WorkFs(out / "work.img", out / "work", args.work_gib) as work:
        rounds = faults.run(out, configfiles, args.faults, args.seed, work,
                            decide.find_snakemake(), kinds, args.testbeds.split(","),
                            faults.VM_SHARE if args.vm_share is None else args.vm_share)
    print((out / "summary.md").read_text())
    return 0 if all(r.ok for r in rounds) else 1


def cmd_decide(args) -> int:
    """More repetitions where a claim is undecided, within a budget of cell time."""
    from .claims import decide
    files = [paths.CONFIG_DIR / "config.yaml"] + [Path(f) for f in args.configfile or []]
    repetitions = planmod.load(files)["matrix"]["repetitions"]
    decide.run(Path(args.results_dir), files, repetitions, decide.parse_budget(args.budget),
               cores=args.cores, max_looks=args.max_looks, dry_run=args.dry_run,
               claims_file=Path(args.claims))
    summary = Path(args.results_dir) / paths.VERDICT_FILES["summary"]
    if summary.exists() and not args.dry_run:
        print(summary.read_text(), end="")
    return 0


def cmd_regress(args) -> int:
    """Compare a run with a reference; exit 1 on a regression."""
    from .claims import regress
    result = regress.compare(regress.fingerprint(Path(args.current)),
                             json.loads(Path(args.reference).read_text()))
    out = Path(args.out) if args.out else Path(args.current) / "regression"
    md, js = regress.write(result, out)
    print(md.read_text(), end="")
    print(f"written: {md}, {js}")
    return 1 if result["regression"] else 0


def cmd_nightly_reference(args) -> int:
    """Make a regression reference from runs of one profile on an unchanged tree."""
    from .claims import regress
    ref = regress.make_reference([Path(r) for r in args.runs])
    out = Path(args.output)
    if out.exists() and not args.force:
        raise regress.RegressError(f"{out} exists: refreshing the reference is deliberate, "
                                   "pass --force")
    out.write_text(json.dumps(ref, indent=1) + "\n")
    print(f"{out}: {len(ref['quantities'])} quantities from {len(args.runs)} run(s)")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="slimio-repro", description=__doc__)
    sub = ap.add_subparsers(dest="command", required=True)

    def with_config(p):
        p.add_argument("--configfile", action="append",
                       help="config file(s), merged in order (default: config/config.yaml)")
        p.add_argument("--set", help="JSON object merged over the config files")
        return p

    with_config(sub.add_parser("validate-config", help="print the validated config")
                ).set_defaults(func=cmd_validate_config)
    with_config(sub.add_parser("matrix", help="list the cell ids of the matrix")
                ).set_defaults(func=cmd_matrix)
    p = with_config(sub.add_parser("plan", help="print a cell's plan, or every cell's plan hash"))
    p.add_argument("--cell", help="cell id, e.g. vm-slimio-ycsb-a-always-r1")
    p.set_defaults(func=cmd_plan)
    p = sub.add_parser("fetch-source", help="fetch and verify a pinned Redis tarball")
    p.add_argument("--version", required=True)
    p.add_argument("--output", required=True)
    p.add_argument("--tarball-dir", action="append", default=[])
    p.set_defaults(func=cmd_fetch_source)
    p = sub.add_parser("build-redis", help="build Redis from a verified tarball")
    p.add_argument("--system", default="baseline", choices=build_redis.SYSTEMS)
    p.add_argument("--version", required=True)
    p.add_argument("--tarball", required=True)
    p.add_argument("--output-dir", required=True)
    p.add_argument("--jobs", type=int, default=0)
    p.add_argument("--log", required=True)
    p.set_defaults(func=cmd_build_redis)
    p = with_config(sub.add_parser("run-cell", help="run one cell into its raw directory"))
    p.add_argument("--cell", required=True, help="cell id, e.g. bare-baseline-redis-benchmark-periodical-r1")
    p.set_defaults(func=cmd_run_cell)
    p = sub.add_parser("parse-cell", help="parse a raw cell directory into a tidy record")
    p.add_argument("raw_dir")
    p.add_argument("--timeseries", help="also write the time series CSV here")
    p.set_defaults(func=cmd_parse_cell)
    p = sub.add_parser(
        "ftl", help="replay cells' NVMe traces through an FTL model (WAF with garbage "
        "collection); several cells replay in order on one un-reformatted device")
    p.add_argument("raw_dirs", nargs="+", help="raw vm cell directories, e.g. "
                   "results/raw/vm-slimio-redis-benchmark-periodical-r1")
    p.add_argument("--model", default="femu-fdp", help="femu-fdp (the paper's FEMU FTL, "
                   "default) or greedy (plain page-mapped FTL)")
    p.add_argument("--user-bytes", type=_size, help="user capacity (default: the cell's "
                   "namespace)")
    p.add_argument("--op", type=float, help="over-provisioning, a fraction of the user "
                   "capacity (default: FEMU's 1/3, physical = user / 0.75)")
    p.add_argument("--page-bytes", type=_size, help="flash page (default 4K)")
    p.add_argument("--ru-bytes", type=_size, help="reclaim unit (default: the cell's)")
    p.add_argument("--handles", type=int, help="placement handles (default: the cell's)")
    p.add_argument("--ignore-placement", action="store_true",
                   help="send every write to handle 0 (placement ignored)")
    p.add_argument("--json", help="also write the full result here")
    p.add_argument("--check-device", action="store_true",
                   help="instead: check each trace against the FDP statistics and reclaim "
                   "unit status the device reported (exit 1 on a mismatch)")
    p.set_defaults(func=cmd_ftl)
    p = with_config(sub.add_parser(
        "gc-check", help="fill the vm testbed's device (FEMU) and overwrite it at random: its "
        "GC against the FTL model replaying the same trace, and against Desnoyers' closed "
        "form (exit 1 when the model disagrees by more than 2 %%)"))
    p.add_argument("--device-profile", help="a femu/ profile (default: testbeds.vm."
                   "device_profile), e.g. femu-fdp-gc")
    p.add_argument("--utilization", type=float, default=0.6,
                   help="share of the namespace holding live data (0.6)")
    p.add_argument("--warm-drive-writes", type=float, default=1.0,
                   help="random overwrites before the measured part, in capacities (1)")
    p.add_argument("--measure-drive-writes", type=float, default=1.0,
                   help="the measured part, in capacities (1)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--model", default="femu-fdp")
    p.add_argument("--out", help="its records (default: RESULTS_DIR/gc-check/PROFILE-uU-seedS)")
    p.add_argument("--compare", metavar="DIR", help="instead: compare again the records of "
                   "an earlier run in DIR")
    p.set_defaults(func=cmd_gc_check)
    p = with_config(sub.add_parser(
        "claims", help="judge the paper's claims on a finished run (results/claims/"
        "verdicts.*; with its motivation's records where make motivation wrote them there) "
        "and print the summary; give the run's --configfile (and RESULTS_DIR/claims/"
        "decide.yaml where `decide` added repetitions)"))
    p.add_argument("results_dir", help="a run's results directory, e.g. results")
    p.add_argument("--claims", default=str(paths.CLAIMS_FILE), help="the claims file")
    p.set_defaults(func=cmd_claims)
    p = with_config(sub.add_parser(
        "crash-campaign", help="crash SlimIO and stock Redis at random moments and named "
        "failpoints, restart twice, check every client's data (exit 1 on a finding)"))
    p.add_argument("--iterations", type=int, help="default: crash.iterations (1000)")
    p.add_argument("--systems", help="comma-separated: slimio,baseline (default: crash.systems)")
    p.add_argument("--policies", help="comma-separated: always,periodical")
    p.add_argument("--seed", type=int, help="default: crash.seed")
    p.add_argument("--out", help="default: RESULTS_DIR/crash")
    p.add_argument("--work-dir", help="scratch space (default: crash.work_dir)")
    p.add_argument("--testbed", choices=["bare", "vm"], default="bare",
                   help="bare: kill -9 on this host (file backend; default); vm: SlimIO on "
                   "the nvme backend in a testbed VM, the VM destroyed as the power cut")
    p.set_defaults(func=cmd_crash_campaign)
    p = with_config(sub.add_parser(
        "bench", help="nopersist, baseline and slimio (and slimio-nofdp in a VM) side by "
        "side, interleaved, under each policy: the median and spread of each ratio"))
    p.add_argument("--testbed", choices=["bare", "vm"], default="bare",
                   help="bare: this host, a fresh ext4 image per run (default); vm: one VM "
                   "of the config's vm testbed, its namespace formatted for each run")
    p.add_argument("--systems", help="comma-separated (default: nopersist,baseline,slimio; "
                   "and slimio-nofdp in a VM)")
    p.add_argument("--policies", help="comma-separated: periodical,always (the default)")
    p.add_argument("--rounds", type=int, default=3, help="rounds of interleaved runs (3)")
    p.add_argument("--requests", type=int, help="measured SETs per run (default: 150000 on "
                   "bare, 30000 in a VM)")
    p.add_argument("--warmup", type=int, help="SETs before each run's measurement (default: "
                   "a tenth of --requests)")
    p.add_argument("--wal-only", action="store_true", help="measure the SETs only: no "
                   "snapshot, recovery or no-I/O bounds after them")
    p.add_argument("--snapshots", type=int, help="snapshots per run after its SETs, each "
                   "beside its no-I/O bound; the run keeps their medians (default: 3)")
    p.add_argument("--profile", action="store_true", help="record every CPU with perf "
                   "(software clock, about 1 kHz) during each run's measured SETs; the "
                   "server's report and the machine's per command (idle included) go to "
                   "OUT/profiles/ (a profiled run's rates carry perf's cost)")
    p.add_argument("--out", help="default: RESULTS_DIR/bench/TESTBED-UTC")
    p.set_defaults(func=cmd_bench)
    p = with_config(sub.add_parser(
        "estimate", help="the wall time of the configured run on a cluster: each cell's time "
        "from measured cells (phases scaled to the profile's work), the jobs list-scheduled "
        "on the cluster's nodes, an interval from seeded draws of the measured cells"))
    p.add_argument("--cluster", required=True, help="a cluster file, e.g. "
                   "config/clusters/paper-8-kvm.yaml")
    p.add_argument("--calibrate", metavar="RESULTS_DIR", help="measured cells "
                   "(RESULTS_DIR/raw/*) and Snakemake logs (RESULTS_DIR/logs/snakemake/*.log) "
                   "to calibrate on (default: "
                   f"{paths.ESTIMATE_CALIBRATION.relative_to(paths.REPO_ROOT)}, smoke vm "
                   "cells measured under TCG on 2 cores)")
    p.add_argument("--snakemake-log", action="append", help="the Snakemake log(s) that "
                   "measured the builds and the post-processing (default: RESULTS_DIR/logs/"
                   "snakemake/*.log)")
    p.add_argument("--speed", type=float, help="overrides the cluster file's speed: how many "
                   "times faster a cell runs on its nodes than on the calibration host")
    p.add_argument("--builds-cached", action="store_true", help="the builds exist: leave "
                   "them out")
    p.add_argument("--goal", type=_seconds, default=4 * 3600.0,
                   help="a wall time to compare with, and what it would take (default 4h)")
    p.add_argument("--draws", type=int, default=1000, help="Monte Carlo draws (1000)")
    p.add_argument("--seed", type=int, default=1)
    p.set_defaults(func=cmd_estimate)
    p = with_config(sub.add_parser(
        "calibrate", help="this host's speed: two smoke cells, each in a VM booted for "
        "it (about 2.5 minutes), against the reference run's cells of their sets; then the "
        "run of the configured profile (default smoke) that it predicts here, the builds "
        "cached (written to BUILD_DIR/calibration.json)"))
    p.add_argument("--build-dir", help="where the guest box is and the result goes "
                   "(default: the config's build_dir)")
    p.add_argument("--measured", metavar="RAW_DIR", action="append", help="instead of "
                   "running the calibration cells: finished runs of them (their raw "
                   "directories; once per cell)")
    p.add_argument("--draws", type=int, default=1000, help="Monte Carlo draws (1000)")
    p.set_defaults(func=cmd_calibrate)
    p = sub.add_parser("report", help="render RESULTS_DIR/report.html")
    p.add_argument("results_dir")
    p.set_defaults(func=cmd_report)
    p = with_config(sub.add_parser(
        "doctor", help="list what interrupted runs left on this host (processes, VMs, "
        "volumes, mounts, loop devices, partial cells, a stale Snakemake lock) and how to "
        "remove it; --fix removes it"))
    p.add_argument("results_dir", nargs="*", help="results directories whose partial cells "
                   "to look for (default: the config's results_dir)")
    p.add_argument("--fix", action="store_true", help="remove what is left behind")
    p.set_defaults(func=cmd_doctor)
    p = sub.add_parser(
        "pipeline-faults", help="the pipeline's fault campaign: a tiny matrix, one fault per "
        "round at a random moment (kills of Snakemake, a cell, QEMU; a full disk; a guest "
        "that never answers), then the rerun, checked for completion, untouched finished "
        "cells and leaks")
    p.add_argument("--faults", type=int, default=50, help="rounds (default 50)")
    p.add_argument("--kinds", help="comma-separated fault kinds (default: all, in turn; a kind named twice comes twice as often)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--testbeds", default="vm,bare", help="the matrix's testbeds (two cells "
                   "each; default vm,bare)")
    p.add_argument("--vm-share", type=float, help="share of the faults that may hit either "
                   "testbed put on a vm cell (default: run/faults.py's VM_SHARE, 0.25)")
    p.add_argument("--out", required=True, help="the campaign's directory (results, logs, "
                   "rounds.jsonl, summary.md); must be reachable by libvirt's QEMU, e.g. "
                   "under /var/tmp")
    p.add_argument("--work-gib", type=float, default=3.0, help="size of the campaign's own "
                   "work_dir file system (default 3)")
    p.add_argument("--configfile", action="append", help="profile (default: smoke)")
    p.set_defaults(func=cmd_pipeline_faults)
    p = sub.add_parser("decide", help="run more repetitions only where a claim is "
                       "undecided: plan the cells that decide the most claims per minute, run "
                       "them through snakemake, judge again, until decided or out of budget")
    p.add_argument("results_dir", help="a finished run's results directory, e.g. results")
    p.add_argument("--budget", required=True, help="cell time to spend, e.g. 30m, 1h")
    p.add_argument("--configfile", action="append",
                   help="the run's config file(s) after config/config.yaml, e.g. "
                   "config/profiles/smoke.yaml")
    p.add_argument("--cores", default="all", help="snakemake --cores (default: all)")
    p.add_argument("--max-looks", type=int, default=4,
                   help="further looks at most (each spends part of the error; default: 4)")
    p.add_argument("--dry-run", action="store_true", help="print the next look's plan only")
    p.add_argument("--claims", default=str(paths.CLAIMS_FILE), help="the claims file")
    p.set_defaults(func=cmd_decide)
    p = sub.add_parser("regress", help="compare a run's ratios and claim values with a "
                       "reference (exit 1 on a regression)")
    p.add_argument("current", help="the run's results directory")
    p.add_argument("reference", help="the reference, e.g. results/reference/nightly.json")
    p.add_argument("--out", help="where to write PREFIX.md and PREFIX.json (default "
                   "CURRENT/regression)")
    p.set_defaults(func=cmd_regress)
    p = sub.add_parser("nightly-reference", help="make a regression reference from runs of "
                       "one profile on an unchanged tree (tolerances from their spread)")
    p.add_argument("output", help="e.g. results/reference/nightly.json")
    p.add_argument("runs", nargs="+", help="results directories of the runs")
    p.add_argument("--force", action="store_true", help="replace an existing reference")
    p.set_defaults(func=cmd_nightly_reference)
    args = ap.parse_args(argv)
    try:
        return args.func(args)
    except (planmod.ConfigError, sources.SourceError, build_redis.BuildError,
            CellError, slimio.SlimioError, KeyError, ValueError, RuntimeError) as exc:
        print(f"slimio-repro: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
