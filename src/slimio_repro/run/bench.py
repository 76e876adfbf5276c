"""``slimio-repro bench``: the systems side by side, interleaved, in a few minutes.

The tool for the WAL-path performance work: nopersist (the bound), baseline, slimio (and
slimio-nofdp in a VM) under each policy, on bare or in one VM, with rounds and a warm-up
(:mod:`slimio_repro.guest.bench` runs them). Its output directory holds every run
(``runs.jsonl``, ``runs.csv``), the median and spread of each ratio over the rounds
(``bench.md``, ``ratios.csv``) and the provenance (``provenance.json``: the plans, the
configuration, the host or guest, the git commit, the tools).

Each round gives one ratio per pair of systems under a policy, its two runs a few seconds
or minutes apart; the median over rounds and the min-max show how far the machine's noise
moves it. Ratios, not absolute rates, are the result (DESIGN §5).
"""

from __future__ import annotations

import json
import shutil
import statistics
import tarfile
from pathlib import Path

from .. import paths
from ..guest import CellPlan, NOPERSIST, bench as guest_bench, provenance
from ..testbed import vm as vmmod

# Defaults per testbed: a few seconds per run on bare, about ten under TCG.
DEFAULT_REQUESTS = {"bare": 150_000, "vm": 30_000}
DEFAULT_SYSTEMS = {"bare": ["nopersist", "baseline", "slimio"],
                   "vm": ["nopersist", "baseline", "slimio", "slimio-nofdp"]}
# Ratios the bench reports per policy: (numerator, denominator).
RATIO_PAIRS = [("slimio", "baseline"), ("slimio-nofdp", "baseline"),
               ("baseline", NOPERSIST), ("slimio", NOPERSIST), ("slimio-nofdp", NOPERSIST)]


class BenchError(RuntimeError):
    pass


def _ratio_rows(runs: list[dict]) -> list[dict]:
    """Per policy block and pair of :data:`RATIO_PAIRS`: the ratio of the pair's two runs in
    each round, then the median, min and max over the rounds."""
    rps = {(r["round"], r["policy_block"], r["system"]): r["rps"] for r in runs}
    rounds = sorted({r["round"] for r in runs})
    out = []
    for policy in dict.fromkeys(r["policy_block"] for r in runs):
        for a, b in RATIO_PAIRS:
            values = [rps[(k, policy, a)] / rps[(k, policy, b)] for k in rounds
                      if rps.get((k, policy, a)) and rps.get((k, policy, b))]
            if values:
                out.append({"policy": policy, "ratio": f"{a} / {b}", "rounds": len(values),
                            "median": statistics.median(values), "min": min(values),
                            "max": max(values), "values": values})
    return out


def _rate_rows(runs: list[dict]) -> list[dict]:
    out = {}
    for r in runs:
        out.setdefault((r["policy_block"], r["system"]), []).append(r["rps"])
    return [{"policy": p, "system": s, "runs": len(v), "median_rps": statistics.median(v),
             "min_rps": min(v), "max_rps": max(v)} for (p, s), v in out.items()]


def markdown(runs: list[dict], ratios: list[dict], rates: list[dict], about: str) -> str:
    lines = ["# Bench: the systems side by side, interleaved", "", about, "",
             "## SET/s per run (median, min-max over the rounds)", "",
             "| Policy | System | runs | median SET/s | min-max |", "|---|---|---|---|---|"]
    for r in rates:
        lines.append(f"| {r['policy']} | {r['system']} | {r['runs']} | "
                     f"{r['median_rps']:,.0f} | {r['min_rps']:,.0f}-{r['max_rps']:,.0f} |")
    lines += ["", "## Ratios (each round's two runs; median, min-max over the rounds)", "",
              "| Policy | Ratio | rounds | median | min-max |", "|---|---|---|---|---|"]
    for r in ratios:
        lines.append(f"| {r['policy']} | {r['ratio']} | {r['rounds']} | {r['median']:.3f} | "
                     f"{r['min']:.3f}-{r['max']:.3f} |")
    rewrites = [r for r in runs if r["aof_rewrites"]]
    lines += ["", "nopersist (no persistence) is the bound: the same server with AOF and "
              "snapshots off. It runs once per policy in each round, so every policy's "
              "ratios to it are taken minutes apart at most.",
              f"Runs with a rewrite (none expected): {len(rewrites)}."]
    return "\n".join(lines) + "\n"


