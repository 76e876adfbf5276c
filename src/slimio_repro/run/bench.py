"""``slimio-repro bench``: the systems side by side, interleaved, in a few minutes.

The tool for the WAL-path performance work: nopersist (the bound), baseline, slimio (and
slimio-nofdp in a VM) under each policy, on bare or in one VM, with rounds and a warm-up
(:mod:`slimio_repro.agent.bench_runs` runs them). Its output directory holds every run
(``runs.jsonl``, ``runs.csv``), the median and spread of each ratio over the rounds
(``bench.md``, ``ratios.csv``) and the provenance (``provenance.json``: the plans, the
configuration, the host or guest, the git commit, the tools).

Each round gives one ratio per pair of systems under a policy, its two runs a few seconds
or minutes apart; the median over rounds and the min-max show how far the machine's noise
moves it. Ratios, not absolute rates, are the result.
"""

from __future__ import annotations

import json
import shutil
import statistics
import tarfile
import time
from pathlib import Path

from .. import paths
from ..agent import bench_runs as guest_bench, provenance
from ..plan import CellPlan, NOPERSIST
from ..testbed import hostcpu, vm as vmmod

# Defaults per testbed: a few seconds per run on bare, about ten under TCG.
DEFAULT_REQUESTS = {"bare": 150_000, "vm": 30_000}
# Snapshots per run, each beside its bound; the run keeps their medians. One snapshot's ratio
# to its bound moved over 0.91-1.72 in one VM bench's rounds.
DEFAULT_SNAPSHOTS = 3
DEFAULT_SYSTEMS = {"bare": ["nopersist", "baseline", "slimio"],
                   "vm": ["nopersist", "baseline", "slimio", "slimio-nofdp"]}
# Ratios the bench reports per policy: (numerator, denominator).
RATIO_PAIRS = [("slimio", "baseline"), ("slimio-nofdp", "baseline"),
               ("baseline", NOPERSIST), ("slimio", NOPERSIST), ("slimio-nofdp", NOPERSIST)]
PERSISTING = ("baseline", "slimio", "slimio-nofdp")
# The SETs per host CPU second of a VM run's vCPU threads, and of its whole QEMU (vCPUs and
# device emulation), and the section of the bench's ratios of each.
CPU_SECTION = {"host_vcpu_sets_per_cpu_s": "SETs per vCPU second",
               "host_qemu_sets_per_cpu_s": "SETs per QEMU CPU second"}
