"""Rule plot_fig5_runtime_rps: thin wrapper over slimio_repro.plot.comparison_figure."""
from slimio_repro import plot
from slimio_repro.smk import logged

with logged(snakemake.log[0]):
    plot.comparison_figure(list(zip(snakemake.input.records, snakemake.input.timeseries)),
                           [snakemake.output.png, snakemake.output.pdf],
                           "Figure 5: runtime RPS, Periodical-Log (first repetition)")
