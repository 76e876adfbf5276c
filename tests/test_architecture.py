"""The package is shaped like the pipeline: one sub-package per stage, named as the rule file
that drives it, plus the agent (the code that runs a cell where it runs); no import cycles; no
stage reaching into another's internals; the agent imports the standard library, redis-py,
itself and the plan's standard-library cell plan only; one name per module and class, one
import style, and one place for each shared fact (labels, the bound, the trace's parser)."""

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
          "agent": None}
# What each stage may import of the others (the pipeline's order). The agent is the leaf: it
# imports only the plan's cell plan (AGENT_MAY_IMPORT), which imports nothing of the package.
ALLOWED = {
    "agent": {"plan"},
    "build": {"agent"},
    "plan": {"agent", "build"},
    "testbed": {"agent", "build", "plan"},
    "run": {"agent", "testbed", "plan"},
    "parse": {"agent", "plan"},
    "ftl": {"agent", "parse"},
    "aggregate": {"agent", "plan"},
    "claims": set(),
    "report": {"claims"},
    "motivation": {"agent", "parse", "ftl", "aggregate"},
    "crash": {"agent", "testbed", "plan"},
}
AGENT_MAY_IMPORT = {"slimio_repro.plan.cellplan"}
# Top-level modules: the CLI and what every stage shares (paths; the one table of labels;
# the bound), none of them logic of a stage.
TOP_LEVEL = {"__init__", "__main__", "cli", "paths", "smk", "labels", "bound"}
# Shared facts that import nothing of the package (so that the claims, which import no other
# stage, and the agent may use them).
LEAVES = {"slimio_repro.labels", "slimio_repro.bound", "slimio_repro.plan.cellplan"}


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


def lazy_exports(path: Path) -> dict[str, str]:
    """A package's ``_EXPORTS`` (name -> its module, loaded on first use), read from the source."""
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and [getattr(t, "id", "") for t in node.targets] == ["_EXPORTS"]:
            out = {}
            for key, value in zip(node.value.keys, node.value.values):
                if key is not None:
                    out[key.value] = value.value
                else:  # **dict.fromkeys([...], "module")
                    names, module = value.args
                    out.update(dict.fromkeys((e.value for e in names.elts), module.value))
            return out
    return {}


def internal_edges() -> dict[str, set[str]]:
    """Module -> the package modules it imports (a name that is a submodule counts as it, and
    so does a name a package exports lazily)."""
    mods = modules()
    graph = {}
    for name, path in mods.items():
        deps = set()
        for target, names in imports(name, path):
            if not target.startswith("slimio_repro"):
                continue
            lazy = lazy_exports(mods[target]) if target in mods else {}
            for n in names:
                if f"{target}.{n}" in mods:
                    deps.add(f"{target}.{n}")
                elif n in lazy:
                    deps.add(f"{target}.{lazy[n]}")
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
    assert top == TOP_LEVEL, \
        "top-level modules are the CLI and shared facts only; logic lives in a stage"


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
            if here == "agent" and target in AGENT_MAY_IMPORT:
                continue
            if target != pkg:
                problems.append(f"{name} reaches into {target}: import from {pkg} instead")
                continue
            public = set(importlib.import_module(pkg).__all__)
            problems += [f"{name} imports {pkg}.{n}, which {pkg}.__all__ does not export"
                         for n in names if n not in public]
    assert not problems, "\n".join(problems)


def test_agent_imports_the_standard_library_redis_itself_and_the_cell_plan_only():
    allowed = set(sys.stdlib_module_names) | {"redis"}
    bad = []
    for name, path in modules().items():
        if stage_of(name) != "agent" and name not in LEAVES:
            continue
        for target, _ in imports(name, path):
            top = (target or "").split(".")[0]
            if target.startswith("slimio_repro"):
                if name in LEAVES:
                    bad.append(f"{name} imports {target}: it must import nothing of the package")
                elif not (target == "slimio_repro.agent" or target.startswith("slimio_repro.agent.")
                          or target in AGENT_MAY_IMPORT):
                    bad.append(f"{name} imports {target}")
            elif top not in allowed or (name in LEAVES and top == "redis"):
                bad.append(f"{name} imports {target}")
    assert not bad, bad


def test_agent_runs_from_the_copy_the_vm_testbed_makes(tmp_path):
    """The guest has the standard library and redis-py (testbed/box), not PyYAML, jsonschema,
    pandas, matplotlib or Snakemake, and only the files the vm testbed copies into it
    (testbed.vm.GUEST_REPO_FILES): the agent and its entry point must work from that copy."""
    import io
    import tarfile

    from slimio_repro.testbed import vm
    with tarfile.open(fileobj=io.BytesIO(vm._repo_tar()), mode="r:gz") as tar:
        tar.extractall(tmp_path, filter="data")
    blocked = ["yaml", "jsonschema", "pandas", "matplotlib", "snakemake", "numpy", "scipy"]
    code = ("import sys\n" + "".join(f"sys.modules[{m!r}] = None\n" for m in blocked)
            + "import slimio_repro.agent, slimio_repro.agent.__main__\n"
            + "assert slimio_repro.agent.__file__.startswith(sys.argv[1]), slimio_repro.agent.__file__\n"
            + "host = [m for m in sys.modules if m.startswith('slimio_repro.plan.')"
            + " and m != 'slimio_repro.plan.cellplan']\n"
            + "assert not host, host\n")
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tmp_path / "src")}
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True,
                          text=True, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    help_ = subprocess.run([sys.executable, "-m", "slimio_repro.agent", "run-cell", "--help"],
                           capture_output=True, text=True, env=env, cwd=tmp_path)
    assert help_.returncode == 0 and "--plan-json" in help_.stdout, help_.stderr