# Every ratio, per policy block and round: (section, label, numerator (system, column),
# denominator (system, column)). SET/s: higher is better; times: lower is better. The
# snapshot's no-I/O bound is the slimio run's second BGSAVE, serialised into nothing
# (snapshot_bound_s; the dataset is the same in every run of a round). The bound's
# (nopersist's) BGSAVE goes to tmpfs and its recovery loads that RDB from memory; a
# system's own no-I/O recovery bound is its log loaded from memory (recovery_bound_s).
RATIOS = (
    [("SET/s", f"{a} / {b}", (a, "rps"), (b, "rps")) for a, b in RATIO_PAIRS]
    # Always-Log: SlimIO's rate over one durable write of its mean batch per batch, alone
    # and added to the bound's own time per SET (clients wait for their replies, so the
    # server's work and the device's do not overlap for one batch's clients).
    + [("SET/s", f"{a} / one durable write per batch", (a, "rps"),
        (a, "durable_write_bound_rps")) for a in ("slimio", "slimio-nofdp")]
    + [("SET/s", f"{a} / nopersist plus one durable write per batch", (a, "rps"),
        (a, "always_bound_rps")) for a in ("slimio", "slimio-nofdp")]
    + [("snapshot time", f"{a} / {b}", (a, "snapshot_s"), (b, "snapshot_s"))
       for a, b in (("slimio", "baseline"), ("slimio-nofdp", "baseline"))]
    + [("snapshot time", f"{a} / no-I/O bound (BGSAVE into nothing)", (a, "snapshot_s"),
        ("slimio", "snapshot_bound_s")) for a in PERSISTING]
    + [("snapshot time", f"{a} / BGSAVE into tmpfs", (a, "snapshot_s"),
        (NOPERSIST, "snapshot_s")) for a in PERSISTING]
    + [("snapshot time", f"{a} / its bound", (a, "snapshot_s"), (a, "snapshot_floor_s"))
       for a in PERSISTING]
    # The child's CPU seconds (all its threads) over the BGSAVE into nothing's: the work
    # SlimIO's snapshot path adds, apart from waiting (for the device, or for a CPU).
    + [("snapshot time", f"{a} CPU / no-I/O bound's CPU", (a, "snapshot_cpu_s"),
        ("slimio", "snapshot_bound_cpu_s")) for a in ("slimio", "slimio-nofdp")]
    # ... and the serialising thread's alone: what SlimIO's path adds to the work that the
    # bound's single thread does (its other threads run beside it, on another CPU).
    + [("snapshot time", f"{a} serialising thread's CPU / no-I/O bound's CPU",
        (a, "snapshot_thread_cpu_s"), ("slimio", "snapshot_bound_cpu_s"))
       for a in ("slimio", "slimio-nofdp")]
    + [("recovery time", f"{a} / {b}", (a, "recovery_s"), (b, "recovery_s"))
       for a, b in (("slimio", "baseline"), ("slimio-nofdp", "baseline"))]
    + [("recovery time", f"{a} / its bound", (a, "recovery_s"), (a, "recovery_floor_s"))
       for a in PERSISTING]
    + [("recovery time", f"{a} / its log loaded from memory", (a, "recovery_s"),
        (a, "recovery_bound_s")) for a in PERSISTING]
    + [("recovery time", f"{a} / the RDB loaded from memory", (a, "recovery_s"),
        (NOPERSIST, "recovery_s")) for a in PERSISTING]
    # In a VM, the SETs each host CPU second bought (the inverse of the CPU per SET): of the
    # vCPU threads alone, and of the whole QEMU (its device emulation too). Higher is better,
    # as for SET/s; where both runs' guests got the same host cores, the rate ratio is these.
    + [(CPU_SECTION[k], f"{a} / {b}", (a, k), (b, k)) for k in CPU_SECTION
       for a, b in RATIO_PAIRS])
# Per-run columns summarised per policy and system: (column, header, format).
RATE_COLUMNS = [("rps", "SET/s", "{:,.0f}"), ("snapshot_s", "snapshot s", "{:.3f}"),
                ("snapshot_mb_s", "snapshot MB/s", "{:.1f}"),
                ("snapshot_bound_s", "into nothing s", "{:.3f}"),
                ("device_write_mb_s", "fio write MB/s", "{:,.0f}"),
                ("snapshot_floor_s", "snapshot bound s", "{:.3f}"),
                ("snapshot_wait_s", "snapshot's wait for the ring s", "{:.3f}"),
                ("snapshot_cpu_s", "snapshot CPU s", "{:.3f}"),
                ("snapshot_thread_cpu_s", "its serialising thread's CPU s", "{:.3f}"),
                ("snapshot_bound_cpu_s", "into nothing CPU s", "{:.3f}"),
                ("recovery_s", "recovery s", "{:.3f}"),
                ("recovery_bound_s", "log from memory s", "{:.3f}"),
                ("device_read_mb_s", "fio read MB/s", "{:,.0f}"),
                ("recovery_floor_s", "recovery bound s", "{:.3f}"),
                ("sets_per_batch", "SETs per batch", "{:.1f}"),
                ("durable_write_ms", "durable write ms", "{:.3f}"),
                ("durable_write_bound_rps", "durable-write bound SET/s", "{:,.0f}"),
                ("always_bound_rps", "nopersist + durable write SET/s", "{:,.0f}"),
                ("wal_batch_queue_ms", "batch queued ms", "{:.3f}"),
                ("wal_batch_device_ms", "batch device ms", "{:.3f}"),
                ("reply_release_lag_ms", "reply release ms", "{:.3f}"),
                ("wal_overlapped_share", "batches beside another", "{:.2f}"),
                ("wal_pad_share", "WAL pad share", "{:.3f}"),
                ("host_vcpu_us_per_set", "vCPU us per SET", "{:.1f}"),
                ("host_qemu_us_per_set", "QEMU us per SET", "{:.1f}"),
                ("host_vcpu_cores", "host cores: vCPUs", "{:.2f}"),
                ("host_emulation_cores", "host cores: device emulation", "{:.2f}"),
                ("host_other_cores", "host cores: other", "{:.2f}")]


