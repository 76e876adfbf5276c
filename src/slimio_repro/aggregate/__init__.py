"""The aggregate stage (driven by workflows/rules/aggregate.smk): the paper's tables and
figures from the tidy records."""

from . import plot, tables

__all__ = ["plot", "tables"]
