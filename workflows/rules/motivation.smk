# Motivation stage: the paper's Table 1 (§2.2), Table 2 and Figure 2 (§3.1), with their
# claims' verdicts. `snakemake motivation` (make motivation); part of `reproduce` where the
# profile says motivation.in_reproduce (the paper profile).

# Every cell's, or under finished_cells_only the finished cells' (common.smk).
MOTIVATION_CELLS = taken(PLAN.motivation_cells)
MOTIVATION_RECORDS = [
    results(pathsmod.MOTIVATION_RECORD_PATTERN).format(**c.cell.wildcards())
    for c in MOTIVATION_CELLS
]
TABLE1_RECORDS = [
    results(pathsmod.CELL_RECORD_PATTERN).format(**c.cell.wildcards())
    for c in taken(PLAN.table1_cells)
]
# Under finished_cells_only with no motivation cell finished, nothing makes Table 2 and
# Figure 2: the motivation's outputs leave the run (its cells are listed as missing), and
# `snakemake motivation` says so (motivation_available).
MOTIVATION_NOTHING_FINISHED = bool(PLAN.motivation_cells) and not MOTIVATION_CELLS
MOTIVATION_OUTPUTS = [] if MOTIVATION_NOTHING_FINISHED else (
    [results(f"tables/{name}.{ext}") for name in pathsmod.MOTIVATION_TABLES for ext in ("csv", "md")]
    + [results(pathsmod.MOTIVATION_TABLE)]
    + [results(f"{pathsmod.MOTIVATION_FIGURE}.{ext}") for ext in ("png", "pdf", "caption.txt")]
    + [results(v) for v in pathsmod.MOTIVATION_VERDICT_FILES.values()]
)
# Whether `reproduce` makes the motivation's outputs (and judges its records with the rest).
MOTIVATION_IN_REPRODUCE = PLAN.motivation_in_reproduce and bool(MOTIVATION_OUTPUTS)


rule run_motivation_cell:
    """One motivation cell: its system's snapshots with no writes and with writes, under perf,
    in its own VM."""
    input:
        box=build(pathsmod.BOX_PATTERN),
        space=disk_space_checked,
    output:
        raw=directory(results(pathsmod.MOTIVATION_RAW_PATTERN)),
    log:
        results(pathsmod.MOTIVATION_LOG_PATTERN),
    params:
        plan=lambda wildcards: PLAN.cell(pathsmod.MOTIVATION_ID_PATTERN.format(**wildcards)),
        plan_sha256=lambda wildcards: PLAN.cell(
            pathsmod.MOTIVATION_ID_PATTERN.format(**wildcards)
        ).sha256(),
    threads: WHOLE_NODE_CORES
    resources:
        mem_mb=cell_resource("mem_mb", pathsmod.MOTIVATION_ID_PATTERN),
        runtime=cell_resource("runtime", pathsmod.MOTIVATION_ID_PATTERN),
        constraint=cell_resource("constraint", pathsmod.MOTIVATION_ID_PATTERN),
        slurm_extra=cell_resource("slurm_extra", pathsmod.MOTIVATION_ID_PATTERN),
    priority: 10
    script:
        "../scripts/run_motivation_cell.py"


rule parse_motivation_cell:
    input:
        raw=results(pathsmod.MOTIVATION_RAW_PATTERN),
    output:
        record=results(pathsmod.MOTIVATION_RECORD_PATTERN),
    log:
        results(f"logs/parse_motivation_cell/{pathsmod.MOTIVATION_ID_PATTERN}.log"),
    # A cluster job, like parse_cell: the perf profiles and the scheduler's trace.
    resources:
        mem_mb=PARSE_MEM_MB,
        runtime=PARSE_RUNTIME_MIN,
    script:
        "../scripts/parse_motivation_cell.py"


rule motivation_outputs:
    """Table 1, Table 2, Figure 2 and the records the motivation's claims are judged on."""
    input:
        motivation_available,
        motivation=MOTIVATION_RECORDS,
        table1=TABLE1_RECORDS,
    output:
        tables=[results(f"tables/{name}.{ext}") for name in pathsmod.MOTIVATION_TABLES for ext in ("csv", "md")],
        records=results(pathsmod.MOTIVATION_TABLE),
        figure=[results(f"{pathsmod.MOTIVATION_FIGURE}.{ext}") for ext in ("png", "pdf", "caption.txt")],
    log:
        results("logs/motivation_outputs.log"),
    script:
        "../scripts/motivation_outputs.py"


rule judge_motivation_claims:
    """The motivation's claims (ids mot-*) judged on its records alone."""
    input:
        records=results(pathsmod.MOTIVATION_TABLE),
        claims=config["claims"]["file"],
        # Its cells that did not finish (config finished_cells_only): its claims say so.
        missing=results(pathsmod.MOTIVATION_MISSING_CELLS),
    output:
        **{k: results(v) for k, v in pathsmod.MOTIVATION_VERDICT_FILES.items()},
    log:
        results("logs/judge_motivation_claims.log"),
    params:
        prefix=pathsmod.MOTIVATION_CLAIMS,
    script:
        "../scripts/judge_claims.py"


rule motivation:
    """Table 1, Table 2 and Figure 2 of the paper, and the verdicts of its motivation claims."""
    input:
        motivation_available,
        MOTIVATION_OUTPUTS,
