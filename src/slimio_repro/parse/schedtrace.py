"""When a thread was off its CPU, and why, from the scheduler's own events (Figure 2a).

Input: ``perf script -F time,event,trace`` of ``perf record -a -e sched:sched_switch -e
sched:sched_wakeup`` (every CPU: a thread's switch-in and its wakeup happen in other tasks'
contexts). For one thread, each interval from its switch-out to its next switch-in is
split by the state it left its CPU in (the tracepoint's ``prev_state``):

* ``R`` (or ``R+``): preempted, still runnable: the whole interval is **waiting for a
  CPU** (the run queue);
* ``D``: uninterruptible sleep, in this kernel the wait for I/O (a page's writeback, a
  block request, the journal): **blocked in I/O** until its wakeup, then waiting for a CPU;
* any other (``S``, interruptible sleep: a lock, a futex, a pipe; ``I``, ``T``, ...):
  **asleep** until its wakeup, then waiting for a CPU.

A wakeup that the trace lacks (it happened before the recording) counts the interval to
its switch-in as its sleep. Times are perf's clock (seconds).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_LINE = re.compile(r"^\s*(?P<time>\d+\.\d+):\s+sched:(?P<event>sched_switch|sched_wakeup):"
                   r"\s+(?P<trace>.*)$")
_SWITCH = re.compile(r"prev_pid=(?P<prev>\d+) .*prev_state=(?P<state>\S+) ==> .*"
                     r"next_pid=(?P<next>\d+)")
_WAKEUP = re.compile(r"\bpid=(?P<pid>\d+)\b")


class SchedTraceError(ValueError):
    pass


@dataclass(frozen=True)
class OffCpu:
    """One thread's time off its CPU (seconds), by why."""
    switches: int               # switch-outs followed by a switch-in in the trace
    io_s: float                 # blocked in uninterruptible sleep (D): I/O
    asleep_s: float             # in any other sleep (S: locks, futexes, pipes)
    runqueue_s: float           # runnable, waiting for a CPU

    @property
    def total_s(self) -> float:
        return self.io_s + self.asleep_s + self.runqueue_s


def events(text: str) -> list[tuple[float, str, re.Match]]:
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        m = _LINE.match(line)
        if m is None:
            raise SchedTraceError(
                f"line {n} is not a sched_switch or sched_wakeup event of `perf script -F "
                f"time,event,trace`: {line[:120]!r}")
        body = (_SWITCH if m["event"] == "sched_switch" else _WAKEUP).search(m["trace"])
        if body is None:
            raise SchedTraceError(f"line {n}: {m['event']} without its fields: {line[:120]!r}")
        out.append((float(m["time"]), m["event"], body))
    out.sort(key=lambda e: e[0])
    return out


def off_cpu(text: str, tid: int) -> OffCpu:
    """Thread ``tid``'s time off its CPU in the trace ``text`` (see the module docstring)."""
    out_at = state = woke = None
    io = asleep = runq = 0.0
    switches = 0
    for t, event, body in events(text):
        if event == "sched_switch":
            if int(body["prev"]) == tid:
                out_at, state, woke = t, body["state"], None
            if int(body["next"]) == tid and out_at is not None:
                if state.startswith("R"):
                    runq += t - out_at
                else:
                    wake = woke if woke is not None else t
                    if state.startswith("D"):
                        io += wake - out_at
                    else:
                        asleep += wake - out_at
                    runq += t - wake
                switches += 1
                out_at = state = woke = None
        elif int(body["pid"]) == tid and out_at is not None and woke is None:
            woke = t
    return OffCpu(switches, io, asleep, runq)
