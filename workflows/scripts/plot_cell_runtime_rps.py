"""Rule plot_cell_runtime_rps: thin wrapper over slimio_repro.plot.cell_figure."""
from slimio_repro.aggregate import plot
from slimio_repro.smk import logged

with logged(snakemake.log[0]):
    plot.cell_figure(snakemake.input.record, snakemake.input.timeseries,
                     [snakemake.output.png, snakemake.output.pdf])