# --profile's accounting: where each run's CPU went per SET, from perf's report of the whole
# machine (agent.bench_runs.machine_profile), by group of threads and objects. An entry goes
# to the first group whose test holds for (command, object, symbol, kernel). The server's
# threads: its main thread and SlimIO's completion threads (they keep its name), Redis's
# bio and I/O threads, io_uring's workers for it.
SERVER_COMMS = ("redis-server", "bio_", "io_thd_", "iou-", "jemalloc_bg_thd")
SLIMIO_SYMBOLS = ("slimio", "crc32c")
IDLE_GROUP = "idle (swapper)"
ACCOUNT_GROUPS = [
    ("server: SlimIO's code (WAL framing, CRC32C, rings)",
     lambda c, d, s, k: c.startswith(SERVER_COMMS) and d == "redis-server"
     and s.startswith(SLIMIO_SYMBOLS)),
    ("server: Redis's code", lambda c, d, s, k: c.startswith(SERVER_COMMS)
     and d == "redis-server"),
    ("server: libc (copies, allocation)", lambda c, d, s, k: c.startswith(SERVER_COMMS)
     and d.startswith("libc")),
    ("server: kernel (system calls, network, io_uring, NVMe driver)",
     lambda c, d, s, k: c.startswith(SERVER_COMMS) and k),
    ("server: other objects", lambda c, d, s, k: c.startswith(SERVER_COMMS)),
    ("client (redis-benchmark, user and kernel)",
     lambda c, d, s, k: c.startswith("redis-benchmark")),
    (IDLE_GROUP, lambda c, d, s, k: c.startswith("swapper")),
    ("the bench's own tools (perf, Python)",
     lambda c, d, s, k: c.startswith(("perf", "python"))),
    ("kernel threads, interrupts and other processes", lambda c, d, s, k: True),
]
BUSY = "all CPUs, busy (perf)"
HOST_VCPU = "host: QEMU's vCPU threads (its own count)"
# The pairs whose per-round differences the accounting gives, per policy.
ACCOUNT_PAIRS = [("slimio", NOPERSIST), ("slimio", "baseline")]
TOP_SYMBOLS = 15


class BenchError(RuntimeError):
    pass


def group_of(comm: str, dso: str, sym: str, kernel: bool) -> str:
    """The accounting group (:data:`ACCOUNT_GROUPS`) of one entry of perf's report."""
    return next(name for name, test in ACCOUNT_GROUPS if test(comm, dso, sym, kernel))


def profile_per_set(rows: list[dict], sets: int) -> tuple[dict, dict]:
    """One run's machine profile per SET, in us: by group (with :data:`BUSY`, every group
    but idle), and by (group, symbol (object))."""
    groups: dict = {name: 0.0 for name, _ in ACCOUNT_GROUPS}
    symbols: dict = {}
    for r in rows:
        g = group_of(r["comm"], r["dso"], r["sym"], r["kernel"])
        us = r["ns"] / 1e3 / sets
        groups[g] += us
        key = (g, f"{r['sym']} ({r['dso']})")
        symbols[key] = symbols.get(key, 0.0) + us
    groups[BUSY] = sum(v for k, v in groups.items() if k != IDLE_GROUP)
    return groups, symbols


def accounting(runs: list[dict], profiles: Path) -> list[dict]:
    """Each profiled run's CPU per SET by group (:func:`profile_per_set`), with the host's
    own count of its vCPU threads beside it where the run was in a VM: one row per run and
    group (run, round, policy_block, system, group, us_per_set), and the symbols' in
    ``symbols`` of the first row of each run."""
    out = []
    for r in runs:
        f = profiles / guest_bench.MACHINE_PROFILE.format(
            stem=f"run-{r['run']}-{r['system']}-{r['policy_block']}")
        if not f.is_file() or not r.get("requests_completed"):
            continue
        groups, symbols = profile_per_set(json.loads(f.read_text())["rows"],
                                          r["requests_completed"])
        if r.get("host_vcpu_us_per_set") is not None:
            groups[HOST_VCPU] = r["host_vcpu_us_per_set"]
        for i, (g, us) in enumerate(groups.items()):
            out.append({"run": r["run"], "round": r["round"], "policy_block": r["policy_block"],
                        "system": r["system"], "group": g, "us_per_set": us,
                        **({"symbols": symbols} if i == 0 else {})})
    return out


