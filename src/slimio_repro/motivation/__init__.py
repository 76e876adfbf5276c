"""Stage motivation: the paper's §2.2 Table 1 and §3.1 Table 2 and Figure 2 (rule file
workflows/rules/motivation.smk; `make motivation`).

Its cells run through the run stage (a motivation cell's guest side is
:mod:`slimio_repro.agent.motivation_cells`) and are parsed by :mod:`slimio_repro.parse.motivation_records`;
this stage makes the tables, the figure and the records its claims are judged on
(:mod:`.outputs`), with the modelled "under GC" scenario (the FTL model)."""

from .outputs import aged_waf, records, table1, table2, with_derived, write_all

__all__ = ["aged_waf", "records", "table1", "table2", "with_derived", "write_all"]
