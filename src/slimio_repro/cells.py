"""The experiment matrix: one :class:`Cell` per testbed x system x workload x policy x rep."""

from __future__ import annotations

import itertools
import math
import re
from dataclasses import asdict, dataclass

from . import paths

POLICY_APPENDFSYNC = {"periodical": "everysec", "always": "always"}
POLICY_LABEL = {"periodical": "Periodical-Log", "always": "Always-Log"}
MIB = 1024 * 1024

# Bytes a SET of a K-byte key and V-byte value adds to the AOF: RESP framing
# "*3\r\n$3\r\nSET\r\n$K\r\nKEY\r\n$V\r\nVALUE\r\n" = 23 fixed bytes + digits of K and V.
def aof_bytes_per_set(key_size: int, value_size: int) -> int:
    return 23 + len(str(key_size)) + len(str(value_size)) + key_size + value_size


# Bytes one string key takes in an RDB snapshot (type, length-prefixed key and value).
# redis-benchmark's value is pseudo-random text over 64 symbols (genBenchmarkRandomData),
# which the RDB's LZF compression leaves as it is: measured 75 k keys of 4096 B -> ~310 MB.
def rdb_bytes_per_key(key_size: int, value_size: int) -> int:
    return 1 + 1 + key_size + 5 + value_size


@dataclass(frozen=True, order=True)
class Cell:
    testbed: str
    system: str
    workload: str
    policy: str
    rep: int

    def wildcards(self) -> dict:
        return asdict(self)

    @property
    def id(self) -> str:
        return paths.CELL_ID_PATTERN.format(**self.wildcards())

    @classmethod
    def from_id(cls, cell_id: str) -> "Cell":
        m = re.fullmatch(r"(?P<testbed>[a-z]+)-(?P<system>[a-z]+(?:-nofdp)?)-"
                         r"(?P<workload>redis-benchmark|ycsb-a)-(?P<policy>periodical|always)"
                         r"-r(?P<rep>\d+)", cell_id)
        if not m:
            raise ValueError(f"{cell_id!r} is not a cell id like {paths.CELL_ID_PATTERN}")
        d = m.groupdict()
        return cls(d["testbed"], d["system"], d["workload"], d["policy"], int(d["rep"]))


def expand(config: dict) -> list[Cell]:
    m = config["matrix"]
    return [Cell(*combo, rep) for combo in itertools.product(
        m["testbeds"], m["systems"], m["workloads"], m["policies"])
        for rep in range(1, m["repetitions"] + 1)]


def expected_dataset_bytes(config: dict) -> int:
    """Expected RDB size after the workload: distinct keys hit by uniform random SETs."""
    w = config["workloads"]["redis-benchmark"]
    keys = w["keyspace"] * (1 - math.exp(-w["requests"] / w["keyspace"]))
    return int(keys * rdb_bytes_per_key(w["key_size_bytes"], w["value_size_bytes"]))


def expected_wal_bytes(config: dict) -> int:
    w = config["workloads"]["redis-benchmark"]
    return w["requests"] * aof_bytes_per_set(w["key_size_bytes"], w["value_size_bytes"])


def aof_rewrite_min_size_bytes(config: dict) -> int:
    """auto-aof-rewrite-min-size that gives about N WAL-Snapshots per repetition.

    With auto-aof-rewrite-percentage 1 a rewrite starts whenever the AOF (base + increments)
    exceeds M. The first starts after M bytes of WAL; each rewrite shrinks the AOF to the
    dataset D, so the k-th starts after k*M - (k-1)*D bytes. N rewrites within T bytes of WAL
    needs N*M - (N-1)*D <= T < (N+1)*M - N*D; we take the middle of that interval.
    """
    explicit = config["server"]["auto_aof_rewrite_min_size_mb"]
    if explicit:
        return explicit * MIB
    n = config["server"]["wal_snapshots_per_repetition"]
    total, data = expected_wal_bytes(config), expected_dataset_bytes(config)
    low = (total + n * data) / (n + 1)
    high = (total + (n - 1) * data) / n
    return max(MIB, int((low + high) / 2))


def image_size_bytes(config: dict) -> int:
    """File-system image big enough for the WAL, a rewrite in flight and two snapshots."""
    explicit = config["testbeds"]["bare"]["image_size_mb"]
    if explicit:
        return explicit * MIB
    need = 2 * aof_rewrite_min_size_bytes(config) + 3 * expected_dataset_bytes(config)
    return max(256 * MIB, int(need * 1.5))
