"""Replaying cells: the geometry a cell's own device had, one cell or a system's repetitions
in order on one un-reformatted modelled device (each on a fresh one where the device was
FEMU's, whose device lives in its RAM), and the check of a trace against what the device
reported.

A cell's raw directory (``results/raw/<cell>/``) holds what this needs: ``plan.json`` (the
device profile: capacity, LBA size, reclaim unit size, handles), ``nvme-trace.txt.gz``,
``nvme-trace-stats.json`` (the namespace's ``MAJ,MIN``), the FDP statistics before and
after and the reclaim unit handle status after (``fdp-status-after.json``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from ..agent import fdp
from . import engine as e
from . import trace as tr
from .model import FEMU_OP, Counters, Device, Geometry, ModelError, policy

TRACE = "nvme-trace.txt.gz"
TRACE_STATS = "nvme-trace-stats.json"
PLAN = "plan.json"
STATS_BEFORE = "fdp-stats-before.json"
STATS_AFTER = "fdp-stats-after.json"
STATUS_AFTER = "fdp-status-after.json"
CONFIGS = "fdp-configs.json"


@dataclass(frozen=True)
class CellDevice:
    """What a cell's raw directory says about its device."""
    cell: str
    raw_dir: Path
    capacity_bytes: int
    lba_bytes: int
    ru_bytes: int
    handles: int
    block_dev: str
    # The emulator the device was (qemu, femu): FEMU's device lives in its RAM, so each of
    # its cells started on a fresh device.
    emulator: str = "qemu"

    @staticmethod
    def load(raw_dir: str | Path) -> "CellDevice":
        raw = Path(raw_dir)
        if not (raw / TRACE).is_file():
            raise ModelError(f"{raw} has no {TRACE}: only vm cells record the device trace "
                             "(run the cell on the vm testbed)")
        try:
            plan = json.loads((raw / PLAN).read_text())
            dev = plan["vm"]["device"]
        except (OSError, KeyError, ValueError) as exc:
            raise ModelError(f"{raw / PLAN}: no vm device profile ({exc}); is {raw} a "
                             "complete vm cell?") from None
        block_dev = "259,0"
        if (raw / TRACE_STATS).is_file():
            block_dev = json.loads((raw / TRACE_STATS).read_text()).get("namespace_dev",
                                                                       block_dev)
        return CellDevice(cell=raw.name, raw_dir=raw,
                          capacity_bytes=int(dev["capacity_gib"]) << 30,
                          lba_bytes=int(dev["lba_size_bytes"]),
                          ru_bytes=int(dev["reclaim_unit_size_mib"]) << 20,
                          handles=int(dev["reclaim_unit_handles"]), block_dev=block_dev,
                          emulator=dev.get("emulator", "qemu"))

    def ops(self) -> tr.Ops:
        return tr.read(self.raw_dir / TRACE, self.lba_bytes, block_dev=self.block_dev)

    def geometry(self, op: float = FEMU_OP, placement: bool = True) -> Geometry:
        """The cell's own device as a model geometry (its capacity, RU size and handles)."""
        return Geometry(user_bytes=self.capacity_bytes, op=op, page_bytes=4096,
                        ru_bytes=self.ru_bytes, handles=self.handles, placement=placement)


def _stats(path: Path) -> dict | None:
    if not path.is_file():
        return None
    d = json.loads(path.read_text())
    return {k: int(d[k]) for k in ("hbmw", "mbmw", "mbe")}


