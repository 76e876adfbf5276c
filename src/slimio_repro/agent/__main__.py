"""``python3 -m slimio_repro.agent run-cell --plan-json F --out DIR`` (in the cell's VM),
``python3 -m slimio_repro.agent motivation-cell --plan-json F --out DIR`` (a motivation
cell, in its VM: :mod:`.motivation`), and
``python3 -m slimio_repro.agent provision --plan-json F [--system S]`` (a VM made by hand),
``python3 -m slimio_repro.agent overwrite --plan-json F --out DIR ...`` (uniform random
overwrites of the namespace: :mod:`.overwrite`), and
``python3 -m slimio_repro.agent bench --plans-json F --rounds N --warmup N --snapshots N
--out DIR`` (the bench's VM: :mod:`.bench`), and
``python3 -m slimio_repro.agent check-device --device D [--i-own-this-device D]`` (what the
bare testbed sees of an NVMe namespace, and why it would refuse it: :mod:`.nameddevice`;
reads only).

The plan was made and validated on the host (the guest has no jsonschema); its build paths
are the box's (testbed.vm puts them there).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from . import bench_runs, layout, motivation_cells, nameddevice, overwrite
from .cell_runner import CellError, run
from ..plan.cellplan import SYSTEMS, CellPlan
from .fdp import FdpError
from .provision import provision
from .roofline import RooflineError
from .vmstorage import GuestError


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="slimio_repro.agent")
    sub = ap.add_subparsers(dest="command", required=True)
    for name, helptext in (
            ("run-cell", "run one cell from its plan"),
            ("motivation-cell", "run one motivation cell (the paper's §3.1 scenarios on one "
                                "system) from its plan (with motivation)"),
            ("overwrite", "uniform random overwrites of the namespace under its trace "
                          "(slimio-repro gc-check; the plan's testbeds.vm)")):
        p = sub.add_parser(name, help=helptext)
        p.add_argument("--plan-json", required=True, help="the cell's plan (CellPlan as JSON)")
        p.add_argument("--out", required=True, help="its raw directory (must not exist)")
        p.add_argument("--expect-box-id", help="vm: the box the host booted (its inputs "
                       "hash); refused in a guest that is another box")
        p.add_argument("--expect-kernel", help="vm: the kernel the box was built with")
        p.add_argument("--blank-at", type=int, default=0, metavar="BYTES",
                       help="vm: the host bytes written in the namespace's FDP statistics "
                       "when it was made blank (0: a new device; a guest kept from an "
                       "earlier cell: the count at its reset); more is refused")
        if name == "overwrite":
            o = p
    q = sub.add_parser("provision", help="check a testbed VM and prepare its namespace for a "
                       "system, as a vm cell does first (for a VM made by hand)")
    q.add_argument("--plan-json", required=True, help="a cell's plan (its testbeds.vm and "
                   "device profile are used)")
    q.add_argument("--system", choices=SYSTEMS,
                   help="the system to prepare for (default: the plan's)")
    o.add_argument("--utilization", type=float, required=True)
    o.add_argument("--warm-drive-writes", type=float, required=True)
    o.add_argument("--measure-drive-writes", type=float, required=True)
    o.add_argument("--seed", type=int, required=True)
    b = sub.add_parser("bench", help="the bench's runs (slimio-repro bench --testbed vm)")
    b.add_argument("--plans-json", required=True, help="a JSON list of cell plans, one per "
                   "system and policy")
    b.add_argument("--rounds", type=int, required=True)
    b.add_argument("--warmup", type=int, required=True, help="warm-up SETs per run")
    b.add_argument("--snapshots", type=int, required=True, help="snapshots per run, each "
                   "beside its bound")
    b.add_argument("--out", required=True, help="where runs.jsonl goes")
    b.add_argument("--wal-only", action="store_true", help="no snapshot, recovery or bounds")
    b.add_argument("--profile", action="store_true", help="perf reports of each run's server "
                   "during its measured SETs")
    d = sub.add_parser("check-device", help="read an NVMe namespace as testbeds.bare.device "
                       "would (reads only): its facts and what refuses it, as JSON; exit 2 "
                       "if refused")
    d.add_argument("--device", required=True, help="the namespace, e.g. /dev/nvme1n1")
    d.add_argument("--i-own-this-device", help="as testbeds.bare.i_own_this_device")
    args = ap.parse_args(argv)
    if args.command == "check-device":
        try:
            facts = nameddevice.gather(args.device)
        except GuestError as exc:
            print(f"slimio_repro.agent: error: {exc}", file=sys.stderr)
            return 2
        found = nameddevice.problems(facts, args.i_own_this_device)
        print(json.dumps({"facts": facts.as_dict(), "problems": found}, indent=2))
        return 2 if found else 0
    if args.command == "bench":
        plans = [CellPlan.from_dict(p) for p in json.loads(Path(args.plans_json).read_text())]
        try:
            bench_runs.run(plans, args.rounds, args.warmup, Path(args.out),
                      say=lambda line: print(line, flush=True),
                      persistence_phases=not args.wal_only, fio_bin=layout.GUEST_FIO,
                      profile=args.profile, snapshots=args.snapshots)
        except (bench_runs.BenchRunError, GuestError) as exc:
            print(f"slimio_repro.agent: error: {exc}", file=sys.stderr)
            return 2
        return 0
    plan = CellPlan.from_json(Path(args.plan_json).read_text())
    try:
        if args.command == "overwrite":
            print(json.dumps(overwrite.run(
                plan, Path(args.out), args.utilization, args.warm_drive_writes,
                args.measure_drive_writes, args.seed, expect_box_id=args.expect_box_id,
                expect_kernel=args.expect_kernel), indent=2))
        elif args.command == "provision":
            print(json.dumps(provision(plan.vm, args.system or plan.cell.system), indent=2))
        elif args.command == "motivation-cell":
            print(motivation_cells.run(plan, Path(args.out), args.expect_box_id,
                                       args.expect_kernel, blank_at=args.blank_at))
        else:
            print(run(plan, Path(args.out), args.expect_box_id, args.expect_kernel,
                      blank_at=args.blank_at))
    except (CellError, GuestError, RooflineError, FdpError, ValueError) as exc:
        print(f"slimio_repro.agent: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