def accounting_lines(rows: list[dict]) -> list[str]:
    """The accounting's tables: per policy, each group's us per SET per system and each
    pair's difference (:data:`ACCOUNT_PAIRS`), then the symbols that make the most of each
    pair's difference and the rest of it in one line. Means over the rounds, not medians:
    means add up, so each table's lines sum to its busy total."""
    if not rows:
        return []
    lines = ["", "## Where the CPU per SET goes (--profile: perf's clock on every CPU, us "
             "per SET, mean over the rounds)"]
    value = {(r["round"], r["policy_block"], r["system"], r["group"]): r["us_per_set"]
             for r in rows}
    syms = {(r["round"], r["policy_block"], r["system"]): r["symbols"] for r in rows
            if "symbols" in r}
    for policy in dict.fromkeys(r["policy_block"] for r in rows):
        here = [r for r in rows if r["policy_block"] == policy]
        systems = list(dict.fromkeys(r["system"] for r in here))
        pairs = [(a, b) for a, b in ACCOUNT_PAIRS if a in systems and b in systems]
        rounds = sorted({r["round"] for r in here})
        lines += ["", f"### {policy}", "",
                  "| where | " + " | ".join(systems) + " | "
                  + " | ".join(f"{a} - {b}" for a, b in pairs) + " |",
                  "|---|" + "---|" * (len(systems) + len(pairs))]
        for g in dict.fromkeys(r["group"] for r in here):
            cells = []
            for s in systems:
                v = [value[k, policy, s, g] for k in rounds if (k, policy, s, g) in value]
                cells.append(f"{statistics.mean(v):.1f}" if v else "n/a")
            for a, b in pairs:
                d = [value[k, policy, a, g] - value[k, policy, b, g] for k in rounds
                     if (k, policy, a, g) in value and (k, policy, b, g) in value]
                cells.append(f"{statistics.mean(d):+.1f}" if d else "n/a")
            lines.append(f"| {g} | " + " | ".join(cells) + " |")
        for a, b in pairs:
            diffs: dict = {}
            busy = []
            for k in rounds:
                sa, sb = syms.get((k, policy, a)), syms.get((k, policy, b))
                if sa is None or sb is None:
                    continue
                busy.append(value[k, policy, a, BUSY] - value[k, policy, b, BUSY])
                for key in set(sa) | set(sb):
                    if key[0] != IDLE_GROUP:
                        diffs.setdefault(key, []).append(sa.get(key, 0.0) - sb.get(key, 0.0))
            if not busy:
                continue
            n = len(busy)
            # A symbol absent from a round's profiles took nothing there; one whose
            # difference rounds to nothing is not listed.
            mean = {key: sum(d) / n for key, d in diffs.items() if abs(sum(d) / n) >= 0.05}
            top = sorted(mean, key=lambda key: -abs(mean[key]))[:TOP_SYMBOLS]
            total = statistics.mean(busy)
            lines += ["", f"{policy}, {a} - {b}: the {len(top)} symbols whose us per SET differ "
                      f"most (mean of {n} rounds' differences)", "",
                      "| where | symbol (object) | us per SET |", "|---|---|---|"]
            lines += [f"| {key[0]} | {key[1]} | {mean[key]:+.1f} |" for key in top]
            lines += [f"| | the other {len(mean) - len(top)} symbols | "
                      f"{total - sum(mean[key] for key in top):+.1f} |",
                      f"| | **all CPUs, busy** | **{total:+.1f}** |"]
    return lines


def _ratio_rows(runs: list[dict]) -> list[dict]:
    """Per policy block and ratio of :data:`RATIOS`: the ratio of its two runs in each
    round, then the median, min and max over the rounds."""
    value = {(r["round"], r["policy_block"], r["system"]): r for r in runs}
    rounds = sorted({r["round"] for r in runs})
    out = []
    for policy in dict.fromkeys(r["policy_block"] for r in runs):
        for section, label, (a, ca), (b, cb) in RATIOS:
            values = []
            for k in rounds:
                x = value.get((k, policy, a), {}).get(ca)
                y = value.get((k, policy, b), {}).get(cb)
                if x is not None and y:
                    values.append(x / y)
            if values:
                out.append({"policy": policy, "metric": section, "ratio": label,
                            "rounds": len(values), "median": statistics.median(values),
                            "min": min(values), "max": max(values), "values": values})
    return out