def check_device(cell: CellDevice, ops: tr.Ops | None = None) -> dict:
    """Does the trace account for what the device reported? Host bytes written (FDP
    statistics, after - before) must equal the trace's write bytes exactly. When the trace
    holds every write the namespace received (statistics before = 0), QEMU's reclaim unit
    bookkeeping replayed from the trace must also give the device's media bytes written and
    each handle's remaining reclaim unit capacity (``nvme fdp status``) exactly."""
    ops = cell.ops() if ops is None else ops
    before, after = _stats(cell.raw_dir / STATS_BEFORE), _stats(cell.raw_dir / STATS_AFTER)
    out = {"cell": cell.cell, "trace_write_bytes": ops.write_lbas() * cell.lba_bytes}
    if before is None or after is None:
        out["host_bytes_ok"] = None
        out["why"] = "no FDP statistics in the cell (a device without FDP)"
        return out
    out["device_host_bytes"] = after["hbmw"] - before["hbmw"]
    out["host_bytes_ok"] = out["device_host_bytes"] == out["trace_write_bytes"]
    if cell.emulator == "femu":
        out["ru_usage_ok"] = None
        out["why"] = ("FEMU: its media bytes and reclaim units are its FTL's, with garbage "
                      "collection (the model's replay is compared with them)")
        return out
    runs = cell.ru_bytes // cell.lba_bytes
    writes = (ops.cmd == tr.CMD_WRITE) | (ops.cmd == tr.CMD_WRITE_ZEROES)
    handle = np.where((ops.dtype == 2) & (ops.dspec < cell.handles), ops.dspec, 0)
    ruamw = np.full(cell.handles, runs, dtype=np.int64)
    acc = np.zeros(3, dtype=np.int64)
    e.qemu_ru_accounting(writes, ops.nlb, handle.astype(np.int64), runs, ruamw, acc)
    out["model_media_bytes"] = int(acc[1]) * cell.lba_bytes
    out["model_ru_switches"] = int(acc[2])
    out["model_ruamw_lbas"] = ruamw.tolist()
    if before["hbmw"] != 0:
        out["ru_usage_ok"] = None
        out["why"] = (f"the trace started after the namespace's first write (host bytes "
                      f"written {before['hbmw']} at its start): reclaim unit usage unknown")
        return out
    out["device_media_bytes"] = after["mbmw"]
    status_path = cell.raw_dir / STATUS_AFTER
    if not status_path.is_file():
        out["ru_usage_ok"] = None
        out["why"] = f"no {STATUS_AFTER} (a cell recorded before it existed)"
        return out
    status = json.loads(status_path.read_text())
    by_pid = {int(d["pid"]): int(d["ruamw"]) for d in status["ruhss"]}
    out["device_ruamw_lbas"] = [by_pid.get(h) for h in range(cell.handles)]
    out["ru_usage_ok"] = out["device_ruamw_lbas"] == out["model_ruamw_lbas"]
    # QEMU pads media bytes written at each unit switch by the unit's remainder, which
    # depends on the order in which it processed writes from different submission queues;
    # the trace orders commands by submission. Equal when that order is the trace's.
    out["media_bytes_diff"] = out["model_media_bytes"] - out["device_media_bytes"]
    out["media_bytes_exact"] = out["media_bytes_diff"] == 0
    return out


