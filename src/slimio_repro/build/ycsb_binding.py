"""Build our YCSB binding (ycsb-bindings/, Maven) and read the versions its pom pins.

The binding (``site.ycsb.db.redisstring.RedisStringClient``) stores each record as one Redis
string; what a cell does with the build (command lines, runs, parsers) is in
:mod:`slimio_repro.agent.ycsb_client`.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import time
import xml.etree.ElementTree as ET
from pathlib import Path

from .. import paths
from ..agent import ycsb_client as client
from . import redis as build_redis

BINDING_MODULE = "redis-string"
POM_NS = {"m": "http://maven.apache.org/POM/4.0.0"}
YcsbError = client.YcsbError


def pins(pom: Path = paths.YCSB_POM) -> dict:
    """The versions ycsb-bindings/pom.xml pins (its <properties>), e.g. ycsb.version."""
    root = ET.parse(pom).getroot()
    props = root.find("m:properties", POM_NS)
    out = {el.tag.split("}", 1)[1]: (el.text or "").strip() for el in props}
    out["binding.version"] = root.find("m:version", POM_NS).text.strip()
    return out


def pinned_version() -> str:
    """YCSB's core version, which names the build directory (build/ycsb/<version>)."""
    return pins()["ycsb.version"]


def source_files() -> list[Path]:
    """The binding's sources, poms and workload files: a change rebuilds it."""
    return sorted(p for p in paths.YCSB_BINDINGS_DIR.rglob("*")
                  if p.is_file() and "target" not in p.relative_to(paths.YCSB_BINDINGS_DIR).parts)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def build(out_dir: Path, log_path: Path) -> dict:
    """Build the binding out of tree into ``out_dir``: ``lib/`` (the binding's jar, YCSB's
    core and every runtime jar, from Maven Central at the pom's pinned versions),
    ``workloads/`` and ``build.json`` (versions, jars and their sha256), written last.

    The JUnit tests need a redis-server and run in the test suite (tests/test_ycsb_binding.py),
    not here.
    """
    if shutil.which("mvn") is None or shutil.which("java") is None:
        raise YcsbError("building ycsb-bindings needs Maven and a JDK (mvn, java on PATH): "
                        "run `make setup-host` (the setup playbook installs them)")
    out_dir = out_dir.resolve()
    src, lib = out_dir / "src", out_dir / "lib"
    for d in (src, lib, out_dir / "workloads", out_dir / "build.json"):
        if d.is_dir():
            shutil.rmtree(d)
        elif d.exists():
            d.unlink()
    shutil.copytree(paths.YCSB_BINDINGS_DIR, src,
                    ignore=shutil.ignore_patterns("target"))
    t0 = time.monotonic()
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "w") as log:
        build_redis.run_logged(["mvn", "-B", "-DskipTests", "package"], src, log, YcsbError)
    target = src / BINDING_MODULE / "target"
    jars = sorted(target.glob("*.jar")) + sorted((target / "dependency").glob("*.jar"))
    jars = [j for j in jars if not j.name.endswith(("-sources.jar", "-javadoc.jar"))]
    names = {j.name for j in jars}
    p = pins()
    core = f"core-{p['ycsb.version']}.jar"
    if core not in names or not any(n.startswith("redis-string-binding-") for n in names):
        raise YcsbError(f"the Maven build left no {core} or binding jar in {target}; "
                        f"see {log_path}")
    lib.mkdir()
    for j in jars:
        shutil.copy2(j, lib / j.name)
    shutil.copytree(src / "workloads", out_dir / "workloads")
    record = {
        "ycsb_core_version": p["ycsb.version"],
        "binding_version": p["binding.version"],
        "binding_class": client.BINDING_CLASS,
        "pins": p,
        "jars": {j.name: _sha256(lib / j.name) for j in jars},
        "workload_file_sha256": _sha256(out_dir / client.WORKLOAD_FILE),
        "maven": build_redis.tool_version(["mvn", "-B", "--version"]),
        "java": build_redis.tool_version(["java", "-version"]),
        "build_time_s": round(time.monotonic() - t0, 1),
    }
    shutil.rmtree(src)
    (out_dir / "build.json").write_text(json.dumps(record, indent=2) + "\n")
    return record
