"""SlimIO reproduction framework: build, run, parse and report the paper's experiments.

One sub-package per stage of the pipeline, named as the rule file that drives it
(workflows/rules/<stage>.smk), plus the agent, which runs a cell where the cell runs. The
rules' scripts (workflows/scripts/) are thin wrappers over these modules, and so is the
``slimio-repro`` CLI (:mod:`slimio_repro.cli`), so that the logic can be imported and tested
on its own.
"""

__version__ = "0.1.0"
