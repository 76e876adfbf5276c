"""The crash campaign: many iterations of workload, crash, restart, check.

One iteration (:func:`run_iteration`), on a fresh device (SlimIO) or data directory (stock
Redis):

1. start the server, with one named failpoint armed (``name=crash@N``) or none;
2. run the clients of :mod:`.oracle`, with a BGREWRITEAOF and/or a BGSAVE at random moments
   and Redis's own rewrite trigger set low, until the failpoint kills the server (or its fork
   child), or until a random moment, when the whole process group gets SIGKILL;
3. restart and check every client's recovered state against what it was told (prefix,
   values, acknowledged writes lost and the loss window);
4. a second phase from that state (kill or SHUTDOWN at once, before anything is written;
   or after more writes, a rewrite or a BGSAVE), restart and check again. Not for stock
   Redis when the first restart left its AOF ending inside a transaction (:data:`CUT_SHORT`):
   that phase would test a defect of stock Redis, and the iteration records it instead;
5. SHUTDOWN, then each valid snapshot slot exported with ``slimio-admin export``, checked
   with the stock ``redis-check-rdb`` and loaded by a stock ``redis-server``, whose dataset
   must be a consistent prefix too.

Every iteration is one JSON line in ``campaign.jsonl``; an iteration that found something
keeps its device and logs under ``failures/`` (a passing one leaves nothing). The summary
(:func:`summarize`) is the table of the closing note: iterations, kills by point,
restarts that worked, consistent recoveries, acknowledged writes lost and the worst loss
window per system and policy.
"""

from __future__ import annotations

import hashlib
import json
import random
import shutil
import subprocess
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import redis

from .. import paths
from ..smk import exit_on_sigterm
from ..agent import provenance
from . import oracle
from .target import TargetServer, StartRefused

# Failpoints of SlimIO's protocols (redis-slimio/src/slimio_failpoint.h), by where they run
# and how often a workload passes them.
PARENT_FAILPOINTS = ["meta.before-write", "meta.after-write", "meta.after-flush",
                     "wal.append", "wal.after-write", "wal.after-flush", "wal.new-gen",
                     "promote.before-commit", "promote.after-commit",
                     "promote.after-dealloc-wal", "promote.after-dealloc-slot"]
CHILD_FAILPOINTS = ["snapshot.begin", "snapshot.mid", "snapshot.after-write",
                    "snapshot.after-flush"]
FAILPOINTS = PARENT_FAILPOINTS + CHILD_FAILPOINTS
FREQUENT = {"wal.append", "wal.after-write", "wal.after-flush"}
PHASE2 = ["kill-idle", "shutdown-idle", "write-kill", "write-shutdown", "rewrite-kill",
          "bgsave-kill"]
# Redis's everysec contract: a second of writes, two when an fsync is slow.
EVERYSEC_CONTRACT_S = 2.0
# Stock Redis (7.0.15 and 8.0.2 alike) truncates an AOF torn inside a MULTI at the last whole
# command, inside the transaction, and appends its next writes after it: the next load runs
# the cut-short transaction's commands with the next transaction, so operations the restart
# had dropped come back (tests/test_crash_campaign.py shows it on the build).
CUT_SHORT = ("stock Redis truncated its AOF inside a transaction, which a later load runs "
             "with the next one (valkey-io/valkey#4342): phase 2 skipped")


@dataclass
class CampaignPlan:
    index: int
    system: str
    policy: str
    kill: str                   # "random" or a failpoint name
    hit: int                    # the failpoint fires on its hit-th pass
    clients: int
    pipeline: int
    phase1_s: float
    rewrite_at: float | None
    bgsave_at: float | None
    wal_mib: int
    rewrite_min_mib: int
    phase2: str
    seed: int

    def failpoints(self) -> str:
        return "" if self.kill == "random" else f"{self.kill}=crash@{self.hit}"


