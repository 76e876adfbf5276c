"""Poll the server's INFO at a fixed period and record one CSV row per sample.

Besides INFO's counters and the snapshot flags, each row holds the RSS of the server and of
its fork child (read from /proc), since the paper's memory column counts both.
"""

from __future__ import annotations

import csv
import threading
import time
from pathlib import Path

import redis

from .server import connect

COLUMNS = [
    "t_unix_s", "total_commands_processed", "instantaneous_ops_per_sec", "used_memory_bytes",
    "used_memory_rss_bytes", "server_rss_bytes", "child_rss_bytes", "child_pid",
    "rdb_bgsave_in_progress", "aof_rewrite_in_progress", "aof_rewrite_scheduled",
    "current_cow_size_bytes", "aof_current_size_bytes",
]


def rss_bytes(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except (FileNotFoundError, ProcessLookupError):
        pass
    return 0


def child_pids(pid: int) -> list[int]:
    """Children of ``pid`` (the fork child of a snapshot), from /proc."""
    out = []
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            out += [int(c) for c in (task / "children").read_text().split()]
    except FileNotFoundError:
        pass
    return out


class Sampler(threading.Thread):
    """Background thread writing samples to ``csv_path`` until :meth:`stop`."""

    def __init__(self, port: int, server_pid: int, csv_path: Path, interval_s: float):
        super().__init__(name="info-sampler", daemon=True)
        self.port, self.server_pid = port, server_pid
        self.csv_path, self.interval_s = csv_path, interval_s
        self._stop_event = threading.Event()
        self.samples = 0
        self.error: BaseException | None = None

    def cancel(self) -> None:
        """Ask the thread to stop without waiting (the cell is failing anyway)."""
        self._stop_event.set()

    def stop(self) -> None:
        """Stop after one last sample; raise whatever error the thread hit."""
        self._stop_event.set()
        self.join()
        if self.error:
            raise self.error

    def sample(self, cli: redis.Redis) -> dict:
        info = cli.info()  # default sections: server, clients, memory, persistence, stats, ...
        children = child_pids(self.server_pid)
        return {
            "t_unix_s": f"{time.time():.3f}",
            "total_commands_processed": info["total_commands_processed"],
            "instantaneous_ops_per_sec": info["instantaneous_ops_per_sec"],
            "used_memory_bytes": info["used_memory"],
            "used_memory_rss_bytes": info["used_memory_rss"],
            "server_rss_bytes": rss_bytes(self.server_pid),
            "child_rss_bytes": sum(rss_bytes(c) for c in children),
            "child_pid": children[0] if children else "",
            "rdb_bgsave_in_progress": info["rdb_bgsave_in_progress"],
            "aof_rewrite_in_progress": info["aof_rewrite_in_progress"],
            "aof_rewrite_scheduled": info["aof_rewrite_scheduled"],
            "current_cow_size_bytes": info.get("current_cow_size", 0),
            "aof_current_size_bytes": info.get("aof_current_size", 0),
        }

    def run(self) -> None:
        try:
            cli = connect(self.port)
            with open(self.csv_path, "w", newline="") as fh:
                writer = csv.DictWriter(fh, fieldnames=COLUMNS)
                writer.writeheader()
                next_at = time.monotonic()
                while not self._stop_event.is_set():
                    writer.writerow(self.sample(cli))
                    fh.flush()
                    self.samples += 1
                    next_at += self.interval_s
                    self._stop_event.wait(max(0.0, next_at - time.monotonic()))
                writer.writerow(self.sample(cli))
                self.samples += 1
        except BaseException as exc:  # surfaced by stop()
            self.error = exc
