"""Rule plot_waf_sensitivity: thin wrapper over slimio_repro.aggregate.plot.waf_sensitivity
(the figure, and its caption beside it)."""
import json
from pathlib import Path

from slimio_repro.aggregate import ftl_tables, plot
from slimio_repro.smk import logged

with logged(snakemake.log[0]):
    sequences = [json.loads(Path(f).read_text()) for f in snakemake.input.ftl]
    plot.waf_sensitivity(ftl_tables.sweep_frame(sequences),
                         [Path(snakemake.output.png), Path(snakemake.output.pdf)],
                         caption=Path(snakemake.output.caption), sequences=sequences)
