# Report stage: one offline HTML page with the run, the claims' verdicts, every table and
# figure, the WAF evidence, the caveats and links to each cell's raw directory.


rule render_report:
    """results/report.html from this run's verdicts, tables, figures and records."""
    input:
        verdicts=results(pathsmod.VERDICT_FILES["json"]),
        tables=TABLE_OUTPUTS,
        figures=FIGURE_OUTPUTS,
        # Tables 1-2 and Figure 2 where the run includes the motivation (the page shows
        # them whenever they are in the results directory).
        motivation=MOTIVATION_OUTPUTS if PLAN.motivation_in_reproduce else [],
    output:
        report=results(pathsmod.REPORT),
    log:
        results("logs/render_report.log"),
    script:
        "../scripts/render_report.py"