def make_plan(index: int, system: str, policy: str, seed: int, wal_mib: int | None = None,
              failpoint_share: float = 0.6) -> CampaignPlan:
    rng = random.Random(seed * 1_000_003 + index)
    kill = "random"
    if system == "slimio" and rng.random() < failpoint_share:
        kill = rng.choice(FAILPOINTS)
    hit = (rng.randint(1, 400) if kill in FREQUENT else
           rng.randint(1, 6) if kill.startswith("meta.") else rng.randint(1, 3))
    phase1 = round(rng.uniform(0.4, 2.5), 3)
    return CampaignPlan(
        index=index, system=system, policy=policy, kill=kill, hit=hit,
        clients=rng.randint(2, 4), pipeline=rng.choice([1, 4, 16, 64]), phase1_s=phase1,
        rewrite_at=round(rng.uniform(0.05, phase1), 3) if rng.random() < 0.6 else None,
        bgsave_at=round(rng.uniform(0.05, phase1), 3) if rng.random() < 0.4 else None,
        wal_mib=wal_mib or rng.choice([4, 8, 16]), rewrite_min_mib=rng.choice([1, 2, 4, 8]),
        phase2=rng.choice(PHASE2), seed=seed)


@dataclass
class Check:
    """One restart and its check."""
    restarted: bool
    refused: str = ""
    start_s: float | None = None
    consistent: bool | None = None
    acked: int = 0
    lost: int = 0
    loss_age_s: float | None = None
    problems: list[str] = field(default_factory=list)


@dataclass
class Outcome:
    plan: CampaignPlan
    fired: bool = False             # the failpoint (or the random kill) took the server down
    crashed_by: str = ""            # "failpoint", "failpoint-child", "kill"
    orphans: list[int] = field(default_factory=list)
    refused_commands: int = 0       # writes answered with an error (MISCONF: a full WAL)
    first: Check | None = None
    second: Check | None = None
    slots: list[dict] = field(default_factory=list)
    seconds: float = 0.0
    error: str = ""
    cut_short: dict = field(default_factory=dict)  # stock Redis: client -> operations

    @property
    def ok(self) -> bool:
        checks = [c for c in (self.first, self.second) if c is not None]
        return (not self.error and not self.orphans
                and len(checks) == (1 if self.cut_short else 2)
                and all(c.restarted and c.consistent for c in checks)
                and all(s["check_rdb"] and s["loaded"] and s["consistent"] for s in self.slots)
                and (self.plan.policy != "always" or all(c.lost == 0 for c in checks)))


class Workload:
    """The clients of one phase, with the snapshot commands issued on a schedule."""

    def __init__(self, server: TargetServer, histories: list[oracle.History], pipeline: int):
        self.stop = threading.Event()
        self.clients = [oracle.Client(server.host, server.port, h, pipeline, self.stop)
                        for h in histories]
        self.server = server

    def start(self) -> None:
        for c in self.clients:
            c.start()

    def finish(self, timeout_s: float = 60) -> None:
        self.stop.set()
        if not self.server.alive():
            # A reply from a server that is gone never comes; where it went without a reset
            # (its VM destroyed), a client would wait for it until its socket timed out.
            for c in self.clients:
                c.sever()
        for c in self.clients:
            c.join(timeout_s)


def _command(server: TargetServer, *args) -> None:
    try:
        server.client().execute_command(*args)
    except (redis.ResponseError, redis.ConnectionError, redis.TimeoutError):
        pass   # "already in progress", or the server is gone: the schedule goes on


def _run_phase(server: TargetServer, histories, pipeline: int, seconds: float,
               events: dict[float, str], until_exit: bool) -> tuple[float, bool]:
    """Drive the workload for ``seconds`` with ``events`` (offset -> command). Returns the
    crash moment and whether the server went down by itself (a failpoint) before the end."""
    w = Workload(server, histories, pipeline)
    t0 = time.time()
    w.start()
    pending = sorted(events.items())
    end = t0 + seconds
    while time.time() < end:
        if until_exit and not server.alive():
            break
        now = time.time() - t0
        while pending and pending[0][0] <= now:
            _command(server, *pending.pop(0)[1].split())
        time.sleep(0.002)
    by_itself = not server.alive()
    if by_itself:
        while server.exited_at is None:
            time.sleep(0.001)
        crash_at = server.exited_at
    else:
        crash_at = server.kill()
    w.finish()
    return crash_at, by_itself