def _with_rates(runs: list[dict]) -> list[dict]:
    """Each run's snapshot MB/s and its bounds (the lower of the two rates, so
    the longer of the two times):

    * snapshot_floor_s: the longer of the no-I/O bound (the round's BGSAVE into nothing,
      measured in its slimio run) and the snapshot's bytes at the device's write rate;
    * recovery_floor_s: the longer of the run's own log loaded from memory and the bytes of
      that log at the device's read rate;
    * always_bound_rps (a SlimIO run under Always-Log): the round's nopersist time per SET
      plus the run's durable write per batch spread over the batch's SETs.

    The device rates are fio's on the round's slimio device (slimio, else slimio-nofdp).
    """
    by_round: dict = {}
    for r in runs:
        if r["system"] in ("slimio", "slimio-nofdp"):
            key = (r["round"], r["policy_block"])
            if r["system"] == "slimio" or key not in by_round:
                by_round[key] = r
    nopersist = {(r["round"], r["policy_block"]): r for r in runs
                 if r["system"] == NOPERSIST}
    for r in runs:
        np_rps = nopersist.get((r["round"], r["policy_block"]), {}).get("rps")
        if r.get("durable_write_bound_rps") and np_rps:
            r["always_bound_rps"] = 1 / (1 / np_rps + 1 / r["durable_write_bound_rps"])
        if r.get("snapshot_s") and r.get("snapshot_bytes"):
            r["snapshot_mb_s"] = r["snapshot_bytes"] / 1e6 / r["snapshot_s"]
        ref = by_round.get((r["round"], r["policy_block"]), {})
        if r.get("snapshot_bytes") and ref.get("snapshot_bound_s") and \
                ref.get("device_write_mb_s"):
            r["snapshot_floor_s"] = max(ref["snapshot_bound_s"], r["snapshot_bytes"] / 1e6
                                        / ref["device_write_mb_s"])
        if r.get("recovery_bound_s") is not None and ref.get("device_read_mb_s"):
            r["recovery_floor_s"] = max(r["recovery_bound_s"],
                                        r["recovery_bound_input_bytes"] / 1e6
                                        / ref["device_read_mb_s"])
    return runs


def _rate_rows(runs: list[dict]) -> list[dict]:
    out = {}
    for r in runs:
        out.setdefault((r["policy_block"], r["system"]), []).append(r)
    rows = []
    for (p, s), rs in out.items():
        row = {"policy": p, "system": s, "runs": len(rs)}
        for col, _, _ in RATE_COLUMNS:
            v = [r[col] for r in rs if r.get(col) is not None]
            if v:
                row[f"median_{col}"] = statistics.median(v)
                row[f"min_{col}"], row[f"max_{col}"] = min(v), max(v)
        rows.append(row)
    return rows


def markdown(runs: list[dict], ratios: list[dict], rates: list[dict], about: str,
             account: list[str] = ()) -> str:
    cols = [c for c in RATE_COLUMNS if any(f"median_{c[0]}" in r for r in rates)]
    lines = ["# Bench: the systems side by side, interleaved", "", about, "",
             "## Per run (median, min-max over the rounds)", "",
             "| Policy | System | runs | " + " | ".join(h for _, h, _ in cols) + " |",
             "|---|---|---|" + "---|" * len(cols)]

    def cell(r, col, fmt):
        if f"median_{col}" not in r:
            return "n/a"
        return (fmt.format(r[f"median_{col}"]) + " (" + fmt.format(r[f"min_{col}"]) + "-"
                + fmt.format(r[f"max_{col}"]) + ")")
    for r in rates:
        lines.append(f"| {r['policy']} | {r['system']} | {r['runs']} | "
                     + " | ".join(cell(r, c, f) for c, _, f in cols) + " |")
    for section in dict.fromkeys(r["metric"] for r in ratios):
        better = "higher" if section in ("SET/s", *CPU_SECTION.values()) else "lower"
        lines += ["", f"## Ratios of {section} ({better} is better; each round's two runs; "
                  "median, min-max over the rounds)", "",
                  "| Policy | Ratio | rounds | median | min-max |", "|---|---|---|---|---|"]
        for r in ratios:
            if r["metric"] == section:
                lines.append(f"| {r['policy']} | {r['ratio']} | {r['rounds']} | "
                             f"{r['median']:.3f} | {r['min']:.3f}-{r['max']:.3f} |")
    lines += spread_lines(ratios)
    lines += account
    rewrites = [r for r in runs if r["aof_rewrites"]]
    lines += ["", "nopersist (no persistence) is the bound: the same server with AOF and "
              "snapshots off, once per policy in each round. What each row measures, and how "
              "its bounds are taken: docs/explanation/bench.md in the repository."]
    lines += ["", f"Runs with a rewrite (none expected): {len(rewrites)}."]
    return "\n".join(lines) + "\n"


