"""Tables from tidy records: n, mean and spread per group, Markdown in the paper's shape."""

import json

import pytest

from conftest import CELL_FIXTURES
from slimio_repro import aggregate, parse


@pytest.fixture
def records(tmp_path):
    files = []
    for raw in sorted(CELL_FIXTURES.iterdir()):
        record, _ = parse.parse_cell(raw)
        for rep in (1, 2):  # two repetitions with different numbers
            r = dict(record, rep=rep, rps_avg=record["rps_avg"] * rep)
            f = tmp_path / f"{r['cell_id']}-{rep}.json"
            f.write_text(json.dumps(r))
            files.append(f)
    return files


def test_table3_has_n_mean_and_spread(records, tmp_path):
    out = tmp_path / "tables"
    aggregate.write_all(records, out)
    table = __import__("pandas").read_csv(out / "table3_redis_benchmark.csv")
    assert set(table.policy) == {"periodical", "always"}
    row = table[table.policy == "periodical"].iloc[0]
    assert row.n == 2 and row.rps_avg_n == 2
    base = row.rps_avg_mean / 1.5
    assert row.rps_avg_min == pytest.approx(base) and row.rps_avg_max == pytest.approx(2 * base)
    assert row.rps_avg_std > 0
    md = (out / "table3_redis_benchmark.md").read_text()
    assert "| Periodical-Log | Baseline | bare | 2 |" in md
    assert "| Always-Log | Baseline | bare | 2 |" in md
    assert "±" in md and "SSD WAF" in md
    assert "## The paper's numbers" in md and "| Periodical-Log | SlimIO | 75,675.7 |" in md
    t5 = (out / "table5_recovery.md").read_text()
    assert t5.count("| Baseline |") == 3  # two of ours (one per policy) and the paper's


def test_latex_table_is_a_booktabs_tabular(records, tmp_path):
    aggregate.write_all(records, tmp_path)
    tex = (tmp_path / "table3_redis_benchmark.tex").read_text()
    assert tex.count(r"\begin{tabular}") == 1 and r"\bottomrule" in tex
    body = [l for l in tex.splitlines() if l.startswith(("Periodical-Log", "Always-Log"))]
    assert len(body) == 2
    assert all(l.count(" & ") == 11 and l.endswith(r"\\") for l in body)
    assert r"$\pm$" in tex and "SET p999 (ms)" in tex