def _check(server: TargetServer, histories, crash_at: float | None) -> Check:
    """Restart and check every client's recovered state (``crash_at``: the crash's moment,
    for the loss window; None after a clean SHUTDOWN); the histories go on from it."""
    try:
        start_s = server.start()
    except StartRefused as exc:
        return Check(restarted=False, refused=str(exc)[-600:])
    verdicts, problems = oracle.check(server.client(), histories, crash_at)
    for v in verdicts:
        problems += [f"client {v.client}: {p}" for p in v.problems]
    ages = [v.loss_age_s for v in verdicts if v.loss_age_s is not None]
    c = Check(restarted=True, start_s=round(start_s, 3), consistent=not problems,
              acked=sum(v.acked for v in verdicts), lost=sum(v.lost for v in verdicts),
              loss_age_s=round(max(ages), 3) if ages else None, problems=problems[:8])
    lists = oracle.recovered_lists(server.client(), len(histories))
    for h in histories:
        h.rebase(lists[h.client])
    return c


def _check_slots(baseline_bin: Path, server, histories, work: Path) -> list[dict]:
    """Export each valid slot, check it with stock redis-check-rdb, load it into a stock
    server and check the dataset is a consistent prefix."""
    out = []
    for slot in server.inspect()["slots"]:
        if not slot["valid"]:
            continue
        role = slot["role"]
        rdb = work / f"export-{role}.rdb"
        r = {"role": role, "bytes": slot["length_bytes"], "check_rdb": False, "loaded": False,
             "consistent": False, "problems": []}
        err = server.export(role, rdb)
        if err:
            r["problems"].append(f"export: {err[-300:]}")
            out.append(r)
            continue
        ck = subprocess.run([str(baseline_bin / "redis-check-rdb"), str(rdb)],
                            capture_output=True, text=True)
        r["check_rdb"] = ck.returncode == 0
        if ck.returncode:
            r["problems"].append(f"redis-check-rdb: {ck.stdout.strip()[-300:]}")
        stock = TargetServer("baseline", baseline_bin, work / f"stock-{role}", "everysec")
        stock.options.update({"appendonly": "no", "dbfilename": rdb.name})
        shutil.copy(rdb, stock.data / rdb.name)
        try:
            stock.start()
            r["loaded"] = True
            verdicts, problems = oracle.check(stock.client(), histories, None,
                                              require_acked=False)
            problems += [p for v in verdicts for p in v.problems]
            r["consistent"] = not problems
            r["problems"] += problems[:4]
        except StartRefused as exc:
            r["problems"].append(f"stock redis-server refused it: {exc}"[:300])
        finally:
            stock.kill()
        out.append(r)
    return out


