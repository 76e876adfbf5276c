"""The documentation: the README is a front door (at most 150 lines), the site in docs/ builds
with MkDocs --strict (a dead link, a missing anchor or an orphan page fails it), every page is
in the nav, and the generated reference pages cover every configuration key and CLI command.
Fast: no VM, no build of the systems."""

import re
import shlex
import shutil
import subprocess
import sys

import pytest
import yaml

from conftest import REPO, VENV_BIN

README = REPO / "README.md"
DOCS = REPO / "docs"
# Pages that exist only in the built site, made by docs/hooks/generate_reference.py.
GENERATED = {"reference/configuration.md", "reference/cli.md"}


def mkdocs_build(site_dir, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(VENV_BIN / "mkdocs"), "build", "--strict", *extra,
                           "--site-dir", str(site_dir)], cwd=REPO, capture_output=True,
                          text=True)


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    site_dir = tmp_path_factory.mktemp("site")
    proc = mkdocs_build(site_dir)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert "WARNING" not in out, out[-4000:]
    return site_dir


def nav_pages(nav) -> list[str]:
    pages = []
    for entry in nav:
        value = next(iter(entry.values())) if isinstance(entry, dict) else entry
        pages += nav_pages(value) if isinstance(value, list) else [value]
    return pages


def text_of(html_file) -> str:
    return re.sub(r"<[^>]+>", "", html_file.read_text())


def test_readme_is_a_front_door():
    lines = README.read_text().splitlines()
    assert len(lines) <= 150, f"README.md has {len(lines)} lines; move detail into docs/"


def test_the_readme_mkdocs_command_builds_the_site_strictly(tmp_path):
    """The README's own command (its --site-dir pointed at a temporary directory)."""
    lines = [line for line in README.read_text().splitlines()
             if line.startswith(".venv/bin/mkdocs build")]
    assert len(lines) == 1, lines
    words = shlex.split(lines[0])
    assert "--strict" in words and "--site-dir" in words
    words[words.index("--site-dir") + 1] = str(tmp_path / "site")
    proc = subprocess.run([str(VENV_BIN / "mkdocs"), *words[1:]], cwd=REPO,
                          capture_output=True, text=True)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "WARNING" not in out, out[-4000:]
    assert (tmp_path / "site" / "index.html").is_file()


def test_a_dead_link_fails_the_strict_build(tmp_path):
    """--strict is what makes a broken link fail: checked on a copy with one added."""
    work = tmp_path / "repo"
    shutil.copytree(DOCS, work / "docs")
    for name in ("mkdocs.yml", "workflows/schemas/config.schema.yaml", "config/config.yaml"):
        (work / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / name, work / name)
    (work / "src").symlink_to(REPO / "src")
    page = work / "docs/how-to/bench.md"
    page.write_text(page.read_text() + "\nSee [nowhere](no-such-page.md).\n")
    proc = mkdocs_build(tmp_path / "site", "--config-file", str(work / "mkdocs.yml"))
    assert proc.returncode != 0
    assert "no-such-page.md" in proc.stdout + proc.stderr


def test_every_page_is_in_the_nav_and_every_nav_entry_exists():
    config = yaml.safe_load((REPO / "mkdocs.yml").read_text())
    nav = nav_pages(config["nav"])
    pages = {str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md")
             if "hooks" not in p.relative_to(DOCS).parts}
    assert pages - set(nav) == set(), "pages missing from mkdocs.yml's nav"
    assert set(nav) - pages - GENERATED == set(), "nav entries with no page"
    assert GENERATED <= set(nav)
    assert len(nav) == len(set(nav)), "a page is in the nav twice"


def schema_keys(node: dict, path: str = "") -> list[str]:
    keys = []
    for key, child in (node.get("properties") or {}).items():
        dotted = f"{path}.{key}" if path else key
        keys.append(dotted)
        keys += schema_keys(child, dotted)
    return keys


def test_the_configuration_reference_has_every_key_with_its_default(site):
    schema = yaml.safe_load((REPO / "workflows/schemas/config.schema.yaml").read_text())
    page = text_of(site / "reference/configuration.html")
    keys = schema_keys(schema)
    assert len(keys) > 100
    missing = [k for k in keys if k not in page]
    assert not missing, missing
    # A default the schema gives is on the key's row (e.g. redis-benchmark's 39000 SETs).
    row = re.search(r"workloads\.redis-benchmark\.requests\s*\n\s*integer\s*\n\s*39000", page)
    assert row, "the requests row does not show type and default"


def test_the_cli_reference_has_every_command(site):
    top = subprocess.run([sys.executable, "-m", "slimio_repro", "--help"], cwd=REPO,
                         capture_output=True, text=True, check=True).stdout
    commands = re.search(r"\{([a-z0-9,-]+)\}", top).group(1).split(",")
    assert len(commands) >= 10
    page = text_of(site / "reference/cli.html")
    for command in commands:
        assert f"usage: slimio-repro {command}" in page, command


HISTORY = [
    (re.compile(r"\bissue \d+", re.I), "an issue number"),
    (re.compile(r"\bthis stop\b|\bstop \d+", re.I), "a 'stop'"),
    (re.compile(r"\bstep \d+ of\b|\bsixth step\b", re.I), "a 'step N'"),
    (re.compile(r"\b20\d\d-\d\d-\d\d\b"), "a dated run record"),
    (re.compile(r"tried and reverted", re.I), "a history of attempts"),
]


@pytest.mark.parametrize("path", ["README.md", "docs", "config/README.md", "femu/README.md",
                                  "results/README.md"])
def test_pages_say_what_is_true_now_without_history(path):
    target = REPO / path
    files = sorted(target.rglob("*.md")) if target.is_dir() else [target]
    found = []
    for f in files:
        for n, line in enumerate(f.read_text().splitlines(), 1):
            found += [f"{f.relative_to(REPO)}:{n}: {what}: {line.strip()}"
                      for pattern, what in HISTORY if pattern.search(line)]
    assert not found, "history belongs in CHANGELOG.md:\n" + "\n".join(found)


def test_changelog_keeps_a_changelog_format():
    text = (REPO / "CHANGELOG.md").read_text()
    assert text.startswith("# Changelog")
    assert "## [Unreleased]" in text
    dates = re.findall(r"^## (\d{4}-\d\d-\d\d)$", text, re.M)
    assert dates and dates == sorted(dates, reverse=True)
    kinds = set(re.findall(r"^### (\w+)$", text, re.M))
    assert kinds <= {"Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"}