def replay_cells(raw_dirs: list[str | Path], model: str = "femu-fdp",
                 ops: list[tr.Ops] | None = None, fresh_per_cell: bool | None = None,
                 **overrides) -> dict:
    """Replay cells in the order given on one modelled device that is never reformatted
    (the repetitions of a system on one device, as the paper ran them): the first cell's
    own device, with :class:`Geometry` fields in ``overrides`` (``op``, ``placement``,
    ``ru_bytes``, ...) changed. ``fresh_per_cell``: each cell on a fresh device instead, as
    FEMU's cells ran (the default where every cell's device was FEMU's). Returns per cell
    and for the whole sequence: WAF, host and GC-copied bytes, erases, and each per handle,
    and per cell the device's own FDP statistics where it has them. ``ops``: the cells'
    traces, already read."""
    cells = [CellDevice.load(d) for d in raw_dirs]
    if not cells:
        raise ModelError("no cells to replay")
    if fresh_per_cell is None:
        fresh_per_cell = all(c.emulator == "femu" for c in cells)
    pol = policy(model)
    g = replace(cells[0].geometry(), **overrides)
    # A smaller modelled device than the namespace is allowed: the replay stops with an
    # error naming the first command beyond it.
    dev = Device(g, pol)
    rows, total = [], Counters()
    for i, c in enumerate(cells):
        if fresh_per_cell and i:
            dev = Device(g, pol)
        ops_i = c.ops() if ops is None else ops[i]
        cover = tr.deallocation_coverage(ops_i)
        counters = dev.replay(ops_i)
        total = total + counters
        row = {"cell": c.cell, **counters.as_dict(g.page_bytes),
               "free_units_after": dev.free_units(), "valid_pages_after": dev.valid_pages(),
               "deallocations": cover, "trace_stats": ops_i.stats,
               "device": _device_waf(c)}
        rows.append(row)
    return {
        "model": pol.name, "model_source": pol.source,
        "geometry": {"user_bytes": g.user_bytes, "op": g.op, "page_bytes": g.page_bytes,
                     "ru_bytes": g.ru_bytes, "handles": g.handles, "placement": g.placement,
                     "physical_units": g.physical_units, "pages_per_unit": g.pages_per_unit},
        "emulator": cells[0].emulator,
        "fresh_device_per_cell": fresh_per_cell,
        "cells": rows,
        "sequence": {**total.as_dict(g.page_bytes),
                     "drive_writes": total.host_pages / g.user_pages},
    }


def _device_waf(cell: CellDevice) -> dict | None:
    """The cell's device's own count (FDP statistics, after - before): host and media bytes
    written and their WAF; None without statistics."""
    before, after = cell.raw_dir / STATS_BEFORE, cell.raw_dir / STATS_AFTER
    if not (before.is_file() and after.is_file()):
        return None
    d = fdp.stats_delta(fdp.parse_stats(before.read_text(), str(before)),
                        fdp.parse_stats(after.read_text(), str(after)))
    return {"host_bytes": d["host_bytes_written"], "media_bytes": d["media_bytes_written"],
            "waf": d["waf"]}


# What-if values around a sequence's own device: reclaim unit sizes (x the cell's),
# over-provisioning (FEMU's is 1/3), handles.
SWEEP_RU_FACTORS = (0.25, 0.5, 1, 2, 4)
SWEEP_OP = (0.07, 0.15, 0.28, FEMU_OP, 0.5)
SWEEP_HANDLES = (1, 2, 4, 8)


def sweep(cells: list[CellDevice], ops: list[tr.Ops], model: str = "femu-fdp",
          base_results: dict | None = None, fresh_per_cell: bool = False) -> list[dict]:
    """The sequence's WAF when one parameter of its device changes at a time (reclaim unit
    size, over-provisioning, handles, and whether the device learns of deallocations),
    placement honoured and ignored. A value that makes no valid device (too few units for
    the handles) is kept with its error. ``base_results`` maps placement (True/False) to a
    :func:`replay_cells` result at the cells' own device, reused for the points that are
    that device. ``fresh_per_cell``: each cell on a fresh device (FEMU's cells)."""
    base = cells[0].geometry()
    base_results = base_results or {}
    points = []
    for placement in (True, False):
        variants = [("ru_bytes", [int(base.ru_bytes * f) for f in SWEEP_RU_FACTORS]),
                    ("op", list(SWEEP_OP)), ("deallocations", [1, 0])]
        if placement:  # ignored placement puts everything on one handle whatever their number
            variants.append(("handles", list(SWEEP_HANDLES)))
        for name, values in variants:
            for value in values:
                point = {"parameter": name, "value": value, "placement": placement}
                same = (name == "deallocations" and value == 1) or \
                    (name != "deallocations" and value == getattr(base, name))
                if same and placement in base_results:
                    q, g = base_results[placement]["sequence"], replace(base, placement=placement)
                    point.update(waf=q["waf"], host_pages=q["host_pages"],
                                 gc_pages=q["gc_pages"], erases=q["erases"],
                                 physical_units=g.physical_units,
                                 drive_writes=q["drive_writes"])
                    points.append(point)
                    continue
                try:
                    if name == "deallocations":
                        g = replace(base, placement=placement)
                        kwargs = {"deallocations": bool(value)}
                    else:
                        g = replace(base, placement=placement, **{name: value})
                        kwargs = {}
                    dev, c = Device(g, model, **kwargs), Counters()
                    for i, o in enumerate(ops):
                        if fresh_per_cell and i:
                            dev = Device(g, model, **kwargs)
                        c = c + dev.replay(o)
                except ModelError as exc:
                    point["error"] = str(exc)
                    points.append(point)
                    continue
                point.update(waf=c.waf, host_pages=c.host_pages, gc_pages=c.gc_pages,
                             erases=c.erases, physical_units=g.physical_units,
                             drive_writes=c.host_pages / g.user_pages)
                points.append(point)
    return points


