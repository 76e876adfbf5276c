"""Load, merge and validate the pipeline configuration against its JSON Schema.

The defaults are config/config.yaml's values; the schema (``workflows/schemas/
config.schema.yaml``) carries the same values as its ``default:``s, which :func:`validate`
fills in (tests/test_config.py fails the day the two differ: :func:`default_drift`). Errors
name the offending key path and say what to do. What the schema cannot say (combinations,
sizes, the host) is checked when the plan is made (:mod:`.checks`).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from .. import paths


class ConfigError(ValueError):
    """A configuration value is wrong; the message names it."""


def load_schema() -> dict:
    with open(paths.CONFIG_SCHEMA) as fh:
        return yaml.load(fh, Loader=yaml.CSafeLoader)


def load_yaml(path: str | Path) -> dict:
    path = Path(path)
    try:
        with open(path) as fh:
            # libyaml's safe loader (in PyYAML's wheels): config.yaml in 1.2 ms against
            # the pure-Python one's 16.6 ms (timeit, 20 loads each).
            data = yaml.load(fh, Loader=yaml.CSafeLoader) or {}
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
    return config


def load(configfiles: list[str | Path], overrides: dict | None = None) -> dict:
    """Merge config files in order, then ``overrides``, and validate."""
    config: dict = {}
    for f in configfiles:
        config = merge(config, load_yaml(f))
    if overrides:
        config = merge(config, overrides)
    return validate(config)


def default_drift(schema: dict | None = None, defaults: dict | None = None) -> list[str]:
    """Where the schema's ``default:`` values and config/config.yaml disagree, key by key:
    a default missing on either side, or a different value. Empty when they agree."""
    schema = schema if schema is not None else load_schema()
    defaults = defaults if defaults is not None else load_yaml(paths.CONFIG_DIR / "config.yaml")
    out: list[str] = []

    def walk(sub: dict, value, where: str) -> None:
        props = sub.get("properties")
        if sub.get("type") == "object" and props:
            if not isinstance(value, dict):
                out.append(f"{where}: config.yaml has {value!r}, the schema an object")
                return
            for key in sorted(set(props) | set(value)):
                path = f"{where}.{key}" if where else key
                if key not in props:
                    out.append(f"{path}: in config.yaml, not in the schema")
                elif key not in value:
                    out.append(f"{path}: in the schema, not in config.yaml")
                else:
                    walk(props[key], value[key], path)
            return
        if "default" not in sub:
            out.append(f"{where}: the schema has no default (config.yaml: {value!r})")
        elif sub["default"] != value:
            out.append(f"{where}: the schema's default {sub['default']!r} differs from "
                       f"config.yaml's {value!r}")

    walk(schema, defaults, "")
    return out
