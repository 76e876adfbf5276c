"""A destroyed VM started again until its SSH answers: `vagrant up` of the domain against
libvirt's start with SSH awaited at the last boot's address (RunningVm.start_again), the
two alternating on one VM, as the crash campaign's power cuts restart it.

Run (as root, the box built: `snakemake --cores all build/box/slimio-guest.box`):
    .venv/bin/python benchmarks/vm_restart.py [--pairs 2]

Prints each restart's seconds to SSH and the medians.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from slimio_repro import paths, plan as planmod
from slimio_repro.crash import vmtarget
from slimio_repro.testbed import vm as vmmod


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=2)
    args = ap.parse_args()
    cfg = planmod.load([paths.CONFIG_DIR / "config.yaml"])
    box_file = paths.REPO_ROOT / cfg["build_dir"] / paths.BOX_PATTERN
    if not box_file.is_file():
        raise SystemExit(f"{box_file} is not built: run `snakemake --cores all "
                         f"{box_file.relative_to(paths.REPO_ROOT)}` first")
    plan = planmod.make(cfg).cell("vm-slimio-redis-benchmark-always-r1")
    server = vmtarget.VmServer(plan, box_file, vmmod.work_dir(plan.vm.work_dir) /
                               "vm-restart-benchmark", Path("/tmp/vm-restart-benchmark.log"),
                               vmmod.guest_plan(plan).redis_bin_dir, "always", 8, 4)
    times: dict[str, list[float]] = {"vagrant up": [], "libvirt start": []}
    try:
        print(f"first boot: {server.boot():.1f} s", flush=True)
        for _ in range(args.pairs):
            for way in times:
                server.power_cut()
                t0 = time.monotonic()
                if way == "vagrant up":
                    server.vm.up()
                elif not server.vm.start_again(vmtarget.RESTART_SSH_S):
                    raise SystemExit("the VM did not answer at its last address")
                times[way].append(time.monotonic() - t0)
                print(f"{way}: {times[way][-1]:.1f} s", flush=True)
    finally:
        server.destroy()
    for way, xs in times.items():
        print(f"{way}: median {statistics.median(xs):.1f} s over {len(xs)}")


if __name__ == "__main__":
    main()
