# Testbed stage: the guest box of the vm testbed (the VMs themselves are per cell, in run_cell).


rule build_guest_box:
    """Debian 12 + backports kernel, F2FS, nvme-cli and a JRE; the Redis builds, fio and the
    YCSB binding baked in."""
    input:
        recipe=[str(p) for p in (pathsmod.BOX_SCRIPT, pathsmod.BOX_PACKAGES,
                                 pathsmod.BOX_GUEST_REQUIREMENTS)],
        servers=[
            build(f"redis-{system}/{REDIS_VERSION}/bin/redis-server")
            for system in BOX_SYSTEMS
        ],
        fio=build(pathsmod.FIO_PATTERN.format(version=FIO_VERSION)),
        ycsb=build(pathsmod.YCSB_BUILD_RECORD_PATTERN.format(version=YCSB_VERSION)),
    output:
        box=build(pathsmod.BOX_PATTERN),
    log:
        build("logs/build_guest_box.log"),
        build("logs/build_guest_box.steps.log"),
    params:
        disk_size_mb=PLAN.box_disk_size_mb,
    # mmdebstrap and the image work take the machine; nothing else runs beside them.
    threads: WHOLE_NODE_CORES
    # mmdebstrap, the image tools and a VM booting the box (its memory is the cells' VMs').
    resources:
        mem_mb=4096,
        runtime=120,
    script:
        "../scripts/build_guest_box.py"
