# Build stage: verified Redis sources and the binaries of each system.

# What a build job asks of a cluster node (cores: the profile's set-threads): a compiler or
# Maven per core at most a few hundred MiB, and 10-20 minutes at most on one core here.
BUILD_MEM_MB = 4096
BUILD_RUNTIME_MIN = 60


rule fetch_redis_source:
    """Fetch the pinned tarball from the first source that works; refuse a sha256 mismatch."""
    output:
        build(pathsmod.SOURCE_TARBALL_PATTERN),
    log:
        build("logs/fetch_redis_source-{version}.log"),
    params:
        dirs=list(PLAN.tarball_dirs),
    script:
        "../scripts/fetch_redis_source.py"


rule build_redis_baseline:
    """Stock Redis (server untouched) plus the patched redis-benchmark, built out of tree."""
    input:
        build(pathsmod.SOURCE_TARBALL_PATTERN),
    output:
        server=build("redis-baseline/{version}/bin/redis-server"),
    log:
        build("logs/build_redis_baseline-{version}.log"),
    threads: WHOLE_NODE_CORES
    resources:
        mem_mb=BUILD_MEM_MB,
        runtime=BUILD_RUNTIME_MIN,
    params:
        system="baseline",
        jobs=PLAN.make_jobs,
    script:
        "../scripts/build_redis.py"


rule build_redis_slimio:
    """SlimIO: the baseline's tree plus redis-slimio's new files and hook series, and slimio-admin."""
    input:
        tarball=build(pathsmod.SOURCE_TARBALL_PATTERN),
        slimio=slimio_build_inputs,
    output:
        server=build("redis-slimio/{version}/bin/redis-server"),
        admin=build("redis-slimio/{version}/bin/slimio-admin"),
    log:
        build("logs/build_redis_slimio-{version}.log"),
    threads: WHOLE_NODE_CORES
    resources:
        mem_mb=BUILD_MEM_MB,
        runtime=BUILD_RUNTIME_MIN,
    params:
        system="slimio",
        jobs=PLAN.make_jobs,
    script:
        "../scripts/build_redis.py"


rule build_fio:
    """fio for the guest's device roofline, from the pinned Debian .orig tarball (verified)."""
    input:
        pin=str(pathsmod.FIO_PIN),
    output:
        fio=build(pathsmod.FIO_PATTERN),
    log:
        build("logs/build_fio-{version}.log"),
    wildcard_constraints:
        version=r"\d+\.\d+(\.\d+)?",
    threads: WHOLE_NODE_CORES
    resources:
        mem_mb=BUILD_MEM_MB,
        runtime=BUILD_RUNTIME_MIN,
    script:
        "../scripts/build_fio.py"


rule build_ycsb_binding:
    """Our YCSB binding (ycsb-bindings/, Maven) with YCSB's core and every runtime jar from
    Maven Central at the pom's pinned versions, and the workload files."""
    input:
        [str(p) for p in ycsbmod.source_files()],
    output:
        record=build(pathsmod.YCSB_BUILD_RECORD_PATTERN),
    log:
        build("logs/build_ycsb_binding-{version}.log"),
    wildcard_constraints:
        version=r"\d+\.\d+\.\d+",
    # Maven's JVM and the binding's tests.
    resources:
        mem_mb=BUILD_MEM_MB,
        runtime=BUILD_RUNTIME_MIN,
    script:
        "../scripts/build_ycsb_binding.py"


rule build_ycsb:
    """Build the YCSB binding (what a ycsb-a cell runs)."""
    input:
        build(pathsmod.YCSB_BUILD_RECORD_PATTERN.format(version=YCSB_VERSION)),


rule build_fio_pinned:
    """Build the pinned fio (the guest's roofline; the bare bench's device rates)."""
    input:
        build(pathsmod.FIO_PATTERN.format(version=FIO_VERSION)),


rule build_redis:
    """Build the Redis binaries of every system in the matrix."""
    input:
        [
            build(f"redis-{system}/{REDIS_VERSION}/bin/redis-server")
            for system in PLAN.redis_builds
        ],
