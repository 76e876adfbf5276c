"""The bench: a quick, interleaved side-by-side of the systems under each logging policy.

``slimio-repro bench`` (:mod:`slimio_repro.run.bench`) runs this on the host (bare testbed)
or inside one VM (vm testbed). Each *run* is one system under one policy: fresh storage (a
fresh file-system image on bare; the namespace formatted again for the system in the VM),
a server with the cell's configuration, a warm-up of ``warmup_requests`` SETs (not
measured), then the measured redis-benchmark, then shutdown. Runs are interleaved: every
round runs each policy's systems back to back, in an order rotated by one each round, so
that a slow spell of a shared machine falls on every system alike and each round gives
one ratio per pair measured minutes apart at most.

No rewrite runs during a bench: the plan's rewrite trigger is above the WAL a run writes
(:func:`slimio_repro.plan.bench_plans`), so what is measured is the WAL path alone,
the paper's WAL-only phase. Each run records Redis's own count of rewrites, so a run where
one happened anyway is visible.

Standard library and redis-py only, like the rest of this sub-package.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import time
from contextlib import contextmanager
from pathlib import Path

from . import benchmark, fsimage, layout, provenance, slimio
from .cellplan import CellPlan, on_file_system
from .provision import MKFS_OPTIONS, MOUNT_OPTIONS
from .server import RedisServer, free_port, render_conf
from .vmstorage import mounted, run_tool

RUNS_FILE = "runs.jsonl"


class BenchError(RuntimeError):
    pass


def order(systems: list[str], round_index: int) -> list[str]:
    """The systems of round ``round_index`` (from 0): rotated by one each round."""
    k = round_index % len(systems)
    return systems[k:] + systems[:k]


def schedule(plans: list[CellPlan], rounds: int) -> list[tuple[int, str, CellPlan]]:
    """Every run of the bench, in the order it runs: (round, policy block, plan). The bound
    (no policy) runs in every policy's block, so that its ratios are taken beside each."""
    systems = list(dict.fromkeys(p.cell.system for p in plans))
    policies = list(dict.fromkeys(p.cell.policy for p in plans if p.persists))
    by = {(p.cell.system, p.cell.policy): p for p in plans}
    out = []
    for r in range(rounds):
        for policy in policies:
            for system in order(systems, r):
                plan = by.get((system, policy)) or next(
                    p for p in plans if p.cell.system == system and not p.persists)
                out.append((r, policy, plan))
    return out


@contextmanager
def storage(plan: CellPlan, scratch: Path):
    """A run's storage: (the data directory's parent, SlimIO's device or None).

    bare: a fresh file-system image, as a cell gets. vm: the guest's namespace, made what
    the system needs: its file system made afresh and mounted (baseline, nopersist), or the
    raw namespace with every signature and any earlier SlimIO layout wiped (SlimIO formats
    it)."""
    if plan.cell.testbed == "bare":
        with fsimage.fresh_image(scratch / "fs.img", scratch / "mnt", plan.bare.filesystem,
                                 plan.sizing.image_size_bytes, plan.bare.direct_io) as fs:
            yield fs.data_parent, (fs.slimio_device if plan.is_slimio else None)
        return
    vm = plan.vm
    ns, mountpoint = vm.namespace, Path(vm.mountpoint)
    if mounted(ns):
        run_tool(["umount", ns])
    if on_file_system(plan.cell.system):
        run_tool([f"mkfs.{vm.filesystem}", *MKFS_OPTIONS, ns])
        mountpoint.mkdir(parents=True, exist_ok=True)
        run_tool(["mount", "-t", vm.filesystem, "-o", MOUNT_OPTIONS, ns, str(mountpoint)])
        try:
            yield mountpoint, None
        finally:
            run_tool(["umount", ns])
        return
    # No signature for SlimIO to refuse: the file system's (wipefs), and an earlier run's
    # SlimIO layout, whose metadata records are the namespace's first LBAs (libblkid does
    # not know them).
    run_tool(["wipefs", "-a", ns])
    run_tool(["dd", "if=/dev/zero", f"of={ns}", "bs=1M", "count=1", "oflag=direct",
              "status=none"])
    yield scratch, Path(vm.passthru_device if plan.slimio.backend == "nvme" else ns)


