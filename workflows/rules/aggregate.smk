# Aggregate stage: the paper's tables and figures from the tidy records.

TABLE_OUTPUTS = (
    [
        results(f"tables/{name}.{ext}")
        for name in ("table3_redis_benchmark", "table4_ycsb_a", "table5_recovery")
        for ext in ("csv", "md", "tex")
    ]
    + [
        results(f"tables/{name}.{ext}")
        for name in ("table3_ratios", "table4_ratios", "table5_ratios")
        for ext in ("csv", "md")
    ]
    + [
        results(f"tables/{name}.{ext}")
        for name in ("roofline", "timing", "ftl_waf", "waf_sensitivity")
        for ext in ("csv", "md")
    ]
    + [results("tables/cells.csv")]
)

# Figures 4 and 5 are targets only when the matrix has all of their systems (Figure 4 needs
# slimio-nofdp, Figure 5 slimio, both the baseline); asked for by name without them, their
# input function stops the run at planning time and names what is missing.
FIGURE_OUTPUTS = (
    [results(f"figures/waf_sensitivity.{ext}") for ext in ("png", "pdf", "caption.txt")]
    + cell_files(pathsmod.CELL_FIGURE_PATTERN, ext="png")
    + cell_files(pathsmod.CELL_FIGURE_PATTERN, ext="pdf")
    + [
        results(f"figures/{name}.{ext}")
        for name in aggregatemod.RUNTIME_RPS_FIGURES
        if aggregatemod.runtime_rps_figure_cells(CELLS, name)
        for ext in ("png", "pdf", "caption.txt")
    ]
)


rule aggregate_tables:
    """Tables 3, 4 and 5 (CSV + Markdown + LaTeX), ratios to the baseline, the snapshot roofline, the
    modelled device WAF, the per-cell CSV; n and spread."""
    input:
        # Every cell's, or under finished_cells_only the finished cells' (common.smk).
        records=cell_records,
        ftl=FTL_OUTPUTS,
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


rule plot_fig4_runtime_rps:
    """Figure 4: runtime RPS under Periodical-Log, Baseline above SlimIO w/o FDP (first rep)."""
    input:
        unpack(
            lambda wildcards: aggregatemod.runtime_rps_figure_inputs(
                CELLS,
                "fig4_runtime_rps",
                results(pathsmod.CELL_RECORD_PATTERN),
                results(pathsmod.CELL_TIMESERIES_PATTERN),
            )
        ),
    output:
        png=results("figures/fig4_runtime_rps.png"),
        pdf=results("figures/fig4_runtime_rps.pdf"),
        caption=results("figures/fig4_runtime_rps.caption.txt"),
    log:
        results("logs/plot_fig4_runtime_rps.log"),
    params:
        figure="fig4_runtime_rps",
    script:
        "../scripts/plot_runtime_rps_figure.py"


rule plot_fig5_runtime_rps:
    """Figure 5: runtime RPS under Periodical-Log, Baseline above SlimIO (first repetition)."""
    input:
        unpack(
            lambda wildcards: aggregatemod.runtime_rps_figure_inputs(
                CELLS,
                "fig5_runtime_rps",
                results(pathsmod.CELL_RECORD_PATTERN),
                results(pathsmod.CELL_TIMESERIES_PATTERN),
            )
        ),
    output:
        png=results("figures/fig5_runtime_rps.png"),
        pdf=results("figures/fig5_runtime_rps.pdf"),
        caption=results("figures/fig5_runtime_rps.caption.txt"),
    log:
        results("logs/plot_fig5_runtime_rps.log"),
    params:
        figure="fig5_runtime_rps",
    script:
        "../scripts/plot_runtime_rps_figure.py"


rule plot_waf_sensitivity:
    """The modelled device WAF against reclaim unit size, over-provisioning and handles."""
    input:
        ftl=FTL_OUTPUTS,
    output:
        png=results("figures/waf_sensitivity.png"),
        pdf=results("figures/waf_sensitivity.pdf"),
        caption=results("figures/waf_sensitivity.caption.txt"),
    log:
        results("logs/plot_waf_sensitivity.log"),
    script:
        "../scripts/plot_waf_sensitivity.py"
