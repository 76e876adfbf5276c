"""MkDocs hook: the reference pages that are generated, not written.

* ``reference/configuration.md`` from the configuration's JSON Schema
  (``workflows/schemas/config.schema.yaml``): every key with its type, default, allowed
  values and description. A key the schema leaves undescribed takes the comment above it in
  ``config/config.yaml``, the file users edit.
* ``reference/cli.md`` from the ``slimio-repro`` command line's own parser (``--help`` of
  every subcommand).

Both pages exist only in the built site (``File.generated``); nothing is written into
``docs/``. The hook reads the repository next to ``mkdocs.yml``.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import sys
from pathlib import Path

import yaml
from mkdocs.structure.files import File, Files

SCHEMA = "workflows/schemas/config.schema.yaml"
CONFIG = "config/config.yaml"


def _repo(config) -> Path:
    return Path(config["config_file_path"]).resolve().parent


# ---------------------------------------------------------------- configuration reference

def _type_text(node: dict) -> str:
    t = node.get("type")
    if isinstance(t, list):
        text = " or ".join(t)
    elif t:
        text = t
    elif "enum" in node:
        text = "one of the values"
    else:
        text = "any"
    items = node.get("items")
    if t == "array" and isinstance(items, dict) and items.get("type"):
        text = f"array of {items['type']}"
    return text


def _value(v) -> str:
    if v is None:
        return "`null`"
    return "`" + yaml.safe_dump(v, default_flow_style=True, width=10_000).strip().removesuffix(
        "\n...").removesuffix(" ...") + "`"


def _limits(node: dict) -> str:
    parts = []
    enum = node.get("enum") or (node.get("items") or {}).get("enum")
    if enum:
        parts.append("one of " + ", ".join(_value(e) for e in enum))
    for key, sign in (("minimum", ">="), ("exclusiveMinimum", ">"), ("maximum", "<="),
                      ("exclusiveMaximum", "<"), ("minItems", "items >="),
                      ("minLength", "length >=")):
        if key in node:
            parts.append(f"{sign} {node[key]}")
    if "pattern" in node:
        parts.append(f"matches `{node['pattern']}`")
    return "; ".join(parts)


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def config_comments(path: Path) -> dict[str, str]:
    """The comment block right above each key of config.yaml, by dotted path."""
    comments: dict[str, str] = {}
    stack: list[tuple[int, str]] = []
    block: list[str] = []
    for line in path.read_text().splitlines():
        stripped = line.strip()
        if not stripped:
            block = []
            continue
        if stripped.startswith("#"):
            block.append(stripped.lstrip("#").strip())
            continue
        m = re.match(r"^( *)([A-Za-z0-9_.-]+):", line)
        if not m:
            block = []
            continue
        indent, key = len(m.group(1)), m.group(2)
        while stack and stack[-1][0] >= indent:
            stack.pop()
        stack.append((indent, key))
        if block:
            comments[".".join(k for _, k in stack)] = " ".join(block)
        block = []
    return comments


def _rows(node: dict, path: str, comments: dict[str, str], out: list[list[str]]) -> None:
    for key, child in (node.get("properties") or {}).items():
        dotted = f"{path}.{key}" if path else key
        description = child.get("description") or comments.get(dotted, "")
        if not child.get("description") and description:
            description += " *(from `config/config.yaml`)*"
        if not description and child.get("properties"):
            description = "A section: its keys follow."
        default = _value(child["default"]) if "default" in child else "(none)"
        if child.get("type") == "object" and child.get("properties"):
            default = "(its keys' defaults)" if child.get("default") == {} else default
        out.append([f"`{dotted}`", _type_text(child), default, _limits(child), description])
        if child.get("properties"):
            _rows(child, dotted, comments, out)


def configuration_page(repo: Path) -> str:
    schema = yaml.safe_load((repo / SCHEMA).read_text())
    comments = config_comments(repo / CONFIG)
    lines = [
        "# Configuration reference",
        "",
        f"*Generated at build time from `{SCHEMA}` (the schema every run is validated "
        f"against) by `docs/hooks/generate_reference.py`; do not edit this page, edit the "
        f"schema.*",
        "",
        _cell(schema.get("description", "")),
        "",
        f"`{CONFIG}` holds the defaults (the smoke profile), each key commented; the "
        "profiles in `config/profiles/` override some of them (see "
        "[Profiles](profiles.md)). Override a key on the command line with `--config`, "
        "for example `--config 'matrix={repetitions: 5}'`. Every object rejects unknown "
        "keys; a bad value stops the run before anything is built, naming the key.",
        "",
    ]
    for top, node in schema["properties"].items():
        about = node.get("description") or comments.get(top) or "A section: its keys follow."
        lines += [f"## `{top}`", "", _cell(about), ""]
        rows: list[list[str]] = []
        leaf = {"properties": {top: node}}
        _rows(leaf, "", comments, rows)
        lines += ["| key | type | default | allowed | description |",
                  "|---|---|---|---|---|"]
        lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
        lines.append("")
    return "\n".join(lines)


# ---------------------------------------------------------------------- CLI reference

def _help(main, argv: list[str]) -> str:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.suppress(SystemExit):
        main(argv)
    return buf.getvalue().rstrip()


def cli_page(repo: Path) -> str:
    src = str(repo / "src")
    if src not in sys.path:
        sys.path.insert(0, src)
    os.environ["COLUMNS"] = "92"
    from slimio_repro.cli import main  # noqa: PLC0415 (the checkout's own package)

    top = _help(main, ["--help"])
    commands = re.search(r"\{([a-z0-9,-]+)\}", top).group(1).split(",")
    lines = [
        "# Command line reference",
        "",
        "*Generated at build time from `slimio-repro`'s own parser "
        "(`src/slimio_repro/cli.py`) by `docs/hooks/generate_reference.py`.*",
        "",
        "`slimio-repro` is installed into `.venv/bin/` by `make bootstrap` (the package is "
        "installed editable); `python -m slimio_repro` is the same program. The Snakemake "
        "rules call the same code. The `make` targets are listed at the end of this page.",
        "",
        "```text",
        top,
        "```",
        "",
    ]
    for command in commands:
        lines += [f"## `slimio-repro {command}`", "", "```text",
                  _help(main, [command, "--help"]), "```", ""]
    lines += [
        "## `make` targets",
        "",
        "| target | what it runs |",
        "|---|---|",
        "| `make bootstrap` | `.venv` with `requirements.txt` and the package (editable) |",
        "| `make setup-host` | `ansible-playbook playbooks/setup-host.yml $(SETUP_ARGS)`, "
        "always |",
        "| `make host-ready` | the playbook only if the playbooks changed since it last ran or "
        "libvirt's network or pool is down |",
        "| `make reproduce` | `snakemake --cores all reproduce --configfile "
        "config/profiles/$(PROFILE).yaml` (`PROFILE=smoke`) |",
        "| `make motivation` | `snakemake --cores all motivation` (Tables 1-2, Figure 2) |",
        "| `make decide` | `slimio-repro decide results --budget $(DECIDE_BUDGET)` (`30m`) |",
        "| `make crash-campaign` | `snakemake --cores 1 crash_campaign` |",
        "| `make bench` | `slimio-repro bench --testbed $(BENCH_TESTBED) $(BENCH_ARGS)` "
        "(`bare`) |",
        "| `make nightly` | the `ci` and `smoke` profiles afresh, each `slimio-repro regress`ed "
        "against its reference, then `pytest -m nightly tests` |",
        "| `make test` | set-up (with SLURM and FEMU), then `pytest -n auto -m \"not slow\" "
        "tests`, the slow tier's two lanes (`pytest -n 2 --lanes -m \"slow and not nightly and "
        "not alone\" tests`) and its tests that run alone (`-m \"slow and not nightly and "
        "alone\"`) |",
        "| `make test-fast` | `pytest -n auto -m \"not slow\" tests` |",
        "| `make lint` | `snakemake --lint`, `ansible-lint`, the playbook's syntax check |",
        "",
    ]
    return "\n".join(lines)


# ------------------------------------------------------------------------------ hook

def on_files(files: Files, config) -> Files:
    repo = _repo(config)
    for uri, content in (("reference/configuration.md", configuration_page(repo)),
                         ("reference/cli.md", cli_page(repo))):
        files.append(File.generated(config, uri, content=content))
    return files