def run_one(plan: CellPlan, warmup_requests: int, scratch: Path) -> dict:
    """One run (see the module docstring); its files stay in ``scratch``."""
    bin_dir = Path(plan.redis_bin_dir)
    scratch.mkdir(parents=True)
    commands: list = []
    with storage(plan, scratch) as (data_parent, device):
        data_dir = data_parent / "data"
        data_dir.mkdir()
        block = ""
        if plan.is_slimio:
            slimio.prepare(bin_dir / layout.SLIMIO_ADMIN, device, plan.slimio, commands,
                           scratch)
            block = slimio.conf_block(plan.slimio, device)
        port = free_port()
        conf, log = scratch / layout.RAW_REDIS_CONF, scratch / layout.RAW_REDIS_LOG
        render_conf(conf, port=port, data_dir=data_dir, log_file=log,
                    appendfsync=plan.sizing.appendfsync, appendonly=plan.persists,
                    auto_aof_rewrite_percentage=plan.sizing.auto_aof_rewrite_percentage,
                    auto_aof_rewrite_min_size=plan.sizing.auto_aof_rewrite_min_size_bytes,
                    slimio_block=block)
        server = RedisServer(bin_dir, conf, port, log)
        server.start(plan.server.start_timeout_s)
        try:
            if warmup_requests:
                warm = dataclasses.replace(plan.workload, requests=warmup_requests)
                benchmark.run(benchmark.command(bin_dir, port, warm), scratch / "warmup.tsv",
                              scratch / "warmup.err", plan.workload.timeout_s)
            cmd = benchmark.command(bin_dir, port, plan.workload)
            out = scratch / layout.RAW_BENCHMARK
            t = benchmark.run(cmd, out, scratch / layout.RAW_BENCHMARK_ERR,
                              plan.workload.timeout_s)
            got = benchmark.parse(out.read_text())
            persistence = server.client().info("persistence")
            slim = server.client().info("slimio") if plan.is_slimio else {}
            server.shutdown()
        finally:
            server.kill()
    return {"rps": got["rps"], "requests_completed": got["requests_completed"],
            "duration_s": got["duration_s"], "avg_ms": got["avg_ms"],
            "p99_ms": got["p99_ms"], "p999_ms": got["p999_ms"],
            "aof_rewrites": int(persistence.get("aof_rewrites", 0)),
            "slimio_wal_lag_waits": slim.get("slimio_wal_lag_waits"),
            "slimio_wal_full_refusals": slim.get("slimio_wal_full_refusals"),
            "start_unix_s": t["start_unix_s"], "end_unix_s": t["end_unix_s"],
            "argv": cmd}


def run(plans: list[CellPlan], rounds: int, warmup_requests: int, out_dir: Path,
        say=print) -> list[dict]:
    """Every run of :func:`schedule`; one JSON line per run in ``out_dir``/runs.jsonl, and
    the host (or guest) it ran on in ``out_dir``/where.json. A run's own files are kept
    only when it fails (``out_dir``/failed-<n>/)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "where.json").write_text(json.dumps(
        {"host": provenance.host(), "tools": provenance.tools(Path(plans[0].redis_bin_dir)),
         "utc_start": provenance.utc_now()}, indent=2) + "\n")
    runs = []
    todo = schedule(plans, rounds)
    for i, (r, block, plan) in enumerate(todo):
        scratch = out_dir / f"run-{i}"
        t0 = time.monotonic()
        try:
            got = run_one(plan, warmup_requests, scratch)
        except Exception as exc:
            shutil.move(scratch, out_dir / f"failed-{i}")
            raise BenchError(f"run {i} ({plan.cell.system}, {plan.cell.policy}) failed: {exc}; "
                             f"its files are in {out_dir / f'failed-{i}'}") from exc
        shutil.rmtree(scratch, ignore_errors=True)
        row = {"run": i, "round": r, "policy_block": block, "system": plan.cell.system,
               "policy": plan.cell.policy,
               "testbed": plan.cell.testbed, "requests": plan.workload.requests,
               "warmup_requests": warmup_requests, "wall_s": round(time.monotonic() - t0, 3),
               **got}
        runs.append(row)
        with open(out_dir / RUNS_FILE, "a") as fh:
            fh.write(json.dumps(row) + "\n")
        say(f"[{i + 1}/{len(todo)}] round {r + 1} {block:<10} "
            f"{plan.cell.system:<13} {got['rps']:>10,.0f} SET/s"
            + (f"  ({got['aof_rewrites']} rewrites!)" if got["aof_rewrites"] else ""))
    return runs