def run_iteration(plan: CampaignPlan, bins: dict[str, Path], admin: Path | None, work: Path,
                  options: dict | None = None, vm_server=None) -> Outcome:
    """One iteration (module docstring); ``options`` override redis.conf lines (a test
    makes a server unsafe on purpose with it, to see the campaign catch it); ``vm_server``
    (a :class:`.vmtarget.VmServer`) runs it in the campaign's VM, where a kill is a power
    cut."""
    t0 = time.time()
    work.mkdir(parents=True, exist_ok=True)
    o = Outcome(plan)
    if vm_server is None:
        server = TargetServer(plan.system, bins[plan.system], work, plan.policy,
                        wal_mib=plan.wal_mib, rewrite_min_mib=plan.rewrite_min_mib, admin=admin)
    else:
        # The campaign's VM: a fresh namespace, this iteration's policy and sizes.
        server = vm_server
        server.wal_mib = plan.wal_mib
        server.options.update({
            "appendfsync": "always" if plan.policy == "always" else "everysec",
            "auto-aof-rewrite-min-size": f"{plan.rewrite_min_mib}mb"})
        server.format()
    server.options.update(options or {})
    histories = [oracle.History(c) for c in range(plan.clients)]
    try:
        try:
            server.start(plan.failpoints())
        except StartRefused:
            if vm_server is not None or server.proc.returncode != -9:
                raise
            # The failpoint fired while the server formatted the device or began its first
            # generation: a crash during start-up, before any client.
            o.fired, o.crashed_by = True, "failpoint"
            o.first = _check(server, histories, None)
            if o.first.restarted:
                server.kill()
                o.second = _check(server, histories, server.kill())
                if o.second.restarted:
                    server.shutdown()
                    o.slots = _check_slots(bins["baseline"], server, histories, work)
            return o
        events = {}
        if plan.rewrite_at is not None:
            events[plan.rewrite_at] = "BGREWRITEAOF"
        if plan.bgsave_at is not None:
            events[plan.bgsave_at + 1e-6] = "BGSAVE"
        # A failpoint gets time to fire; a random kill comes at the planned moment.
        seconds = plan.phase1_s if plan.kill == "random" else plan.phase1_s + 3.0
        crash_at, by_itself = _run_phase(server, histories, plan.pipeline, seconds, events,
                                         until_exit=plan.kill != "random")
        if by_itself:
            time.sleep(0.2)     # the fork child, orphaned, must die with its parent
            o.orphans = server.group_survivors()
            server.kill()
        child_died = vm_server is None and "failpoint crash" in (server.proc.stderr.read()
                                                                 or "")
        o.fired = plan.kill == "random" or by_itself or child_died
        o.crashed_by = ("failpoint" if by_itself else
                        "failpoint-child" if child_died else "kill")
        o.refused_commands = sum(h.refused for h in histories)
        o.first = _check(server, histories, crash_at)
        if not o.first.restarted:
            return o
        if plan.system == "baseline":
            o.cut_short = oracle.open_transaction(server.aof_tail())
            if o.cut_short:
                return o
        # Phase 2: from the recovered state.
        mode = plan.phase2
        if mode.startswith("write") or mode in ("rewrite-kill", "bgsave-kill"):
            ev = {0.05: "BGREWRITEAOF"} if mode == "rewrite-kill" else \
                {0.05: "BGSAVE"} if mode == "bgsave-kill" else {}
            rng = random.Random(plan.seed * 7 + plan.index)
            dur = rng.uniform(0.1, 0.6)
            if mode.endswith("shutdown"):
                w = Workload(server, histories, plan.pipeline)
                w.start()
                time.sleep(dur)
                w.finish()
                server.shutdown()
                crash_at = None
            else:
                crash_at, _ = _run_phase(server, histories, plan.pipeline, dur, ev, False)
        elif mode == "kill-idle":
            crash_at = server.kill()
        else:
            server.shutdown()
            crash_at = None
        o.second = _check(server, histories, crash_at)
        if crash_at is None and o.second.lost:
            o.second.consistent = False
            o.second.problems.append(f"a clean SHUTDOWN lost {o.second.lost} acknowledged "
                                     "operation(s)")
        if o.second.restarted:
            server.shutdown()
            if plan.system == "slimio":
                o.slots = _check_slots(bins["baseline"], server, histories, work)
    except Exception as exc:  # noqa: BLE001 - recorded per iteration, the campaign goes on
        o.error = f"{type(exc).__name__}: {exc}"[:600]
    finally:
        server.cleanup()
        o.seconds = round(time.time() - t0, 2)
    return o


CAMPAIGN_KEYS = ("iterations", "systems", "policies", "seed", "failpoint_share", "testbed")


def _snapshot_binaries(bins: dict[str, Path], admin: Path, dest: Path) -> tuple[dict, Path]:
    """Copy the binaries the campaign runs into ``dest`` (a rebuild during a long campaign
    must not change what it tests) and record their SHA-256."""
    digests = {}
    out = {}
    for system, src in bins.items():
        d = dest / system
        d.mkdir(parents=True, exist_ok=True)
        for name in ("redis-server", "redis-check-rdb"):
            shutil.copy2(src / name, d / name)
            digests[f"{system}/{name}"] = hashlib.sha256((d / name).read_bytes()).hexdigest()
        out[system] = d
    shutil.copy2(admin, dest / "slimio-admin")
    digests["slimio-admin"] = hashlib.sha256((dest / "slimio-admin").read_bytes()).hexdigest()
    return out, dest / "slimio-admin", digests


