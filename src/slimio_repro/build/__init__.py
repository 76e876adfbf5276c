"""The build stage (workflows/rules/build.smk): verified Redis sources, both Redis builds,
fio for the guest, and the YCSB binding."""

from . import fio, redis, sources, ycsb_binding

__all__ = ["fio", "redis", "sources", "ycsb_binding"]
