"""Load, merge and validate the pipeline configuration against its JSON Schema.

Defaults live only in the schema (``workflows/schemas/config.schema.yaml``): :func:`validate`
fills them in, then checks the result. Errors name the offending key path and say what to do.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from . import paths


class ConfigError(ValueError):
    """A configuration value is wrong; the message names it."""


def load_schema() -> dict:
    with open(paths.CONFIG_SCHEMA) as fh:
        return yaml.safe_load(fh)


def load_yaml(path: str | Path) -> dict:
    path = Path(path)
    try:
        with open(path) as fh:
            data = yaml.safe_load(fh) or {}
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"config file {path} is not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path} must hold a mapping, not {type(data).__name__}")
    return data


def merge(base: dict, override: dict) -> dict:
    """Deep-merge ``override`` into a copy of ``base`` (the way Snakemake merges configfiles)."""
    out = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def fill_defaults(instance: Any, schema: dict) -> None:
    """Insert the schema's ``default`` for every missing property, recursively, in place."""
    if not isinstance(instance, dict) or schema.get("type") != "object":
        return
    for key, sub in schema.get("properties", {}).items():
        if key not in instance and "default" in sub:
            instance[key] = copy.deepcopy(sub["default"])
        if key in instance:
            fill_defaults(instance[key], sub)


def _coerce_scalar(value: str, types: list[str]):
    text = value.strip()
    if "null" in types and text in ("null", "~", ""):
        return None
    if "boolean" in types and text.lower() in ("true", "false"):
        return text.lower() == "true"
    if "integer" in types:
        try:
            return int(text)
        except ValueError:
            pass
    if "number" in types:
        try:
            return float(text)
        except ValueError:
            pass
    return value


def coerce_strings(instance: Any, schema: dict) -> Any:
    """Convert strings to the schema's scalar type where it asks for one.

    Snakemake parses nested ``--config`` values with YAML's BaseLoader, so
    ``--config 'matrix={repetitions: 3}'`` arrives as the string ``"3"``.
    """
    types = schema.get("type", [])
    types = [types] if isinstance(types, str) else types
    if isinstance(instance, dict):
        for key, sub in schema.get("properties", {}).items():
            if key in instance:
                instance[key] = coerce_strings(instance[key], sub)
        return instance
    if isinstance(instance, list):
        return [coerce_strings(v, schema.get("items", {})) for v in instance]
    if isinstance(instance, str) and "string" not in types:
        return _coerce_scalar(instance, types)
    return instance


def _key_path(error: jsonschema.ValidationError) -> str:
    out = ""
    for part in error.absolute_path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def _describe(error: jsonschema.ValidationError) -> str:
    where = _key_path(error)
    if error.validator == "additionalProperties":
        allowed = sorted(error.schema.get("properties", {}))
        extra = sorted(set(error.instance) - set(allowed))
        prefix = f"{where}." if where != "(top level)" else ""
        return (f"unknown key {', '.join(prefix + k for k in extra)}: "
                f"allowed keys here are {', '.join(allowed)}")
    if error.validator == "enum":
        return (f"{where}: {error.instance!r} is not one of "
                f"{', '.join(map(repr, error.validator_value))}")
    return f"{where}: {error.message}"


def validate(config: dict, schema: dict | None = None) -> dict:
    """Fill defaults into ``config`` and validate it; raise :class:`ConfigError` naming the key."""
    schema = schema or load_schema()
    coerce_strings(config, schema)
    fill_defaults(config, schema)
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(config), key=lambda e: list(map(str, e.absolute_path)))
    if errors:
        lines = "\n  ".join(_describe(e) for e in errors)
        raise ConfigError(
            f"invalid configuration:\n  {lines}\n"
            "Fix the key in config/config.yaml, the profile, or the --config override.")
    _check_semantics(config)
    return config


def _check_semantics(config: dict) -> None:
    from . import cells  # cells needs no config module; imported here to keep that so

    bench = config["workloads"]["redis-benchmark"]
    width = bench["key_size_bytes"]
    if bench["keyspace"] > 10 ** width:
        raise ConfigError(
            f"workloads.redis-benchmark.keyspace: {bench['keyspace']} keys do not fit in "
            f"key_size_bytes={width} decimal digits; raise key_size_bytes or lower keyspace")
    matrix = config["matrix"]
    if "bare" in matrix["testbeds"] and "slimio-nofdp" in matrix["systems"]:
        raise ConfigError(
            "matrix.systems: slimio-nofdp differs from slimio only by FDP placement, which "
            "needs the vm testbed's NVMe device; matrix.testbeds has bare: remove "
            "slimio-nofdp from matrix.systems, or bare from matrix.testbeds")
    if "bare" in matrix["testbeds"] and config["slimio"]["backend"] == "nvme" \
            and any(cells.is_slimio(s) for s in matrix["systems"]):
        raise ConfigError(
            "slimio.backend: nvme needs the vm testbed's NVMe device, and matrix.testbeds has "
            "bare: set slimio.backend to auto (nvme in the vm, file on bare) or file")
    ycsb = config["workloads"]["ycsb-a"]
    if ycsb["records"] > 10 ** ycsb["key_size_bytes"]:
        raise ConfigError(
            f"workloads.ycsb-a.records: {ycsb['records']} records do not fit in "
            f"key_size_bytes={ycsb['key_size_bytes']} decimal digits (the binding's keys are "
            "zero-padded record numbers); raise key_size_bytes or lower records")
    image_mb = config["testbeds"]["bare"]["image_size_mb"]
    if image_mb and any(cells.is_slimio(s) for s in matrix["systems"]):
        device = max(cells.slimio_device_bytes(config, w) for w in matrix["workloads"])
        # ext4's own metadata (inode tables, journal) takes a few percent of the image.
        need_mb = -(-(device + device // 16 + 256 * cells.MIB) // cells.MIB)
        if image_mb < need_mb:
            raise ConfigError(
                f"testbeds.bare.image_size_mb: {image_mb} MiB cannot hold SlimIO's "
                f"{device // cells.MIB} MiB device file and the file system around it (needs "
                f"at least {need_mb} MiB); raise it, set it to null, or shrink "
                "slimio.wal_size_mb / slimio.slot_size_mb")


def load(configfiles: list[str | Path], overrides: dict | None = None) -> dict:
    """Merge config files in order, then ``overrides``, and validate."""
    config: dict = {}
    for f in configfiles:
        config = merge(config, load_yaml(f))
    if overrides:
        config = merge(config, overrides)
    return validate(config)
