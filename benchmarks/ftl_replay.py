"""How fast the FTL model replays, in page writes per second on one core (the target: at
least 20 million, so that the paper profile's largest trace replays in seconds).

Run: .venv/bin/python benchmarks/ftl_replay.py [--gib N]

It replays, on the paper's device geometry (FEMU FDP FTL, 180 GB, 1 GiB reclaim units, 8
handles), a synthetic trace shaped like a SlimIO repetition at the paper's scale: a WAL ring
written in 256 KiB commands on handle 1 and snapshots of 1 MiB commands on handle 2, until
the device has been written N GiB (default 360, two drive writes); the same streams with
placement ignored (everything on one handle: GC copies); and the same bytes as 4 KiB random
overwrites on one handle (GC-heavy, and bound by random memory access: each write touches
two random places of 420 MiB of mapping tables). It prints the rate of each, and
the resident memory against the device's page count. Numbers, not assertions: these
machines are shared, so the rate is printed, never timed in a test.
"""

from __future__ import annotations

import argparse
import resource
import time
from dataclasses import replace

import numpy as np

from slimio_repro.ftl import Device, Ops, paper_geometry
from slimio_repro.ftl import trace as tr


def synthetic(g, total_pages: int, seed: int = 7) -> Ops:
    wal_pages = g.user_pages // 2          # a WAL region of half the device
    snap_pages = g.user_pages // 8         # snapshot slots of 1/8 each, three of them
    rng = np.random.default_rng(seed)
    cmds = []
    wal_pos, written = 0, 0
    while written < total_pages:
        # 8 x 64 pages of WAL, then a burst of one snapshot slot every so often
        for _ in range(8):
            cmds.append((wal_pos, 64, 1))
            wal_pos = (wal_pos + 64) % wal_pages
            written += 64
        if rng.random() < 0.02:
            slot = int(rng.integers(0, 3))
            base = wal_pages + slot * snap_pages
            for off in range(0, snap_pages // 4, 256):
                cmds.append((base + off, 256, 2))
                written += 256
    a = np.array(cmds, dtype=np.int64)
    n = len(a)
    return Ops(lba_bytes=4096, cmd=np.full(n, tr.CMD_WRITE, dtype=np.int8), slba=a[:, 0],
               nlb=a[:, 1], dtype=np.full(n, 2, dtype=np.int64), dspec=a[:, 2],
               deac=np.zeros(n, dtype=bool), line=np.arange(n, dtype=np.int64),
               source="synthetic")


def real(raw_dirs: list[str]) -> None:
    """Rates on real traces: parsing the text trace, and replaying it (each cell's trace
    replayed once to compile, then timed on a fresh device)."""
    from slimio_repro.ftl import CellDevice, Device as Dev
    cells = [CellDevice.load(d) for d in raw_dirs]
    t = time.perf_counter()
    ops = [c.ops() for c in cells]
    parse_s = time.perf_counter() - t
    lines = sum(len(o) for o in ops)
    for placement in (True, False):
        g = replace(cells[0].geometry(), placement=placement)
        Dev(g, "femu-fdp").replay(ops[0])  # compile
        dev = Dev(g, "femu-fdp")
        t = time.perf_counter()
        for o in ops:
            dev.replay(o)
        dt = time.perf_counter() - t
        c = dev.counters()
        print(f"real cells ({len(cells)}, placement {'honoured' if placement else 'ignored'}): "
              f"{c.host_pages:,} host + {c.gc_pages:,} GC pages (WAF {c.waf:.3f}) replayed in "
              f"{dt:.3f} s = {(c.host_pages + c.gc_pages) / dt / 1e6:.1f} M page writes/s")
    print(f"parsing their traces: {lines:,} commands in {parse_s:.2f} s "
          f"({lines / parse_s / 1e3:.0f} k commands/s)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gib", type=int, default=360)
    ap.add_argument("--cells", nargs="*", default=[], metavar="RAW_DIR",
                    help="also replay these real cells in order (their own geometry) and "
                    "print the parse and replay rates")
    args = ap.parse_args()
    if args.cells:
        real(args.cells)
    g = paper_geometry()
    pages = (args.gib << 30) // g.page_bytes
    ops = synthetic(g, pages)
    warm = Device(g, "femu-fdp")
    warm.replay(ops)  # compiles the engine (cached on disk afterwards)
    d = Device(g, "femu-fdp")
    t = time.perf_counter()
    c = d.replay(ops)
    dt = time.perf_counter() - t
    print(f"device: {g.user_bytes / 2**30:.0f} GiB user, {g.physical_units} reclaim units of "
          f"{g.ru_bytes >> 20} MiB, {g.handles} handles; {g.physical_units * g.pages_per_unit:,} "
          "physical pages")
    print(f"sequential streams: {c.host_pages:,} host pages, {c.gc_pages:,} GC pages "
          f"(WAF {c.waf:.3f}) in {dt:.2f} s = {(c.host_pages + c.gc_pages) / dt / 1e6:.1f} M "
          f"page writes/s ({c.host_pages / dt / 1e6:.1f} M host pages/s)")
    mixed = Device(replace(g, placement=False), "femu-fdp")
    t = time.perf_counter()
    cm = mixed.replay(ops)
    dtm = time.perf_counter() - t
    print(f"the same streams, placement ignored: {cm.host_pages:,} host pages, "
          f"{cm.gc_pages:,} GC pages (WAF {cm.waf:.3f}) in {dtm:.2f} s = "
          f"{(cm.host_pages + cm.gc_pages) / dtm / 1e6:.1f} M page writes/s")
    d2 = Device(g, "femu-fdp")
    t = time.perf_counter()
    c2 = d2.uniform_random(pages, seed=3)
    dt2 = time.perf_counter() - t
    print(f"uniform random 4 KiB: {c2.host_pages:,} host pages, {c2.gc_pages:,} GC pages "
          f"(WAF {c2.waf:.3f}) in {dt2:.2f} s = {(c2.host_pages + c2.gc_pages) / dt2 / 1e6:.1f} M "
          "page writes/s")
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    state = sum(a.nbytes for a in (d.l2p, d.p2l, d.vpc, d.state, d.owner, d.free_q))
    print(f"model state: {state / 2**20:.0f} MiB for {g.user_pages + g.physical_units * g.pages_per_unit:,} "
          f"mapped+physical pages ({state / (g.user_pages + g.physical_units * g.pages_per_unit):.2f} "
          f"B/page); peak RSS of this process {rss / 2**20:.0f} MiB (three devices)")


if __name__ == "__main__":
    main()
