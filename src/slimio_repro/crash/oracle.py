"""The crash campaign's workload and its oracle.

Each client c runs its own deterministic stream of operations; operation k is one MULTI/EXEC
transaction of ``RPUSH log:c k`` and ``SET val:c:(k % KEYS) value(c, k)``, so it reaches the
AOF (or SlimIO's WAL) as one unit that recovery keeps or drops whole. The client records,
per operation, whether the server executed it (its EXEC reply), refused it (an error such as
MISCONF: it never happened) or gave no answer before the crash (it may or may not have
happened), and when the acknowledgement arrived.

After a restart, client c's recovered list ``log:c`` says exactly which of its operations
the server kept, in order. The check (:func:`check_client`) asks what a user relies on:

* prefix: the list is a prefix of what the client had executed, followed by at most some of
  the unanswered ones in the order sent (no gap, no reordering, no duplicate);
* values: every ``val:c:r`` holds the value of the last kept operation that wrote it, or is
  absent when none did (no value that was never written, none older than the prefix says);
* durability: how many acknowledged operations are missing, and the acknowledgement age of
  the oldest of them at the moment of the crash (the loss window).
"""

from __future__ import annotations

import re
import socket
import threading
import time
from dataclasses import dataclass, field

import redis

from ..agent import server as guest_server

KEYS = 16                       # val:c:0 .. val:c:15 per client
VALUE_MIN, VALUE_MAX = 40, 1400  # value sizes vary so WAL records straddle blocks


def value(client: int, op: int) -> str:
    """The value operation ``op`` of ``client`` writes: its identity, padded to a size that
    depends on both (deterministic, so the check can recompute it)."""
    head = f"{client}:{op}:"
    size = VALUE_MIN + (op * 2654435761 + client * 40503) % (VALUE_MAX - VALUE_MIN)
    return head + chr(97 + op % 26) * max(0, size - len(head))


def log_key(client: int) -> str:
    return f"log:{client}"


def val_key(client: int, slot: int) -> str:
    return f"val:{client}:{slot}"


def queue_operation(pipe, client: int, op: int) -> None:
    """Queue operation ``op`` of ``client`` on a redis-py pipeline (four replies: MULTI's,
    two QUEUED, EXEC's list)."""
    pipe.execute_command("MULTI")
    pipe.rpush(log_key(client), op)
    pipe.set(val_key(client, op % KEYS), value(client, op))
    pipe.execute_command("EXEC")


# How stock Redis writes the workload's commands to its AOF (RESP, names as sent).
_MULTI = re.compile(rb"\*1\r\n\$5\r\nMULTI\r\n", re.I)
_EXEC = re.compile(rb"\*1\r\n\$4\r\nEXEC\r\n", re.I)
_RPUSH = re.compile(rb"\*3\r\n\$5\r\nRPUSH\r\n\$\d+\r\nlog:(\d+)\r\n\$\d+\r\n(\d+)\r\n",
                    re.I)


def open_transaction(aof_tail: bytes) -> dict[int, list[int]]:
    """Per client, the operations of a MULTI that ``aof_tail`` (an AOF's last bytes) ends
    inside, without its EXEC; empty when it ends between transactions, or inside one
    before any of its commands."""
    multis = list(_MULTI.finditer(aof_tail))
    if not multis:
        return {}
    rest = aof_tail[multis[-1].end():]
    if _EXEC.search(rest):
        return {}
    ops: dict[int, list[int]] = {}
    for m in _RPUSH.finditer(rest):
        ops.setdefault(int(m[1]), []).append(int(m[2]))
    return ops


@dataclass
class History:
    """What one client knows about its operations, across the restarts of an iteration.

    ``base`` is the list recovered at the last restart (the state the next phase starts
    from); ``executed`` the operations acknowledged since, in execution order, with the time
    each acknowledgement arrived; ``unknown`` the ones sent without an answer (the pipeline
    in flight at the crash), in the order sent."""
    client: int
    base: list[int] = field(default_factory=list)
    executed: list[int] = field(default_factory=list)
    ack_times: list[float] = field(default_factory=list)
    unknown: list[int] = field(default_factory=list)
    refused: int = 0
    next_op: int = 0
    errors: list[str] = field(default_factory=list)

    def rebase(self, recovered: list[int]) -> None:
        """The next phase starts from what was recovered; operation numbers never repeat."""
        self.base = list(recovered)
        self.executed, self.ack_times, self.unknown = [], [], []


def _severable(sockets: list[socket.socket]) -> type[redis.Connection]:
    """redis-py's TCP connection, each socket it opens added to ``sockets``."""
    class Connection(redis.Connection):
        def _connect(self):
            sock = super()._connect()
            sockets.append(sock)
            return sock
    return Connection