def test_no_two_modules_or_classes_share_a_name():
    """A name means one thing: no two modules of the package (nor a module and a sub-package)
    and no two classes share a name."""
    seen: dict[str, list[str]] = {}
    for name, path in modules().items():
        if path.name in ("__init__.py", "__main__.py"):
            continue
        seen.setdefault(path.stem, []).append(name)
    for sub in STAGES:
        seen.setdefault(sub, []).append(f"slimio_repro.{sub} (package)")
    twice = {k: v for k, v in seen.items() if len(v) > 1}
    assert not twice, twice
    classes: dict[str, list[str]] = {}
    for name, path in modules().items():
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ClassDef):
                classes.setdefault(node.name, []).append(name)
    twice = {k: v for k, v in classes.items() if len(v) > 1}
    assert not twice, twice


def test_no_package_name_hides_one_of_its_modules():
    """``from slimio_repro.agent import X`` gives the module X whenever agent has one: a
    function exported under a module's name would hide it."""
    import importlib
    hidden = []
    for sub in STAGES:
        pkg = importlib.import_module(f"slimio_repro.{sub}")
        for f in (PACKAGE / sub).glob("*.py"):
            if f.stem in getattr(pkg, "__all__", ()):
                value = getattr(pkg, f.stem)
                if getattr(value, "__name__", None) != f"slimio_repro.{sub}.{f.stem}":
                    hidden.append(f"slimio_repro.{sub}.{f.stem} is hidden by {value!r}")
            elif f.stem in getattr(pkg, "_EXPORTS", {}):
                hidden.append(f"slimio_repro.{sub}.{f.stem} is hidden by a lazy export")
    assert not hidden, hidden


def test_one_import_style_relative_within_the_package():
    absolute = [f"{name}: from {target} import ..." for name, path in modules().items()
                for node in ast.walk(ast.parse(path.read_text()))
                if isinstance(node, (ast.ImportFrom, ast.Import))
                for target in ([node.module] if isinstance(node, ast.ImportFrom) and not node.level
                               else [a.name for a in node.names] if isinstance(node, ast.Import)
                               else [])
                if (target or "").startswith("slimio_repro")]
    assert not absolute, "import the package's own modules relatively:\n" + "\n".join(absolute)


def test_labels_and_the_bound_name_the_plans_identifiers():
    from slimio_repro import bound, labels
    from slimio_repro.plan import cellplan
    assert set(labels.SYSTEM_LABEL) == set(cellplan.SYSTEMS)
    assert set(labels.POLICY_LABEL) == set(cellplan.POLICY_APPENDFSYNC)
    assert set(labels.WORKLOAD_LABEL) == set(cellplan.WORKLOADS)
    assert bound.BOUND_SYSTEM == cellplan.NOPERSIST


def _string_dicts(path: Path):
    """Every dict display in a module, as its string keys and string values."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Dict):
            keys = {k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)}
            values = {v.value for v in node.values if isinstance(v, ast.Constant) and isinstance(v.value, str)}
            yield node.lineno, keys, values


def test_shared_facts_have_one_place():
    """The labels (labels.py) and the bound's metric map (bound.py) are written once: a dict
    elsewhere with two of their entries is a copy. Only parse/nvmetrace.py reads an
    nvme_setup_cmd event (the agent's vmstorage enables it; the FTL replays what it reads)."""
    from slimio_repro import bound, labels
    tables = {"labels.SYSTEM_LABEL": labels.SYSTEM_LABEL, "labels.POLICY_LABEL": labels.POLICY_LABEL,
              "labels.KIND_LABEL": labels.KIND_LABEL, "labels.WORKLOAD_LABEL": labels.WORKLOAD_LABEL,
              "bound.BOUND_METRIC": bound.BOUND_METRIC}
    copies = []
    for name, path in modules().items():
        if name in ("slimio_repro.labels", "slimio_repro.bound"):
            continue
        for line, keys, values in _string_dicts(path):
            for table_name, table in tables.items():
                pairs = [k for k in keys & set(table) if table[k] in values]
                if len(pairs) >= 2 or (table_name != "bound.BOUND_METRIC"
                                       and len(set(table.values()) & values) >= 2):
                    copies.append(f"{path.relative_to(PACKAGE)}:{line} copies {table_name}")
    assert not copies, copies
    readers = sorted(str(path.relative_to(PACKAGE)) for path in modules().values()
                     if "nvme_setup_cmd" in path.read_text()
                     and any(s in path.read_text() for s in ("re.compile", "cmd=(")))
    assert readers == ["parse/nvmetrace.py"], readers


def test_history_lives_in_the_changelog():
    """The README, the docs, the code and its comments say what is true now; what changed, and
    when, is CHANGELOG.md's (and the commit messages'). The tracker's issue numbers mean
    nothing to a reader of the repository."""
    import re
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=paths.REPO_ROOT, capture_output=True,
                            check=True).stdout.decode().split("\0")
    pattern = re.compile(r"\bissues? #?\d+\b", re.IGNORECASE)
    found = []
    for rel in filter(None, listed):
        if rel == "CHANGELOG.md" or rel.startswith("tests/fixtures/"):
            continue
        path = paths.REPO_ROOT / rel
        try:
            text = path.read_text()
        except (UnicodeDecodeError, FileNotFoundError, IsADirectoryError):
            continue
        found += [f"{rel}:{n}: {line.strip()}" for n, line in enumerate(text.splitlines(), 1)
                  if pattern.search(line)]
    assert not found, "\n".join(found)
