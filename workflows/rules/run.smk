# Run stage: one self-contained cell (its own file system, server and outputs) per job.


rule run_cell:
    """Run one repetition of one workload under one policy on one system and testbed."""
    input:
        unpack(cell_inputs),
    output:
        raw=directory(results(pathsmod.CELL_RAW_PATTERN)),
    log:
        results(f"logs/run_cell/{pathsmod.CELL_ID_PATTERN}.log"),
    params:
        # The cell's plan (an object Snakemake does not compare) and its hash (compared): a
        # cell reruns exactly when a number it runs with changed (`snakemake -n` says
        # "Params have changed since last execution").
        plan=lambda wildcards: PLAN.cell_of(wildcards),
        plan_sha256=lambda wildcards: PLAN.cell_of(wildcards).sha256(),
    # A cell takes the whole machine: cells never run side by side and disturb each other.
    # On a cluster: its node, alone, with what its plan needs (plan/jobs.py).
    threads: WHOLE_NODE_CORES
    # A cell that fails runs again (its VM booted afresh), up to twice more: a run of
    # hundreds of cells meets transient faults. The attempt is in the cell's provenance.
    retries: CELL_RETRIES
    resources:
        attempt=lambda wildcards, attempt: attempt,
        mem_mb=cell_resource("mem_mb"),
        runtime=cell_resource("runtime"),
        constraint=cell_resource("constraint"),
        slurm_extra=cell_resource("slurm_extra"),
    # Cells first, their parsing and plots after the last (two at a time then): between
    # cells they held the next one back for 47 s of a 20.5-minute smoke run.
    priority: 10
    script:
        "../scripts/run_cell.py"


rule run_matrix:
    """Every cell of the matrix, without parsing."""
    input:
        cell_files(pathsmod.CELL_RAW_PATTERN),


rule list_missing_cells:
    """The cells of the run that did not finish, each with its log's last lines, for the
    claims and the report: none, unless config finished_cells_only left them out
    (workflows/rules/common.smk)."""
    output:
        missing=results(pathsmod.MISSING_CELLS_PATTERN),
    wildcard_constraints:
        table="cells|motivation_cells",
    log:
        results("logs/list_missing_cells/{table}.log"),
    params:
        # Compared by Snakemake: a cell left out, or its log, changing reruns the claims
        # and the report.
        missing=lambda wildcards: MISSING_CELLS[wildcards.table],
    script:
        "../scripts/list_missing_cells.py"
