"""The plan stage (driven by workflows/rules/common.smk): the configuration, validated once
against its schema, checked for what the schema cannot say, and resolved into a typed,
immutable :class:`Plan` with one :class:`CellPlan` per cell.

The cell plan's types (:mod:`.cellplan`) are standard library only, because the code that runs
a cell (:mod:`slimio_repro.agent`) imports them inside the guest. The names below are therefore
loaded on first use, so that importing ``slimio_repro.plan.cellplan`` in the guest does not
import the host's modules (jsonschema, PyYAML) with it.
"""

import importlib

# Name -> the module of this stage that defines it.
_EXPORTS = {
    **dict.fromkeys(
        ["BASELINE_EXT4", "CELL_ID_PATTERN", "CELL_SET_PATTERN", "MOTIVATION_ID_PATTERN",
         "Disk", "NO_POLICY", "NOPERSIST", "POLICY_APPENDFSYNC", "SLIMIO_SYSTEMS", "SYSTEMS",
         "SYSTEM_FILESYSTEM", "WORKLOADS", "Bare", "Cell", "CellPlan", "DeviceProfile",
         "Motivation", "NamedDevice", "Placement", "RedisBenchmark", "Recovery", "Roofline",
         "Server", "Sizing", "Slimio", "Vm", "YcsbA", "build_system", "is_slimio",
         "on_file_system", "persists", "policies_of"], "cellplan"),
    "bench_plans": "benchplan",
    **dict.fromkeys(["Cluster", "Estimate", "EstimateError", "Model", "TESTBED_PHASES",
                     "estimate_run", "measured_cells", "render_estimate"], "estimate"),
    "Host": "checks",
    **dict.fromkeys(["ConfigError", "default_drift", "load", "load_schema", "load_yaml",
                     "merge", "validate"], "config"),
    "load_device_profile": "device",
    **dict.fromkeys(["Plan", "make"], "resolve"),
    "check_space": "space",
    "check_vm_cell_space": "space",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_EXPORTS))
