# Report stage: one offline HTML page with the run, the claims' verdicts, every table and
# figure, the WAF evidence, the caveats and links to each cell's raw directory.
#
# What the run should have made is this rule's inputs, the outputs their rules declare for
# this plan, and is listed nowhere else: the page is written only when every one is there
# (slimio_repro.report), and one missing is named with the rule that makes it.


rule render_report:
    """results/report.html from this run's verdicts, tables, figures and records; it is not
    written without every one of them."""
    input:
        verdicts=results(pathsmod.VERDICT_FILES["json"]),
        # The cells that did not finish (config finished_cells_only), with their logs' ends.
        missing=results(pathsmod.MISSING_CELLS),
        tables=TABLE_OUTPUTS,
        # The runtime-RPS figure of each cell, Figures 4 and 5 where the matrix has their
        # systems, the WAF sensitivity figure.
        figures=FIGURE_OUTPUTS,
        # Tables 1-2 and Figure 2 where the run includes the motivation (the page also shows
        # them, unasked, whenever they are in the results directory).
        motivation=MOTIVATION_OUTPUTS if MOTIVATION_IN_REPRODUCE else [],
    params:
        # Each input -> the rule that makes it, for the error that names a missing one.
        made_by=lambda wildcards, input: reportmod.made_by(input, workflow.rules),
    output:
        report=results(pathsmod.REPORT),
    log:
        results("logs/render_report.log"),
    script:
        "../scripts/render_report.py"
