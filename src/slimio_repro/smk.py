"""Helpers for the thin scripts that Snakemake rules run (workflows/scripts/*.py)."""

from __future__ import annotations

import contextlib
import signal
import sys
import traceback
from pathlib import Path


@contextlib.contextmanager
def logged(log_path: str, attempt: int = 1):
    """Send the script's stdout and stderr to the rule's log, and the error to both. A
    retried job's attempts after the first add to the log: the failed ones stay readable."""
    Path(log_path).parent.mkdir(parents=True, exist_ok=True)
    real_stderr = sys.stderr
    with open(log_path, "w" if attempt == 1 else "a") as log, \
            contextlib.redirect_stdout(log), \
            contextlib.redirect_stderr(log):
        try:
            yield
        except BaseException as exc:
            traceback.print_exc()
            print(f"error: {exc} (full traceback in {log_path})", file=real_stderr)
            raise


# The exit status of a process that SIGTERM stopped (128 + 15), as a shell reports it.
SIGTERM_EXIT = 143


class Terminated(SystemExit):
    """The exit SIGTERM makes (status 143), saying what sends it."""

    def __init__(self):
        super().__init__(SIGTERM_EXIT)

    def __str__(self) -> str:
        return ("stopped by SIGTERM (scancel or a SLURM time limit, Snakemake stopping its "
                "jobs, or `slimio-repro doctor --fix` stopping a cell whose Snakemake had "
                "died); the cell removed what it had made and runs again with the next run")


def _terminate(*_):
    raise Terminated()


@contextlib.contextmanager
def exit_on_sigterm():
    """Make SIGTERM an exit (SystemExit 143) while the block runs, so that its cleanup runs:
    scancel, a SLURM time limit and Snakemake stopping its jobs all send SIGTERM first (SLURM
    its SIGKILL KillWait seconds later), and a cell must still destroy its VM, unmount its
    image and stop its servers (a VM is libvirt's process, not the job's: nothing else
    would stop it)."""
    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
