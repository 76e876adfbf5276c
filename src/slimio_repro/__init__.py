"""SlimIO reproduction framework: build, run, parse and report the paper's experiments.

Snakemake rules call the ``slimio-repro`` CLI (:mod:`slimio_repro.cli`); the logic lives in
the modules of this package so that it can be imported and tested on its own.
"""

__version__ = "0.1.0"
