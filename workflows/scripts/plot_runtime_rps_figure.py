"""Rules plot_fig4_runtime_rps, plot_fig5_runtime_rps: thin wrapper over
slimio_repro.aggregate.plot.runtime_rps_figure (the figure, and its caption beside it)."""
from slimio_repro.aggregate import plot
from slimio_repro.smk import logged

with logged(snakemake.log[0]):
    plot.runtime_rps_figure(snakemake.params.figure,
                            list(zip(snakemake.input.records, snakemake.input.timeseries)),
                            [snakemake.output.png, snakemake.output.pdf],
                            caption=snakemake.output.caption)
