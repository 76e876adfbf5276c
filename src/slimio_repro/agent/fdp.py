"""Parse the JSON output (``-o json``) of nvme-cli 2.3's ``fdp`` plugin.

Why: Flexible Data Placement experiments measure write amplification from the device's own
FDP statistics log (host vs. media bytes written, before and after a run) and need to know
the FDP configuration and which placement ids a namespace may use.  nvme-cli prints the raw
log field names (``hbmw``, ``runs``, ``ruhss``...); these helpers turn them into
unit-named, typed values and refuse output that is missing what they need.

Field meanings follow the NVMe FDP spec (TP4146, now in the NVMe 2.0 base spec):

* ``nvme fdp stats``: ``hbmw``/``mbmw``/``mbe`` = host bytes with metadata written, media
  bytes with metadata written, media bytes erased; 128-bit counters that nvme-cli prints as
  decimal strings.
* ``nvme fdp configs``: ``n`` = number of configurations - 1; per configuration ``fdpa``
  (bit 7 configuration valid, bit 4 volatile write cache, bits 3:0 reclaim group identifier
  format), ``vss`` (vendor specific size, bytes), ``nrg`` (reclaim groups), ``nruh`` (reclaim
  unit handles), ``nnss`` (max namespaces), ``runs`` (reclaim unit nominal size, bytes),
  ``erutl`` (estimated reclaim unit time limit, seconds; 0 = not reported).
* ``nvme fdp status``: per placement id ``pid``, ``ruhid`` (reclaim unit handle),
  ``earutr`` (estimated active reclaim unit time remaining, seconds), ``ruamw`` (reclaim
  unit available media writes, logical blocks).
* ``nvme fdp usage``: per reclaim unit handle ``ruha`` (0 unused, 1 host specified,
  2 controller specified).
"""

from __future__ import annotations

import json
from typing import Any

STATS_FIELDS = {"hbmw": "host_bytes_written", "mbmw": "media_bytes_written",
                "mbe": "media_bytes_erased"}
FDPA_CONFIG_VALID = 0x80
FDPA_VOLATILE_WRITE_CACHE = 0x10
FDPA_RGIF_MASK = 0x0F
RUH_ATTRIBUTES = {0: "unused", 1: "host_specified", 2: "controller_specified"}


class FdpError(ValueError):
    """nvme-cli FDP output that is malformed, incomplete or inconsistent."""


def _load_object(text: str, source: str) -> dict:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise FdpError(f"{source} is not valid JSON ({exc}); capture it with nvme-cli's "
                       "'-o json' option") from None
    if not isinstance(data, dict):
        raise FdpError(f"{source} must be a JSON object, not {type(data).__name__}")
    return data


def _require(obj: dict, key: str, source: str) -> Any:
    if key not in obj:
        raise FdpError(f"{source} has no {key!r} key (keys: {sorted(obj)}); is it the "
                       "'-o json' output of the matching nvme-cli 2.3 fdp command?")
    return obj[key]


def _uint(value: Any, key: str, source: str) -> int:
    """A non-negative integer from a JSON number or a decimal string (128-bit counters)."""
    if isinstance(value, bool):
        ok = False
    elif isinstance(value, int):
        ok = value >= 0
    elif isinstance(value, str):
        ok = value.strip().isdigit()
    else:
        ok = False
    if not ok:
        raise FdpError(f"{source}: {key}={value!r} is not a non-negative integer")
    return int(value)


def _list(obj: dict, key: str, source: str) -> list[dict]:
    items = _require(obj, key, source)
    if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
        raise FdpError(f"{source}: {key!r} must be a list of objects, not {items!r}")
    return items


def parse_stats(text: str, source: str = "nvme fdp stats output") -> dict:
    """``nvme fdp stats -o json`` → ``host_bytes_written``, ``media_bytes_written``,
    ``media_bytes_erased`` (ints)."""
    data = _load_object(text, source)
    return {name: _uint(_require(data, key, source), key, source)
            for key, name in STATS_FIELDS.items()}


