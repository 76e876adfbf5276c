# Crash stage (not part of `reproduce`: `make crash-campaign`): SlimIO and stock Redis killed at
# random moments and at every named failpoint, restarted twice, checked against what their
# clients were told.


rule crash_campaign:
    """The crash campaign of the config's crash section (results/crash/summary.md)."""
    input:
        slimio=build(f"redis-slimio/{REDIS_VERSION}/bin/redis-server"),
        baseline=build(f"redis-baseline/{REDIS_VERSION}/bin/redis-server"),
    output:
        summary=results(pathsmod.CRASH_SUMMARY),
    log:
        results("logs/crash_campaign.log"),
    # A cluster job: its servers and their kills on one node; a day at most (a campaign
    # stopped by its time limit goes on where it stopped when run again).
    resources:
        mem_mb=4096,
        runtime=1440,
    script:
        "../scripts/crash_campaign.py"