def write(out_dir: Path, runs: list[dict], prov: dict) -> str:
    """The bench's tables next to its runs; returns the Markdown."""
    import pandas as pd
    ratios, rates = _ratio_rows(runs), _rate_rows(runs)
    pd.DataFrame(runs).drop(columns=["argv"], errors="ignore").to_csv(out_dir / "runs.csv",
                                                                       index=False)
    pd.DataFrame(ratios, columns=["policy", "ratio", "rounds", "median", "min", "max"]
                 ).to_csv(out_dir / "ratios.csv", index=False)
    about = (f"Testbed {prov['testbed']}, {prov['rounds']} rounds, {prov['requests']:,} SETs "
             f"per run after {prov['warmup_requests']:,} of warm-up; "
             f"{prov['clients']} clients, {prov['value_size_bytes']} B values, "
             f"{prov['key_size_bytes']} B keys over {prov['keyspace']:,} keys; no rewrites; "
             f"commit {prov['git']['commit'][:12]}{' (dirty)' if prov['git']['dirty'] else ''}.")
    md = markdown(runs, ratios, rates, about)
    (out_dir / "bench.md").write_text(md)
    (out_dir / "provenance.json").write_text(json.dumps(prov, indent=2) + "\n")
    return md


def check(out_dir: Path, systems: list[str], rounds: int, requests: int,
          warmup: int) -> None:
    """What the bench refuses before it plans anything, naming the option."""
    if out_dir.exists() and any(out_dir.iterdir()):
        raise BenchError(f"--out {out_dir} exists and is not empty; the bench never "
                         "overwrites a result: name another directory")
    if rounds < 1 or requests < 1 or warmup < 0:
        raise BenchError(f"--rounds {rounds}, --requests {requests}, --warmup {warmup}: "
                         "rounds and requests must be at least 1, warm-up at least 0")
    if not [s for s in systems if s != NOPERSIST]:
        raise BenchError(f"--systems {','.join(systems)}: name at least one system that "
                         "persists (the bound is compared with them)")


def run(the_plans: list[CellPlan], out_dir: Path, rounds: int, warmup: int,
        box_file: Path | None = None, say=print) -> str:
    """Run and summarize a bench of ``the_plans`` (:func:`slimio_repro.plan.bench_plans`);
    returns its Markdown."""
    testbed = the_plans[0].cell.testbed
    systems = list(dict.fromkeys(p.cell.system for p in the_plans))
    policies = list(dict.fromkeys(p.cell.policy for p in the_plans if p.persists))
    w = the_plans[0].workload
    prov = {"testbed": testbed, "systems": systems, "policies": policies, "rounds": rounds,
            "requests": w.requests, "warmup_requests": warmup, "clients": w.clients,
            "keyspace": w.keyspace, "key_size_bytes": w.key_size_bytes,
            "value_size_bytes": w.value_size_bytes, "git": provenance.git(),
            "utc_start": provenance.utc_now(), "plans": [p.to_dict() for p in the_plans]}
    out_dir.mkdir(parents=True, exist_ok=True)
    if testbed == "bare":
        runs = guest_bench.run(the_plans, rounds, warmup, out_dir, say)
    else:
        runs = _in_vm(the_plans, rounds, warmup, out_dir, box_file, say, prov)
    where = json.loads((out_dir / "where.json").read_text())
    prov.update(where=where, utc_end=provenance.utc_now())
    return write(out_dir, runs, prov)


def _in_vm(the_plans: list[CellPlan], rounds: int, warmup: int, out_dir: Path,
           box_file: Path | None, say, prov: dict) -> list[dict]:
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
                  "memory_mb": vm.spec["memory_mb"],
                  "device_profile": plan0.vm.device.as_dict(), "host": provenance.host(),
                  "tools": provenance.vm_tools()}
    try:
        say(f"booting the bench's VM ({vm.spec['accel']})")
        vm.up()
        plans_json = json.dumps([vmmod.guest_plan(p).to_dict() for p in the_plans]).encode()
        proc = vmmod.guest_python(
            vm, f"bench --plans-json {vmmod.GUEST_REPO_DIR}/plans.json --rounds {rounds} "
                f"--warmup {warmup} --out {guest_out}", {"plans.json": plans_json},
            timeout=plan0.workload.timeout_s * len(the_plans) * rounds, clear=[guest_out])
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
    return [json.loads(line) for line in
            (out_dir / guest_bench.RUNS_FILE).read_text().splitlines() if line.strip()]


__all__ = ["BenchError", "DEFAULT_REQUESTS", "DEFAULT_SYSTEMS", "check", "run"]
