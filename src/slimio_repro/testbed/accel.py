#!/usr/bin/python3
"""Which accelerator can QEMU really use here: ``kvm`` or ``tcg``.

/dev/kvm existing and opening is not enough. In a nested guest whose host does not really
support nesting, a KVM guest starts and then makes no progress (measured here: 60 s of system
time, not one line on the serial console) or stops with "KVM internal error ... emulation
failure". So the probe boots a Linux kernel under KVM with no root file system and
``panic=-1``: if the kernel reaches its panic within the time limit (a KVM guest needs about
two seconds, TCG about five), KVM works. Without a kernel to boot, the verdict is tcg, which
always works. Standard library only, so the setup playbook runs it with the system Python.

    accel.py [KERNEL]      prints one JSON object: {"accel": "kvm"|"tcg", "reason": ...}
"""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys

QEMU = "qemu-system-x86_64"
PROBE_SECONDS = 30
PANIC = "Kernel panic"


def host_kernel() -> str | None:
    kernels = sorted(glob.glob("/boot/vmlinuz-*"))
    return kernels[-1] if kernels else None


def probe(kernel: str | None = None, qemu: str = QEMU, seconds: int = PROBE_SECONDS) -> dict:
    if not os.path.exists("/dev/kvm"):
        return {"accel": "tcg", "reason": "/dev/kvm does not exist"}
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return {"accel": "tcg", "reason": "/dev/kvm is not readable and writable by this user"}
    kernel = kernel or host_kernel()
    if kernel is None:
        return {"accel": "tcg", "reason": "no kernel in /boot to boot a KVM test guest with; "
                "set testbeds.vm.accel: kvm to use KVM anyway"}
    cmd = [qemu, "-accel", "kvm", "-cpu", "host", "-machine", "q35", "-m", "256",
           "-nodefaults", "-display", "none", "-no-reboot", "-serial", "stdio",
           "-kernel", kernel, "-append", "console=ttyS0 panic=-1"]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds,
                              errors="replace")
        out = proc.stdout + proc.stderr
    except subprocess.TimeoutExpired as exc:
        out = (exc.stdout or b"").decode(errors="replace") if isinstance(exc.stdout, bytes) \
            else (exc.stdout or "")
        if PANIC in out:
            return {"accel": "kvm", "reason": f"a KVM guest booted {kernel} to its panic"}
        return {"accel": "tcg", "reason": f"a KVM guest booting {kernel} printed "
                f"{len(out.splitlines())} console lines and no kernel panic in {seconds} s"}
    except FileNotFoundError:
        return {"accel": "tcg", "reason": f"{qemu} is not installed"}
    if PANIC in out:
        return {"accel": "kvm", "reason": f"a KVM guest booted {kernel} to its panic"}
    last = " ".join(out.strip().splitlines()[-2:])[:300]
    return {"accel": "tcg", "reason": f"a KVM guest exited with {proc.returncode} before its "
            f"kernel panic: {last}"}


if __name__ == "__main__":
    print(json.dumps(probe(*sys.argv[1:2])))
