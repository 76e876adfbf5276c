# Claims stage: a verdict for each of the paper's quantitative claims from this run's records.

CLAIMS_OUTPUTS = [results(v) for v in pathsmod.VERDICT_FILES.values()]


rule judge_claims:
    """Each claim of results/reference/claims.yaml judged on this run (value, t interval, n,
    verdict and why)."""
    input:
        records=results(pathsmod.CELLS_TABLE),
        claims=config["claims"]["file"],
        # The motivation's records, where the profile runs it with the rest.
        motivation=[results(pathsmod.MOTIVATION_TABLE)] if MOTIVATION_IN_REPRODUCE else [],
        # The run's cells that did not finish (config finished_cells_only): the claims that
        # needed one say so.
        missing=results(pathsmod.MISSING_CELLS),
    output:
        csv=results(pathsmod.VERDICT_FILES["csv"]),
        json=results(pathsmod.VERDICT_FILES["json"]),
        md=results(pathsmod.VERDICT_FILES["md"]),
        summary=results(pathsmod.VERDICT_FILES["summary"]),
    params:
        # Repetitions added by `slimio-repro decide`: the claims are judged look by look.
        looks=config["matrix"]["looks"],
        repetitions=config["matrix"]["repetitions"],
    log:
        results("logs/judge_claims.log"),
    script:
        "../scripts/judge_claims.py"
