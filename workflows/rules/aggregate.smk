# Aggregate stage: the paper's tables and figures from the tidy records.

TABLE_OUTPUTS = (
    [
        results(f"tables/{name}.{ext}")
        for name in ("table3_redis_benchmark", "table5_recovery")
        for ext in ("csv", "md", "tex")
    ]
    + [
        results(f"tables/{name}.{ext}")
        for name in ("table3_ratios", "table5_ratios")
        for ext in ("csv", "md")
    ]
    + [results("tables/cells.csv")]
)

FIG5_CELLS = [
    c
    for c in CELLS
    if c.workload == "redis-benchmark" and c.policy == "periodical" and c.rep == 1
]

FIGURE_OUTPUTS = cell_files(pathsmod.CELL_FIGURE_PATTERN, ext="png") + cell_files(
    pathsmod.CELL_FIGURE_PATTERN, ext="pdf"
)
if FIG5_CELLS:
    FIGURE_OUTPUTS += [results(f"figures/fig5_runtime_rps.{ext}") for ext in ("png", "pdf")]


rule aggregate_tables:
    """Tables 3 and 5 (CSV + Markdown), SlimIO/baseline ratios, the per-cell CSV; n and spread."""
    input:
        records=cell_files(pathsmod.CELL_RECORD_PATTERN),
    output:
        TABLE_OUTPUTS,
    log:
        results("logs/aggregate_tables.log"),
    params:
        out_dir=lambda wildcards, output: str(Path(output[0]).parent),
    script:
        "../scripts/aggregate_tables.py"


rule plot_cell_runtime_rps:
    """Runtime RPS of one cell, snapshot periods shaded."""
    input:
        record=results(pathsmod.CELL_RECORD_PATTERN),
        timeseries=results(pathsmod.CELL_TIMESERIES_PATTERN),
    output:
        png=results(pathsmod.CELL_FIGURE_PATTERN.replace("{ext}", "png")),
        pdf=results(pathsmod.CELL_FIGURE_PATTERN.replace("{ext}", "pdf")),
    log:
        results(f"logs/plot_cell_runtime_rps/{pathsmod.CELL_ID_PATTERN}.log"),
    script:
        "../scripts/plot_cell_runtime_rps.py"


rule plot_fig5_runtime_rps:
    """Figure 5: runtime RPS under Periodical-Log, one panel per system (first repetition)."""
    input:
        records=[results(pathsmod.CELL_RECORD_PATTERN).format(**c.wildcards()) for c in FIG5_CELLS],
        timeseries=[
            results(pathsmod.CELL_TIMESERIES_PATTERN).format(**c.wildcards()) for c in FIG5_CELLS
        ],
    output:
        png=results("figures/fig5_runtime_rps.png"),
        pdf=results("figures/fig5_runtime_rps.pdf"),
    log:
        results("logs/plot_fig5_runtime_rps.log"),
    script:
        "../scripts/plot_fig5_runtime_rps.py"
