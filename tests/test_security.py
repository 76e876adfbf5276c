"""What the setup and the pipeline keep secret or show (docs/explanation/security.md): the
secrets are readable by their owner only, and the report shows strings from the
configuration and the claims as text. Where the daemons listen is tested with the cluster
up, in tests/test_slurm.py."""

from __future__ import annotations

import json
import os
import pwd
import re
import shutil
import stat
from pathlib import Path

import pytest
import yaml

from conftest import built_box, require_root
from slimio_repro import claims, paths, report
from slimio_repro.aggregate import tables
from slimio_repro.parse import record as parse

# The setup playbook's secrets (-e host_slurm_enabled=true) and who alone may read each:
# munge's key (whoever reads it can forge any user's credential, root's included, to the
# cluster), slurmdbd.conf (the database login; no password is kept, but it is the file a
# password would go in), MariaDB's maintenance login (Debian's).
SLURM_SECRETS = {Path("/etc/munge/munge.key"): "munge", Path("/etc/slurm/slurmdbd.conf"): "slurm",
                 Path("/etc/mysql/debian.cnf"): "root"}


def exposed(path: Path, owner: str | None = None) -> str | None:
    """Why ``path`` is not private (group or others may read, write or run it, or ``owner``
    does not own it), or None."""
    st = path.stat()
    mode = stat.S_IMODE(st.st_mode)
    user = pwd.getpwuid(st.st_uid).pw_name
    if mode & 0o077 or (owner and user != owner):
        return f"{path}: mode {mode:04o}, owner {user}"
    return None


@pytest.mark.slow
def test_the_clusters_secrets_are_readable_by_their_owner_only():
    require_root()
    if not Path("/usr/local/sbin/slimio-slurm").is_file():
        why = ("the one-node SLURM cluster is not set up here: run `make setup-host "
               "SETUP_ARGS='-e host_slurm_enabled=true'` (make test does)")
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)
    checked = [*SLURM_SECRETS.items(), (Path("/etc/munge"), "munge")]
    problems = [p for p in (exposed(path, owner) for path, owner in checked) if p]
    assert not problems, problems


@pytest.mark.slow
def test_the_boxs_ssh_key_is_readable_by_its_owner_only():
    """The guest box's SSH private key (testbed/box/build_box.sh writes it next to the box):
    whoever reads it logs in to every guest as vagrant, who has sudo."""
    _, box_file = built_box()
    keys = sorted(box_file.parent.glob("*.key"))
    assert Path(f"{box_file}.key") in keys, keys
    problems = [p for p in map(exposed, keys) if p]
    assert not problems, problems


# A string that would run as script, break out of an attribute or start an entity if the
# page put it in raw.
HOSTILE = '<script>alert(1)</script> "quoted" & more'


def test_strings_from_configuration_and_claims_are_escaped(fixture_results, tmp_path):
    """A profile name (configuration: through each cell's provenance, its record and the
    tables' Markdown) and a claim's quote (the claims file, through the verdicts) that hold
    markup are shown as text wherever the page shows them, never as a tag."""
    results = tmp_path / "results"
    shutil.copytree(fixture_results, results, symlinks=True)
    cells = []
    for prov_file in sorted((results / "raw").glob("*/provenance.json")):
        prov = json.loads(prov_file.read_text())
        prov["profile"] = HOSTILE
        prov_file.write_text(json.dumps(prov))
        raw = prov_file.parent
        rec = results / "cells" / f"{raw.name}.json"
        parse.write(raw, rec, rec.with_suffix(".timeseries.csv"))
        cells.append(rec)
    tables.write_all(cells, results / "tables")
    catalog = yaml.safe_load(paths.CLAIMS_FILE.read_text())
    first = catalog["claims"][0]
    first["quote"] = HOSTILE
    claims_file = tmp_path / "claims.yaml"
    claims_file.write_text(yaml.safe_dump(catalog))
    claims.judge_run(results / paths.CELLS_TABLE, claims_file, results / "claims")
    page = report.build(results)
    escaped = "&lt;script&gt;alert(1)&lt;/script&gt; &#34;quoted&#34; &amp; more"
    row = re.search(rf'<tr id="claim-{re.escape(first["id"])}">(.*?)</tr>', page, re.S)
    assert row and f"<td>{escaped}</td>" in row.group(1), row and row.group(1)
    runinfo = page[page.index('<table class="runinfo">'):]
    assert f"<tr><th>Profile</th><td>{escaped}</td></tr>" in runinfo
    # Table 3's Markdown names the profile under the table; the page inserts the table's HTML
    # as it is.
    start = page.index('<div class="table" id="table-table3_redis_benchmark">')
    table = page[start:page.index('<div class="table" id=', start + 1)]
    assert 'profile: &lt;script&gt;alert(1)&lt;/script&gt; "quoted" &amp; more;' in table
    assert "<script>alert" not in page
    # The page's only script elements are its own JSON list of outputs.
    assert re.findall(r"<script\b[^>]*>", page) == \
        ['<script type="application/json" id="report-outputs">']