def spread(row: dict) -> float:
    """A ratio's relative spread over the rounds: (max - min) / median."""
    return (row["max"] - row["min"]) / row["median"]


def spread_lines(ratios: list[dict]) -> list[str]:
    """Each rate ratio beside the same runs' ratios of SETs per host CPU second, with their
    relative spreads: how much of the rate ratio's noise the CPU accounting removes."""
    cpu = {(r["policy"], r["metric"], r["ratio"]): r for r in ratios
           if r["metric"] in CPU_SECTION.values()}
    rows = []
    for r in ratios:
        if r["metric"] != "SET/s":
            continue
        others = [cpu.get((r["policy"], m, r["ratio"])) for m in CPU_SECTION.values()]
        if None in others:
            continue
        rows.append(f"| {r['policy']} | {r['ratio']} | "
                    + " | ".join(f"{o['median']:.3f} ({o['min']:.3f}-{o['max']:.3f}), "
                                 f"{spread(o):.0%}" for o in (r, *others)) + " |")
    if not rows:
        return []
    return ["", "## Rate ratios against CPU per SET (the same runs; median (min-max), "
            "relative spread (max - min) / median)", "",
            "| Policy | Ratio | SET/s | SETs per vCPU second | SETs per QEMU CPU second |",
            "|---|---|---|---|---|", *rows]


def write(out_dir: Path, runs: list[dict], prov: dict) -> str:
    """The bench's tables next to its runs; returns the Markdown."""
    import pandas as pd
    runs = _with_rates(runs)
    ratios, rates = _ratio_rows(runs), _rate_rows(runs)
    account = accounting(runs, out_dir / "profiles")
    if account:
        pd.DataFrame(account).drop(columns=["symbols"]).to_csv(out_dir / "accounting.csv",
                                                               index=False)
    pd.DataFrame(runs).drop(columns=["argv", "snapshot_each"], errors="ignore").to_csv(
        out_dir / "runs.csv", index=False)
    pd.DataFrame(ratios, columns=["policy", "metric", "ratio", "rounds", "median", "min",
                                  "max"]).to_csv(out_dir / "ratios.csv", index=False)
    about = (f"Testbed {prov['testbed']}, {prov['rounds']} rounds, {prov['requests']:,} SETs "
             f"per run after {prov['warmup_requests']:,} of warm-up; "
             f"{prov['clients']} clients, {prov['value_size_bytes']} B values, "
             f"{prov['key_size_bytes']} B keys over {prov['keyspace']:,} keys; no rewrites; "
             f"commit {prov['git']['commit'][:12]}{' (dirty)' if prov['git']['dirty'] else ''}.")
    md = markdown(runs, ratios, rates, about, accounting_lines(account))
    (out_dir / "bench.md").write_text(md)
    (out_dir / "provenance.json").write_text(json.dumps(prov, indent=2) + "\n")
    return md


