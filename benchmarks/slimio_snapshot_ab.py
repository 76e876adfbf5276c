"""SlimIO's On-Demand-Snapshot against its no-I/O bound, two builds side by side: a
change to the snapshot's path against the build before it, both held to the same bound.

Run: .venv/bin/python benchmarks/slimio_snapshot_ab.py BEFORE_BIN AFTER_BIN [--pairs 40]

Each build gets one server on a fresh SlimIO device file (`file` backend, O_DIRECT, on
/var/tmp) holding the bench's dataset, written by the bench's own command: redis-benchmark's
150,000 SETs of 4 KiB values over 13,000 keys with 8-byte keys, about 53 MB. The two
servers then take turns: per pair, each build takes one BGSAVE into the device and one into
the discard sink (slimio-snapshot-sink discard: the same fork and serialisation, no copy, no
I/O), the build order alternating every pair, so that the shared machine's drift hits both
builds and both sinks alike. Times and CPU seconds come from each child's log line (its
serialising thread's and all its threads'). It prints every pair, then per build the
medians of the per-pair ratios device / discard (time, the serialising thread's CPU, all
threads' CPU) with their range. Numbers, not assertions. The same build twice measures
the build against its bound and the A/B's own noise; the same build twice with
`--after-set OPTION VALUE` (redis.conf lines of the after server only) measures a setting.
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import tempfile
from pathlib import Path

from slimio_before_after import start_server, two_builds_parser
from slimio_repro.agent import redislog, slimio
from slimio_repro.agent.server import RedisServer


def start(bin_dir: Path, work: Path, keys: int, value_bytes: int,
          settings: dict[str, str]) -> RedisServer:
    """A SlimIO server of ``bin_dir`` on a fresh device file in ``work``, with the dataset
    (``settings``: more redis.conf lines)."""
    server = start_server(bin_dir, work, "everysec", **{"slimio-sqpoll": "no", **settings})
    subprocess.run([str(bin_dir / "redis-benchmark"), "-h", "127.0.0.1", "-p",
                    str(server.port), "-t", "set", "-c", "50", "-n", str(keys * 150 // 13),
                    "-r", str(keys), "-d", str(value_bytes), "--key-width", "8", "-q"],
                   check=True, capture_output=True)
    return server


def snapshot(server: RedisServer, sink: str) -> dict:
    if sink == "discard":
        slimio.discard_bgsave(server, 600)
    else:
        server.bgsave(600)
    last = redislog.snapshots(server.log_file.read_text())[-1]
    return {"s": last.get("child_duration_s", last["duration_s"]),
            "thread_cpu_s": last["slimio_thread_cpu_s"], "cpu_s": last["slimio_cpu_s"]}


def main() -> None:
    ap = two_builds_parser(__doc__)
    ap.add_argument("--pairs", type=int, default=40)
    ap.add_argument("--keys", type=int, default=13_000)
    ap.add_argument("--value-bytes", type=int, default=4096)
    ap.add_argument("--after-set", nargs=2, action="append", default=[],
                    metavar=("OPTION", "VALUE"), help="a redis.conf line of the after "
                    "server only, e.g. slimio-snapshot-buffer-size 262144 (repeatable)")
    args = ap.parse_args()
    builds = {"before": args.before, "after": args.after}
    settings = {"before": {}, "after": dict(args.after_set)}
    ratios = {b: {"s": [], "thread_cpu_s": [], "cpu_s": []} for b in builds}
    with tempfile.TemporaryDirectory(dir="/var/tmp") as tmp:
        servers = {b: start(d, Path(tmp) / b, args.keys, args.value_bytes, settings[b])
                   for b, d in builds.items()}
        try:
            for p in range(args.pairs):
                for b in (builds if p % 2 == 0 else reversed(list(builds))):
                    dev, bound = snapshot(servers[b], "device"), snapshot(servers[b], "discard")
                    for k in ratios[b]:
                        ratios[b][k].append(dev[k] / bound[k])
                    print(f"pair {p + 1:2d} {b:6s} device {dev['s']:.3f} s (thread CPU "
                          f"{dev['thread_cpu_s']:.3f}, all {dev['cpu_s']:.3f})  discard "
                          f"{bound['s']:.3f} s (thread CPU {bound['thread_cpu_s']:.3f})  "
                          f"ratio {ratios[b]['s'][-1]:.3f}", flush=True)
        finally:
            for s in servers.values():
                s.kill()
            shutil.rmtree(tmp, ignore_errors=True)
    print()
    for b in builds:
        cols = "  ".join(
            f"{k} {statistics.median(v):.3f} ({min(v):.3f}-{max(v):.3f})"
            for k, v in ratios[b].items())
        print(f"{b:6s} device / discard, median (range) over {args.pairs} pairs:  {cols}")


if __name__ == "__main__":
    main()
