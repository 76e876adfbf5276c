"""The parse stage (driven by workflows/rules/parse.smk): a raw cell directory becomes one
tidy record (JSON) and a time series (CSV)."""

from . import nvmetrace
from .record import ParseError, parse_cell, write

__all__ = ["ParseError", "nvmetrace", "parse_cell", "write"]
