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
    script:
        "../scripts/crash_campaign.py"