def check(out_dir: Path, systems: list[str], rounds: int, requests: int,
          warmup: int, fio_bin: Path | None = None, perf_needed: bool = False,
          snapshots: int = DEFAULT_SNAPSHOTS) -> None:
    """What the bench refuses before it plans anything, naming the option. ``fio_bin``: the
    bare bench's fio (for the device bounds), which must be built; ``perf_needed``: the
    bare bench's --profile, which needs perf here (the guest box has its own)."""
    if perf_needed and shutil.which("perf") is None:
        raise BenchError("--profile needs perf on this host, and there is none: run `make "
                         "setup-host` (it installs linux-perf)")
    if out_dir.exists() and any(out_dir.iterdir()):
        raise BenchError(f"--out {out_dir} exists and is not empty; the bench never "
                         "overwrites a result: name another directory")
    if rounds < 1 or requests < 1 or warmup < 0:
        raise BenchError(f"--rounds {rounds}, --requests {requests}, --warmup {warmup}: "
                         "rounds and requests must be at least 1, warm-up at least 0")
    if snapshots < 1:
        raise BenchError(f"--snapshots {snapshots}: take at least 1 snapshot per run (or "
                         "pass --wal-only for none)")
    if not [s for s in systems if s != NOPERSIST]:
        raise BenchError(f"--systems {','.join(systems)}: name at least one system that "
                         "persists (the bound is compared with them)")
    if fio_bin is not None and not fio_bin.is_file():
        raise BenchError(f"{fio_bin} is not built, and the bench measures the device's rates "
                         "with it: run `snakemake --cores all build_fio_pinned` (or pass "
                         "--wal-only)")


def run(the_plans: list[CellPlan], out_dir: Path, rounds: int, warmup: int,
        box_file: Path | None = None, say=print, persistence_phases: bool = True,
        fio_bin: Path | None = None, profile: bool = False,
        snapshots: int = DEFAULT_SNAPSHOTS) -> str:
    """Run and summarize a bench of ``the_plans`` (:func:`slimio_repro.plan.bench_plans`);
    returns its Markdown."""
    testbed = the_plans[0].cell.testbed
    systems = list(dict.fromkeys(p.cell.system for p in the_plans))
    policies = list(dict.fromkeys(p.cell.policy for p in the_plans if p.persists))
    w = the_plans[0].workload
    prov = {"testbed": testbed, "systems": systems, "policies": policies, "rounds": rounds,
            "requests": w.requests, "warmup_requests": warmup, "clients": w.clients,
            "keyspace": w.keyspace, "key_size_bytes": w.key_size_bytes,
            "value_size_bytes": w.value_size_bytes, "persistence_phases": persistence_phases,
            "snapshots_per_run": snapshots if persistence_phases else 0, "profile": profile,
            "git": provenance.git(),
            "utc_start": provenance.utc_now(), "plans": [p.to_dict() for p in the_plans]}
    out_dir.mkdir(parents=True, exist_ok=True)
    if testbed == "bare":
        runs = guest_bench.run(the_plans, rounds, warmup, out_dir, say, persistence_phases,
                               str(fio_bin) if fio_bin else None, profile, snapshots)
    else:
        runs = _in_vm(the_plans, rounds, warmup, out_dir, box_file, say, prov,
                      persistence_phases, profile, snapshots)
    where = json.loads((out_dir / "where.json").read_text())
    prov.update(where=where, utc_end=provenance.utc_now())
    return write(out_dir, runs, prov)


