# FTL stage: the device's write amplification with garbage collection, from the NVMe traces
# (QEMU's emulation has none). A system's repetitions replay in order on one modelled device
# that is never reformatted, as the paper's repetitions ran on one FEMU device.


rule model_ftl_sequence:
    """WAF of a system's repetitions on the paper's FEMU FDP FTL at the cells' own device."""
    input:
        raw=ftl_sequence_inputs,
    output:
        result=results(pathsmod.FTL_SEQUENCE_PATTERN),
    log:
        results(f"logs/model_ftl_sequence/{pathsmod.FTL_SEQUENCE_ID_PATTERN}.log"),
    # A cluster job: the model's maps are 8 bytes per 4 KiB page (352 MB for the paper's
    # 180 GB device) beside the repetitions' traces, replayed one after the other.
    resources:
        mem_mb=8192,
        runtime=360,
    params:
        model=config["ftl"]["model"],
        sweep=config["ftl"]["sweep"],
    script:
        "../scripts/model_ftl_sequence.py"
