"""FEMU's garbage collection as the framework reads it, and the rule by which it is held
against theory: its GC lines (a fixture captured from a real `slimio-repro gc-check` by
tests/fixtures/femu/capture.sh), the effective over-provisioning of its FTL tested on the
model against Desnoyers' closed form, and the overwrite job's refusals. FEMU itself runs in
tests/test_femu_e2e.py."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from slimio_repro import ftl
from slimio_repro.ftl import gccheck, theory
from slimio_repro.ftl import trace as tr
from slimio_repro.agent import femulog, overwrite

FIXTURES = Path(__file__).parent / "fixtures" / "femu"


def test_femus_gc_lines_are_counted_by_handle():
    """248 GC rounds in the captured run, every victim on handle 0 (fio writes carry no
    directive); the model replaying the same run's trace counted 248 too (its summary)."""
    text = (FIXTURES / "gc-check-emulator.log").read_text()
    got = femulog.gc_rounds(text)
    summary = json.loads((FIXTURES / "gc-check-summary.json").read_text())
    assert got["gc_rounds"] == text.count("]GC-ing line:") == 248
    assert got["gc_rounds_per_handle"] == {0: 248}
    assert summary["whole_run"]["device_gc_rounds"] == 248
    assert summary["whole_run"]["model_gc_rounds"] == 248
    # Background GC keeps a quarter of the 170 units free: no round saw fewer than 42.
    assert 40 <= got["min_free_lines"] <= 43
    assert femulog.gc_rounds("no gc here\n") == {"gc_rounds": 0, "gc_rounds_per_handle": {},
                                                  "min_free_lines": None}


@pytest.mark.parametrize("utilization", [0.5, 0.6, 0.7])
def test_femus_effective_over_provisioning_gives_desnoyers_waf(utilization):
    """The rule gc-check compares the device with: FEMU's FTL (the model) under uniform
    random overwrites of ``utilization`` of its user pages has, in steady state, Desnoyers'
    WAF at alpha = (units - the quarter kept free - idle handles' open units) x pages per
    unit / live pages, within gc-check's tolerance; at plain physical / live it would be
    far off."""
    g = ftl.Geometry(user_bytes=1 << 30, op=ftl.FEMU_OP, ru_bytes=8 << 20, handles=8)
    dev = ftl.Device(g, "femu-fdp")
    live = int(utilization * g.user_pages)
    dev.write_sequential(0, live, pages_per_command=32)
    rng = np.random.default_rng(7)

    def random_writes(n):
        return dev._run(np.zeros(n, dtype=np.int8), rng.integers(0, live, n),
                        np.ones(n, dtype=np.int64), np.zeros(n, dtype=np.int64), None)
    random_writes(g.user_pages)                       # to the steady state
    c = random_writes(g.user_pages)
    alpha = gccheck.effective_alpha(g.physical_units, g.pages_per_unit, g.handles, live, 0.25)
    expected = theory.greedy_uniform_waf(alpha)
    assert abs(c.waf - expected) / expected < gccheck.THEORY_TOLERANCE, (c.waf, expected)
    naive = theory.greedy_uniform_waf(g.physical_units * g.pages_per_unit / live)
    assert abs(c.waf - naive) / naive > gccheck.THEORY_TOLERANCE


def _ops(lengths: list[int]) -> tr.Ops:
    n = len(lengths)
    z = np.zeros(n, dtype=np.int64)
    return tr.Ops(lba_bytes=4096, cmd=np.zeros(n, dtype=np.int8), slba=z.copy(),
                  nlb=np.array(lengths, dtype=np.int64), dtype=z - 1, dspec=z.copy(),
                  deac=np.zeros(n, dtype=bool), line=np.arange(n), source="t")


def test_the_trace_is_cut_where_the_device_counted_each_phase():
    parts = gccheck._cut(_ops([2, 3, 1, 4]), [5, 10])
    assert [p.nlb.tolist() for p in parts] == [[2, 3], [1, 4]]
    with pytest.raises(ftl.ModelError, match="no write ends at 4 LBAs"):
        gccheck._cut(_ops([2, 3, 1, 4]), [4, 10])


def test_the_overwrite_jobs_and_their_refusals():
    jobs = overwrite.jobs("/dev/nvme0n1", 1 << 30, 0.6, 1, 0.5, seed=3)
    assert [name for name, _ in jobs] == list(overwrite.PHASES)
    fill, warm, measure = (dict(a.split("=", 1) for a in args if "=" in a) for _, args in jobs)
    assert fill["--rw"] == "write" and int(fill["--size"]) == 644_218_880  # 0.6 GiB, 128K
    assert warm["--rw"] == measure["--rw"] == "randwrite" and warm["--bs"] == "4096"
    assert int(warm["--io_size"]) == 1 << 30 and int(measure["--io_size"]) == 1 << 29
    assert (warm["--randseed"], measure["--randseed"]) == ("3", "4")
    assert "--norandommap" in jobs[1][1] and "--direct=1" in jobs[1][1]
    with pytest.raises(ValueError, match="utilization 0.99"):
        overwrite.jobs("/dev/nvme0n1", 1 << 30, 0.99, 1, 1, seed=1)
    with pytest.raises(ValueError, match="measure_drive_writes 0"):
        overwrite.jobs("/dev/nvme0n1", 1 << 30, 0.6, 1, 0, seed=1)
