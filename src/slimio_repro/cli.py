"""``slimio-repro``: the framework's command line (the Snakemake rules call the same code)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from . import build, cell, cells, config as configmod, paths, slimio, sources


def _config(args) -> dict:
    files = args.configfile or [paths.CONFIG_DIR / "config.yaml"]
    overrides = json.loads(args.set) if args.set else None
    return configmod.load(files, overrides)


def cmd_validate_config(args) -> int:
    print(json.dumps(_config(args), indent=2))
    return 0


def cmd_matrix(args) -> int:
    for c in cells.expand(_config(args)):
        print(c.id)
    return 0


def cmd_fetch_source(args) -> int:
    print(json.dumps(sources.fetch(args.version, Path(args.output), args.tarball_dir), indent=2))
    return 0


def cmd_build_redis(args) -> int:
    record = build.build_redis(args.system, args.version, Path(args.tarball),
                               Path(args.output_dir), args.jobs, Path(args.log))
    print(json.dumps(record, indent=2))
    return 0


def cmd_run_cell(args) -> int:
    config = _config(args)
    c = cells.Cell.from_id(args.cell)
    p = paths.Paths.from_config(config)
    bin_dir = p.redis_build(cells.build_system(c.system), config["redis"]["version"]) / "bin"
    if not (bin_dir / "redis-server").exists():
        raise SystemExit(f"{bin_dir} has no redis-server: build it first "
                         f"(snakemake --cores all build_redis)")
    print(cell.run(c, config, p.cell_raw(c), bin_dir))
    return 0


def cmd_parse_cell(args) -> int:
    from . import parse
    record, series = parse.parse_cell(Path(args.raw_dir))
    print(json.dumps(record, indent=2))
    if args.timeseries:
        series.to_csv(args.timeseries, index=False)
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
    p = sub.add_parser("fetch-source", help="fetch and verify a pinned Redis tarball")
    p.add_argument("--version", required=True)
    p.add_argument("--output", required=True)
    p.add_argument("--tarball-dir", action="append", default=[])
    p.set_defaults(func=cmd_fetch_source)
    p = sub.add_parser("build-redis", help="build Redis from a verified tarball")
    p.add_argument("--system", default="baseline", choices=build.SYSTEMS)
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
    args = ap.parse_args(argv)
    try:
        return args.func(args)
    except (configmod.ConfigError, sources.SourceError, build.BuildError,
            cell.CellError, slimio.SlimioError, ValueError) as exc:
        print(f"slimio-repro: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