def _in_vm(the_plans: list[CellPlan], rounds: int, warmup: int, out_dir: Path,
           box_file: Path | None, say, prov: dict, persistence_phases: bool,
           profile: bool = False, snapshots: int = DEFAULT_SNAPSHOTS) -> list[dict]:
    """The runs inside one VM of the plans' vm testbed; its records copied into ``out_dir``."""
    if box_file is None or not box_file.is_file():
        raise BenchError(f"{box_file} is not built: run `snakemake --cores all "
                         f"{paths.BOX_PATTERN}` first")
    plan0 = the_plans[0]
    vm_dir = vmmod.work_dir(plan0.vm.work_dir) / f"bench-{out_dir.resolve().name}"
    if vm_dir.exists():
        vmmod.destroy_stale(vm_dir)
    vm_dir.mkdir(parents=True)
    vm_dir.chmod(0o755)
    log = out_dir / "vagrant.log"
    guest_out = f"{vmmod.GUEST_CELLS_DIR}/bench"
    vm = vmmod.make_vm(plan0, vm_dir, box_file.resolve(), log)
    prov["vm"] = {"accel": vm.spec["accel"], "cpus": vm.spec["cpus"],
                  "memory_mb": vm.spec["memory_mb"], "qemu_args": vm.spec["qemu_args"],
                  "device_profile": plan0.vm.device.as_dict(), "host": provenance.host(),
                  "tools": provenance.vm_tools()}
    try:
        say(f"booting the bench's VM ({vm.spec['accel']})")
        vm.up()
        plans_json = json.dumps([vmmod.guest_plan(p).to_dict() for p in the_plans]).encode()
        # Where the host's CPU goes during each run (QEMU's vCPUs, its device emulation,
        # the rest), timed on the host's clock: the guest's clock is read against it.
        offsets = [_guest_clock_offset(vm)]
        sampler = hostcpu.HostCpuSampler(hostcpu.qemu_pid(vm.domain),
                                  out_dir / HOST_CPU_FILE).start()
        try:
            proc = vmmod.guest_python(
                vm, f"bench --plans-json {vmmod.GUEST_REPO_DIR}/plans.json --rounds {rounds} "
                    f"--warmup {warmup} --snapshots {snapshots} --out {guest_out}"
                    + ("" if persistence_phases else " --wal-only")
                    + (" --profile" if profile else ""), {"plans.json": plans_json},
                timeout=plan0.workload.timeout_s * len(the_plans) * rounds, clear=[guest_out])
        finally:
            sampler.stop()
        offsets.append(_guest_clock_offset(vm))
        prov["vm"]["guest_clock_offset_s"] = offsets
        text = proc.stdout.decode(errors="replace")
        (out_dir / "guest-bench.log").write_text(text)
        for line in text.splitlines():
            if line.startswith("["):
                say(line)
        with open(vm_dir / "bench.tar", "wb") as fh:
            vm.ssh(f"sudo tar -C {guest_out} -cf - .", stdout=fh, check=False)
        with tarfile.open(vm_dir / "bench.tar") as tar:
            tar.extractall(out_dir, filter="data")
        if proc.returncode != 0:
            tail = "\n".join(text.splitlines()[-25:])
            raise BenchError(f"the bench failed inside the guest ({proc.returncode}):\n{tail}")
    finally:
        try:
            vm.destroy()
        finally:
            shutil.rmtree(vm_dir, ignore_errors=True)
    runs = [json.loads(line) for line in
            (out_dir / guest_bench.RUNS_FILE).read_text().splitlines() if line.strip()]
    with_host_cpu(runs, hostcpu.load(out_dir / HOST_CPU_FILE),
                  statistics.mean(o for o, _ in offsets))
    (out_dir / guest_bench.RUNS_FILE).write_text("".join(json.dumps(r) + "\n" for r in runs))
    return runs


HOST_CPU_FILE = "host-cpu.csv"


def _guest_clock_offset(vm) -> tuple[float, float]:
    """(the guest's clock less the host's, its uncertainty): the guest's time read over SSH
    against the host's before and after, in seconds."""
    before = time.time()
    proc = vm.ssh("date +%s.%N")
    after = time.time()
    return float(proc.stdout.decode().strip()) - (before + after) / 2, (after - before) / 2


def with_host_cpu(runs: list[dict], samples: dict, guest_offset_s: float) -> None:
    """Adds to each run the host cores QEMU's vCPUs, its device emulation and the rest of
    the host used during its measured SETs (:func:`hostcpu.cores`; the run's guest times
    moved onto the host's clock by ``guest_offset_s``), and the host CPU each SET cost, of
    the vCPUs and of the whole QEMU (in us, and as SETs per CPU second)."""
    for r in runs:
        used = hostcpu.cores(samples, r["start_unix_s"] - guest_offset_s,
                             r["end_unix_s"] - guest_offset_s)
        for k, v in (used or {}).items():
            r[f"host_{k}_cores"] = round(v, 3)
        if used and r.get("requests_completed"):
            seconds = r["end_unix_s"] - r["start_unix_s"]
            for k, cores in (("vcpu", used["vcpu"]),
                             ("qemu", used["vcpu"] + used["emulation"])):
                cpu_s = cores * seconds
                if cpu_s <= 0:
                    continue
                r[f"host_{k}_us_per_set"] = round(cpu_s / r["requests_completed"] * 1e6, 2)
                r[f"host_{k}_sets_per_cpu_s"] = round(r["requests_completed"] / cpu_s, 1)


__all__ = ["BenchError", "DEFAULT_REQUESTS", "DEFAULT_SYSTEMS", "check", "run"]