class Client(threading.Thread):
    """One client: pipelines of ``pipeline`` operations until stopped or the server dies."""

    def __init__(self, host: str, port: int, history: History, pipeline: int,
                 stop: threading.Event):
        super().__init__(daemon=True)
        self.host, self.port, self.h = host, port, history
        self.pipeline, self.stop_event = pipeline, stop
        self.dead_at: float | None = None
        self.sockets: list[socket.socket] = []

    def sever(self) -> None:
        """Shut the client's connection down, from any thread: a reply it waits for ends at
        once (redis-py's ConnectionError, the operations sent stay unknown). For a server
        that is gone: where its peer vanished without a reset (its VM destroyed), the reply
        would otherwise be waited for until the socket's timeout (30 s)."""
        for sock in list(self.sockets):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass            # closed already

    def run(self) -> None:
        h = self.h
        try:
            cli = guest_server.connect(self.port, timeout=30, host=self.host,
                                       connection_class=_severable(self.sockets))
            while not self.stop_event.is_set():
                ops = list(range(h.next_op, h.next_op + self.pipeline))
                h.next_op += self.pipeline
                pipe = cli.pipeline(transaction=False)
                for k in ops:
                    queue_operation(pipe, h.client, k)
                h.unknown = ops
                try:
                    replies = pipe.execute(raise_on_error=False)
                except (redis.ConnectionError, redis.TimeoutError, OSError):
                    self.dead_at = time.time()
                    return
                now = time.time()
                refused = False
                for i, k in enumerate(ops):
                    if isinstance(replies[4 * i + 3], list):
                        h.executed.append(k)
                        h.ack_times.append(now)
                    else:
                        h.refused += 1
                        refused = True
                        if len(h.errors) < 3:
                            h.errors.append(str(replies[4 * i + 3])[:200])
                h.unknown = []
                if refused:
                    time.sleep(0.02)
        except (redis.ConnectionError, redis.TimeoutError, OSError):
            self.dead_at = time.time()


@dataclass
class OracleVerdict:
    client: int
    recovered: int          # operations in the recovered list
    acked: int              # acknowledged operations the list should hold (base included)
    lost: int               # acknowledged operations missing
    loss_age_s: float | None  # acknowledgement age of the oldest lost one at the crash
    problems: list[str]

    @property
    def consistent(self) -> bool:
        return not self.problems


def read_state(cli: redis.Redis, clients: int) -> tuple[dict[int, list[int]], dict, list[str]]:
    """Each client's list, each value key, and any key the workload never writes."""
    lists, values = {}, {}
    pipe = cli.pipeline(transaction=False)
    for c in range(clients):
        pipe.lrange(log_key(c), 0, -1)
        pipe.mget([val_key(c, r) for r in range(KEYS)])
    replies = pipe.execute()
    for c in range(clients):
        lists[c] = [int(x) for x in replies[2 * c]]
        values[c] = replies[2 * c + 1]
    expected = {log_key(c) for c in range(clients)} | {
        val_key(c, r) for c in range(clients) for r in range(KEYS)}
    foreign = [k for k in cli.scan_iter(count=1000) if k not in expected]
    return lists, values, foreign[:10]


def check_client(h: History, recovered: list[int], values: list, crash_at: float | None,
                 require_acked: bool = True) -> OracleVerdict:
    """Judge one client's recovered state against its history (see the module docstring).
    ``require_acked`` off: a snapshot's content, which may be any consistent prefix."""
    problems = []
    known = h.base + h.executed
    n_base = len(h.base)
    if recovered[:len(known)] != known[:len(recovered)]:
        i = next(i for i, (a, b) in enumerate(zip(recovered, known)) if a != b)
        problems.append(f"not a prefix: position {i} holds operation {recovered[i]}, the "
                        f"client's stream has {known[i]} there")
    elif len(recovered) > len(known):
        extra = recovered[len(known):]
        it = iter(h.unknown)
        if not all(any(x == u for u in it) for x in extra):
            problems.append(f"operations {extra[:5]} after the acknowledged ones were never "
                            f"sent in that order (unanswered: {h.unknown[:5]}...)")
    if len(recovered) < n_base and require_acked:
        problems.append(f"lost {n_base - len(recovered)} operation(s) an earlier restart had "
                        "already recovered")
    # Values: the last kept operation writing each key.
    last = {}
    for k in recovered:
        last[k % KEYS] = k
    for r in range(KEYS):
        want = value(h.client, last[r]) if r in last else None
        got = values[r]
        if got != want:
            problems.append(f"{val_key(h.client, r)} holds {str(got)[:24]!r}, the prefix of "
                            f"{len(recovered)} operations says {str(want)[:24]!r}")
            break
    kept = set(recovered)
    lost = sum(1 for k in known if k not in kept)
    age = None
    if lost and require_acked and len(recovered) >= n_base and not problems:
        first = len(recovered) - n_base
        if crash_at is not None and first < len(h.ack_times):
            age = max(0.0, crash_at - h.ack_times[first])
    return OracleVerdict(h.client, len(recovered), len(known), lost if require_acked else 0,
                   age, problems)


def check(cli: redis.Redis, histories: list[History], crash_at: float | None,
          require_acked: bool = True) -> tuple[list[OracleVerdict], list[str]]:
    lists, values, foreign = read_state(cli, len(histories))
    verdicts = [check_client(h, lists[h.client], values[h.client], crash_at, require_acked)
                for h in histories]
    problems = [f"key {k!r} was never written by the workload" for k in foreign]
    return verdicts, problems


def recovered_lists(cli: redis.Redis, clients: int) -> dict[int, list[int]]:
    return read_state(cli, clients)[0]
