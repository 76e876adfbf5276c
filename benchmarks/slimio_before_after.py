"""SlimIO's WAL throughput, two builds side by side: a change to SlimIO's
server against the build before it, so that no change costs WAL throughput unseen.

Run: .venv/bin/python benchmarks/slimio_before_after.py BEFORE_BIN AFTER_BIN [--rounds 5]

For each round and each logging policy, both builds run in turn (the order alternates every
round, so that a drift of the shared machine hits both alike): a fresh SlimIO device file
(`file` backend, O_DIRECT, on /var/tmp), redis-server with appendonly yes, no rewrites, and
redis-benchmark with 50 clients, 4 KiB values, 8-byte keys and 100 k SETs (the bench's
settings). It prints each run's requests per second, then per policy the median RPS of each
build and the median of the per-round ratios after/before with their range. Numbers, not
assertions: these machines are shared and noisy, so only the ratio measured side by side is
meaningful.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import tempfile
from pathlib import Path

from slimio_repro.agent.server import RedisServer, free_port

MIB = 1 << 20


def start_server(bin_dir: Path, work: Path, policy: str, **settings) -> RedisServer:
    """A SlimIO server of ``bin_dir`` on a fresh 2 GiB device file in ``work`` (emptied
    first), appendonly under ``policy``, no rewrites; ``settings``: more redis.conf lines."""
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    dev = work / "slimio.dev"
    with open(dev, "wb") as f:
        f.truncate(2048 * MIB)
    port = free_port()
    conf = work / "redis.conf"
    conf.write_text("".join(f"{k} {v}\n" for k, v in {
        "port": port, "bind": "127.0.0.1", "dir": str(work), "logfile": str(work / "log"),
        "appendonly": "yes", "appendfsync": policy, "save": '""',
        "auto-aof-rewrite-percentage": 0, "slimio-device": str(dev),
        "slimio-wal-size": "1024mb", "slimio-slot-size": "256mb", **settings}.items()))
    server = RedisServer(bin_dir, conf, port, work / "log")
    server.start(60)
    return server


def one_run(bin_dir: Path, policy: str, requests: int, work: Path) -> float:
    server = start_server(bin_dir, work, policy)
    port = server.port
    try:
        out = subprocess.run(
            [str(bin_dir / "redis-benchmark"), "-p", str(port), "-t", "set", "-n",
             str(requests), "-c", "50", "-d", "4096", "-r", "100000", "-q", "--csv"],
            capture_output=True, text=True, check=True).stdout
        return float(out.strip().splitlines()[-1].split(",")[1].strip('"'))
    finally:
        server.kill()
        shutil.rmtree(work, ignore_errors=True)


def two_builds_parser(doc: str) -> argparse.ArgumentParser:
    """The command line of a benchmark of two builds: BEFORE_BIN AFTER_BIN."""
    ap = argparse.ArgumentParser(description=doc.split("\n")[0])
    ap.add_argument("before", type=Path, help="bin directory of the build before")
    ap.add_argument("after", type=Path, help="bin directory of the build after")
    return ap


def main() -> None:
    ap = two_builds_parser(__doc__)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--requests", type=int, default=100_000)
    args = ap.parse_args()
    builds = {"before": args.before, "after": args.after}
    rps = {(p, b): [] for p in ("everysec", "always") for b in builds}
    with tempfile.TemporaryDirectory(dir="/var/tmp") as tmp:
        for r in range(args.rounds):
            for policy in ("everysec", "always"):
                order = list(builds) if r % 2 == 0 else list(reversed(builds))
                for b in order:
                    v = one_run(builds[b], policy, args.requests, Path(tmp) / b)
                    rps[(policy, b)].append(v)
                    print(f"round {r + 1} {policy:8s} {b:6s} {v:10.0f} SET/s", flush=True)
    print()
    for policy in ("everysec", "always"):
        before, after = rps[(policy, "before")], rps[(policy, "after")]
        ratios = [a / b for a, b in zip(after, before)]
        print(f"{policy:8s} before median {statistics.median(before):8.0f}  after median "
              f"{statistics.median(after):8.0f}  after/before median "
              f"{statistics.median(ratios):.3f} (range {min(ratios):.3f}-{max(ratios):.3f}, "
              f"{len(ratios)} rounds)")


if __name__ == "__main__":
    main()
