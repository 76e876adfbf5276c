# Parse stage: each raw cell directory becomes a tidy record and a time series.


rule parse_cell:
    input:
        raw=results(pathsmod.CELL_RAW_PATTERN),
    output:
        record=results(pathsmod.CELL_RECORD_PATTERN),
        timeseries=results(pathsmod.CELL_TIMESERIES_PATTERN),
    log:
        results(f"logs/parse_cell/{pathsmod.CELL_ID_PATTERN}.log"),
    script:
        "../scripts/parse_cell.py"
