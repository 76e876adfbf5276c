"""Helpers for the thin scripts that Snakemake rules run (workflows/scripts/*.py)."""

from __future__ import annotations

import contextlib
import sys
import traceback
from pathlib import Path


@contextlib.contextmanager
def logged(log_path: str):
    """Send the script's stdout and stderr to the rule's log, and the error to both."""
    Path(log_path).parent.mkdir(parents=True, exist_ok=True)
    real_stderr = sys.stderr
    with open(log_path, "w") as log, contextlib.redirect_stdout(log), \
            contextlib.redirect_stderr(log):
        try:
            yield
        except BaseException as exc:
            traceback.print_exc()
            print(f"error: {exc} (full traceback in {log_path})", file=real_stderr)
            raise
