"""The build stage (workflows/rules/build.smk): verified Redis sources, both Redis builds,
fio for the guest, and the YCSB binding."""

from . import fio, redis, sources, ycsb

__all__ = ["fio", "redis", "sources", "ycsb"]
