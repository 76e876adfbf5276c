"""The package is shaped like the pipeline: one sub-package per stage, named as the rule file
that drives it, plus the guest's own sub-package; no import cycles; no stage reaching into
another's internals; the guest imports the standard library, redis-py and itself only."""

import ast
import subprocess
import sys
from pathlib import Path

from slimio_repro import paths

PACKAGE = paths.REPO_ROOT / "src" / "slimio_repro"
RULES = paths.REPO_ROOT / "workflows" / "rules"
# Stage sub-package -> the rule file that drives it (common.smk makes the plan).
STAGES = {"plan": "common.smk", "build": "build.smk", "testbed": "testbed.smk",
          "crash": "crash.smk",
          "run": "run.smk", "parse": "parse.smk", "ftl": "ftl.smk",
          "aggregate": "aggregate.smk", "claims": "claims.smk", "report": "report.smk",
          "motivation": "motivation.smk",
          "guest": None}
# What each stage may import of the others (the pipeline's order; guest is the leaf).
ALLOWED = {
    "guest": set(),
    "build": {"guest"},
    "plan": {"guest", "build"},
    "testbed": {"guest", "build"},
    "run": {"guest", "testbed"},
    "parse": {"guest"},
    "ftl": {"guest"},
    "aggregate": {"guest"},
    "claims": set(),
    "report": {"claims"},
    "motivation": {"guest", "parse", "ftl", "aggregate"},
    "crash": {"guest", "testbed"},
}


def modules() -> dict[str, Path]:
    out = {}
    for f in sorted(PACKAGE.rglob("*.py")):
        parts = f.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = f
    return out


def imports(name: str, path: Path) -> list[tuple[str, list[str]]]:
    """(module imported, names taken from it) for every import in the file, at any depth."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out += [(a.name, []) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module
            out.append((target, [a.name for a in node.names]))
    return out


def internal_edges() -> dict[str, set[str]]:
    """Module -> the package modules it imports (a name that is a submodule counts as it)."""
    mods = modules()
    graph = {}
    for name, path in mods.items():
        deps = set()
        for target, names in imports(name, path):
            if not target.startswith("slimio_repro"):
                continue
            for n in names:
                if f"{target}.{n}" in mods:
                    deps.add(f"{target}.{n}")
            if target in mods:
                deps.add(target)
        graph[name] = deps - {name}
    return graph


def test_sub_packages_are_the_stages():
    subs = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    assert subs == set(STAGES)
    rule_files = {p.name for p in RULES.glob("*.smk")}
    assert {r for r in STAGES.values() if r} == rule_files
    top = {p.stem for p in PACKAGE.glob("*.py")}
    assert top == {"__init__", "__main__", "cli", "paths", "smk"}, \
        "top-level modules are the CLI and shared helpers only; logic lives in a stage"


def test_no_import_cycles():
    graph = internal_edges()
    index, low, stack, on_stack, cycles = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            # A package's __init__ re-exporting its own modules is not a cycle of logic.
            if v.startswith(w + ".") or w.startswith(v + "."):
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            scc = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                scc.add(w)
                if w == v:
                    break
            if len(scc) > 1:
                cycles.append(sorted(scc))

    for v in graph:
        if v not in index:
            visit(v)
    assert not cycles, cycles


def stage_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in STAGES else None


def test_stages_use_each_other_only_through_their_public_names():
    import importlib
    problems = []
    for name, path in modules().items():
        here = stage_of(name)
        for target, names in imports(name, path):
            there = stage_of(target or "")
            if there is None or there == here:
                continue
            if here is not None and there not in ALLOWED[here]:
                problems.append(f"{name} imports stage {there} ({target})")
            pkg = f"slimio_repro.{there}"
            if target != pkg:
                problems.append(f"{name} reaches into {target}: import from {pkg} instead")
                continue
            public = set(importlib.import_module(pkg).__all__)
            problems += [f"{name} imports {pkg}.{n}, which {pkg}.__all__ does not export"
                         for n in names if n not in public]
    assert not problems, "\n".join(problems)


def test_guest_imports_the_standard_library_redis_and_itself_only():
    allowed = set(sys.stdlib_module_names) | {"redis"}
    bad = []
    for name, path in modules().items():
        if stage_of(name) != "guest":
            continue
        for target, _ in imports(name, path):
            top = (target or "").split(".")[0]
            if target.startswith("slimio_repro"):
                if not (target == "slimio_repro.guest" or target.startswith("slimio_repro.guest.")):
                    bad.append(f"{name} imports {target}")
            elif top not in allowed:
                bad.append(f"{name} imports {target}")
    assert not bad, bad


def test_guest_imports_with_the_host_only_packages_absent(tmp_path):
    """The guest has the standard library and redis-py (testbed/box), not PyYAML, jsonschema,
    pandas, matplotlib or Snakemake: the guest package (as the vm testbed copies it) and its
    entry point must work without them."""
    blocked = ["yaml", "jsonschema", "pandas", "matplotlib", "snakemake"]
    code = ("import sys\n" + "".join(f"sys.modules[{m!r}] = None\n" for m in blocked)
            + "import slimio_repro.guest, slimio_repro.guest.__main__\n"
            + "assert 'slimio_repro.plan' not in sys.modules\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    help_ = subprocess.run([sys.executable, "-m", "slimio_repro.guest", "run-cell", "--help"],
                           capture_output=True, text=True)
    assert help_.returncode == 0 and "--plan-json" in help_.stdout
