# Parse stage: each raw cell directory becomes a tidy record and a time series.

PARSE_MEM_MB = 4096
PARSE_RUNTIME_MIN = 60


rule parse_cell:
    input:
        raw=results(pathsmod.CELL_RAW_PATTERN),
    output:
        record=results(pathsmod.CELL_RECORD_PATTERN),
        timeseries=results(pathsmod.CELL_TIMESERIES_PATTERN),
    log:
        results(f"logs/parse_cell/{pathsmod.CELL_ID_PATTERN}.log"),
    # A cluster job: a cell's logs, sampler series and NVMe trace (the paper's cells write
    # hundreds of GB; the trace is read as a stream of commands).
    resources:
        mem_mb=PARSE_MEM_MB,
        runtime=PARSE_RUNTIME_MIN,
    script:
        "../scripts/parse_cell.py"
