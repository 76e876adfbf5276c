"""The aggregate stage (driven by workflows/rules/aggregate.smk): the paper's tables and
figures from the tidy records, one module per table (``write_all`` makes them all) and the
figures (:mod:`.plot`)."""

from . import (figures, formats, ftl_tables, paper_tables, plot, ratios, reference,
               roofline_table, summary, tables, timing)
from .figures import RUNTIME_RPS_FIGURES, runtime_rps_figure_cells, runtime_rps_figure_inputs
from .tables import write_all

__all__ = ["RUNTIME_RPS_FIGURES", "figures", "formats", "ftl_tables", "paper_tables",
           "plot", "ratios", "reference", "roofline_table", "runtime_rps_figure_cells",
           "runtime_rps_figure_inputs", "summary", "tables", "timing", "write_all"]