def stats_delta(before: dict, after: dict) -> dict:
    """Counters of ``after`` minus ``before`` (both from :func:`parse_stats`), plus ``waf``.

    ``waf`` is media bytes written / host bytes written over the interval, None when the host
    wrote nothing.  Raise :class:`FdpError` when a counter went backwards.
    """
    out: dict[str, Any] = {}
    for name in STATS_FIELDS.values():
        for label, stats in (("before", before), ("after", after)):
            if name not in stats:
                raise FdpError(f"{label} stats have no {name!r} (keys: {sorted(stats)}); "
                               "pass the dicts returned by fdp.parse_stats")
        delta = after[name] - before[name]
        if delta < 0:
            raise FdpError(
                f"{name} went backwards: before={before[name]}, after={after[name]}; were "
                "before/after swapped, or was the device reset or re-created in between?")
        out[name] = delta
    host = out["host_bytes_written"]
    out["waf"] = out["media_bytes_written"] / host if host else None
    return out


def parse_configs(text: str, source: str = "nvme fdp configs output") -> list[dict]:
    """``nvme fdp configs -o json`` → one dict per FDP configuration, in log order."""
    data = _load_object(text, source)
    n = _uint(_require(data, "n", source), "n", source)
    configs = _list(data, "configs", source)
    if len(configs) != n + 1:
        raise FdpError(f"{source}: n={n} announces {n + 1} configuration(s) but 'configs' "
                       f"holds {len(configs)}; the output looks truncated")
    out = []
    for index, c in enumerate(configs):
        where = f"{source} configs[{index}]"

        def get(key: str) -> int:
            return _uint(_require(c, key, where), key, where)

        fdpa = get("fdpa")
        out.append({
            "config_index": index,
            "fdp_attributes": fdpa,
            "config_valid": bool(fdpa & FDPA_CONFIG_VALID),
            "volatile_write_cache": bool(fdpa & FDPA_VOLATILE_WRITE_CACHE),
            "reclaim_group_id_format_bits": fdpa & FDPA_RGIF_MASK,
            "vendor_specific_size_bytes": get("vss"),
            "reclaim_groups": get("nrg"),
            "reclaim_unit_handles": get("nruh"),
            "max_namespaces": get("nnss"),
            "reclaim_unit_size_bytes": get("runs"),
            "estimated_reclaim_unit_time_limit_s": get("erutl"),
        })
    return out


def _counted_list(data: dict, count_key: str, list_key: str, source: str) -> list:
    """``data[list_key]``, checked against the count nvme-cli prints beside it."""
    count = _uint(_require(data, count_key, source), count_key, source)
    items = _list(data, list_key, source)
    if len(items) != count:
        raise FdpError(f"{source}: {count_key}={count} but {list_key!r} holds {len(items)} "
                       "descriptor(s); the output looks truncated")
    return items


def parse_status_descriptors(text: str, source: str = "nvme fdp status output") -> list[dict]:
    """``nvme fdp status -o json`` → one dict per reclaim unit handle status descriptor."""
    descriptors = _counted_list(_load_object(text, source), "nruhsd", "ruhss", source)
    out = []
    for index, d in enumerate(descriptors):
        where = f"{source} ruhss[{index}]"

        def get(key: str) -> int:
            return _uint(_require(d, key, where), key, where)

        out.append({
            "placement_id": get("pid"),
            "reclaim_unit_handle_id": get("ruhid"),
            "active_ru_time_remaining_s": get("earutr"),
            "ru_available_media_writes_blocks": get("ruamw"),
        })
    return out


def parse_status(text: str, source: str = "nvme fdp status output") -> list[int]:
    """``nvme fdp status -o json`` → the sorted placement ids the namespace may use."""
    ids = [d["placement_id"] for d in parse_status_descriptors(text, source)]
    if len(set(ids)) != len(ids):
        raise FdpError(f"{source}: placement ids {ids} contain duplicates")
    return sorted(ids)


def parse_usage(text: str, source: str = "nvme fdp usage output") -> list[dict]:
    """``nvme fdp usage -o json`` → per reclaim unit handle, its attribute code and name."""
    handles = _counted_list(_load_object(text, source), "nruh", "ruhus", source)
    out = []
    for index, h in enumerate(handles):
        where = f"{source} ruhus[{index}]"
        ruha = _uint(_require(h, "ruha", where), "ruha", where)
        out.append({"reclaim_unit_handle_id": index, "attributes": ruha,
                    "attributes_name": RUH_ATTRIBUTES.get(ruha, "reserved")})
    return out
