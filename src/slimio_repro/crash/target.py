"""The servers a crash campaign kills: SlimIO (`file` backend on a device file) and stock
Redis (AOF files), started in their own process group so that a kill takes the server and
its fork child together, as kill -9 of a crashed host's processes would."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import redis

from ..agent import inmemory, server as guest_server

MIB = 1024 * 1024


class StartRefused(RuntimeError):
    """The server exited or never became ready: the message holds its log's last lines."""


class TargetServer:
    """One redis-server of ``system`` (slimio or baseline) with its data in ``work``."""

    def __init__(self, system: str, bin_dir: Path, work: Path, policy: str, *,
                 device_mib: int = 64, wal_mib: int = 8, rewrite_min_mib: int = 4,
                 rewrite_percentage: int = 100, backend: str = "file",
                 device: Path | None = None, admin: Path | None = None):
        self.system, self.bin_dir, self.work, self.admin = system, bin_dir, work, admin
        self.host, self.port = "127.0.0.1", guest_server.free_port()
        self.log = work / "redis.log"
        self.data = work / "data"
        self.data.mkdir(parents=True, exist_ok=True)
        self.options = {
            "port": self.port, "bind": "127.0.0.1", "dir": str(self.data),
            "logfile": str(self.log), "appendonly": "yes",
            "appendfsync": "always" if policy == "always" else "everysec",
            "save": '""', "auto-aof-rewrite-percentage": rewrite_percentage,
            "auto-aof-rewrite-min-size": f"{rewrite_min_mib}mb",
            "enable-debug-command": "local",
        }
        self.device = None
        if system == "slimio":
            self.device = device or work / "slimio.dev"
            if not self.device.exists():
                with open(self.device, "wb") as f:
                    f.truncate(device_mib * MIB)
            self.options.update({
                "slimio-device": str(self.device), "slimio-backend": backend,
                "slimio-wal-size": f"{wal_mib}mb", "slimio-format": "if-blank",
            })
        self.proc: subprocess.Popen | None = None
        self.exited_at: float | None = None

    # -- process control ---------------------------------------------------------------
    def start(self, failpoints: str = "", timeout_s: float = 60) -> float:
        """Start and wait until it serves (loading done); seconds taken. StartRefused when it
        exits or does not become ready. A port another process took since it was chosen
        (free_port cannot reserve it) is replaced, up to three times."""
        for attempt in range(3):
            try:
                return self._start(failpoints, timeout_s)
            except StartRefused as exc:
                if "Address already in use" not in str(exc) or attempt == 2:
                    raise
                self.port = self.options["port"] = guest_server.free_port()
        raise AssertionError("unreachable")

    def _start(self, failpoints: str, timeout_s: float) -> float:
        conf = self.work / "redis.conf"
        conf.write_text("".join(f"{k} {v}\n" for k, v in self.options.items()))
        self.exited_at = None
        rs = guest_server.RedisServer(self.bin_dir, conf, self.port, self.log,
                                      env={"SLIMIO_FAILPOINTS": failpoints}, new_session=True)
        try:
            seconds = rs.start(timeout_s)
        except guest_server.ServerError as exc:
            self.proc = rs.proc
            self.kill()
            raise StartRefused(f"{exc}: {self.log_tail()}") from None
        finally:
            self.proc = rs.proc
        threading.Thread(target=self._watch_exit, daemon=True).start()
        return seconds

    def _watch_exit(self) -> None:
        proc = self.proc
        proc.wait()
        self.exited_at = time.time()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> float:
        """SIGKILL the whole process group (server and fork child); the time of the kill."""
        t = time.time()
        if self.proc is not None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()
        return t

    def cleanup(self) -> None:
        """Nothing of the iteration's server left running."""
        self.kill()

    def group_survivors(self) -> list[int]:
        """Processes still in the (dead) server's process group: an orphaned fork child."""
        return guest_server.processes(group=self.proc.pid) if self.proc else []

    def shutdown(self, timeout_s: float = 60) -> int:
        """SHUTDOWN and wait for the exit; its status."""
        try:
            guest_server.connect(self.port, timeout=timeout_s).shutdown()
        except redis.ConnectionError:
            pass
        except redis.ResponseError as exc:
            raise StartRefused(f"SHUTDOWN refused: {exc}") from exc
        return self.proc.wait(timeout=timeout_s)

    def client(self) -> redis.Redis:
        return guest_server.connect(self.port, timeout=30)

    def log_tail(self, lines: int = 6) -> str:
        if not self.log.exists():
            return ""
        text = self.log.read_text(errors="replace").strip().splitlines()
        return " | ".join(line.split(" ", 4)[-1] for line in text[-lines:])

    def aof_tail(self, limit: int = 64 * 1024) -> bytes:
        """Stock Redis: the last ``limit`` bytes of the incremental AOF its next writes are
        appended to; b"" for SlimIO or when there is none."""
        path = inmemory.newest_incr(self.data / inmemory.AOF_DIR) \
            if self.system == "baseline" else None
        if path is None:
            return b""
        with open(path, "rb") as f:
            f.seek(max(0, path.stat().st_size - limit))
            return f.read()

    # -- the device (SlimIO), read with slimio-admin while the server is down -------------
    def inspect(self) -> dict:
        return json.loads(subprocess.run(
            [str(self.admin), "inspect", "--device", str(self.device), "--json"], check=True,
            capture_output=True, text=True).stdout)

    def export(self, role: str, dest: Path) -> str:
        """Export the slot of ``role`` to ``dest``; an error message, or "" on success."""
        ex = subprocess.run([str(self.admin), "export", "--device", str(self.device), "--slot",
                             role, "--output", str(dest), "--force"], capture_output=True,
                            text=True)
        return ex.stderr.strip() if ex.returncode else ""
