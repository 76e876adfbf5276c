"""Stage report: one offline HTML page (results/report.html) an evaluator reads in ten
minutes: what ran on what, the claims' verdicts, every table with the paper's values beside
ours, every figure with its caption, the WAF evidence, the caveats, links to each cell."""

from .html import MissingOutputs, build, made_by, write, write_for_rule

__all__ = ["MissingOutputs", "build", "made_by", "write", "write_for_rule"]
