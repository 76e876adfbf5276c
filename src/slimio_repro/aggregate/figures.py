"""Which cells the paper's runtime figures (Figures 4 and 5) draw.
"""

from __future__ import annotations




# The paper's Figures 4 and 5 (§5.4): runtime RPS of the redis-benchmark workload under
# Periodical-Log (first repetition), the baseline above the system it is compared with.
# name -> (title, systems from top to bottom)
RUNTIME_RPS_FIGURES = {
    "fig4_runtime_rps": ("Figure 4: Baseline vs SlimIO w/o FDP", ("baseline", "slimio-nofdp")),
    "fig5_runtime_rps": ("Figure 5: Baseline vs SlimIO", ("baseline", "slimio")),
}


def runtime_rps_figure_cells(cells, name: str) -> list:
    """The cells (objects with testbed/system/workload/policy/rep) that figure ``name`` draws.

    Per testbed (in the order given), the first Periodical-Log redis-benchmark repetition of
    each of the figure's systems, in the figure's order; a testbed without all of them adds
    nothing, so the list is empty unless the matrix has every system of the figure.
    """
    _, systems = RUNTIME_RPS_FIGURES[name]
    first = {(c.testbed, c.system): c for c in cells
             if c.workload == "redis-benchmark" and c.policy == "periodical" and c.rep == 1}
    testbeds = list(dict.fromkeys(t for t, _ in first))
    return [first[(t, s)] for t in testbeds if all((t, s) in first for s in systems)
            for s in systems]


def runtime_rps_figure_inputs(cells, name: str, record_pattern: str,
                              timeseries_pattern: str) -> dict[str, list[str]]:
    """Records and time series of figure ``name``'s cells, in panel order (an input function
    for its rule); an error naming what the matrix lacks if it has no such cells."""
    chosen = runtime_rps_figure_cells(cells, name)
    if not chosen:
        _, systems = RUNTIME_RPS_FIGURES[name]
        have = {c.system for c in cells if c.workload == "redis-benchmark"
                and c.policy == "periodical" and c.rep == 1}
        missing = [s for s in systems if s not in have]
        lacks = (f"the matrix has no such cell of {', '.join(missing)}: add it to "
                 "matrix.systems (and periodical to matrix.policies, redis-benchmark to "
                 "matrix.workloads)" if missing else
                 "no testbed of the matrix has all of them: run them on the same testbed")
        raise ValueError(f"{name} compares {' and '.join(systems)} in the first "
                         f"redis-benchmark repetition under the periodical policy, and {lacks}")
    return {"records": [record_pattern.format(**c.wildcards()) for c in chosen],
            "timeseries": [timeseries_pattern.format(**c.wildcards()) for c in chosen]}
