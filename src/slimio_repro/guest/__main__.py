"""``python3 -m slimio_repro.guest run-cell --plan-json F --out DIR`` (in the cell's VM).

The plan was made and validated on the host (the guest has no jsonschema); its build paths
are the box's (testbed.vm puts them there).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .cell import CellError, run
from .cellplan import CellPlan
from .vmstorage import GuestError


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="slimio_repro.guest")
    sub = ap.add_subparsers(dest="command", required=True)
    p = sub.add_parser("run-cell", help="run one cell from its plan")
    p.add_argument("--plan-json", required=True, help="the cell's plan (CellPlan as JSON)")
    p.add_argument("--out", required=True, help="the cell's raw directory (must not exist)")
    args = ap.parse_args(argv)
    plan = CellPlan.from_json(Path(args.plan_json).read_text())
    try:
        print(run(plan, Path(args.out)))
    except (CellError, GuestError) as exc:
        print(f"slimio_repro.guest: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