def replay_sequence(raw_dirs: list[str | Path], model: str = "femu-fdp",
                    with_sweep: bool = True) -> dict:
    """What the pipeline records per sequence: the replay at the cells' own geometry with
    placement honoured, the same with placement ignored (every write on one handle: what
    the device would do without FDP), each cell's trace checked against the device, and
    the what-if sweep over the device's parameters."""
    cells = [CellDevice.load(d) for d in raw_dirs]
    ops = [c.ops() for c in cells]
    out = replay_cells(raw_dirs, model, ops=ops)
    out["placement_ignored"] = replay_cells(raw_dirs, model, ops=ops, placement=False)
    out["device_checks"] = [check_device(c, o) for c, o in zip(cells, ops)]
    out["sweep"] = sweep(cells, ops, model, {True: out, False: out["placement_ignored"]},
                         out["fresh_device_per_cell"]) if with_sweep else []
    return out


def render(result: dict) -> str:
    """The replay as a short text table: a row per cell, then the sequence."""
    g = result["geometry"]
    lines = [f"model {result['model']} ({result['model_source']})",
             f"device: {g['user_bytes'] / 2**30:.2f} GiB user, over-provisioning "
             f"{g['op']:.3f}, {g['physical_units']} reclaim units of {g['ru_bytes'] >> 20} MiB, "
             f"{g['handles']} handles, placement {'honoured' if g['placement'] else 'ignored'}",
             f"{'cell':<48} {'host GiB':>9} {'GC GiB':>8} {'WAF':>6} {'device':>6} "
             f"{'erases':>6} {'dealloc GiB':>11}  GC pages per handle"]
    if result.get("fresh_device_per_cell"):
        lines.insert(2, "each cell on a fresh device (its emulator's, "
                     f"{result.get('emulator')}, lives in RAM)")
    for r in result["cells"]:
        waf = "n/a" if r["waf"] is None else f"{r['waf']:.3f}"
        device = (r.get("device") or {}).get("waf")
        device = "n/a" if device is None else f"{device:.3f}"
        lines.append(f"{r['cell']:<48} {r['host_bytes'] / 2**30:>9.3f} "
                     f"{r['gc_pages'] * g['page_bytes'] / 2**30:>8.3f} {waf:>6} {device:>6} "
                     f"{r['erases']:>6} {r['dealloc_pages'] * g['page_bytes'] / 2**30:>11.3f}  "
                     f"{r['gc_pages_per_handle']}")
        if not r["deallocations"]["ranges_known"]:
            lines.append(f"  (its {r['deallocations']['dsm_commands']} DSM commands carry no "
                         "ranges in this trace: deallocations not replayed)")
    s = result["sequence"]
    waf = "n/a" if s["waf"] is None else f"{s['waf']:.3f}"
    lines.append(f"{'sequence':<48} {s['host_bytes'] / 2**30:>9.3f} "
                 f"{s['gc_pages'] * g['page_bytes'] / 2**30:>8.3f} {waf:>6} {'':>6} "
                 f"{s['erases']:>6} "
                 f"{s['dealloc_pages'] * g['page_bytes'] / 2**30:>11.3f}  "
                 f"({s['drive_writes']:.2f} drive writes)")
    return "\n".join(lines)