def run(out: Path, params: dict, bins: dict[str, Path], admin: Path, work_root: Path,
        provenance: dict | None = None, progress=print, vm_server=None) -> dict:
    """Run the campaign of ``params`` (CAMPAIGN_KEYS) into ``out``: campaign.json (the
    parameters and provenance), campaign.jsonl (one line per iteration), failures/ (what a
    failed iteration left), summary.json and summary.md. A campaign that stopped goes on
    where it stopped; ``out`` holding another campaign's log is refused."""
    out.mkdir(parents=True, exist_ok=True)
    meta_file, log = out / "campaign.json", out / "campaign.jsonl"
    if log.exists() and log.stat().st_size:
        if not meta_file.exists():
            raise ValueError(f"{log} exists without {meta_file.name}: not a campaign this "
                             "command wrote; use another output directory")
        before = json.loads(meta_file.read_text())["params"]
        if {k: before.get(k) for k in CAMPAIGN_KEYS if k != "iterations"} != \
                {k: params[k] for k in CAMPAIGN_KEYS if k != "iterations"}:
            raise ValueError(f"{out} holds a campaign with other parameters ({before}); use "
                             "another output directory, or remove it to start afresh")
    work_root.mkdir(parents=True, exist_ok=True)
    params.setdefault("testbed", "bare")
    if vm_server is None:
        bins, admin, digests = _snapshot_binaries(bins, admin, work_root / "bin")
    else:
        digests = {"guest": f"the box's builds ({vm_server.bin_dir})"}
    meta = {"params": params, "binaries_sha256": digests, "provenance": provenance or {}}
    meta_file.write_text(json.dumps(meta, indent=1) + "\n")
    done = sum(1 for _ in log.open()) if log.exists() else 0
    combos = [(s, p) for s in params["systems"] for p in params["policies"]]
    iterations = params["iterations"]
    t0 = time.time()
    with log.open("a") as f:
        for i in range(done, iterations):
            system, policy = combos[i % len(combos)]
            plan = make_plan(i, system, policy, params["seed"],
                             failpoint_share=params["failpoint_share"])
            work = work_root / f"iter-{i}"
            if work.exists():
                shutil.rmtree(work)
            o = run_iteration(plan, bins, admin, work, vm_server=vm_server)
            rec = asdict(o) | {"ok": o.ok}
            f.write(json.dumps(rec) + "\n")
            f.flush()
            if o.ok:
                shutil.rmtree(work, ignore_errors=True)
            else:
                dest = out / "failures" / f"iter-{i}"
                shutil.rmtree(dest, ignore_errors=True)
                shutil.move(str(work), dest)
            progress(f"[{i + 1}/{iterations}] {system} {policy} kill={plan.kill}"
                     f"{'@' + str(plan.hit) if plan.kill != 'random' else ''} "
                     f"phase2={plan.phase2}: {'ok' if o.ok else 'FAILED'} ({o.seconds} s)"
                     + ("" if o.ok else f" {_why(o)}")
                     + (f" ({CUT_SHORT}: operations {o.cut_short})" if o.cut_short else ""))
    records = [json.loads(line) for line in log.open()][:iterations]
    summary = summarize(records)
    summary["seconds_this_run"] = round(time.time() - t0, 1)
    (out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    (out / "summary.md").write_text(render_md(summary))
    return summary


def _why(o: Outcome) -> str:
    if o.error:
        return o.error[:300]
    for name, c in (("first", o.first), ("second", o.second)):
        if c and not c.restarted:
            return f"{name} restart refused: {c.refused[-300:]}"
        if c and not c.consistent:
            return f"{name} recovery: {'; '.join(c.problems)[:300]}"
        if c and o.plan.policy == "always" and c.lost:
            return f"{name} recovery lost {c.lost} acknowledged operation(s)"
    if o.orphans:
        return f"fork child {o.orphans} outlived its crashed parent"
    bad = [s for s in o.slots if not (s["check_rdb"] and s["loaded"] and s["consistent"])]
    return f"slot {bad[0]['role']}: {bad[0]['problems']}" if bad else "?"


def summarize(records: list[dict]) -> dict:
    """Per system and policy: the numbers of the campaign's table."""
    groups: dict[str, dict] = {}
    for r in records:
        p = r["plan"]
        g = groups.setdefault(f"{p['system']}/{p['policy']}", {
            "system": p["system"], "policy": p["policy"], "iterations": 0, "ok": 0,
            "kills": {}, "failpoints_fired": 0, "restarts": 0, "restarts_ok": 0,
            "recoveries": 0, "recoveries_consistent": 0, "acked": 0, "acked_lost": 0,
            "max_loss_window_s": None, "slots_checked": 0, "slots_passed": 0,
            "orphans": 0, "refused_commands": 0, "iterations_with_refusals": 0, "errors": 0,
            "failed_iterations": [], "cut_short": 0})
        g["iterations"] += 1
        g["cut_short"] += bool(r.get("cut_short"))
        g["ok"] += bool(r["ok"])
        if not r["ok"]:
            g["failed_iterations"].append(p["index"])
        g["kills"][p["kill"]] = g["kills"].get(p["kill"], 0) + 1
        g["failpoints_fired"] += p["kill"] != "random" and r["fired"]
        g["orphans"] += bool(r["orphans"])
        g["errors"] += bool(r["error"])
        g["refused_commands"] += r["refused_commands"]
        g["iterations_with_refusals"] += r["refused_commands"] > 0
        for c in (r["first"], r["second"]):
            if c is None:
                continue
            g["restarts"] += 1
            g["restarts_ok"] += c["restarted"]
            if c["restarted"]:
                g["recoveries"] += 1
                g["recoveries_consistent"] += bool(c["consistent"])
                g["acked"] += c["acked"]
                g["acked_lost"] += c["lost"]
                if c["loss_age_s"] is not None:
                    g["max_loss_window_s"] = max(g["max_loss_window_s"] or 0, c["loss_age_s"])
        for s in r["slots"]:
            g["slots_checked"] += 1
            g["slots_passed"] += s["check_rdb"] and s["loaded"] and s["consistent"]
    for g in groups.values():
        g["within_contract"] = (g["acked_lost"] == 0 if g["policy"] == "always" else
                                (g["max_loss_window_s"] or 0) <= EVERYSEC_CONTRACT_S)
    return {"groups": list(groups.values()), "iterations": len(records),
            "everysec_contract_s": EVERYSEC_CONTRACT_S}


def render_md(summary: dict) -> str:
    head = ("| system | policy | iterations | ok | restarts ok | consistent recoveries | "
            "acked ops | acked lost | max loss window (s) | slots passed | orphans | "
            "iterations with refused writes |\n|" + "---|" * 12 + "\n")
    rows = []
    for g in summary["groups"]:
        w = g["max_loss_window_s"]
        rows.append(
            f"| {g['system']} | {g['policy']} | {g['iterations']} | {g['ok']} | "
            f"{g['restarts_ok']}/{g['restarts']} | "
            f"{g['recoveries_consistent']}/{g['recoveries']} | {g['acked']} | "
            f"{g['acked_lost']} | {'-' if w is None else f'{w:.3f}'} | "
            f"{g['slots_passed']}/{g['slots_checked']} | {g['orphans']} | "
            f"{g['iterations_with_refusals']} |")
    kills = []
    for g in summary["groups"]:
        k = ", ".join(f"{n} {c}" for n, c in sorted(g["kills"].items()))
        kills.append(f"* {g['system']}/{g['policy']}: {k} (failpoints fired: "
                     f"{g['failpoints_fired']})")
    cut = [f"{g['system']}/{g['policy']} {g['cut_short']}" for g in summary["groups"]
           if g.get("cut_short")]
    cut_md = (f"\nIterations where {CUT_SHORT}: {', '.join(cut)}.\n" if cut else "")
    return (f"# Crash campaign: {summary['iterations']} iterations\n\n" + head
            + "\n".join(rows) + "\n\nKills by point:\n\n" + "\n".join(kills) + "\n"
            + cut_md)


def passed(summary: dict) -> bool:
    return all(g["ok"] == g["iterations"] for g in summary["groups"])


def run_configured(config: dict, out: Path, work_dir: str | None = None,
                   iterations: int | None = None, systems: list[str] | None = None,
                   policies: list[str] | None = None, seed: int | None = None,
                   progress=print, vm_plan=None, box_file: Path | None = None) -> dict:
    """The campaign of the config's ``crash`` section (each argument overrides its key) on
    the config's Redis builds, with the run's provenance. With ``vm_plan`` (a vm slimio
    cell's plan) and ``box_file``: SlimIO on the nvme backend in one VM, power cuts."""
    c = config["crash"]
    params = {"iterations": iterations or c["iterations"],
              "systems": systems or c["systems"], "policies": policies or c["policies"],
              "seed": c["seed"] if seed is None else seed,
              "failpoint_share": c["failpoint_share"] if vm_plan is None else 0.0,
              "testbed": "bare" if vm_plan is None else "vm"}
    if vm_plan is not None and params["systems"] != ["slimio"]:
        raise ValueError("the power-cut campaign (testbed vm) runs SlimIO only: "
                         "--systems slimio")
    for key, allowed in (("systems", ("slimio", "baseline")),
                         ("policies", ("always", "periodical"))):
        bad = [v for v in params[key] if v not in allowed]
        if bad:
            raise ValueError(f"crash campaign {key} {','.join(bad)}: use "
                             f"{' and/or '.join(allowed)}")
    version = config["redis"]["version"]
    bins = {}
    for system in ("slimio", "baseline"):
        d = (paths.REPO_ROOT / config["build_dir"]
             / paths.REDIS_BUILD_PATTERN.format(system=system, version=version) / "bin")
        if not (d / "redis-server").is_file():
            raise ValueError(f"{d / 'redis-server'} is not built: run `snakemake --cores all "
                             f"{d.relative_to(paths.REPO_ROOT) / 'redis-server'}` first")
        bins[system] = d
    prov = {"host": provenance.host(), "git": provenance.git(), "redis_version": version,
            "started_utc": provenance.utc_now()}
    work = Path(work_dir or c["work_dir"])
    if vm_plan is None:
        return run(out, params, bins, bins["slimio"] / paths.SLIMIO_ADMIN, work, prov,
                   progress)
    from . import vmtarget
    from ..testbed import vm as vmmod
    guest_bin = vmmod.guest_plan(vm_plan).redis_bin_dir
    prov["vm"] = {"cell_plan": vm_plan.id, "device_profile": vm_plan.vm.device.as_dict(),
                  "box_inputs_sha256": json.loads(box_file.with_suffix(".json").read_text())[
                      "inputs_sha256"],
                  "tools": provenance.vm_tools(), "accel": vmmod.accelerator(vm_plan.vm.accel)}
    work.mkdir(parents=True, exist_ok=True)
    # One VM directory per campaign (named by its output directory): two campaigns, or a
    # campaign and the test suite's, never take each other's VM.
    tag = hashlib.sha256(str(out.resolve()).encode()).hexdigest()[:12]
    server = vmtarget.VmServer(vm_plan, box_file, vmmod.work_dir(vm_plan.vm.work_dir)
                               / f"crash-campaign-{tag}", work / "vagrant.log", guest_bin,
                               "always", 8, 4)
    # SIGTERM (a stopped job, a scheduler) must still destroy the VM: make it an exit.
    with exit_on_sigterm():
        try:
            return run(out, params, bins, None, work, prov, progress, vm_server=server)
        finally:
            server.destroy()
