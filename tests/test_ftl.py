"""The FTL model (stage ftl) against theory and against the real device, never only against
itself: Desnoyers' analytic WAF for greedy GC under uniform random writes; streams whose data
dies together (WAF exactly 1 with placement, above 1 without); a real cell's trace against the
FDP statistics and reclaim unit usage QEMU reported."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from slimio_repro import ftl
from slimio_repro.ftl import engine, theory
from slimio_repro.ftl import trace as tr

FIXTURES = Path(__file__).parent / "fixtures" / "ftl"
BASELINE = FIXTURES / "vm-baseline-redis-benchmark-periodical-r1"


@pytest.mark.parametrize("op", [0.07, 0.15, 0.28, 0.50])
def test_greedy_uniform_random_matches_desnoyers(op):
    """Steady-state WAF of uniform random single-page overwrites with greedy GC within 5 %
    of P. Desnoyers, "Analytic Modeling of SSD Write Performance" (SYSTOR 2012), the
    LRW/greedy limit WAF = alpha / (alpha + W0(-alpha e^-alpha)), alpha = physical / user
    (at 256 pages per unit greedy is within 1 % of that limit here)."""
    ppb = 256
    g = ftl.Geometry(user_bytes=512 * ppb * 4096, op=op, page_bytes=4096,
                     ru_bytes=ppb * 4096, handles=1)
    dev = ftl.Device(g, "greedy")
    dev.uniform_random(8 * g.user_pages, seed=1)          # reach the steady state
    c = dev.uniform_random(8 * g.user_pages, seed=2)
    alpha = g.physical_units * ppb / g.user_pages
    expected = theory.greedy_uniform_waf(alpha)
    assert c.gc_pages > 0 and c.erases > 0
    assert abs(c.waf - expected) / expected < 0.05, (op, c.waf, expected)


def test_desnoyers_formula_against_its_published_first_order_form():
    # (1 + rho) / (2 rho) is the small-rho expansion: close at 5 %, apart at 100 %.
    assert theory.greedy_uniform_waf(1.05) == pytest.approx(
        theory.greedy_uniform_waf_first_order(1.05), rel=0.03)
    assert theory.greedy_uniform_waf(2.0) > 1.2 > theory.greedy_uniform_waf_first_order(2.0)
    with pytest.raises(ValueError, match="alpha"):
        theory.greedy_uniform_waf(1.0)


def rings(g: ftl.Geometry, drive_writes: float, handles=(1, 2)) -> ftl.Ops:
    """Two rings overwritten in order: A over the first 3/8 of the device, B over the next
    1/2, B written once per four passes of A (different lifetimes), 64-page commands."""
    ppb = g.pages_per_unit
    a_len = (g.user_pages * 3 // 8) // ppb * ppb
    b_len = (g.user_pages // 2) // ppb * ppb
    cmds, a, b, written = [], 0, 0, 0
    while written < drive_writes * g.user_pages:
        cmds.append((a, 64, handles[0]))
        a = (a + 64) % a_len
        written += 64
        if len(cmds) % 5 == 0:  # 1 B command per 4 A commands
            cmds.append((a_len + b, 64, handles[1]))
            b = (b + 64) % b_len
            written += 64
    arr = np.array(cmds, dtype=np.int64)
    n = len(arr)
    return ftl.Ops(lba_bytes=4096, cmd=np.zeros(n, dtype=np.int8), slba=arr[:, 0],
                   nlb=arr[:, 1], dtype=np.full(n, 2, dtype=np.int64), dspec=arr[:, 2],
                   deac=np.zeros(n, dtype=bool), line=np.arange(n, dtype=np.int64))


@pytest.mark.parametrize("model,op", [("femu-fdp", ftl.FEMU_OP), ("greedy", 0.15)])
def test_rings_in_their_own_handles_never_copy_and_mixed_they_do(model, op):
    g = ftl.Geometry(user_bytes=256 << 20, op=op, ru_bytes=1 << 20, handles=8)
    ops = rings(g, drive_writes=6)
    honoured = ftl.Device(g, model).replay(ops)
    assert honoured.erases > 2 * g.physical_units  # the device was collected many times
    assert honoured.gc_pages == 0 and honoured.waf == 1.0
    mixed = ftl.Device(ftl.Geometry(**{**g.__dict__, "placement": False}), model).replay(ops)
    assert mixed.host_pages == honoured.host_pages
    assert mixed.waf > 1.05, mixed
    # Copies stay in the victim's handle (both models): everything is on handle 0 here.
    assert mixed.gc_pages_per_handle[0] == mixed.gc_pages


def test_femu_sends_copies_to_the_victims_own_handle():
    """Sequential writes on handle 1 and random overwrites on handle 2: each handle's copies
    land in that handle (not in a GC stream of their own, nor in the last handle as upstream
    FEMU's later FDP mode does), and the handles without writes get none."""
    g = ftl.Geometry(user_bytes=128 << 20, op=ftl.FEMU_OP, ru_bytes=1 << 20, handles=8)
    dev = ftl.Device(g, "femu-fdp")
    rng = np.random.default_rng(3)
    half = g.user_pages // 2
    n = 6 * g.user_pages // 8
    slba = np.where(np.arange(n) % 2 == 0, (np.arange(n) * 8) % half,
                    half + rng.integers(0, half // 8, n) * 8)
    dspec = np.where(np.arange(n) % 2 == 0, 1, 2)
    ops = ftl.Ops(lba_bytes=4096, cmd=np.zeros(n, dtype=np.int8), slba=slba.astype(np.int64),
                  nlb=np.full(n, 8, dtype=np.int64), dtype=np.full(n, 2, dtype=np.int64),
                  dspec=dspec.astype(np.int64), deac=np.zeros(n, dtype=bool),
                  line=np.arange(n, dtype=np.int64))
    c = dev.replay(ops)
    assert c.gc_pages > 0
    assert c.gc_pages_per_handle[1] > 0 and c.gc_pages_per_handle[2] > 0
    assert c.gc_pages_per_handle[1] + c.gc_pages_per_handle[2] == c.gc_pages
    assert c.erases_per_handle[1] > 0 and c.erases_per_handle[2] > 0
    assert c.host_pages_per_handle == [0, n // 2 * 8, n // 2 * 8, 0, 0, 0, 0, 0]


def test_deallocation_frees_without_copies():
    """A ring that deallocates each pass before rewriting it never copies, even mixed."""
    g = ftl.Geometry(user_bytes=64 << 20, op=0.07, ru_bytes=1 << 20, handles=1)
    dev = ftl.Device(g, "greedy")
    # Fill the device, then random overwrites of the first half with the second half trimmed:
    dev.write_sequential(0, g.user_pages)
    n = g.user_pages // 2
    trim = ftl.Ops(lba_bytes=4096, cmd=np.array([tr.CMD_DEALLOC], dtype=np.int8),
                   slba=np.array([n], dtype=np.int64), nlb=np.array([n], dtype=np.int64),
                   dtype=np.array([-1]), dspec=np.array([0]), deac=np.array([False]),
                   line=np.array([1]))
    c = dev.replay(trim)
    assert c.dealloc_pages == n and dev.valid_pages() == g.user_pages - n
    after_trim = dev.uniform_random(3 * g.user_pages, seed=4)
    fresh = ftl.Device(g, "greedy")
    fresh.write_sequential(0, g.user_pages)
    no_trim = fresh.uniform_random(3 * g.user_pages, seed=4)
    # Random writes over the whole logical space either way; with half of it trimmed first
    # the first pass finds more free space: less copying.
    assert after_trim.gc_pages < no_trim.gc_pages


def test_femu_trim_unmaps_one_lba_too_many():
    g = ftl.Geometry(user_bytes=16 << 20, op=ftl.FEMU_OP, ru_bytes=1 << 20, handles=8)
    ops = ftl.Ops(lba_bytes=4096, cmd=np.array([tr.CMD_WRITE, tr.CMD_DEALLOC], dtype=np.int8),
                  slba=np.array([0, 0], dtype=np.int64), nlb=np.array([16, 8], dtype=np.int64),
                  dtype=np.array([-1, -1]), dspec=np.array([0, 0]), deac=np.array([False] * 2),
                  line=np.array([1, 2]))
    femu = ftl.Device(g, "femu-fdp")
    femu.replay(ops)
    assert femu.valid_pages() == 16 - 9      # msssd_trim: nlb + 1 pages
    plain = ftl.Device(g, "greedy")
    plain.replay(ops)
    assert plain.valid_pages() == 16 - 8


def test_out_of_units_and_out_of_range_are_clear_errors():
    g = ftl.Geometry(user_bytes=16 << 20, op=0.07, ru_bytes=1 << 20, handles=8)
    ops = ftl.Ops(lba_bytes=4096, cmd=np.array([tr.CMD_WRITE], dtype=np.int8),
                  slba=np.array([g.user_pages], dtype=np.int64), nlb=np.array([1]),
                  dtype=np.array([-1]), dspec=np.array([0]), deac=np.array([False]),
                  line=np.array([7]), source="t.txt")
    with pytest.raises(ftl.ModelError, match=r"t.txt:7 .*--user-bytes"):
        ftl.Device(g, "greedy").replay(ops)
    with pytest.raises(ftl.ModelError, match="power of two"):
        ftl.Geometry(user_bytes=1 << 30, op=0.1, ru_bytes=3 << 20)
    with pytest.raises(ftl.ModelError, match="cannot serve 8 handles"):
        ftl.Geometry(user_bytes=8 << 20, op=0.1, ru_bytes=1 << 20, handles=8)
    with pytest.raises(ftl.ModelError, match="unknown FTL model 'fifo'"):
        ftl.policy("fifo")


def test_paper_geometry_is_femus_240_reclaim_units():
    g = ftl.paper_geometry()
    assert (g.physical_units, g.ru_bytes, g.handles) == (240, 1 << 30, 8)
    dev = ftl.Device(g, "femu-fdp")
    assert dev.prm[engine.P_BG_THRESH] == 60 and dev.prm[engine.P_FG_THRESH] == 12
    assert dev.free_units() == 240 - 8  # every handle holds an open unit from the start


# -- a real cell ------------------------------------------------------------------------------
def test_real_trace_accounts_for_everything_the_device_reported():
    """A real baseline cell (QEMU 10.0.2, F2FS), traced from the namespace's first write:
    the trace's write bytes are the FDP statistics' host bytes written exactly, and QEMU's
    reclaim unit bookkeeping replayed over it gives the device's media bytes written (QEMU
    adds a unit's remainder again at each unit switch inside a write) and every handle's
    remaining unit capacity in ``nvme fdp status`` at the end, exactly."""
    cell = ftl.CellDevice.load(BASELINE)
    ops = cell.ops()
    check = ftl.check_device(cell, ops)
    assert check["device_host_bytes"] == 494841856 == ops.write_lbas() * 4096
    assert check["host_bytes_ok"] is True
    assert check["device_media_bytes"] == check["model_media_bytes"] == 496029696
    assert check["media_bytes_exact"] is True
    assert check["device_ruamw_lbas"] == check["model_ruamw_lbas"] == [10261] + [16384] * 7
    assert check["ru_usage_ok"] is True
    # F2FS's and mkfs's discards are in the trace with their ranges (block_bio_queue).
    cover = ftl.deallocation_coverage(ops)
    assert cover["ranges_known"] and cover["dsm_commands"] == 12
    assert cover["dealloc_lbas"] >= (8 << 30) // 4096  # mkfs discards the whole namespace


def test_device_check_fails_when_trace_and_device_disagree(tmp_path):
    """The check can fail: a dropped write, or another handle status, is caught."""
    cell_dir = tmp_path / BASELINE.name
    shutil.copytree(BASELINE, cell_dir)
    status = json.loads((cell_dir / "fdp-status-after.json").read_text())
    status["ruhss"][0]["ruamw"] += 1
    (cell_dir / "fdp-status-after.json").write_text(json.dumps(status))
    assert ftl.check_device(ftl.CellDevice.load(cell_dir))["ru_usage_ok"] is False
    lines = gzip.open(BASELINE / "nvme-trace.txt.gz", "rt").read().splitlines()
    first_write = next(i for i, t in enumerate(lines) if "nvme_cmd_write slba" in t)
    del lines[first_write]
    with gzip.open(cell_dir / "nvme-trace.txt.gz", "wt") as f:
        f.write("\n".join(lines) + "\n")
    assert ftl.check_device(ftl.CellDevice.load(cell_dir))["host_bytes_ok"] is False


def test_replay_of_a_real_cell_and_its_repetition(tmp_path):
    second = tmp_path / "vm-baseline-redis-benchmark-periodical-r2"
    shutil.copytree(BASELINE, second)
    out = ftl.replay_cells([BASELINE, second], "femu-fdp")
    assert [r["cell"] for r in out["cells"]] == [BASELINE.name, second.name]
    host = out["cells"][0]["host_pages"]
    assert host * 4096 == 494841856 and out["sequence"]["host_pages"] == 2 * host
    assert out["sequence"]["waf"] == 1.0  # 1 GiB on an 8 GiB device: nothing to collect
    # The second repetition's mkfs discards the first one's data.
    assert out["cells"][1]["dealloc_pages"] > out["cells"][0]["dealloc_pages"] > 0
    assert "sequence" in ftl.render(out)


def test_trace_parser_reads_markers_discard_bios_and_write_zeroes(tmp_path):
    lines = [
        "  redis-server-939 [001] ..... 48.1: tracing_mark_write: slimio_dealloc slba=256 nlb=512 why=wal",
        "  redis-server-939 [001] ..... 48.2: nvme_setup_cmd: nvme0: disk=nvme0n1, qid=2, cmdid=1, nsid=1, flags=0x0, meta=0x0, cmd=(nvme_cmd_dsm nr=0, attributes=4)",
        "  kworker/1:1-68 [001] ..... 48.3: block_bio_queue: 259,0 DS 2048 + 2056 [f2fs_discard-259]",
        "  kworker/1:1-68 [001] ..... 48.3: block_bio_queue: 254,0 DS 2048 + 8 [other disk]",
        "  dd-7 [000] ..... 48.4: nvme_setup_cmd: nvme0: disk=nvme0n1, qid=1, cmdid=2, nsid=1, flags=0x0, meta=0x0, cmd=(nvme_cmd_write_zeroes slba=8, len=7, ctrl=0x200, dsmgmt=0, reftag=0)",
        "  dd-7 [000] ..... 48.5: nvme_setup_cmd: nvme0: disk=nvme0n1, qid=1, cmdid=3, nsid=1, flags=0x0, meta=0x0, cmd=(nvme_cmd_write slba=8, len=7, ctrl=0x20, dsmgmt=196608, reftag=0)",
        "  dd-7 [000] ..... 48.6: nvme_setup_cmd: nvme0: disk=nvme0n1, qid=1, cmdid=4, nsid=1, flags=0x0, meta=0x0, cmd=(nvme_cmd_flush cdw10=00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00)",
    ]
    p = tmp_path / "t.txt"
    p.write_text("\n".join(lines) + "\n")
    ops = tr.read(p, 4096)
    assert ops.cmd.tolist() == [tr.CMD_DEALLOC, tr.CMD_DSM, tr.CMD_DEALLOC,
                                tr.CMD_WRITE_ZEROES, tr.CMD_WRITE]
    assert ops.slba.tolist()[:3] == [256, 0, 256] and ops.nlb.tolist()[2] == 257
    assert ops.kind.tolist() == [engine.OP_DEALLOC, engine.OP_REQUEST, engine.OP_DEALLOC,
                                 engine.OP_DEALLOC, engine.OP_WRITE]
    assert (ops.dtype[4], ops.dspec[4]) == (2, 3)
    assert ops.stats["flush_commands"] == 1 and ops.stats["slimio_dealloc_lbas:wal"] == 512
    assert ftl.deallocation_coverage(ops)["ranges_known"]
    p.write_text(lines[0] + "\nCPU:0 [LOST 3 EVENTS]\n")
    with pytest.raises(ftl.TraceError, match="lost events"):
        tr.read(p, 4096)


def test_ftl_table_and_table3_column_from_a_real_sequence(tmp_path):
    from slimio_repro.aggregate import ftl_tables
    seq = ftl.replay_sequence([BASELINE])
    assert seq["device_checks"][0]["ru_usage_ok"] is True
    f = tmp_path / "vm-baseline-redis-benchmark-periodical.json"
    f.write_text(json.dumps(seq))
    cells, sequences = ftl_tables.load_ftl([f])
    assert cells.waf_modelled.tolist() == [1.0]
    # The cell's record has QEMU's device WAF (1.00: it collects no garbage).
    cells = cells.assign(testbed="vm", system="baseline", workload="redis-benchmark",
                         policy="periodical", waf=1.0)
    ftl_tables.write_ftl(cells, sequences, tmp_path)
    md = (tmp_path / "ftl_waf.md").read_text()
    # Both workloads share the table: each row names its own.
    assert "| Policy | System | Workload | Testbed | n |" in md
    assert "| Periodical-Log | Baseline | redis-benchmark | vm | 1 | 1.000 | 1.000 | 1.000 |" in md
    assert "The device (QEMU) reports 1.00" in md
    assert "usage exactly in 1 of 1 cells, its media bytes written (QEMU's order-dependent " \
        "padding) in 1" in md and "femu-fdp" in md
    assert "| Periodical-Log | Baseline | 1.14 |" in md  # the paper's, for comparison


def test_femu_model_under_uniform_random_writes_collects_in_the_background():
    """FEMU's triggers: background GC (one unit per command while <= 25 % of units are
    free) carries the load, the 5 % foreground threshold is never reached; keeping a quarter
    of the units free leaves less room for data than greedy-on-demand has, so its WAF is
    above Desnoyers' value for the same capacities."""
    g = ftl.Geometry(user_bytes=192 << 20, op=ftl.FEMU_OP, ru_bytes=1 << 20, handles=8)
    dev = ftl.Device(g, "femu-fdp")
    c = dev.uniform_random(6 * g.user_pages, seed=1)
    assert g.physical_units == 256
    assert c.gc_background > 0 and c.gc_foreground == 0
    assert c.min_free_units > int(0.05 * 256)
    assert c.waf > theory.greedy_uniform_waf(256 * g.pages_per_unit / g.user_pages)


SLIMIO = FIXTURES / "vm-slimio-redis-benchmark-periodical-r1"


def test_slimio_deallocations_reach_the_device_and_the_model():
    """A real SlimIO cell (nvme backend, passthru, FDP placement): every Dataset Management
    command in its trace follows a slimio_dealloc marker naming its range, the markers'
    LBAs are what INFO slimio counted, QEMU did not count them as host writes, and the model
    unmaps them."""
    cell = ftl.CellDevice.load(SLIMIO)
    ops = cell.ops()
    check = ftl.check_device(cell, ops)
    assert check["host_bytes_ok"] is True and check["ru_usage_ok"] is True
    info = dict(line.split(":", 1) for line in
                (SLIMIO / "info-slimio-after-workload.txt").read_text().splitlines()
                if ":" in line)
    server_lbas = sum(v for k, v in ops.stats.items()
                      if k.startswith("slimio_dealloc_lbas:") and not k.endswith(":format"))
    assert server_lbas == int(info["slimio_dealloc_lbas"]) > 0
    cover = ftl.deallocation_coverage(ops)
    assert cover["dsm_commands"] == cover["dealloc_ranges"] == ops.stats["slimio_dealloc_ranges"]
    # Each marker comes right before its DSM command in the trace.
    kinds = ops.cmd[(ops.cmd == tr.CMD_DEALLOC) | (ops.cmd == tr.CMD_DSM)].tolist()
    assert kinds == [tr.CMD_DEALLOC, tr.CMD_DSM] * cover["dsm_commands"]
    out = ftl.replay_cells([SLIMIO])
    assert out["cells"][0]["dealloc_pages"] > 0
    assert out["cells"][0]["host_pages_per_handle"][1] > 0  # the WAL's placement id 1


def test_sweep_table_and_figure(tmp_path):
    from slimio_repro.aggregate import ftl_tables, plot
    seq = ftl.replay_sequence([SLIMIO])
    points = seq["sweep"]
    assert {(p["parameter"], p["placement"]) for p in points} == {
        ("ru_bytes", True), ("op", True), ("handles", True), ("deallocations", True),
        ("ru_bytes", False), ("op", False), ("deallocations", False)}
    assert all(p["waf"] == 1.0 for p in points)  # 0.45 GiB on 8 GiB: no GC on any of them
    frame = ftl_tables.sweep_frame([seq])
    assert set(frame.system) == {"slimio"} and set(frame.policy) == {"periodical"}
    ftl_tables.write_sweep([seq], tmp_path)
    md = (tmp_path / "waf_sensitivity.md").read_text()
    assert "| SlimIO | redis-benchmark | Periodical-Log | ignored | 1.000 |" in md
    plot.waf_sensitivity(frame, [tmp_path / "w.png", tmp_path / "w.pdf"])
    assert (tmp_path / "w.png").stat().st_size > 10_000 and (tmp_path / "w.pdf").exists()


def test_deallocations_ignored_make_the_device_copy_more():
    """A log that frees (deallocates) what lies half its length ahead, sharing units with a
    slowly rewritten region: a device that is told of the deallocations copies less than one
    that is not (F2FS nodiscard, slimio-deallocate no), which still thinks them valid."""
    g = ftl.Geometry(user_bytes=64 << 20, op=0.15, ru_bytes=1 << 20, handles=1)
    b_len, log_start = g.user_pages // 4, g.user_pages // 4
    log_len = g.user_pages - log_start
    cmds, pos, b = [], 0, 0
    for i in range(8 * g.user_pages // 64):
        ahead = (pos + log_len // 2) % log_len
        cmds.append((tr.CMD_DEALLOC, log_start + ahead, 64))
        cmds.append((tr.CMD_WRITE, log_start + pos, 64))
        pos = (pos + 64) % log_len
        if i % 4 == 0:
            cmds.append((tr.CMD_WRITE, b, 64))
            b = (b + 64) % b_len
    a = np.array(cmds, dtype=np.int64)
    n = len(a)
    ops = ftl.Ops(lba_bytes=4096, cmd=a[:, 0].astype(np.int8), slba=a[:, 1], nlb=a[:, 2],
                  dtype=np.full(n, -1, dtype=np.int64), dspec=np.zeros(n, dtype=np.int64),
                  deac=np.zeros(n, dtype=bool), line=np.arange(n, dtype=np.int64))
    told = ftl.Device(g, "greedy").replay(ops)
    untold = ftl.Device(g, "greedy", deallocations=False).replay(ops)
    assert told.host_pages == untold.host_pages and untold.dealloc_pages == 0
    assert untold.gc_pages > told.gc_pages and untold.waf > 1.5 > told.waf, (told, untold)


def test_sweep_table_and_figure_without_vm_cells(tmp_path):
    from slimio_repro.aggregate import ftl_tables, plot
    frame = ftl_tables.sweep_frame([])
    assert frame.empty and "parameter" in frame
    ftl_tables.write_sweep([], tmp_path)
    assert "No sweep: the run has no vm cell, or its profile sets ftl.sweep: false" in \
        (tmp_path / "waf_sensitivity.md").read_text()
    plot.waf_sensitivity(frame, [tmp_path / "w.png"])
    assert (tmp_path / "w.png").exists()


def test_a_deallocation_past_the_modelled_device_is_clipped():
    """mkfs discards the whole namespace: on a smaller modelled device that is no error."""
    g = ftl.Geometry(user_bytes=16 << 20, op=0.15, ru_bytes=1 << 20, handles=1)
    ops = ftl.Ops(lba_bytes=512, cmd=np.array([tr.CMD_DEALLOC, tr.CMD_WRITE], dtype=np.int8),
                  slba=np.array([0, 8], dtype=np.int64), nlb=np.array([1 << 30, 9]),
                  dtype=np.array([-1, -1]), dspec=np.array([0, 0]), deac=np.array([False] * 2),
                  line=np.array([1, 2]))
    for model in ("greedy", "femu-fdp"):
        g2 = g if model == "greedy" else ftl.Geometry(**{**g.__dict__, "handles": 8,
                                                          "op": ftl.FEMU_OP})
        c = ftl.Device(g2, model).replay(ops)
        # 9 sectors of 512 B from sector 8 touch 4 KiB pages 1 and 2.
        assert c.host_pages == 2 and c.dealloc_unmapped_pages == g2.user_pages
    with pytest.raises(ftl.TraceError, match="not an LBA size"):
        tr.read(BASELINE / "nvme-trace.txt.gz", 1000)


def test_the_ftl_command(capsys, tmp_path):
    from slimio_repro.cli import main
    out_json = tmp_path / "r.json"
    assert main(["ftl", str(SLIMIO), str(SLIMIO), "--json", str(out_json)]) == 0
    text = capsys.readouterr().out
    assert "femu-fdp" in text and "sequence" in text and "0.11 drive writes" in text
    assert len(json.loads(out_json.read_text())["cells"]) == 2
    assert main(["ftl", "--check-device", str(BASELINE), str(SLIMIO)]) == 0
    checks = json.loads(capsys.readouterr().out)
    assert [c["ru_usage_ok"] for c in checks] == [True, True]
    assert main(["ftl", "--model", "greedy", "--op", "0.07", "--ru-bytes", "16M",
                 "--ignore-placement", str(SLIMIO)]) == 0
    assert "placement ignored" in capsys.readouterr().out
    # SlimIO's layout reaches past 256 MiB: the error names the command and the option.
    assert main(["ftl", "--user-bytes", "256M", "--ru-bytes", "4M", str(SLIMIO)]) == 2
    assert "--user-bytes" in capsys.readouterr().err
    assert main(["ftl", "--model", "fifo", str(SLIMIO)]) == 2
    assert "unknown FTL model 'fifo'" in capsys.readouterr().err
    assert main(["ftl", str(tmp_path)]) == 2
    assert "only vm cells record the device trace" in capsys.readouterr().err


def test_cells_of_a_device_in_ram_replay_each_on_a_fresh_device():
    """FEMU's device lives in its emulator's RAM: each of its cells started blank, and the
    model replays it so (the sequence adds the cells up); a QEMU cell's file-backed namespace
    is the paper's un-reformatted device, replayed in order on one device."""
    one = ftl.replay_cells([SLIMIO])
    fresh = ftl.replay_cells([SLIMIO, SLIMIO], fresh_per_cell=True)
    aged = ftl.replay_cells([SLIMIO, SLIMIO])
    assert ftl.CellDevice.load(SLIMIO).emulator == "qemu"
    assert aged["fresh_device_per_cell"] is False and fresh["fresh_device_per_cell"] is True
    keys = ("host_pages", "gc_pages", "erases", "dealloc_pages", "dealloc_unmapped_pages")
    for row in fresh["cells"]:
        assert {k: row[k] for k in keys} == {k: one["cells"][0][k] for k in keys}
    assert fresh["sequence"]["host_pages"] == 2 * one["sequence"]["host_pages"]
    assert fresh["sequence"]["gc_pages_per_handle"] == \
        [2 * x for x in one["sequence"]["gc_pages_per_handle"]]
    # On one device the second cell finds the first one's data: its deallocations unmap
    # pages that were mapped, and the fresh device's do not all.
    assert aged["cells"][1]["dealloc_unmapped_pages"] != fresh["cells"][1]["dealloc_unmapped_pages"] \
        or aged["cells"][1]["free_units_after"] != fresh["cells"][1]["free_units_after"]
    # QEMU's FDP statistics: no GC, only its padding of a reclaim unit left at a switch.
    assert one["cells"][0]["device"]["waf"] == pytest.approx(1.0, abs=0.01)
