"""Start, watch and stop one redis-server for a cell."""

from __future__ import annotations

import os
import socket
import string
import subprocess
import time
from pathlib import Path

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from . import layout


class ServerError(RuntimeError):
    pass


def connect(port: int, timeout: float | None = 30, host: str = "127.0.0.1",
            connection_class: type[redis.Connection] | None = None) -> redis.Redis:
    """A client of the server on ``port`` (of ``host``: loopback by default) that never
    retries; its connections of ``connection_class`` where given (redis-py's TCP
    connection, or a subclass).

    redis-py (since 6) retries a command that hit a connection error three times with an
    exponential backoff by default. Here that only ever waits for nothing: SHUTDOWN's
    connection is closed by the exiting server (measured: the call returned 4 s after the
    server's last log line, in a TCG guest), and every PING while a server starts is refused
    until it listens. A failure on loopback is reported at once.
    """
    options = dict(host=host, port=port, socket_timeout=timeout, decode_responses=True,
                   retry=Retry(NoBackoff(), 0))
    if connection_class is None:
        return redis.Redis(**options)
    return redis.Redis(connection_pool=redis.ConnectionPool(connection_class=connection_class,
                                                            **options))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def render_conf(dest: Path, slimio_block: str = "", appendonly: bool = True,
                **values) -> str:
    """Write redis.conf from the template; ``slimio_block`` is empty except for system slimio,
    ``appendonly`` is False for the no-persistence bound only."""
    text = string.Template(layout.REDIS_CONF_TEMPLATE.read_text()).substitute(
        slimio_block=slimio_block, appendonly="yes" if appendonly else "no", **values)
    dest.write_text(text)
    return text


def processes(parent: int | None = None, group: int | None = None) -> list[int]:
    """Live (not zombie) processes whose parent is ``parent`` or whose process group is
    ``group``, from /proc."""
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        state, ppid, pgid = fields[0], int(fields[1]), int(fields[2])
        if state != "Z" and (ppid == parent or pgid == group):
            out.append(int(d.name))
    return out


class RedisServer:
    """A redis-server process with a given configuration file; ``env`` adds to its
    environment, ``new_session`` starts it in its own session and process group (so that
    killing the group takes its fork child too)."""

    def __init__(self, bin_dir: Path, conf: Path, port: int, log_file: Path,
                 env: dict | None = None, new_session: bool = False):
        self.bin_dir, self.conf, self.port, self.log_file = bin_dir, conf, port, log_file
        self.env, self.new_session = env, new_session
        self.proc: subprocess.Popen | None = None
        self.started_at: float | None = None
        self.ready_at: float | None = None

    @property
    def command(self) -> list[str]:
        return [str(self.bin_dir / "redis-server"), str(self.conf)]

    def client(self, timeout: float | None = 30) -> redis.Redis:
        return connect(self.port, timeout)

    def info_raw(self, section: str) -> str:
        """INFO ``section`` exactly as the server sends it (redis-py would parse it)."""
        cli = self.client()
        cli.set_response_callback("INFO", lambda response, **options: response)
        return cli.execute_command("INFO", section)

    def start(self, timeout_s: float) -> float:
        """Start and wait until it answers PING and has finished loading; return seconds."""
        self.started_at = time.time()
        self.proc = subprocess.Popen(self.command, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True,
                                     env=dict(os.environ, **self.env) if self.env else None,
                                     start_new_session=self.new_session)
        deadline = time.monotonic() + timeout_s
        cli = self.client(timeout=5)
        while True:
            if self.proc.poll() is not None:
                raise ServerError(f"redis-server exited with {self.proc.returncode} while "
                                  f"starting: {self.proc.stderr.read().strip()} "
                                  f"(see {self.log_file})")
            try:
                if cli.ping() and cli.info("persistence")["loading"] == 0:
                    break
            except (redis.ConnectionError, redis.BusyLoadingError, redis.TimeoutError):
                pass
            if time.monotonic() > deadline:
                self.kill()
                raise ServerError(f"redis-server on port {self.port} was not ready within "
                                  f"{timeout_s} s (server.start_timeout_s); see {self.log_file}")
            time.sleep(0.01)
        self.ready_at = time.time()
        return self.ready_at - self.started_at

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def wait_idle(self, timeout_s: float) -> None:
        """Wait until no snapshot (rewrite or BGSAVE) is running or scheduled."""
        cli = self.client()
        deadline = time.monotonic() + timeout_s
        while True:
            p = cli.info("persistence")
            if not (p["aof_rewrite_in_progress"] or p["aof_rewrite_scheduled"]
                    or p["rdb_bgsave_in_progress"]):
                return
            if time.monotonic() > deadline:
                raise ServerError(f"a snapshot was still running after {timeout_s} s "
                                  "(server.snapshot_timeout_s)")
            time.sleep(0.05)

    def bgsave(self, timeout_s: float) -> None:
        """On-Demand-Snapshot: BGSAVE, wait for it, and check it succeeded."""
        cli = self.client()
        cli.bgsave()
        self.wait_idle(timeout_s)
        status = cli.info("persistence")["rdb_last_bgsave_status"]
        if status != "ok":
            raise ServerError(f"BGSAVE finished with status {status!r}; see {self.log_file}")

    def shutdown(self, timeout_s: float = 600) -> None:
        """SHUTDOWN (fsyncs the AOF) and wait for the process to exit."""
        if self.proc is None or self.proc.poll() is not None:
            return
        try:
            self.client().shutdown()
        except redis.ConnectionError:
            pass  # the server closes the connection as it exits
        try:
            self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
            raise ServerError(f"redis-server did not exit within {timeout_s} s of SHUTDOWN")
        if self.proc.returncode != 0:
            raise ServerError(f"redis-server exited with {self.proc.returncode} on SHUTDOWN; "
                              f"see {self.log_file}")

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
