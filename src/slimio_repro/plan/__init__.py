"""The plan stage (driven by workflows/rules/common.smk): the configuration, validated once
against its schema, checked for what the schema cannot say, and resolved into a typed,
immutable :class:`Plan` with one :class:`~slimio_repro.guest.CellPlan` per cell."""

from .bench import bench_plans
from .checks import Host
from .config import ConfigError, default_drift, load, load_schema, load_yaml, merge, validate
from .device import load_device_profile
from .plan import Plan, make

__all__ = ["ConfigError", "Host", "Plan", "bench_plans", "default_drift", "load", "load_device_profile",
           "load_schema", "load_yaml", "make", "merge", "validate"]
